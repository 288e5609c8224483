"""The run queue, with the harvester and source tags on every harvest run.

The run queue's limits in dagster.yaml (one run per harvester, one per server) key on the
tags the CLI's and the schedules' runs carry. A run launched in the UI names its
partitions only: without the tags it left the queue at once and waited for its
harvester's lease inside one of the four run slots, while other harvesters' runs queued
behind it. Tagged when submitted, it waits in the queue instead.

A run over several harvesters (a UI backfill of a few windows of many harvesters, which
Dagster cuts into one run per window) gets one tag value naming them all (`several_tag`):
runs over the same harvesters, such as the other windows of that backfill, queue one after
the other instead of filling the run slots while they wait for the same leases. A tag holds
one value, so such a run does not hold back a run of one of its harvesters alone; the
harvester lease still keeps them from writing at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial

import dagster as dg

from oai_pipeline.defs.partitions import (
    HARVESTER,
    HARVESTER_TAG,
    SOURCE_TAG,
    harvesters_of,
    several_tag,
    source_tag,
)
from oai_pipeline.defs.resources import PipelineResource
from oai_pipeline.state.store import read_base_urls

logger = logging.getLogger(__name__)

# How long a launch waits for the state store's answer (the harvesters' URLs, for the server
# tag) before the run is queued without its server tag: the webserver's launch waits with it.
STATE_STORE_TIMEOUT_SECONDS = 2.0


class HarvestRunCoordinator(dg.QueuedRunCoordinator):
    """Dagster's queued run coordinator, tagging a harvest run that lacks the tags."""

    def submit_run(self, context: dg.SubmitRunContext) -> dg.DagsterRun:
        run = context.dagster_run
        try:
            tags = missing_harvest_tags(
                run.tags,
                lambda: self._instance.get_dynamic_partitions(HARVESTER),
                partial(_base_urls, run.run_id),
            )
        except Exception as error:  # noqa: BLE001 - an untagged run still runs (see above)
            logger.warning("run %s queued without harvester tags: %s", run.run_id, error)
            tags = {}
        if tags:
            self._instance.add_run_tags(run.run_id, tags)
        return super().submit_run(context)


def missing_harvest_tags(
    tags: Mapping[str, str],
    registered: Callable[[], list[str]] | None = None,
    base_urls: Callable[[set[str]], Mapping[str, str]] | None = None,
) -> dict[str, str]:
    """The harvester and source tags a run's partitions imply and its tags lack; a run over
    several harvesters (or servers) gets the value naming them all."""
    if HARVESTER_TAG in tags and SOURCE_TAG in tags:
        return {}
    harvesters = harvesters_of(tags, registered or list)
    if not harvesters:
        return {}
    missing: dict[str, str] = {}
    if HARVESTER_TAG not in tags:
        missing[HARVESTER_TAG] = several_tag(harvesters)
    if SOURCE_TAG not in tags and base_urls is not None:
        urls = base_urls(harvesters)
        if harvesters <= urls.keys():
            missing[SOURCE_TAG] = several_tag({source_tag(urls[h]) for h in harvesters})
    return missing


def _base_urls(run_id: str, harvester_ids: set[str]) -> dict[str, str]:
    """The harvesters' base URLs from the state store; none when it does not answer in time
    (down, restarting, locked): the run still gets its harvester tag, which its partitions
    name."""
    try:
        return read_base_urls(
            PipelineResource().settings().state_db_url,
            harvester_ids,
            timeout_seconds=STATE_STORE_TIMEOUT_SECONDS,
        )
    except Exception as error:  # noqa: BLE001 - a run without its server tag still runs
        logger.warning("run %s queued without its server tag: %s", run_id, error)
        return {}
