"""Declarative automation: downstream assets follow raw_oai_xml of any window, old ones too."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg

from oai_pipeline.definitions import defs
from oai_pipeline.defs.partitions import TRIGGER_TAG, partition_key

DOWNSTREAM = ["transformed_records", "sync_decisions", "written_records"]
NOW = datetime(2024, 6, 30, 12, tzinfo=UTC)


def _materialize(instance: dg.DagsterInstance, asset: str, key: dg.MultiPartitionKey) -> None:
    instance.report_runless_asset_event(
        dg.AssetMaterialization(asset_key=asset, partition=str(key))
    )


def _evaluate(instance: dg.DagsterInstance, cursor=None):
    return dg.evaluate_automation_conditions(
        defs=defs,
        instance=instance,
        asset_selection=dg.AssetSelection.groups("oai_harvest"),
        evaluation_time=NOW,
        cursor=cursor,
    )


def test_downstream_follows_an_old_window(instance: dg.DagsterInstance) -> None:
    instance.add_dynamic_partitions("harvester", ["alpha", "beta"])
    old = partition_key("alpha", "2024-01-05")  # months before the latest window
    first = _evaluate(instance)
    assert first.total_requested == 0  # nothing upstream yet

    _materialize(instance, "raw_oai_xml", old)
    result = _evaluate(instance, first.cursor)

    for asset in DOWNSTREAM:
        assert result.get_requested_partitions(dg.AssetKey(asset)) == {str(old)}, asset
    assert result.total_requested == len(DOWNSTREAM)  # that window only, no other

    # once downstream caught up, nothing more is requested
    for asset in DOWNSTREAM:
        _materialize(instance, asset, old)
    settled = _evaluate(instance, result.cursor)
    assert settled.total_requested == 0


def test_automation_sensor_runs_by_default_over_the_harvest_group() -> None:
    sensor = defs.resolve_sensor_def("harvest_automation")
    assert isinstance(sensor, dg.AutomationConditionSensorDefinition)
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    # its runs say what asked for them, as the schedules' do (the Runs page filters by it)
    assert sensor.run_tags == {TRIGGER_TAG: "automation"}
    graph = defs.resolve_asset_graph()
    for asset in DOWNSTREAM:
        condition = graph.get(dg.AssetKey(asset)).automation_condition
        assert condition is not None
        # eager, but not limited to the latest time window
        assert "in_latest_time_window" not in str(condition.get_label() or condition)
