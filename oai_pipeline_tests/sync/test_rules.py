"""Every row of the sync table, the skip rule, update_all and PID takeover."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from oai_pipeline.sync.rules import (
    Action,
    HarvestMemory,
    LocalRecord,
    LocalState,
    SourceRecord,
    decide,
)

LIVE_SOURCE = SourceRecord("oai:x:1", "2026-01-02T00:00:00Z", deleted=False, pid="10.1/a")
DELETED_SOURCE = SourceRecord("oai:x:1", "2026-01-02T00:00:00Z", deleted=True)
# The last write: same datestamp, no errors, revision 3.
MEMORY = HarvestMemory("2026-01-02T00:00:00Z", had_errors=False, local_id="r1", written_revision=3)
AS_WRITTEN = LocalRecord(LocalState.LIVE, "r1", revision=3)


@pytest.mark.parametrize(
    ("source", "local", "action"),
    [
        (LIVE_SOURCE, LocalRecord(LocalState.MISSING), Action.CREATE),
        (LIVE_SOURCE, LocalRecord(LocalState.LIVE, "r1", 2), Action.UPDATE),
        (LIVE_SOURCE, LocalRecord(LocalState.LIVE, "r1", 2, has_edit_draft=True), Action.UPDATE),
        (LIVE_SOURCE, LocalRecord(LocalState.DRAFT_ONLY, "r1", 0), Action.PUBLISH_DRAFT),
        (LIVE_SOURCE, LocalRecord(LocalState.TOMBSTONE, "r1", 4), Action.RESTORE),
        (LIVE_SOURCE, LocalRecord(LocalState.HARD_DELETED, "r1", 5), Action.REVIVE),
        (DELETED_SOURCE, LocalRecord(LocalState.LIVE, "r1", 2), Action.DELETE),
        (DELETED_SOURCE, LocalRecord(LocalState.LIVE, "r1", 2, True), Action.DELETE),
        (DELETED_SOURCE, LocalRecord(LocalState.DRAFT_ONLY, "r1", 0), Action.DELETE_DRAFT),
        (DELETED_SOURCE, LocalRecord(LocalState.TOMBSTONE, "r1", 4), Action.NOTHING),
        (DELETED_SOURCE, LocalRecord(LocalState.TOMBSTONE, "r1", 4, True), Action.NOTHING),
        (DELETED_SOURCE, LocalRecord(LocalState.HARD_DELETED, "r1", 5), Action.NOTHING),
        (DELETED_SOURCE, LocalRecord(LocalState.MISSING), Action.NOTHING),
    ],
)
@pytest.mark.parametrize("memory", [None, HarvestMemory("2025-12-01", False, "r1", 1)])
def test_every_row_of_the_table(
    source: SourceRecord, local: LocalRecord, action: Action, memory: HarvestMemory | None
) -> None:
    decision = decide(source, memory, local)
    assert decision.action is action
    assert decision.reason


def test_edit_draft_overwrite_and_left_over_draft_are_named_in_the_reason() -> None:
    with_draft = LocalRecord(LocalState.LIVE, "r1", 2, has_edit_draft=True)
    assert "edit draft" in decide(LIVE_SOURCE, None, with_draft).reason
    tombstone_with_draft = LocalRecord(LocalState.TOMBSTONE, "r1", 4, has_edit_draft=True)
    assert "edit draft" in decide(DELETED_SOURCE, MEMORY, tombstone_with_draft).reason


def test_skip_when_unchanged_at_the_source_and_locally() -> None:
    assert decide(LIVE_SOURCE, MEMORY, AS_WRITTEN).action is Action.SKIP


@pytest.mark.parametrize(
    "local",
    [
        LocalRecord(LocalState.TOMBSTONE, "r1", 3),
        LocalRecord(LocalState.HARD_DELETED, "r1", 3),
        LocalRecord(LocalState.MISSING),
    ],
)
def test_skip_a_deleted_source_that_is_deleted_locally(local: LocalRecord) -> None:
    assert decide(DELETED_SOURCE, MEMORY, local).action is Action.SKIP


@pytest.mark.parametrize(
    ("source", "memory", "local", "action"),
    [
        # the datestamp changed at the source
        (
            SourceRecord("oai:x:1", "2026-02-01T00:00:00Z", False),
            MEMORY,
            AS_WRITTEN,
            Action.UPDATE,
        ),
        # the last write failed
        (LIVE_SOURCE, HarvestMemory(MEMORY.datestamp, True, "r1", 3), AS_WRITTEN, Action.UPDATE),
        # never written
        (LIVE_SOURCE, None, AS_WRITTEN, Action.UPDATE),
        # edited and published locally since (revision moved on)
        (LIVE_SOURCE, MEMORY, LocalRecord(LocalState.LIVE, "r1", 4), Action.UPDATE),
        # an edit draft waits locally
        (LIVE_SOURCE, MEMORY, LocalRecord(LocalState.LIVE, "r1", 3, True), Action.UPDATE),
        # deleted, purged or hard deleted locally
        (LIVE_SOURCE, MEMORY, LocalRecord(LocalState.TOMBSTONE, "r1", 4), Action.RESTORE),
        (LIVE_SOURCE, MEMORY, LocalRecord(LocalState.HARD_DELETED, "r1", 5), Action.REVIVE),
        (LIVE_SOURCE, MEMORY, LocalRecord(LocalState.MISSING), Action.CREATE),
        # restored locally after the source deleted it
        (DELETED_SOURCE, MEMORY, LocalRecord(LocalState.LIVE, "r1", 5), Action.DELETE),
        # a left-over edit draft on a tombstone
        (DELETED_SOURCE, MEMORY, LocalRecord(LocalState.TOMBSTONE, "r1", 4, True), Action.NOTHING),
    ],
)
def test_no_skip_when_anything_changed(
    source: SourceRecord, memory: HarvestMemory, local: LocalRecord, action: Action
) -> None:
    assert decide(source, memory, local).action is action


DRAFT_MEMORY = HarvestMemory(MEMORY.datestamp, False, "r1", written_revision=0)
# when the harvest's draft was saved, and when the store saved that write
SAVED = datetime(2026, 1, 3, 12, 0, tzinfo=UTC)
SAVED_MEMORY = dataclasses.replace(MEMORY, written_at=SAVED + timedelta(seconds=1))
SAVED_DRAFT_MEMORY = dataclasses.replace(DRAFT_MEMORY, written_at=SAVED + timedelta(seconds=1))
LATER = SAVED + timedelta(seconds=2)


@pytest.mark.parametrize(
    ("local", "memory", "publishes", "action"),
    [
        # A writer that leaves drafts: its own draft, untouched, is the harvested state.
        (LocalRecord(LocalState.DRAFT_ONLY, "r1", 0, harvested_draft=True), DRAFT_MEMORY, False,
         Action.SKIP),
        (LocalRecord(LocalState.LIVE, "r1", 3, True, harvested_draft=True), MEMORY, False,
         Action.SKIP),
        # ... a user edited the draft (no longer the harvest's), or published a new revision.
        (LocalRecord(LocalState.DRAFT_ONLY, "r1", 0), DRAFT_MEMORY, False, Action.PUBLISH_DRAFT),
        (LocalRecord(LocalState.LIVE, "r1", 3, True), MEMORY, False, Action.UPDATE),
        (LocalRecord(LocalState.LIVE, "r1", 4, True, harvested_draft=True), MEMORY, False,
         Action.UPDATE),
        # A writer that publishes: any draft is not what it left.
        (LocalRecord(LocalState.DRAFT_ONLY, "r1", 0, harvested_draft=True), DRAFT_MEMORY, True,
         Action.PUBLISH_DRAFT),
        # The harvest's draft saved before the store saved the write: as harvested ...
        (LocalRecord(LocalState.LIVE, "r1", 3, True, harvested_draft=True, draft_saved=SAVED),
         SAVED_MEMORY, False, Action.SKIP),
        (LocalRecord(LocalState.DRAFT_ONLY, "r1", 0, harvested_draft=True, draft_saved=SAVED),
         SAVED_DRAFT_MEMORY, False, Action.SKIP),
        # ... saved since, by an attempt killed before the store heard of it (a draft makes
        # no revision): written again, so that the run reports what it did (over a user's
        # edit draft, `update`; not `skip`).
        (LocalRecord(LocalState.LIVE, "r1", 3, True, harvested_draft=True, draft_saved=LATER),
         SAVED_MEMORY, False, Action.UPDATE),
        (LocalRecord(LocalState.DRAFT_ONLY, "r1", 0, harvested_draft=True, draft_saved=LATER),
         SAVED_DRAFT_MEMORY, False, Action.PUBLISH_DRAFT),
    ],
)  # fmt: skip
def test_skip_the_drafts_a_writer_that_does_not_publish_left(
    local: LocalRecord, memory: HarvestMemory, publishes: bool, action: Action
) -> None:
    assert decide(LIVE_SOURCE, memory, local, publishes=publishes).action is action


def test_update_all_rewrites_what_would_be_skipped() -> None:
    decision = decide(LIVE_SOURCE, MEMORY, AS_WRITTEN, update_all=True)
    assert decision.action is Action.UPDATE
    assert "update_all" in decision.reason


def test_takeover_of_a_users_record_with_the_same_pid() -> None:
    users = LocalRecord(LocalState.LIVE, "u1", revision=3, taken_over=True)
    assert decide(LIVE_SOURCE, None, users) == decide(LIVE_SOURCE, MEMORY, users)
    decision = decide(LIVE_SOURCE, MEMORY, users)
    assert (decision.action, decision.reason) == (Action.UPDATE, "takeover")
    users_draft = LocalRecord(LocalState.DRAFT_ONLY, "u1", 0, taken_over=True)
    assert decide(LIVE_SOURCE, None, users_draft).action is Action.PUBLISH_DRAFT
    users_tombstone = LocalRecord(LocalState.TOMBSTONE, "u1", 2, taken_over=True)
    assert decide(LIVE_SOURCE, None, users_tombstone).action is Action.RESTORE


def test_a_record_that_failed_to_transform_is_an_error() -> None:
    broken = SourceRecord("oai:x:1", "2026-01-02T00:00:00Z", False, has_error=True)
    assert decide(broken, MEMORY, AS_WRITTEN).action is Action.ERROR
    assert decide(broken, None, LocalRecord(LocalState.MISSING), update_all=True).action is (
        Action.ERROR
    )


def test_another_transform_chain_than_the_one_written_with_rewrites() -> None:
    written = HarvestMemory(MEMORY.datestamp, False, "r1", 3, written_fingerprint="chain-1")
    same = SourceRecord("oai:x:1", MEMORY.datestamp, deleted=False, fingerprint="chain-1")
    other = SourceRecord("oai:x:1", MEMORY.datestamp, deleted=False, fingerprint="chain-2")
    assert decide(same, written, AS_WRITTEN).action is Action.SKIP
    decision = decide(other, written, AS_WRITTEN)
    assert decision.action is Action.UPDATE and "chain" in decision.reason
    # not known on either side (written before fingerprints were kept): the same
    assert decide(other, MEMORY, AS_WRITTEN).action is Action.SKIP
    gone = SourceRecord("oai:x:1", MEMORY.datestamp, deleted=True, fingerprint="chain-2")
    tombstone = LocalRecord(LocalState.TOMBSTONE, "r1", revision=3)
    assert decide(gone, written, tombstone).action is Action.SKIP  # a deletion has no data


def test_a_draft_deleted_by_a_crashed_attempt_is_reported_deleted() -> None:
    """The last write left a draft never published (revision 0) that the target no longer
    has: only the harvest deletes a draft's record, so an earlier attempt of this run did
    and crashed before saving it; the rerun reports it as the uninterrupted run does (it said
    `nothing`, and kept the draft's id). A published record is never missing (tombstones and
    hard-deleted records keep their rows): still `nothing`."""
    missing = LocalRecord(LocalState.MISSING)
    drafted = HarvestMemory("2025-12-01", False, "r1", 0)
    published = HarvestMemory("2025-12-01", False, "r1", 1)
    assert decide(DELETED_SOURCE, drafted, missing).action is Action.DELETE_DRAFT
    assert decide(DELETED_SOURCE, published, missing).action is Action.NOTHING
    assert decide(DELETED_SOURCE, None, missing).action is Action.NOTHING


def test_a_draft_a_killed_attempt_deleted_or_wrote_is_no_skip_with_the_datestamp_as_written() -> (
    None
):
    """A reconcile plans with the datestamp as written (the source lists no deletion of its
    own), which met the skip rule: a draft a killed attempt deleted was `skip` (its harvest
    record kept the id), and a harvested draft a killed attempt wrote anew, for a record the
    store remembers without it (deleted, then listed again), was `skip` too (never linked).
    The draft the store remembers writing, as it was, is still skipped."""
    as_written = DELETED_SOURCE.datestamp
    drafted = HarvestMemory(as_written, False, "r1", 0)
    assert decide(DELETED_SOURCE, drafted, LocalRecord(LocalState.MISSING)).action is (
        Action.DELETE_DRAFT
    )
    listed = SourceRecord("oai:x:1", as_written, deleted=False)
    forgotten = HarvestMemory(as_written, False, None, 0)
    new_draft = LocalRecord(LocalState.DRAFT_ONLY, "r2", 0, harvested_draft=True)
    assert decide(listed, forgotten, new_draft, publishes=False).action is Action.PUBLISH_DRAFT
    remembered = LocalRecord(LocalState.DRAFT_ONLY, "r1", 0, harvested_draft=True)
    assert decide(listed, drafted, remembered, publishes=False).action is Action.SKIP
