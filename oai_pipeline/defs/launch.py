"""Materialise the four assets for a harvester's windows in this process (demo, tests)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import dagster as dg
import yaml
from dagster_shared.check import CheckError

from oai_pipeline.defs.assets import harvest_assets
from oai_pipeline.defs.checks import harvest_checks
from oai_pipeline.defs.instance_storage import dagster_storage_errors
from oai_pipeline.defs.partitions import (
    HARVESTER_TAG,
    RANGE_END_TAG,
    RANGE_START_TAG,
    SOURCE_TAG,
    TRIGGER_TAG,
    ensure_harvester_partitions,
    partition_key,
    source_tag,
    window_partitions,
)
from oai_pipeline.defs.resources import HarvestOptions, PipelineResource
from oai_pipeline.defs.run_coordinator import older_queue_limits
from oai_pipeline.errors import ConfigurationError, PipelineError

logger = logging.getLogger(__name__)


def dagster_instance() -> dg.DagsterInstance:
    """The instance under DAGSTER_HOME. A dagster.yaml that does not load, or a database of
    it that does not open, is the operator's to fix: one line naming the folder, not
    Dagster's traceback (see instance_storage). A dagster.yaml an older version left there
    is said so: the commands that open the instance are where an operator sees it after an
    upgrade."""
    try:
        with dagster_storage_errors("cannot open the Dagster instance"):
            instance = dg.DagsterInstance.get()
    except dg.DagsterInvalidConfigError as error:  # its text goes on with the whole schema
        reason = "; ".join(e.message.split(" Expected: ")[0] for e in error.errors)
    except (yaml.YAMLError, CheckError) as error:
        reason = " ".join(str(error).split())
    else:
        if problem := older_queue_limits(instance):
            logger.warning("warning: %s", problem)
        return instance
    home = os.environ.get("DAGSTER_HOME", "")
    raise PipelineError(f"cannot open the Dagster instance in {home}: {reason}")


def range_tags(
    harvester_id: str, first_window: str, last_window: str, base_url: str | None = None
) -> dict[str, str]:
    """Run tags of a single-run range: one ListRecords sweep over contiguous windows; with
    the harvester's `base_url`, its server too."""
    tags = {
        RANGE_START_TAG: str(partition_key(harvester_id, first_window)),
        RANGE_END_TAG: str(partition_key(harvester_id, last_window)),
        HARVESTER_TAG: harvester_id,
    }
    if base_url is not None:
        tags[SOURCE_TAG] = source_tag(base_url)
    return tags


def window_range(start: datetime | None, end: datetime | None) -> tuple[str, str]:
    """The grid's first and last window keys covering [start, end).

    An open start is the grid's first window (which is open to the past); an open end is
    today's window; a range before the grid collapses to its first window. The grid ends
    with today's window: an end after it is today's (a window of the future is no
    partition, and materialised it would show as harvested before its day), a start after
    it a ConfigurationError.
    """
    grid_first = window_partitions.get_first_partition_key()
    today = window_partitions.get_partition_key_for_timestamp(datetime.now(UTC).timestamp())
    first = grid_first
    if start is not None:
        first = max(
            grid_first, window_partitions.get_partition_key_for_timestamp(start.timestamp())
        )
    if first > today:
        raise ConfigurationError(
            f"the range starts after today's window {today}: nothing to harvest yet"
        )
    moment = (end - timedelta(seconds=1)) if end else datetime.now(UTC)
    last = window_partitions.get_partition_key_for_timestamp(moment.timestamp())
    return first, min(max(first, last), today)


def materialize_windows(
    instance: dg.DagsterInstance,
    harvester_id: str,
    first_window: str,
    last_window: str,
    *,
    pipeline: PipelineResource | None = None,
    options: Mapping[str, object] | None = None,
    raise_on_error: bool = True,
    log_level: str = "INFO",
    base_url: str | None = None,
    trigger: str | None = None,
) -> dg.ExecuteInProcessResult:
    """The windows' run in this process; `base_url`, the harvester's: its run is tagged with
    its server as a run Dagster launches is (`range_tags`), for the UI's Runs filter;
    `trigger`, what asked for it (`TRIGGER_TAG`), as the schedules' and the CLI's are."""
    ensure_harvester_partitions(instance, [harvester_id])
    tags = range_tags(harvester_id, first_window, last_window, base_url)
    if trigger is not None:
        tags[TRIGGER_TAG] = trigger
    return dg.materialize(
        [*harvest_assets, *harvest_checks],
        instance=instance,
        resources={
            "pipeline": pipeline or PipelineResource(),
            "harvest_options": HarvestOptions(**dict(options or {})),
        },
        tags=tags,
        raise_on_error=raise_on_error,
        run_config={"loggers": {"console": {"config": {"log_level": log_level}}}},
    )
