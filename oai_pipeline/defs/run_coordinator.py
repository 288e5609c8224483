"""The run queue, with the harvester and source tags on every harvest run.

The run queue's limits in dagster.yaml (one run per harvester, one per server) key on the
tags the CLI's and the schedules' runs carry. A run launched in the UI names its
partitions only: without the tags it left the queue at once and waited for its
harvester's lease inside one of the four run slots, while other harvesters' runs queued
behind it. Tagged when submitted, it waits in the queue instead.

A tag holds one value, and Dagster's limits match tag keys exactly (no key prefixes). A run
over several harvesters (a UI backfill of a few windows of many harvesters, which Dagster
cuts into one run per window) is tagged `a+b` (`several_tag`), which never matched a run of
`a` alone: both left the queue and one waited for a's lease in a run slot, up to an hour,
then failed. So every harvest run also names each of its harvesters (and servers) under a
key of its own (`one_value_key`: `oai_pipeline/harvester.a`), and the coordinator gives each
such key the configured per-value limit of its base key (`get_run_queue_config`, read by the
daemon at each pass). Dagster lets a run coordinator supply those limits only when they are
set in its own config: dagster.yaml sets them under `run_coordinator.config`, not
`concurrency.runs`, which would replace them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import dagster as dg
from dagster._core.run_coordinator.queued_run_coordinator import RunQueueConfig

from oai_pipeline.defs.partitions import (
    HARVESTER,
    HARVESTER_TAG,
    KEY_DELIMITER,
    ONE_VALUE_SEPARATOR,
    PARTITION_TAG,
    SEVERAL,
    SOURCE_TAG,
    harvesters_of,
    one_value_key,
    several_tag,
    source_tag,
    unread_keys,
)
from oai_pipeline.defs.resources import PipelineResource
from oai_pipeline.state.store import read_base_urls

logger = logging.getLogger(__name__)

# How long a launch waits for the state store's answer (the harvesters' URLs, for the server
# tag) before the run is queued without its server tag: the webserver's launch waits with it.
STATE_STORE_TIMEOUT_SECONDS = 2.0
# How long the run tag keys read for the per-harvester limits are taken as current.
TAG_KEYS_MAX_AGE_SECONDS = 60.0


class HarvestRunCoordinator(dg.QueuedRunCoordinator):
    """Dagster's queued run coordinator, tagging a harvest run that lacks the tags."""

    _warned_of_run_limits = False
    _tag_keys: tuple[float, list[str]] | None = None  # (when read, the keys)

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
        if not tags and (unread := unread_keys(run.tags)):
            logger.warning(
                "run %s queued without harvester tags: %s", run.run_id, _not_a_key(unread[0])
            )
        if tags:
            self._instance.add_run_tags(run.run_id, tags)
        return super().submit_run(context)

    def get_run_queue_config(self) -> RunQueueConfig:
        """The configured limits, and each harvester's and server's own: Dagster's limits
        match tag keys exactly, so every key naming one (`one_value_key`) that runs carry
        gets the per-value limit of its base key. The daemon reads this at each pass."""
        config = super().get_run_queue_config()
        self._warn_of_limits_it_cannot_extend()
        try:
            tag_keys = self._run_tag_keys()
        except Exception as error:  # noqa: BLE001 - the configured limits still hold
            logger.warning("run queue without per-harvester limits: %s", error)
            return config
        extra = one_value_limits(config.tag_concurrency_limits, tag_keys)
        return config._replace(tag_concurrency_limits=[*config.tag_concurrency_limits, *extra])

    def _run_tag_keys(self) -> Sequence[str]:
        """The tag keys of all runs, read at most every TAG_KEYS_MAX_AGE_SECONDS (the read
        scans every run's tags, ~70 ms at a million: years of hourly runs; the daemon asks
        every few seconds), and, read each time, the key of each registered harvester and
        those of the queued runs (which the daemon reads at each pass anyway): the first
        runs of a new harvester or server are held to its limit at once."""
        now = time.monotonic()
        if self._tag_keys is None or now - self._tag_keys[0] >= TAG_KEYS_MAX_AGE_SECONDS:
            self._tag_keys = (now, list(self._instance.get_run_tag_keys()))
        registered = [
            one_value_key(HARVESTER_TAG, harvester_id)
            for harvester_id in self._instance.get_dynamic_partitions(HARVESTER)
        ]
        queued = self._instance.get_runs(
            filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.QUEUED])
        )
        return list(
            dict.fromkeys([*self._tag_keys[1], *registered, *(k for r in queued for k in r.tags)])
        )

    def _warn_of_limits_it_cannot_extend(self) -> None:
        """Say once, in the daemon's log, what `older_queue_limits` finds."""
        if self._warned_of_run_limits:
            return
        if problem := older_queue_limits(self._instance):
            self._warned_of_run_limits = True
            logger.warning(problem)


def older_queue_limits(instance: dg.DagsterInstance) -> str | None:
    """What is wrong with harvest limits set under `concurrency: runs:`, as the dagster.yaml
    of an older oai-pipeline did (kept in DAGSTER_HOME on an upgrade), or None.

    Dagster uses those limits as written: a run over several harvesters does not hold back a
    run of one of them, and without this project's run coordinator (that dagster.yaml names
    none) a run launched in the UI carries no harvester tag either; both leave the queue and
    wait for the harvester's lease in a run slot, then fail after an hour. Nothing else says
    so: the runs only wait."""
    run_settings = (instance.get_settings("concurrency") or {}).get("runs") or {}
    keys = {limit.get("key") for limit in run_settings.get("tag_concurrency_limits") or []}
    if not keys & {HARVESTER_TAG, SOURCE_TAG}:
        return None
    waiting = "runs over several harvesters wait"
    if not isinstance(instance.run_coordinator, HarvestRunCoordinator):
        waiting = "runs launched in the UI and runs over several harvesters wait"
    return (
        "dagster.yaml in DAGSTER_HOME sets the harvest runs' tag_concurrency_limits under "
        f"`concurrency: runs:` (as older oai-pipeline versions did), so {waiting} for a "
        "harvester in a run slot, not in the queue; move them under `run_coordinator: config:` "
        "with the run_coordinator block of the project's dagster.yaml"
    )


def missing_harvest_tags(
    tags: Mapping[str, str],
    registered: Callable[[], list[str]] | None = None,
    base_urls: Callable[[set[str]], Mapping[str, str]] | None = None,
) -> dict[str, str]:
    """The harvester and source tags a run's partitions imply and its tags lack: the value
    naming them all (`several_tag`), and each harvester and server under a key of its own
    (`one_value_key`), which holds it back from, and is held back by, any other run of it."""
    harvesters = harvesters_of(tags, registered or list)
    if not harvesters:
        return {}
    implied = {HARVESTER_TAG: several_tag(harvesters)}
    implied |= {one_value_key(HARVESTER_TAG, h): h for h in harvesters}
    if sources := _sources(tags, harvesters, base_urls):
        implied[SOURCE_TAG] = several_tag(sources)
        implied |= {one_value_key(SOURCE_TAG, s): s for s in sources}
    return {key: value for key, value in implied.items() if key not in tags}


def _sources(
    tags: Mapping[str, str],
    harvesters: set[str],
    base_urls: Callable[[set[str]], Mapping[str, str]] | None,
) -> set[str]:
    """The servers (SOURCE_TAG values) of a run's harvesters: the one the CLI's and the
    schedules' runs name, else from the harvesters' URLs; none when a URL is unknown."""
    named = tags.get(SOURCE_TAG)
    if named and len(harvesters) == 1 and SEVERAL not in named:
        return {named}
    if base_urls is None:
        return set()
    urls = base_urls(harvesters)
    if not harvesters <= urls.keys():
        return set()
    return {source_tag(urls[h]) for h in harvesters}


def one_value_limits(
    limits: Sequence[Mapping[str, Any]], tag_keys: Sequence[str]
) -> list[Mapping[str, Any]]:
    """A limit for each of `tag_keys` naming one harvester or server (`one_value_key`): the
    per-value limit configured for its base key (HARVESTER_TAG, SOURCE_TAG), if any."""
    per_value = {
        limit["key"]: limit["limit"]
        for limit in limits
        if limit["key"] in (HARVESTER_TAG, SOURCE_TAG)
        and isinstance(limit.get("value"), Mapping)
        and limit["value"].get("applyLimitPerUniqueValue")
    }
    return [
        {"key": key, "limit": per_value[base]}
        for key in tag_keys
        for base in per_value
        if key.startswith(base + ONE_VALUE_SEPARATOR)
    ]


def _not_a_key(key: str) -> str:
    """What is wrong with a key that is not harvester|window, and what was likely meant."""
    window, _, harvester_id = key.partition(KEY_DELIMITER)
    meant = f"{harvester_id}{KEY_DELIMITER}{window}"
    hint = f" (did you mean {meant!r}?)" if unread_keys({PARTITION_TAG: meant}) == [] else ""
    return f"partition key {key!r} is not harvester{KEY_DELIMITER}window{hint}"


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
