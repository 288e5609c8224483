"""Both SQLite files a harvest writes (state store, embedded target) get the WAL tuning."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline.sqlite_tuning import CACHE_KIB, WAL_AUTOCHECKPOINT_PAGES
from oai_pipeline.state.store import StateStore
from oai_pipeline.targets.embedded.repository import EmbeddedRepository

NORMAL = 1  # PRAGMA synchronous


def _pragmas(engine: sa.Engine) -> tuple[str, int, int, int]:
    with engine.connect() as connection:
        return tuple(  # type: ignore[return-value]
            connection.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "synchronous", "wal_autocheckpoint", "cache_size")
        )


def test_state_store_and_target_get_the_wal_and_cache_settings(tmp_path: Path) -> None:
    expected = ("wal", NORMAL, WAL_AUTOCHECKPOINT_PAGES, -CACHE_KIB)
    with StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}") as store:
        assert _pragmas(store._engine) == expected
    repository = EmbeddedRepository(f"sqlite:///{tmp_path / 'target.sqlite'}")
    try:
        assert _pragmas(repository.engine) == expected
    finally:
        repository.close()


def _fill(engine: sa.Engine, limit_pragma: str) -> sa.exc.OperationalError:
    """Make one connection's writes fail as a full (or read-only) disk makes them, and
    return the error a write then raises."""
    with engine.connect() as connection:
        pages = connection.exec_driver_sql("PRAGMA page_count").scalar()
        connection.exec_driver_sql(limit_pragma.format(pages=pages))
        connection.commit()
        try:
            with connection.begin():
                connection.exec_driver_sql("CREATE TABLE filler (x BLOB)")
                connection.exec_driver_sql("INSERT INTO filler VALUES (zeroblob(1000000))")
        except sa.exc.OperationalError as error:
            return error
    raise AssertionError("the write was not refused")


def test_a_full_disk_names_the_database_file_and_the_cure(tmp_path: Path) -> None:
    """SQLite's bare `database or disk is full` named neither file nor what to do."""
    with StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}") as store:
        error = _fill(store._engine, "PRAGMA max_page_count = {pages}")
    assert "database or disk is full" in str(error.orig)
    assert f"the file system holding {tmp_path / 'state.sqlite'} is full" in str(error.orig)
    assert "free space on that file system" in str(error.orig)
    assert "a harvest resumes where it stopped" in str(error)  # Dagster shows this one
    repository = EmbeddedRepository(f"sqlite:///{tmp_path / 'target.sqlite'}")
    try:
        error = _fill(repository.engine, "PRAGMA max_page_count = {pages}")
    finally:
        repository.close()
    assert f"the file system holding {tmp_path / 'target.sqlite'} is full" in str(error.orig)


def test_a_read_only_database_names_the_file_and_the_cure(tmp_path: Path) -> None:
    with StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}") as store:
        error = _fill(store._engine, "PRAGMA query_only = 1")
    assert f"{tmp_path / 'state.sqlite'} or its folder is not writable" in str(error.orig)
    assert "make it writable for" in str(error.orig)


def test_a_lease_refused_by_the_disk_names_the_file_too(settings: Settings) -> None:
    """The harvester lease has an engine of its own: `could not release the lease of gen:
    database or disk is full` named no file."""
    with Services(settings) as services:
        error = _fill(services.harvester_lock.engine, "PRAGMA max_page_count = {pages}")
    assert f"the file system holding {settings.home / 'state.sqlite'} is full" in str(error.orig)


def _open_at_once(kind: str, url: str, start: Any, failures: Any) -> None:
    """In a child: wait for the others, then open the file once (a new one: it is switched
    to WAL now)."""
    start.wait()
    try:
        if kind == "state":
            StateStore(url, lock_wait_seconds=10).close()
        else:
            EmbeddedRepository(url).close()
    except Exception as error:  # the test reports what failed
        failures.put(f"{kind}: {error}")


@pytest.mark.parametrize("kind", ["state", "target"])
def test_processes_opening_a_new_file_at_once_all_open_it(kind: str, tmp_path: Path) -> None:
    """Switching a new file to WAL fails at once, not after the busy timeout, while another
    connection has it open: two test workers importing the definitions on a fresh clone's
    home (or `dagster dev`'s webserver and daemon on a new home) had one fail with
    "database is locked" (about one start in three with two processes)."""
    context = multiprocessing.get_context("fork")
    processes = 4
    failures = context.Queue()
    for attempt in range(10):
        url = f"sqlite:///{tmp_path / f'{kind}-{attempt}.sqlite'}"
        start = context.Barrier(processes)
        children = [
            context.Process(target=_open_at_once, args=(kind, url, start, failures))
            for _ in range(processes)
        ]
        for child in children:
            child.start()
        for child in children:
            child.join(60)
            assert child.exitcode == 0
    errors = []
    while not failures.empty():
        errors.append(failures.get())
    assert errors == []
