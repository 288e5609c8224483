"""Pruning Dagster's run history as a job of its own, daily on a schedule (see run_history).

It used to run inside a harvest's step, once a day across every harvester: at 300 hourly
harvesters that held one harvest (and its harvester's slot) for minutes on housekeeping
unrelated to it. As a job, no harvest waits on it, a run shows what it deleted, and one
stopped (or stopped at `max_runs`) leaves the rest to the next.
"""

import dagster as dg
from pydantic import Field

from oai_pipeline.defs.jobs import harvest_job, run_all_harvesters
from oai_pipeline.defs.partitions import TRIGGER_TAG
from oai_pipeline.defs.reconcile import reconcile_sources
from oai_pipeline.defs.registration import register_harvester
from oai_pipeline.defs.resources import PipelineResource
from oai_pipeline.defs.run_history import KEEP_LAST_RUNS_PER_JOB, prune_run_history
from oai_pipeline.defs.schedules import job_busy

# Runs one prune deletes at most (~20 s on SQLite): the rest waits for the next one. Above a
# day's runs at 300 hourly harvesters (~7,200), so a backlog shrinks every day.
MAX_RUNS_PER_PRUNE = 20_000


# What the prune deletes, as the UI's job, op and schedule say it: Dagster's runs (their rows,
# events and logs), not the harvest runs `oai-pipeline status` lists (the state store's), which
# "the harvest runs" read as.
_WHAT = (
    "Delete the Dagster runs of harvests (run, event log, captured logs; not what "
    "`oai-pipeline status` lists) that finished more than "
    "OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS ago and were superseded since"
)


class PruneRunHistoryConfig(dg.Config):
    max_runs: int = Field(
        default=MAX_RUNS_PER_PRUNE,
        ge=1,
        description="Runs deleted at most by this prune; the next one goes on with the rest.",
    )


@dg.op(
    description=f"{_WHAT} (every partition they materialised was materialised by a later "
    "run), and the other jobs' runs as old but the latest "
    f"{KEEP_LAST_RUNS_PER_JOB} of each job and its latest failure; at most max_runs."
)
def delete_superseded_runs(
    context: dg.OpExecutionContext, config: PruneRunHistoryConfig, pipeline: PipelineResource
) -> dict[str, int]:
    keep_days = pipeline.settings().keep_run_records_days
    with pipeline.services() as services:
        registered = {harvester.id for harvester in services.state.list_harvesters()}
    pruned = prune_run_history(
        context.instance, keep_days, registered, jobs=project_jobs(), limit=config.max_runs
    )
    counts = pruned.counts()
    for harvester_id, deleted in sorted(counts.items()):
        context.log.info(f"{harvester_id}: {deleted} superseded runs deleted")
    for job, deleted in sorted(pruned.job_counts().items()):
        context.log.info(f"job {job}: {deleted} old runs deleted")
    if pruned.more_left:
        context.log.warning(
            f"stopped at max_runs ({config.max_runs}): the next prune deletes the rest"
        )
    context.add_output_metadata(
        {
            "keep_days": keep_days,  # 0: runs are kept for good, none deleted
            "deleted": pruned.total,
            "kept": pruned.kept,
            "more_left": pruned.more_left,
            "deleted_by_harvester": dg.MetadataValue.json(counts),
            # runs naming no harvester (the prune's own, reconcile_sources, ...)
            "deleted_by_job": dg.MetadataValue.json(pruned.job_counts()),
        }
    )
    return counts


@dg.job(
    name="prune_run_history",
    description=f"{_WHAT} (every partition they materialised was materialised by a later "
    "run): each window's latest run, and a failure "
    "not harvested again, stay; the runs of deleted harvesters go. Of the other jobs' runs as "
    f"old, the latest {KEEP_LAST_RUNS_PER_JOB} of each job and its latest failure stay. "
    "Launched daily by the prune_run_history_schedule.",
)
def prune_run_history_job() -> None:
    delete_superseded_runs()


def project_jobs() -> list[str]:
    """The jobs whose runs naming no harvester are pruned: this project's (the instance may
    hold other projects' runs, which are theirs to keep)."""
    return [
        job.name
        for job in (
            harvest_job,
            run_all_harvesters,
            register_harvester,
            reconcile_sources,
            prune_run_history_job,
        )
    ]


@dg.schedule(
    cron_schedule="40 4 * * *",
    job=prune_run_history_job,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description=f"Daily: {_WHAT[0].lower()}{_WHAT[1:]} (skipped when it is 0, or while the "
    "last prune is still queued or going).",
)
def prune_run_history_schedule(
    context: dg.ScheduleEvaluationContext, pipeline: PipelineResource
) -> dg.RunRequest | dg.SkipReason:
    if pipeline.settings().keep_run_records_days <= 0:
        return dg.SkipReason("OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS is 0: runs are kept for good")
    if job_busy(context.instance, prune_run_history_job.name):
        return dg.SkipReason("the last prune is still queued or going")
    return dg.RunRequest(tags={TRIGGER_TAG: "prune_run_history"})
