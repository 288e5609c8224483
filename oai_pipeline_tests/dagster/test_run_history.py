"""Dagster runs of a harvester go once superseded: their partitions stay materialised."""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from dagster._core.definitions.events import (
    AssetMaterializationFailure,
    AssetMaterializationFailureReason,
    AssetMaterializationFailureType,
)
from dagster._core.events import (
    AssetFailedToMaterializeData,
    AssetMaterializationPlannedData,
    StepMaterializationData,
)
from dagster._core.events.log import EventLogEntry

from oai_pipeline.cli import main
from oai_pipeline.defs import run_history
from oai_pipeline.defs.assets import harvest_assets
from oai_pipeline.defs.checks import harvest_checks
from oai_pipeline.defs.launch import materialize_windows, range_tags
from oai_pipeline.defs.partitions import HARVESTER_TAG, partition_key
from oai_pipeline.defs.prune_runs import prune_run_history_job, prune_run_history_schedule
from oai_pipeline.defs.resources import HarvestOptions, PipelineResource
from oai_pipeline.defs.run_history import prune_run_history
from oai_pipeline.pipeline.frames import STAGE_ASSETS, WRITTEN_RECORDS
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings, ensure_dagster_home
from oai_pipeline_tests.dagster.conftest import window_range
from oai_pipeline_tests.dagster_results import run_totals
from oai_pipeline_tests.support import register

LATER = datetime.now(UTC) + timedelta(days=3)
ASSET_PLANNED = dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED
ASSET_FAILED = dg.DagsterEventType.ASSET_FAILED_TO_MATERIALIZE
ASSET_MATERIALISED = dg.DagsterEventType.ASSET_MATERIALIZATION


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


def test_a_harvest_step_does_no_pruning(
    instance: dg.DagsterInstance,
    settings: Settings,
    endpoint: OAIEndpoint,
    records,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before, written_records pruned every harvester's runs once a day: at 300 hourly
    harvesters ~7,200 runs, minutes of one harvest's step and its harvester's slot."""
    register(settings, endpoint.base_url)
    first, last = window_range(records)
    runs = [materialize_windows(instance, "sample", first, last).run_id for _ in range(2)]
    _three_days_on(monkeypatch)
    monkeypatch.setenv("OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS", "1")
    latest = materialize_windows(instance, "sample", first, last)
    assert "dagster_runs_pruned" not in run_totals(latest, WRITTEN_RECORDS)
    assert all(instance.get_run_by_id(run) is not None for run in runs)


def _latest_runs_by_partition(instance: dg.DagsterInstance) -> dict[str, str]:
    """What the UI shows of each partition of written_records: the run of its latest
    materialisation."""
    asset_key = dg.AssetKey(WRITTEN_RECORDS)
    return {
        partition: record.run_id
        for partition in _materialised(instance)
        if (
            record := instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=[partition]), limit=1
            ).records[0]
        )
    }


def _prune_job(instance: dg.DagsterInstance, max_runs: int) -> dg.ExecuteInProcessResult:
    return prune_run_history_job.execute_in_process(
        instance=instance,
        resources={"pipeline": PipelineResource()},
        run_config={"ops": {"delete_superseded_runs": {"config": {"max_runs": max_runs}}}},
    )


def test_the_prune_job_deletes_superseded_runs_in_bounded_steps_and_keeps_the_latest(
    instance: dg.DagsterInstance,
    settings: Settings,
    endpoint: OAIEndpoint,
    records,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    register(settings, endpoint.base_url)
    first, last = window_range(records)
    runs = [materialize_windows(instance, "sample", first, last).run_id for _ in range(3)]
    shown = _latest_runs_by_partition(instance)
    assert set(shown.values()) == {runs[2]}
    _three_days_on(monkeypatch)
    monkeypatch.setenv("OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS", "1")

    # Stopped at max_runs, and says so; the next prune goes on with the rest.
    first_prune = _prune_job(instance, max_runs=1)
    assert first_prune.output_for_node("delete_superseded_runs") == {"sample": 1}
    output = next(e for e in first_prune.all_node_events if e.is_successful_output)
    assert output.step_output_data.metadata["more_left"].value is True
    assert [instance.get_run_by_id(r) is None for r in runs].count(True) == 1
    second = _prune_job(instance, max_runs=10)
    assert second.output_for_node("delete_superseded_runs") == {"sample": 1}
    assert [instance.get_run_by_id(r) is None for r in runs] == [True, True, False]
    # Each window still shows the latest run's materialisation: nothing else changed.
    assert _latest_runs_by_partition(instance) == shown
    assert _prune_job(instance, max_runs=10).output_for_node("delete_superseded_runs") == {}


def test_the_prune_schedule_skips_while_a_prune_runs_or_runs_are_kept_for_good(
    persistent_instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    def tick() -> dg.RunRequest | dg.SkipReason:
        context = dg.build_schedule_context(
            instance=persistent_instance, resources={"pipeline": PipelineResource()}
        )
        return prune_run_history_schedule(context)  # type: ignore[return-value]

    assert isinstance(tick(), dg.RunRequest)
    monkeypatch.setenv("OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS", "0")
    assert "kept for good" in str(tick())
    monkeypatch.setenv("OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS", "1")
    persistent_instance.add_run(
        dg.DagsterRun(job_name=prune_run_history_job.name, status=dg.DagsterRunStatus.STARTED)
    )
    assert "still queued or going" in str(tick())


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
    assert json.loads(result.stdout)["dagster_job_runs_deleted"] == {}  # none of theirs old
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


def _add_runs(instance: dg.DagsterInstance, job: str, *statuses: dg.DagsterRunStatus) -> list[str]:
    return [instance.add_run(dg.DagsterRun(job_name=job, status=s)).run_id for s in statuses]


def test_old_runs_of_the_other_jobs_go_but_the_latest_of_each_and_its_latest_failure(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prune's own runs (one a day), the weekly reconciles, registrations: before, none
    ever went."""
    monkeypatch.setattr(run_history, "KEEP_LAST_RUNS_PER_JOB", 2)
    ok, failed = dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE
    reconciles = _add_runs(instance, "reconcile_sources", failed, ok, failed, ok, ok)
    prunes = _add_runs(instance, "prune_run_history", ok, ok, ok)
    someone_elses = _add_runs(instance, "someone_elses_job", ok, ok, ok)
    jobs = ["reconcile_sources", "prune_run_history"]

    # Too recent, or when pruning named harvesters only: kept.
    assert prune_run_history(instance, 1, set(), jobs=jobs).total == 0
    named = prune_run_history(instance, 1, set(), harvester_ids=["sample"], jobs=jobs, now=LATER)
    assert named.total == 0

    pruned = prune_run_history(instance, 1, set(), jobs=jobs, now=LATER)
    # The latest two of each job stay, and the latest failure however old; not another's.
    assert {job: sorted(runs) for job, runs in pruned.deleted_by_job.items()} == {
        "reconcile_sources": sorted(reconciles[:2]),
        "prune_run_history": [prunes[0]],
    }
    assert pruned.deleted == {} and pruned.kept == 5
    gone = {run for runs in pruned.deleted_by_job.values() for run in runs}
    for run in reconciles + prunes + someone_elses:
        assert (instance.get_run_by_id(run) is None) == (run in gone)
    assert prune_run_history(instance, 1, set(), jobs=jobs, now=LATER).total == 0


def test_the_prune_job_deletes_old_runs_of_its_own(
    instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_history, "KEEP_LAST_RUNS_PER_JOB", 1)
    monkeypatch.setenv("OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS", "1")
    first, second = (_prune_job(instance, max_runs=10).run_id for _ in range(2))
    _three_days_on(monkeypatch)
    third = _prune_job(instance, max_runs=10)
    output = next(e for e in third.all_node_events if e.is_successful_output)
    assert output.step_output_data.metadata["deleted_by_job"].value == {"prune_run_history": 1}
    # The latest finished one stays (the one going is not finished).
    assert instance.get_run_by_id(first) is None
    assert instance.get_run_by_id(second) is not None


def _run_of_window(
    instance: dg.DagsterInstance, harvester: str, window: str, *, failed: bool = True
) -> str:
    """A harvest run of one window: planned, then failed to materialise (or materialised)."""
    status = dg.DagsterRunStatus.FAILURE if failed else dg.DagsterRunStatus.SUCCESS
    run_id = instance.add_run(
        dg.DagsterRun(job_name="harvest", status=status, tags={HARVESTER_TAG: harvester})
    ).run_id
    key = str(partition_key(harvester, window))
    for asset in STAGE_ASSETS:
        asset_key = dg.AssetKey(asset)
        failure = AssetMaterializationFailure(
            asset_key,
            partition=key,
            failure_type=AssetMaterializationFailureType.FAILED,
            reason=AssetMaterializationFailureReason.FAILED_TO_MATERIALIZE,
        )
        for event_type, data in (
            (ASSET_PLANNED, AssetMaterializationPlannedData(asset_key, key)),
            (ASSET_FAILED, AssetFailedToMaterializeData(failure))
            if failed
            else (
                ASSET_MATERIALISED,
                StepMaterializationData(dg.AssetMaterialization(asset, partition=key)),
            ),
        ):
            instance.event_log_storage.store_event(
                EventLogEntry(
                    error_info=None,
                    level=logging.INFO,
                    user_message="",
                    run_id=run_id,
                    timestamp=datetime.now(UTC).timestamp(),
                    dagster_event=dg.DagsterEvent(
                        event_type.value, job_name="harvest", event_specific_data=data
                    ),
                )
            )
    return run_id


def test_failures_kept_cost_no_queries_each(instance: dg.DagsterInstance) -> None:
    """Whether a failed run was superseded was asked run by run (~9 queries each): 500
    failures kept took ~10 s of every prune. They are asked a batch at a time."""

    def queries_of_a_prune() -> int:
        statements: list[str] = []
        on_statement = lambda *args: statements.append(args[2])  # noqa: E731
        sa.event.listen(sa.Engine, "before_cursor_execute", on_statement)
        try:
            pruned = prune_run_history(instance, 1, {"sample"}, now=LATER)
        finally:
            sa.event.remove(sa.Engine, "before_cursor_execute", on_statement)
        assert pruned.total == 0  # failures not harvested again: all kept
        return len(statements)

    instance.add_dynamic_partitions("harvester", ["sample"])
    failed = [_run_of_window(instance, "sample", f"2024-01-{day:02d}") for day in range(1, 3)]
    with_two = queries_of_a_prune()
    failed += [_run_of_window(instance, "sample", f"2024-01-{day:02d}") for day in range(3, 9)]
    assert queries_of_a_prune() == with_two
    # Each failure still goes once its window was harvested again, and only then.
    again = _run_of_window(instance, "sample", "2024-01-02", failed=False)
    pruned = prune_run_history(instance, 1, {"sample"}, now=LATER)
    assert pruned.deleted == {"sample": [failed[1]]} and pruned.kept == len(failed)
    assert instance.get_run_by_id(again) is not None
