"""`crash_sweep --source-moves-on` at a few points, so that the mode cannot rot: the source
changes between a kill and its rerun, and the sweep finds the rerun like a fresh harvest (or
reconcile) of the changed source. Apart from test_crash_points.py so that the two slowest
files of crash tests run on two workers (`--dist loadfile`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from oai_pipeline.sample_endpoint.records import generate_datacite_records
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline_tests.resume import crash_sweep
from oai_pipeline_tests.resume.crash_sweep import HARVESTER, PREFIX, Backend
from oai_pipeline_tests.resume.test_crash_points import FULL, RECORDS, _harvest
from oai_pipeline_tests.support import settled_midnight


def test_the_sweep_with_a_source_that_moves_on_finds_a_rerun_like_a_fresh_harvest(
    tmp_path: Path,
) -> None:
    """`crash_sweep --source-moves-on` at one point, so that the mode cannot rot: killed in
    the write stage, the source changed, the rerun's catch-up list takes the 6 changed
    records of its first page (newer copies) and the 3 records added before its token, and
    the sweep finds its result like a fresh harvest of the changed source; the source is
    as it was after."""
    with OAIEndpoint(RECORDS, page_size=20) as endpoint:
        before = endpoint.records()
        empty = Backend().new_home(tmp_path, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=10)
        scenario = crash_sweep.Scenario("first", [*FULL, "--json"], empty, endpoint=endpoint)
        outcomes = crash_sweep.run_scenario(
            Backend(),
            tmp_path,
            endpoint.base_url,
            scenario,
            ["writer_apply:2:after"],
            per_point=1,
            double=False,
            log=lambda _: None,
            moves_on_pages=20,
        )
        assert endpoint.records() == before

    [outcome] = outcomes
    assert outcome["reached"] and outcome["problems"] == []
    assert outcome["catch_up_expected"] == {
        "catch_up_pages": 1,
        "catch_up_listed": 9,
        "catch_up_new_records": 3,
        "catch_up_newer_copies": 6,
    }


def _sweep_moved_on(
    tmp_path: Path,
    backend: Backend,
    crash: str,
    interrupted_by: str | None = None,
    args: list[str] | None = None,
    records: list[Any] = RECORDS,
    double: bool = False,
) -> tuple[dict[str, Any], list[Any], list[Any]]:
    """`crash_sweep --source-moves-on` of the first harvest (`args`, by default the CLI's) at
    one `crash` (after the run was killed at `interrupted_by` first: `--resumed`; `double`:
    the rerun killed at `crash` once more first): its one outcome, and the source's records
    before and after the sweep."""
    with OAIEndpoint(records, page_size=20) as endpoint:
        before = endpoint.records()
        empty = backend.new_home(tmp_path, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=10)
        scenario = crash_sweep.Scenario(
            "first",
            args or [*FULL, "--json"],
            empty,
            interrupted_by=interrupted_by,
            endpoint=endpoint,
        )
        [outcome] = crash_sweep.run_scenario(
            backend,
            tmp_path,
            endpoint.base_url,
            scenario,
            [crash],
            per_point=1,
            double=double,
            log=lambda _: None,
            moves_on_pages=20,
        )
        return outcome, before, endpoint.records()


def test_the_sweep_with_a_source_that_moves_on_resumes_a_run_killed_twice(
    tmp_path: Path,
) -> None:
    """`--source-moves-on --resumed-at discover`: the run killed with two pages listed, then
    killed again in its write stage, the source changed, rerun: the rerun is still the
    interrupted run, so its catch-up list takes the 6 changed records of its first page and
    the 3 added before its token; the pages and records listed are the rerun's list's, not
    added to the list its second attempt made before the change (the sweep took the
    template's interrupted run for one finished before, expected no catch-up list and
    flagged every point)."""
    outcome, before, after = _sweep_moved_on(
        tmp_path, Backend(), "writer_apply:2:after", crash_sweep.INTERRUPTIONS["discover"]
    )
    assert after == before
    assert outcome["reached"] and outcome["problems"] == []
    assert outcome["catch_up_expected"] == {
        "catch_up_pages": 1,
        "catch_up_listed": 9,
        "catch_up_new_records": 3,
        "catch_up_newer_copies": 6,
    }


@pytest.mark.postgres
def test_the_sweep_with_a_source_that_moves_on_runs_on_postgresql(tmp_path: Path) -> None:
    """`--source-moves-on --backend postgres` at one point: the homes are databases of a
    throwaway server (copied from a template database), the fresh harvest of the changed
    source one more: the rerun's catch-up list and result are found as on SQLite."""
    backend = crash_sweep.PostgresBackend()
    try:
        outcome, before, after = _sweep_moved_on(tmp_path, backend, "writer_apply:2:after")
    finally:
        backend.close()
    assert after == before
    assert outcome["reached"] and outcome["problems"] == []
    assert outcome["catch_up_expected"]["catch_up_newer_copies"] == 6


def test_the_sweep_with_a_source_that_moves_on_reruns_a_dagster_run(tmp_path: Path) -> None:
    """`--source-moves-on --dagster` at one point: a Dagster run of the last days and today's
    window (where the change is dated), killed in its write stage, a new run of the same
    partitions after the change: its catch-up list and result are found like a fresh run's
    (the sweep read the run of a Dagster report by a CLI report's `run_id`, and failed)."""
    today = datetime.now(UTC).date()
    first_day = settled_midnight() - timedelta(days=2)
    records = generate_datacite_records(
        100, seed=5, start=first_day, span_days=2, prefixes=(PREFIX,), deleted_fraction=0.05
    )
    grid = ["dagster", first_day.date().isoformat(), today.isoformat()]
    outcome, before, after = _sweep_moved_on(
        tmp_path, Backend(), "writer_apply:2:after", args=grid, records=records
    )
    assert after == before
    assert outcome["reached"] and outcome["problems"] == []
    assert outcome["catch_up_expected"] == {
        "catch_up_pages": 1,
        "catch_up_listed": 9,
        "catch_up_new_records": 3,
        "catch_up_newer_copies": 6,
    }


def test_the_sweep_with_a_source_that_moves_on_expects_a_resumed_run_finished_as_it_ended(
    tmp_path: Path,
) -> None:
    """`--source-moves-on --resumed-at discover` killed once the resumed run had finished
    (its catch-up list, of nothing changed yet, counted): the rerun is a new run of the
    change, and the finished run keeps the page it counted (the sweep expected none)."""
    outcome, before, after = _sweep_moved_on(
        tmp_path, Backend(), "finish_run:1:after", crash_sweep.INTERRUPTIONS["discover"]
    )
    assert after == before
    assert outcome["reached"] and outcome["problems"] == []
    assert outcome["catch_up_expected"]["catch_up_pages"] == 1
    assert outcome["catch_up_expected"]["catch_up_listed"] == 0


def test_the_sweep_with_a_source_that_moves_on_and_a_double_kill_after_a_finished_run(
    tmp_path: Path,
) -> None:
    """`--source-moves-on --double`, killed once the run had finished: the next run, of the
    change, is killed at the same point after it finished too, so the rerun is a third run
    with nothing to write (the sweep expected the rerun to write the change, and flagged
    it)."""
    outcome, before, after = _sweep_moved_on(tmp_path, Backend(), "finish_run:1:after", double=True)
    assert after == before
    assert outcome["attempts"] == ["finish_run:1:after", "finish_run:1:after"]
    assert outcome["problems"] == []


@pytest.mark.parametrize("crash", ["mark_gone:1:after", "writer_apply:1:after"])
def test_the_sweep_with_a_source_that_moves_on_reruns_a_reconcile_like_a_fresh_one(
    tmp_path: Path, crash: str
) -> None:
    """`crash_sweep --source-moves-on --scenario reconcile` at one point, so that the mode
    cannot rot: killed once it had deleted the vanished records (before marking them gone,
    or after), the source lists one of them again, drops again one it had listed again and
    drops two more; the rerun is found like a fresh reconcile of the changed source, its
    report as derived from the change (the one listed again deleted and returned too); the
    source is as it was after. On the code before, either the record listed again stayed a
    tombstone or the rerun reported returned the record dropped again."""
    records = RECORDS[:60]
    with OAIEndpoint(records, page_size=10) as endpoint:
        empty = Backend().new_home(tmp_path, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=10)
        full = Backend().new_home(tmp_path, "full", empty)
        _harvest(full, FULL)
        template, reconciled = crash_sweep.reconcile_template(
            Backend(), tmp_path, full, endpoint, lambda _: None
        )
        before = endpoint.records()
        scenario = crash_sweep.Scenario(
            "reconcile",
            ["reconcile", HARVESTER, "--json"],
            template,
            endpoint=endpoint,
            reconciled=reconciled,
        )
        [outcome] = crash_sweep.run_scenario(
            Backend(),
            tmp_path,
            endpoint.base_url,
            scenario,
            [crash],
            per_point=1,
            double=False,
            log=lambda _: None,
            moves_on_pages=10,
        )
        assert endpoint.records() == before
    assert outcome["reached"] and outcome["problems"] == []


def test_a_home_that_never_harvested_has_no_target_rows_though_its_target_has_a_community(
    tmp_path: Path,
) -> None:
    """`--writers 2 --failing-records --source-moves-on`: the starting home's target holds
    the community the first writer takes the refused records into, but no run: its target
    rows (what the killed attempt found) are none. The sweep died of an IndexError in
    `snapshot`, which wants a run, before its first point."""
    home = Backend().new_home(tmp_path, "empty")
    crash_sweep.register_harvester(
        home, "http://127.0.0.1:9/oai", batch_size=10, writers=2, failing_records=True
    )
    assert crash_sweep._target_by_record(home) == {}
