"""A full disk or a read-only home: the operator gets one line naming the file and the cure,
the read-only commands still read, and nothing is left half-written."""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.errors import RESUME_ADVICE
from oai_pipeline.sample_endpoint.records import generate_datacite_records
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import load_settings
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.cli.conftest import create_args, run_left_running
from oai_pipeline_tests.target.test_writer_disk_full import full_disk


def test_status_before_anything_was_written_does_not_create_the_target(registered: str) -> None:
    """A first harvest that filled the disk while staging leaves no target file: status
    created it (and failed so on the full or read-only disk) to count no records."""
    settings = load_settings()
    run_id = run_left_running(registered, f"{socket.gethostname()}:1:test")
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

    def full(cursor: sqlite3.Cursor, wait_seconds: float) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr("oai_pipeline.targets.embedded.engine.use_wal", full)

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


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A real 4 MB file system (Linux tmpfs), where `mount` is permitted (root)."""
    folder = tmp_path / "small"
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        # lazily: a pooled SQLite connection of this process may still hold a file open
        subprocess.run(["umount", "--lazy", str(folder)], check=True)


def test_a_harvest_that_fills_a_real_disk_resumes_once_space_is_freed(
    small_tmpfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A home on a file system too small for the harvest: one line naming the full file and
    the cure, nothing left running unseen or half-written, and the rerun on a grown file
    system writes every record once."""
    records = generate_datacite_records(600)
    monkeypatch.setenv("OAI_PIPELINE_HOME", str(small_tmpfs / "home"))
    with OAIEndpoint(records, page_size=50) as endpoint:
        created = run_cli(*create_args("gen", endpoint.base_url))
        assert created.exit_code == 0, created.output

        failed = run_cli("harvest", "gen", "--json")

        assert failed.exit_code == 1
        [line] = failed.stderr.splitlines()[-1:]
        assert line.startswith("Error: ")
        assert str(small_tmpfs / "home") in line
        assert "free space on that file system" in line
        assert json.loads(failed.stdout)["error"] == line.removeprefix("Error: ")
        status = run_cli("status", "--harvester", "gen", "--json")
        assert status.exit_code == 0, status.output
        for state_file in (small_tmpfs / "home").glob("*.sqlite"):
            with sqlite3.connect(state_file) as connection:
                assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        for part in (small_tmpfs / "home").rglob("*.parquet"):
            pl.read_parquet(part)

        subprocess.run(["mount", "-o", "remount,size=64m", str(small_tmpfs)], check=True)
        rerun = run_cli("harvest", "gen", "--json")

    assert rerun.exit_code == 0, rerun.output
    report = json.loads(rerun.stdout)
    live = sum(1 for record in records if not record.deleted)
    assert report["created"] == live
    target = run_cli("status", "--harvester", "gen", "--json")
    assert json.loads(target.stdout)["target"]["records"] == live


def test_a_target_that_fills_part_way_fails_the_run_in_one_line_and_the_rerun_writes_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The target's disk fills after some batches were committed: the run failed with every
    later record of the batch `write_failed` (and succeeded), or, the batch failing, kept
    SQLAlchemy's statement and a record's data in its error, which status printed; now it
    fails in one line naming the file and the cure, and the rerun writes the rest once."""
    records = generate_datacite_records(120)
    monkeypatch.setenv("OAI_PIPELINE_HOME", str(tmp_path / "home"))
    target = tmp_path / "home" / "target.sqlite"
    with OAIEndpoint(records, page_size=50) as endpoint:
        created = run_cli(*create_args("gen", endpoint.base_url), "--batch-size", "20")
        assert created.exit_code == 0, created.output
        EmbeddedRepository(load_settings().target_db_url).close()  # its empty tables

        with full_disk(target, room=40):
            failed = run_cli("harvest", "gen", "--json")
            status = run_cli("status", "--harvester", "gen", "--json")

        assert failed.exit_code == 1, failed.output
        [line] = failed.stderr.splitlines()[-1:]
        assert line.startswith("Error: database error: database or disk is full")
        assert "is full; free space on that file system" in line
        assert status.exit_code == 0, status.output
        run = json.loads(status.stdout)["run"]
        assert run["status"] == "failed"
        assert run["error"] == (
            f"OperationalError: database or disk is full: the file system holding {target} "
            f"is full; free space on that file system (or move the data folder), {RESUME_ADVICE}"
        )
        with sqlite3.connect(target) as connection:
            written = connection.execute("SELECT count(*) FROM target_records").fetchone()[0]
        assert 0 < written < len(records)

        rerun = run_cli("harvest", "gen", "--json")

    assert rerun.exit_code == 0, rerun.output
    report = json.loads(rerun.stdout)
    assert report["errors"] == 0, report["error_types"]
    live = sum(1 for record in records if not record.deleted)
    after = json.loads(run_cli("status", "--harvester", "gen", "--json").stdout)
    assert after["target"] == {"records": live, "source_identifiers": live}


def test_the_batches_written_before_the_target_filled_are_saved_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The target's disk fills after some batches of a group were committed: those batches'
    records were left `running` and unknown to the writer's memory (status showed none
    imported while the target held them), and the rerun reported them as its own
    `created`. Now the run saves what its committed batches did before failing: they count
    as imported, are remembered as written, and the rerun counts them as written by the
    earlier attempt."""
    records = generate_datacite_records(120)
    live = sum(1 for record in records if not record.deleted)
    monkeypatch.setenv("OAI_PIPELINE_HOME", str(tmp_path / "home"))
    target = tmp_path / "home" / "target.sqlite"
    with OAIEndpoint(records, page_size=200) as endpoint:  # one page: one partition group
        created = run_cli(*create_args("gen", endpoint.base_url), "--batch-size", "20")
        assert created.exit_code == 0, created.output
        EmbeddedRepository(load_settings().target_db_url).close()  # its empty tables

        with full_disk(target, room=40):
            failed = run_cli("harvest", "gen", "--json")
        assert failed.exit_code == 1, failed.output
        with sqlite3.connect(target) as connection:
            in_target = {
                row[0] for row in connection.execute("SELECT source_identifier FROM target_records")
            }
        assert 0 < len(in_target) < live
        status = json.loads(run_cli("status", "--harvester", "gen", "--json").stdout)
        state = load_settings().state_db_url.removeprefix("sqlite:///")
        with sqlite3.connect(state) as connection:
            statuses = dict(
                connection.execute("SELECT identifier, status FROM run_records").fetchall()
            )
            remembered = {
                row[0]
                for row in connection.execute(
                    "SELECT identifier FROM harvest_records WHERE local_id IS NOT NULL"
                    " AND written_fingerprint IS NOT NULL"
                )
            }

        rerun = run_cli("harvest", "gen", "--json")

    assert status["run"]["status"] == "failed"
    assert status["run"]["error"].startswith("OperationalError: database or disk is full")
    assert status["records"].get("imported") == len(in_target), status["records"]
    assert {i for i, s in statuses.items() if s == "imported"} == in_target
    assert remembered == in_target
    assert rerun.exit_code == 0, rerun.output
    report = json.loads(rerun.stdout)
    assert report["written_earlier"] == len(in_target)
    assert report["created"] == live  # all its attempts': the earlier one's by what it did
    assert report["errors"] == 0, report["error_types"]
