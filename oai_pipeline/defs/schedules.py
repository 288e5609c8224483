"""Incremental sync: every harvester, the windows since its last successful harvest.

Sources index late, so the next harvest starts at the previous successful harvest's
`responseDate` minus an overlap; re-harvesting a record is idempotent. A harvester that was
down for days catches up in one run (one ListRecords sweep over the missed windows).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import dagster as dg

from oai_pipeline.defs.jobs import harvest_job
from oai_pipeline.defs.launch import range_tags
from oai_pipeline.defs.partitions import window_partitions
from oai_pipeline.defs.resources import PipelineResource
from oai_pipeline.oai.windows import parse_datestamp


def overlap() -> timedelta:
    return timedelta(hours=float(os.environ.get("OAI_PIPELINE_INCREMENTAL_OVERLAP_HOURS", "2")))


def incremental_window_range(
    last_response_date: str | None,
    now: datetime,
    windows: dg.TimeWindowPartitionsDefinition = window_partitions,
    overlap: timedelta = timedelta(hours=2),
) -> tuple[str, str]:
    """First and last window key to harvest: from (last responseDate - overlap) to now.

    Never harvested: the whole grid (a full harvest). The last window is the one holding
    `now`, so today's window is refreshed during the day.
    """
    last_key = windows.get_partition_key_for_timestamp(now.timestamp())
    if not last_response_date:
        return windows.get_first_partition_key(), last_key
    start = parse_datestamp(last_response_date) - overlap
    first_grid_start = windows.time_window_for_partition_key(windows.get_first_partition_key())
    if start < first_grid_start.start:
        return windows.get_first_partition_key(), last_key
    first_key = windows.get_partition_key_for_timestamp(start.timestamp())
    return min(first_key, last_key), last_key


def incremental_run_requests(
    pipeline: PipelineResource, now: datetime, tick_id: str
) -> list[dg.RunRequest]:
    requests = []
    with pipeline.services() as services:
        for harvester in services.state.list_harvesters():
            if not harvester.enabled:
                continue
            last = services.state.last_success(harvester.id)
            response_date = (last or {}).get("response_date")
            first, last_key = incremental_window_range(response_date, now, overlap=overlap())
            requests.append(
                dg.RunRequest(
                    run_key=f"{harvester.id}:{first}:{last_key}:{tick_id}",
                    job_name=harvest_job.name,
                    tags={
                        **range_tags(harvester.id, first, last_key),
                        "oai_pipeline/trigger": "incremental",
                    },
                )
            )
    return requests


@dg.schedule(
    cron_schedule="20 * * * *",
    job=harvest_job,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Hourly: every enabled harvester, the windows since its last successful run.",
)
def incremental_harvest_schedule(
    context: dg.ScheduleEvaluationContext, pipeline: PipelineResource
) -> list[dg.RunRequest] | dg.SkipReason:
    now = context.scheduled_execution_time or datetime.now(UTC)
    requests = incremental_run_requests(pipeline, now, now.strftime("%Y%m%dT%H%M"))
    return requests or dg.SkipReason("no enabled harvester is registered")
