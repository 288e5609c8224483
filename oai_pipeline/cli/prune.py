"""`oai-pipeline prune [ID…]`: drop now what harvests drop of finished runs as they write."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from oai_pipeline.cli.output import FriendlyCommand, InvalidInput, emit, json_option
from oai_pipeline.errors import NotFound, PipelineError
from oai_pipeline.pipeline.retention import prune as prune_harvester
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import MAX_KEEP_RUN_RECORDS_DAYS, load_settings


@click.command(name="prune", cls=FriendlyCommand)
@click.argument("harvester_ids", nargs=-1)
@click.option(
    "--keep-days",
    type=int,
    help="days a succeeded run keeps its per-record statuses and Parquet "
    "(default: OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS)",
)
@json_option
def prune(harvester_ids: tuple[str, ...], keep_days: int | None, as_json: bool) -> None:
    """Drop now, of HARVESTER_IDS (default: every registered harvester, and every deleted one
    whose harvest records were kept), the per-record statuses and Parquet partitions of runs
    that succeeded more than --keep-days ago (their counts stay); the latest success and runs
    that failed or still run keep theirs. Each harvest that writes does so for its
    harvester: this is for harvesters no longer harvested (or deleted), or a shorter
    --keep-days. Dagster runs of theirs older than that go too, when
    every asset partition they wrote was materialised again since; without HARVESTER_IDS,
    also the runs of harvesters no longer registered, and those of the other jobs (reconcile,
    prune, ...) but the latest 30 of each and its latest failure."""
    if keep_days is not None and not 1 <= keep_days <= MAX_KEEP_RUN_RECORDS_DAYS:
        raise InvalidInput(
            f"--keep-days must be a whole number of days from 1 to {MAX_KEEP_RUN_RECORDS_DAYS}, "
            f"not {keep_days}",
            as_json=as_json,
        )
    settings = load_settings()
    if keep_days is None and settings.keep_run_records_days == 0:
        raise InvalidInput(
            "OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS is 0 (keep them always): give --keep-days to prune",
            as_json=as_json,
        )
    if keep_days is not None:
        settings = settings.model_copy(update={"keep_run_records_days": keep_days})
    # The instance first: one that does not open fails the prune before anything is dropped.
    with _dagster_instance() as instance, Services(settings) as services:
        registered = {harvester.id for harvester in services.state.list_harvesters()}
        # A harvester deleted with its harvest records kept is harvested no more, so no
        # harvest prunes its runs: this is the only way to.
        prunable = registered | set(services.state.harvesters_with_runs())
        ids = list(dict.fromkeys(harvester_ids)) or sorted(prunable)
        for harvester_id in ids:  # every name checked before anything is dropped
            if harvester_id not in prunable:
                raise NotFound(f"unknown harvester {harvester_id!r}")
        pruned, busy = [], []
        for harvester_id in ids:
            try:
                # Not while a harvest of it writes (it would wait up to an hour).
                with services.harvester_lock.hold(harvester_id, wait_seconds=0):
                    pruned.append(prune_harvester(services, harvester_id).to_dict())
            except PipelineError as error:
                busy.append({"harvester_id": harvester_id, "error": str(error)})
        registered = {harvester.id for harvester in services.state.list_harvesters()}
        dagster_runs, job_runs = _prune_dagster_runs(
            instance,
            [p["harvester_id"] for p in pruned],
            every=not harvester_ids,
            registered=registered,
            keep_days=settings.keep_run_records_days,
        )
    lines = [
        f"{p['harvester_id']}: {p['run_records']} per-record statuses, "
        f"{len(p['partitions'])} partition keys dropped"
        for p in pruned
    ] + [f"{b['harvester_id']}: skipped ({b['error']})" for b in busy]
    if dagster_runs is not None:
        lines.append(f"Dagster: {sum(dagster_runs.values())} superseded runs deleted")
    if job_runs:
        lines.append(f"Dagster: {sum(job_runs.values())} old runs of other jobs deleted")
    emit(
        {
            "keep_days": settings.keep_run_records_days,
            "pruned": pruned,
            "skipped": busy,
            "dagster_runs_deleted": dagster_runs,
            "dagster_job_runs_deleted": job_runs,
        },
        as_json=as_json,
        text="\n".join(lines) or "no harvester is registered",
    )


@contextmanager
def _dagster_instance() -> Iterator[Any]:
    """The Dagster instance under DAGSTER_HOME; None without one (DAGSTER_HOME unset or
    never created)."""
    home = os.environ.get("DAGSTER_HOME")
    if not home or not os.path.isdir(home):
        yield None
        return
    from oai_pipeline.defs.launch import dagster_instance  # Dagster only where it is used

    with dagster_instance() as instance:
        yield instance


def _prune_dagster_runs(
    instance: Any, harvester_ids: list[str], *, every: bool, registered: set[str], keep_days: int
) -> tuple[dict[str, int] | None, dict[str, int] | None]:
    """Runs deleted per harvester, and per other job, from the Dagster `instance`, as the
    prune_run_history job deletes them (see run_history); with `every`, also the runs of
    harvesters no longer registered and those of the other jobs. None without an instance."""
    if instance is None:
        return None, None
    from oai_pipeline.defs.instance_storage import STORAGE_FAILED, dagster_storage_errors
    from oai_pipeline.defs.prune_runs import project_jobs
    from oai_pipeline.defs.run_history import prune_run_history

    with dagster_storage_errors(STORAGE_FAILED):
        pruned = prune_run_history(
            instance,
            keep_days,
            registered,
            harvester_ids=None if every else harvester_ids,
            jobs=project_jobs(),
        )
    harvest_runs = {harvester_id: 0 for harvester_id in harvester_ids} | pruned.counts()
    return harvest_runs, pruned.job_counts() if every else None
