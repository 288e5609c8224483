"""A home this user cannot write (restored on read-only media, mounted read-only into a
monitoring container, owned by the harvest's user): the commands that only read show what it
holds, say once that it is read-only, and write nothing; the commands that write fail with
one line. SQLite in WAL mode writes beside a database even to read it, so these open it
read-only (`oai_pipeline.sqlite_tuning.read_only_connector`)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from oai_pipeline import sqlite_tuning
from oai_pipeline.cli import main
from oai_pipeline.settings import load_settings
from oai_pipeline.state.schema import SCHEMA_VERSION as STATE_VERSION
from oai_pipeline.state.store import StateStore
from oai_pipeline.targets.embedded.schema import SCHEMA_VERSION as TARGET_VERSION
from oai_pipeline_tests.cli.conftest import run_left_running

READ_ONLY_NOTICE = "cannot be written by"

# Every command that only reads, with the arguments of the sample harvest's home.
READING_COMMANDS = [
    ("status", "--json"),
    ("status", "--list-recent", "--json"),
    ("records", "list", "--harvester", "sample", "--json"),
    ("records", "show", "oai:sample.oai-pipeline:full", "--json"),
    ("harvesters", "list", "--json"),
    ("harvesters", "show", "sample", "--json"),
    ("target", "list", "--harvester", "sample", "--json"),
    ("target", "communities", "list", "--json"),
]


def run_cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _digests(folder: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.glob("*.sqlite*"))
    }


@pytest.fixture
def harvested(registered: str) -> Path:
    """The home after a harvest of the sample endpoint, and a run a killed process left."""
    assert run_cli("harvest", registered).exit_code == 0
    run_left_running(registered)
    return load_settings().home


def test_reading_commands_work_on_a_read_only_file_system(
    harvested: Path,
    read_only_mount: Callable[[Path], Path],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each command that only reads failed on a read-only home with `attempt to write a
    readonly database`: SQLite creates -wal and -shm beside the file even to read it. Read
    with `immutable=1` (the databases were closed cleanly: no -wal), they show what a
    writable home shows, but the killed run as stored."""
    assert not list(harvested.glob("*-wal"))
    mounted = read_only_mount(harvested)
    monkeypatch.setenv("OAI_PIPELINE_HOME", str(mounted))

    for args in READING_COMMANDS:
        caplog.clear()
        # said once a process, and each command is one (here they share the test's)
        monkeypatch.setattr(sqlite_tuning, "_noted_folders", set(), raising=False)
        read_only = run_cli(*args)
        assert read_only.exit_code == 0, (args, read_only.output)
        notices = [line for line in caplog.messages if READ_ONLY_NOTICE in line]
        assert notices == [
            f"{mounted} cannot be written by root (a read-only home): its databases are shown "
            "as they are, which may be behind a harvest running now; a run whose process is "
            "gone still shows as running"
        ], args
        monkeypatch.setenv("OAI_PIPELINE_HOME", str(harvested))
        if args[0] != "status":  # the writable home's status marks the killed run failed
            assert json.loads(read_only.stdout) == json.loads(run_cli(*args).stdout), args
        monkeypatch.setenv("OAI_PIPELINE_HOME", str(mounted))

    status = json.loads(run_cli("status", "--json").stdout)
    assert status["run"]["status"] == "running"  # as stored
    assert status["target"]["records"] > 0
    assert run_cli("status").stdout.startswith("harvest run 2 of sample: running")
    first = json.loads(run_cli("target", "list", "--json").stdout)[0]
    shown = run_cli("target", "show", first["id"], "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["id"] == first["id"]

    harvest = run_cli("harvest", "sample")
    assert harvest.exit_code == 1
    assert harvest.stderr.splitlines()[-1].startswith(
        f"Error: cannot open the state database sqlite:///{mounted}/state.sqlite: "
    )


def test_a_command_that_writes_on_a_read_only_file_system_says_to_mount_it_read_write(
    harvested: Path,
    read_only_mount: Callable[[Path], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The advice was to make the file writable for this user or run as its owner: on a
    file system mounted read-only neither helps."""
    mounted = read_only_mount(harvested)
    monkeypatch.setenv("OAI_PIPELINE_HOME", str(mounted))

    for args in (("harvest", "sample"), ("target", "communities", "create", "x")):
        result = run_cli(*args)

        assert result.exit_code == 1, args
        [line] = result.stderr.splitlines()
        database = "target" if args[0] == "target" else "state"
        assert line.endswith(
            f"the file system holding {mounted}/{database}.sqlite is mounted read-only; "
            "mount it read-write (or move the data folder), then run again: a harvest "
            "resumes where it stopped"
        ), args


def test_commits_still_in_the_wal_are_shown(
    harvested: Path,
    read_only_mount: Callable[[Path], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A harvest still running (or a copy taken meanwhile) keeps its latest commits in the
    -wal file, which `immutable=1` ignores: status must show the run it just created, with
    the target's counts (the target, closed, could not be read on a read-only home)."""
    settings = load_settings()
    with StateStore(settings.state_db_url) as writer:  # open: the WAL is not checkpointed
        run_id = writer.create_run(
            "sample",
            window_from="2025-01-01",
            window_until="2025-01-02",
            scale=None,
            max_records=0,
            options={},
            worker=f"{socket.gethostname()}:{os.getpid()}:running",
        )
        assert (harvested / "state.sqlite-wal").stat().st_size > 0
        mounted = read_only_mount(harvested)
        monkeypatch.setenv("OAI_PIPELINE_HOME", str(mounted))

        listed = run_cli("status", "--list-recent", "--json")
        status = run_cli("status", "--harvester", "sample", "--json")

    assert listed.exit_code == 0, listed.output
    assert run_id in [run["id"] for run in json.loads(listed.stdout)]
    assert status.exit_code == 0, status.output
    shown = json.loads(status.stdout)
    assert shown["run"]["id"] == run_id
    assert shown["target"]["records"] > 0


def test_a_wal_without_its_shm_is_refused_in_one_line(
    harvested: Path,
    read_only_mount: Callable[[Path], Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A copy of a home with a -wal but not its -shm: SQLite can read the -wal only where it
    may create the -shm. Showing the database without the -wal's commits would hide them:
    one line says what to do instead."""
    settings = load_settings()
    copy = tmp_path / "copy"
    with StateStore(settings.state_db_url) as writer:
        writer.create_run(
            "sample",
            window_from=None,
            window_until=None,
            scale=None,
            max_records=0,
            options={},
            worker="elsewhere:1:x",
        )
        shutil.copytree(harvested, copy)
    (copy / "state.sqlite-shm").unlink()
    mounted = read_only_mount(copy)
    monkeypatch.setenv("OAI_PIPELINE_HOME", str(mounted))

    result = run_cli("status", "--list-recent")

    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"Error: cannot open the state database sqlite:///{mounted}/state.sqlite: "
        f"{mounted}/state.sqlite-wal holds changes not yet in the database, which SQLite "
        "cannot read where it cannot write without the state.sqlite-shm file beside it: copy "
        "the folder somewhere writable and read the copy, or run as its owner (which moves "
        "the changes into the database)"
    ]


@pytest.mark.parametrize("database", ["state", "target"])
def test_an_older_schema_on_a_read_only_home_says_to_upgrade_it_where_it_can_be_written(
    harvested: Path,
    read_only_mount: Callable[[Path], Path],
    monkeypatch: pytest.MonkeyPatch,
    database: str,
) -> None:
    """A read-only home can not be upgraded: the command said the file was not writable,
    not that a run that can write it upgrades it."""
    with sqlite3.connect(harvested / f"{database}.sqlite") as connection:
        connection.execute("UPDATE schema_version SET version = version - 1")
    connection.close()
    mounted = read_only_mount(harvested)
    monkeypatch.setenv("OAI_PIPELINE_HOME", str(mounted))

    result = run_cli("target" if database == "target" else "records", "list")

    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.endswith(
        "older than this oai-pipeline "
        f"({TARGET_VERSION if database == 'target' else STATE_VERSION}), and is on a home this "
        "user cannot write: "
        "upgrade it by running any oai-pipeline command where it can be written (as its "
        "owner), then read it here"
    )


def test_status_on_a_home_it_cannot_write_reads_it_read_only_and_writes_nothing(
    harvested: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Without a mount (any user): the home's folder reported not writable. The store and
    the target, closed cleanly, are opened `immutable=1`: status leaves the killed run as
    stored, and changes not a byte of either database nor creates a file beside them."""
    before = _digests(harvested)
    real_access = os.access

    def access(path: object, mode: int, **kwargs: object) -> bool:
        if mode & os.W_OK and Path(str(path)).resolve().is_relative_to(harvested.resolve()):
            return False
        return real_access(path, mode, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)

    result = run_cli("status", "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["run"]["status"] == "running"
    assert sum(READ_ONLY_NOTICE in message for message in caplog.messages) == 1
    assert _digests(harvested) == before


def test_only_an_existing_sqlite_file_can_be_unwritable(tmp_path: Path) -> None:
    """PostgreSQL, a file not created yet and a URI filename the user wrote keep their
    own ways of opening."""
    from oai_pipeline.sqlite_tuning import unwritable_sqlite_file

    assert unwritable_sqlite_file("postgresql+psycopg2://user:pw@host:5432/db") is None
    assert unwritable_sqlite_file(f"sqlite:///{tmp_path}/missing.sqlite") is None
    assert unwritable_sqlite_file(f"sqlite:///file:{tmp_path}/x.sqlite?mode=ro&uri=true") is None
    assert unwritable_sqlite_file("sqlite://") is None
    (tmp_path / "here.sqlite").touch()
    assert unwritable_sqlite_file(f"sqlite:///{tmp_path}/here.sqlite") is None
