"""The `oai-service` writer: applies sync decisions to the embedded target repository.

At write time the target's state is looked up again and the action derived again with the
same table (`decide`), so a plan that went stale (a user edited or deleted the record since)
still ends in the state the source reports. A batch is one transaction; each record runs
in its own SAVEPOINT, so a failing record becomes an outcome and the rest of the batch is
kept; plain creations, updates and deletions (the bulk of a first harvest and of later
ones) are written together instead, a few statements for the batch. The
target record carries (harvester, source identifier): after a crash between this write and
the harvest-record store's, the next lookup finds it and no duplicate is made.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any, Literal, TypeVar

import sqlalchemy as sa

from oai_pipeline import json_codec
from oai_pipeline.doi import MAX_DOI_LENGTH, normal_doi
from oai_pipeline.errors import (
    PipelineError,
    RecordError,
    refused_as_full,
    refused_as_read_only,
)
from oai_pipeline.harvesters.model import SLUG
from oai_pipeline.identifier_prefix import RekeyPlan
from oai_pipeline.settings import Settings
from oai_pipeline.sync.rules import (
    UPDATE_ALL_REASON,
    Action,
    LocalRecord,
    LocalState,
    SourceRecord,
    decide,
)
from oai_pipeline.targets.base import (
    DUPLICATE,
    PlannedWrite,
    SourceKey,
    WriteOutcome,
    Writer,
    WriterOptions,
    pid_of,
)
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline.targets.embedded.transaction import (
    DELETED,
    DRAFT,
    LIVE,
    LOCAL_STATE,
    TOMBSTONE,
    DuplicatePidError,
    Membership,
    NewRecord,
    RecordChange,
    TargetTransaction,
    as_utc,
    communities_of,
)

T = TypeVar("T")

# Planned actions that mean "the source says deleted"; every other one means "live".
_SOURCE_DELETED = (Action.DELETE, Action.DELETE_DRAFT, Action.NOTHING)
# What a live source record does to a published record, a tombstone, or a hard-deleted record
# (`_plain_updates`).
_REWRITTEN = {
    LocalState.LIVE: Action.UPDATE,
    LocalState.TOMBSTONE: Action.RESTORE,
    LocalState.HARD_DELETED: Action.REVIVE,
}
# Which batch of `_plain_updates` a record taken over, a tombstone or a hard-deleted record goes
# in: (its state, taken over?) -> kind.
_REWRITE_KIND = {
    (LocalState.LIVE, False): "update",  # with a user's edit draft
    (LocalState.LIVE, True): "takeover",
    (LocalState.TOMBSTONE, False): "restore",
    (LocalState.TOMBSTONE, True): "reidentified",
    (LocalState.HARD_DELETED, False): "revive",
}
# The states a user's deposit is taken over from into drafts with its batch (not a tombstone
# nor a hard-deleted record: a re-identified record's, one by one).
_DRAFTED = (LocalState.DRAFT_ONLY, LocalState.LIVE)
DELETED_AT_SOURCE_NOTE = "deleted at the source"


class EmbeddedWriter(Writer):
    """Writes harvested records into the embedded repository at `settings.target_db_url`."""

    class Options(WriterOptions):
        model: Literal["rdm"] = "rdm"

    options: Options

    def __init__(self, options: WriterOptions, settings: Settings) -> None:
        super().__init__(options, settings)
        self._repository: EmbeddedRepository | None = None
        self._coming_back: set[str] = set()  # of the batch `apply` writes

    @property
    def repository(self) -> EmbeddedRepository:
        """Opened on first use, so building a writer to validate options touches no database."""
        if self._repository is None:
            self._repository = EmbeddedRepository(self.settings.target_db_url)
        return self._repository

    def close(self) -> None:
        if self._repository is not None:
            self._repository.close()
            self._repository = None

    def lookup(self, harvester_id: str, keys: list[SourceKey]) -> dict[str, LocalRecord]:
        return self.repository.lookup(harvester_id, keys)

    def missing_communities(self, references: list[str]) -> list[str]:
        with self.repository.transaction(read_only=True) as tx:
            return [reference for reference in references if tx.community(reference) is None]

    def release(self, harvester_id: str) -> int:
        with self.repository.transaction() as tx:
            return tx.release(harvester_id)

    def plan_rekey(self, harvester_id: str, old: str, new: str) -> RekeyPlan:
        with self.repository.transaction(read_only=True) as tx:
            return tx.rekey_plan(harvester_id, old, new)

    def rekey(self, harvester_id: str, old: str, new: str) -> int:
        with self.repository.transaction() as tx:
            return tx.rekey(harvester_id, old, new)

    def apply(self, harvester_id: str, writes: list[PlannedWrite]) -> list[WriteOutcome]:
        outcomes: dict[str, WriteOutcome] = {}
        # Records the batch brings back live keep their tombstones (see `local_records`).
        self._coming_back = {w.identifier for w in writes if w.action not in _SOURCE_DELETED}
        with self.repository.transaction() as tx:
            # One lookup for the batch; `_apply_one` looks again where an earlier record of
            # the batch could have changed the answer (a pid takeover).
            keys = {write.identifier: self._key(write) for write in writes}
            known = tx.local_records(harvester_id, keys.values(), coming_back=self._coming_back)
            communities = _BatchCommunities(tx)
            creations = self._plain_creations(tx, harvester_id, writes, known, keys, communities)
            new = list(creations.values())
            publish = self.options.publish
            ids = (
                _together(
                    tx, lambda: tx.create_many(new, harvester_id=harvester_id, publish=publish)
                )
                if new
                else []
            )
            if ids is None:  # e.g. an id clash: every record takes the one-by-one path
                creations, ids = {}, []
            for identifier, record_id in zip(creations, ids, strict=True):
                outcomes[identifier] = WriteOutcome(
                    identifier, Action.CREATE, record_id, 1 if publish else 0
                )
            # how many records of the batch name each pid, from the lookup's keys (`pid_of` is
            # a record's dearest step: read once)
            named = Counter(pid for _, pid in keys.values())
            for plain in (self._plain_updates, self._plain_drafts):
                outcomes.update(plain(tx, harvester_id, writes, known, communities, named))
            outcomes.update(self._plain_deletions(tx, writes, known))
            for write in writes:
                if write.identifier not in outcomes:
                    outcomes[write.identifier] = self._apply_isolated(
                        tx, harvester_id, write, known.get(write.identifier)
                    )
            self._settle_refusals(tx, harvester_id, writes, outcomes)
            # Records now as the harvest leaves them are no longer changed locally (newly
            # created ones never were; those a write brings back, once remembered).
            undoing = {w.identifier for w in writes if w.undoes_local_change}
            tx.settle_local_changes(
                o.local_id
                for identifier, o in outcomes.items()
                if o.local_id
                and o.error is None
                and identifier not in creations
                and identifier not in undoing
            )
        return [outcomes[write.identifier] for write in writes]

    def changed_locally(self, harvester_id: str) -> list[str]:
        with self.repository.transaction(read_only=True) as tx:
            return tx.changed_locally(harvester_id)

    def settle_local_changes(self, harvester_id: str, local_ids: list[str]) -> None:
        if not local_ids:
            return
        with self.repository.transaction() as tx:
            tx.settle_local_changes(local_ids)

    def _plain_creations(
        self,
        tx: TargetTransaction,
        harvester_id: str,
        writes: list[PlannedWrite],
        known: dict[str, LocalRecord],
        keys: dict[str, tuple[str, str | None]],
        communities: _BatchCommunities,
    ) -> dict[str, NewRecord]:
        """The batch's new records that need nothing but inserts, written together.

        A record qualifies when it is live, missing in the target, its communities exist,
        and its DOIs are held by no record and named by no other record of the batch, so
        the order of the batch cannot change what happens to it. Every other record takes
        the one-by-one path with its SAVEPOINT. (With a community, the one-by-one path took
        a first harvest four times as long; with `publish: false`, 7.4 round trips a record
        on PostgreSQL.) Published, a record holds its data's pid; a draft, the pid the
        one-by-one path gives it, its data's or else the source's.
        """
        pids_of: dict[str, set[str]] = {}
        data_pids: dict[str, str | None] = {}  # read once: `pid_of` is a record's dearest step
        named: Counter[str] = Counter()
        for write in writes:
            data = write.data if isinstance(write.data, dict) else None
            data_pids[write.identifier] = pid_of(data, self.options.pid_field) if data else None
            pids = {keys[write.identifier][1], data_pids[write.identifier]}
            pids.discard(None)
            pids_of[write.identifier] = pids  # type: ignore[assignment]
            named.update(pids)  # type: ignore[arg-type]
        candidates = [
            write
            for write in writes
            if write.action is Action.CREATE
            and isinstance(write.data, dict)
            and (local := known.get(write.identifier)) is not None
            and local.state is LocalState.MISSING
            and all(named[pid] == 1 for pid in pids_of[write.identifier])
        ]
        held = tx.pid_holders(
            (pid for write in candidates for pid in pids_of[write.identifier]),
            claimed=not self.options.publish,  # a draft names none another draft names
        )
        creations: dict[str, NewRecord] = {}
        for write in candidates:
            if pids_of[write.identifier] & held:
                continue
            if (data_json := _data_json(write)) is None:
                continue
            raw_pid = data_pids[write.identifier] or write.pid
            if _too_long(raw_pid):
                continue  # the one-by-one path reports it
            doi = data_pids[write.identifier] if self.options.publish else raw_pid
            members = self._members(tx, harvester_id, write, communities)
            if members is None:
                continue  # a missing community or a malformed parent: the record's error
            creations[write.identifier] = NewRecord(write.identifier, data_json, doi, members)
        return creations

    def _members(
        self,
        tx: TargetTransaction,
        harvester_id: str,
        write: PlannedWrite,
        communities: _BatchCommunities,
    ) -> tuple[str, ...] | None:
        """The communities, parents included, that `add_to_communities` gives a record of
        none yet; None when the record cannot go (its error is the one-by-one path's)."""
        try:
            ids, error = self._communities(
                tx, harvester_id, write, write.data, find=communities.find
            )
        except PipelineError:
            return None
        return None if error is not None else communities.members(ids)

    def _plain_updates(
        self,
        tx: TargetTransaction,
        harvester_id: str,
        writes: list[PlannedWrite],
        known: dict[str, LocalRecord],
        communities: _BatchCommunities,
        named: Counter[str | None],
    ) -> dict[str, WriteOutcome]:
        """The batch's updates of records published as harvested, written together: what
        `_apply_one` would do to each, in a few statements for all instead of some eight
        each (a round trip each on a PostgreSQL across a network).

        A record qualifies when the source lists it live and the target has it published
        with no edit draft, its communities exist (those it joins are added with it), and it
        keeps the DOI it holds: no other record of the batch can change what happens to it.
        One whose data the target holds already is `nothing` (a reindexed source bumps every
        datestamp), joining any communities new to it; one this run wrote before a crash, or
        any other, takes the one-by-one path. A user's deposit of the record's DOI is taken
        over (claimed, then updated) when no other record of the batch names the DOI: a
        first harvest into a target that users filled before (a migration) wrote each alone.
        A tombstone (deleted at the source or by a user, not marked for purge) is restored,
        then updated: a source that withdrew records and lists them again; so is the
        tombstone of a record the source re-identified, claimed by its new identifier. A
        record a user hard deleted is revived from its last revision, then updated, when its
        DOI is free: a harvest undoing a user's purge.
        """
        if not self.options.publish:
            return {}
        candidates: dict[str, PlannedWrite] = {}
        for write in writes:
            local = known.get(write.identifier)
            if (
                write.action not in (*_SOURCE_DELETED, Action.SKIP, Action.ERROR)
                and isinstance(write.data, dict)
                and local is not None
                and local.state in _REWRITTEN
                and local.local_id is not None
            ):
                candidates[write.identifier] = write
        rows, joined = _rows_and_memberships(tx, candidates, known)
        outcomes: dict[str, WriteOutcome] = {}
        batches: dict[str, dict[str, RecordChange]] = {
            "update": {},
            "join": {},
            "takeover": {},
            "restore": {},
            "reidentified": {},
            "revive": {},
        }
        for identifier, write in candidates.items():
            local, data = known[identifier], write.data
            row = rows.get(local.local_id)  # type: ignore[arg-type]
            if row is None or LOCAL_STATE[row.state] is not local.state or row.purge:
                continue
            joins = self._joins(tx, harvester_id, write, communities, joined, row.id)
            if joins is None:
                continue
            doi = pid_of(data, self.options.pid_field) if data else None
            pid = doi or write.pid
            if _too_long(pid):
                continue
            source = SourceRecord(identifier, write.datestamp, False, pid)
            if decide(source, None, local, update_all=True).action is not _REWRITTEN[local.state]:
                continue
            if local.taken_over or local.state is not LocalState.LIVE or local.has_edit_draft:
                # Always a new revision, as `_apply_one` writes it, a user's edit draft dropped
                # (`update_many_published`, as `update_published`). Taken over when no other
                # record of the batch names the DOI: a user's deposit (nobody's), or this
                # harvester's tombstone of another identifier (the source re-identified it).
                # Revived (hard deleted: its DOI given up) when no other record of the batch
                # names the DOI and no record holds it now (below).
                kind = _REWRITE_KIND.get((local.state, local.taken_over))
                if kind is None or (
                    kind in ("takeover", "reidentified", "revive")
                    and not _named_once(named, normal_doi(pid))
                ):
                    continue
                owners = {"takeover": (None,), "reidentified": (None, harvester_id)}.get(kind)
                if owners is not None and row.source_harvester not in owners:
                    continue
                if normal_doi(doi) == row.doi and (data_json := _data_json(write)) is not None:
                    batches[kind][identifier] = RecordChange(row, data_json, joins)
                continue
            if self._written_by_this_run(row, data, write):
                continue
            holds_already = self._holds_already(row, data, write)
            if holds_already and not joins:
                outcomes[identifier] = WriteOutcome(
                    identifier, Action.NOTHING, local.local_id, local.revision
                )
                continue
            new_doi = normal_doi(doi)
            moves = not holds_already and new_doi != row.doi
            if moves and (new_doi is None or named[new_doi] != 1):
                continue  # it loses its DOI, or takes one another record names: one by one
            if (data_json := _data_json(write)) is None:
                continue
            # Holding the data already, a record only joins its new communities (no new
            # revision): a writer given a community, then a source reindexed.
            kind = "join" if holds_already else "update"
            batches[kind][identifier] = RecordChange(
                row, data_json, joins, new_doi=new_doi if moves else None
            )
        _without_held_dois(tx, batches)
        # a revived record must have been published (a harvested draft a user deleted comes
        # back as a draft: one by one)
        revived = batches["revive"]
        last_published = tx.last_published_many(c.record.id for c in revived.values())
        for identifier in [i for i, c in revived.items() if c.record.id not in last_published]:
            del revived[identifier]

        def joined_only(changes: list[RecordChange]) -> list[int]:
            tx.join_many(changes)
            return [change.record.revision for change in changes]

        def claimed(
            kind: str, write_many: Callable[[list[RecordChange]], list[int]]
        ) -> Callable[[list[RecordChange]], list[int]]:
            def claim_then_write(changes: list[RecordChange]) -> list[int]:
                tx.claim_many(harvester_id, {c.record.id: i for i, c in batches[kind].items()})
                return write_many(changes)

            return claim_then_write

        writes_of: dict[str, tuple[Action, Callable[[list[RecordChange]], list[int]]]] = {
            "update": (Action.UPDATE, tx.update_many_published),
            "join": (Action.NOTHING, joined_only),
            "takeover": (Action.UPDATE, claimed("takeover", tx.update_many_published)),
            "restore": (Action.RESTORE, tx.restore_many),
            "reidentified": (Action.RESTORE, claimed("reidentified", tx.restore_many)),
            "revive": (Action.REVIVE, partial(tx.revive_many, last_published=last_published)),
        }
        for kind, changes in batches.items():
            action, write_many = writes_of[kind]
            # Refused together (None), each goes one by one, in its savepoint.
            revised = changes and _together(tx, partial(write_many, list(changes.values())))
            if revised:
                for (identifier, change), revision in zip(changes.items(), revised, strict=True):
                    outcomes[identifier] = WriteOutcome(
                        identifier, action, change.record.id, revision
                    )
        return outcomes

    def _plain_drafts(
        self,
        tx: TargetTransaction,
        harvester_id: str,
        writes: list[PlannedWrite],
        known: dict[str, LocalRecord],
        communities: _BatchCommunities,
        named: Counter[str | None],
    ) -> dict[str, WriteOutcome]:
        """`publish: false`: the batch's records the source changed, their drafts written
        together as `_update` writes each (seven round trips each on PostgreSQL before): a
        harvested draft (never published) rewritten; a record a reviewer published given
        the harvest's edit draft. A record qualifies when the target has it under its source
        identifier, its communities exist (those it joins are added with it), and it keeps
        the DOI it holds (a published record whose data changed names its new one in the
        draft); any other takes the one-by-one path. A user's deposit of the record's DOI,
        named by no other record of the batch, or a record a deleted harvester released, is
        taken over (claimed, given the harvest's draft). A tombstone of the record (deleted at
        the source or by a user, not marked for purge) is restored, then given the harvest's
        draft; so is a record a user hard deleted revived, when it was published before and
        its DOI is free."""
        if self.options.publish:
            return {}
        wanted = {
            LocalState.DRAFT_ONLY: Action.PUBLISH_DRAFT,
            LocalState.LIVE: Action.UPDATE,
            LocalState.TOMBSTONE: Action.RESTORE,
            LocalState.HARD_DELETED: Action.REVIVE,
        }
        candidates = {
            write.identifier: write
            for write in writes
            if isinstance(write.data, dict)
            and (local := known.get(write.identifier)) is not None
            and local.state in wanted
            and write.action is wanted[local.state]
            and local.local_id is not None
            and (
                not local.taken_over
                # a re-identified record's tombstone, claimed by its new identifier: alone
                or (local.state in _DRAFTED and _named_once(named, self._key(write)[1]))
            )
        }
        rows, joined = _rows_and_memberships(tx, candidates, known)
        # a hard-deleted record comes back as it was last published (none: one by one)
        last_published = tx.last_published_many(
            row.id for row in rows.values() if row.state == DELETED
        )
        drafts: dict[str, RecordChange] = {}
        kept: dict[str, RecordChange] = {}
        for identifier, write in candidates.items():
            row = rows.get(known[identifier].local_id)  # type: ignore[arg-type]
            if row is None or LOCAL_STATE[row.state] is not known[identifier].state or row.purge:
                continue
            if known[identifier].taken_over and row.source_harvester is not None:
                continue  # only a user's deposit (nobody's) is claimed together
            pid = pid_of(write.data, self.options.pid_field) or write.pid
            if _too_long(pid):
                continue
            new_doi = normal_doi(pid)
            if (
                row.state == DRAFT
                and new_doi != row.doi
                and (new_doi is None or named[new_doi] != 1)
            ):
                continue  # the draft loses its DOI, or takes one another record names: one by one
            if row.state == DELETED and (
                row.id not in last_published
                or new_doi != row.doi
                or not _named_once(named, new_doi)
            ):
                continue
            published = last_published[row.id] if row.state == DELETED else row.data
            as_published = row.state != DRAFT and published == write.data
            if as_published and normal_doi(pid) != row.doi:
                continue  # the record takes up the draft's DOI: one by one
            joins = self._joins(tx, harvester_id, write, communities, joined, row.id)
            if joins is None or (data_json := _data_json(write)) is None:
                continue
            # Published as harvested, a record keeps no edit draft (`_update`); any other
            # gets the harvest's draft.
            (kept if as_published else drafts)[identifier] = RecordChange(
                row, data_json, joins, normal_doi(pid)
            )
        _without_held_dois(tx, {"drafts": drafts, "kept": kept}, drafts=True)
        if not drafts and not kept:
            return {}
        claims = {
            change.record.id: identifier
            for identifier, change in {**drafts, **kept}.items()
            if known[identifier].taken_over
        }

        tombstones = [c for c in {**drafts, **kept}.values() if c.record.state == TOMBSTONE]
        hard_deleted = [c for c in {**drafts, **kept}.values() if c.record.state == DELETED]
        revisions: dict[str, int] = {}

        def claim_then_write() -> list[str]:
            if claims:
                tx.claim_many(harvester_id, claims)
            # restored or revived as they were, then given the harvest's draft (`_update`)
            if tombstones:
                revised = tx.restore_tombstones(tombstones)
                revisions.update(zip((c.record.id for c in tombstones), revised, strict=True))
            if hard_deleted:
                revised = tx.revive_rows(hard_deleted, last_published=last_published)
                revisions.update(zip((c.record.id for c in hard_deleted), revised, strict=True))
            return tx.save_many_drafts(list(drafts.values()), kept=list(kept.values()))

        # asked before the batch saves the drafts anew
        redrafted = {
            identifier: action
            for identifier in (*drafts, *kept)
            if (
                action := self._redrafted_by_this_run(tx, known[identifier], candidates[identifier])
            )
        }
        written = _together(tx, claim_then_write)
        if written is None:  # refused: each goes one by one, in its savepoint
            return {}
        return {
            identifier: WriteOutcome(
                identifier,
                Action.CREATE
                if _drafted_by_this_run(change.record, candidates[identifier])
                else redrafted.get(identifier, candidates[identifier].action),
                change.record.id,
                revisions.get(change.record.id, change.record.revision),
            )
            for identifier, change in {**drafts, **kept}.items()
        }

    def _joins(
        self,
        tx: TargetTransaction,
        harvester_id: str,
        write: PlannedWrite,
        communities: _BatchCommunities,
        joined: dict[str, dict[str, bool]],
        record_id: str,
    ) -> tuple[Membership, ...] | None:
        """The memberships `add_to_communities` would add to the record for this write (the
        communities it is not in yet, the first the default if it has none); None when the
        one-by-one path must go: a missing community, or a record in communities none of
        which is its default and none to add."""
        members = self._members(tx, harvester_id, write, communities)
        if members is None:
            return None
        held = joined.get(record_id, {})
        new = [member for member in members if member not in held]
        has_default = any(held.values())
        if held and not has_default and not new:
            return None
        return tuple(
            Membership(member, not has_default and position == 0, len(held) + position)
            for position, member in enumerate(new)
        )

    def _plain_deletions(
        self, tx: TargetTransaction, writes: list[PlannedWrite], known: dict[str, LocalRecord]
    ) -> dict[str, WriteOutcome]:
        """The batch's records deleted at the source that the target has under their source
        identifiers, published or as drafts only, deleted together as `_delete` does to each
        (some eight and seven statements each before): published ones tombstoned, their edit
        drafts removed; drafts discarded. Any other deletion takes the one-by-one path."""
        wanted = {LocalState.LIVE: Action.DELETE, LocalState.DRAFT_ONLY: Action.DELETE_DRAFT}
        candidates: dict[str, PlannedWrite] = {}
        for write in writes:
            local = known.get(write.identifier)
            pid = write.pid
            if (
                write.action in _SOURCE_DELETED
                and local is not None
                and local.state in wanted
                and local.local_id is not None
                and not local.taken_over
                and not _too_long(pid)
            ):
                source = SourceRecord(write.identifier, write.datestamp, True, pid)
                if decide(source, None, local, update_all=True).action is wanted[local.state]:
                    candidates[write.identifier] = write
        rows = tx.records_by_id(known[i].local_id for i in candidates)  # type: ignore[misc]
        found = {
            identifier: row
            for identifier in candidates
            if (row := rows.get(known[identifier].local_id)) is not None  # type: ignore[arg-type]
            and LOCAL_STATE[row.state] is known[identifier].state
        }
        published = {
            i: row for i, row in found.items() if row.state == LIVE and row.data is not None
        }
        drafts = {i: row for i, row in found.items() if row.state == DRAFT}
        outcomes: dict[str, WriteOutcome] = {}
        # Refused together (None), each goes one by one, in its savepoint.
        rows, note = list(published.values()), DELETED_AT_SOURCE_NOTE
        revised = rows and _together(tx, lambda: tx.tombstone_many(rows, note=note))
        if revised:
            for (identifier, row), revision in zip(published.items(), revised, strict=True):
                outcomes[identifier] = WriteOutcome(identifier, Action.DELETE, row.id, revision)
        if drafts and _together(tx, lambda: tx.discard_many([r.id for r in drafts.values()])):
            for identifier in drafts:
                outcomes[identifier] = WriteOutcome(identifier, Action.DELETE_DRAFT, None, None)
        return outcomes

    def _apply_isolated(
        self,
        tx: TargetTransaction,
        harvester_id: str,
        write: PlannedWrite,
        known: LocalRecord | None,
        *,
        again: bool = False,
    ) -> WriteOutcome:
        """One record in its own SAVEPOINT: its failure is its outcome, the batch goes on.

        A unique index that refused a row is looked at again, once: on PostgreSQL a harvest
        writing at the same time made the insert wait for it and then commit the same DOI,
        which the checks of a second try see (duplicate_pid, not a database error)."""
        try:
            with tx.savepoint():
                return self._apply_one(tx, harvester_id, write, known)
        except DuplicatePidError as error:
            return _failed(write, DUPLICATE, str(error), location=self.options.pid_field)
        except sa.exc.IntegrityError as error:
            if not again:
                return self._apply_isolated(tx, harvester_id, write, None, again=True)
            return _failed(write, "write_failed", _first_line(error))
        except (PipelineError, sa.exc.SQLAlchemyError) as error:
            if (refused := _batch_failure(error)) is not None:
                raise refused from None
            return _failed(write, "write_failed", _first_line(error))

    def _settle_refusals(
        self,
        tx: TargetTransaction,
        harvester_id: str,
        writes: list[PlannedWrite],
        outcomes: dict[str, WriteOutcome],
    ) -> None:
        """After the batch's first pass: records refused a DOI that a record of this
        harvester holds try again (`_exchange_pids`), those still refused are flagged for
        the stage's next try (`again`); every failed record names the target record its
        harvester holds, not one the plan meant to take over (another harvest may own it)."""
        refused = [
            write
            for write in writes
            if (error := outcomes[write.identifier].error) is not None and error.type == DUPLICATE
        ]
        owners = tx.pid_owners(pid for write in refused if (pid := self._key(write)[1]))
        # Held by a record of this harvester, or free by now (given up later in the batch).
        movable = [
            write
            for write in refused
            if owners.get(self._key(write)[1], harvester_id) == harvester_id
        ]
        outcomes.update(self._exchange_pids(tx, harvester_id, movable, outcomes))
        failed = [identifier for identifier, outcome in outcomes.items() if outcome.error]
        if not failed:
            return
        own = tx.local_records(harvester_id, [(identifier, None) for identifier in failed])
        again = {write.identifier for write in movable}
        for identifier in failed:
            local = own[identifier]
            outcomes[identifier] = dataclasses.replace(
                outcomes[identifier],
                local_id=None if local.taken_over else local.local_id,
                again=identifier in again,
            )

    def _exchange_pids(
        self,
        tx: TargetTransaction,
        harvester_id: str,
        refused: list[PlannedWrite],
        outcomes: dict[str, WriteOutcome],
    ) -> dict[str, WriteOutcome]:
        """Records refused a DOI another record of the harvester held, written again with
        their current DOIs let go first: records that swap DOIs (each waits for the other),
        a DOI that moves to a record written before the one giving it up, a re-identified
        record whose old identifier is deleted later in the batch.

        All or none, in a SAVEPOINT: a record that fails again is left out and the rest
        tried again, so a record keeps its DOI unless its own write succeeds and no DOI is
        ever held twice. Returns the new outcomes (none: the first ones stand).
        """
        retry = list(refused)
        while retry:
            again: dict[str, WriteOutcome] = {}
            try:
                with tx.savepoint():
                    released = tx.release_pids(harvester_id, dict(map(self._key, retry)))
                    for write in retry:  # looked up again: the batch changed the target
                        again[write.identifier] = self._apply_isolated(
                            tx, harvester_id, write, None
                        )
                    if any(outcome.error for outcome in again.values()):
                        raise _TryAgain
                    tx.keep_pids(released, pid_field=self.options.pid_field)
                    if not self.options.publish:  # under review: each draft publishable
                        tx.check_edit_drafts(o.local_id for o in again.values() if o.local_id)
            except _TryAgain:
                retry = [w for w in retry if again[w.identifier].error is None]
            except DuplicatePidError:
                return {}
            else:
                return again
        return {}

    # -- one record ------------------------------------------------------------------------

    def _key(self, write: PlannedWrite) -> tuple[str, str | None]:
        """(source identifier, pid) as `_apply_one` looks the record up."""
        if write.action is Action.SKIP:
            return write.identifier, normal_doi(write.pid)
        data = write.data if isinstance(write.data, dict) else None
        return write.identifier, (pid_of(data, self.options.pid_field) if data else None) or (
            normal_doi(write.pid)
        )

    def _local(
        self,
        tx: TargetTransaction,
        harvester_id: str,
        key: tuple[str, str | None],
        known: LocalRecord | None,
    ) -> LocalRecord:
        """The batch's lookup, unless it found the record by pid: an earlier record of the
        batch may have taken that record over since, so look again. Found by source
        identifier, or missing, it is kept (identifiers are unique in a batch), though a
        tombstone of this harvester may have been taken over by a re-identified record of
        the batch meanwhile: the one write that would change it, a deletion listed again
        (`nothing`), checks whose it is (`_delete`), so that skips of deleted records, many
        in a re-harvest, cost no second lookup."""
        if known is None or known.taken_over:
            return tx.local_records(harvester_id, [key], coming_back=self._coming_back)[key[0]]
        return known

    def _apply_one(
        self,
        tx: TargetTransaction,
        harvester_id: str,
        write: PlannedWrite,
        known: LocalRecord | None = None,
    ) -> WriteOutcome:
        if write.action is Action.ERROR:
            return _failed(write, "not_written", "planned as an error: nothing to write")
        if write.action is Action.SKIP:  # nothing to do; report the record as it is
            found = self._local(tx, harvester_id, (write.identifier, write.pid), known)
            return WriteOutcome(write.identifier, Action.SKIP, found.local_id, found.revision)
        source_deleted = write.action in _SOURCE_DELETED
        data = write.data
        if not source_deleted and not isinstance(data, dict):
            return _failed(write, "no_data", "a live record came without record data")
        pid = (pid_of(data, self.options.pid_field) if data else None) or write.pid
        if _too_long(pid):
            # Read at another `pid_field` than the DOI the transform validated: PostgreSQL
            # refused it with the database's message, SQLite wrote it.
            return _failed(
                write,
                "invalid_pid",
                f"the pid has {len(pid)} characters, more than the {MAX_DOI_LENGTH} the "
                "target keeps",
                location=self.options.pid_field,
            )
        # Re-check: the state now, not the state the plan saw.
        local = self._local(tx, harvester_id, (write.identifier, pid), known)
        source = SourceRecord(write.identifier, write.datestamp, source_deleted, pid)
        action = decide(source, None, local, update_all=True).action
        if source_deleted:
            return self._delete(tx, write, local, action)
        assert data is not None
        community_ids, error = self._communities(tx, harvester_id, write, data)
        if error is not None:
            return WriteOutcome(
                write.identifier, Action.ERROR, local.local_id, local.revision, error
            )
        record_id = local.local_id
        published = self._as_harvested(tx, local) if action is Action.UPDATE else None
        if published is not None and self._written_by_this_run(published, data, write):
            # An earlier attempt of this run wrote it and crashed before its outcome was
            # saved: the record is as this write would leave it, so no new revision; the
            # outcome is what that attempt did (a record it created is created, not updated).
            tx.add_to_communities(local.local_id, community_ids)
            done = (
                self._done_by_this_run(published, local, write)
                or self._brought_back_by_this_run(tx, published.id, write)
                or write.action
            )
            return WriteOutcome(write.identifier, done, local.local_id, local.revision)
        if published is not None and self._holds_already(published, data, write):
            tx.add_to_communities(local.local_id, community_ids)
            return WriteOutcome(write.identifier, Action.NOTHING, local.local_id, local.revision)
        if action is Action.CREATE and self.options.publish and not community_ids:
            record_id = tx.create_published(
                data,
                doi=pid,
                harvester_id=harvester_id,
                source_identifier=write.identifier,
                pid_field=self.options.pid_field,
            )
            return WriteOutcome(write.identifier, action, record_id, 1)
        if action is Action.CREATE:
            record_id = tx.create(
                data,
                doi=pid,
                harvester_id=harvester_id,
                source_identifier=write.identifier,
                harvested=not self.options.publish,
            )
            if self.options.publish:
                tx.publish(record_id, pid_field=self.options.pid_field)
        else:
            assert record_id is not None
            if local.taken_over:
                tx.claim(record_id, harvester_id, write.identifier)
            if action is Action.RESTORE:
                tx.restore(record_id)
            elif action is Action.REVIVE:
                tx.revive(record_id)
            redrafted = (
                self._redrafted_by_this_run(tx, local, write) if action is Action.UPDATE else None
            )
            revision = self._update(tx, record_id, data, pid)
            tx.add_to_communities(record_id, community_ids)
            if action is Action.PUBLISH_DRAFT and _drafted_by_this_run(tx.record(record_id), write):
                action = Action.CREATE
            action = redrafted or action
            return WriteOutcome(write.identifier, action, record_id, revision)
        tx.add_to_communities(record_id, community_ids)
        return WriteOutcome(write.identifier, action, record_id, tx.record(record_id).revision)

    def _as_harvested(self, tx: TargetTransaction, local: LocalRecord) -> sa.Row | None:
        """The record, when it is published by this writer with nobody's edit on it (no
        takeover, no edit draft): one read for the checks below, None otherwise."""
        if local.local_id is None or local.taken_over or local.has_edit_draft:
            return None
        if local.state is not LocalState.LIVE or not self.options.publish:
            return None
        return tx.record(local.local_id)

    @staticmethod
    def _written_by_this_run(record: sa.Row, data: dict[str, Any], write: PlannedWrite) -> bool:
        """Published with exactly this data since the run started."""
        if write.run_started is None:
            return False
        return as_utc(record.updated) >= write.run_started and record.data == data

    def _holds_already(self, record: sa.Row, data: dict[str, Any], write: PlannedWrite) -> bool:
        """The published record holds exactly this data and its pid: a new revision would be
        a copy of the last. A source that bumps datestamps without changing the records (a
        repository reindexed) or another transform chain that makes the same data (an
        upgrade) leaves the record as it is (`nothing`), and the harvest record remembers it
        as written. `update_all` rewrites regardless."""
        if write.reason == UPDATE_ALL_REASON:
            return False
        return record.data == data and record.doi == pid_of(data, self.options.pid_field)

    @staticmethod
    def _done_by_this_run(record: sa.Row, local: LocalRecord, write: PlannedWrite) -> Action | None:
        """What an earlier attempt of this run did to a record it left as the source reports
        it, when the record tells: created it (since the run started, never changed since),
        or tombstoned it as deleted at the source. Without this a resumed run reported the
        records a killed attempt created as updated and those it deleted as unchanged."""
        if write.run_started is None or local.taken_over:
            return None
        if as_utc(record.updated) < write.run_started:
            return None
        created = as_utc(record.created) >= write.run_started
        if local.state is LocalState.LIVE and record.revision == 1 and created:
            return Action.CREATE
        if (
            local.state is LocalState.TOMBSTONE
            and record.tombstone_note == DELETED_AT_SOURCE_NOTE
            and not local.has_edit_draft
        ):
            return Action.DELETE
        return None

    @staticmethod
    def _brought_back_by_this_run(
        tx: TargetTransaction, record_id: str, write: PlannedWrite
    ) -> Action | None:
        """A record a user deleted that an earlier attempt of this run restored (a tombstone
        before the run) or revived (hard deleted) and crashed before its outcome was saved:
        what that attempt did, as the uninterrupted run reports it (not `update`)."""
        if write.run_started is None:
            return None
        before = tx.state_before(record_id, write.run_started)
        return {TOMBSTONE: Action.RESTORE, DELETED: Action.REVIVE}.get(before or "")

    def _redrafted_by_this_run(
        self, tx: TargetTransaction, local: LocalRecord, write: PlannedWrite
    ) -> Action | None:
        """`publish: false`: a published record given exactly this harvested edit draft by
        an earlier attempt of this run that crashed before its outcome was saved (a draft
        makes no revision: the draft's time tells it): what that attempt did when it
        restored or revived it. Asked before the write (which saves the draft anew); other
        data is a later listing of the same run (an update), as `_written_by_this_run`."""
        if self.options.publish or local.local_id is None or local.state is not LocalState.LIVE:
            return None
        if write.run_started is None or local.draft_saved is None:
            return None
        if local.draft_saved < write.run_started:
            return None
        draft = tx.draft(local.local_id)
        if draft is None or draft.data != write.data:
            return None
        return self._brought_back_by_this_run(tx, local.local_id, write)

    def _update(
        self, tx: TargetTransaction, record_id: str, data: dict[str, Any], pid: str | None
    ) -> int:
        """Overwrite the record with the harvested data (a local edit draft is overwritten).
        Returns the record's revision now."""
        row = tx.record(record_id)
        published = row.state == "live"
        if published and self.options.publish:
            # An edit draft published in the same transaction is one nobody can see: the
            # record goes straight to its new revision, the user's edit draft is removed, and
            # the DOI is the data's as `publish` takes it, with `direct_update` too (before,
            # that took the plan's: the option changed which pid the record held).
            doi = pid_of(data, self.options.pid_field)
            return tx.update_published(record_id, data, doi=doi, row=row)
        if published and not self.options.publish and row.data == data:
            # A reviewer published the harvested draft as it was: an edit draft of the same
            # data would only ask for the same review again. A user's edit draft goes. The
            # record holds the pid the draft would have named (not the one a former
            # `pid_field` read): no draft is left whose publishing would set it.
            tx.remove_edit_draft(record_id)
            if row.doi != pid:
                tx.hold_pid(record_id, pid)
            return row.revision
        tx.save_draft(record_id, data, doi=pid, harvested=not self.options.publish)
        if self.options.publish:
            return tx.publish(record_id, pid_field=self.options.pid_field)
        return row.revision

    def _delete(
        self, tx: TargetTransaction, write: PlannedWrite, local: LocalRecord, action: Action
    ) -> WriteOutcome:
        record_id = local.local_id
        if action is Action.DELETE:
            assert record_id is not None
            tx.remove_edit_draft(record_id)
            tx.tombstone(record_id, note=DELETED_AT_SOURCE_NOTE, purge=False)
        elif action is Action.DELETE_DRAFT:
            assert record_id is not None
            tx.discard(record_id)
            return WriteOutcome(write.identifier, action, None, None)
        elif record_id is not None:  # NOTHING: already deleted; a left-over edit draft goes
            record = tx.record(record_id)
            # Unless a re-identified record took the tombstone over earlier in the batch: the
            # draft is then the new identifier's harvest (`publish: false`), which this
            # removed before.
            if record.source_identifier == write.identifier:
                tx.remove_edit_draft(record_id)
            # Deleted by an earlier attempt of this run that crashed before its outcome was
            # saved: the deletion is this run's.
            action = self._done_by_this_run(record, local, write) or action
            return WriteOutcome(write.identifier, action, record_id, record.revision)
        if record_id is None:
            if action is Action.NOTHING and _discarded_by_this_run(local, write):
                action = Action.DELETE_DRAFT
            return WriteOutcome(write.identifier, action, None, None)
        return WriteOutcome(write.identifier, action, record_id, tx.record(record_id).revision)

    def _communities(
        self,
        tx: TargetTransaction,
        harvester_id: str,
        write: PlannedWrite,
        data: dict[str, Any],
        find: Callable[[str], sa.Row | None] | None = None,
    ) -> tuple[list[str], RecordError | None]:
        """The writer's community, then the record's: ids, or the error of a missing one.
        `find`: a community by reference (default: the target's `community`)."""
        find = find or tx.community
        wanted: list[tuple[str, str]] = []
        if self.options.community:
            wanted.append((self.options.community, "community"))
        record_refs = write.communities or communities_of(data)
        wanted += [(ref, f"parent.communities.ids[{i}]") for i, ref in enumerate(record_refs)]
        ids: list[str] = []
        for reference, location in wanted:
            row = find(reference)
            if row is None:
                return [], RecordError(
                    type="missing_community",
                    message=missing_community(reference, harvester_id),
                    location=location,
                )
            ids.append(row.id)
        return ids, None


class _BatchCommunities:
    """A batch's communities, each reference and parent chain read once for all records."""

    def __init__(self, tx: TargetTransaction) -> None:
        self._tx = tx
        self._found: dict[str, sa.Row | None] = {}
        self._chains: dict[str, list[str]] = {}

    def find(self, reference: str) -> sa.Row | None:
        if reference not in self._found:
            self._found[reference] = self._tx.community(reference)
        return self._found[reference]

    def members(self, community_ids: list[str]) -> tuple[str, ...]:
        """The communities and their parents, in the order `add_to_communities` adds them."""
        ordered: dict[str, None] = {}
        for community_id in community_ids:
            if community_id not in self._chains:
                self._chains[community_id] = self._tx.with_parents(community_id)
            ordered.update(dict.fromkeys(self._chains[community_id]))
        return tuple(ordered)


def _drafted_by_this_run(record: sa.Row, write: PlannedWrite) -> bool:
    """A draft (never published) an earlier attempt of this run created and crashed before
    its outcome was saved: the run created it, as the uninterrupted run reports (before, a
    resumed run of a `publish: false` writer reported such records updated)."""
    return (
        record.state == DRAFT
        and write.run_started is not None
        and as_utc(record.created) >= write.run_started
    )


def _discarded_by_this_run(local: LocalRecord, write: PlannedWrite) -> bool:
    """A draft the plan would delete is no longer in the target: an earlier attempt of this
    run deleted it and crashed before its outcome was saved (`decide` tells by the harvest's
    memory; a user's deletion of a harvested draft keeps its row, `withdraw_draft`). Before,
    the resumed run reported it unchanged and kept its target id on the harvest record."""
    return write.action is Action.DELETE_DRAFT and local.state is LocalState.MISSING


def _doi_taken_up(change: RecordChange) -> str | None:
    """The DOI a batch write makes the record hold that it does not hold now: one it moves to
    (a source that began to register DOIs), a never-published draft's new one, or a
    hard-deleted record's own, which it gave up when deleted; or that a published record's
    edit draft names (`publish: false`), which a reviewer could not publish while another
    record holds it (`TargetTransaction._check_draft_pid`)."""
    if change.record.state == DELETED:
        return change.record.doi
    if change.draft_doi is not None and change.draft_doi != change.record.doi:
        return change.draft_doi
    return change.new_doi


def _without_held_dois(
    tx: TargetTransaction, batches: dict[str, dict[str, RecordChange]], *, drafts: bool = False
) -> None:
    """Leaves out of `batches` each record whose DOI to take up (`_doi_taken_up`) a record
    holds now (`drafts`: or another draft under review names), in one query: it goes one by
    one, which refuses or waits as `_apply_one` does."""
    wanted = {
        (kind, identifier): doi
        for kind, batch in batches.items()
        for identifier, change in batch.items()
        if (doi := _doi_taken_up(change))
    }
    held = tx.pid_holders(wanted.values(), claimed=drafts) if wanted else set()
    for kind, identifier in [key for key, doi in wanted.items() if doi in held]:
        del batches[kind][identifier]


def _named_once(named: Counter[str | None], pid: str | None) -> bool:
    """No other record of the batch names this pid (`named`: the batch's counts). A record
    without a pid names none: one taken over without a pid is one a deleted harvester
    released, found by its source identifier (a harvester deleted and created again, of an
    oai_dc source whose records have no DOI, took each of its records over alone)."""
    return pid is None or named[pid] == 1


def _data_json(write: PlannedWrite) -> str | None:
    """The record's data as the target stores it; None when it is not JSON (the one-by-one
    path reports that as the database does)."""
    try:
        return write.data_json or json_codec.dumps(write.data)
    except TypeError:
        return None


def _too_long(pid: str | None) -> bool:
    """A pid longer than the target keeps (the one-by-one path reports it)."""
    return pid is not None and len(pid) > MAX_DOI_LENGTH


def _rows_and_memberships(
    tx: TargetTransaction, candidates: dict[str, PlannedWrite], known: dict[str, LocalRecord]
) -> tuple[dict[str, sa.Row], dict[str, dict[str, bool]]]:
    """The target's rows of a batch's candidates and their memberships, read at once."""
    ids: list[str] = [known[identifier].local_id for identifier in candidates]  # type: ignore[misc]
    return tx.records_by_id(ids), tx.memberships_of(ids)


def missing_community(reference: str, harvester_id: str) -> str:
    """The record error of a community the target lacks, naming the fix: before, it said
    only that the community did not exist, and every record of the harvest failed so."""
    slug = reference if SLUG.match(reference) else "SLUG"
    return (
        f"community {reference!r} does not exist in the target: create it with "
        f"`oai-pipeline target communities create {slug}`, then harvest the failed records "
        f"again with `oai-pipeline harvest {harvester_id} --failed`"
    )


class _TryAgain(Exception):
    """Undoes an attempt of `_exchange_pids` in which a record failed."""


def _together(tx: TargetTransaction, write: Callable[[], list[T]]) -> list[T] | None:
    """`write` of many records at once, in a SAVEPOINT: what it returns, or None when the
    database refused it for a record's sake (an id clash, a value it refuses, a record
    another harvest took over meanwhile), so that each record goes one by one and fails
    alone; its own failure fails the batch (see `_batch_failure`)."""
    try:
        with tx.savepoint():
            return write()
    except DuplicatePidError:
        return None
    except sa.exc.SQLAlchemyError as error:
        if (refused := _batch_failure(error)) is not None:
            raise refused from None
        return None


def _batch_failure(error: Exception) -> BaseException | None:
    """The database's failure, not the record's, to be raised for the batch: its connection
    is gone (its server stopped or restarted), or it refused the write as full or read-only,
    the operator's to fix. Taken for the record's, every later record of the batch failed
    the same way: a lost connection ended the batch in a PendingRollbackError traceback;
    SQLite, which rolls the whole transaction back on a full disk, failed each later record
    with `no such savepoint` (the refusal is then that error's context), wrote one outside
    the batch's transaction, and the harvest succeeded with them all failed."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, sa.exc.DBAPIError) and (
            seen.connection_invalidated or refused_as_full(seen) or refused_as_read_only(seen)
        ):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _first_line(error: Exception) -> str:
    return str(getattr(error, "orig", None) or error).splitlines()[0]


def _failed(
    write: PlannedWrite, error_type: str, message: str, *, location: str | None = None
) -> WriteOutcome:
    return WriteOutcome(
        write.identifier,
        Action.ERROR,
        write.local_id,
        None,
        RecordError(type=error_type, message=message, location=location),
    )
