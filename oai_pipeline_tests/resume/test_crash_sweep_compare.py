"""The crash sweep's comparison of a rerun's report with the uncrashed run's (a Dagster
harvest's, a reconcile's): the sweep is only as good as it, and a comparison that flagged
nothing passed every point."""

from __future__ import annotations

from typing import Any

import pytest

from oai_pipeline_tests.resume.crash_sweep import (
    SourceMove,
    _compare_dagster_reports,
    _written_again_view,
    compare,
    compare_reports,
    moved_on_problems,
    moved_on_report,
    moved_on_statuses,
    moved_on_view,
    new_run_of_the_change_problems,
)


def _report(actions: dict[str, int], **changes: Any) -> dict[str, Any]:
    """A `dagster_report` of a harvest run of ten records (seven created, three unchanged)."""
    report = {
        "dagster": True,
        "harvest_runs": 1,
        "harvested": 10,
        "deleted_at_source": 0,
        "cap_reached": False,
        "created": actions.get("create", 0),
        "updated": 0,
        "deleted": 0,
        "unchanged": actions.get("skip", 0),
        "actions": actions,
        "errors": 0,
        "error_types": {},
        "local_changes_undone": 0,
        "run_records": {"imported": 7, "unchanged": 3},
        "harvest_run_status": "succeeded",
    }
    return {**report, **changes}


UNCRASHED = _report({"create": 7, "skip": 3})


def test_a_resumed_run_reporting_earlier_writes_as_already_written_matches() -> None:
    resumed = _report({"create": 4, "already_written": 3, "skip": 3})
    assert _compare_dagster_reports(UNCRASHED, resumed) == []


@pytest.mark.parametrize(
    "rerun",
    [
        # three records the killed attempt wrote are not in the rerun's report at all
        _report({"create": 4, "skip": 3}),
        # the run's records per status lost those three
        _report({"create": 4, "already_written": 3, "skip": 3}, run_records={"imported": 4}),
        # a record counted under an action the uncrashed run never took
        _report({"create": 6, "update": 1, "skip": 3}),
        # a new harvest run (the killed attempt had finished its own) that writes again
        _report({"create": 7, "skip": 3}, harvest_runs=2),
    ],
)
def test_a_rerun_reporting_otherwise_than_the_uncrashed_run_is_a_problem(
    rerun: dict[str, Any],
) -> None:
    assert _compare_dagster_reports(UNCRASHED, rerun) != []


def _reconcile_report(run_id: int, **changes: Any) -> dict[str, Any]:
    """A reconcile's `--json` report: two records vanished and deleted, one listed again."""
    report = {
        "harvester_id": "h",
        "run_id": run_id,
        "vanished": ["oai:x:1", "oai:x:2"],
        "returned": ["oai:x:3"],
        "returned_actions": {"restore": 1},
        "actions": {"delete": 2},
        "errors": 0,
    }
    return {**report, **changes}


NOTHING_FOUND = {"vanished": [], "returned": [], "returned_actions": {}, "actions": {}}


@pytest.mark.parametrize(
    "rerun",
    [
        # killed after the deletions: the same run, the harvest of the record listed again
        # resumed (`already_written`)
        _reconcile_report(1, returned_actions={"already_written": 1}),
        # killed once its run was closed: a new reconcile of a source that did not change
        _reconcile_report(2, **NOTHING_FOUND),
    ],
)
def test_a_reconcile_rerun_reporting_what_the_uncrashed_one_did_matches(
    rerun: dict[str, Any],
) -> None:
    assert compare_reports(_reconcile_report(1), rerun) == []


@pytest.mark.parametrize(
    "rerun",
    [
        # the same run, its deletions lost
        _reconcile_report(1, vanished=[], actions={}),
        # a new reconcile reporting the closed one's deletions again as its own
        _reconcile_report(2),
        _reconcile_report(2, **{**NOTHING_FOUND, "actions": {"delete": 2}}),
    ],
)
def test_a_reconcile_rerun_reporting_otherwise_is_a_problem(rerun: dict[str, Any]) -> None:
    assert compare_reports(_reconcile_report(1), rerun) != []


TAKEN_OVER = {"reidentified": {"restore": 2}}


@pytest.mark.parametrize(
    ("rerun", "matches"),
    [
        # the run's take-overs, saved by the killed attempt, reported by its rerun
        (_reconcile_report(1, **TAKEN_OVER), True),
        # the killed attempt's take-overs the store never recorded: written earlier
        (_reconcile_report(1, reidentified={"restore": 1, "already_written": 1}), True),
        # the take-overs lost from the report, or counted under another action
        (_reconcile_report(1), False),
        (_reconcile_report(1, reidentified={"nothing": 2}), False),
        # a new reconcile (the run was closed) taking over again
        (_reconcile_report(2, **NOTHING_FOUND, **TAKEN_OVER), False),
    ],
)
def test_a_rerun_reports_the_take_overs_of_freed_dois_of_its_run(
    rerun: dict[str, Any], matches: bool
) -> None:
    assert (compare_reports(_reconcile_report(1, **TAKEN_OVER), rerun) == []) is matches


def _target_row(identifier: str, state: str, revisions: int) -> tuple:
    """A `snapshot` target row: identifier, state, DOI, revision, revisions, data, …"""
    return (identifier, state, "10.1/x", revisions, revisions, "data", "", False, "")


def test_a_moved_on_record_an_incremental_run_wrote_twice_is_no_problem() -> None:
    """`--source-moves-on` of an incremental harvest: a record the first harvest wrote (one
    revision), the killed attempt updated and the rerun updated again (its newer copy) has
    three revisions, two of them the run's: no problem (the sweep counted the first
    harvest's against the run and flagged every point past the write stage); a third
    write by the run is one."""
    move = SourceMove(updated=["a"], deleted=["b"], new=[])
    was = {"a": _target_row("a", "live", 1), "b": _target_row("b", "live", 1)}
    twice = {"target": [_target_row("a", "live", 3), _target_row("b", "tombstone", 3)]}
    assert moved_on_problems(twice, move, {"a", "b"}, was) == []

    thrice = {"target": [_target_row("a", "live", 4), _target_row("b", "tombstone", 3)]}
    assert moved_on_problems(thrice, move, {"a", "b"}, was) == ["a written 3 times by the run"]
    # a record the run created: its own revisions only
    assert moved_on_problems(twice, move, {"a", "b"}) != []


def _snapshot(**changes: Any) -> dict[str, Any]:
    """A `snapshot` of a home whose harvester wrote one record to the target and its mirror
    (`--writers 2`)."""
    row = ("oai:x:1", "live", "", 1, 1, "data", "", False, "")
    snapshot = {
        "target": [row],
        "mirror": [row],
        "duplicates": [],
        "harvest_records": [("oai:x:1",)],
        "writer_memories": [
            ("oai:x:1", "mirror-service", "oai:x:1", 1, "2024-01-05", "f"),
            ("oai:x:1", "on the harvest record", "oai-service"),
        ],
        "errors": [],
        "last_run_status": "succeeded",
        "unfinished_runs": [],
        "run_record_statuses": {"imported": 1},
        "locks": 0,
        "partitions": {},
        "tmp_files": [],
    }
    return {**snapshot, **changes}


@pytest.mark.parametrize(
    ("rerun", "flagged"),
    [
        # the mirror wrote the record twice (a new revision), the target once
        (_snapshot(mirror=[("oai:x:1", "live", "", 2, 2, "data", "", False, "")]), "mirror"),
        # the mirror's memory of its write lost: its next harvest rewrites the record
        (_snapshot(writer_memories=[("oai:x:1", "on the harvest record", "oai-service")]), "memor"),
    ],
)
def test_a_rerun_differing_in_the_second_writers_target_or_memory_is_flagged(
    rerun: dict[str, Any], flagged: str
) -> None:
    problems = compare(_snapshot(), rerun)
    assert len(problems) == 1 and flagged in problems[0]


def test_a_record_written_again_after_the_source_moved_on_is_compared_without_revisions() -> None:
    """In both targets and each writer's memory (`--source-moves-on --writers 2`)."""
    rerun = _snapshot(
        target=[("oai:x:1", "live", "", 2, 2, "data", "", False, "")],
        mirror=[("oai:x:1", "live", "", 2, 2, "data", "", False, "")],
        writer_memories=[
            ("oai:x:1", "mirror-service", "oai:x:1", 2, "2024-01-06", "f"),
            ("oai:x:1", "on the harvest record", "oai-service"),
        ],
    )
    views = [_written_again_view(s, {"oai:x:1"}) for s in (_snapshot(), rerun)]
    assert compare(*views) == []


def test_a_moved_on_rerun_with_two_writers_counts_each_writers_rewrite() -> None:
    """`--writers 2 --source-moves-on`: a report's actions are each writer's, so a changed
    record both writers had created before the kill is updated (or deleted) by each in the
    rerun; the sweep moved one action per record and flagged every point past the write
    stage ('update': 8 vs 4)."""
    move = SourceMove(updated=["a"], deleted=["b"], new=[])
    fresh = {"actions": {"create": 4, "nothing": 2}}
    expected = moved_on_report(fresh, move, {"a", "b"}, {"a", "b"})
    assert expected == {"actions": {"create": 2, "update": 2, "delete": 2}}
    # the mirror had not written them yet (killed between the two writers' batches)
    expected = moved_on_report(fresh, move, {"a", "b"})
    assert expected == {"actions": {"create": 3, "update": 1, "nothing": 1, "delete": 1}}


def test_a_moved_on_tombstone_each_writer_wrote_is_compared_without_its_target_id() -> None:
    """A record the killed attempt created and the source then deleted: each writer's memory
    names its tombstone, where a fresh harvest wrote nothing (no target id)."""
    move = SourceMove(updated=[], deleted=["oai:x:1"], new=[])
    fresh = _snapshot(
        target=[],
        mirror=[],
        writer_memories=[("oai:x:1", "mirror-service", "", 0, "", "")],
    )
    rerun = _snapshot(
        target=[("oai:x:1", "tombstone", "", 2, 2, "data", "", False, "")],
        mirror=[("oai:x:1", "tombstone", "", 2, 2, "data", "", False, "")],
        writer_memories=[("oai:x:1", "mirror-service", "oai:x:1", 2, "2024-01-05", "f")],
    )
    view = moved_on_view(fresh, move, {"oai:x:1"}, set())
    assert compare(view, moved_on_view(rerun, move, {"oai:x:1"}, set())) == []


def test_the_new_run_of_a_moved_on_source_writes_each_change_once_per_writer() -> None:
    """The killed attempt had finished its run: the rerun is a new run of the change, whose
    report counts each writer's writes (`--writers 2`: twice the change); the sweep took
    them for once each and flagged `finish_run:1:after`."""
    move = SourceMove(updated=["a", "b"], deleted=["c"], new=[object()])
    twice = {"created": 2, "updated": 4, "deleted": 2}
    assert new_run_of_the_change_problems(twice, move, writers=2, double=False) == []
    assert new_run_of_the_change_problems(twice, move, writers=1, double=False) != []
    once = {"created": 1, "updated": 2, "deleted": 1}
    assert new_run_of_the_change_problems(once, move, writers=1, double=False) == []


def test_a_moved_on_draft_is_created_still_and_its_deletion_discards_it() -> None:
    """`--drafts --source-moves-on`: a draft the killed attempt created and the source then
    changed is reported `create` by the rerun (the run created it, see
    `_drafted_by_this_run`) and stays `imported`; one the source deleted is discarded
    (`delete_draft`, `gone`, no target record, no tombstone). The sweep expected a publishing
    writer's `update`, `delete`, `updated` and tombstones, and flagged 27 of 82 points."""
    move = SourceMove(updated=["a"], deleted=["b"], new=[])
    fresh = {"actions": {"create": 4, "nothing": 2}}
    assert moved_on_report(fresh, move, {"a", "b"}, drafts=True) == {
        "actions": {"create": 4, "nothing": 1, "delete_draft": 1}
    }
    statuses = {"imported": 4, "unchanged": 2}
    assert moved_on_statuses(statuses, move, {"a", "b"}, drafts=True) == {
        "imported": 4,
        "unchanged": 1,
        "gone": 1,
    }
    drafted = {"target": [_target_row("a", "draft", 0)]}
    assert moved_on_problems(drafted, move, {"a", "b"}, drafts=True) == []
    kept = {"target": [_target_row("a", "draft", 0), _target_row("b", "draft", 0)]}
    assert moved_on_problems(kept, move, {"a", "b"}, drafts=True) == [
        "b (a draft deleted at the source) is draft"
    ]
    # a publishing writer's expectations as before
    assert moved_on_problems(drafted, move, {"a", "b"}) == [
        "b (written before the change) has no target record"
    ]
