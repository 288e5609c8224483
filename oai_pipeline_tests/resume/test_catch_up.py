"""A harvest killed, then rerun after the source moved on (records updated, deleted and added
since the killed attempt, dated when they changed as real sources date them), ends like a
harvest of the source as it is now into a fresh home: the rerun resumes its run, and lists
again what the source changed since that run began listing (its catch-up list, see
`discover._catch_up_from`). From the CLI and under Dagster, on PostgreSQL, killed during the
catch-up list itself, in a dated window, a capped run, a set and a source dating records by
day; and what the rerun reports.
"""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from oai_pipeline.oai.types import Granularity
from oai_pipeline.sample_endpoint.records import generate_datacite_records
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline_tests.benchmark import revise
from oai_pipeline_tests.resume import crash_sweep
from oai_pipeline_tests.resume.crash_sweep import EXIT_CODE, HARVESTER, PREFIX, Backend, Home
from oai_pipeline_tests.support import register, settled_midnight

TODAY = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
# Records of two days before today (before the hours a catch-up list looks back on): a
# Dagster run of them and today's window also lists what the source changed today (dated
# now, as real sources date changes).
FIRST_DAY = settled_midnight() - timedelta(days=2)
DAGSTER = ["dagster", FIRST_DAY.date().isoformat(), TODAY.date().isoformat()]


def _run(home: Home, args: list[str], crash: str = "none") -> str:
    """The command's output (stdout) after checking how it ended."""
    return _ran(home, args, crash).stdout


def _ran(home: Home, args: list[str], crash: str = "none") -> subprocess.CompletedProcess[str]:
    result = crash_sweep._cli(home, crash, args)
    expected = 0 if crash == "none" else EXIT_CODE
    assert result.returncode == expected, result.stdout + result.stderr[-3000:]
    return result


def _target(home: Home) -> dict[str, tuple]:
    """Each live harvested record's DOI and data, by its OAI identifier. A tombstone counts as
    no record: the killed attempt wrote records the source deleted since, which a fresh
    harvest never creates."""
    rows = crash_sweep.query(
        crash_sweep._settings(home).target_db_url, "SELECT * FROM target_records"
    )
    return {
        r.source_identifier: (r.doi, crash_sweep._digest(r.data))
        for r in rows
        if r.state != "tombstone"
    }


def _staged(home: Home) -> list[str]:
    rows = crash_sweep.query(
        crash_sweep._settings(home).state_db_url, "SELECT identifier FROM harvest_records"
    )
    return sorted(r[0] for r in rows)


def _move_on(
    endpoint: OAIEndpoint,
    staged: list[str],
    updated: int = 4,
    seed: int = 1,
    set_spec: str | None = None,
) -> datetime:
    """Update `updated` and delete 2 records the killed attempt staged, add 3, all dated now
    (after the killed attempt listed), the new ones in `set_spec` if given; returns that
    moment."""
    now = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    current = {record.identifier: record for record in endpoint.records()}
    live = [identifier for identifier in staged if not current[identifier].deleted]
    chosen = random.Random(seed).sample(live, updated + 2)
    for identifier in chosen[:updated]:
        revise(endpoint, current[identifier], now, PREFIX)
    for identifier in chosen[updated:]:
        endpoint.mark_deleted(identifier, now)
    for index, record in enumerate(
        generate_datacite_records(3, seed=99 + seed, start=now, span_days=1, prefixes=(PREFIX,))
    ):
        identifier = f"oai:generated.oai-pipeline:new-{seed}-{index}"
        sets = [set_spec] if set_spec else record.set_specs
        endpoint.upsert(
            dataclasses.replace(record, identifier=identifier, datestamp=now, set_specs=sets)
        )
    return now


def _records(count: int = 100) -> list:
    return generate_datacite_records(
        count, seed=5, start=FIRST_DAY, span_days=2, prefixes=(PREFIX,), deleted_fraction=0.05
    )


def _scenario(
    tmp_path: Path,
    backend: Backend,
    args: list[str],
    crash: str,
    set_spec: str | None = None,
    page_size: int = 20,
    records: list | None = None,
    granularity: Granularity = "seconds",
) -> tuple[Home, Home, subprocess.CompletedProcess[str]]:
    """A harvest killed at `crash`, the source moved on, the harvest rerun; and a fresh
    harvest of the source as it is now. Returns both homes and the rerun."""
    served = _records() if records is None else records
    with OAIEndpoint(served, page_size=page_size, granularity=granularity) as endpoint:
        empty = backend.new_home(tmp_path, "empty")
        register(
            crash_sweep._settings(empty),
            endpoint.base_url,
            harvester_id=HARVESTER,
            metadata_prefix=PREFIX,
            batch_size=10,
            setspec=set_spec,
        )
        home = backend.new_home(tmp_path, "home", empty)
        _run(home, args, crash)
        _move_on(endpoint, _staged(home), set_spec=set_spec)
        rerun = _ran(home, args)
        fresh = backend.new_home(tmp_path, "fresh", empty)
        _run(fresh, args)
    return home, fresh, rerun


@pytest.mark.parametrize(
    "crash",
    [
        # discover: two pages staged, the list not finished
        "stage:2:after",
        # write: the run listed and transformed all, a batch of creations in the target
        "writer_apply:2:after",
    ],
)
def test_a_rerun_after_the_source_moved_on_ends_like_a_fresh_harvest_of_it(
    tmp_path: Path, crash: str
) -> None:
    """Before, the rerun went on from its token and kept the old copies of what it had
    staged or written, and missed the records added before the token."""
    home, fresh, rerun = _scenario(tmp_path, Backend(), ["harvest", HARVESTER], crash)
    assert "listing again what the source changed since" in rerun.stderr
    assert _target(home) == _target(fresh)


def test_a_dagster_rerun_after_the_source_moved_on_ends_like_a_fresh_harvest(
    tmp_path: Path,
) -> None:
    """A Dagster run of the days of the records and today's window (where the changes are
    dated), killed in its write stage."""
    home, fresh, rerun = _scenario(tmp_path, Backend(), DAGSTER, "writer_apply:2:after")
    assert _target(home) == _target(fresh)
    # the materialisation of raw_oai_xml counts today's window's catch-up list apart
    report = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert (report["catch_up_pages"], report["catch_up_listed"]) == (1, 9)


def test_a_postgres_rerun_after_the_source_moved_on_ends_like_a_fresh_harvest(
    tmp_path: Path,
) -> None:
    backend = crash_sweep.PostgresBackend()
    try:
        home, fresh, _ = _scenario(tmp_path, backend, ["harvest", HARVESTER], "stage:2:after")
        assert _target(home) == _target(fresh)
    finally:
        backend.close()


def test_a_run_killed_during_its_catch_up_list_converges_when_rerun(tmp_path: Path) -> None:
    """Killed in the write stage (its token sweep done), the source moved on by more than a
    page; the rerun killed after the first page of its catch-up list; the next rerun ends
    like a fresh harvest, with the changes made between the two reruns too."""
    args = ["harvest", HARVESTER]
    with OAIEndpoint(_records(), page_size=20) as endpoint:
        empty = Backend().new_home(tmp_path, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=10)
        home = Backend().new_home(tmp_path, "home", empty)
        _run(home, args, "writer_apply:2:after")
        _move_on(endpoint, _staged(home), updated=30)
        # the token sweep's last page again (stage 1), then the catch-up's first page
        killed = _ran(home, args, "stage:2:after")
        assert "listing again what the source changed" in killed.stderr
        assert _run_counters(home)["staged"] < 103  # not all the new records staged
        _move_on(endpoint, _staged(home), updated=3, seed=2)
        _run(home, args)
        fresh = Backend().new_home(tmp_path, "fresh", empty)
        _run(fresh, args)
    assert _target(home) == _target(fresh)


def _run_counters(home: Home) -> dict[str, int]:
    report = json.loads(_run(home, ["status", "--json"]))
    return report["counters"]


def _capped_scenario(
    tmp_path: Path, cap: int
) -> tuple[Home, Home, subprocess.CompletedProcess[str], set[str]]:
    """A harvest capped at `cap` killed in the write stage, the source moved on (records the
    run staged updated and deleted, 3 added), the harvest rerun; and a fresh uncapped
    harvest of the source as it is now: both homes, the rerun, what the run staged before."""
    args = ["harvest", HARVESTER, "--max-records", str(cap)]
    with OAIEndpoint(_records(), page_size=20) as endpoint:
        empty = Backend().new_home(tmp_path, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=10)
        home = Backend().new_home(tmp_path, "home", empty)
        _run(home, args, "writer_apply:2:after")
        before = set(_staged(home))
        _move_on(endpoint, sorted(before))
        rerun = _ran(home, args)
        fresh = Backend().new_home(tmp_path, "fresh", empty)
        _run(fresh, ["harvest", HARVESTER])
    return home, fresh, rerun, before


def test_a_capped_run_resumed_takes_the_newer_copies_of_its_records_and_keeps_its_cap(
    tmp_path: Path,
) -> None:
    """A run capped one record above what the source held (the sweep ended under the cap),
    killed in the write stage; the source updated and deleted records the run staged and
    added 3. The rerun's catch-up list stages the newer copies of the run's records (they
    use no room under the cap) and one new record: before, the page was cut to the room
    left, dropping newer copies of staged records with the new ones."""
    home, fresh, _, before = _capped_scenario(tmp_path, 101)
    assert _run_counters(home)["staged"] == 101  # the cap holds
    got, expected = _target(home), _target(fresh)
    assert {i: got.get(i) for i in before} == {i: expected.get(i) for i in before}
    assert len(set(got) - before) == 1


@pytest.mark.parametrize(
    ("args", "set_spec"),
    [
        # an incremental harvest of the records' last day and on
        (
            ["harvest", HARVESTER, "--since", (FIRST_DAY + timedelta(days=1)).date().isoformat()],
            None,
        ),
        # a harvester of one set
        (["harvest", HARVESTER], "dataset"),
    ],
    ids=["since", "set"],
)
def test_a_dated_or_set_rerun_after_the_source_moved_on_ends_like_a_fresh_harvest(
    tmp_path: Path, args: list[str], set_spec: str | None
) -> None:
    home, fresh, rerun = _scenario(
        tmp_path, Backend(), args, "stage:2:after", set_spec=set_spec, page_size=5
    )
    assert "listing again what the source changed since" in rerun.stderr
    assert _target(home) == _target(fresh)


def test_a_rerun_takes_what_a_day_granular_source_changed_the_same_day(tmp_path: Path) -> None:
    """A source that dates records by day: records the killed attempt staged today and the
    source changed again today keep their datestamp. The rerun's catch-up list has their
    new copies; before, they counted as the copies staged (same datestamp) and the rerun
    wrote the old ones."""
    records = generate_datacite_records(
        60, seed=5, start=TODAY, span_days=1, prefixes=(PREFIX,), deleted_fraction=0.05
    )
    home, fresh, rerun = _scenario(
        tmp_path,
        Backend(),
        ["harvest", HARVESTER],
        "stage:2:after",
        records=records,
        granularity="day",
    )
    assert "listing again what the source changed since" in rerun.stderr
    assert _target(home) == _target(fresh)


def test_the_rerun_reports_each_record_once(tmp_path: Path) -> None:
    """Killed once every record was written: the rerun writes again only what the source
    changed since, and reports each record once under the action the run took on it: the
    others' by the killed attempt (94 of them `written_earlier`: 89 created, 5 deleted at
    the source before they were ever written)."""
    home, fresh, rerun = _scenario(
        tmp_path, Backend(), ["harvest", HARVESTER, "--json"], "save_written:1:after"
    )
    report = json.loads(rerun.stdout)
    assert report["actions"] == {"create": 3 + 89, "nothing": 5, "update": 4, "delete": 2}
    assert report["written_earlier"] == 94
    assert sum(report["actions"].values()) == report["harvested"] == 103
    assert _target(home) == _target(fresh)


def test_a_capped_run_that_reached_its_cap_still_takes_the_newer_copies_of_its_records(
    tmp_path: Path,
) -> None:
    """A run capped at 50 of the source's 100 records, killed in the write stage after its
    list reached the cap; the source updated and deleted records the run staged. The rerun
    has no room for new records, but its catch-up list stages the newer copies of its own:
    before, it returned at once (its cap reached) and wrote their pre-crash copies."""
    home, fresh, rerun, before = _capped_scenario(tmp_path, 50)
    assert "listing again what the source changed since" in rerun.stderr
    assert _run_counters(home)["staged"] == 50  # the cap holds, exactly
    got, expected = _target(home), _target(fresh)
    assert set(got) <= before
    assert {i: got.get(i) for i in before} == {i: expected.get(i) for i in before}


def test_the_rerun_counts_its_catch_up_list_apart(tmp_path: Path) -> None:
    """The token sweep's counters keep their meaning: the rerun redoes the page it was killed
    on (20 duplicates) and lists the rest, the 3 new records last: 6 pages, 123 records. The
    catch-up list's page and the 9 records it lists (the 6 changed, the 3 added) are counted
    apart, with what it staged (the newer copies of 4 records the token sweep had passed;
    the new ones the sweep had), in `status` and in the harvest's report. Before, they were
    added to the sweep's counters: 132 records discovered, and nothing said why."""
    home, _, rerun = _scenario(
        tmp_path, Backend(), ["harvest", HARVESTER, "--json"], "stage:2:after"
    )
    counters = _run_counters(home)
    sweep = {"pages_read": 6, "discovered": 123, "duplicates_skipped": 20, "staged": 103}
    assert {name: counters[name] for name in sweep} == sweep
    catch_up = {
        "catch_up_pages": 1,
        "catch_up_listed": 9,
        "catch_up_new_records": 0,
        "catch_up_newer_copies": 4,
    }
    assert {name: counters[name] for name in catch_up} == catch_up
    assert {name: json.loads(rerun.stdout)[name] for name in catch_up} == catch_up
    assert (
        "catch-up list (what the source changed since the run began): pages 1, records "
        "listed 9; staged 0 new records and 4 newer copies of the run's own"
    ) in _run(home, ["status"])


def test_a_capped_rerun_counts_its_own_records_listed_again_as_duplicates(
    tmp_path: Path,
) -> None:
    """A capped run killed once it had written every record; its rerun lists its last page
    again. Those records are the run's own, which no earlier harvest wrote: duplicates of
    the run, not `existing_skipped` (records a capped run skips as written before it).
    Before, the 20 records of that page counted as existing."""
    args = ["harvest", HARVESTER, "--max-records", "101"]
    with OAIEndpoint(_records(), page_size=20) as endpoint:
        home = Backend().new_home(tmp_path, "home")
        crash_sweep.register_harvester(home, endpoint.base_url, batch_size=10)
        _run(home, args, "save_written:1:after")
        _run(home, args)
    counters = _run_counters(home)
    assert (counters["existing_skipped"], counters["duplicates_skipped"]) == (0, 20)
    assert counters["staged"] == 100


def test_a_rerun_killed_after_staging_a_catch_up_page_still_counts_what_it_took(
    tmp_path: Path,
) -> None:
    """Killed in the write stage, the source moved on; the rerun killed once the first page
    of its catch-up list was staged, before it was counted. The next rerun reports the new
    records and newer copies that page took, as a rerun not killed there does: before, it
    found them staged and took them for duplicates (9 newer copies reported of 27 taken)."""
    args = ["harvest", HARVESTER, "--json"]
    catch_up = ("catch_up_new_records", "catch_up_newer_copies")
    with OAIEndpoint(_records(200), page_size=20) as endpoint:
        empty = Backend().new_home(tmp_path, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=10)
        killed = Backend().new_home(tmp_path, "killed", empty)
        _run(killed, args, "writer_apply:2:after")
        _move_on(endpoint, _staged(killed), updated=30)
        reference = Backend().new_home(tmp_path, "reference", killed)
        expected = json.loads(_run(reference, args))
        # the token sweep's last page again (stage 1), then the catch-up list's first page
        _run(killed, args, "stage:2:after")
        got = json.loads(_run(killed, args))
    assert expected["catch_up_newer_copies"] > 0
    assert {k: got[k] for k in catch_up} == {k: expected[k] for k in catch_up}
    assert _target(killed) == _target(reference)
