"""How the state store and the embedded target tune a SQLite file in WAL mode (the
Dagster event log takes the first setting only).

- ``synchronous=NORMAL``: a commit survives a crashed process without an fsync per commit;
  only a power loss can undo the latest commits (SQLite's advice for WAL).
- ``wal_autocheckpoint``: copy the WAL back into the database every 64 MB instead of every
  4 MB. A harvest commits a batch of records at a time and rewrites the same index pages
  in many of them; checkpointing less often copies (and fsyncs) each such page once per
  64 MB instead of once per batch. The WAL file may grow to that size between checkpoints.
- ``cache_size``: 16 MB of pages per connection instead of 2 MB, enough for the index
  pages one batch dirties. Records arrive in datestamp order, so their identifiers land
  all over the indexes; with 2 MB, a batch spilled pages half-way once the tables outgrew
  the cache (staging 200,000 records: 38 s with 2 MB, 31–34 s with 16 or 64 MB).
"""

from __future__ import annotations

import errno
import os
import sqlite3
from contextlib import suppress
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event, exc
from sqlalchemy.engine import ExceptionContext

from oai_pipeline.errors import disk_advice

WAL_AUTOCHECKPOINT_PAGES = 16384  # of 4 KB
CACHE_KIB = 16384


def sync_at_checkpoints(cursor: Any) -> None:
    """``synchronous=NORMAL`` on a new connection (a DB-API cursor of sqlite3)."""
    cursor.execute("PRAGMA synchronous=NORMAL")


def tune_wal(cursor: Any) -> None:
    """Apply the WAL settings to a new connection (a DB-API cursor of sqlite3)."""
    sync_at_checkpoints(cursor)
    cursor.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
    cursor.execute(f"PRAGMA cache_size=-{CACHE_KIB}")  # negative: in KiB


def release_lock_on_interrupt(engine: Engine) -> None:
    """Close the statement's cursor when Ctrl-C or SIGTERM interrupts it. SQLAlchemy treats
    such an interrupt as a lost connection and closes it with the cursor still open; SQLite
    then keeps the half-done transaction, and its write lock, until the cursor is garbage
    collected, which the traceback prevents: the interrupted harvest's own cleanup (the run
    marked stopped, the lease released) waited for that lock, 60 s a write, for minutes."""

    @event.listens_for(engine, "handle_error")
    def _close_cursor(context: ExceptionContext) -> None:
        cursor = getattr(context.execution_context, "cursor", None)
        if cursor is not None and not isinstance(context.original_exception, Exception):
            with suppress(Exception):  # the interrupt is what is raised, not this
                cursor.close()


# Below this many bytes free, SQLite's "disk I/O error" (its -shm or -wal not grown) is
# the file system being full.
_NEARLY_FULL_BYTES = 1 << 20


def _refusal(message: str, path: Path) -> int | None:
    """The errno of a write the machine refused, as SQLite words it; None for other errors."""
    if message == "database or disk is full":
        return errno.ENOSPC
    if message.startswith("attempt to write a readonly database"):
        return errno.EROFS
    folder = path.parent
    if message == "unable to open database file" and folder.is_dir():
        return None if os.access(folder, os.W_OK) else errno.EACCES
    if message == "disk I/O error":
        with suppress(OSError):
            if os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize < _NEARLY_FULL_BYTES:
                return errno.ENOSPC
    return None


def explain_refused_writes(engine: Engine) -> None:
    """Name the file and the cure when the disk refuses a write: SQLite says only
    `database or disk is full` or `attempt to write a readonly database`, which left an
    operator of a harvest (CLI or Dagster) guessing which database, and what to do."""
    database = engine.url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database).expanduser()

    @event.listens_for(engine, "handle_error")
    def _explain(context: ExceptionContext) -> BaseException | None:
        original = context.original_exception
        if not isinstance(original, sqlite3.OperationalError):
            return None
        message = str(original)
        number = _refusal(message, path)
        if number is None:
            return None
        if number == errno.ENOSPC:
            where = f"the file system holding {path} is full"
        else:  # SQLite writes its -wal and -shm files beside the database, even to read
            where = f"{path} or its folder is not writable"
        explained = sqlite3.OperationalError(f"{message}: {where}; {disk_advice(number)}")
        return exc.OperationalError(context.statement, context.parameters, explained)
