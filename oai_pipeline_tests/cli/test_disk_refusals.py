"""A full disk or a read-only home: the operator gets one line naming the file and the cure,
the read-only commands still read, and nothing is left half-written."""

from __future__ import annotations

import errno
import json
import socket
import sqlite3
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.settings import load_settings
from oai_pipeline.state.store import StateStore


def test_status_before_anything_was_written_does_not_create_the_target(registered: str) -> None:
    """A first harvest that filled the disk while staging leaves no target file: status
    created it (and failed so on the full or read-only disk) to count no records."""
    settings = load_settings()
    with StateStore(settings.state_db_url) as state:
        run_id = state.create_run(
            registered,
            window_from=None,
            window_until=None,
            scale=None,
            max_records=0,
            options={},
            worker=f"{socket.gethostname()}:1:test",
        )
    target_file = Path(settings.target_db_url.removeprefix("sqlite:///"))
    assert not target_file.exists()

    result = CliRunner().invoke(main, ["status", "--batch-id", str(run_id), "--json"])

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["target"] == {"records": 0, "source_identifiers": 0}
    assert not target_file.exists()


def test_a_part_cut_short_by_a_full_disk_is_removed_and_named(
    registered: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills while a Parquet part is written: the half-written temporary file kept
    the space the operator must free (a rerun stages under a new key, so nothing removed
    it), and the error named no file and no cure."""
    real_open = open
    written: list[Path] = []

    class FullDisk:
        """A file whose write fails half-way, as on a full file system."""

        def __init__(self, path: str) -> None:
            self.handle = real_open(path, "wb")
            written.append(Path(path))

        def write(self, data: bytes) -> int:
            self.handle.write(bytes(data)[: len(data) // 2])
            self.handle.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

        def truncate(self) -> None:
            pass

        def __enter__(self) -> FullDisk:
            return self

        def __exit__(self, *_exc: object) -> None:
            self.handle.close()

    def full_open(path: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        if str(path).endswith(".parquet.tmp") and "b" in mode and mode != "rb":
            return FullDisk(str(path))
        return real_open(path, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr("builtins.open", full_open)

    result = CliRunner().invoke(main, ["harvest", registered, "--json"])
    monkeypatch.undo()

    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    part = written[0].with_suffix("")  # the part, without .tmp
    assert line == (
        f"Error: No space left on device: {part}; free space on that file system (or move "
        "the data folder), then run again: a harvest resumes where it stopped"
    )
    assert json.loads(result.stdout)["type"] == "os_error"
    assert not any(path.exists() for path in written)
    storage = Path(load_settings().storage_url)
    for name in storage.rglob("*.parquet"):
        pl.read_parquet(name)  # every part a reader may pick up is whole


def test_status_on_a_full_disk_shows_the_run_without_the_target_counts(
    registered: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite grows a database's -shm file even to read it: on a full disk the target
    could not be opened, and status, what the operator asks for then, failed whole."""
    assert run_cli("harvest", registered).exit_code == 0

    def full(cursor: sqlite3.Cursor) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr("oai_pipeline.targets.embedded.engine._use_wal", full)

    result = run_cli("status", "--harvester", registered, "--json")

    assert result.exit_code == 0, result.output
    status = json.loads(result.stdout)
    assert status["run"]["status"] == "succeeded"
    assert status["target"] is None
    assert "the target's record counts are not shown" in caplog.text
    assert "target.sqlite is full; free space" in caplog.text
    text = run_cli("status", "--harvester", registered)
    assert text.exit_code == 0
    assert "  target: not available" in text.stdout


def run_cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))
