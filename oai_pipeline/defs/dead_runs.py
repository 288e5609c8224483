"""Runs whose process was killed: marked failed, so their harvester is not blocked for good.

With the default run launcher Dagster cannot tell that a run's process died (a `kill -9`, the
OOM killer, a reboot): the run stays STARTED for ever, keeps its harvester's run slot (one
run per harvester) and keeps the schedules from requesting that harvester again. Each step of
the harvest assets names its process on the run (host:pid); a sensor marks a STARTED run
failed once that process is gone from this machine and the run has logged nothing for a
while. The failure sensor then records it on the harvest run, which the next run resumes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import dagster as dg

from oai_pipeline.defs.instance_storage import STORAGE_FAILED, dagster_storage_errors
from oai_pipeline.state.harvester_lock import is_dead_local_process, new_owner

WORKER_TAG = "oai_pipeline/worker"
PARENT_RUN_ID_TAG = "dagster/parent_run_id"
# Between two steps, and while a step waits for its retry (the assets' retry policy waits
# up to 210 s), the tagged process has ended and the run is alive: only a run that has also
# been quiet for longer than that counts as dead.
QUIET_FOR = timedelta(minutes=5)


def tag_worker(context: dg.AssetExecutionContext) -> None:
    """Name this step's process on the run (each step may run in a process of its own)."""
    context.instance.add_run_tags(context.run_id, {WORKER_TAG: new_owner()})


def dead_runs(instance: dg.DagsterInstance, now: datetime | None = None) -> list[dg.DagsterRun]:
    """STARTED runs whose tagged process is gone from this machine and that are quiet."""
    records = instance.get_run_records(
        filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])
    )
    return [record.dagster_run for record in records if is_dead(instance, record.dagster_run, now)]


def is_dead(instance: dg.DagsterInstance, run: dg.DagsterRun, now: datetime | None = None) -> bool:
    """Whether a STARTED run's tagged process is gone from this machine and the run quiet."""
    if run.status is not dg.DagsterRunStatus.STARTED:
        return False
    worker = run.tags.get(WORKER_TAG)
    if worker is None or not is_dead_local_process(worker) or _inherited(instance, run, worker):
        return False
    quiet_since = (now or datetime.now(UTC)) - QUIET_FOR
    latest = instance.get_records_for_run(run.run_id, limit=1, ascending=False).records
    return not latest or datetime.fromtimestamp(latest[0].timestamp, UTC) < quiet_since


def _inherited(instance: dg.DagsterInstance, run: dg.DagsterRun, worker: str) -> bool:
    """Whether the run's worker tag is its parent's: a re-execution (from failure, all steps)
    copies the parent run's tags, so until a step of its own starts (e.g. while it waits
    for a pool slot), the tag names the parent's process, long gone."""
    parent_id = run.tags.get(PARENT_RUN_ID_TAG)
    parent = instance.get_run_by_id(parent_id) if parent_id else None
    return parent is not None and parent.tags.get(WORKER_TAG) == worker


@dg.sensor(
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60,
    description="Marks failed a run whose process was killed (it would stay STARTED for ever "
    "and block its harvester).",
)
def dead_run_sensor(context: dg.SensorEvaluationContext) -> dg.SkipReason:
    # Dagster's storage failing: one line in the tick, not SQLAlchemy's; the next tick
    # finds the runs not yet marked again.
    with dagster_storage_errors(STORAGE_FAILED):
        runs = dead_runs(context.instance)
        for run in runs:
            message = (
                f"the run's process ({run.tags[WORKER_TAG].rsplit(':', 1)[0]}) is gone "
                "(killed?); marked failed so that its harvester's next run can start and resume"
            )
            context.log.warning(f"run {run.run_id}: {message}")
            context.instance.report_run_failed(run, message)
    return dg.SkipReason(
        f"marked {len(runs)} dead runs failed" if runs else "no run's process is gone"
    )
