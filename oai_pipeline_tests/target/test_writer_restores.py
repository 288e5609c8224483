"""Tombstones that the source lists live again are restored with their batch: before, each
was restored and updated alone (some ten round trips each on PostgreSQL), so a source that
withdrew records and listed them again, or a harvest undoing a user's deletions, wrote every
record one by one."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from oai_pipeline.settings import Settings
from oai_pipeline.sync.rules import Action
from oai_pipeline_tests.target.test_writer import data
from oai_pipeline_tests.target.test_writer_drafts import (
    as_one_by_one,
    last_harvest,
    writing,
)

LATER = "2026-03-01T00:00:00Z"


def _restores(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, *, together: bool, publish: bool = True
) -> tuple[dict[str, Any], dict[str, Any], Counter[str]]:
    """Five records harvested by a writer given a community; then deleted: two by a user,
    one at the source, one by a user who marked it for purge, one by a user after a
    reviewer's edit; then listed live again, all but one with new data, one joining a
    community besides. `publish`: the writer's option (False: a reviewer publishes each
    record's harvested draft first)."""
    spied = ["restore_many"] if publish else ["restore_tombstones"]
    with writing(
        settings, monkeypatch, together=together, spied=spied, community="sub", publish=publish
    ) as (harness, repo, seen):
        first = harness.harvest(
            [
                ("oai:a", data("A", doi="10.1/a")),
                ("oai:b", data("B", doi="10.1/b")),
                ("oai:c", data("C", doi="10.1/c")),
                ("oai:d", data("D", doi="10.1/d")),
                ("oai:e", data("E")),
            ]
        )
        ids = {outcome.identifier: outcome.local_id for outcome in first}
        for record_id in ids.values() if not publish else ():
            repo.publish(record_id)
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
