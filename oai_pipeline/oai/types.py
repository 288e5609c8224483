"""What the OAI-PMH client hands to the rest of the pipeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from oai_pipeline.errors import RecordError

Granularity = Literal["day", "seconds"]

# The longest OAI identifier and datestamp the state store keeps (its column sizes): a
# longer one is its record's error, not a failed page (PostgreSQL refuses longer values).
MAX_IDENTIFIER_LENGTH = 1000
MAX_DATESTAMP_LENGTH = 32


@dataclass(frozen=True)
class IdentifyInfo:
    repository_name: str
    base_url: str
    granularity: Granularity
    earliest_datestamp: str  # as the source wrote it
    deleted_record: Literal["no", "transient", "persistent"]
    response_date: str
    # whom the source names to write to when it misbehaves (Identify's adminEmail, one or
    # more); empty in what an earlier version saved
    admin_emails: tuple[str, ...] = ()


@dataclass
class HarvestedRecord:
    """One record of a list response (or GetRecord); `xml` is the whole <record> element."""

    identifier: str
    datestamp: str
    deleted: bool
    set_specs: list[str] = field(default_factory=list)
    xml: bytes | None = None
    error: RecordError | None = None
    # deleted without a deleted header (GetRecord answered idDoesNotExist for a record it
    # listed before): staged as gone, as a reconcile marks a record vanished from its list,
    # so that a reconcile harvests it again once the source lists it again
    vanished: bool = False
    # deleted, its header without a datestamp (Zenodo's tombstones): dated by the response's
    # responseDate, that the deletion is applied (see pages._date_deletions)
    undated_deletion: bool = False
    # the namespace of its metadata's root element (None: no metadata, or in no namespace):
    # a list whose later pages come in another one than asked for (DSpace/xoai#28) is told.
    # Read from `xml`, so not compared: the same xml has the same namespace.
    metadata_namespace: str | None = field(default=None, compare=False)

    @property
    def holds_no_copy(self) -> bool:
        """An error answer without the record (GetRecord refused with an HTTP status or
        cannotDisseminateFormat, another record answered): the source sent nothing that
        replaces the copy last harvested, which is kept beside the error."""
        return (
            self.error is not None
            and not self.datestamp
            and self.xml is None
            and not self.deleted
            and not self.vanished
        )


@dataclass
class Page:
    """One list response: its records and where the list goes on (None on the last page)."""

    records: list[HarvestedRecord]
    resumption_token: str | None
    response_date: str
    cursor: int | None = None
    complete_list_size: int | None = None
    # Set on the last page of a set's list whose completeListSize turned out to count the
    # whole source, not the set (see OAIClient.sweep): that size says nothing of the list.
    size_ignores_set: bool = False
    # Set on the last page: the records the whole list held, each once (a page sent again,
    # the pages of an attempt redone after badResumptionToken not counted twice), to judge
    # whether it ended short of its completeListSize. None: not known.
    list_records: int | None = None
    # Stands for a list's end: the source answered its last token with noRecordsMatch, and
    # no completeListSize tells whether the list was whole. A harvest takes it for the end;
    # it proves no absence (a reconcile deletes nothing by it).
    token_refused: bool = False


@dataclass
class SweepCheckpoint:
    """Saved before the page that `resumption_token` names is handed over (None: first page);
    every page before it was handed over and processed."""

    from_: str | None
    until: str | None
    set_spec: str | None
    metadata_prefix: str
    resumption_token: str | None
    pages_read: int = 0
    cursor: int | None = None
    response_date: str | None = None
    # The list's completeListSize and how many of it came before the token, by the cursor:
    # noRecordsMatch for the token before that size means the source lost the list.
    complete_list_size: int | None = None
    delivered: int | None = None
    # Records the pages before the token held (every attempt of the sweep), counted page by
    # page, not by the cursor (sources misuse it): the list's end compares it with the
    # announced size. None: not known (a checkpoint an older version saved).
    listed: int | None = None
    # Whether the source has the set: a page of the list held records, or ListSets lists
    # it. An empty incremental list of a confirmed set is a quiet day, not a typo to check
    # (see discover._set_listed_before). False in checkpoints older versions saved: those
    # trusted a set whose check failed or was never made.
    set_confirmed: bool = False
    # The metadata namespaces of the list's first page that held metadata (sorted), and
    # whether it was the list's first page: a run resumed mid-list compares its pages with
    # them, not with its own first page (DSpace/xoai#28, see OAIClient.sweep). None: no page
    # held metadata yet, or a checkpoint an older version saved.
    list_namespaces: list[str] | None = None
    namespaces_from_first_page: bool = False


@dataclass(frozen=True)
class OAISet:
    """One set of a ListSets response."""

    spec: str
    name: str
