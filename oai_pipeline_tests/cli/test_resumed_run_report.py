"""What a resumed harvest run reports: the run's totals, all its attempts, by action."""

from __future__ import annotations

import functools
import json
import shutil
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.pipeline import discover as discover_module
from oai_pipeline.pipeline import write as write_module
from oai_pipeline.settings import load_settings
from oai_pipeline.state.store import StateStore
from oai_pipeline_tests.cli.conftest import RECORDS
from oai_pipeline_tests.support import deleted_records, live_records


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _interrupted_after_the_first_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """The write stage works a part of 4 records at a time, and is interrupted (Ctrl-C) as
    it claims the records of its second: the first one's records are written and saved."""
    monkeypatch.setattr(discover_module, "PART_SIZE", 4)
    monkeypatch.setattr(
        write_module,
        "map_partition_groups",
        functools.partial(write_module.map_partition_groups, group_rows=1),
    )
    claim = StateStore.claim
    calls = {"n": 0}

    def interrupted(self: StateStore, *args: Any, **kwargs: Any) -> list[str]:
        calls["n"] += 1
        if calls["n"] == 3:  # two claims a group: the settled records, then the others
            raise KeyboardInterrupt
        return claim(self, *args, **kwargs)

    monkeypatch.setattr(StateStore, "claim", interrupted)


@pytest.mark.parametrize("written_by", ["this version", "version 20"])
def test_a_resumed_run_reports_what_its_earlier_attempt_wrote_by_action(
    registered: str, monkeypatch: pytest.MonkeyPatch, written_by: str
) -> None:
    """Before, the records the interrupted attempt wrote were counted `already_written`
    only: the resumed run reported created 1,000 of a first harvest of 10,000 interrupted
    at 9,000. Its totals are the run's now; `written_earlier` still says how many of them
    the earlier attempt wrote. (An attempt of version 20 kept no action: its records are
    counted by their status.)"""
    with monkeypatch.context() as patched:
        _interrupted_after_the_first_group(patched)
        interrupted = run("harvest", registered, "--json")
    assert interrupted.exit_code == 130, interrupted.output
    live = live_records(RECORDS, "oai_datacite")
    gone = deleted_records(RECORDS, "oai_datacite")
    with StateStore(load_settings().state_db_url) as state:
        written = state.record_statuses(1, [r.identifier for r in live + gone])
        if written_by == "version 20":
            with state._engine.begin() as connection:  # noqa: SLF001 - a state of the past
                connection.execute(sa.text("UPDATE run_records SET action = NULL"))
    earlier = sum(status != "pending" for status in written.values())
    assert 0 < earlier < len(live + gone) == len(written)

    # The text report, of the same resume (a succeeded run is not resumed again): a copy of
    # the home, resumed without --json.
    home = load_settings().home
    shutil.copytree(home, home.with_name("text"))
    resumed = run("harvest", registered, "--resume", "1", "--json")

    assert resumed.exit_code == 0, resumed.output
    report = json.loads(resumed.stdout)
    assert report["run_id"] == 1
    assert (report["created"], report["updated"], report["deleted"]) == (len(live), 0, 0)
    assert report["unchanged"] == len(gone)
    assert report["actions"] == {"create": len(live), "nothing": len(gone)}
    assert report["written_earlier"] == earlier
    shutil.rmtree(home)
    shutil.move(home.with_name("text"), home)
    text = run("harvest", registered, "--resume", "1").output
    assert f"created:   {len(live)}" in text


def _interrupted_at(monkeypatch: pytest.MonkeyPatch, method: str, call: int) -> None:
    """Ctrl-C as the `call`-th call of StateStore.`method` begins."""
    original = getattr(StateStore, method)
    calls = {"n": 0}

    def interrupted(self: StateStore, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == call:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(StateStore, method, interrupted)


def test_a_run_resumed_twice_counts_its_catch_up_list_once(
    registered: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each resumed attempt lists again what the source changed since the run began (not
    checkpointed): its pages and records listed were added up over the attempts, while
    the token sweep's counters count the source's pages once. Now the run's catch-up list
    is counted once too: the last attempt's, which lists every change."""
    with monkeypatch.context() as patched:
        _interrupted_at(patched, "stage", 3)  # in the sweep, at its third page
        assert run("harvest", registered).exit_code == 130
    with monkeypatch.context() as patched:
        _interrupted_at(patched, "claim", 1)  # swept and caught up, then in the write
        assert run("harvest", registered).exit_code == 130
    once = json.loads(run("status", "--batch-id", "1", "--json").stdout)["counters"]

    report = json.loads(run("harvest", registered, "--json").stdout)

    assert report["run_id"] == 1
    counters = json.loads(run("status", "--batch-id", "1", "--json").stdout)["counters"]
    assert once["catch_up_pages"] == 1
    caught_up = {name: counters[name] for name in ("catch_up_pages", "catch_up_listed")}
    assert caught_up == {name: once[name] for name in caught_up}
    assert {name: report[name] for name in caught_up} == caught_up
