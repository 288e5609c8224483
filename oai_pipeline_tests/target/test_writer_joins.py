"""Records that join communities in a later harvest are written with their batch: before,
each such record went one by one (some eight round trips on PostgreSQL), so a writer given a
`community`, or a source whose records moved into new sets, updated every record alone."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from oai_pipeline.settings import Settings
from oai_pipeline.sync.rules import Action
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline.targets.embedded.writer import EmbeddedWriter
from oai_pipeline_tests.target.test_writer import Harness, data
from oai_pipeline_tests.target.test_writer_drafts import (
    _empty,
    _snapshot,
    _summary,
    count_writes,
    create_communities,
)

LATER = "2026-03-01T00:00:00Z"
BATCH_WRITES = {True: "update_many_published", False: "save_many_drafts"}


def _harvests(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, *, publish: bool, together: bool
) -> tuple[list[Any], Counter[str]]:
    """Four records harvested, then again by the writer given a community `sub` (whose
    parent is `top`): each with new data but one, and one naming a missing community."""
    batched: Counter[str] = Counter()
    count_writes(monkeypatch, batched, [BATCH_WRITES[publish]])
    if not together:
        for batch in ("_plain_updates", "_plain_drafts"):
            monkeypatch.setattr(EmbeddedWriter, batch, lambda *_args: {})
    harness = Harness(settings, publish=publish)
    seen = []
    try:
        with EmbeddedRepository(settings.target_db_url) as repo:
            create_communities(repo)
            outcomes = harness.harvest(
                [
                    ("oai:a", data("A")),
                    ("oai:b", data("B", communities=["x"])),
                    ("oai:c", data("C")),
                    ("oai:d", data("D", communities=["x"])),
                ]
            )
            seen.append((_summary(outcomes), _snapshot(repo)))
            harness.reconfigure(publish=publish, community="sub")
            outcomes = harness.harvest(
                [
                    ("oai:a", data("A, revised")),
                    ("oai:b", data("B, revised", communities=["x"])),
                    ("oai:c", data("C")),  # the same data: no new revision, new communities
                    ("oai:d", data("D, revised", communities=["x", "nowhere"])),
                ],
                datestamp=LATER,
            )
            seen.append((_summary(outcomes), _snapshot(repo)))
    finally:
        harness.writer.close()
        monkeypatch.undo()
    return seen, batched


@pytest.mark.parametrize("publish", [True, False], ids=["published", "drafts"])
def test_records_joining_communities_are_updated_together_as_one_by_one(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch, publish: bool
) -> None:
    together, batched = _harvests(target_settings, monkeypatch, publish=publish, together=True)
    _empty(target_settings)
    one_by_one, _ = _harvests(target_settings, monkeypatch, publish=publish, together=False)

    assert together == one_by_one
    # a and b (and c's draft, rewritten as drafts are); c's published record, whose data
    # is the target's already, joins with them without a new revision; d fails alone
    assert batched == {BATCH_WRITES[publish]: 2 if publish else 3, "alone oai:d": 1}
    (_, _), (outcomes, after) = together
    actions = {identifier: action for identifier, (action, _, _) in outcomes.items()}
    assert actions == {
        "oai:a": Action.UPDATE if publish else Action.PUBLISH_DRAFT,
        "oai:b": Action.UPDATE if publish else Action.PUBLISH_DRAFT,
        "oai:c": Action.NOTHING if publish else Action.PUBLISH_DRAFT,
        "oai:d": Action.ERROR,
    }
    joined = [row for row in after["memberships"] if row[0] != "oai:d"]
    assert joined == [
        ("oai:a", "sub", True, 0),
        ("oai:a", "top", False, 1),
        ("oai:b", "x", True, 0),
        ("oai:b", "sub", False, 1),
        ("oai:b", "top", False, 2),
        ("oai:c", "sub", True, 0),
        ("oai:c", "top", False, 1),
    ]
