"""What Dagster keeps of the harvesters' finished runs.

Every run leaves its run row, its event log (a SQLite file of its own on the default
instance) and its captured logs: ~0.35 MB a run, ~3 GB a year for a harvester on the hourly
schedule, for good. A run can go once nothing the UI shows depends on it: each asset
partition it materialised (or, failed, meant to) has been materialised by a later run, so
the partition's status, metadata and checks come from that one. Deleted sooner, its
partitions would look never harvested, and automation would harvest them again.

The `prune_run_history_job` does it, daily on its schedule (prune_runs.py), not inside a
harvest: at 300 hourly harvesters, ~7,200 runs a day held one harvest's step for minutes.
Runs go in batches, their events first: a prune stopped anywhere leaves no event of a
deleted run, and the next one goes on with what is left.

The project's other runs (the prune's own, one a day; reconcile_sources; register_harvester;
a run of a harvest job that names no harvester) hold no partition a harvest needs: of each
job, the latest `KEEP_LAST_RUNS_PER_JOB` stay, and its latest failure, as the UI's job page
would show them; older ones go after the same `keep_days`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial

import dagster as dg
import sqlalchemy as sa
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log import SqlEventLogStorage
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
from dagster._core.storage.runs import SqlRunStorage
from dagster._core.storage.runs.schema import RunsTable, RunTagsTable
from dagster._serdes import deserialize_value

from oai_pipeline.dagster_event_log import delete_events_of_runs
from oai_pipeline.defs.partitions import HARVESTER, harvesters_of
from oai_pipeline.pipeline.frames import STAGE_ASSETS

logger = logging.getLogger(__name__)

_FAILURE = dg.DagsterRunStatus.FAILURE
_FINISHED = [dg.DagsterRunStatus.SUCCESS, _FAILURE, dg.DagsterRunStatus.CANCELED]
_ASSET_EVENTS = {
    dg.DagsterEventType.ASSET_MATERIALIZATION,
    dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
    dg.DagsterEventType.ASSET_FAILED_TO_MATERIALIZE,
}
# Runs, and materialisations, read per query; runs deleted per transaction.
PAGE = 500
# Finished runs of each of the project's other jobs kept, whatever their age: a month of the
# daily prune, half a year of the weekly reconcile.
KEEP_LAST_RUNS_PER_JOB = 30


@dataclass
class RunHistoryPruned:
    deleted: dict[str, list[str]] = field(default_factory=dict)  # harvester -> run ids
    # job -> run ids, of the runs of `jobs` that name no harvester
    deleted_by_job: dict[str, list[str]] = field(default_factory=dict)
    kept: int = 0  # old enough, but the latest word on one of their partitions (or job)
    more_left: bool = False  # stopped at the limit: the next prune goes on

    def counts(self) -> dict[str, int]:
        return {harvester: len(runs) for harvester, runs in self.deleted.items()}

    def job_counts(self) -> dict[str, int]:
        return {job: len(runs) for job, runs in self.deleted_by_job.items()}

    @property
    def total(self) -> int:
        return sum(map(len, self.deleted.values())) + sum(map(len, self.deleted_by_job.values()))


def prune_run_history(
    instance: dg.DagsterInstance,
    keep_days: int,
    registered: Collection[str],
    *,
    harvester_ids: Collection[str] | None = None,
    jobs: Collection[str] = (),
    now: datetime | None = None,
    limit: int | None = None,
) -> RunHistoryPruned:
    """Delete the harvest runs (of `harvester_ids`, default all) that finished more than
    `keep_days` ago (0: keep all) and were superseded, at most `limit` of them (None: all).
    A run of a harvester not `registered` need not be: its partitions went with it.
    Without `harvester_ids`, the runs of `jobs` that name no harvester go too, once as old,
    but for the latest few of each job and its latest failure."""
    pruned = RunHistoryPruned()
    if keep_days <= 0:
        return pruned
    finished_before = (now or datetime.now(UTC)) - timedelta(days=keep_days)
    known = partial(instance.get_dynamic_partitions, HARVESTER)
    old: list[tuple[str, set[str], dg.RunRecord]] = []  # (harvester or job, harvesters, run)
    for run in _old_runs(instance, finished_before):
        harvesters = harvesters_of(run.dagster_run.tags, known)
        if harvesters and (harvester_ids is None or harvesters & set(harvester_ids)):
            old.append((min(harvesters), harvesters, run))
        elif not harvesters and harvester_ids is None and run.dagster_run.job_name in jobs:
            old.append((run.dagster_run.job_name, set(), run))
    # Each window's latest run stays for good: asked of each run, they would be asked again
    # every time. Asked once of the partitions, that takes a query an asset.
    latest = _latest_materialisations(instance) if old else _Latest({}, set())
    if latest is None:
        logger.warning("Dagster runs not pruned: the instance's event log is not SQL")
        return pruned
    job_runs_kept = _job_runs_kept(instance, {owner for owner, hs, _ in old if not hs})
    # A failure stays until each partition it meant to materialise was materialised since.
    failed = [
        run
        for _, harvesters, run in old
        if harvesters & set(registered)
        and run.dagster_run.status != dg.DagsterRunStatus.SUCCESS
        and run.dagster_run.run_id not in latest.runs
    ]
    superseded = _superseded_runs(instance, failed, latest)
    batch: list[tuple[str, str, bool]] = []  # (harvester or job, run id, of a job)
    for owner, harvesters, run in old:
        run_id = run.dagster_run.run_id
        if harvesters:
            keep = bool(harvesters & set(registered)) and (
                run_id in latest.runs
                or (
                    run.dagster_run.status != dg.DagsterRunStatus.SUCCESS
                    and run_id not in superseded
                )
            )
        else:  # a run of another job may still hold a partition (one of an odd key)
            keep = run_id in job_runs_kept or run_id in latest.runs
        if keep:
            pruned.kept += 1
            continue
        if limit is not None and pruned.total + len(batch) >= limit:
            pruned.more_left = True
            break
        batch.append((owner, run_id, not harvesters))
        if len(batch) == PAGE:
            _delete_runs(instance, batch, pruned)
            batch = []
    _delete_runs(instance, batch, pruned)
    return pruned


def _job_runs_kept(instance: dg.DagsterInstance, jobs: Collection[str]) -> set[str]:
    """Of each job, its latest finished runs and its latest failure: what its page in the UI
    shows first, and why it last failed, however long ago."""
    kept: set[str] = set()
    for job in jobs:
        for statuses, limit in ((_FINISHED, KEEP_LAST_RUNS_PER_JOB), ([_FAILURE], 1)):
            if limit <= 0:  # Dagster reads a limit of 0 as none
                continue
            records = instance.get_run_records(
                dg.RunsFilter(job_name=job, statuses=statuses), limit=limit
            )
            kept.update(record.dagster_run.run_id for record in records)
    return kept


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


@dataclass
class _Latest:
    """Each asset partition's latest materialisation (its storage id), and the runs that made
    them: read once a prune."""

    ids: dict[dg.AssetKey, Mapping[str, int]]  # asset -> partition -> storage id
    runs: set[str]


def _latest_materialisations(instance: dg.DagsterInstance) -> _Latest | None:
    """The latest materialisation of each partition of the four assets; None from an event
    log that is not Dagster's SQL one (SQLite, PostgreSQL, MySQL).

    Read as (id, run id) rows of the event log's index: a materialisation read as a record
    carries its metadata (its error preview), and a year of daily windows took ~5 s."""
    storage = instance.event_log_storage
    if not isinstance(storage, SqlEventLogStorage):
        return None
    latest = _Latest({}, set())
    for asset_key in map(dg.AssetKey, STAGE_ASSETS):
        ids = latest.ids[asset_key] = instance.get_latest_storage_id_by_partition(
            asset_key, dg.DagsterEventType.ASSET_MATERIALIZATION
        )
        for _, run_id, _ in _events(storage, list(ids.values())):
            latest.runs.add(run_id)
    return latest


def _events(storage: SqlEventLogStorage, ids: Sequence[int]) -> Iterator[tuple[int, str, float]]:
    """(storage id, run id, timestamp) of the events of the index with these ids."""
    table = SqlEventLogStorageTable
    for start in range(0, len(ids), PAGE):
        query = sa.select(table.c.id, table.c.run_id, table.c.timestamp).where(
            table.c.id.in_(ids[start : start + PAGE])
        )
        with storage.index_connection() as connection:
            for storage_id, run_id, stamp in connection.execute(query):
                yield storage_id, run_id, stamp.replace(tzinfo=UTC).timestamp()


def _superseded_runs(
    instance: dg.DagsterInstance, runs: Sequence[dg.RunRecord], latest: _Latest
) -> set[str]:
    """The runs every asset partition of which (materialised, planned or failed) was
    materialised since by another run. (Storage ids cannot say which came later: on SQLite
    a run's own event log numbers its events apart from the index.)

    Read a batch of runs at a time from the index, which holds every asset event of a run:
    asked run by run, ~9 queries each, 500 failures kept took ~10 s a prune on PostgreSQL."""
    storage = instance.event_log_storage
    assert isinstance(storage, SqlEventLogStorage)  # as _latest_materialisations found
    superseded: set[str] = set()
    for start in range(0, len(runs), PAGE):
        batch = {run.dagster_run.run_id: run for run in runs[start : start + PAGE]}
        needed: dict[str, list[int]] = {}  # run -> the latest materialisations of its partitions
        for run_id, partitions in _partitions_of_runs(storage, list(batch)).items():
            ids = [latest.ids.get(asset, {}).get(partition) for asset, partition in partitions]
            if None not in ids:  # else a partition only this run (failing) meant to materialise
                needed[run_id] = ids  # type: ignore[assignment]
        made = {
            storage_id: (run_id, stamp)
            for storage_id, run_id, stamp in _events(
                storage, sorted({i for ids in needed.values() for i in ids})
            )
        }
        for run_id, ids in needed.items():
            started = batch[run_id].create_timestamp.timestamp()
            if all(i in made and made[i][0] != run_id and made[i][1] > started for i in ids):
                superseded.add(run_id)
    return superseded


def _partitions_of_runs(
    storage: SqlEventLogStorage, run_ids: list[str]
) -> dict[str, set[tuple[dg.AssetKey, str]]]:
    """The (asset, partition) each run materialised, planned or failed to: none for a run
    that had no asset event. An event's body is read only when its partition column is
    empty: a range run's planned event, which names the range."""
    table = SqlEventLogStorageTable
    body = sa.case((table.c.partition.is_(None), table.c.event), else_=sa.null())
    query = sa.select(table.c.run_id, table.c.asset_key, table.c.partition, body).where(
        table.c.run_id.in_(run_ids),
        table.c.dagster_event_type.in_([event_type.value for event_type in _ASSET_EVENTS]),
        table.c.asset_key.is_not(None),
    )
    partitions: dict[str, set[tuple[dg.AssetKey, str]]] = {run_id: set() for run_id in run_ids}
    with storage.index_connection() as connection:
        rows = connection.execute(query).all()
    for run_id, asset_key, partition, event in rows:
        asset = dg.AssetKey.from_db_string(asset_key)
        if partition is not None:
            partitions[run_id].add((asset, partition))
        elif event is not None:
            dagster_event = deserialize_value(event, EventLogEntry).dagster_event
            if dagster_event is not None:
                partitions[run_id].update((asset, p) for p in _partitions(dagster_event))
    return partitions


def _partitions(event: dg.DagsterEvent) -> list[str]:
    """The partitions an asset event is about: one, or the range a single run planned."""
    if event.partition is not None:
        return [event.partition]
    subset = getattr(event.event_specific_data, "partitions_subset", None)
    return list(subset.get_partition_keys()) if subset is not None else []


def _delete_runs(
    instance: dg.DagsterInstance, batch: Sequence[tuple[str, str, bool]], pruned: RunHistoryPruned
) -> None:
    """What `instance.delete_run` deletes of each run, and its captured logs, for a batch of
    (harvester or job, run id, of a job) at once: one transaction per database instead of a
    few a run. The events go first: stopped between the two, a run is left without events,
    and the next prune deletes it (superseded, as before). Its tags go with it, as Dagster's
    SQLite run storage deletes them (foreign keys do not cascade there)."""
    if not batch:
        return
    run_ids = [run_id for _, run_id, _ in batch]
    delete_events_of_runs(instance.event_log_storage, run_ids)
    runs = instance.run_storage
    if isinstance(runs, SqlRunStorage):
        with runs.connect() as connection:
            connection.execute(RunTagsTable.delete().where(RunTagsTable.c.run_id.in_(run_ids)))
            connection.execute(RunsTable.delete().where(RunsTable.c.run_id.in_(run_ids)))
    else:
        for run_id in run_ids:
            runs.delete_run(run_id)
    for owner, run_id, of_job in batch:
        (pruned.deleted_by_job if of_job else pruned.deleted).setdefault(owner, []).append(run_id)
        try:
            instance.compute_log_manager.delete_logs(prefix=[run_id])
        except Exception:  # noqa: BLE001 - a log store that cannot delete keeps them; the run went
            logger.warning(
                "the captured logs of run %s could not be deleted", run_id, exc_info=True
            )
