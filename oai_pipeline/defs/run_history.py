"""What Dagster keeps of a harvester's finished runs.

Every run leaves its run row, its event log (a SQLite file of its own on the default
instance) and its captured logs: ~0.35 MB a run, ~3 GB a year for a harvester on the hourly
schedule, for good. A run can go once nothing the UI shows depends on it: each asset
partition it materialised (or, failed, meant to) has been materialised by a later run, so
the partition's status, metadata and checks come from that one. Deleted sooner, its
partitions would look never harvested, and automation would harvest them again.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import dagster as dg

from oai_pipeline.defs.tags import HARVESTER_TAG, PARTITION_HARVESTER_TAG

logger = logging.getLogger(__name__)

_FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
_ASSET_EVENTS = {
    dg.DagsterEventType.ASSET_MATERIALIZATION,
    dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
    dg.DagsterEventType.ASSET_FAILED_TO_MATERIALIZE,
}
# Runs looked at per call: a backlog (a first prune after years) drains over a few harvests.
BATCH = 200


@dataclass
class RunHistoryPruned:
    harvester_id: str
    deleted: list[str] = field(default_factory=list)  # Dagster run ids
    kept: int = 0  # old enough, but the latest word on one of their partitions


def prune_run_history(
    instance: dg.DagsterInstance,
    harvester_id: str,
    keep_days: int,
    *,
    registered: bool = True,
    now: datetime | None = None,
) -> RunHistoryPruned:
    """Delete the harvester's Dagster runs that finished more than `keep_days` ago (0: keep
    all) and were superseded; runs of a harvester no longer `registered` need not be, its
    partitions went with it."""
    pruned = RunHistoryPruned(harvester_id)
    if keep_days <= 0:
        return pruned
    finished_before = (now or datetime.now(UTC)) - timedelta(days=keep_days)
    for run in _old_runs(instance, harvester_id, finished_before):
        if registered and not _superseded(instance, run):
            pruned.kept += 1
            continue
        _delete_run(instance, run.dagster_run.run_id)
        pruned.deleted.append(run.dagster_run.run_id)
    return pruned


def _old_runs(
    instance: dg.DagsterInstance, harvester_id: str, before: datetime
) -> list[dg.RunRecord]:
    runs: dict[str, dg.RunRecord] = {}
    for tag in (HARVESTER_TAG, PARTITION_HARVESTER_TAG):
        records = instance.get_run_records(
            filters=dg.RunsFilter(
                tags={tag: harvester_id}, statuses=_FINISHED, updated_before=before
            ),
            limit=BATCH,
            ascending=True,
        )
        runs.update((record.dagster_run.run_id, record) for record in records)
    return list(runs.values())


def _superseded(instance: dg.DagsterInstance, run: dg.RunRecord) -> bool:
    """Whether every asset partition the run materialised, planned or failed was
    materialised since by another run. (Storage ids cannot say which came later: on SQLite a
    run's own event log numbers its events apart from the index.)"""
    run_id = run.dagster_run.run_id
    partitions_of_run: dict[dg.AssetKey, set[str]] = defaultdict(set)
    for record in instance.get_records_for_run(run_id, of_type=_ASSET_EVENTS).records:
        event = record.event_log_entry.dagster_event
        if event is not None and event.asset_key is not None:
            partitions_of_run[event.asset_key].update(_partitions(event))
    started = run.create_timestamp.timestamp()
    for asset_key, partitions in partitions_of_run.items():
        latest = instance.get_latest_storage_id_by_partition(
            asset_key, dg.DagsterEventType.ASSET_MATERIALIZATION, partitions
        )
        if set(latest) != partitions:
            return False  # a partition only this run (failing) meant to materialise
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=asset_key, storage_ids=list(latest.values())),
            limit=len(latest),
        ).records
        if len(records) != len(latest) or any(
            r.run_id == run_id or r.timestamp <= started for r in records
        ):
            return False
    return True


def _partitions(event: dg.DagsterEvent) -> list[str]:
    """The partitions an asset event is about: one, or the range a single run planned."""
    if event.partition is not None:
        return [event.partition]
    subset = getattr(event.event_specific_data, "partitions_subset", None)
    return list(subset.get_partition_keys()) if subset is not None else []


def _delete_run(instance: dg.DagsterInstance, run_id: str) -> None:
    """The run, its events (with the shipped event log storage, its file) and its captured
    logs."""
    instance.delete_run(run_id)
    try:
        instance.compute_log_manager.delete_logs(prefix=[run_id])
    except Exception:  # noqa: BLE001 - a log store that cannot delete keeps them; the run went
        logger.warning("the captured logs of run %s could not be deleted", run_id, exc_info=True)


def harvesters_with_runs(instance: dg.DagsterInstance) -> set[str]:
    """Every harvester a run of the instance names, registered or long deleted."""
    tags = instance.get_run_tags(tag_keys=[HARVESTER_TAG, PARTITION_HARVESTER_TAG])
    return {value for _key, values in tags for value in values}
