"""Sensor ticks on a test instance: partitions follow the registry, failures reach the state."""

from __future__ import annotations

import dagster as dg
import pytest

from oai_pipeline.definitions import defs
from oai_pipeline.defs import sensors
from oai_pipeline.defs.assets import harvest_assets, transformed_records
from oai_pipeline.defs.launch import materialize_windows, range_tags
from oai_pipeline.defs.partitions import HARVESTER, window_partitions
from oai_pipeline.defs.resources import HarvestOptions, PipelineResource
from oai_pipeline.defs.sensors import partition_budget_warning
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.oai.errors import HarvestProtocolError
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline_tests.dagster_results import run_totals
from oai_pipeline_tests.orchestration.dagster_runs import add_queued_run
from oai_pipeline_tests.orchestration.state_setup import add_finished_run, add_harvester
from oai_pipeline_tests.support import register, shifted_sample_records


def _registry_tick(instance: dg.DagsterInstance):
    """One tick of the registry sensor, its partition requests applied as the daemon does."""
    sensor = defs.resolve_sensor_def("harvester_registry_sensor")
    context = dg.build_sensor_context(instance=instance, resources=defs.resources)
    data = sensor.evaluate_tick(context)
    for request in data.dynamic_partitions_requests:
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(request.partitions_def_name, request.partition_keys)
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)
    return data


def test_harvester_partitions_follow_the_registry(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    add_harvester(settings, "alpha")
    add_harvester(settings, "beta", enabled=False)  # disabled still has its partitions

    first = _registry_tick(instance)
    assert not first.run_requests
    # the UI's tick list says what the tick did (it read "Sensor function returned an empty
    # result", as a tick that did nothing)
    assert first.skip_message == "added harvester partitions: alpha, beta"
    assert sorted(instance.get_dynamic_partitions(HARVESTER)) == ["alpha", "beta"]

    # nothing changed: the tick skips with a reason
    again = _registry_tick(instance)
    assert again.dynamic_partitions_requests == []
    assert again.skip_message == "harvester partitions already match the registry"

    # register one, delete one: added and removed on the next tick, no code reload
    add_harvester(settings, "gamma")
    with Services(settings) as services:
        HarvesterRegistry(services.state).delete("alpha")
    changed = _registry_tick(instance)
    assert changed.skip_message == (
        "added harvester partitions: gamma; removed harvester partitions: alpha"
    )
    assert sorted(instance.get_dynamic_partitions(HARVESTER)) == ["beta", "gamma"]


def test_queued_runs_of_a_deleted_harvester_are_canceled(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    """Left in the queue, they failed as they left it, their partitions gone, with Dagster's
    "not a valid range" and its traceback."""
    add_harvester(settings, "alpha")
    add_harvester(settings, "beta")
    _registry_tick(instance)
    scheduled = add_queued_run(instance, range_tags("alpha", "2024-01-01", "2024-01-31"))
    from_the_ui = add_queued_run(
        instance, {"dagster/partition": "alpha|2024-01-05", "dagster/partition/harvester": "alpha"}
    )
    other = add_queued_run(instance, range_tags("beta", "2024-01-01", "2024-01-31"))
    # An asset backfill's run from the UI names its range only: alpha's, and alpha to beta.
    backfill = {
        "dagster/asset_partition_range_start": "alpha|2024-01-01",
        "dagster/asset_partition_range_end": "alpha|2024-01-31",
    }
    ui_backfill = add_queued_run(instance, backfill)
    both = add_queued_run(
        instance, {**backfill, "dagster/asset_partition_range_end": "beta|2024-01-31"}
    )
    with Services(settings) as services:
        HarvesterRegistry(services.state).delete("alpha")

    _registry_tick(instance)

    assert instance.get_dynamic_partitions(HARVESTER) == ["beta"]
    assert instance.get_run_by_id(both.run_id).status == dg.DagsterRunStatus.QUEUED
    for run in (scheduled, from_the_ui, ui_backfill):
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.CANCELED
    assert instance.get_run_by_id(other.run_id).status == dg.DagsterRunStatus.QUEUED


def _failed_dagster_run(
    instance: dg.DagsterInstance, failure: dg.Failure | None = None
) -> tuple[dg.DagsterRun, dg.DagsterEvent]:
    """A Dagster run whose step `crash` failed: a bug's exception, or `failure` (as a stage
    raises it, from the error it describes)."""

    @dg.op
    def crash() -> None:
        if failure is None:
            raise RuntimeError("the worker died")
        try:
            raise HarvestProtocolError("http://fake.test/oai (ListRecords): 503")
        except HarvestProtocolError as error:
            raise failure from error

    @dg.job
    def doomed() -> None:
        crash()

    result = doomed.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    run = instance.get_run_by_id(result.run_id)
    failure = next(
        record.dagster_event
        for record in instance.all_logs(result.run_id)
        if record.dagster_event
        and record.dagster_event.event_type == dg.DagsterEventType.RUN_FAILURE
    )
    return run, failure


def _run_status_sensor(
    name: str, instance: dg.DagsterInstance, dagster_run: dg.DagsterRun, event: dg.DagsterEvent
) -> None:
    """One evaluation of the run status sensor `name` for `dagster_run`'s `event`."""
    sensor = defs.resolve_sensor_def(name)
    context = dg.build_run_status_sensor_context(
        sensor_name=sensor.name,
        dagster_event=event,
        dagster_instance=instance,
        dagster_run=dagster_run,
        resources=defs.resources,
    )
    sensor(context.for_run_failure() if name == "harvest_failure_sensor" else context)


def test_failure_sensor_records_the_failure_on_the_harvest_runs(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    dagster_run, failure = _failed_dagster_run(instance)
    add_harvester(settings, "alpha")
    add_harvester(settings, "beta")
    # a range run over two harvesters: alpha finished before the crash, beta was running
    run_id = dagster_run.run_id
    done = add_finished_run(settings, "alpha", "2024-03-01T00:00:00Z", "succeeded", run_id)
    stuck = add_finished_run(settings, "beta", "2024-03-01T00:00:00Z", "running", run_id)
    other = add_finished_run(settings, "beta", "2024-03-02T00:00:00Z", "running", "another-run")

    _run_status_sensor("harvest_failure_sensor", instance, dagster_run, failure)

    with Services(settings) as services:
        state = services.state
        assert state.get_run(stuck)["status"] == "failed"
        assert "crash" in state.get_run(stuck)["error"]  # Dagster's message names the step
        assert state.get_run(stuck)["finished_at"]
        assert state.get_run(done)["status"] == "succeeded"  # a finished harvest stays so
        assert state.get_run(other)["status"] == "running"  # another Dagster run: untouched


@pytest.mark.parametrize(
    ("description", "recorded"),
    [
        # one harvester's step: its description leads with the harvester, whose run it is
        (
            "beta: http://fake.test/oai (ListRecords): 503",
            "crash: http://fake.test/oai (ListRecords): 503",
        ),
        # several harvesters' step: the other's failure is named by its harvester, once
        ("alpha: bad prefix", "crash: alpha: bad prefix"),
    ],
)
def test_a_harvest_run_left_by_a_failed_step_reads_its_failure_once_prefixed(
    instance: dg.DagsterInstance, settings: Settings, description: str, recorded: str
) -> None:
    """Before, the run read Dagster's wrapper or the error's module path between the step
    and the message (`crash: dagster._core.definitions.events.Failure: beta: …`,
    `crash: oai_pipeline.oai.errors.HarvestProtocolError: …`)."""
    dagster_run, event = _failed_dagster_run(
        instance, dg.Failure(description=description, allow_retries=False)
    )
    add_harvester(settings, "beta")
    stuck = add_finished_run(
        settings, "beta", "2024-03-01T00:00:00Z", "running", dagster_run.run_id
    )

    _run_status_sensor("harvest_failure_sensor", instance, dagster_run, event)

    with Services(settings) as services:
        assert services.state.get_run(stuck)["error"] == recorded


def test_the_dagster_run_that_continues_a_harvest_run_gets_its_failure(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    """A retry, the next run of the window or a downstream run works on a harvest run another
    Dagster run started: its failure is recorded there, with the failed step's error."""
    dagster_run, failure = _failed_dagster_run(instance)
    add_harvester(settings, "beta")
    earlier = add_finished_run(settings, "beta", "2024-03-01T00:00:00Z", "failed", "the-first")
    with Services(settings) as services:
        services.state.resume_run(earlier, dagster_run.run_id)  # what the retried stage does
        assert services.state.get_run(earlier)["status"] == "running"

    _run_status_sensor("harvest_failure_sensor", instance, dagster_run, failure)

    with Services(settings) as services:
        run = services.state.get_run(earlier)
    assert run["status"] == "failed" and "crash: RuntimeError: the worker died" in run["error"]


def test_a_downstream_run_names_itself_on_the_harvest_run(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    records = shifted_sample_records()
    days = sorted(r.datestamp.date().isoformat() for r in records)
    with OAIEndpoint(records) as endpoint:
        register(settings, endpoint.base_url)
        first = materialize_windows(instance, "sample", days[0], days[-1])
        (harvest_run,) = run_totals(first, "raw_oai_xml")["harvest_runs"].value.split(", ")
        again = dg.materialize(
            harvest_assets,
            selection=[transformed_records],
            instance=instance,
            resources={"pipeline": PipelineResource(), "harvest_options": HarvestOptions()},
            tags=range_tags("sample", days[0], days[-1]),
        )
    assert again.success
    with Services(settings) as services:
        run = services.state.get_run(int(harvest_run))
    assert run["dagster_run_id"] == again.run_id and run["status"] == "succeeded"


def test_a_stage_failure_keeps_its_own_error(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    """A stage that failed already recorded why; the sensor does not overwrite it."""
    dagster_run, failure = _failed_dagster_run(instance)
    add_harvester(settings, "alpha")
    failed = add_finished_run(
        settings, "alpha", "2024-03-01T00:00:00Z", "running", dagster_run.run_id
    )
    with Services(settings) as services:
        services.state.finish_run(failed, "failed", error="HarvestProtocolError: 503 budget spent")

    _run_status_sensor("harvest_failure_sensor", instance, dagster_run, failure)

    with Services(settings) as services:
        assert services.state.get_run(failed)["error"] == "HarvestProtocolError: 503 budget spent"


def test_a_canceled_run_leaves_its_harvest_runs_stopped(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    dagster_run, _ = _failed_dagster_run(instance)  # any run: its status event is what counts
    add_harvester(settings, "alpha")
    stuck = add_finished_run(
        settings, "alpha", "2024-03-01T00:00:00Z", "running", dagster_run.run_id
    )
    event = dg.DagsterEvent(
        event_type_value=dg.DagsterEventType.RUN_CANCELED.value,
        job_name=dagster_run.job_name,
        message="canceled by the operator",
    )

    _run_status_sensor("harvest_canceled_sensor", instance, dagster_run, event)

    with Services(settings) as services:
        run = services.state.get_run(stuck)
    assert run["status"] == "stopped"  # a rerun of the window resumes it
    assert run["error"] == "the Dagster run was canceled"


def test_the_registry_sensor_warns_when_partitions_outgrow_the_budget(
    instance: dg.DagsterInstance,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    windows = window_partitions.get_num_partitions()
    assert partition_budget_warning(90, 1000) is None  # a realistic registry, daily windows
    assert "weekly" in partition_budget_warning(101, 1000)
    add_harvester(settings, "alpha")
    add_harvester(settings, "beta")
    monkeypatch.setattr(sensors, "PARTITION_BUDGET", 2 * windows - 1)

    _registry_tick(instance)

    # the tick's log (shown with the tick in the UI; on the console here)
    assert f"2 harvesters x {windows} windows" in capfd.readouterr().err
