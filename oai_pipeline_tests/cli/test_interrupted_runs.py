"""A CLI harvest killed mid-way (no Dagster to notice) is shown as interrupted, not running
for ever, and the next harvest of its harvester says what becomes of it."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.sample_endpoint.faults import Faults
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import load_settings
from oai_pipeline.state.store import StateStore
from oai_pipeline_tests.cli.conftest import run_left_running
from oai_pipeline_tests.support import cli_killed_when

WINDOW = ["--since", "2024-01-03", "--until", "2024-01-12"]


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _staged(run_id: int) -> int:
    with StateStore(load_settings().state_db_url) as state:
        found = state.get_run(run_id)
    return 0 if found is None else int(found["staged"])


SLOW_SECONDS = 2.0


def _killed_mid_harvest(endpoint: OAIEndpoint, harvester_id: str) -> None:
    """Harvest run 1 (WINDOW) of the harvester, SIGKILLed while its second page is slow."""
    slow = endpoint.request_count + 3  # Identify, the first page, then the second
    endpoint.faults = Faults(slow_on={slow: SLOW_SECONDS})
    try:
        cli_killed_when(
            ["harvest", harvester_id, *WINDOW],
            lambda: endpoint.request_count >= slow and _staged(1) > 0,
        )
    finally:
        endpoint.faults = Faults()
    # The endpoint's answer to the killed client fails with a traceback on stderr: let it
    # land here, not in the output a later in-process command is tested on.
    time.sleep(SLOW_SECONDS + 0.5)


@pytest.mark.parametrize(
    ("next_run", "said", "run_1_ends", "next_run_id"),
    [
        (
            ["--since", "2024-01-08"],  # another window
            "marked failed: `oai-pipeline harvest sample --resume 1` resumes it",
            "failed",
            2,
        ),
        (WINDOW, "resuming it", "succeeded", 1),
        ([], "superseded by harvest run 2, which lists its window again", "stopped", 2),
        (  # a capped run lists only some of the records of its window: no supersession
            ["--max-records", "2"],
            "marked failed: `oai-pipeline harvest sample --resume 1` resumes it",
            "failed",
            2,
        ),
    ],
)
def test_a_killed_cli_harvest_is_interrupted_not_running(
    endpoint: OAIEndpoint,
    registered: str,
    next_run: list[str],
    said: str,
    run_1_ends: str,
    next_run_id: int,
) -> None:
    _killed_mid_harvest(endpoint, registered)

    status = json.loads(run("status", "--batch-id", "1", "--json").stdout)
    assert status["run"]["status"] == "failed"
    assert status["run"]["error"].startswith("interrupted: its process (")
    assert "--resume 1" in status["run"]["error"]
    [listed] = json.loads(run("status", "--list-recent", "--json").stdout)
    assert listed["status"] == "failed"

    # A run a killed process left, not yet seen by status, is seen by the next harvest.
    with StateStore(load_settings().state_db_url) as state:
        state.resume_run(1)
    harvested = run("harvest", registered, *next_run, "--json")

    assert harvested.exit_code == 0, harvested.output
    assert "harvest run 1 of sample (window 2024-01-03" in harvested.stderr
    assert said in harvested.stderr
    report = json.loads(harvested.stdout)
    assert report["run_id"] == next_run_id
    runs = {r["id"]: r for r in json.loads(run("status", "--list-recent", "--json").stdout)}
    assert runs[1]["status"] == run_1_ends
    assert runs[next_run_id]["status"] == "succeeded"


def test_status_on_a_read_only_state_database_shows_runs_as_they_are_stored(
    registered: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    """A monitoring account may only read (a replica, a read-only role): status cannot mark
    a run whose process is gone, so it says so and shows the run as stored."""
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    run_id = run_left_running(registered)
    path = settings.state_db_url.removeprefix("sqlite:///")
    monkeypatch.setenv("OAI_PIPELINE_STATE_DB_URL", f"sqlite:///file:{path}?mode=ro&uri=true")

    result = CliRunner().invoke(main, ["status", "--batch-id", str(run_id), "--json"])

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["run"]["status"] == "running"
    assert "the state database is read-only" in caplog.text  # the CLI logs to stderr
    assert not Path("file:").exists()  # the URI filename was not taken for a folder to make


def test_status_on_a_full_disk_shows_runs_as_they_are_stored(
    registered: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A harvest that filled the disk left its run `running` (it could not mark it failed):
    status is what the operator reads then, so it must not fail on the write it skips."""
    run_id = run_left_running(registered)

    def disk_full(*_args: object) -> None:
        raise sa.exc.OperationalError(
            "UPDATE harvest_runs …", {}, sqlite3.OperationalError("database or disk is full")
        )

    monkeypatch.setattr(StateStore, "settle_interrupted_runs", disk_full)

    result = CliRunner().invoke(main, ["status", "--batch-id", str(run_id), "--json"])

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["run"]["status"] == "running"
    assert "the state database cannot be written (database or disk is full)" in caplog.text
