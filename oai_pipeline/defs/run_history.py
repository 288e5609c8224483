"""What Dagster keeps of the harvesters' finished runs.

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
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial

import dagster as dg
import sqlalchemy as sa
from dagster._core.storage.event_log import SqlEventLogStorage
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable

from oai_pipeline.defs.partitions import HARVESTER, harvesters_of
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
# When a harvest last pruned (the instance's key-value store): once a day is enough, and
# the runs kept (each window's latest) are read again each time.
PRUNED_AT_KEY = "oai_pipeline/run_history_pruned_at"
PRUNE_EVERY = timedelta(days=1)


@dataclass
class RunHistoryPruned:
    deleted: dict[str, list[str]] = field(default_factory=dict)  # harvester -> run ids
    kept: int = 0  # old enough, but the latest word on one of their partitions

    def counts(self) -> dict[str, int]:
        return {harvester: len(runs) for harvester, runs in self.deleted.items()}


def prune_run_history(
    instance: dg.DagsterInstance,
    keep_days: int,
    registered: Collection[str],
    *,
    harvester_ids: Collection[str] | None = None,
    now: datetime | None = None,
) -> RunHistoryPruned:
    """Delete the harvest runs (of `harvester_ids`, default all) that finished more than
    `keep_days` ago (0: keep all) and were superseded. A run of a harvester not `registered`
    need not be: its partitions went with it."""
    pruned = RunHistoryPruned()
    if keep_days <= 0:
        return pruned
    finished_before = (now or datetime.now(UTC)) - timedelta(days=keep_days)
    known = partial(instance.get_dynamic_partitions, HARVESTER)
    old = [
        (min(harvesters), harvesters, run)
        for run in _old_runs(instance, finished_before)
        if (harvesters := harvesters_of(run.dagster_run.tags, known))
        and (harvester_ids is None or harvesters & set(harvester_ids))
    ]
    # Each window's latest run stays for good: asked of each run, they would be asked again
    # every time. Asked once of the partitions, that takes a query an asset.
    holding = _latest_runs(instance) if old else set()
    if holding is None:
        logger.warning("Dagster runs not pruned: the instance's event log is not SQL")
        return pruned
    for harvester_id, harvesters, run in old:
        run_id = run.dagster_run.run_id
        failed = run.dagster_run.status != dg.DagsterRunStatus.SUCCESS
        if harvesters & set(registered) and (
            run_id in holding or (failed and not _superseded(instance, run))
        ):
            pruned.kept += 1
            continue
        _delete_run(instance, run_id)
        pruned.deleted.setdefault(harvester_id, []).append(run_id)
    return pruned


def prune_run_history_daily(
    instance: dg.DagsterInstance, keep_days: int, registered: Callable[[], Collection[str]]
) -> RunHistoryPruned | None:
    """`prune_run_history` of every harvester, unless a harvest did so less than a day ago
    (None then)."""
    now = datetime.now(UTC)
    stored = instance.run_storage.get_cursor_values({PRUNED_AT_KEY}).get(PRUNED_AT_KEY)
    if keep_days <= 0 or (stored and now - datetime.fromisoformat(stored) < PRUNE_EVERY):
        return None
    instance.run_storage.set_cursor_values({PRUNED_AT_KEY: now.isoformat()})
    return prune_run_history(instance, keep_days, registered(), now=now)


def _old_runs(instance: dg.DagsterInstance, before: datetime) -> list[dg.RunRecord]:
    runs: list[dg.RunRecord] = []
    cursor = None
    while True:
        records = instance.get_run_records(
            filters=dg.RunsFilter(statuses=_FINISHED, updated_before=before),
            limit=PAGE,
            cursor=cursor,
        )
        runs.extend(records)
        if len(records) < PAGE:
            return runs
        cursor = records[-1].dagster_run.run_id


def _latest_runs(instance: dg.DagsterInstance) -> set[str] | None:
    """The runs that made the latest materialisation of a partition of the four assets;
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
        ids = list(latest.values())
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
