"""What can happen to records and communities, inside one database transaction.

Both the user-facing repository API and the harvest writer are built from these steps, so
a harvested record and a deposited one live by the same rules. Every change of a record
bumps its revision and keeps a copy of the new state in `target_revisions`.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from oai_pipeline import json_codec
from oai_pipeline.doi import normal_doi
from oai_pipeline.errors import AlreadyExists, NotFound, PipelineError
from oai_pipeline.identifier_prefix import (
    RekeyPlan,
    RekeyRefused,
    plan_rekey,
    replaced,
    starts_with,
    taken_message,
)
from oai_pipeline.json_codec import Encoded
from oai_pipeline.sync.rules import LocalRecord, LocalState
from oai_pipeline.targets.base import DEFAULT_PID_FIELD, pid_of
from oai_pipeline.targets.embedded.schema import (
    communities,
    counts,
    drafts,
    memberships,
    records,
    revisions,
)

# Record states as stored (and as `target list --state` names them).
DRAFT, LIVE, TOMBSTONE, DELETED = "draft", "live", "tombstone", "deleted"
STATES = (LIVE, DRAFT, TOMBSTONE, DELETED)

# The state a harvest's lookup (`local_records`) gives a record stored in each state.
LOCAL_STATE = {
    DRAFT: LocalState.DRAFT_ONLY,
    LIVE: LocalState.LIVE,
    TOMBSTONE: LocalState.TOMBSTONE,
    DELETED: LocalState.HARD_DELETED,
}

# Record ids look like InvenioRDM's: two groups of five unambiguous lowercase characters.
_ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
_CHUNK = 500  # keeps IN (...) lists well below every backend's parameter limit


# What a lookup needs of a record: not its data, which would be decoded for nothing.
_LOOKUP_COLUMNS = (
    records.c.id,
    records.c.state,
    records.c.revision,
    records.c.doi,
    records.c.purge,
    records.c.source_identifier,
)

# The records that hold any of these DOIs (`local_records`): searched in the DOI index.
_BY_PID = sa.select(*_LOOKUP_COLUMNS, records.c.source_harvester, records.c.changed_locally).where(
    records.c.doi.in_(sa.bindparam("dois", expanding=True)),
    records.c.state != DELETED,
    ~records.c.purge,
)
# The flag as the partial index `ix_target_records_changed` names it (`WHERE changed_locally`):
# SQLite uses a partial index only for a query with the same term, and SQLAlchemy writes the
# Boolean column as `changed_locally = 1` there; each write stage then read the harvester's
# every record to find the few a user changed.
_CHANGED_LOCALLY = sa.literal_column(f"{records.name}.changed_locally")

# The statements every harvested update runs, built once: SQLAlchemy builds, keys and looks
# up a statement made per call in ~0.3 ms, several times what SQLite takes to run it; one
# built once keeps its cache key and goes straight to its compiled form.
_RECORD = sa.select(records).where(records.c.id == sa.bindparam("record_id"))
_DRAFT = sa.select(drafts).where(drafts.c.record_id == sa.bindparam("record_id"))
_PID_HOLDER = (
    sa.select(records.c.id)
    .where(records.c.doi == sa.bindparam("doi"), records.c.state != DELETED, ~records.c.purge)
    .limit(1)
)
_PID_HOLDER_BESIDES = _PID_HOLDER.where(records.c.id != sa.bindparam("record_id"))
# Harvested edit drafts naming these DOIs, with their records' state and DOI: read from the
# drafts' partial index (the kind a literal, as in the index; a condition on the records
# made SQLite read every live record instead).
_DRAFTS_NAMING = (
    sa.select(drafts.c.doi, drafts.c.record_id, records.c.state, records.c.doi.label("held"))
    .join(records, records.c.id == drafts.c.record_id)
    .where(
        drafts.c.doi.in_(sa.bindparam("dois", expanding=True)),
        drafts.c.kind == sa.literal("edit", literal_execute=True),
        drafts.c.harvested,
    )
)
_CHANGE_RECORD = (
    sa.update(records)
    .where(records.c.id == sa.bindparam("record_id"))
    .values(
        state=sa.bindparam("new_state"),
        data=sa.bindparam("new_data", type_=records.c.data.type),
        doi=sa.bindparam("new_doi"),
        revision=sa.bindparam("new_revision"),
        updated=sa.bindparam("stamp"),
    )
)
_MOVE_DOI = (
    sa.update(records)
    .where(records.c.id == sa.bindparam("record_id"))
    .values(doi=sa.bindparam("new_doi"))
)
_CLAIMANT = sa.bindparam("claimant")
_CLAIM = (
    sa.update(records)
    .where(
        records.c.id == sa.bindparam("claimed_id"),
        sa.or_(records.c.source_harvester.is_(None), records.c.source_harvester == _CLAIMANT),
    )
    .values(source_harvester=_CLAIMANT, source_identifier=sa.bindparam("claimed_as"))
)
_ADD_REVISION = sa.insert(revisions)
_DELETE_DRAFTS = sa.delete(drafts).where(drafts.c.record_id == sa.bindparam("record_id"))
_DELETE_EDIT_DRAFT = _DELETE_DRAFTS.where(drafts.c.kind == "edit")
_UPDATE_DRAFT = (
    sa.update(drafts)
    .where(drafts.c.record_id == sa.bindparam("draft_of"))  # not a column's name: SET has it
    .values(
        kind=sa.bindparam("new_kind"),
        data=sa.bindparam("new_data", type_=drafts.c.data.type),
        updated=sa.bindparam("stamp"),
        harvested=sa.bindparam("new_harvested"),
        doi=sa.bindparam("new_doi", type_=drafts.c.doi.type),
    )
)
_ADD_DRAFT = sa.insert(drafts)


def new_record_id() -> str:
    # 50 random bits, five per character (the alphabet has 32 characters).
    bits = int.from_bytes(secrets.token_bytes(7), "big")
    chars = "".join(_ID_ALPHABET[(bits >> (5 * i)) & 31] for i in range(10))
    return f"{chars[:5]}-{chars[5:]}"


def now() -> datetime:
    return datetime.now(UTC)


def as_utc(stamp: datetime) -> datetime:
    """A stored timestamp as an aware UTC one (SQLite gives them back without the zone)."""
    return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)


def communities_of(data: dict[str, Any] | None) -> list[str]:
    """The community slugs or ids a record asks for (`parent.communities.ids`); a shape
    that is not that is the record's error (PipelineError), not a guess."""
    parent = (data or {}).get("parent")
    communities = parent.get("communities") if isinstance(parent, dict) else None
    if parent is not None and not isinstance(parent, dict):
        raise PipelineError("parent must be an object (with communities.ids)")
    if communities is None:
        return []
    ids = communities.get("ids") if isinstance(communities, dict) else None
    if not isinstance(communities, dict) or not _is_id_list(ids):
        raise PipelineError("parent.communities.ids must be a list of community slugs or ids")
    return [str(item) for item in ids or []]


def _is_id_list(ids: Any) -> bool:
    return ids is None or (
        isinstance(ids, list)
        and all(isinstance(i, str | int) and not isinstance(i, bool) and i != "" for i in ids)
    )


def _chunks(items: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


@dataclass(frozen=True)
class NewRecord:
    """A harvested record to create at once, published or as a draft (`create_many`)."""

    source_identifier: str
    data_json: str  # the record data, encoded
    doi: str | None
    # its communities as `add_to_communities` would add them, parents included (`members`)
    communities: tuple[str, ...] = ()


@dataclass(frozen=True)
class Membership:
    """A community a record joins, as `add_to_communities` adds it."""

    community_id: str
    is_default: bool
    position: int


@dataclass(frozen=True)
class RecordChange:
    """A record to change in place, its data then, and the communities it joins."""

    record: sa.Row  # the record as the transaction just read it
    data_json: str  # the record data to hold, encoded
    joins: tuple[Membership, ...] = ()
    draft_doi: str | None = None  # the pid its draft names (`save_many_drafts`)
    new_doi: str | None = None  # the DOI it holds from now, when not its own (one that moves)


class TargetTransaction:
    """Record and community operations on one open connection (inside a transaction)."""

    def __init__(self, connection: sa.Connection, *, released: bool = True) -> None:
        self.connection = connection
        # Whether the target may hold records released by a deleted harvester (looked for
        # by source identifier); False spares each lookup that query.
        self.released = released

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested transaction: an exception undoes only what happened inside it."""
        with self.connection.begin_nested():
            yield

    # -- reading ---------------------------------------------------------------------------

    def record(self, record_id: str) -> sa.Row:
        row = self.connection.execute(_RECORD, {"record_id": record_id}).first()
        if row is None:
            raise NotFound(f"no record {record_id!r} in the target repository")
        return row

    def state_before(self, record_id: str, since: datetime) -> str | None:
        """The record's state as of its last revision made before `since` (None: none)."""
        return self.connection.execute(
            sa.select(revisions.c.state)
            .where(revisions.c.record_id == record_id, revisions.c.created < since.astimezone(UTC))
            .order_by(revisions.c.revision.desc())
            .limit(1)
        ).scalar()

    def records_by_id(self, record_ids: Iterable[str]) -> dict[str, sa.Row]:
        """The records of these ids (`record`, many at once); an unknown id is left out."""
        found: dict[str, sa.Row] = {}
        for chunk in _chunks(sorted(set(record_ids))):
            for row in self.connection.execute(sa.select(records).where(records.c.id.in_(chunk))):
                found[row.id] = row
        return found

    def memberships_of(self, record_ids: Iterable[str]) -> dict[str, dict[str, bool]]:
        """Each of these records' communities (whether each is its default); a record in
        none is left out."""
        found: dict[str, dict[str, bool]] = {}
        for chunk in _chunks(sorted(set(record_ids))):
            for row in self.connection.execute(
                sa.select(memberships).where(memberships.c.record_id.in_(chunk))
            ):
                found.setdefault(row.record_id, {})[row.community_id] = bool(row.is_default)
        return found

    def draft(self, record_id: str) -> sa.Row | None:
        return self.connection.execute(_DRAFT, {"record_id": record_id}).first()

    def record_communities(self, record_id: str) -> list[sa.Row]:
        """(slug, is_default) of the record's communities, in the order they were added."""
        return list(
            self.connection.execute(
                sa.select(communities.c.slug, memberships.c.is_default)
                .join(communities, communities.c.id == memberships.c.community_id)
                .where(memberships.c.record_id == record_id)
                .order_by(memberships.c.position, communities.c.slug)
            )
        )

    def pid_holder(self, pid: str, *, besides: str | None = None) -> str | None:
        """The record that holds this DOI (hard-deleted and purge-marked ones hold none)."""
        if besides is None:
            return self.connection.execute(_PID_HOLDER, {"doi": pid}).scalar()
        return self.connection.execute(
            _PID_HOLDER_BESIDES, {"doi": pid, "record_id": besides}
        ).scalar()

    def local_records(
        self,
        harvester_id: str,
        keys: Iterable[tuple[str, str | None]],
        *,
        coming_back: Collection[str] = (),
    ) -> dict[str, LocalRecord]:
        """Each (source identifier, pid)'s local record: by source identifier, then by pid.

        Found by pid means a record nobody harvested (a user's deposit) with the same DOI:
        it is taken over. So is this harvester's tombstone of another source identifier
        that the source deleted (nobody changed it since): the source re-identified the
        record (a repository migration), the DOI says it is the same work. A record of
        another harvester, or live under another identifier, is not. A harvested record
        hard deleted or marked for purge has given up its DOI: a user's record that holds
        the DOI now is taken over rather than the harvested one revived; only that DOI: a
        deposit of another DOI the source now gives the record is no more taken over than
        for a live record (the harvested one is revived and refused the DOI).

        `coming_back`: source identifiers the same write brings back live; their tombstones
        are theirs, not a re-identified record's (a new record listed before the one coming
        back took its tombstone, and the record coming back then failed).
        """
        keys = list(keys)
        identifiers = [identifier for identifier, _ in keys]
        by_source: dict[str, sa.Row] = {}
        for chunk in _chunks(identifiers):
            for row in self.connection.execute(
                sa.select(*_LOOKUP_COLUMNS).where(
                    records.c.source_harvester == harvester_id,
                    records.c.source_identifier.in_(chunk),
                )
            ):
                by_source[row.source_identifier] = row
        # Released by a deleted harvester: taken over by the source identifier they keep.
        released_by_source: dict[str, sa.Row] = {}
        # Only `oai:<repository>:<id>` identifiers name their source: a bare `123` of another
        # source must not take over a released record.
        missing = (
            [i for i in identifiers if i not in by_source and i.startswith("oai:")]
            if self.released
            else []
        )
        for chunk in _chunks(missing):
            for row in self.connection.execute(
                sa.select(*_LOOKUP_COLUMNS).where(
                    records.c.source_harvester.is_(None),
                    records.c.source_identifier.in_(chunk),
                    records.c.state != DELETED,
                    ~records.c.purge,
                )
            ):
                released_by_source.setdefault(row.source_identifier, row)
        keys = [(identifier, normal_doi(pid)) for identifier, pid in keys]
        # The DOI each hard-deleted (or purge-marked) harvested record gave up.
        released = {i: row.doi for i, row in by_source.items() if row.state == DELETED or row.purge}
        wanted_pids = [
            pid
            for identifier, pid in keys
            if pid and (identifier not in by_source or released.get(identifier, "") == pid)
        ]
        # Read by DOI alone (at most one counting record holds each: `uq_target_records_doi`)
        # and sorted out here: with the harvester's conditions in the query, SQLite searched
        # the harvester's every record (by source_harvester), a batch's lookup growing with
        # the target, instead of the batch's DOIs.
        by_pid: dict[str, sa.Row] = {}
        for chunk in _chunks(sorted(set(wanted_pids))):
            for row in self.connection.execute(_BY_PID, {"dois": chunk}):
                nobodys = row.source_harvester is None  # a deposit, or a released record
                # This harvester's, deleted at the source under its former identifier.
                reidentified = (
                    row.source_harvester == harvester_id
                    and row.state == TOMBSTONE
                    and not row.changed_locally
                    and row.source_identifier not in coming_back
                )
                if nobodys or reidentified:
                    by_pid.setdefault(row.doi, row)
        found = {
            row.id for row in [*by_source.values(), *by_pid.values(), *released_by_source.values()]
        }
        edit_drafts: set[str] = set()
        harvested_drafts: dict[str, datetime] = {}  # record id: when its draft was saved
        for chunk in _chunks(sorted(found)):
            for draft in self.connection.execute(
                sa.select(
                    drafts.c.record_id, drafts.c.kind, drafts.c.harvested, drafts.c.updated
                ).where(drafts.c.record_id.in_(chunk))
            ):
                if draft.kind == "edit":
                    edit_drafts.add(draft.record_id)
                if draft.harvested:
                    harvested_drafts[draft.record_id] = as_utc(draft.updated)
        result: dict[str, LocalRecord] = {}
        for identifier, pid in keys:
            row = by_source.get(identifier)
            taken_over = False
            given_up = identifier in released and released[identifier] == pid
            if (row is None or given_up) and pid and pid in by_pid:
                row = by_pid[pid]
                taken_over = True
            elif row is None and identifier in released_by_source:
                row = released_by_source[identifier]
                taken_over = True
            if row is None:
                result[identifier] = LocalRecord(LocalState.MISSING)
            else:
                result[identifier] = LocalRecord(
                    state=LOCAL_STATE[row.state],
                    local_id=row.id,
                    revision=row.revision,
                    has_edit_draft=row.id in edit_drafts,
                    harvested_draft=row.id in harvested_drafts,
                    draft_saved=harvested_drafts.get(row.id),
                    taken_over=taken_over,
                )
        return result

    # -- record life cycle -----------------------------------------------------------------

    def _insert_record(
        self,
        state: str,
        data: dict[str, Any] | None,
        revision: int,
        doi: str | None,
        harvester_id: str | None,
        source_identifier: str | None,
    ) -> tuple[str, datetime]:
        """The `records` row of a new record; returns its id and creation time."""
        record_id = new_record_id()
        stamp = now()
        self.connection.execute(
            sa.insert(records).values(
                id=record_id,
                state=state,
                data=data,
                revision=revision,
                doi=doi,
                source_harvester=harvester_id,
                source_identifier=source_identifier,
                purge=False,
                created=stamp,
                updated=stamp,
            )
        )
        if state != DELETED:
            self._count_new(harvester_id, 1, sources=int(source_identifier is not None))
        return record_id, stamp

    def _count_new(self, harvester_id: str | None, new: int, *, sources: int) -> None:
        """New records (none hard deleted) in the counts `stats` reads, `sources` of them with
        a source identifier. Counted here, once per statement: a trigger per inserted row
        doubled SQLite's cost of a harvest's inserts. Updates and deletions of records are
        counted by triggers (schema version 11)."""
        key = harvester_id or ""
        sources = sources if harvester_id is not None else 0
        dialect = sqlite if self.connection.dialect.name == "sqlite" else postgresql
        insert = dialect.insert(counts).values(
            source_harvester=key, records=new, source_identifiers=sources
        )
        self.connection.execute(
            insert.on_conflict_do_update(
                index_elements=[counts.c.source_harvester],
                set_={
                    "records": counts.c.records + insert.excluded.records,
                    "source_identifiers": (
                        counts.c.source_identifiers + insert.excluded.source_identifiers
                    ),
                },
            )
        )

    def create(
        self,
        data: dict[str, Any],
        *,
        doi: str | None,
        harvester_id: str | None = None,
        source_identifier: str | None = None,
        harvested: bool = False,
    ) -> str:
        """A new record: a draft, not yet published (revision 0); `harvested`: the harvest's
        draft, which names no DOI another draft under review names (`_check_unclaimed`)."""
        self._check_pid_free(doi, None)
        if harvested:
            self._check_unclaimed(doi, None)
        record_id, stamp = self._insert_record(DRAFT, None, 0, doi, harvester_id, source_identifier)
        self.connection.execute(
            sa.insert(drafts).values(
                record_id=record_id,
                kind="new",
                data=data,
                updated=stamp,
                harvested=harvested,
                doi=doi,
            )
        )
        return record_id

    def create_published(
        self,
        data: dict[str, Any],
        *,
        doi: str | None,
        harvester_id: str | None = None,
        source_identifier: str | None = None,
        pid_field: str = DEFAULT_PID_FIELD,
    ) -> str:
        """`create` then `publish` in four statements instead of nine: the same end state.

        The new record is live at revision 1 and its revision row is written; the draft that
        `create` would make and `publish` would remove is never written. Both DOI checks are
        kept: the draft's (`doi`) and the published version's (the pid in the data).
        """
        self._check_pid_free(doi, None)
        published_doi = pid_of(data, pid_field)
        if published_doi != doi:
            self._check_pid_free(published_doi, None)
        encoded = _encoded_once(data)
        record_id, stamp = self._insert_record(
            LIVE, encoded, 1, published_doi, harvester_id, source_identifier
        )
        self.connection.execute(
            sa.insert(revisions).values(
                record_id=record_id, revision=1, state=LIVE, data=encoded, created=stamp
            )
        )
        return record_id

    def pid_holders(self, pids: Iterable[str], *, claimed: bool = False) -> set[str]:
        """Which of these DOIs a record already holds (as `pid_holder`, many at once);
        `claimed`: or a published record's harvested edit draft names (`draft_claims`)."""
        held: set[str] = set()
        for chunk in _chunks(sorted(set(pids))):
            held.update(
                self.connection.execute(
                    sa.select(records.c.doi).where(
                        records.c.doi.in_(chunk), records.c.state != DELETED, ~records.c.purge
                    )
                ).scalars()
            )
            if claimed:
                held.update(self.draft_claims(chunk))
        return held

    def draft_claims(self, pids: Iterable[str], *, besides: str | None = None) -> dict[str, str]:
        """Which of these DOIs a published record's harvested edit draft names, one its
        record does not hold yet, and which record's: reserved for the review (`publish:
        false`), as a new record's draft reserves its DOI: a reviewer can publish only one
        of two drafts naming one DOI. `besides`: not this record's own draft."""
        claims: dict[str, str] = {}
        for chunk in _chunks(sorted(set(pids))):
            for row in self.connection.execute(_DRAFTS_NAMING, {"dois": chunk}):
                if row.state == LIVE and row.held != row.doi and row.record_id != besides:
                    claims.setdefault(row.doi, row.record_id)
        return claims

    def pid_owners(self, pids: Iterable[str]) -> dict[str, str | None]:
        """The harvester of the record that holds each of these DOIs (None: no harvester's)."""
        owners: dict[str, str | None] = {}
        for chunk in _chunks(sorted(set(pids))):
            for row in self.connection.execute(
                sa.select(records.c.doi, records.c.source_harvester).where(
                    records.c.doi.in_(chunk), records.c.state != DELETED, ~records.c.purge
                )
            ):
                owners[row.doi] = row.source_harvester
        return owners

    def create_many(
        self, new_records: list[NewRecord], *, harvester_id: str, publish: bool = True
    ) -> list[str]:
        """`create_published` (or, `publish` false, `create` of a harvested draft) for many
        records in a few statements, for a batch of creations.

        The caller has made sure no DOI of them is held or repeated (`pid_holders`); a
        database error (an id clash) fails them all, so run it inside a savepoint.
        """
        stamp = now()
        ids = [new_record_id() for _ in new_records]
        created = list(zip(ids, new_records, strict=True))
        fixed = {
            "source_harvester": harvester_id,
            "purge": False,
            "changed_locally": False,
            "created": stamp,
            "updated": stamp,
        }
        if publish:
            self._insert_many(
                records,
                {"state": LIVE, "revision": 1, **fixed},
                ("id", "data", "doi", "source_identifier"),
                [(i, n.data_json, normal_doi(n.doi), n.source_identifier) for i, n in created],
            )
            self._insert_many(
                revisions,
                {"revision": 1, "state": LIVE, "created": stamp},
                ("record_id", "data"),
                [(record_id, new.data_json) for record_id, new in created],
            )
        else:  # the record holds no data until published; its draft does
            self._insert_many(
                records,
                {"state": DRAFT, "revision": 0, **fixed},
                ("id", "doi", "source_identifier"),
                [(i, normal_doi(new.doi), new.source_identifier) for i, new in created],
            )
            self._insert_many(
                drafts,
                {"kind": "new", "updated": stamp, "harvested": True},
                ("record_id", "data", "doi"),
                [(i, new.data_json, normal_doi(new.doi)) for i, new in created],
            )
        # A record in no community yet: the first of its communities is its default.
        joined = [
            (record_id, community_id, position == 0, position)
            for record_id, new in created
            for position, community_id in enumerate(new.communities)
        ]
        if joined:
            self._insert_many(
                memberships, {}, ("record_id", "community_id", "is_default", "position"), joined
            )
        self._count_new(harvester_id, len(ids), sources=len(ids))
        return ids

    def save_many_drafts(
        self,
        changes: list[RecordChange],
        *,
        kept: Sequence[RecordChange] = (),
    ) -> list[str]:
        """`save_draft` (harvested) for many records in a few statements: a draft (never
        published) rewritten, keeping the DOI it holds or taking up a free one (its
        `draft_doi`, which the caller found free); a published record given an edit
        draft. `kept`: published records the harvest leaves as they are, their edit drafts
        removed. Their communities joined too. Returns the ids. Run it inside a savepoint."""
        stamp = now()
        new = [change.record.id for change in changes if change.record.state == DRAFT]
        for chunk in _chunks(new):  # a new record's draft is the record's latest change
            self.connection.execute(
                sa.update(records).where(records.c.id.in_(chunk)).values(updated=stamp)
            )
        # A new record's DOI is reserved as soon as its draft names it (`save_draft`).
        moved = [
            {"record_id": change.record.id, "new_doi": change.draft_doi}
            for change in changes
            if change.record.state == DRAFT and change.draft_doi != change.record.doi
        ]
        if moved:
            self.connection.execute(_MOVE_DOI, moved)
        for chunk in _chunks([change.record.id for change in changes]):
            self.connection.execute(sa.delete(drafts).where(drafts.c.record_id.in_(chunk)))
        self._remove_edit_drafts([change.record.id for change in kept])
        self._insert_many(
            drafts,
            {"updated": stamp, "harvested": True},
            ("record_id", "kind", "data", "doi"),
            [
                (
                    change.record.id,
                    "new" if change.record.state == DRAFT else "edit",
                    change.data_json,
                    change.draft_doi,
                )
                for change in changes
            ],
        )
        return self.join_many([*changes, *kept])

    def join_many(self, changes: list[RecordChange]) -> list[str]:
        """The memberships the changed records take up (`RecordChange.joins`), at once;
        returns the records' ids."""
        rows = [
            (change.record.id, join.community_id, join.is_default, join.position)
            for change in changes
            for join in change.joins
        ]
        self._insert_many(
            memberships, {}, ("record_id", "community_id", "is_default", "position"), rows
        )
        return [change.record.id for change in changes]

    def _insert_many(
        self,
        table: sa.Table,
        constants: dict[str, Any],
        columns: tuple[str, ...],
        rows: list[tuple[Any, ...]],
    ) -> None:
        """Insert rows that share the `constants` and differ in `columns` (their values
        already as stored: a JSON column's as encoded text, a DOI in its normal form).

        On SQLite the rows go to the driver as tuples, the constants converted for it once:
        SQLAlchemy's executemany builds, converts and checks every row's parameters, which
        for a batch of creations cost about as much as SQLite's inserts themselves.
        PostgreSQL keeps SQLAlchemy's batched insert, which packs many rows per statement.
        No rows, no statement (an empty parameter list would insert one row of defaults)."""
        if not rows:
            return
        if self.connection.dialect.name != "sqlite":
            text = {c: sa.bindparam(c, type_=sa.Text) for c in columns if _is_json(table, c)}
            self.connection.execute(
                sa.insert(table).values(**constants, **text),
                [dict(zip(columns, row, strict=True)) for row in rows],
            )
            return
        dialect = self.connection.dialect
        fixed = tuple(_bound(table.c[name], value, dialect) for name, value in constants.items())
        names = ", ".join([*constants, *columns])
        marks = ", ".join("?" * (len(constants) + len(columns)))
        self.connection.exec_driver_sql(
            f"INSERT INTO {table.name} ({names}) VALUES ({marks})",
            [fixed + row for row in rows],
        )

    def mark_changed_locally(self, record_id: str) -> None:
        """A user changed the record: if harvested, the next harvest brings it back."""
        self.connection.execute(
            sa.update(records)
            .where(records.c.id == record_id, records.c.source_harvester.is_not(None))
            .values(changed_locally=True)
        )

    def settle_local_changes(self, record_ids: Iterable[str]) -> None:
        """The harvest wrote these records (or found them as it would leave them)."""
        for chunk in _chunks(sorted(set(record_ids))):
            self.connection.execute(
                sa.update(records)
                .where(records.c.id.in_(chunk), records.c.changed_locally)
                .values(changed_locally=False)
            )

    def changed_locally(self, harvester_id: str) -> list[str]:
        """Source identifiers of the harvester's records a user changed since the last write."""
        return list(
            self.connection.execute(
                sa.select(records.c.source_identifier)
                .where(records.c.source_harvester == harvester_id, _CHANGED_LOCALLY)
                .order_by(records.c.source_identifier)
            ).scalars()
        )

    def any_released(self) -> bool:
        """Whether a deleted harvester left records for a later one to take over."""
        query = sa.select(records.c.id).where(
            records.c.source_harvester.is_(None), records.c.source_identifier.is_not(None)
        )
        return self.connection.execute(query.limit(1)).first() is not None

    def release(self, harvester_id: str) -> int:
        """The harvester's records belong to no harvester any more; each keeps its source
        identifier, by which a later harvester of the same source takes it over."""
        result = self.connection.execute(
            sa.update(records)
            .where(records.c.source_harvester == harvester_id)
            .values(source_harvester=None, changed_locally=False)
        )
        return result.rowcount

    def rekey_plan(self, harvester_id: str, old: str, new: str) -> RekeyPlan:
        """What `rekey` would rewrite: the harvester's records whose source identifier begins
        with `old`, in any state (a tombstone, a hard-deleted record: a harvest brings them
        back by it), and those whose new identifier another of its records holds."""
        return plan_rekey(
            self.connection,
            "target",
            records.c.source_harvester,
            records.c.source_identifier,
            harvester_id,
            old,
            new,
        )

    def rekey(self, harvester_id: str, old: str, new: str) -> int:
        """The harvester's records whose source identifier begins with `old` begin with `new`
        instead: the next harvest of the new identifiers finds them (same ids, revisions go
        on). Returns how many; RekeyRefused (nothing changed) if a new one is taken."""
        plan = self.rekey_plan(harvester_id, old, new)
        if plan.taken:
            raise RekeyRefused(taken_message(plan, harvester_id, old, new))
        self.connection.execute(
            sa.update(records)
            .where(
                records.c.source_harvester == harvester_id,
                starts_with(records.c.source_identifier, old),
            )
            .values(source_identifier=replaced(records.c.source_identifier, old, new))
        )
        return plan.count

    def release_pids(self, harvester_id: str, new_pids: dict[str, str | None]) -> dict[str, str]:
        """The harvester's records of these source identifiers let go of a DOI other than
        the one they are about to get (`new_pids`), for another record of the same write to
        take it. Returns {record id: DOI let go}, for `keep_pids`."""
        released: dict[str, str] = {}
        for chunk in _chunks(sorted(new_pids)):
            for row in self.connection.execute(
                sa.select(records.c.id, records.c.source_identifier, records.c.doi).where(
                    records.c.source_harvester == harvester_id,
                    records.c.source_identifier.in_(chunk),
                    records.c.doi.is_not(None),
                )
            ):
                if row.doi != normal_doi(new_pids[row.source_identifier]):
                    released[row.id] = row.doi
        for chunk in _chunks(sorted(released)):
            self.connection.execute(
                sa.update(records).where(records.c.id.in_(chunk)).values(doi=None)
            )
        return released

    def keep_pids(self, released: dict[str, str], *, pid_field: str = DEFAULT_PID_FIELD) -> None:
        """Records `release_pids` let go of a DOI that their published version still names
        (their write did not publish) hold it again; DuplicatePidError if another record took
        it meanwhile."""
        for record_id, doi in released.items():
            row = self.record(record_id)
            if row.doi is None and pid_of(row.data, pid_field) == doi:
                self.hold_pid(record_id, doi)

    def hold_pid(self, record_id: str, doi: str | None) -> None:
        """The record holds this pid from now on, its data unchanged (no new revision);
        DuplicatePidError if another record holds it."""
        self._check_pid_free(doi, record_id)
        self.connection.execute(sa.update(records).where(records.c.id == record_id).values(doi=doi))

    def claim(self, record_id: str, harvester_id: str, source_identifier: str) -> None:
        """PID takeover: the record is now the harvested record of this source identifier.
        A hard deleted (or purged) record that was it before lets go of the identifier.

        A record another harvester claimed since it was looked up (a harvest writing at the
        same time that committed first; PostgreSQL lets this one wait for its lock, then
        go on) is not taken from it: DuplicatePidError.
        """
        source = sa.and_(
            records.c.source_harvester == harvester_id,
            records.c.source_identifier == source_identifier,
            records.c.id != record_id,
        )
        self.connection.execute(
            sa.update(records).where(source).values(source_harvester=None, source_identifier=None)
        )
        claimed = self.connection.execute(
            sa.update(records)
            .where(
                records.c.id == record_id,
                sa.or_(
                    records.c.source_harvester.is_(None),
                    records.c.source_harvester == harvester_id,
                ),
            )
            .values(source_harvester=harvester_id, source_identifier=source_identifier)
        )
        if claimed.rowcount != 1:
            row = self.record(record_id)
            raise DuplicatePidError(
                f"DOI {row.doi} is already used by record {record_id}, which harvester "
                f"{row.source_harvester} took over while this harvest ran"
            )

    def claim_many(self, harvester_id: str, claims: dict[str, str]) -> None:
        """`claim` of many records: {record id: source identifier}, each a user's (nobody's)
        or this harvester's under another identifier (re-identified), none of them the
        record another claim names as its identifier. DuplicatePidError when another
        harvest claimed one meanwhile: run it inside a savepoint."""
        identifiers = sorted(claims.values())
        for chunk in _chunks(identifiers):  # hard deleted records that were them before
            self.connection.execute(
                sa.update(records)
                .where(
                    records.c.source_harvester == harvester_id,
                    records.c.source_identifier.in_(chunk),
                )
                .values(source_harvester=None, source_identifier=None)
            )
        self.connection.execute(
            _CLAIM,
            [
                {"claimed_id": record_id, "claimant": harvester_id, "claimed_as": identifier}
                for record_id, identifier in sorted(claims.items())  # locked in one order
            ],
        )
        held: dict[str, str] = {}
        for chunk in _chunks(sorted(claims)):
            query = sa.select(records.c.id, records.c.source_identifier).where(
                records.c.id.in_(chunk), records.c.source_harvester == harvester_id
            )
            held.update((row.id, row.source_identifier) for row in self.connection.execute(query))
        if lost := sum(held.get(record_id) != claim for record_id, claim in claims.items()):
            raise DuplicatePidError(
                f"{lost} of the records to take over were taken over by another harvester "
                "while this harvest ran"
            )

    def save_draft(
        self, record_id: str, data: dict[str, Any], *, doi: str | None, harvested: bool = False
    ) -> None:
        """Write the record's draft: a new record's draft, or an edit draft of a published one
        (`harvested`: the harvest leaves it there, see `drafts.harvested`)."""
        row = self.record(record_id)
        if row.state not in (DRAFT, LIVE):
            raise PipelineError(f"record {record_id} is {row.state}: restore it before editing")
        kind = "new" if row.state == DRAFT else "edit"
        stamp = now()
        if row.state == DRAFT:
            # A new record's DOI is reserved as soon as its draft names it.
            self._check_pid_free(doi, record_id)
            if harvested and doi != row.doi:
                self._check_unclaimed(doi, record_id)
            self.connection.execute(
                sa.update(records).where(records.c.id == record_id).values(doi=doi, updated=stamp)
            )
        elif harvested and doi != row.doi:
            self._check_draft_pid(doi, record_id, row.doi)
        updated = self.connection.execute(
            _UPDATE_DRAFT,
            {
                "draft_of": record_id,
                "new_kind": kind,
                "new_data": data,
                "stamp": stamp,
                "new_harvested": harvested,
                "new_doi": doi,
            },
        )
        if updated.rowcount == 0:
            self.connection.execute(
                _ADD_DRAFT,
                {
                    "record_id": record_id,
                    "kind": kind,
                    "data": data,
                    "updated": stamp,
                    "harvested": harvested,
                    "doi": doi,
                },
            )

    def publish(self, record_id: str, *, pid_field: str | None = None) -> int:
        """The draft becomes the published version (a new revision), holding the pid at
        `pid_field` of its data, or by default the one the draft names (`drafts.doi`)."""
        row = self.record(record_id)
        draft = self.draft(record_id)
        if row.state not in (DRAFT, LIVE) or draft is None:
            raise PipelineError(f"record {record_id} has no draft to publish")
        self.connection.execute(_DELETE_DRAFTS, {"record_id": record_id})
        doi = draft.doi if pid_field is None else pid_of(draft.data, pid_field)
        return self._change(row, LIVE, draft.data, doi=doi)

    def update_published(
        self, record_id: str, data: dict[str, Any], *, doi: str | None, row: sa.Row | None = None
    ) -> int:
        """Replace the published version in place (no draft step); an edit draft is dropped.
        `row`: the record as this transaction just read it, not to be read again."""
        row = row if row is not None else self.record(record_id)
        if row.state != LIVE:
            raise PipelineError(f"record {record_id} is {row.state}, not published")
        self.remove_edit_draft(record_id)
        return self._change(row, LIVE, data, doi=doi)

    def update_many_published(
        self, updates: list[RecordChange], *, restored: bool = False
    ) -> list[int]:
        """`update_published` for many records in two statements (a third for communities
        they join), for a batch of updates; returns their revisions now.

        Each record's edit draft (a user's) is dropped. The caller has made sure each record
        is published and keeps the DOI it holds (which no other record can hold:
        `uq_target_records_doi`) or takes up a free one (`RecordChange.new_doi`); a database
        error fails them all, so run it inside a savepoint. `restored`: each record got a
        revision since it was read (`restore_many`, `revive_many`)."""
        self._remove_edit_drafts([update.record.id for update in updates])
        revised = self._change_many(updates, LIVE, after=int(restored))
        self.join_many(updates)
        return revised

    def restore_many(self, changes: list[RecordChange]) -> list[int]:
        """`restore`, then `update_published`, of many tombstones (none marked for purge,
        each keeping its DOI, which its tombstone holds); returns their revisions now. Run it
        inside a savepoint."""
        self.restore_tombstones(changes)
        return self.update_many_published(changes, restored=True)

    def restore_tombstones(self, changes: list[RecordChange]) -> list[int]:
        """`restore` of many tombstones (none marked for purge: each holds its DOI still),
        published again as they were; returns their revisions now. Run it inside a
        savepoint."""
        for chunk in _chunks([change.record.id for change in changes]):
            self.connection.execute(
                sa.update(records)
                .where(records.c.id.in_(chunk))
                .values(tombstone_note=None, purge=False)
            )
        return self._change_many(
            [RecordChange(c.record, json_codec.dumps(c.record.data)) for c in changes], LIVE
        )

    def revive_many(self, changes: list[RecordChange], last_published: dict[str, Any]) -> list[int]:
        """`revive`, then `update_published`, of many hard-deleted records (each published
        before: `last_published` holds each one's last data; each keeping its DOI, which no
        other record holds now); returns their revisions now. Run it inside a savepoint."""
        self.revive_rows(changes, last_published=last_published)
        return self.update_many_published(changes, restored=True)

    def revive_rows(self, changes: list[RecordChange], last_published: dict[str, Any]) -> list[int]:
        """`revive` of many hard-deleted records (each published before, its DOI free): live
        again from their last data; returns their revisions now. Run it inside a savepoint."""
        as_last = [json_codec.dumps(last_published[c.record.id]) for c in changes]
        return self._change_many(
            [RecordChange(c.record, data) for c, data in zip(changes, as_last, strict=True)], LIVE
        )

    def last_published_many(self, record_ids: Iterable[str]) -> dict[str, Any]:
        """Each record's last revision with data (what `revive` brings back), a statement a
        chunk; a record never published (a harvested draft a user deleted) has none."""
        found: dict[str, Any] = {}
        for chunk in _chunks(sorted(set(record_ids))):
            newest = (
                sa.select(
                    revisions.c.record_id, sa.func.max(revisions.c.revision).label("revision")
                )
                .where(revisions.c.record_id.in_(chunk), revisions.c.data.isnot(None))
                .group_by(revisions.c.record_id)
                .subquery()
            )
            last = sa.select(revisions.c.record_id, revisions.c.data).join(
                newest,
                sa.and_(
                    revisions.c.record_id == newest.c.record_id,
                    revisions.c.revision == newest.c.revision,
                ),
            )
            found.update((row.record_id, row.data) for row in self.connection.execute(last))
        return found

    def tombstone_many(self, published: list[sa.Row], *, note: str) -> list[int]:
        """`tombstone` (no purge) for many published records at once, their edit drafts
        removed; returns their revisions now. Run it inside a savepoint."""
        ids = [row.id for row in published]
        self._remove_edit_drafts(ids)
        revised = self._change_many(
            [RecordChange(row, json_codec.dumps(row.data)) for row in published], TOMBSTONE
        )
        for chunk in _chunks(ids):
            self.connection.execute(
                sa.update(records)
                .where(records.c.id.in_(chunk))
                .values(tombstone_note=note, purge=False)
            )
        return revised

    def _change_many(self, changes: list[RecordChange], state: str, *, after: int = 0) -> list[int]:
        """`_change` for many records (no DOI check: each keeps the one it holds, or takes up
        its `new_doi`, which the caller found free); `after`: revisions each got since it
        was read."""
        stamp = now()
        revised = [change.record.revision + 1 + after for change in changes]
        self.connection.execute(
            _CHANGE_RECORD,
            [
                {
                    "record_id": change.record.id,
                    "new_state": state,
                    "new_data": Encoded(change.data_json),
                    "new_doi": change.new_doi or change.record.doi,
                    "new_revision": revision,
                    "stamp": stamp,
                }
                for change, revision in zip(changes, revised, strict=True)
            ],
        )
        self._insert_many(
            revisions,
            {"state": state, "created": stamp},
            ("record_id", "revision", "data"),
            [
                (change.record.id, revision, change.data_json)
                for change, revision in zip(changes, revised, strict=True)
            ],
        )
        return revised

    def _remove_edit_drafts(self, record_ids: list[str]) -> None:
        """`remove_edit_draft` of many records, a statement a chunk."""
        for chunk in _chunks(record_ids):
            self.connection.execute(
                sa.delete(drafts).where(drafts.c.record_id.in_(chunk), drafts.c.kind == "edit")
            )

    def remove_edit_draft(self, record_id: str) -> bool:
        result = self.connection.execute(_DELETE_EDIT_DRAFT, {"record_id": record_id})
        return result.rowcount > 0

    def tombstone(self, record_id: str, *, note: str | None, purge: bool) -> int:
        """Delete a published record: a tombstone with a note, optionally marked for purge."""
        row = self.record(record_id)
        if row.state not in (LIVE, TOMBSTONE):
            raise PipelineError(
                f"record {record_id} is {row.state}: only a published record can be deleted"
            )
        if row.state == TOMBSTONE:  # deleting again may add the purge mark or a note
            purge = purge or row.purge
            note = note if note is not None else row.tombstone_note
        revision = self._change(row, TOMBSTONE, row.data, doi=row.doi)
        self.connection.execute(
            sa.update(records)
            .where(records.c.id == record_id)
            .values(tombstone_note=note, purge=purge)
        )
        return revision

    def restore(self, record_id: str) -> int:
        """A tombstone becomes the published record again (the purge mark is lifted)."""
        row = self.record(record_id)
        if row.state == DELETED:
            if record_id not in self.last_published_many([record_id]):  # never published
                raise PipelineError(
                    f"record {record_id} is a harvested draft that was deleted before it was "
                    "ever published: there is nothing to restore; the next harvest brings the "
                    "draft back"
                )
            return self.revive(record_id)
        if row.state != TOMBSTONE:
            raise PipelineError(f"record {record_id} is {row.state}, not deleted")
        self._check_pid_free(row.doi, record_id)
        self.connection.execute(
            sa.update(records)
            .where(records.c.id == record_id)
            .values(tombstone_note=None, purge=False)
        )
        return self._change(row, LIVE, row.data, doi=row.doi)

    def hard_delete(self, record_id: str) -> int | None:
        """The record is gone (its drafts too); its revisions stay so it can be revived.

        A draft that was never published has no revision to keep: it is discarded.
        """
        row = self.record(record_id)
        if row.state == DELETED:
            raise PipelineError(f"record {record_id} is already hard deleted")
        if row.state == DRAFT:
            self.discard(record_id)
            return None
        self.connection.execute(sa.delete(drafts).where(drafts.c.record_id == record_id))
        self.connection.execute(
            sa.update(records)
            .where(records.c.id == record_id)
            .values(tombstone_note=None, purge=False)
        )
        return self._change(row, DELETED, None, doi=row.doi)

    def revive(self, record_id: str) -> int:
        """A hard-deleted record is back, with the same id, from its last revision with data."""
        row = self.record(record_id)
        if row.state != DELETED:
            raise PipelineError(f"record {record_id} is {row.state}, not hard deleted")
        last = self.last_published_many([record_id]).get(record_id)
        if last is None:  # a harvested draft a user deleted (`withdraw_draft`): a draft again
            self._check_pid_free(row.doi, record_id)
            self.connection.execute(
                sa.update(records).where(records.c.id == record_id).values(state=DRAFT)
            )
            return row.revision
        self._check_pid_free(row.doi, record_id)
        return self._change(row, LIVE, last, doi=row.doi)

    def withdraw_draft(self, record_id: str) -> None:
        """A user deleted a harvested record that was never published (a draft left for
        review): gone like a hard-deleted record, but its row stays, flagged, so the next
        harvest finds it and brings the draft back (the harvest wins over drafts too)."""
        self.connection.execute(sa.delete(memberships).where(memberships.c.record_id == record_id))
        self.connection.execute(sa.delete(drafts).where(drafts.c.record_id == record_id))
        self.connection.execute(
            sa.update(records)
            .where(records.c.id == record_id)
            .values(state=DELETED, data=None, updated=now())
        )

    def discard(self, record_id: str) -> None:
        """Remove a record that was never published, with its draft and memberships."""
        self._discard_all([record_id])

    def discard_many(self, record_ids: list[str]) -> list[str]:
        """`discard` of a batch's records, four statements a chunk; returns the ids."""
        return self._discard_all(record_ids)

    def _discard_all(self, record_ids: list[str]) -> list[str]:
        for chunk in _chunks(record_ids):
            for table in (memberships, drafts, revisions):
                self.connection.execute(sa.delete(table).where(table.c.record_id.in_(chunk)))
            self.connection.execute(sa.delete(records).where(records.c.id.in_(chunk)))
        return record_ids

    def _change(self, row: sa.Row, state: str, data: Any, *, doi: str | None) -> int:
        if state in (LIVE, DRAFT):
            self._check_pid_free(doi, row.id)
        revision = row.revision + 1
        stamp = now()
        data = _encoded_once(data)
        self.connection.execute(
            _CHANGE_RECORD,
            {
                "record_id": row.id,
                "new_state": state,
                "new_data": data,
                "new_doi": doi,
                "new_revision": revision,
                "stamp": stamp,
            },
        )
        self.connection.execute(
            _ADD_REVISION,
            {
                "record_id": row.id,
                "revision": revision,
                "state": state,
                "data": data,
                "created": stamp,
            },
        )
        return revision

    def _check_pid_free(self, doi: str | None, record_id: str | None) -> None:
        if doi is None:
            return
        holder = self.pid_holder(doi, besides=record_id)
        if holder is not None:
            raise self._held(doi, holder)

    def _check_draft_pid(self, doi: str | None, record_id: str, held: str | None) -> None:
        """A published record's edit draft the harvest leaves for review (`publish: false`)
        names a DOI a reviewer can publish: one no other record holds, or one whose holder's
        own harvested draft names another, which is free or whose holder's draft names
        another in turn, and so on to a free DOI or none (published from that end, each
        lets go of the DOI the one before names); not a ring back to the DOI this record
        holds (`held`: two records exchanging DOIs, or more rotating them: none could be
        published first); and one no other draft under review names (`_check_unclaimed`).
        DuplicatePidError otherwise, as a publishing writer's refusal: before, the draft was
        saved, its harvest record without an error, and publishing it was refused."""
        if doi is None:
            return
        self._check_unclaimed(doi, record_id)
        first: str | None = None  # the record that holds `doi`, which the error names
        named: str | None = doi
        seen = {record_id}
        while named is not None:
            holder = self.pid_holder(named, besides=record_id)
            if holder is None:
                return
            first = first or holder
            draft = self.draft(holder)
            stuck = draft is None or not draft.harvested or draft.doi == named
            if stuck or holder in seen or (held is not None and draft.doi == held):
                raise self._held(doi, first)
            seen.add(holder)
            named = draft.doi

    def check_edit_drafts(self, record_ids: Iterable[str]) -> None:
        """`_check_draft_pid` of these records' harvested edit drafts again, each against the
        DOI its record holds now (records that exchanged DOIs let them go while written)."""
        for record_id in record_ids:
            row, draft = self.record(record_id), self.draft(record_id)
            if row.state == LIVE and draft is not None and draft.harvested and draft.doi != row.doi:
                self._check_draft_pid(draft.doi, record_id, row.doi)

    def _check_unclaimed(self, doi: str | None, record_id: str | None) -> None:
        """The harvest's draft names no DOI a published record's harvested edit draft names
        for its review (`draft_claims`): of two, the reviewer could publish only one.
        DuplicatePidError, as a publishing writer refuses the second record to take it."""
        if doi is None:
            return
        # (one DOI asked: the key is its stored form)
        claimant = next(iter(self.draft_claims([doi], besides=record_id).values()), None)
        if claimant is not None:
            raise DuplicatePidError(
                f"DOI {doi} is already named by the edit draft of record {claimant}"
                f"{self._whose(claimant)}, waiting for review"
            )

    def _held(self, doi: str, holder: str) -> DuplicatePidError:
        return DuplicatePidError(
            f"DOI {doi} is already used by record {holder}{self._whose(holder)}"
        )

    def _whose(self, record_id: str) -> str:
        """Whose record holds a DOI, for the error: what to do differs for each."""
        row = self.connection.execute(
            sa.select(records.c.source_harvester, records.c.source_identifier).where(
                records.c.id == record_id
            )
        ).one()
        if row.source_harvester is not None:
            return f", harvested by {row.source_harvester} as {row.source_identifier}"
        if row.source_identifier is not None:
            return f", left by a deleted harvester (was {row.source_identifier})"
        return ", a user's deposit (only a record new to the target takes a deposit over)"

    # -- communities -----------------------------------------------------------------------

    def community(self, reference: str) -> sa.Row | None:
        """A community by id or by slug; none for a reference holding a NUL character, which
        no slug or id does (PostgreSQL refuses it in a query; a deposit's was a traceback)."""
        if "\0" in reference:
            return None
        return self.connection.execute(
            sa.select(communities).where(
                sa.or_(communities.c.id == reference, communities.c.slug == reference)
            )
        ).first()

    def create_community(self, slug: str, *, parent: str | None = None) -> sa.Row:
        slug = slug.strip()
        if not slug:
            raise PipelineError("a community needs a slug")
        if self.community(slug) is not None:
            raise AlreadyExists(f"community {slug!r} already exists")
        parent_id = None
        if parent is not None:
            parent_row = self.community(parent)
            if parent_row is None:
                raise NotFound(f"parent community {parent!r} does not exist")
            parent_id = parent_row.id
        community_id = secrets.token_hex(16)
        self.connection.execute(
            sa.insert(communities).values(id=community_id, slug=slug, parent_id=parent_id)
        )
        return self.community(community_id)  # type: ignore[return-value]

    def add_to_communities(self, record_id: str, community_ids: list[str]) -> None:
        """Add the record to each community and its parents; memberships are never removed.

        The first community becomes the default when the record has none yet.
        """
        existing = {
            row.community_id: row.is_default
            for row in self.connection.execute(
                sa.select(memberships.c.community_id, memberships.c.is_default).where(
                    memberships.c.record_id == record_id
                )
            )
        }
        has_default = any(existing.values())
        position = len(existing)
        for community_id in community_ids:
            for member_id in self.with_parents(community_id):
                if member_id in existing:
                    continue
                is_default = not has_default
                self.connection.execute(
                    sa.insert(memberships).values(
                        record_id=record_id,
                        community_id=member_id,
                        is_default=is_default,
                        position=position,
                    )
                )
                existing[member_id] = is_default
                has_default = True
                position += 1
        if not has_default and existing:
            first = next(iter(existing))
            self.connection.execute(
                sa.update(memberships)
                .where(memberships.c.record_id == record_id, memberships.c.community_id == first)
                .values(is_default=True)
            )

    def with_parents(self, community_id: str) -> list[str]:
        """The community, its parent, the parent's parent …"""
        chain: list[str] = []
        current: str | None = community_id
        while current is not None and current not in chain:
            chain.append(current)
            current = self.connection.execute(
                sa.select(communities.c.parent_id).where(communities.c.id == current)
            ).scalar()
        return chain


def _encoded_once(data: Any) -> Any:
    """Record data for both the record's row and its revision's, encoded once (`Encoded`
    goes into a JSON column as it is): each column encoded it again, twice per write.
    None stays None (SQL NULL, as the JSON column stores it); data that is not JSON is left
    for the column to refuse, as a database error of the statement (the record's error)."""
    if data is None:
        return None
    try:
        return Encoded(json_codec.dumps(data))
    except TypeError:
        return data


def _is_json(table: sa.Table, column: str) -> bool:
    return isinstance(table.c[column].type, sa.JSON)


def _bound(column: sa.Column, value: Any, dialect: sa.Dialect) -> Any:
    """A value as SQLAlchemy would hand it to the driver for this column."""
    process = column.type.dialect_impl(dialect).bind_processor(dialect)
    return process(value) if process is not None else value


class DuplicatePidError(PipelineError):
    """Another record already holds this DOI."""
