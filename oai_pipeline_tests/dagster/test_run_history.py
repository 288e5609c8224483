"""Dagster runs of a harvester go once superseded: their partitions stay materialised."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest
from click.testing import CliRunner

from oai_pipeline.cli import main
from oai_pipeline.defs import run_history
from oai_pipeline.defs.assets import harvest_assets
from oai_pipeline.defs.checks import harvest_checks
from oai_pipeline.defs.launch import materialize_windows, range_tags
from oai_pipeline.defs.partitions import HARVESTER_TAG
from oai_pipeline.defs.resources import HarvestOptions, PipelineResource
from oai_pipeline.defs.run_history import prune_run_history
from oai_pipeline.pipeline.frames import WRITTEN_RECORDS
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings, ensure_dagster_home
from oai_pipeline_tests.dagster.conftest import window_range
from oai_pipeline_tests.dagster_results import run_totals
from oai_pipeline_tests.support import register

LATER = datetime.now(UTC) + timedelta(days=3)


class _Later(datetime):
    @classmethod
    def now(cls, tz=None):
        return LATER


def _three_days_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_history, "datetime", _Later)


def _materialised(instance: dg.DagsterInstance) -> set[str]:
    return set(instance.get_materialized_partitions(dg.AssetKey(WRITTEN_RECORDS)))


def test_a_run_goes_once_each_of_its_partitions_was_materialised_again(
    persistent_instance: dg.DagsterInstance, settings: Settings, endpoint: OAIEndpoint, records
) -> None:
    instance = persistent_instance
    register(settings, endpoint.base_url)
    first, last = window_range(records)
    full = materialize_windows(instance, "sample", first, last).run_id
    harvested = _materialised(instance)
    assert len(harvested) == 10  # a window a day of the ten days the records span

    # The only run of its partitions: kept, however old.
    assert prune_run_history(instance, 1, {"sample"}, now=LATER).deleted == {}
    # Too recent: kept, superseded or not.
    again = materialize_windows(instance, "sample", first, last).run_id
    assert prune_run_history(instance, 1, {"sample"}).deleted == {}

    pruned = prune_run_history(instance, 1, {"sample"}, now=LATER)
    assert pruned.deleted == {"sample": [full]} and pruned.kept == 1
    assert instance.get_run_by_id(full) is None
    assert instance.get_run_by_id(again) is not None
    # What the UI shows of the partitions is the later run's, and all of them still are.
    assert _materialised(instance) == harvested

    # A failed run of one window is the latest word on it: kept with the run it failed after.
    register(settings, endpoint.base_url, metadata_prefix="no_such_format")
    failed = materialize_windows(instance, "sample", first, first, raise_on_error=False)
    assert not failed.success
    assert prune_run_history(instance, 1, {"sample"}, now=LATER).deleted == {}
    # Once that window is harvested again, the failure is history.
    register(settings, endpoint.base_url)
    materialize_windows(instance, "sample", first, first)
    pruned = prune_run_history(instance, 1, {"sample"}, now=LATER)
    assert pruned.deleted == {"sample": [failed.run_id]}
    assert _materialised(instance) == harvested


def test_runs_of_a_deleted_harvester_go_and_nothing_goes_when_kept_for_good(
    instance: dg.DagsterInstance, settings: Settings, endpoint: OAIEndpoint, records
) -> None:
    register(settings, endpoint.base_url)
    first, last = window_range(records)
    run = materialize_windows(instance, "sample", first, last).run_id
    # A backfill's run from the UI: its harvester is known from its range alone.
    range_only = {k: v for k, v in range_tags("sample", first, last).items() if k != HARVESTER_TAG}
    backfill = dg.materialize(
        [*harvest_assets, *harvest_checks],
        instance=instance,
        resources={"pipeline": PipelineResource(), "harvest_options": HarvestOptions()},
        tags=range_only,
    ).run_id
    assert prune_run_history(instance, 0, set(), now=LATER).deleted == {}
    pruned = prune_run_history(instance, 1, set(), now=LATER)
    assert sorted(pruned.deleted["sample"]) == sorted([run, backfill])


def test_a_harvest_deletes_its_harvesters_superseded_runs(
    instance: dg.DagsterInstance,
    settings: Settings,
    endpoint: OAIEndpoint,
    records,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before, every run stayed for good: ~0.35 MB each, ~3 GB a year of hourly runs."""
    register(settings, endpoint.base_url)
    first, last = window_range(records)
    runs = [materialize_windows(instance, "sample", first, last).run_id for _ in range(2)]
    _three_days_on(monkeypatch)
    monkeypatch.setenv("OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS", "1")
    latest = materialize_windows(instance, "sample", first, last)
    # The second run still wrote the latest written_records while the third ran.
    assert run_totals(latest, WRITTEN_RECORDS)["dagster_runs_pruned"].value == 1
    assert instance.get_run_by_id(runs[0]) is None
    assert instance.get_run_by_id(runs[1]) is not None
    # Once a day: the next harvest leaves the second run, superseded now, for tomorrow.
    again = materialize_windows(instance, "sample", first, last)
    assert run_totals(again, WRITTEN_RECORDS)["dagster_runs_pruned"].value == 0
    assert instance.get_run_by_id(runs[1]) is not None


def test_prune_deletes_them_too_and_those_of_harvesters_no_longer_registered(
    settings: Settings,
    endpoint: OAIEndpoint,
    records,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path,
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "prune_home"))
    ensure_dagster_home()
    register(settings, endpoint.base_url)
    first, last = window_range(records)

    @dg.asset
    def gone_harvesters_asset() -> None:
        """Stands for a run of a harvester deleted since."""

    with dg.DagsterInstance.get() as instance:
        runs = [materialize_windows(instance, "sample", first, last).run_id for _ in range(2)]
        gone = dg.materialize(
            [gone_harvesters_asset], instance=instance, tags={HARVESTER_TAG: "gone"}
        ).run_id
        files = {r: instance.event_log_storage.path_for_shard(r) for r in [*runs, gone]}
    assert all(os.path.isfile(f) for f in files.values())
    _three_days_on(monkeypatch)
    result = CliRunner().invoke(main, ["prune", "--keep-days", "1", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["dagster_runs_deleted"] == {"sample": 1, "gone": 1}
    named = CliRunner().invoke(main, ["prune", "sample", "--keep-days", "1"])
    assert "Dagster: 0 superseded runs deleted" in named.stdout.splitlines()
    with dg.DagsterInstance.get() as instance:
        assert [instance.get_run_by_id(r) is None for r in [*runs, gone]] == [True, False, True]
    # The shipped event log storage deletes a deleted run's own file (Dagster's keeps it).
    assert [os.path.exists(files[r]) for r in [*runs, gone]] == [False, True, False]
    # Without a Dagster instance there is nothing of Dagster's to prune: said as null.
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "never_made"))
    alone = CliRunner().invoke(main, ["prune", "--keep-days", "1", "--json"])
    assert json.loads(alone.stdout)["dagster_runs_deleted"] is None
