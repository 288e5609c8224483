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
import sqlalchemy as sa
from dagster._core.storage.event_log import SqlEventLogStorage
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable

from oai_pipeline.defs.partitions import HARVESTER_TAG, PARTITION_HARVESTER_TAG, split_key
from oai_pipeline.pipeline.frames import STAGE_ASSETS

logger = logging.getLogger(__name__)

_FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
_ASSET_EVENTS = {
    dg.DagsterEventType.ASSET_MATERIALIZATION,
    dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
    dg.DagsterEventType.ASSET_FAILED_TO_MATERIALIZE,
}
# Runs, and materialisations, read per query.
PAGE = 500


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
    old = _old_runs(instance, harvester_id, finished_before)
    # Each window's latest run stays for good: asked of each run, the oldest of them would be
    # asked again by every harvest. Asked once of the partitions, that takes a query an asset.
    holding = _latest_runs(instance, harvester_id) if registered and old else set()
    if holding is None:
        logger.warning("Dagster runs not pruned: the instance's event log is not SQL")
        return pruned
    for run in old:
        run_id = run.dagster_run.run_id
        if run_id in holding or (
            registered
            and run.dagster_run.status != dg.DagsterRunStatus.SUCCESS
            and not _superseded(instance, run)
        ):
            pruned.kept += 1
            continue
        _delete_run(instance, run_id)
        pruned.deleted.append(run_id)
    return pruned


def _old_runs(
    instance: dg.DagsterInstance, harvester_id: str, before: datetime
) -> list[dg.RunRecord]:
    runs: dict[str, dg.RunRecord] = {}
    for tag in (HARVESTER_TAG, PARTITION_HARVESTER_TAG):
        cursor = None
        while True:
            records = instance.get_run_records(
                filters=dg.RunsFilter(
                    tags={tag: harvester_id}, statuses=_FINISHED, updated_before=before
                ),
                limit=PAGE,
                cursor=cursor,
            )
            runs.update((record.dagster_run.run_id, record) for record in records)
            if len(records) < PAGE:
                break
            cursor = records[-1].dagster_run.run_id
    return list(runs.values())


def _latest_runs(instance: dg.DagsterInstance, harvester_id: str) -> set[str] | None:
    """The runs that made the latest materialisation of one of the harvester's partitions;
    None from an event log that is not Dagster's SQL one (SQLite, PostgreSQL, MySQL).

    Read as (id, run id) rows of the event log's index: a materialisation read as a record
    carries its metadata (its error preview), and a year of daily windows took ~5 s."""
    storage = instance.event_log_storage
    if not isinstance(storage, SqlEventLogStorage):
        return None
    runs: set[str] = set()
    for asset_key in map(dg.AssetKey, STAGE_ASSETS):
        latest = instance.get_latest_storage_id_by_partition(
            asset_key, dg.DagsterEventType.ASSET_MATERIALIZATION
        )
        ids = [i for key, i in latest.items() if split_key(key)[0] == harvester_id]
        for start in range(0, len(ids), PAGE):
            query = sa.select(SqlEventLogStorageTable.c.run_id).where(
                SqlEventLogStorageTable.c.id.in_(ids[start : start + PAGE])
            )
            with storage.index_connection() as connection:
                runs.update(connection.execute(query).scalars())
    return runs


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
