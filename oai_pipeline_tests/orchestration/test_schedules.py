"""Schedule ticks on a test instance: what each harvester gets requested, and why."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest
import sqlalchemy as sa
from dagster._core.definitions.schedule_definition import ScheduleExecutionData

from oai_pipeline.definitions import defs
from oai_pipeline.defs import schedules
from oai_pipeline.defs.launch import (
    HARVESTER_TAG,
    RANGE_END_TAG,
    RANGE_START_TAG,
    SOURCE_TAG,
    range_tags,
)
from oai_pipeline.defs.partitions import ensure_harvester_partitions
from oai_pipeline.defs.schedules import STUCK_AFTER, TRIGGER_TAG, busy_harvesters
from oai_pipeline.oai.types import IdentifyInfo
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline.state.store import StateStore
from oai_pipeline_tests.orchestration.state_setup import add_finished_run, add_harvester

TICK = datetime(2024, 3, 10, 12, 20, tzinfo=UTC)


def _tick(name: str, instance: dg.DagsterInstance, when: datetime = TICK) -> ScheduleExecutionData:
    schedule = defs.resolve_schedule_def(name)
    context = dg.build_schedule_context(
        instance=instance, scheduled_execution_time=when, resources=defs.resources
    )
    return schedule.evaluate_tick(context)


def _by_harvester(run_requests: list[dg.RunRequest]) -> dict[str, dg.RunRequest]:
    by_harvester = {request.tags[HARVESTER_TAG]: request for request in run_requests}
    assert len(by_harvester) == len(run_requests), "one request per harvester"
    return by_harvester


def _windows(request: dg.RunRequest) -> tuple[str, str]:
    harvester = request.tags[HARVESTER_TAG]
    start, end = request.tags[RANGE_START_TAG], request.tags[RANGE_END_TAG]
    assert start.startswith(f"{harvester}|") and end.startswith(f"{harvester}|")
    return start.split("|")[1], end.split("|")[1]


@pytest.fixture
def instance(persistent_instance: dg.DagsterInstance) -> dg.DagsterInstance:
    """On disk: a schedule context loads the instance again from its folder."""
    return persistent_instance


@pytest.fixture
def registry(settings: Settings) -> Settings:
    """Four harvesters: never harvested, up to date, down for a week, disabled."""
    add_harvester(settings, "fresh")
    add_harvester(settings, "current")
    add_finished_run(settings, "current", "2024-03-10T08:00:00Z")
    add_harvester(settings, "down")
    add_finished_run(settings, "down", "2024-03-02T23:00:00Z")
    # a later failed run does not count: the next harvest starts at the last success
    add_finished_run(settings, "down", "2024-03-09T10:00:00Z", status="failed")
    add_harvester(settings, "off", enabled=False)
    add_finished_run(settings, "off", "2024-01-15T00:00:00Z")
    return settings


def test_incremental_schedule_requests_each_enabled_harvester_since_its_last_success(
    instance: dg.DagsterInstance, registry: Settings
) -> None:
    data = _tick("incremental_harvest_schedule", instance)

    requests = _by_harvester(data.run_requests)
    assert set(requests) == {"fresh", "current", "down"}  # the disabled one is skipped
    # never harvested: the whole grid up to the window holding the tick (today refreshed)
    assert _windows(requests["fresh"]) == ("2024-01-01", "2024-03-10")
    # last responseDate 08:00 minus the 2 h overlap stays on the same day
    assert _windows(requests["current"]) == ("2024-03-10", "2024-03-10")
    # down for a week: one range run catches up from the last success minus the overlap
    assert _windows(requests["down"]) == ("2024-03-02", "2024-03-10")
    for harvester_id, request in requests.items():
        assert request.job_name == "harvest"
        assert request.tags[TRIGGER_TAG] == "incremental"
        # its server, so that runs of one server queue one after the other
        assert request.tags[SOURCE_TAG] == f"{harvester_id}.example.org"
    # run keys are unique per tick, so the next tick requests again
    later = _tick("incremental_harvest_schedule", instance, TICK.replace(hour=13))
    assert {r.run_key for r in data.run_requests}.isdisjoint(r.run_key for r in later.run_requests)


def test_only_a_complete_sweep_sets_the_incremental_start(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    """Runs that succeed without listing everything up to their responseDate do not count."""
    add_harvester(settings, "busy")
    add_finished_run(settings, "busy", "2024-03-04T12:00:00Z", window_until="2024-03-04T23:59:59Z")
    # later: a re-harvest of January, a capped smoke run, a run of selected identifiers
    add_finished_run(settings, "busy", "2024-03-09T12:00:00Z", window_until="2024-01-31T23:59:59Z")
    add_finished_run(settings, "busy", "2024-03-09T13:00:00Z", cap_reached=True)
    add_finished_run(settings, "busy", "2024-03-09T14:00:00Z", identifiers=["oai:x:1"])
    add_harvester(settings, "daily")  # a day-granularity source: until is a whole day
    add_finished_run(settings, "daily", "2024-03-08T12:00:00Z", window_until="2024-03-08")

    requests = _by_harvester(_tick("incremental_harvest_schedule", instance).run_requests)

    assert _windows(requests["busy"]) == ("2024-03-04", "2024-03-10")
    assert _windows(requests["daily"]) == ("2024-03-08", "2024-03-10")


def test_a_harvester_with_a_run_in_progress_is_not_requested_again(
    instance: dg.DagsterInstance, registry: Settings
) -> None:
    """An hourly tick does not pile runs up behind a harvest that is still going."""
    running = instance.create_run_for_job(
        dg.GraphDefinition("noop").to_job(),
        tags=range_tags("down", "2024-03-02", "2024-03-10"),
        status=dg.DagsterRunStatus.STARTED,
    )
    assert running.status == dg.DagsterRunStatus.STARTED

    requests = _by_harvester(_tick("incremental_harvest_schedule", instance).run_requests)

    assert set(requests) == {"fresh", "current"}
    instance.report_run_failed(running)
    requests = _by_harvester(_tick("incremental_harvest_schedule", instance).run_requests)
    assert set(requests) == {"fresh", "current", "down"}


def test_a_run_stuck_before_it_started_does_not_keep_its_harvester_out(
    instance: dg.DagsterInstance, registry: Settings
) -> None:
    """A run stored but never launched (e.g. its partition was missing then) stays
    NOT_STARTED for ever: after a while it no longer counts as in progress."""
    instance.create_run_for_job(
        dg.GraphDefinition("noop").to_job(),
        tags=range_tags("down", "2024-03-02", "2024-03-10"),
        status=dg.DagsterRunStatus.NOT_STARTED,
    )
    assert busy_harvesters(instance) == {"down"}  # just created: it may yet start
    later = datetime.now(UTC) + STUCK_AFTER + timedelta(minutes=1)
    assert busy_harvesters(instance, later) == set()


def test_runs_launched_from_the_ui_keep_their_harvesters_out(
    instance: dg.DagsterInstance, registry: Settings
) -> None:
    """An asset backfill or a single partition launched in the UI carries no harvester tag,
    only its partitions: its harvesters are busy all the same."""
    ensure_harvester_partitions(instance, ["current", "down", "fresh", "off"])
    job = dg.GraphDefinition("noop").to_job()
    backfill = {  # a 2-D range from `current` to `fresh`: `down` lies between them
        "dagster/asset_partition_range_start": "current|2024-03-01",
        "dagster/asset_partition_range_end": "fresh|2024-03-10",
    }
    instance.create_run_for_job(job, tags=backfill, status=dg.DagsterRunStatus.STARTED)
    assert busy_harvesters(instance) == {"current", "down", "fresh"}
    single = {"dagster/partition": "off|2024-03-01", "dagster/partition/harvester": "off"}
    instance.create_run_for_job(job, tags=single, status=dg.DagsterRunStatus.STARTED)
    assert busy_harvesters(instance) == {"current", "down", "fresh", "off"}


def test_a_tick_adds_the_partitions_of_the_harvesters_it_requests(
    instance: dg.DagsterInstance, registry: Settings
) -> None:
    """Registered a moment ago, before the registry sensor ran: the run can still start."""
    assert instance.get_dynamic_partitions("harvester") == []
    requested = set(_by_harvester(_tick("incremental_harvest_schedule", instance).run_requests))
    assert set(instance.get_dynamic_partitions("harvester")) == requested
    requested = set(_by_harvester(_tick("run_all_harvesters_schedule", instance).run_requests))
    assert set(instance.get_dynamic_partitions("harvester")) >= requested


def test_incremental_overlap_crosses_midnight(
    instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_harvester(settings, "late")
    add_finished_run(settings, "late", "2024-03-10T05:00:00Z")
    monkeypatch.setenv("OAI_PIPELINE_INCREMENTAL_OVERLAP_HOURS", "6")

    (request,) = _tick("incremental_harvest_schedule", instance).run_requests

    assert _windows(request) == ("2024-03-09", "2024-03-10")  # sources index late


@pytest.mark.parametrize("hours", ["abc", "-1", "nan", "1e6"])
def test_a_mistyped_overlap_fails_the_tick_saying_so(
    instance: dg.DagsterInstance,
    registry: Settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    hours: str,
) -> None:
    monkeypatch.setenv("OAI_PIPELINE_INCREMENTAL_OVERLAP_HOURS", hours)

    with pytest.raises(dg.DagsterUserCodeExecutionError) as failed:
        _tick("incremental_harvest_schedule", instance)
    # the tick's error (the UI shows it under Dagster's own line) names the setting
    assert "OAI_PIPELINE_INCREMENTAL_OVERLAP_HOURS must be a number" in str(failed.value.__cause__)
    assert "no run requested for harvester" not in caplog.text


def test_incremental_schedule_skips_without_enabled_harvesters(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    add_harvester(settings, "off", enabled=False)

    data = _tick("incremental_harvest_schedule", instance)

    assert data.run_requests == []
    assert data.skip_message == "no enabled harvester is registered"


def test_run_all_harvesters_schedule_requests_a_full_harvest_of_each(
    instance: dg.DagsterInstance, registry: Settings
) -> None:
    data = _tick("run_all_harvesters_schedule", instance)

    requests = _by_harvester(data.run_requests)
    assert set(requests) == {"fresh", "current", "down"}
    for request in requests.values():
        assert request.job_name == "run_all_harvesters"
        assert request.tags[TRIGGER_TAG] == "full"
        assert _windows(request) == ("2024-01-01", "2024-03-10")  # the whole grid, one sweep


def test_a_full_harvest_still_going_is_not_asked_for_again(
    instance: dg.DagsterInstance, registry: Settings
) -> None:
    """Before, a source slower than a week got a full run queued behind its last every
    week; an incremental run going keeps no full harvest out."""
    job = dg.GraphDefinition("run_all_harvesters").to_job()
    instance.create_run_for_job(
        job, tags=range_tags("down", "2024-01-01", "2024-03-03"), status=dg.DagsterRunStatus.STARTED
    )
    instance.create_run_for_job(
        dg.GraphDefinition("harvest").to_job(),
        tags=range_tags("fresh", "2024-03-09", "2024-03-10"),
        status=dg.DagsterRunStatus.STARTED,
    )
    requests = _by_harvester(_tick("run_all_harvesters_schedule", instance).run_requests)
    assert set(requests) == {"fresh", "current"}


def test_schedule_requests_name_existing_jobs_and_partitions(
    instance: dg.DagsterInstance, registry: Settings
) -> None:
    """The requested ranges are real keys of the job's partitions: a daemon accepts them."""
    instance.add_dynamic_partitions("harvester", ["fresh", "current", "down"])
    for name in ("incremental_harvest_schedule", "run_all_harvesters_schedule"):
        for request in _tick(name, instance).run_requests:
            job = defs.resolve_job_def(request.job_name)
            keys = job.partitions_def.get_partition_keys_in_range(
                dg.PartitionKeyRange(request.tags[RANGE_START_TAG], request.tags[RANGE_END_TAG]),
                dynamic_partitions_store=instance,
            )
            assert keys
            assert {str(k).split("|")[0] for k in keys} == {request.tags[HARVESTER_TAG]}


def test_a_stored_response_date_without_zone_neither_stops_the_tick_nor_the_others(
    instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stored by an earlier version as the source sent it; the others get their runs even
    when one harvester's state cannot be read at all."""
    add_harvester(settings, "nozone")
    add_finished_run(settings, "nozone", "2024-03-08T12:00:00")
    add_harvester(settings, "broken")
    add_harvester(settings, "fine")
    add_finished_run(settings, "fine", "2024-03-09T12:00:00Z")
    real = schedules.last_complete_sweep

    def last_complete_sweep(state: StateStore, harvester_id: str, runs: list) -> dict | None:
        if harvester_id == "broken":
            raise RuntimeError("unreadable state")
        return real(state, harvester_id, runs)

    monkeypatch.setattr(schedules, "last_complete_sweep", last_complete_sweep)

    requests = _by_harvester(_tick("incremental_harvest_schedule", instance).run_requests)

    assert set(requests) == {"nozone", "fine"}
    assert _windows(requests["nozone"]) == ("2024-03-08", "2024-03-10")
    assert _windows(requests["fine"]) == ("2024-03-09", "2024-03-10")


def test_a_run_of_recent_windows_only_does_not_hide_the_ones_before(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    """One partition of today (or `--since` last week) starts after what was listed
    before it: the windows in between were never harvested and stay requested."""
    add_harvester(settings, "new")  # never fully harvested; then today's window alone
    add_finished_run(
        settings,
        "new",
        "2024-03-10T11:00:00Z",
        window_from="2024-03-10",
        window_until="2024-03-10",
    )
    add_harvester(settings, "gap")  # harvested to 03-02, then only 03-08 onwards
    add_finished_run(settings, "gap", "2024-03-02T10:00:00Z")
    add_finished_run(
        settings,
        "gap",
        "2024-03-10T11:00:00Z",
        window_from="2024-03-08T00:00:00Z",
        window_until="2024-03-10T23:59:59Z",
    )
    add_harvester(settings, "chain")  # incremental runs, each from the last one's answer
    add_finished_run(settings, "chain", "2024-03-05T10:00:00Z")
    add_finished_run(
        settings,
        "chain",
        "2024-03-09T10:00:00Z",
        window_from="2024-03-05T00:00:00Z",
        window_until="2024-03-09T23:59:59Z",
    )

    requests = _by_harvester(_tick("incremental_harvest_schedule", instance).run_requests)

    assert _windows(requests["new"]) == ("2024-01-01", "2024-03-10")
    assert _windows(requests["gap"]) == ("2024-03-02", "2024-03-10")
    assert _windows(requests["chain"]) == ("2024-03-09", "2024-03-10")


def test_a_history_cut_at_run_history_keeps_its_oldest_complete_run_as_covered(
    instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The full harvest that began the chain fell out of the history searched."""
    monkeypatch.setattr(schedules, "RUN_HISTORY", 2)
    add_harvester(settings, "old")
    add_finished_run(settings, "old", "2024-03-01T10:00:00Z")  # no longer searched
    for start, answered in (("2024-03-01", "2024-03-05"), ("2024-03-05", "2024-03-09")):
        add_finished_run(  # incremental runs, each from the one before
            settings,
            "old",
            f"{answered}T10:00:00Z",
            window_from=f"{start}T00:00:00Z",
            window_until=f"{answered}T23:59:59Z",
        )

    requests = _by_harvester(_tick("incremental_harvest_schedule", instance).run_requests)

    assert _windows(requests["old"]) == ("2024-03-09", "2024-03-10")


def _identified(settings: Settings, harvester_id: str, deleted_record: str = "no") -> None:
    """The harvester's source answered Identify (as its first harvest saves it)."""
    with Services(settings) as services:
        harvester = services.harvester(harvester_id)
        services.state.save_identify(
            harvester_id,
            IdentifyInfo(
                "Test", harvester.base_url, "YYYY-MM-DD", "2020-01-01", deleted_record, "x"
            ),
        )


def test_the_reconcile_schedule_asks_for_one_run_at_a_time(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    """Weekly: one run of `reconcile_sources`, not another while one is queued or going (a
    slow source's sweep: runs would pile up behind it)."""
    add_harvester(settings, "zenodo")
    _identified(settings, "zenodo")
    [request] = _tick("reconcile_schedule", instance).run_requests
    assert request.job_name in (None, "reconcile_sources")
    assert request.tags[TRIGGER_TAG] == "reconcile"

    job = defs.resolve_job_def("reconcile_sources")
    instance.create_run_for_job(job, status=dg.DagsterRunStatus.STARTED)
    skipped = _tick("reconcile_schedule", instance)
    assert not skipped.run_requests
    assert "still queued or going" in skipped.skip_message


def test_the_reconcile_schedule_says_why_a_moved_source_waits_for_its_next_harvest(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    """After `harvesters update ID --base-url NEW`, the Identify of the old URL is dropped:
    the new source's deletedRecord is unknown (and its identifiers may differ) until a
    harvest there identifies it, so the reconcile waits. Before, the tick asked for a run
    that reconciled nothing and said nothing of it: a week without reconcile, unexplained."""
    add_harvester(settings, "zenodo")
    _identified(settings, "zenodo")
    add_harvester(settings, "persistent")
    _identified(settings, "persistent", deleted_record="persistent")
    assert _tick("reconcile_schedule", instance).run_requests

    add_harvester(settings, "zenodo", base_url="https://zenodo.example.org/moved/oai")
    skipped = _tick("reconcile_schedule", instance)

    assert not skipped.run_requests
    assert "harvester zenodo waits" in skipped.skip_message
    assert "https://zenodo.example.org/moved/oai has not answered Identify" in (
        skipped.skip_message
    )
    assert "persistent" not in skipped.skip_message  # keeps its deletions: never reconciled

    _identified(settings, "zenodo")  # its next harvest
    [request] = _tick("reconcile_schedule", instance).run_requests
    assert request.tags[TRIGGER_TAG] == "reconcile"


@pytest.mark.parametrize("name", ["incremental_harvest_schedule", "run_all_harvesters_schedule"])
def test_a_tick_built_without_a_scheduled_time_harvests_up_to_now(
    instance: dg.DagsterInstance, registry: Settings, name: str
) -> None:
    """Before, `context.scheduled_execution_time or now` read a property that raises when no
    time was set (a test, a tick evaluated by hand): the tick failed with Dagster's CheckError."""
    context = dg.build_schedule_context(instance=instance, resources=defs.resources)

    requests = _by_harvester(defs.resolve_schedule_def(name).evaluate_tick(context).run_requests)

    assert set(requests) == {"fresh", "current", "down"}
    today = datetime.now(UTC).date().isoformat()
    assert {_windows(request)[1] for request in requests.values()} == {today}


def test_a_tick_whose_every_harvester_failed_says_what_failed(
    instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, the tick skipped with "no enabled harvester is registered": the operator
    looked at the registry, not at the error of each harvester's window calculation."""
    add_harvester(settings, "broken")
    add_harvester(settings, "busy")
    add_harvester(settings, "off", enabled=False)
    instance.create_run_for_job(
        dg.GraphDefinition("harvest").to_job(),
        tags=range_tags("busy", "2024-03-09", "2024-03-10"),
        status=dg.DagsterRunStatus.STARTED,
    )

    def last_complete_sweep(state: StateStore, harvester_id: str, runs: list) -> dict | None:
        raise RuntimeError(f"unreadable state of {harvester_id}\nsecond line")

    monkeypatch.setattr(schedules, "last_complete_sweep", last_complete_sweep)

    data = _tick("incremental_harvest_schedule", instance)

    assert data.run_requests == []
    assert data.skip_message == (
        "harvester broken: no run requested: RuntimeError: unreadable state of broken; "
        "harvesters with a run queued or in progress: ['busy']"
    )


def test_a_tick_whose_only_harvester_failed_does_not_say_none_is_registered(
    instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_harvester(settings, "broken")

    def last_complete_sweep(state: StateStore, harvester_id: str, runs: list) -> dict | None:
        raise ValueError("bad responseDate")

    monkeypatch.setattr(schedules, "last_complete_sweep", last_complete_sweep)

    data = _tick("incremental_harvest_schedule", instance)

    assert data.run_requests == []
    assert data.skip_message == "harvester broken: no run requested: ValueError: bad responseDate"


def _tick_queries(instance: dg.DagsterInstance, name: str) -> Counter[str]:
    """The SQL statements a tick runs on the state store's runs and the instance's harvester
    partitions, by table."""
    counted: Counter[str] = Counter()

    def count(_conn, _cursor, statement: str, *_args) -> None:
        for table in ("harvest_runs", "dynamic_partitions"):
            if f"FROM {table}" in statement:
                counted[table] += 1

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", count)
    try:
        assert _tick(name, instance).run_requests
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", count)
    return counted


@pytest.mark.parametrize("name", ["incremental_harvest_schedule", "run_all_harvesters_schedule"])
def test_a_tick_reads_runs_and_partitions_once_whatever_the_number_of_harvesters(
    instance: dg.DagsterInstance, settings: Settings, name: str
) -> None:
    """An aggregator registers hundreds of harvesters: a tick that read each one's runs and
    the instance's partitions once per harvester took ~12 s at 300 with a month of hourly
    runs each."""
    for harvester_id in ("a1", "a2"):
        add_harvester(settings, harvester_id)
        add_finished_run(settings, harvester_id, "2024-03-09T12:00:00Z")
    few = _tick_queries(instance, name)
    for harvester_id in ("b1", "b2", "b3", "b4"):
        add_harvester(settings, harvester_id)
        add_finished_run(settings, harvester_id, "2024-03-09T12:00:00Z")

    many = _tick_queries(instance, name)

    assert many == few
    assert many["harvest_runs"] <= 1


def test_a_skip_reason_names_a_few_of_many_harvesters_and_counts_the_rest(
    instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With 300 harvesters busy the reason named all 300 (4,000 characters in the UI's tick
    list), a disabled one among them, under "every enabled harvester has…"."""
    monkeypatch.setattr(schedules, "NAMED_IN_SKIP_REASON", 2)
    for harvester_id in ("b1", "b2", "b3", "b4", "off"):
        add_harvester(settings, harvester_id, enabled=harvester_id != "off")
        instance.create_run_for_job(
            dg.GraphDefinition("harvest").to_job(),
            tags=range_tags(harvester_id, "2024-03-09", "2024-03-10"),
            status=dg.DagsterRunStatus.STARTED,
        )

    busy = _tick("incremental_harvest_schedule", instance)

    assert busy.skip_message == (
        "every enabled harvester has a run queued or in progress: ['b1', 'b2'] and 2 more"
    )

    for harvester_id in ("f1", "f2", "f3"):
        add_harvester(settings, harvester_id)

    def last_complete_sweep(state: StateStore, harvester_id: str, runs: list) -> dict | None:
        raise RuntimeError(f"unreadable state of {harvester_id}")

    monkeypatch.setattr(schedules, "last_complete_sweep", last_complete_sweep)

    failing = _tick("incremental_harvest_schedule", instance)

    assert failing.skip_message == (
        "harvester f1: no run requested: RuntimeError: unreadable state of f1; "
        "harvester f2: no run requested: RuntimeError: unreadable state of f2; "
        "and 1 more harvesters with no run requested (each with its error in the daemon's log); "
        "harvesters with a run queued or in progress: ['b1', 'b2'] and 2 more"
    )
