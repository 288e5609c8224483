"""The sync rules of DESIGN.md as one pure function (the harvest always wins).

CONTRACT (to be implemented by the sync owner; names fixed, bodies to be written).
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class SourceRecord:
    identifier: str
    datestamp: str
    deleted: bool
    pid: str | None = None
    has_error: bool = False  # transform error: nothing can be written


@dataclass(frozen=True)
class HarvestMemory:
    """What the harvest-record store remembers of the last write of this record."""

    datestamp: str | None
    had_errors: bool
    local_id: str | None
    written_revision: int | None


@dataclass(frozen=True)
class LocalRecord:
    state: LocalState
    local_id: str | None = None
    revision: int | None = None
    has_edit_draft: bool = False
    taken_over: bool = False  # found by pid, deposited by a user, not by this harvester


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str
