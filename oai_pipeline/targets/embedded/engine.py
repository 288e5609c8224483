"""A SQLAlchemy engine for the embedded target: SQLite (WAL, foreign keys) or PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from oai_pipeline.compiled_statements import new_engine
from oai_pipeline.errors import (
    ConfigurationError,
    database_error_text,
    name_database_in_errors,
    without_password,
)
from oai_pipeline.json_codec import ENGINE_JSON
from oai_pipeline.sqlite_tuning import (
    explain_refused_writes,
    read_only_connector,
    release_lock_on_interrupt,
    tune_wal,
    use_wal,
)

# Execution option of a read-only transaction: on SQLite it never waits for a writer (WAL).
READ_ONLY = "target_read_only"
_BUSY_SECONDS = 30  # a write waits this long for another writer's transaction


def _sqlite_file(url: sa.URL) -> Path | None:
    database = url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def sqlite_file_missing(url: str) -> bool:
    """Whether the URL names a SQLite file not created yet: no record was ever written."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        return False
    if parsed.get_backend_name() != "sqlite":
        return False
    path = _sqlite_file(parsed)
    return path is not None and not path.expanduser().exists()


def create_target_engine(url: str, *, read_only_file: Path | None = None) -> sa.Engine:
    """An engine whose transactions (and SAVEPOINTs) behave the same on SQLite and PostgreSQL.

    `read_only_file`: the SQLite file, opened read-only (`read_only_connector`) by a command
    that only reads a home it cannot write."""
    try:
        parsed = sa.make_url(url)
        # A server's connections are pinged at checkout, as the state store's: a restarted
        # PostgreSQL leaves the pooled ones dead, and the next batch failed on one.
        ping = {} if parsed.get_backend_name() == "sqlite" else {"pool_pre_ping": True}
        if read_only_file is not None:
            ping = {"creator": read_only_connector(read_only_file, timeout=30)}
        engine = new_engine(parsed, **ping, **ENGINE_JSON)
    except (sa.exc.ArgumentError, ImportError, ValueError) as error:
        shown = without_password(url)
        reason = database_error_text(error)
        raise ConfigurationError(f"target database URL {shown} is not usable: {reason}") from None
    if engine.dialect.name == "sqlite" and read_only_file is not None:
        _configure_sqlite(engine, wal=False, read_only=True)
        explain_refused_writes(engine)
    elif engine.dialect.name == "sqlite":
        path = _sqlite_file(parsed)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise ConfigurationError(
                    f"cannot create the folder of the target database {path}: {error.strerror}"
                ) from None
        _configure_sqlite(engine, wal=path is not None)
        release_lock_on_interrupt(engine)
        explain_refused_writes(engine)
    name_database_in_errors(engine, "target")
    return engine


def _configure_sqlite(engine: sa.Engine, *, wal: bool, read_only: bool = False) -> None:
    """pysqlite's own transaction handling breaks SAVEPOINT: SQLAlchemy's documented recipe.

    The driver is put in autocommit mode and every transaction is begun explicitly with
    BEGIN IMMEDIATE, which also takes the write lock up front, so two writers wait for each
    other (busy timeout) instead of failing on a lock upgrade. A `read_only` engine (a file
    opened read-only) begins every transaction deferred: it takes no write lock.
    """

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={_BUSY_SECONDS * 1000}")
        if wal:
            use_wal(cursor, _BUSY_SECONDS)
            tune_wal(cursor)
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        reads = read_only or connection.get_execution_options().get(READ_ONLY, False)
        connection.exec_driver_sql("BEGIN DEFERRED" if reads else "BEGIN IMMEDIATE")
