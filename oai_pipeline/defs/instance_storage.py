"""Dagster's own storage failing under a command: one line naming DAGSTER_HOME and the cure.

Dagster's SQLite files (runs.db, index.db, schedules.db under DAGSTER_HOME) meet the disk
as ours do (full, read-only, not writable), another process's lock, or damage; a
PostgreSQL instance's server may be gone (dagster-postgres retries, then raises its own
exception over SQLAlchemy's). Either came out as Dagster's traceback, or as a bare
`database is locked` that named no database.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import sqlalchemy as sa
from dagster._core.storage.event_log import SqliteEventLogStorage
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME
from dagster._core.storage.runs import SqliteRunStorage
from sqlalchemy.engine import make_url

from oai_pipeline.errors import PipelineError, database_error_text
from oai_pipeline.sqlite_tuning import refused_write_text

# SQLite's words for a file that is not (or no more) a whole database.
_DAMAGED = ("file is not a database", "database disk image is malformed")


# `doing` of a database failing once the instance is open.
STORAGE_FAILED = "the Dagster instance's database failed"
# `doing` of a database another process holds when a run is to be launched here.
LAUNCH_REFUSED = "cannot launch a run on the Dagster instance"

# How long a launch waits for another process's write on the instance's runs.db or index: a
# daemon's or a run's takes milliseconds (Dagster's own wait is 30 s).
LOCK_WAIT_SECONDS = 2.0


class DagsterStorageError(PipelineError):
    """The Dagster instance's database failed: the operator's to fix, not a bug."""


def database_failure(error: BaseException) -> sa.exc.DBAPIError | None:
    """The database error under `error`: itself, or what dagster-postgres's `too many
    retries` (or another wrapper) was raised from."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, sa.exc.DatabaseError | sa.exc.InterfaceError):
            return seen
        seen = seen.__cause__
    return None


def dagster_home_text() -> str:
    """DAGSTER_HOME as the instance was opened from (`ensure_dagster_home` sets it)."""
    return os.environ.get("DAGSTER_HOME", "")


def storage_failure_text(error: BaseException, database: Path | None = None) -> str:
    """The database's error in one line, with what to do about it (`database`: the file it
    is of, when known)."""
    home = dagster_home_text()
    orig = getattr(error, "orig", None) or error
    reason = database_error_text(orig)
    if type(orig).__module__ != "sqlite3":  # PostgreSQL (dagster-postgres.yaml)
        return (
            f"{reason}; is the Dagster instance's PostgreSQL server running? (the storage "
            f"named in {home}/dagster.yaml)"
        )
    if explained := refused_write_text(reason, Path(home) / "history" / "runs.db"):
        return explained
    if reason.startswith("database is locked"):
        where = database or f"a database in {home}"
        return (
            f"{reason}: another process (the Dagster daemon, `./run.sh dev`, a run) holds a "
            f"write on {where}; run again once it is done"
        )
    if reason.startswith(_DAMAGED):
        return (
            f"{reason}: a database in {home} is damaged; restore the folder from a backup, "
            "or move it aside for a new, empty instance (its run history is then lost)"
        )
    return reason


@contextmanager
def dagster_storage_errors(doing: str) -> Iterator[None]:
    """While Dagster's storage is used for `doing` (e.g. `cannot open the Dagster
    instance`), its database failing is a DagsterStorageError of one line."""
    try:
        with _retries_on_one_line():
            yield
    except Exception as error:
        failure = database_failure(error)
        if failure is None:
            raise
        text = f"{doing} in {dagster_home_text()}: {storage_failure_text(failure)}"
        raise DagsterStorageError(text) from None


def refuse_held_storage(instance: dg.DagsterInstance) -> None:
    """Before a run is launched (in this process, or handed to the webserver): an instance
    whose SQLite runs.db (where the run is stored first) or index (where its events go)
    another process holds a write on made the run wait for Dagster's busy timeout (30 s,
    then again for its events one by one), print SQLAlchemy's statement, fail, and stay
    NOT_STARTED for good. Refused at once instead, naming the file."""
    for database in _sqlite_files(instance):
        _refuse_if_held(database)


def _sqlite_files(instance: dg.DagsterInstance) -> list[Path]:
    """The instance's runs.db and index.db that are SQLite (PostgreSQL: a writer does not
    hold the others back)."""
    files = []
    runs = instance.run_storage
    database = make_url(runs._conn_string).database if isinstance(runs, SqliteRunStorage) else None
    if database:
        files.append(Path(database).absolute())
    events = instance.event_log_storage
    if isinstance(events, SqliteEventLogStorage):
        files.append(Path(events.path_for_shard(INDEX_SHARD_NAME)))
    return files


def _refuse_if_held(database: Path) -> None:
    """A DagsterStorageError naming `database` if another process holds a write on it
    for longer than LOCK_WAIT_SECONDS."""
    try:
        # mode=rw: a missing file is Dagster's to create, not this probe's
        probe = sqlite3.connect(
            f"{database.as_uri()}?mode=rw",
            uri=True,
            timeout=LOCK_WAIT_SECONDS,
            isolation_level=None,
        )
    except sqlite3.Error:
        return  # not opened here: Dagster's own opening says why
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
    except sqlite3.OperationalError as error:
        if not str(error).startswith("database is locked"):
            return  # a full disk, damage: Dagster's own error (`dagster_storage_errors`)
        reason = storage_failure_text(error, database)
        raise DagsterStorageError(f"{LAUNCH_REFUSED} in {dagster_home_text()}: {reason}") from None
    finally:
        probe.close()


class _OneLine(logging.Filter):
    """dagster-postgres logs each retry on the root logger with PostgreSQL's lines (and
    SQLAlchemy's background link): one line each is enough to see it is retrying."""

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith("Retrying failed database"):
            record.msg = " ".join(record.getMessage().split())
            record.args = ()
        return True


@contextmanager
def _retries_on_one_line() -> Iterator[None]:
    root = logging.getLogger()
    one_line = _OneLine()
    root.addFilter(one_line)
    try:
        yield
    finally:
        root.removeFilter(one_line)
