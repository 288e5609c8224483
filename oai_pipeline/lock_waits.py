"""How long a write waits for another writer's transaction, and a write that gave up
waiting, the same on SQLite and PostgreSQL.

SQLite locks the whole file for one writer: a write waits its `busy_timeout`, then fails
with `database is locked`. PostgreSQL locks rows: a write waits for one writing the same
rows, by default as long as that transaction lasts; with a `lock_timeout` it fails with
LockNotAvailable (SQLSTATE 55P03). A sensor's tick gives a short wait on both, and leaves
the write to its next tick when it gives up (`is_lock_timeout`).
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from psycopg2.errors import LockNotAvailable
from sqlalchemy import Engine, event, exc
from sqlalchemy.engine import ExceptionContext

from oai_pipeline.errors import PipelineError, without_password

_LOCKED = "database is locked"  # SQLite's whole message
_LOCK_TIMEOUT = "lock timeout"
# PostgreSQL's CONTEXT line: `while updating tuple (0,1) in relation "harvest_runs"`
_RELATION = re.compile(r'in relation "([^"]+)"')


def limit_lock_waits(engine: Engine, seconds: float) -> None:
    """Make each of an engine's connections give up waiting for another writer after
    `seconds`: PostgreSQL's `SET lock_timeout`, leaving the URL's own connect `options` as
    they are; SQLite's `PRAGMA busy_timeout`."""
    milliseconds = max(1, round(seconds * 1000))
    sqlite = engine.url.get_backend_name() == "sqlite"

    @event.listens_for(engine, "connect")
    def _set_lock_timeout(dbapi_connection: Any, _record: Any) -> None:
        if sqlite:
            dbapi_connection.execute(f"PRAGMA busy_timeout = {milliseconds}")
            return
        # Outside a transaction: the pool's rollback on checkin would undo a SET made in one.
        autocommit = dbapi_connection.autocommit
        dbapi_connection.autocommit = True
        cursor = dbapi_connection.cursor()
        cursor.execute(f"SET lock_timeout = {milliseconds}")
        cursor.close()
        dbapi_connection.autocommit = autocommit


def wait_for_writers(engine: Engine, seconds: float | None) -> None:
    """The engine's writes wait `seconds` for another writer's transaction (None: as long
    as the database's own setting says, a URL's `options=-c lock_timeout=...` on
    PostgreSQL), and one that gave up says so in one line (`explain_lock_timeouts`)."""
    if seconds is not None:
        limit_lock_waits(engine, seconds)
    explain_lock_timeouts(engine, seconds)


def _held_text(what: str, where: str, waited_seconds: float | None) -> str:
    held = f"{what}: {where} stayed locked by another writer's transaction (a harvest running)"
    if waited_seconds is not None:
        return f"{held} for {waited_seconds:g} s"
    # The connection's own lock_timeout (the URL's options, the role's or the server's).
    return (
        f"{held} longer than its lock_timeout; run again once that one is done: a harvest "
        "resumes where it stopped"
    )


def explain_lock_timeouts(engine: Engine, waited_seconds: float | None) -> None:
    """Name the database (on PostgreSQL, the table), the wait and its cause when a write
    gave up waiting for another writer: SQLite says only `database is locked`, PostgreSQL
    `canceling statement due to lock timeout` and a CONTEXT line. `waited_seconds` None:
    the wait is PostgreSQL's own `lock_timeout`, and the line says what to do (SQLite's
    driver's default wait is left unexplained)."""
    url = engine.url
    sqlite = url.get_backend_name() == "sqlite"
    if sqlite and (waited_seconds is None or not url.database or url.database == ":memory:"):
        return
    shown = without_password(url.render_as_string(hide_password=False))

    @event.listens_for(engine, "handle_error")
    def _explain(context: ExceptionContext) -> BaseException | None:
        original = context.original_exception
        if sqlite and isinstance(original, sqlite3.OperationalError):
            if str(original) != _LOCKED:
                return None
            error: Exception = sqlite3.OperationalError(
                _held_text(_LOCKED, str(url.database), waited_seconds)
            )
        elif isinstance(original, LockNotAvailable):
            relation = _RELATION.search(str(original))
            # No relation: a lock of the whole store (a migration's, `state.schema.migrate`)
            where = f"a row of {relation[1]} in {shown}" if relation else shown
            error = LockNotAvailable(_held_text(_LOCK_TIMEOUT, where, waited_seconds))
        else:
            return None
        return exc.OperationalError(context.statement, context.parameters, error)


class StoreBusy(PipelineError):
    """A store that could not be opened (migrated to this release's schema) while another
    writer's transaction held it. `reason`: the lock timeout's own line."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def is_lock_timeout(error: BaseException) -> bool:
    """Whether `error` (SQLAlchemy's or the driver's, or a StoreBusy) is a write that gave up
    waiting for another writer's transaction: nothing is wrong, the same write later goes
    through."""
    if isinstance(error, StoreBusy):
        return True
    original = error.orig if isinstance(error, exc.DBAPIError) else error
    if isinstance(original, sqlite3.OperationalError):
        return str(original).startswith(_LOCKED)
    return isinstance(original, LockNotAvailable)
