"""`crash_sweep --fails-first` at a few points, so that the mode cannot rot: a harvest that
fails outright (the source refuses its list half way, HTTP 403; `target`: the target's disk
fills after half its write batches, SQLITE_FULL), killed while it fails and while it is
rerun once the source or the target recovered, ends like an uninterrupted fail-then-rerun."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from oai_pipeline.sample_endpoint.faults import Faults
from oai_pipeline.sample_endpoint.records import generate_datacite_records
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline_tests.resume import crash_sweep
from oai_pipeline_tests.resume.crash_sweep import HARVESTER, PREFIX, Backend
from oai_pipeline_tests.resume.test_crash_points import (
    FIRST_DAY,
    FULL,
    INCREMENTAL,
    RELISTED_SINCE,
    _harvest,
)
from oai_pipeline_tests.resume.test_crash_points import RECORDS as CRASH_RECORDS

RECORDS = generate_datacite_records(
    80, seed=5, start=datetime(2024, 1, 5, tzinfo=UTC), span_days=2, prefixes=(PREFIX,)
)
crash_sweep.unreadable(RECORDS, 13)  # records failing in the transform stage, as swept


ARGS = ["harvest", HARVESTER, "--json"]


def sweep(tmp_path: Path, scenario: crash_sweep.Scenario, point: str) -> list[tuple]:
    """The scenario killed at `point` and before recording the failure, in the failing run
    and in the rerun: each crash's (spec, reached, problems)."""
    outcomes = crash_sweep.run_scenario(
        Backend(),
        tmp_path,
        scenario.endpoint.base_url,
        scenario,
        [point, "finish_run:1:before"],
        per_point=1,
        double=False,
        log=lambda _: None,
    )
    return [(o["spec"], o["reached"], o["problems"]) for o in outcomes]


def swept_cleanly(point: str) -> list[tuple]:
    return [
        (f"failing/{point}", True, []),
        ("failing/finish_run:1:before", True, []),
        (point, True, []),
        ("finish_run:1:before", True, []),
    ]


def test_a_failed_harvest_killed_while_failing_and_while_rerun_ends_like_an_uninterrupted_one(
    tmp_path: Path,
) -> None:
    """Two pages staged, the third refused: killed after staging the second page and before
    recording the failure, the harvest rerun on the failing source fails as the
    uninterrupted one did; killed at the same points of the rerun on the recovered source,
    its rerun ends like the uninterrupted rerun."""
    with OAIEndpoint(RECORDS, page_size=20) as endpoint:
        empty = Backend().new_home(tmp_path, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=10)
        failing = crash_sweep.fails_first(len(RECORDS), 20)
        scenario = crash_sweep.Scenario(
            "first", ARGS, empty, endpoint=endpoint, fails_first=failing
        )
        swept = sweep(tmp_path, scenario, "stage:2:after")
        assert endpoint.faults == Faults()  # the source recovered after each failing run

    assert failing == Faults(refuse_list_from_cursor=40)
    assert swept == swept_cleanly("stage:2:after")


def test_a_harvest_whose_target_fills_killed_while_failing_and_while_rerun_ends_alike(
    tmp_path: Path,
) -> None:
    """Four target batches, the disk full after the second: killed after the first batch
    (its records committed, not saved) and before recording the failure, the harvest rerun
    on the full target fails as the uninterrupted one did; killed at the same points of
    the rerun once space was freed, its rerun ends like the uninterrupted rerun."""
    with OAIEndpoint(RECORDS, page_size=40) as endpoint:
        empty = Backend().new_home(tmp_path, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=20)
        full = crash_sweep.target_full(Backend(), tmp_path, empty, ARGS)
        scenario = crash_sweep.Scenario("first", ARGS, empty, endpoint=endpoint, fails_first=full)
        swept = sweep(tmp_path, scenario, "writer_apply:1:after")

    assert swept == swept_cleanly("writer_apply:1:after")


def test_with_two_writers_the_full_disk_refuses_the_mirror_too(tmp_path: Path) -> None:
    """`--writers 2`: both targets' files are on the one full disk. Half the batches (the
    first writer's, all of one group's) fill it: the mirror's first batch is refused, the
    run fails naming the mirror's file, which holds no record."""
    with OAIEndpoint(RECORDS, page_size=40) as endpoint:
        empty = Backend().new_home(tmp_path, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=20, writers=2)
        full = crash_sweep.target_full(Backend(), tmp_path, empty, ARGS)
        scenario = crash_sweep.Scenario("first", ARGS, empty, endpoint=endpoint, fails_first=full)
        failed, _, end = crash_sweep._fail_first(Backend(), tmp_path, scenario, empty)

    mirror = failed.env[crash_sweep.MIRROR_DB_URL_ENV]
    [(pages,)] = crash_sweep.query(mirror, "PRAGMA page_count")
    [(written,)] = crash_sweep.query(mirror, "SELECT count(*) FROM target_records")
    assert end[0] == "failed"
    assert "database or disk is full" in end[1] and "HOME/mirror.sqlite is full" in end[1]
    assert pages <= full.mirror_max_pages
    assert written == 0


def test_a_first_writer_whose_target_fills_part_way_killed_ends_alike(tmp_path: Path) -> None:
    """`--writers 2 --fails-first target --target-full-after 1`: the first writer's target is
    full after its first batch, the mirror's disk has room: the first writer fails part-way
    through the group (one batch committed, the mirror not written yet), naming its own
    target. Killed after that batch, in the failing run and in the rerun once space was
    freed, the harvest ends like an uninterrupted fail-then-rerun."""
    point = "writer_apply:1:after"
    with OAIEndpoint(RECORDS, page_size=40) as endpoint:
        empty = Backend().new_home(tmp_path, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=20, writers=2)
        full = crash_sweep.target_full(Backend(), tmp_path, empty, ARGS, after_batches=1)
        scenario = crash_sweep.Scenario("first", ARGS, empty, endpoint=endpoint, fails_first=full)
        outcomes = crash_sweep.run_scenario(
            Backend(), tmp_path, endpoint.base_url, scenario, [point], 1, False, lambda _: None
        )

    # the home the uninterrupted failing run left (`_fail_first`)
    failed_path = tmp_path / "first-failed"
    failed = crash_sweep.Home(failed_path, crash_sweep._base_env(failed_path))
    status, error = crash_sweep._failed_run_end(failed) or ("", "")
    [(target_written,)] = crash_sweep.query(
        crash_sweep._settings(failed).target_db_url, "SELECT count(*) FROM target_records"
    )
    mirror_written = crash_sweep._target_rows(failed.env[crash_sweep.MIRROR_DB_URL_ENV])[0]
    assert full.mirror_max_pages is None
    assert status == "failed" and "HOME/target.sqlite is full" in error
    assert target_written == 20 and mirror_written == []
    assert [(o["spec"], o["reached"], o["problems"]) for o in outcomes] == [
        (f"failing/{point}", True, []),
        (point, True, []),
    ]


def test_an_incremental_harvest_failing_first_killed_while_failing_and_rerun_ends_alike(
    tmp_path: Path,
) -> None:
    """`--scenario incremental --fails-first`: the harvest since the last day, after the
    source changed, is refused its list from half the pages it lists (measured: the
    incremental list is shorter than the source). Killed after staging its first page, in
    the failing run and in the rerun on the recovered source, it ends like an uninterrupted
    fail-then-rerun."""
    point = "stage:1:after"
    with OAIEndpoint(CRASH_RECORDS, page_size=20) as endpoint:
        empty = Backend().new_home(tmp_path, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=10)
        full = Backend().new_home(tmp_path, "full", empty)
        _harvest(full, FULL)
        crash_sweep.change_source(
            endpoint, CRASH_RECORDS, FIRST_DAY + timedelta(days=10), relisted_since=RELISTED_SINCE
        )
        scenario = crash_sweep.Scenario(
            "incremental", [*INCREMENTAL, "--json"], full, endpoint=endpoint
        )
        failing = crash_sweep.what_fails_first("source", Backend(), tmp_path, scenario, 20)
        scenario.fails_first = failing
        outcomes = crash_sweep.run_scenario(
            Backend(), tmp_path, endpoint.base_url, scenario, [point], 1, False, lambda _: None
        )

    assert failing == Faults(refuse_list_from_cursor=40)
    assert [(o["spec"], o["reached"], o["problems"]) for o in outcomes] == [
        (f"failing/{point}", True, []),
        (point, True, []),
    ]
