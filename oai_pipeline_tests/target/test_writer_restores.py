"""Records the source lists live again that the target holds deleted are brought back with
their batch: tombstones restored, records a user hard deleted revived. Before, each was
restored (or revived) and updated alone (some ten round trips each on PostgreSQL), so a source
that withdrew records and listed them again, or a harvest undoing users' deletions or purge,
wrote every record one by one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from oai_pipeline.settings import Settings
from oai_pipeline.sync.rules import Action
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.target.test_writer import Harness, data, hold_doi_elsewhere
from oai_pipeline_tests.target.test_writer_drafts import (
    _snapshot,
    as_one_by_one,
    harvested_as_reviewed,
    last_harvest,
    writing,
)

LATER = "2026-03-01T00:00:00Z"
APRIL = "2026-04-01T00:00:00Z"


@contextmanager
def _brought_back(
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    *,
    together: bool,
    publish: bool,
    batch_write: tuple[str, str],
    sources: list[tuple[str, dict | None]],
) -> Iterator[tuple[Harness, EmbeddedRepository, Counter[str], dict[str, str]]]:
    """A scenario's writer given the community `sub` (`writing`), with `publish` as given,
    after its first harvest of `sources`, each record published (`harvested_as_reviewed`);
    `batch_write`: the transaction's batch write it counts (a publishing writer's, a
    drafts writer's). Yields the harness, the target, the counts, the records' target ids."""
    spied = [batch_write[0] if publish else batch_write[1]]
    with writing(
        settings, monkeypatch, together=together, spied=spied, community="sub", publish=publish
    ) as (harness, repo, seen):
        yield harness, repo, seen, harvested_as_reviewed(harness, repo, sources, publish=publish)


def _restores(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, *, together: bool, publish: bool = True
) -> tuple[dict[str, Any], dict[str, Any], Counter[str]]:
    """Five records harvested by a writer given a community; then deleted: two by a user,
    one at the source, one by a user who marked it for purge, one by a user after a
    reviewer's edit; then listed live again, all but one with new data, one joining a
    community besides. `publish`: the writer's option (False: a reviewer publishes each
    record's harvested draft first)."""
    with _brought_back(
        settings,
        monkeypatch,
        together=together,
        publish=publish,
        batch_write=("restore_many", "restore_tombstones"),
        sources=[
            ("oai:a", data("A", doi="10.1/a")),
            ("oai:b", data("B", doi="10.1/b")),
            ("oai:c", data("C", doi="10.1/c")),
            ("oai:d", data("D", doi="10.1/d")),
            ("oai:e", data("E")),
        ],
    ) as (harness, repo, seen, ids):
        harness.harvest([("oai:c", None)], datestamp="2026-02-01T00:00:00Z")
        repo.delete(ids["oai:a"])
        repo.delete(ids["oai:b"])
        repo.delete(ids["oai:d"], purge=True)
        repo.edit(ids["oai:e"], {"metadata.title": "E, reviewed"})
        repo.publish(ids["oai:e"])
        repo.delete(ids["oai:e"])
        return last_harvest(
            harness,
            repo,
            seen,
            [
                ("oai:a", data("A, again", doi="10.1/a", communities=["x"])),
                ("oai:b", data("B", doi="10.1/b")),  # as it was deleted
                ("oai:c", data("C, again", doi="10.1/c")),
                ("oai:d", data("D, again", doi="10.1/d")),
                ("oai:e", data("E, again")),
            ],
            datestamp=LATER,
        )


def test_restores_together_end_as_one_by_one(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes, after, seen = as_one_by_one(_restores, target_settings, monkeypatch)

    # the tombstone marked for purge went alone (its DOI may be another record's by then)
    assert seen == {"restore_many": 4, "alone oai:d": 1}
    assert {identifier: outcome[0] for identifier, outcome in outcomes.items()} == dict.fromkeys(
        ("oai:a", "oai:b", "oai:c", "oai:d", "oai:e"), Action.RESTORE
    )
    # created (1), deleted (2), restored (3), updated (4); e had a reviewer's revision too
    assert {identifier: outcome[1] for identifier, outcome in outcomes.items()} == {
        "oai:a": 4,
        "oai:b": 4,
        "oai:c": 4,
        "oai:d": 4,
        "oai:e": 5,
    }
    records = {row[0]: row for row in after["records"]}
    assert {identifier: row[1] for identifier, row in records.items()} == dict.fromkeys(
        records, "live"
    )
    assert records["oai:a"][4]["metadata"]["title"] == "A, again"
    assert ("oai:a", "x", False, 2) in after["memberships"]


def test_restores_into_drafts_together_end_as_one_by_one(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`publish: false`: the tombstones are restored as they were, each given the harvest's
    draft (one listed as it was deleted keeps none), with their batch."""
    outcomes, after, seen = as_one_by_one(_restores, target_settings, monkeypatch, publish=False)

    assert seen == {"restore_tombstones": 4, "alone oai:d": 1}
    assert {identifier: outcome[0] for identifier, outcome in outcomes.items()} == dict.fromkeys(
        ("oai:a", "oai:b", "oai:c", "oai:d", "oai:e"), Action.RESTORE
    )
    records = {row[0]: row for row in after["records"]}
    assert {identifier: row[1] for identifier, row in records.items()} == dict.fromkeys(
        records, "live"
    )
    drafted = {row[0] for row in after["drafts"]}
    assert drafted == {"oai:a", "oai:c", "oai:d", "oai:e"}  # b's data is the published one


def _revivals(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, *, together: bool, publish: bool = True
) -> tuple[dict[str, Any], dict[str, Any], Counter[str]]:
    """Seven records harvested by a writer given a community, all hard deleted by a user;
    meanwhile a user deposits one's DOI. Then the source lists them again: with new data
    (one joining a community besides), as they were, without a DOI, with another DOI, one's
    DOI named by a new record of the same batch too. `publish`: the writer's option (False: a
    reviewer publishes each record's harvested draft first)."""
    with _brought_back(
        settings,
        monkeypatch,
        together=together,
        publish=publish,
        batch_write=("revive_many", "revive_rows"),
        sources=[
            ("oai:a", data("A", doi="10.1/a")),
            ("oai:b", data("B", doi="10.1/b")),
            ("oai:c", data("C", doi="10.1/c")),
            ("oai:d", data("D")),
            ("oai:e", data("E", doi="10.1/e")),
            ("oai:g", data("G", doi="10.1/g")),
            ("oai:h", data("H", doi="10.1/h")),
        ],
    ) as (harness, repo, seen, ids):
        for record_id in ids.values():
            repo.hard_delete(record_id)
        repo.deposit(data("A user's C", doi="10.1/c"), publish=True)
        return last_harvest(
            harness,
            repo,
            seen,
            [
                ("oai:a", data("A, again", doi="10.1/a", communities=["x"])),
                ("oai:b", data("B", doi="10.1/b")),  # as it was hard deleted
                ("oai:c", data("C, again", doi="10.1/c")),  # the user's deposit is taken over
                ("oai:d", data("D, again")),
                ("oai:e", data("E, again", doi="10.1/e")),
                ("oai:f", data("F", doi="10.1/e")),  # names e's DOI: both go one by one
                ("oai:g", data("G, again", doi="10.1/g2")),  # another DOI: one by one
                ("oai:h", data("H, again", doi="10.1/h")),
            ],
            datestamp=LATER,
        )


def test_revivals_together_end_as_one_by_one(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes, after, seen = as_one_by_one(_revivals, target_settings, monkeypatch)

    assert seen == {
        "revive_many": 4,  # a, b, d, h
        "alone oai:e": 1,
        "alone oai:f": 2,  # refused e's DOI, tried again with e's let go (`_exchange_pids`)
        "alone oai:g": 1,
    }
    actions = {identifier: outcome[0] for identifier, outcome in outcomes.items()}
    assert actions == {
        **dict.fromkeys(("oai:a", "oai:b", "oai:d", "oai:e", "oai:g", "oai:h"), Action.REVIVE),
        "oai:c": Action.UPDATE,
        "oai:f": Action.ERROR,  # e holds the DOI again
    }
    # created (1), hard deleted (2), revived (3), updated (4)
    assert {i: outcome[1] for i, outcome in outcomes.items() if i not in ("oai:c", "oai:f")} == (
        dict.fromkeys(("oai:a", "oai:b", "oai:d", "oai:e", "oai:g", "oai:h"), 4)
    )
    records = {row[0]: row for row in after["records"]}
    assert records["oai:a"][1] == "live"
    assert records["oai:a"][4]["metadata"]["title"] == "A, again"
    assert records["oai:b"][4]["metadata"]["title"] == "B"
    assert ("oai:a", "x", False, 2) in after["memberships"]


def test_revivals_into_drafts_together_end_as_one_by_one(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`publish: false`: the records are revived as last published, each given the harvest's
    draft (one listed as it was hard deleted keeps none), with their batch."""
    outcomes, after, seen = as_one_by_one(_revivals, target_settings, monkeypatch, publish=False)

    assert seen == {
        "revive_rows": 4,  # a, b, d, h
        "alone oai:e": 1,
        "alone oai:f": 2,  # refused e's DOI, tried again with e's let go (`_exchange_pids`)
        "alone oai:g": 1,
    }
    revived = ("oai:a", "oai:b", "oai:d", "oai:e", "oai:g", "oai:h")
    assert {i: o[0] for i, o in outcomes.items() if i in revived} == dict.fromkeys(
        revived, Action.REVIVE
    )
    records = {row[0]: row for row in after["records"]}
    assert {i: records[i][1] for i in revived} == dict.fromkeys(revived, "live")
    drafted = {row[0] for row in after["drafts"]}
    assert {"oai:a", "oai:d", "oai:h"} <= drafted and "oai:b" not in drafted


def test_a_revived_doi_held_meanwhile_goes_one_by_one(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DOI a hard-deleted record gave up, which a record of another harvester holds now:
    the revived record is refused it alone (`duplicate_pid`), the rest of the batch revived."""
    with writing(target_settings, monkeypatch, together=True, spied=["revive_many"]) as (
        harness,
        repo,
        seen,
    ):
        first = harness.harvest(
            [("oai:a", data("A", doi="10.1/a")), ("oai:b", data("B", doi="10.1/b"))]
        )
        for outcome in first:
            repo.hard_delete(outcome.local_id)
        hold_doi_elsewhere(repo, "10.1/b")
        seen.clear()
        outcomes = {
            o.identifier: o
            for o in harness.harvest(
                [("oai:a", data("A, again", doi="10.1/a")), ("oai:b", data("B", doi="10.1/b"))],
                datestamp=LATER,
            )
        }
    assert seen == {"revive_many": 1, "alone oai:b": 1}
    assert outcomes["oai:a"].action is Action.REVIVE
    assert outcomes["oai:b"].action is Action.ERROR
    assert outcomes["oai:b"].error is not None and outcomes["oai:b"].error.type == "duplicate_pid"


def _restored_in_one_run(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, *, together: bool
) -> tuple[list[Action], dict[str, Any]]:
    """`publish: false`: a record a reviewer published and a user deleted, brought back by
    a run (restored, given the harvest's edit draft); the same write again, as the run's
    rerun after a crash before the store heard of it; then a later listing in the same run
    with other data. What each reported, and the target after."""
    with writing(settings, monkeypatch, together=together, spied=[], publish=False) as (
        harness,
        repo,
        _,
    ):
        (record_id,) = harvested_as_reviewed(
            harness, repo, [("oai:a", data("A", doi="10.1/a"))], publish=False
        ).values()
        repo.delete(record_id)
        started, remembered = datetime.now(UTC), dict(harness.memory)
        back, later = data("A, back", doi="10.1/a"), data("A, later", doi="10.1/a")
        restored = harness.one("oai:a", back, datestamp=LATER, run_started=started)
        harness.memory = remembered  # the store never heard of it
        rerun = harness.one("oai:a", back, datestamp=LATER, run_started=started)
        relisted = harness.one("oai:a", later, datestamp=APRIL, run_started=started)
        return [o.action for o in (restored, rerun, relisted)], _snapshot(repo)


def test_a_record_restored_into_drafts_is_reported_restored_by_its_run_once(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rerun of the write reports what the killed attempt did (`restore`: before, `update`,
    a draft making no revision to tell it by); a later listing of the same run, with other
    data, is an update, not a second restore."""
    actions, after = as_one_by_one(_restored_in_one_run, target_settings, monkeypatch)

    assert actions == [Action.RESTORE, Action.RESTORE, Action.UPDATE]
    assert [(row[0], row[1], row[2]) for row in after["drafts"]] == [
        ("oai:a", "edit", data("A, later", doi="10.1/a"))
    ]
