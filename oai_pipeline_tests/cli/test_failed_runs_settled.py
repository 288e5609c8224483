"""A CLI harvest that knows it failed ends its run as failed, with the error, itself: not
`running` until a later `status` or harvest finds its process gone and calls it killed."""

from __future__ import annotations

import errno
import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.pipeline import write as write_stage
from oai_pipeline.settings import load_settings
from oai_pipeline.state.schema import SCHEMA_VERSION
from oai_pipeline.state.store import StateStore
from oai_pipeline_tests.state.test_upgrade_while_running import set_stored_version


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def stored_run(run_id: int) -> dict[str, Any]:
    """The run as the harvest left it (not through `status`, which settles runs itself)."""
    with StateStore(load_settings().state_db_url) as state:
        found = state.get_run(run_id)
    assert found is not None
    return found


def _full_disk_after_the_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's notices, saved once its pages are staged, meet a full disk."""

    def full(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(StateStore, "add_run_notices", full)


def _no_target_to_open(monkeypatch: pytest.MonkeyPatch) -> None:
    """The write stage's writers cannot be opened (before it writes anything)."""

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("the target cannot be opened")

    monkeypatch.setattr(write_stage, "build_writers", broken)


@pytest.mark.parametrize(
    ("fail", "error"),
    [
        (_full_disk_after_the_fetch, "[Errno 28] No space left on device"),
        (_no_target_to_open, "RuntimeError: the target cannot be opened"),
    ],
)
def test_a_harvest_that_fails_ends_its_run_failed_and_resumable(
    registered: str, monkeypatch: pytest.MonkeyPatch, fail: Any, error: str
) -> None:
    with monkeypatch.context() as patched:
        fail(patched)
        failed = run("harvest", registered)
    assert failed.exit_code == 1, failed.output
    assert "Traceback" not in failed.output

    left = stored_run(1)
    assert left["status"] == "failed"
    assert error in left["error"]
    assert left["finished_at"] is not None
    status = json.loads(run("status", "--batch-id", "1", "--json").stdout)
    assert status["run"]["status"] == "failed"
    assert error in status["run"]["error"]

    resumed = run("harvest", registered, "--resume", "1", "--json")

    assert resumed.exit_code == 0, resumed.output
    report = json.loads(resumed.stdout)
    assert report["run_id"] == 1
    assert report["errors"] == 0
    assert report["harvested"] == report["created"] + report["unchanged"] > 0
    assert stored_run(1)["staged"] == report["harvested"]
    assert stored_run(1)["status"] == "succeeded"


def test_a_harvest_refused_by_an_upgrade_says_what_ends_its_run(
    registered: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store migrated under the harvest refuses every write, the run's end too: the error
    says what ends it, and `status` (of the upgraded version) shows it failed, resumable."""
    stage = StateStore.stage

    def stage_after_an_upgrade(self: StateStore, *args: Any, **kwargs: Any) -> Any:
        set_stored_version(load_settings().state_db_url, SCHEMA_VERSION + 1)
        return stage(self, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(StateStore, "stage", stage_after_an_upgrade)
        failed = run("harvest", registered)

    assert failed.exit_code == 1, failed.output
    assert "Traceback" not in failed.output
    assert failed.stderr.splitlines()[-1].endswith(
        "restart this process with the upgraded oai-pipeline; harvest run 1 stays `running` "
        "until `oai-pipeline status` or the next harvest of sample marks it failed "
        "(resumable)"
    )
    set_stored_version(load_settings().state_db_url, SCHEMA_VERSION)  # as the upgrade left it
    assert stored_run(1)["status"] == "running"
    status = json.loads(run("status", "--batch-id", "1", "--json").stdout)
    assert status["run"]["status"] == "failed"
    assert "--resume 1" in status["run"]["error"]
