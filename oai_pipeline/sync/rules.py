"""The sync rules of DESIGN.md as one pure function (the harvest always wins).

`decide` reads like the table in DESIGN.md ("Sync rules"): one comment per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum


class LocalState(StrEnum):
    MISSING = "missing"  # never existed in the target (or not found)
    LIVE = "live"  # published (may have an edit draft)
    DRAFT_ONLY = "draft"  # a new record's draft, never published
    TOMBSTONE = "tombstone"  # deleted locally or at the source (maybe marked for purge)
    HARD_DELETED = "hard_deleted"  # gone; revisions kept


class Action(StrEnum):
    SKIP = "skip"
    CREATE = "create"
    UPDATE = "update"
    PUBLISH_DRAFT = "publish_draft"
    RESTORE = "restore"
    REVIVE = "revive"
    DELETE = "delete"
    DELETE_DRAFT = "delete_draft"
    NOTHING = "nothing"
    ERROR = "error"  # the record cannot be written (e.g. transform failed)


# Why a record is rewritten whatever it holds (`update_all`): a writer writes it even when
# the data it has is the data it would write.
UPDATE_ALL_REASON = "update_all rewrites every record"


@dataclass(frozen=True)
class SourceRecord:
    identifier: str
    datestamp: str
    deleted: bool
    pid: str | None = None
    has_error: bool = False  # transform error: nothing can be written
    # of the transform chain that made its data and the writer's options that change what it
    # writes (`written_fingerprint`; None: any)
    fingerprint: str | None = None


@dataclass(frozen=True)
class HarvestMemory:
    """What the harvest-record store remembers of the last write of this record."""

    datestamp: str | None
    had_errors: bool
    local_id: str | None
    written_revision: int | None
    deleted: bool | None = None  # the status the source gave last (None: not known)
    # the chain and writer options that made what was written (None: any)
    written_fingerprint: str | None = None
    # the datestamp the source gave last, also when its write failed (`datestamp` is the
    # last one written)
    listed_datestamp: str | None = field(default=None, compare=False)
    # when the store saved that write: a target revision made since is one it never heard
    # of (a write whose outcome a crash lost)
    written_at: datetime | None = field(default=None, compare=False)


@dataclass(frozen=True)
class LocalRecord:
    state: LocalState
    local_id: str | None = None
    revision: int | None = None
    has_edit_draft: bool = False
    taken_over: bool = False  # found by pid, deposited by a user, not by this harvester
    harvested_draft: bool = False  # its draft is the one a non-publishing writer left
    # when that draft was saved (None: not known): one saved since the store saved the last
    # write is a write whose outcome a crash lost
    draft_saved: datetime | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str


# The skip rule's "still in the harvested state" for a source record that is deleted.
_DELETED_LOCALLY = (LocalState.TOMBSTONE, LocalState.HARD_DELETED, LocalState.MISSING)


def _still_as_harvested(
    source: SourceRecord, memory: HarvestMemory, local: LocalRecord, publishes: bool
) -> bool:
    """Nobody touched the local record since this harvester last wrote it."""
    as_written = local.revision == memory.written_revision
    if not source.deleted and not publishes and local.harvested_draft:
        # A writer that does not publish leaves the harvest as a draft, for review: the draft
        # the store remembers writing (another is one a killed attempt wrote after the store
        # forgot the last, e.g. a record a reconcile deleted, listed again: before, the rerun
        # skipped it and never linked its harvest record to it).
        # A draft makes no new revision: one saved since the store saved the last write is a
        # killed attempt's (before, the rerun skipped a record whose user's edit draft that
        # attempt overwrote, and reported it unchanged).
        if _drafted_unheard(memory, local):
            return False
        drafted = local.state is LocalState.DRAFT_ONLY and local.local_id == memory.local_id
        return drafted or (local.state is LocalState.LIVE and as_written)
    if local.has_edit_draft:
        return False
    if source.deleted:
        return local.state in _DELETED_LOCALLY and not _draft_deleted_unsaved(memory, local)
    return local.state is LocalState.LIVE and as_written


def _drafted_unheard(memory: HarvestMemory, local: LocalRecord) -> bool:
    """The harvested draft was saved after the store saved the last write of the record."""
    if memory.written_at is None or local.draft_saved is None:
        return False
    return local.draft_saved > memory.written_at


def _draft_deleted_unsaved(memory: HarvestMemory | None, local: LocalRecord) -> bool:
    """The last write left a draft never published (revision 0) that the target no longer
    has: only deleting a draft removes a record, so an earlier attempt of this run deleted it
    and was killed before the store saved that (a user's deletion of a harvested draft keeps
    its row, flagged)."""
    return (
        local.state is LocalState.MISSING
        and memory is not None
        and memory.local_id is not None
        and memory.written_revision == 0
    )


def _same_transform(source: SourceRecord, memory: HarvestMemory) -> bool:
    if source.deleted or source.fingerprint is None or memory.written_fingerprint is None:
        return True  # a deletion has no data; None: not known, taken as the same
    return source.fingerprint == memory.written_fingerprint


def decide(
    source: SourceRecord,
    memory: HarvestMemory | None,
    local: LocalRecord,
    *,
    update_all: bool = False,
    publishes: bool = True,
) -> Decision:
    """What the target must do so that it ends in the state the source reports, and why.

    `memory` is the harvest-record store's memory of the last write (None: never written),
    `local` the target's current state of the record; `publishes`: whether the writer
    publishes what it writes (its `publish` option) or leaves drafts. Pure: the writer calls
    it again at write time with the then-current state, so a stale plan still ends in the
    source's state.
    """
    if source.has_error and not source.deleted:
        return Decision(Action.ERROR, "the record could not be transformed")

    # Skip rule: datestamp unchanged since the last write, that write had no errors, and
    # the local record is still in the harvested state. `update_all` rewrites regardless,
    # and so does another transform chain (options, versions) than the one written with.
    if (
        not update_all
        and memory is not None
        and memory.datestamp == source.datestamp
        and not memory.had_errors
        and not local.taken_over
        and _same_transform(source, memory)
        and _still_as_harvested(source, memory, local, publishes)
    ):
        return Decision(Action.SKIP, "unchanged at the source and locally")

    state = local.state
    if not source.deleted:
        # PID takeover: a user's record with the same pid becomes the harvested record.
        takeover = "takeover" if local.taken_over else None
        # live | missing -> created (and published)
        if state is LocalState.MISSING:
            return Decision(Action.CREATE, "new at the source")
        # live | live -> updated; a local edit draft is overwritten
        if state is LocalState.LIVE:
            if takeover:
                return Decision(Action.UPDATE, takeover)
            if local.has_edit_draft:
                return Decision(Action.UPDATE, "changed; the local edit draft is overwritten")
            if update_all:
                return Decision(Action.UPDATE, UPDATE_ALL_REASON)
            if memory is not None and not _same_transform(source, memory):
                return Decision(
                    Action.UPDATE, "another transform chain or writer options than written"
                )
            return Decision(Action.UPDATE, "changed at the source or locally")
        # live | draft only -> draft updated and published
        if state is LocalState.DRAFT_ONLY:
            return Decision(Action.PUBLISH_DRAFT, takeover or "only a draft exists locally")
        # live | deleted locally (tombstone, maybe marked for purge) -> restored, then updated
        if state is LocalState.TOMBSTONE:
            return Decision(Action.RESTORE, takeover or "deleted locally but live at the source")
        # live | hard deleted -> revived from its last revision with the same id, then updated
        return Decision(Action.REVIVE, "hard deleted locally but live at the source")

    # deleted | live -> tombstone noting deletion at the source; a local edit draft is removed
    if state is LocalState.LIVE:
        return Decision(Action.DELETE, "deleted at the source")
    # deleted | draft only -> draft deleted
    if state is LocalState.DRAFT_ONLY:
        return Decision(Action.DELETE_DRAFT, "deleted at the source; only a draft exists")
    # deleted | draft only, which an earlier attempt of this run deleted -> draft deleted, so
    # the run reports what it did, as the uninterrupted run does (a datestamp as written, a
    # reconcile's, is no skip for it either: its harvest record still names the draft)
    if _draft_deleted_unsaved(memory, local):
        return Decision(Action.DELETE_DRAFT, "deleted at the source; its draft deleted already")
    # deleted | already deleted (tombstone, hard deleted, missing) -> nothing,
    # but a left-over local edit draft is removed
    if local.has_edit_draft:
        return Decision(Action.NOTHING, "already deleted; the left-over edit draft is removed")
    return Decision(Action.NOTHING, "already deleted locally")
