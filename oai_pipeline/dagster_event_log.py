"""The Dagster instance's SQLite event log, keeping its connections open between events.

Dagster's `SqliteEventLogStorage` creates an engine and opens a connection for every event
it stores, then closes them. That costs ~6 ms an event: the SQLAlchemy statement cache
lives in the engine and starts empty each time, and closing the last connection to a
database checkpoints its WAL. A harvest over a year of daily windows writes ~2,900 events
(a planned and a materialised event per asset and window), so those costs add ~17 s to
every such run, whatever the number of records.

This storage is Dagster's, with one engine per database file kept for the life of the
instance (the index, and the most recently used run shards). Everything else, the files
and their schema included, is unchanged: an instance home can switch between the two
storages either way. Three consequences of open connections are handled here:

- a run shard's WAL is no longer copied back after every event, so the shard's file is
  touched once an event is committed: Dagster's watcher of a run (the UI's live log)
  wakes on that;
- Dagster asks, for every tagged materialisation and every check evaluation, whether a
  table (or the asset key table's column) exists, each time through a new connection
  (~30 % of an event's cost). A table or column once found is remembered: migrations add
  them, none removes one. Absent ones are asked again, so a migration is seen at once;
- a batch of events (Dagster hands over a step's planned and materialised events of a
  range in batches when ``DAGSTER_EVENT_BATCH_SIZE`` is set, which this storage sets unless
  the environment does; the checks hand over their windows' evaluations so too) is
  stored in one transaction per database file instead of two commits an event.
  A failed batch is rolled back whole; Dagster then stores its events
  one by one. The UI's live log shows a batch's events once it is committed;
- a forked child must not use its parent's SQLite connections, so it starts without any;
- connections still open when the process exits are closed then (so the WAL is copied
  back, as after Dagster's own storage).

Commits do not wait for an fsync (``synchronous=NORMAL``, as in the state store and the
embedded target).

Configure it in ``dagster.yaml``; its files go under the instance's folder, as the default
storage's (``history/runs``), or under an optional ``dagster_home``::

    event_log_storage:
      module: oai_pipeline.dagster_event_log
      class: PooledSqliteEventLogStorage
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import dagster as dg
import sqlalchemy as sa
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log import (
    EventLogStorage,
    SqlEventLogStorage,
    SqliteEventLogStorage,
)
from dagster._core.storage.event_log.schema import (
    AssetEventTagsTable,
    ConcurrencySlotsTable,
    PendingStepsTable,
    SqlEventLogStorageTable,
)
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._serdes import ConfigurableClassData

from oai_pipeline.compiled_statements import new_engine
from oai_pipeline.sqlite_tuning import sync_at_checkpoints

# Run shards whose engines stay open; the index shard's always does. A run writes to one
# shard; a UI process reads the few runs someone looks at.
OPEN_RUN_SHARDS = 8
# Events Dagster hands over at most in one batch (a range run's step: one per window).
EVENT_BATCH_SIZE = 1000


class PooledSqliteEventLogStorage(SqliteEventLogStorage):
    """`SqliteEventLogStorage` with an engine per database file kept open (see the module)."""

    def __init__(self, base_dir: str | None, inst_data: ConfigurableClassData | None = None):
        """`base_dir` None: the instance's own folder's, known once it registers (below)."""
        # Before Dagster's __init__: it may already connect (to create the index shard).
        self._engines: OrderedDict[str, sa.Engine] = OrderedDict()
        self._tables_found: set[str] = set()
        self._asset_key_columns_found: set[str] = set()
        # shard -> its connection in the batch's transaction, while a batch is stored
        self._batch: dict[str, sa.Connection] | None = None
        self._pending_inst_data = inst_data
        if base_dir is not None:
            self._open(base_dir)

    def _open(self, base_dir: str) -> None:
        super().__init__(base_dir, inst_data=self._pending_inst_data)
        self._db_lock = threading.RLock()  # held for a whole batch, taken again per event
        _open_storages.add(self)
        # Dagster creates the index's tables only when its file does not exist yet, and
        # completes them on the first event stored. A first start killed meanwhile left it
        # without the dynamic partitions table: every run then failed as it added its
        # harvester's partition, before it could store an event. Completed here, at once.
        with self._connect(INDEX_SHARD_NAME):
            pass
        os.environ.setdefault("DAGSTER_EVENT_BATCH_SIZE", str(EVENT_BATCH_SIZE))

    def register_instance(self, instance: dg.DagsterInstance) -> None:
        """Without `dagster_home`, the files go where Dagster's own storage keeps them: under
        the instance's folder, which is DAGSTER_HOME or, when that is not set, the temporary
        folder `dagster dev` makes (a `dagster.yaml` naming `env: DAGSTER_HOME` stopped the
        instance from loading there)."""
        if not hasattr(self, "_base_dir"):
            self._open(os.path.join(instance.root_directory, "history", "runs"))
        super().register_instance(instance)

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {"dagster_home": dg.Field(dg.StringSource, is_required=False)}

    @classmethod
    def from_config_value(  # type: ignore[override]
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> PooledSqliteEventLogStorage:
        home = config_value.get("dagster_home")
        base_dir = os.path.join(home, "history", "runs") if home else None
        return cls(base_dir, inst_data=inst_data)

    @contextmanager
    def _connect(self, shard: str) -> Iterator[sa.Connection]:
        with self._db_lock:
            engine = self._engine_for(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            if self._batch is None:
                with engine.connect() as connection, connection.begin():
                    yield connection
                return
            connection = self._batch.get(shard)
            if connection is None:
                connection = self._batch[shard] = engine.connect()
                connection.begin()
            yield connection

    def _engine_for(self, shard: str) -> sa.Engine:
        engine = self._engines.get(shard)
        if engine is not None:
            self._engines.move_to_end(shard)
            return engine
        engine = new_engine(
            self.conn_string_for_shard(shard),
            pool_size=1,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
        )
        sa.event.listen(engine, "connect", _on_connect)
        self._engines[shard] = engine
        run_shards = [name for name in self._engines if name != INDEX_SHARD_NAME]
        for name in run_shards[: max(0, len(run_shards) - OPEN_RUN_SHARDS)]:
            self._engines.pop(name).dispose()
        return engine

    def delete_events(self, run_id: str) -> None:
        """A deleted run's shard file goes too (Dagster's own storage leaves one per run, its
        events deleted): deleting old runs is how an instance stops growing."""
        self.delete_events_of_runs([run_id])

    def delete_events_of_runs(self, run_ids: Sequence[str]) -> None:
        """`delete_events` of many runs at once: their index rows in one transaction, their
        shard files removed unopened (opening one checks its schema, then it goes anyway).
        Pruning thousands of old runs a day cost ~50 ms a run one by one, mostly those."""
        with self.index_connection() as connection:
            for run_id in run_ids:
                self.delete_events_for_run(connection, run_id)
        if self.supports_global_concurrency_limits:
            for run_id in run_ids:
                self.free_concurrency_slots_for_run(run_id)
        with self._db_lock:
            for run_id in run_ids:
                engine = self._engines.pop(run_id, None)
                if engine is not None:
                    engine.dispose()
                self._initialized_dbs.discard(run_id)
                for suffix in ("", "-wal", "-shm"):
                    with suppress(FileNotFoundError):
                        os.remove(self.path_for_shard(run_id) + suffix)

    def close_connections(self, wait: float = -1) -> None:
        """Close every open connection: the last one to a database checkpoints its WAL.

        Waits for a query in another thread for at most `wait` seconds (-1: as long as it
        takes), then leaves the connections open.
        """
        if not self._db_lock.acquire(timeout=wait):
            return
        try:
            while self._engines:
                self._engines.popitem()[1].dispose()
        finally:
            self._db_lock.release()

    def forget_connections(self) -> None:
        """Drop the connections without closing them (in a forked child: they are the
        parent's)."""
        for engine in self._engines.values():
            engine.dispose(close=False)
        self._engines.clear()
        self._batch = None
        self._db_lock = threading.RLock()

    def has_table(self, table_name: str) -> bool:
        if table_name not in self._tables_found and super().has_table(table_name):
            self._tables_found.add(table_name)
        return table_name in self._tables_found

    def _has_asset_key_col_on_connection(self, conn: sa.Connection, column_name: str) -> bool:
        if column_name not in self._asset_key_columns_found and (
            super()._has_asset_key_col_on_connection(conn, column_name)
        ):
            self._asset_key_columns_found.add(column_name)
        return column_name in self._asset_key_columns_found

    def wipe(self) -> None:
        self.close_connections()  # before the run shards' files are removed
        self._tables_found.clear()
        self._asset_key_columns_found.clear()
        super().wipe()

    def dispose(self) -> None:
        super().dispose()
        self.close_connections()

    def store_event(self, event: EventLogEntry) -> None:
        super().store_event(event)
        self._touch({event.run_id})

    def store_event_batch(self, events: Sequence[EventLogEntry]) -> None:
        with self._db_lock:
            self._batch = {}
            try:
                for event in events:
                    super().store_event(event)
                for connection in self._batch.values():
                    connection.commit()
            finally:
                for connection in self._batch.values():
                    connection.close()  # rolls back what was not committed
                self._batch = None
        self._touch({event.run_id for event in events})

    def _touch(self, run_ids: set[str]) -> None:
        # Dagster's watcher of a run (the UI's live log) wakes when the shard's file
        # changes. Closing the connection used to change it (the WAL was copied back);
        # now the commit only reaches the WAL, so mark the file changed once committed.
        for run_id in run_ids:
            with suppress(FileNotFoundError):
                os.utime(self.path_for_shard(run_id))


# Runs whose events are deleted per statement: a bound parameter each (SQLite allows 32,766).
DELETE_BATCH = 500


def delete_events_of_runs(storage: EventLogStorage, run_ids: Sequence[str]) -> None:
    """`storage.delete_events` of many runs, in one transaction per `DELETE_BATCH` runs where
    the storage keeps all its events in one database (dagster-postgres, MySQL, consolidated
    SQLite), and the shipped storage's own way on SQLite shards.

    Dagster's deletes a run's rows with two queries a run, twice on those storages (its run
    and index connections are the same database), then asks for its concurrency slots with
    a few more: pruning thousands of runs took ~5 queries a run. The rows deleted are the
    same: the run's events and the tags of its materialisations and observations."""
    if isinstance(storage, PooledSqliteEventLogStorage):
        storage.delete_events_of_runs(run_ids)
        return
    if not isinstance(storage, SqlEventLogStorage) or isinstance(storage, SqliteEventLogStorage):
        for run_id in run_ids:  # one database a run, or not Dagster's SQL
            storage.delete_events(run_id)
        return
    events = SqlEventLogStorageTable
    tagged = [dg.DagsterEventType.ASSET_MATERIALIZATION, dg.DagsterEventType.ASSET_OBSERVATION]
    holding_slots: set[str] = set()
    for start in range(0, len(run_ids), DELETE_BATCH):
        batch = list(run_ids[start : start + DELETE_BATCH])
        with storage.index_transaction() as connection:
            tagged_events = sa.select(events.c.id).where(
                events.c.run_id.in_(batch),
                events.c.dagster_event_type.in_([t.value for t in tagged]),
            )
            connection.execute(
                AssetEventTagsTable.delete().where(
                    AssetEventTagsTable.c.event_id.in_(tagged_events)
                )
            )
            connection.execute(events.delete().where(events.c.run_id.in_(batch)))
            if storage.supports_global_concurrency_limits:
                holding_slots.update(_runs_holding_slots(connection, batch))
    # A finished run holds none; Dagster's own frees them (and hands them on) one run at a time.
    for run_id in sorted(holding_slots):
        storage.free_concurrency_slots_for_run(run_id)


def _runs_holding_slots(connection: sa.Connection, run_ids: list[str]) -> set[str]:
    """The runs that hold a concurrency slot, or wait for one."""
    holding: set[str] = set()
    for table in (ConcurrencySlotsTable, PendingStepsTable):
        query = sa.select(table.c.run_id).where(table.c.run_id.in_(run_ids)).distinct()
        holding.update(connection.execute(query).scalars())
    return holding


def _on_connect(connection: Any, _record: Any) -> None:
    # No fsync per event: Dagster's storage commits each event on its own. (A power loss may
    # undo the latest events; the files stay consistent. SQLite's advice for WAL.)
    sync_at_checkpoints(connection)


_open_storages: weakref.WeakSet[PooledSqliteEventLogStorage] = weakref.WeakSet()


def _forget_connections_in_child() -> None:
    for storage in list(_open_storages):
        storage.forget_connections()


def _close_connections_at_exit() -> None:
    # A process that never disposed of its instance still leaves no WAL behind.
    # (A daemon thread stopped inside a query must not hang the exit.)
    for storage in list(_open_storages):
        storage.close_connections(wait=5)


os.register_at_fork(after_in_child=_forget_connections_in_child)
atexit.register(_close_connections_at_exit)
