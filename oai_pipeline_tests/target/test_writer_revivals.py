"""Records a user hard deleted that the source lists again are revived with their batch:
before, each was revived and updated alone (some ten round trips each on PostgreSQL), so a
harvest undoing a user's purge wrote every record one by one."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from oai_pipeline.settings import Settings
from oai_pipeline.sync.rules import Action
from oai_pipeline_tests.target.test_writer import data, hold_doi_elsewhere
from oai_pipeline_tests.target.test_writer_drafts import as_one_by_one, last_harvest, writing

LATER = "2026-03-01T00:00:00Z"


def _revivals(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, *, together: bool, publish: bool = True
) -> tuple[dict[str, Any], dict[str, Any], Counter[str]]:
    """Seven records harvested by a writer given a community, all hard deleted by a user;
    meanwhile a user deposits one's DOI. Then the source lists them again: with new data
    (one joining a community besides), as they were, without a DOI, with another DOI, one's
    DOI named by a new record of the same batch too. `publish`: the writer's option (False: a
    reviewer publishes each record's harvested draft first)."""
    spied = ["revive_many"] if publish else ["revive_rows"]
    with writing(
        settings, monkeypatch, together=together, spied=spied, community="sub", publish=publish
    ) as (harness, repo, seen):
        first = harness.harvest(
            [
                ("oai:a", data("A", doi="10.1/a")),
                ("oai:b", data("B", doi="10.1/b")),
                ("oai:c", data("C", doi="10.1/c")),
                ("oai:d", data("D")),
                ("oai:e", data("E", doi="10.1/e")),
                ("oai:g", data("G", doi="10.1/g")),
                ("oai:h", data("H", doi="10.1/h")),
            ]
        )
        for outcome in first:
            if not publish:
                repo.publish(outcome.local_id)
            repo.hard_delete(outcome.local_id)
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
