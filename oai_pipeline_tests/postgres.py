"""A throwaway PostgreSQL server for tests: initdb in a temp dir, run as an unprivileged user.

PostgreSQL refuses to run as root, so when the tests run as root the server runs as the
`postgres` system user (created if missing) through `runuser`. It listens on a free
loopback port with its unix socket inside the temp dir, and is stopped and removed after.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from oai_pipeline_tests.scratch import memory_folder

_SERVER_USER = "postgres"
_DATABASE = "oai_pipeline_test"


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True):
        return str(candidate)
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_server_user() -> list[str]:
    """The command prefix that runs a server binary as an unprivileged user."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(_SERVER_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", _SERVER_USER],
            check=True,
            capture_output=True,
        )
    return ["runuser", "-u", _SERVER_USER, "--"]


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {result.stderr.strip() or result.stdout}")


@contextmanager
def throwaway_postgres() -> Iterator[str]:
    """Yield a `postgresql+psycopg2://` URL of a fresh database; skip if PostgreSQL is absent."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    prefix = _as_server_user()
    root = Path(tempfile.mkdtemp(prefix="oai-pg-", dir=memory_folder()))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    if prefix:
        user = pwd.getpwnam(_SERVER_USER)
        for path in (root, sockets):
            os.chown(path, user.pw_uid, user.pw_gid)
    port = _free_port()
    started = False
    try:
        _run([*prefix, initdb, "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8"])
        options = f"-h 127.0.0.1 -p {port} -k {sockets} -F"
        _run(
            [
                *prefix,
                pg_ctl,
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(root / "log"),
                "-w",
                "start",
            ]
        )
        started = True
        _create_database(f"postgresql+psycopg2://postgres@127.0.0.1:{port}/postgres")
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/{_DATABASE}"
    finally:
        if started:
            subprocess.run(
                [*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"],
                capture_output=True,
                timeout=60,
            )
        shutil.rmtree(root, ignore_errors=True)


def _create_database(admin_url: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql(f"CREATE DATABASE {_DATABASE}")
    finally:
        engine.dispose()


def fresh_database(
    server_url: str, prefix: str = "t", *, statement_timeout_seconds: float | None = None
) -> str:
    """A new empty database on the session's server, so tests never see each other's rows.

    `statement_timeout_seconds`: every statement on it is canceled after that long, a lock
    wait too. pytest-timeout's signal does not interrupt psycopg2 waiting for the server:
    a test whose code under test regresses to waiting for a row lock for ever would hang
    the suite, not fail."""
    import uuid

    import sqlalchemy as sa

    url = sa.make_url(server_url)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql(f"CREATE DATABASE {name}")
            if statement_timeout_seconds is not None:
                milliseconds = round(statement_timeout_seconds * 1000)
                connection.exec_driver_sql(
                    f"ALTER DATABASE {name} SET statement_timeout = {milliseconds}"
                )
    finally:
        engine.dispose()
    return url.set(database=name).render_as_string(hide_password=False)


# A statement of a test that waits for a lock (`fresh_database`): fails well within
# pytest's timeout, and far above what any test's statement takes.
BOUNDED_SECONDS = 15.0


def drop_connections(url: str) -> None:
    """End every connection to the URL's database, as a restart of the server does: what a
    pool kept of them is dead, found so at its next statement."""
    import sqlalchemy as sa

    database = sa.make_url(url)
    engine = sa.create_engine(database.set(database="postgres"))
    try:
        with engine.begin() as connection:
            connection.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :name AND pid <> pg_backend_pid()"
                ),
                {"name": database.database},
            )
    finally:
        engine.dispose()


def execute(url: str, *statements: str) -> None:
    """Run SQL on the URL's database, each statement committed (a GRANT, an ALTER)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            for statement in statements:
                connection.exec_driver_sql(statement)
    finally:
        engine.dispose()


ROLE_PASSWORD = "secret"  # what a role's URL carries and no error may show


def login_role(server_url: str) -> str:
    """A new login role granted nothing (PostgreSQL 15 and later: no CREATE in `public`
    either), with the password `ROLE_PASSWORD`."""
    import uuid

    name = f"harvest_{uuid.uuid4().hex[:8]}"
    execute(server_url, f"CREATE ROLE {name} LOGIN PASSWORD '{ROLE_PASSWORD}'")
    return name


def as_role(url: str, role: str) -> str:
    """`url` logged in as `role` (`login_role`), its password in it."""
    import sqlalchemy as sa

    return sa.make_url(url).set(username=role, password=ROLE_PASSWORD).render_as_string(False)
