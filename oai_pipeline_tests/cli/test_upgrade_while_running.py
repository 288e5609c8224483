"""A harvest running while an in-place upgrade migrates the state store under it."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from oai_pipeline.cli import main
from oai_pipeline.settings import Settings
from oai_pipeline.state.schema import SCHEMA_VERSION, harvest_records
from oai_pipeline.state.store import StateStore
from oai_pipeline_tests.state.test_upgrade_while_running import set_stored_version


def test_a_harvest_running_when_the_store_is_migrated_stops_with_one_line(
    registered: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The harvest's first staged page meets a store a newer version migrated meanwhile: the
    command says so in one line, without a traceback, and stages nothing."""
    stage = StateStore.stage

    def stage_after_an_upgrade(self: StateStore, *args: Any, **kwargs: Any) -> Any:
        set_stored_version(settings.state_db_url, SCHEMA_VERSION + 1)
        return stage(self, *args, **kwargs)

    monkeypatch.setattr(StateStore, "stage", stage_after_an_upgrade)

    result = CliRunner().invoke(main, ["harvest", registered])

    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.stderr.splitlines()[-1] == (
        f"Error: the state database was upgraded to schema version {SCHEMA_VERSION + 1} by a "
        f"newer oai-pipeline while this process (schema version {SCHEMA_VERSION}) ran: nothing "
        "was written; restart this process with the upgraded oai-pipeline; harvest run 1 "
        "stays `running` until `oai-pipeline status` or the next harvest of sample marks it "
        "failed (resumable)"
    )
    engine = sa.create_engine(settings.state_db_url)
    try:
        with engine.connect() as connection:
            staged = connection.execute(sa.select(sa.func.count()).select_from(harvest_records))
            assert staged.scalar() == 0
    finally:
        engine.dispose()


def test_status_says_a_run_refused_by_the_upgrade_ended_not_that_it_was_killed(
    registered: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refused harvest could not record its run's end, but it ended: it released its
    lease. `status` settles the run left `running` saying so; before, it said its process
    was gone (killed?)."""
    stage = StateStore.stage

    def stage_after_an_upgrade(self: StateStore, *args: Any, **kwargs: Any) -> Any:
        set_stored_version(settings.state_db_url, SCHEMA_VERSION + 1)
        return stage(self, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(StateStore, "stage", stage_after_an_upgrade)
        assert CliRunner().invoke(main, ["harvest", registered]).exit_code == 1
    set_stored_version(settings.state_db_url, SCHEMA_VERSION)  # as the upgraded version reads it

    result = CliRunner().invoke(main, ["status", "--batch-id", "1", "--json"])

    assert result.exit_code == 0, result.output
    run = json.loads(result.stdout)["run"]
    assert run["status"] == "failed"
    assert "is gone (killed?)" not in run["error"]
    assert run["error"].startswith("interrupted: its process (")
    assert "ended without recording the run's end (it released its lease" in run["error"]
