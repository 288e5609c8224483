"""Incremental sync: every harvester, the windows since its last successful harvest.

Sources index late, so the next harvest starts at the previous successful harvest's
`responseDate` minus an overlap; re-harvesting a record is idempotent. A harvester that was
down for days catches up in one run (one ListRecords sweep over the missed windows).
"""

import logging
import os
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import dagster as dg
from dagster_shared.check import CheckError

from oai_pipeline.defs.instance_storage import STORAGE_FAILED, dagster_storage_errors
from oai_pipeline.defs.jobs import harvest_job, run_all_harvesters
from oai_pipeline.defs.launch import range_tags
from oai_pipeline.defs.partitions import (
    HARVESTER,
    TRIGGER_TAG,
    ensure_harvester_partitions,
    harvesters_of,
    window_partitions,
)
from oai_pipeline.defs.resources import PipelineResource
from oai_pipeline.errors import ConfigurationError
from oai_pipeline.oai.windows import INDEXING_OVERLAP, parse_datestamp, read_response_date
from oai_pipeline.pipeline.services import Services as PipelineServices
from oai_pipeline.state.store import StateStore

logger = logging.getLogger(__name__)

# How many of a harvester's latest runs are searched for its last complete sweep.
RUN_HISTORY = 500
BUSY_STATUSES = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


# A month: more than that is a typo (hours for minutes), and would re-harvest for weeks.
MAX_OVERLAP_HOURS = 24 * 31


def overlap() -> timedelta:
    """OAI_PIPELINE_INCREMENTAL_OVERLAP_HOURS (default 2). Read once a tick: a typo fails the
    tick saying so, where read for each harvester it was logged as every harvester's error
    and no run was requested."""
    text = os.environ.get("OAI_PIPELINE_INCREMENTAL_OVERLAP_HOURS", "").strip()
    if not text:
        return INDEXING_OVERLAP
    try:
        hours = float(text)
    except ValueError:
        hours = -1.0
    if not 0 <= hours <= MAX_OVERLAP_HOURS:  # NaN too
        raise ConfigurationError(
            "OAI_PIPELINE_INCREMENTAL_OVERLAP_HOURS must be a number of hours from 0 to "
            f"{MAX_OVERLAP_HOURS}, not {text!r}"
        )
    return timedelta(hours=hours)


def incremental_window_range(
    last_response_date: str | None,
    now: datetime,
    windows: dg.TimeWindowPartitionsDefinition = window_partitions,
    overlap: timedelta = INDEXING_OVERLAP,
) -> tuple[str, str]:
    """First and last window key to harvest: from (last responseDate - overlap) to now.

    Never harvested: the whole grid (a full harvest). The last window is the one holding
    `now`, so today's window is refreshed during the day.
    """
    last_key = windows.get_partition_key_for_timestamp(now.timestamp())
    last_response = read_response_date(last_response_date)
    if last_response is None:
        return windows.get_first_partition_key(), last_key
    start = last_response - overlap
    first_grid_start = windows.time_window_for_partition_key(windows.get_first_partition_key())
    if start < first_grid_start.start:
        return windows.get_first_partition_key(), last_key
    first_key = windows.get_partition_key_for_timestamp(start.timestamp())
    return min(first_key, last_key), last_key


def _swept_to_the_present(run: dict[str, Any]) -> bool:
    """Whether the run's sweep reached the moment the source answered (not an old range)."""
    until = run.get("window_until")
    if not until:
        return True
    end = parse_datestamp(until) + (timedelta(days=1) if len(until) == 10 else timedelta(0))
    response = read_response_date(run["response_date"])
    return response is not None and end >= response


def last_complete_sweep(
    state: StateStore, harvester_id: str, runs: Sequence[dict[str, Any]] | None = None
) -> dict[str, Any] | None:
    """The newest succeeded run that listed everything changed up to its responseDate, of
    the harvester's latest RUN_HISTORY `runs` (newest first; read from `state` if None:
    a tick reads every harvester's at once, `StateStore.sweep_histories`).

    A capped run (a scale or max_records), a run of selected identifiers and a run over an
    old range of windows succeed without that guarantee; starting the next incremental
    harvest at their responseDate would skip what changed before it. So does a run of
    recent windows only (one partition of today, `--since` last week) that starts after
    what the runs before it had listed: the windows in between were never harvested.
    Read oldest first: a run counts when it starts no later than the coverage so far (or at
    the beginning of the grid); in a history cut at RUN_HISTORY runs, its oldest complete
    run is taken as covered, as the runs before it made it.
    """
    if runs is None:
        runs = state.sweep_histories([harvester_id], limit=RUN_HISTORY)[harvester_id]
    covered: datetime | None = None  # everything changed until then was listed
    found: dict[str, Any] | None = None
    for run in reversed(runs):
        if run["status"] != "succeeded" or run["cap_reached"]:
            continue
        if (run.get("options") or {}).get("identifiers") or not _swept_to_the_present(run):
            continue
        response = read_response_date(run.get("response_date"))
        if response is None:
            continue
        start = run.get("window_from")
        if start and covered is None and not (len(runs) == RUN_HISTORY and found is None):
            continue  # a gap before it: the history has nothing that reached its start
        if start and covered is not None and parse_datestamp(start) > covered:
            continue
        covered = response if covered is None else max(covered, response)
        found = run
    return found


def tick_time(context: dg.ScheduleEvaluationContext) -> datetime:
    """The moment the tick was scheduled for, or now for a tick evaluated without one (by
    hand, in a test): Dagster's property then raises a CheckError, not returns None, so
    `context.scheduled_execution_time or now` failed the tick."""
    try:
        scheduled = context.scheduled_execution_time
    except CheckError:
        return datetime.now(UTC)
    return scheduled or datetime.now(UTC)


# A run still NOT_STARTED after this long never will (e.g. stored, then refused at launch).
STUCK_AFTER = timedelta(minutes=10)


def job_busy(instance: dg.DagsterInstance, job_name: str) -> bool:
    """Whether a run of `job_name` is queued or in progress (a weekly or daily job still
    going: another would pile up behind it). Dagster's storage failing: one line."""
    with dagster_storage_errors(STORAGE_FAILED):
        busy = instance.get_run_records(
            dg.RunsFilter(job_name=job_name, statuses=BUSY_STATUSES), limit=1
        )
    return bool(busy)


def busy_harvesters(
    instance: dg.DagsterInstance, now: datetime | None = None, *, job_name: str | None = None
) -> set[str]:
    """Harvesters with a run (of `job_name`, default any) queued or in progress (one writer
    each: a new run would wait). A run stuck as NOT_STARTED does not count: it would keep
    its harvester out for good. Dagster's storage failing: one line, not SQLAlchemy's."""
    with dagster_storage_errors(STORAGE_FAILED):
        return _busy_harvesters(instance, now, job_name)


def _busy_harvesters(
    instance: dg.DagsterInstance, now: datetime | None, job_name: str | None
) -> set[str]:
    stuck_before = (now or datetime.now(UTC)) - STUCK_AFTER
    busy: set[str] = set()
    registered: list[str] | None = None

    def harvesters() -> list[str]:
        nonlocal registered
        if registered is None:
            registered = instance.get_dynamic_partitions(HARVESTER)
        return registered

    for record in instance.get_run_records(filters=dg.RunsFilter(statuses=BUSY_STATUSES)):
        run = record.dagster_run
        if run.status is dg.DagsterRunStatus.NOT_STARTED and record.create_timestamp < stuck_before:
            continue
        if job_name is None or run.job_name == job_name:
            busy |= harvesters_of(run.tags, harvesters)
    return busy


class TickRequests(NamedTuple):
    """A tick's run requests, and the harvesters it could ask for none, with why (one line
    each): a tick that requested nothing must say so, not that no harvester is registered."""

    requests: list[dg.RunRequest]
    failed: dict[str, str]
    busy: list[str] = []  # enabled harvesters left out: a run of theirs is still going


# Given the services and the harvesters a tick asks for, what gives each one's first and
# last window: prepared once a tick, so that what it reads is read for all of them at once.
WindowRanges = Callable[[PipelineServices, list[str]], Callable[[str], tuple[str, str]]]


def range_run_requests(
    instance: dg.DagsterInstance,
    pipeline: PipelineResource,
    job_name: str,
    trigger: str,
    tick_id: str,
    window_ranges: WindowRanges,
    skip: Collection[str] = (),
) -> TickRequests:
    """One single-run range request per enabled harvester (one ListRecords sweep each).

    Nothing is read per harvester: a tick of hundreds of harvesters made a query of the
    state store and one of the instance's partitions for each."""
    requests = []
    failed: dict[str, str] = {}
    with pipeline.services() as services:
        enabled = [h for h in services.state.list_harvesters() if h.enabled]
        harvesters = [h for h in enabled if h.id not in skip]
        window_range = window_ranges(services, [h.id for h in harvesters])
        for harvester in harvesters:
            try:
                first, last = window_range(harvester.id)
            except Exception as error:  # one harvester's bad state must not stop the others'
                logger.exception("no run requested for harvester %s", harvester.id)
                failed[harvester.id] = _one_line(error)
                continue
            requests.append(
                dg.RunRequest(
                    run_key=f"{trigger}:{harvester.id}:{first}:{last}:{tick_id}",
                    job_name=job_name,
                    tags={
                        **range_tags(harvester.id, first, last, harvester.base_url),
                        TRIGGER_TAG: trigger,
                    },
                )
            )
    with dagster_storage_errors(STORAGE_FAILED):
        ensure_harvester_partitions(instance, [h.id for h in harvesters if h.id not in failed])
    return TickRequests(requests, failed, sorted(h.id for h in enabled if h.id in skip))


def _one_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


# How many harvesters a skip reason names: with hundreds registered, naming each one made
# a reason of thousands of characters in the UI's tick list.
NAMED_IN_SKIP_REASON = 10


def tick_result(tick: TickRequests, busy_means: str) -> list[dg.RunRequest] | dg.SkipReason:
    """The requests, or why there are none: the harvesters whose windows could not be
    computed (with the error), the enabled ones still busy (`busy_means` says with what), or
    none enabled; the first NAMED_IN_SKIP_REASON of each, and how many more. Before, a tick
    whose every harvester failed said "no enabled harvester is registered", which sent the
    operator looking at the registry, not at the error."""
    if tick.requests:
        return tick.requests
    failed = sorted(tick.failed.items())
    reasons = [
        f"harvester {harvester_id}: no run requested: {error}"
        for harvester_id, error in failed[:NAMED_IN_SKIP_REASON]
    ]
    if len(failed) > NAMED_IN_SKIP_REASON:
        reasons.append(
            f"and {len(failed) - NAMED_IN_SKIP_REASON} more harvesters with no run requested "
            "(each with its error in the daemon's log)"
        )
    if tick.busy:
        which = "harvesters with" if reasons else "every enabled harvester has"
        named = str(tick.busy[:NAMED_IN_SKIP_REASON])
        if len(tick.busy) > NAMED_IN_SKIP_REASON:
            named += f" and {len(tick.busy) - NAMED_IN_SKIP_REASON} more"
        reasons.append(f"{which} {busy_means}: {named}")
    if not reasons:
        return dg.SkipReason("no enabled harvester is registered")
    return dg.SkipReason("; ".join(reasons))


def incremental_run_requests(
    instance: dg.DagsterInstance,
    pipeline: PipelineResource,
    now: datetime,
    tick_id: str,
    skip: Collection[str] = (),
) -> TickRequests:
    window_overlap = overlap()

    def since_last_success(
        services: PipelineServices, harvester_ids: list[str]
    ) -> Callable[[str], tuple[str, str]]:
        histories = services.state.sweep_histories(harvester_ids, limit=RUN_HISTORY)

        def window_range(harvester_id: str) -> tuple[str, str]:
            runs = histories[harvester_id]
            last = last_complete_sweep(services.state, harvester_id, runs) or {}
            return incremental_window_range(last.get("response_date"), now, overlap=window_overlap)

        return window_range

    return range_run_requests(
        instance, pipeline, harvest_job.name, "incremental", tick_id, since_last_success, skip
    )


@dg.schedule(
    cron_schedule="20 * * * *",
    job=harvest_job,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Hourly: every enabled harvester, the windows since its last successful run.",
)
def incremental_harvest_schedule(
    context: dg.ScheduleEvaluationContext, pipeline: PipelineResource
) -> list[dg.RunRequest] | dg.SkipReason:
    now = tick_time(context)
    busy = busy_harvesters(context.instance)
    tick = incremental_run_requests(
        context.instance, pipeline, now, now.strftime("%Y%m%dT%H%M"), busy
    )
    return tick_result(tick, "a run queued or in progress")


def full_harvest_requests(
    instance: dg.DagsterInstance,
    pipeline: PipelineResource,
    now: datetime,
    tick_id: str,
    skip: Collection[str] = (),
) -> TickRequests:
    first = window_partitions.get_first_partition_key()
    last = window_partitions.get_partition_key_for_timestamp(now.timestamp())
    return range_run_requests(
        instance,
        pipeline,
        run_all_harvesters.name,
        "full",
        tick_id,
        lambda _services, _harvesters: lambda _harvester: (first, last),
        skip,
    )


@dg.schedule(
    cron_schedule="0 3 * * 0",
    job=run_all_harvesters,
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Weekly (when started): a full harvest of every enabled harvester.",
)
def run_all_harvesters_schedule(
    context: dg.ScheduleEvaluationContext, pipeline: PipelineResource
) -> list[dg.RunRequest] | dg.SkipReason:
    now = tick_time(context)
    # A full harvest still queued or going (a slow source) is not asked for again: weekly
    # runs would pile up behind it. An incremental run going does not keep one out.
    busy = busy_harvesters(context.instance, job_name=run_all_harvesters.name)
    tick = full_harvest_requests(context.instance, pipeline, now, now.strftime("%Y%m%dT%H%M"), busy)
    return tick_result(tick, "a full harvest still going")
