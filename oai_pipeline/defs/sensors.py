"""Sensors: the `harvester` partitions follow the registry, with no code reload."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Literal

import dagster as dg
import sqlalchemy as sa

from oai_pipeline.defs.instance_storage import STORAGE_FAILED, dagster_storage_errors
from oai_pipeline.defs.partitions import (
    HARVESTER,
    TRIGGER_TAG,
    harvester_partitions,
    harvesters_of,
    window_partitions,
)
from oai_pipeline.defs.registration import load_data_folder_fixture
from oai_pipeline.defs.resources import PipelineResource
from oai_pipeline.errors import ConfigurationError, PipelineError, database_error_text
from oai_pipeline.lock_waits import StoreBusy, is_lock_timeout
from oai_pipeline.pipeline.services import Services

# The metadata entry of a step's failure over several harvesters holding each one's own error
# (harvester id -> its error): the failure sensor gives each harvest run its own.
ERRORS_BY_HARVESTER = "errors by harvester"
# What a harvest run of a canceled (terminated) Dagster run says, whoever records it first:
# the canceled sensor, or the step its interrupt stopped (`step_error_text`).
RUN_CANCELED = "the Dagster run was canceled"

# Dagster slows down past this many partitions of one asset (harvesters x windows).
PARTITION_BUDGET = 100_000


def partition_budget_warning(harvesters: int, windows: int) -> str | None:
    """A hint for the operator when harvesters x windows outgrows what Dagster handles well."""
    count = harvesters * windows
    if count <= PARTITION_BUDGET:
        return None
    return (
        f"{harvesters} harvesters x {windows} windows = {count:,} partitions, more than "
        f"{PARTITION_BUDGET:,}: set OAI_PIPELINE_WINDOW_GRANULARITY=weekly or monthly, or a later "
        "OAI_PIPELINE_WINDOW_START (the first window still reaches back to the beginning)"
    )


def partition_requests(
    registered: set[str], existing: set[str]
) -> list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest]:
    requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
    if added := sorted(registered - existing):
        requests.append(harvester_partitions.build_add_request(added))
    if removed := sorted(existing - registered):
        requests.append(harvester_partitions.build_delete_request(removed))
    return requests


def cancel_queued_runs(instance: dg.DagsterInstance, deleted: set[str]) -> list[tuple[str, str]]:
    """Cancel the queued runs of deleted harvesters (scheduled, from the CLI, a partition
    launched in the UI): once their partitions are gone, each failed as it left the queue
    with Dagster's "Partition range ... is not a valid range" and its traceback. Returns
    (run id, harvester) of each."""
    if not deleted:
        return []
    canceled = []
    queued = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.QUEUED]))
    partitions = partial(instance.get_dynamic_partitions, HARVESTER)  # the deleted ones too
    for run in queued:
        harvesters = harvesters_of(run.tags, partitions)
        if harvesters and harvesters <= deleted:
            names = ", ".join(sorted(harvesters))
            instance.report_run_canceled(run, message=f"harvester {names} was deleted")
            canceled.append((run.run_id, names))
    return canceled


@dg.sensor(
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=15,
    description="Keeps the harvester partitions equal to the harvester registry: applies the "
    "data folder's oai_harvesters.yaml when it changed (its ticks fail, naming the error, while "
    "that file is in error) and cancels the queued runs of deleted harvesters.",
)
def harvester_registry_sensor(
    context: dg.SensorEvaluationContext, pipeline: PipelineResource
) -> dg.SensorResult:
    waiting: str | None = None  # why the data folder's file waits for the next tick
    try:
        opened = pipeline.tick_services()
    except StoreBusy as error:  # to migrate while a harvest (of an older release) writes
        waiting = f"registry not read this tick: {busy_state_store(error)}; the next tick reads it"
        context.log.warning(waiting)
        return dg.SensorResult(skip_reason=waiting)
    with opened as services:
        try:
            from oai_pipeline.defs.harvester_runs import DagsterRuns  # imports the schedules

            # a file changed since: no code reload needed
            load_data_folder_fixture(services, DagsterRuns(context.instance))
        except ConfigurationError as error:
            fixture_error: ConfigurationError | None = error
        except sa.exc.DBAPIError as error:
            if not is_lock_timeout(error):
                raise
            fixture_error = None
            waiting = (
                f"{services.settings.fixture_file.name} not applied this tick: "
                f"{busy_state_store(error)}; the next tick applies it"
            )
            context.log.warning(waiting)
        else:
            fixture_error = None
        registered = {h.id for h in services.state.list_harvesters()}  # waits for no writer
    existing = set(context.instance.get_dynamic_partitions(HARVESTER))
    if warning := partition_budget_warning(len(registered), window_partitions.get_num_partitions()):
        context.log.warning(warning)
    requests = partition_requests(registered, existing)
    for run_id, harvester_id in cancel_queued_runs(context.instance, existing - registered):
        context.log.info(f"canceled queued run {run_id}: harvester {harvester_id} was deleted")
    if fixture_error is not None:
        message = f"{fixture_error} (harvesters unchanged; fix the file)"
        if not requests:  # a failed tick is what the UI shows; the partitions first
            raise ConfigurationError(message)
        context.log.error(message)
    # A tick that changes partitions requests no run either: without a reason of its own the
    # UI's tick list read Dagster's "Sensor function returned an empty result".
    done = _partition_changes(requests) or "harvester partitions already match the registry"
    return dg.SensorResult(
        dynamic_partitions_requests=requests,
        skip_reason="; ".join(filter(None, [done, waiting])),
    )


def _partition_changes(
    requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest],
) -> str:
    """What a tick's partition requests do, in one line ("" for none)."""
    return "; ".join(
        f"{'added' if isinstance(r, dg.AddDynamicPartitionsRequest) else 'removed'} harvester "
        f"partitions: {', '.join(r.partition_keys)}"
        for r in requests
    )


# How a harvest run ends, and why (None: it goes on running).
Outcome = tuple[Literal["failed", "stopped"], str]


class RecordedNextTick(dg.DagsterError):
    """A run status sensor's tick that could not record a Dagster run's end, the state store
    or Dagster's storage failing. Dagster moves such a sensor's cursor past a run whose
    evaluation raised any other error, and its harvest runs stayed `running` for good; a
    DagsterError fails the whole tick instead, its cursor kept, and the next one takes the
    run again (recording it twice changes nothing: a finished harvest run stays so)."""


def busy_state_store(error: sa.exc.DBAPIError | StoreBusy) -> str:
    """A tick's write (or its store's migration) that gave up waiting for a harvest's
    transaction, in one line."""
    if isinstance(error, StoreBusy):
        return f"the state database is busy: {error.reason}"
    return f"the state database is busy: {database_error_text(error.orig or error)}"


@contextmanager
def recorded_next_tick(dagster_run_id: str) -> Iterator[None]:
    """While a run status sensor records `dagster_run_id`'s end: a database failing is a
    RecordedNextTick of one line naming the database."""
    try:
        yield
    except sa.exc.DBAPIError as error:  # the state store's: Dagster's is a PipelineError
        if is_lock_timeout(error):
            reason = busy_state_store(error)
        else:
            reason = f"the state database failed: {database_error_text(error.orig or error)}"
    except StoreBusy as error:  # not migrated while a harvest writes
        reason = busy_state_store(error)
    except PipelineError as error:  # the store not opened, or Dagster's storage failing
        reason = str(error).splitlines()[0]
    else:
        return
    raise RecordedNextTick(
        f"{reason}; the end of Dagster run {dagster_run_id} is recorded on its harvest runs "
        "by the next tick"
    ) from None


def finish_harvest_runs(
    pipeline: PipelineResource,
    instance: dg.DagsterInstance,
    dagster_run_id: str,
    status: Literal["failed", "stopped"],
    message: str | Callable[[str], str],
) -> list[int]:
    """Mark the harvest runs a Dagster run left unfinished, but those another Dagster run
    still works on (a range run whose windows a later run wrote part of: it goes on with
    the others), with `message` (or the one it gives for a run's harvester); returns their
    ids."""
    with recorded_next_tick(dagster_run_id), pipeline.tick_services() as services:
        runs = services.state.runs_of_dagster_run(dagster_run_id)

        def outcome(run: dict, _ended: dict[str, dg.DagsterRunStatus]) -> Outcome:
            return status, message if isinstance(message, str) else message(run["harvester_id"])

        return _finish_orphans(services, instance, runs, outcome)


def fail_orphaned_harvest_runs(
    pipeline: PipelineResource,
    instance: dg.DagsterInstance,
    harvest_run_ids: list[int],
    ending: str,
    *,
    in_tick: bool = False,
) -> list[int]:
    """Finish the harvest runs `ending` (a Dagster run as it ends) wrote part of and left
    `running`, when the Dagster run that was to write the rest failed or was canceled and
    no other Dagster run works on them: the failure sensor finished them before `ending`
    took them on, and nothing will finish them again. (One that is still to fail, killed
    and not yet found dead, is left to the failure sensor.) `in_tick`: called by a sensor,
    whose writes wait less for a harvest's (`PipelineResource.tick_services`). Returns
    their ids."""
    with (pipeline.tick_services if in_tick else pipeline.services)() as services:
        runs = services.state.running_dagster_runs(harvest_run_ids)

        def outcome(run: dict, ended: dict[str, dg.DagsterRunStatus]) -> Outcome | None:
            failed = [d for d, status in ended.items() if status is dg.DagsterRunStatus.FAILURE]
            canceled = [d for d, status in ended.items() if status is dg.DagsterRunStatus.CANCELED]
            if not failed and not canceled:
                return None  # harvested by a run of raw_oai_xml alone: automation goes on
            return (
                "failed" if failed else "stopped",
                f"{services.state.records_owed(run['id'])} of its records are still to write: "
                f"the Dagster run {', '.join(failed or canceled)} "
                f"{'failed' if failed else 'was canceled'} before writing them; materialise "
                "its windows again to write them",
            )

        return _finish_orphans(services, instance, runs, outcome, ending)


def _finish_orphans(
    services: Services,
    instance: dg.DagsterInstance,
    runs: list[dict],
    outcome: Callable[[dict, dict[str, dg.DagsterRunStatus]], Outcome | None],
    ending: str | None = None,
) -> list[int]:
    """Finish those of `runs` still running that no unfinished Dagster run (but `ending`)
    works on, as `outcome(run, the statuses of its other Dagster runs)` says (status, error;
    None: leave it running)."""
    finished = []
    for run in runs:
        if run["status"] != "running":
            continue
        others = [d for d in run["dagster_run_ids"] if d != ending]
        with dagster_storage_errors(STORAGE_FAILED):  # not taken for the state store's
            records = (
                instance.get_run_records(filters=dg.RunsFilter(run_ids=others)) if others else []
            )
        if any(not record.dagster_run.is_finished for record in records):
            continue
        ended = {record.dagster_run.run_id: record.dagster_run.status for record in records}
        result = outcome(run, ended)
        if result is None:
            continue
        status, message = result
        services.state.finish_run(run["id"], status, error=message[:2000])
        finished.append(run["id"])
    return finished


@dg.run_failure_sensor(
    default_status=dg.DefaultSensorStatus.RUNNING,
    monitor_all_code_locations=False,
    description="Records a failed Dagster run on its harvest runs, so status shows why.",
)
def harvest_failure_sensor(context: dg.RunFailureSensorContext, pipeline: PipelineResource) -> None:
    finish_harvest_runs(
        pipeline,
        context.instance,
        context.dagster_run.run_id,
        "failed",
        partial(failure_message, context),
    )


def failure_message(context: dg.RunFailureSensorContext, harvester_id: str | None = None) -> str:
    """Why the run failed: the failed steps' errors, not Dagster's "Steps failed: [...]".
    A step's own description of its failure if it gave one (led by the harvester it is of:
    dropped on that harvester's run, `harvester_id`, whose status names it already; of a
    step over several harvesters, that harvester's own error, `ERRORS_BY_HARVESTER`), else
    the error Dagster's wrappers hold."""
    causes = []
    for event in context.get_step_failure_events():
        failure = event.step_failure_data.user_failure_data
        if failure is not None and failure.description:
            described = failure.description.strip()
            by_harvester = failure.metadata.get(ERRORS_BY_HARVESTER)
            own = by_harvester.value if isinstance(by_harvester, dg.JsonMetadataValue) else {}
            if harvester_id is not None and isinstance(own, dict) and harvester_id in own:
                described = str(own[harvester_id]).strip()
            if harvester_id is not None:
                described = described.removeprefix(f"{harvester_id}: ")
            causes.append(f"{event.step_key}: {described}")
            continue
        error = event.step_failure_data.error
        while error is not None and error.cause is not None:  # Dagster's wrappers: the cause
            error = error.cause
        if error is not None:
            causes.append(f"{event.step_key}: {error.message.strip()}")
    return "; ".join(causes) or context.failure_event.message or "the Dagster run failed"


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.CANCELED,
    default_status=dg.DefaultSensorStatus.RUNNING,
    monitor_all_code_locations=False,
    description="Records a canceled Dagster run on its harvest runs as stopped (a rerun resumes).",
)
def harvest_canceled_sensor(context: dg.RunStatusSensorContext, pipeline: PipelineResource) -> None:
    finish_harvest_runs(
        pipeline,
        context.instance,
        context.dagster_run.run_id,
        "stopped",
        RUN_CANCELED,
    )


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    monitor_all_code_locations=False,
    description="Fails a harvest run a succeeded Dagster run took on, but did not write all of, "
    "when the Dagster run that was to write the rest failed or was canceled.",
)
def harvest_success_sensor(context: dg.RunStatusSensorContext, pipeline: PipelineResource) -> None:
    """written_records does this as it ends; a run of the steps before it alone (transform
    some windows again) does not reach it, and took on the harvest run all the same."""
    dagster_run_id = context.dagster_run.run_id
    with recorded_next_tick(dagster_run_id):
        with pipeline.tick_services() as services:
            worked_on = [r["id"] for r in services.state.runs_of_dagster_run(dagster_run_id)]
        fail_orphaned_harvest_runs(
            pipeline, context.instance, worked_on, dagster_run_id, in_tick=True
        )


# Downstream assets follow upstream materialisations of any window (declarative automation).
automation_sensor = dg.AutomationConditionSensorDefinition(
    "harvest_automation",
    target=dg.AssetSelection.groups("oai_harvest"),
    run_tags={TRIGGER_TAG: "automation"},
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60,
    description="Materialises transformed_records, sync_decisions and written_records for any "
    "window whose upstream was materialised (raw_oai_xml alone, a re-run of one stage); stop "
    "it to look at a plan (sync_decisions) before it is written.",
)
