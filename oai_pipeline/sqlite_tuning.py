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
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event, exc, make_url
from sqlalchemy.engine import ExceptionContext

from oai_pipeline.errors import disk_advice, user_name

logger = logging.getLogger(__name__)

WAL_AUTOCHECKPOINT_PAGES = 16384  # of 4 KB
CACHE_KIB = 16384


def sync_at_checkpoints(cursor: Any) -> None:
    """``synchronous=NORMAL`` on a new connection (a DB-API cursor of sqlite3)."""
    cursor.execute("PRAGMA synchronous=NORMAL")


def use_wal(cursor: Any, wait_seconds: float) -> None:
    """Switch the file to WAL (it stays so), waiting up to `wait_seconds` for the lock.

    Changing the journal mode needs the file to itself and, unlike a write, fails at once
    when another connection has it open instead of waiting on the busy timeout: two
    processes opening a new file together (two test workers, `dagster dev`'s webserver and
    daemon on a new home) had one fail with "database is locked". Once switched, reading the
    mode takes no lock, so only the first openers of a file ever retry."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


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


def _read_only_file_system(folder: Path) -> bool:
    """Whether the folder is on a file system mounted read-only: making the file writable,
    or running as its owner, cannot help there."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _refusal(message: str, path: Path) -> int | None:
    """The errno of a write the machine refused, as SQLite words it; None for other errors."""
    if message == "database or disk is full":
        return errno.ENOSPC
    folder = path.parent
    not_writable = errno.EROFS if _read_only_file_system(folder) else errno.EACCES
    if message.startswith("attempt to write a readonly database"):
        return not_writable
    if message == "unable to open database file" and folder.is_dir():
        return None if os.access(folder, os.W_OK) else not_writable
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
        explained = refused_write_text(str(original), path)
        if explained is None:
            return None
        error = sqlite3.OperationalError(explained)
        return exc.OperationalError(context.statement, context.parameters, error)


def refused_write_text(message: str, path: Path) -> str | None:
    """SQLite's `message` about the database at `path` with the file and the cure, when it
    is the disk refusing a write (full, read-only, not writable); None for other errors."""
    number = _refusal(message, path)
    if number is None:
        return None
    if number == errno.ENOSPC:
        where = f"the file system holding {path} is full"
    elif number == errno.EROFS:
        where = f"the file system holding {path} is mounted read-only"
    else:  # SQLite writes its -wal and -shm files beside the database, even to read
        where = f"{path} or its folder is not writable"
    return f"{message}: {where}; {disk_advice(number)}"


# -- reading a home this process cannot write -------------------------------------------------
#
# SQLite in WAL mode writes beside a database even to read it: it creates the -wal and -shm
# files, or takes locks in the -shm. On a home restored on read-only media, mounted read-only
# into a monitoring container, or owned by the harvest's user, the commands that only read
# (status, the listings) open the file read-only instead:
#
# - `mode=ro` reads through the -wal and -shm that are there (SQLite 3.22 and later use a
#   -shm it cannot write): the commits of a harvest still in the -wal are seen, and a running
#   harvest's are read consistently.
# - `immutable=1` when there is neither (a database closed cleanly), or `mode=ro` fails on a
#   -wal without commits: SQLite reads the file as it is, without locks, and creates nothing.
#   It ignores a -wal, so it is never used when one holds commits (a -wal without its -shm
#   is refused in one line); and it does not see what a writer changes after it opened the
#   file, or a checkpoint copying pages into the file meanwhile: fine for one command that
#   reads once, never for a harvest (the commands that write open the file as before, and
#   fail with `explain_refused_writes`'s line).

_noted_folders: set[Path] = set()


def unwritable_sqlite_file(url: str) -> Path | None:
    """The SQLite file `url` names if it exists and this process cannot write it or create
    files beside it (a read-only file system, another user's folder); else None (a URL of
    PostgreSQL, of memory, a URI filename the user wrote, a file not created yet)."""
    try:
        parsed = make_url(url)
    except exc.ArgumentError:
        return None
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if database.startswith("file:"):
        return None
    path = Path(database).expanduser()
    if not path.is_file():
        return None
    writable = os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
    return None if writable else path


def _uri(path: Path, parameter: str) -> str:
    return f"{path.absolute().as_uri()}?{parameter}"


def _wal_holds_commits(path: Path) -> bool:
    with suppress(OSError):
        return os.stat(f"{path}-wal").st_size > 0
    return False


def read_only_connector(path: Path, *, timeout: float) -> Callable[[], sqlite3.Connection]:
    """A `creator` for an engine that reads the SQLite file at `path` without writing
    anything (see above); says once per folder, on stderr, that what is shown is read so."""

    def connect() -> sqlite3.Connection:
        connection = _open_read_only(path, timeout)
        if path.parent not in _noted_folders:
            _noted_folders.add(path.parent)
            logger.warning(
                "%s cannot be written by %s (a read-only home): its databases are shown as "
                "they are, which may be behind a harvest running now; a run whose process is "
                "gone still shows as running",
                path.parent,
                user_name(),
            )
        return connection

    return connect


def _open_read_only(path: Path, timeout: float) -> sqlite3.Connection:
    """`mode=ro` where a -shm or a -wal with commits is there (a harvest running, or one
    killed): it reads the commits through the -wal. Else `immutable=1`, which creates
    nothing (`mode=ro` would leave an empty -wal and -shm where it may create them)."""
    in_wal = _wal_holds_commits(path)
    if in_wal or Path(f"{path}-shm").exists():
        connection = sqlite3.connect(
            _uri(path, "mode=ro"), uri=True, timeout=timeout, check_same_thread=False
        )
        try:
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return connection
        except sqlite3.OperationalError:  # no -shm, and none can be made
            connection.close()
    if in_wal:  # immutable=1 would not see them
        raise sqlite3.OperationalError(
            f"{path}-wal holds changes not yet in the database, which SQLite cannot read "
            f"where it cannot write without the {path.name}-shm file beside it: copy the "
            "folder somewhere writable and read the copy, or run as its owner (which moves "
            "the changes into the database)"
        )
    return sqlite3.connect(
        _uri(path, "immutable=1"), uri=True, timeout=timeout, check_same_thread=False
    )
