"""A target whose disk is full refuses the batch, not its records: the operator frees space
and reruns, and no record is left failed for the machine's fault (nor written half)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from oai_pipeline.errors import refused_by_disk
from oai_pipeline.settings import Settings
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.support import cap_sqlite_file
from oai_pipeline_tests.target.test_writer import Harness, data


@contextmanager
def full_disk(target: Path, room: int = 0) -> Iterator[None]:
    """The target's SQLite file may not grow past its size now (and `room` pages more):
    SQLite itself then refuses a write (SQLITE_FULL, `database or disk is full`), as on a
    full file system."""
    with sqlite3.connect(target) as connection:
        pages = connection.execute("PRAGMA page_count").fetchone()[0] + room
    lift = cap_sqlite_file(target, pages)
    try:
        yield
    finally:
        lift()


def _records(prefix: str, title: str) -> list[tuple[str, dict | None]]:
    # big enough that the batch needs pages the file does not have
    return [(f"oai:{prefix}-{i}", data(title * 400, doi=f"10.1/{prefix}{i}")) for i in range(20)]


def _target_rows(settings: Settings) -> list[tuple[Any, ...]]:
    with EmbeddedRepository(settings.target_db_url) as repo, repo.transaction() as tx:
        rows = tx.connection.execute(
            sa.text("SELECT source_identifier, revision, data FROM target_records ORDER BY 1")
        )
        return [tuple(row) for row in rows]


@pytest.mark.parametrize("batch", ["created", "updated"])
def test_a_full_disk_fails_the_batch_not_each_record(tmp_path: Path, batch: str) -> None:
    """New records (inserted together, else one by one) and updates (one by one, each in
    its SAVEPOINT): SQLite rolled the whole transaction back on the full disk, and every
    record after became a `write_failed` outcome (`no such savepoint`), one even written
    outside the batch's transaction, and the harvest succeeded with them failed."""
    settings = Settings(
        home=tmp_path,
        state_db_url=f"sqlite:///{tmp_path / 'state.sqlite'}",
        target_db_url=f"sqlite:///{tmp_path / 'target.sqlite'}",
        storage_url=str(tmp_path / "storage"),
    )
    harness = Harness(settings)
    try:
        assert all(o.error is None for o in harness.harvest(_records("a", "First")))
        before = _target_rows(settings)
        harness.reconfigure()  # new connections, which the full disk limits
        sources = _records("b", "New") if batch == "created" else _records("a", "Changed")
        with full_disk(tmp_path / "target.sqlite"), pytest.raises(sa.exc.OperationalError) as e:
            harness.harvest(sources, datestamp="2026-02-01T00:00:00Z")
    finally:
        harness.writer.close()

    assert refused_by_disk(e.value), e.value
    assert "target.sqlite is full; free space" in str(e.value)
    assert _target_rows(settings) == before
