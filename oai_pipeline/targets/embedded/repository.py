"""The embedded target repository: what its users do, and what the harvest looks up.

Operators and tests act as repository users through this API (the `target` CLI wraps it):
deposit, edit, publish, delete, hard-delete, restore, communities. The harvest writer
changes records through the same steps (`TargetTransaction`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from oai_pipeline.doi import MAX_DOI_LENGTH
from oai_pipeline.errors import (
    InvalidArgument,
    NotFound,
    PipelineError,
    cannot_open_text,
)
from oai_pipeline.harvesters.model import check_slug
from oai_pipeline.schema_guard import refuse_writes_after_a_migration
from oai_pipeline.sqlite_tuning import unwritable_sqlite_file
from oai_pipeline.sync.rules import LocalRecord
from oai_pipeline.targets.base import DEFAULT_PID_FIELD, SourceKey, pid_of
from oai_pipeline.targets.embedded.engine import READ_ONLY, create_target_engine
from oai_pipeline.targets.embedded.schema import (
    check_version,
    communities,
    counts,
    drafts,
    migrate,
    records,
    refuse_if_changed,
)
from oai_pipeline.targets.embedded.transaction import (
    LIVE,
    STATES,
    TargetTransaction,
    as_utc,
    communities_of,
)


def _iso_utc(stamp: datetime) -> str:
    """ISO 8601 in UTC with `Z`, the form of the state store's times (`records show`)."""
    return as_utc(stamp).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Set a dotted field path (`metadata.title`, `metadata.creators.0.name`) in place."""
    parts = path.split(".")
    if not path or any(not part for part in parts):
        raise InvalidArgument(f"{path!r} is not a field path like metadata.title")
    container: Any = data
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        where = ".".join(parts[: depth + 1])
        if isinstance(container, list):
            if not part.isdigit() or int(part) >= len(container):
                raise PipelineError(f"cannot set {path}: {where} is not an item of the list")
            if last:
                container[int(part)] = value
            else:
                container = container[int(part)]
        elif isinstance(container, dict):
            if last:
                container[part] = value
            else:
                container = container.setdefault(part, {})
        else:
            raise PipelineError(f"cannot set {path}: {'.'.join(parts[:depth])} is not an object")


class EmbeddedRepository:
    """A little but real repository in SQL: SQLite by default, PostgreSQL in production."""

    def __init__(self, url: str, *, only_reads: bool = False) -> None:
        """`only_reads`: opened by a command that only reads (status, the listings). On a
        SQLite file this process cannot write (a read-only home) it is then opened read-only,
        without the schema upgrade; the writing methods fail with the line saying the file
        is not writable."""
        self.url = url
        # Whether records released by a deleted harvester exist (`release`), asked at the
        # first transaction: a harvester deleted while a stage runs is seen by the next one.
        self._released: bool | None = None
        read_only_file = unwritable_sqlite_file(url) if only_reads else None
        self.read_only = read_only_file is not None
        self.engine = create_target_engine(url, read_only_file=read_only_file)
        try:
            if self.read_only:
                check_version(self.engine)
            else:
                migrate(self.engine)
        except sa.exc.DatabaseError as error:  # also a file that is no database (garbage)
            self.engine.dispose()
            # which database, as the state store's error says
            raise PipelineError(cannot_open_text("target", url, error)) from None
        if not self.read_only:
            refuse_writes_after_a_migration(self.engine, refuse_if_changed, READ_ONLY)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> EmbeddedRepository:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self, *, read_only: bool = False) -> Iterator[TargetTransaction]:
        """One database transaction: committed when the block ends, rolled back on error.

        A read-only one does not wait for a writer on SQLite (a write one takes the lock first).
        """
        with self.engine.connect() as connection:
            if read_only:
                connection.execution_options(**{READ_ONLY: True})
            with connection.begin():
                tx = TargetTransaction(connection)
                if self._released is None:  # asked once in the repository's life
                    self._released = tx.any_released()
                tx.released = self._released
                yield tx

    # -- what repository users do ----------------------------------------------------------

    def deposit(self, data: dict[str, Any], *, publish: bool = False) -> str:
        """A new record from the data (a draft unless `publish`); returns its id."""
        if not isinstance(data, dict):
            raise InvalidArgument("a record must be a JSON object")
        with self.transaction() as tx:
            community_ids = self._resolve(tx, communities_of(data))
            record_id = tx.create(data, doi=_storable_doi(pid_of(data)))
            if publish:
                tx.publish(record_id)
            tx.add_to_communities(record_id, community_ids)
        return record_id

    def edit(self, record_id: str, changes: dict[str, Any]) -> None:
        """Change fields (dotted paths) in the record's draft, creating an edit draft if needed."""
        with self.transaction() as tx:
            row = tx.record(record_id)
            draft = tx.draft(record_id)
            if draft is not None:
                data = copy.deepcopy(draft.data)
            elif row.state == LIVE:
                data = copy.deepcopy(row.data)
            else:
                raise PipelineError(f"record {record_id} is {row.state}: restore it before editing")
            for path, value in changes.items():
                set_path(data, path, value)
            # A harvested record's pid is its harvest's (the writer's `pid_field` may be
            # another than `pids.doi`); the next harvest sets it anyway.
            harvested = row.source_harvester is not None
            if harvested:
                pid = draft.doi if draft is not None else row.doi
            else:
                pid = _storable_doi(pid_of(data))
            tx.save_draft(record_id, data, doi=pid)
            tx.mark_changed_locally(record_id)

    def publish(self, record_id: str) -> None:
        with self.transaction() as tx:
            draft = tx.draft(record_id)
            tx.publish(record_id)
            # Publishing a draft the harvest left for review (publish: false) accepts it.
            if draft is None or not draft.harvested:
                tx.mark_changed_locally(record_id)

    def delete(self, record_id: str, *, purge: bool = False, note: str | None = None) -> None:
        """A published record becomes a tombstone (`purge`: also marked for purge).

        A draft that was never published is simply discarded.
        """
        with self.transaction() as tx:
            row = tx.record(record_id)
            if row.state == "draft":
                self._discard(tx, row)
            else:
                tx.tombstone(record_id, note=note, purge=purge)
                tx.mark_changed_locally(record_id)

    def hard_delete(self, record_id: str) -> None:
        with self.transaction() as tx:
            row = tx.record(record_id)
            if row.state == "draft":
                self._discard(tx, row)
                return
            tx.hard_delete(record_id)
            tx.mark_changed_locally(record_id)

    @staticmethod
    def _discard(tx: TargetTransaction, row: sa.Row) -> None:
        """A never-published record is discarded; a harvested one (a draft the harvest left
        for review) is withdrawn, so that the next harvest brings it back."""
        if row.source_harvester is None:
            tx.discard(row.id)
            return
        tx.withdraw_draft(row.id)
        tx.mark_changed_locally(row.id)

    def restore(self, record_id: str) -> None:
        """A tombstone is published again; a hard-deleted one revived from its last revision."""
        with self.transaction() as tx:
            tx.restore(record_id)
            tx.mark_changed_locally(record_id)

    def show(self, record_id: str) -> dict[str, Any]:
        with self.transaction(read_only=True) as tx:
            row = tx.record(record_id)
            draft = tx.draft(record_id)
            members = tx.record_communities(record_id)
        default = next((m.slug for m in members if m.is_default), None)
        return {
            "id": row.id,
            "state": row.state,
            "data": row.data,
            "draft": draft.data if draft is not None else None,
            "draft_kind": draft.kind if draft is not None else None,
            "revision": row.revision,
            "doi": row.doi,
            "communities": [m.slug for m in members],
            "default_community": default,
            "tombstone_note": row.tombstone_note,
            "purge": bool(row.purge),
            "source_harvester": row.source_harvester,
            "source_identifier": row.source_identifier,
            # UTC with its zone, as every time the CLI prints (SQLite returns them naive)
            "created": _iso_utc(row.created),
            "updated": _iso_utc(row.updated),
        }

    def list(
        self, *, harvester: str | None = None, state: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Records, oldest first, at most `limit` of them (None: all); `state` is one of live,
        draft, tombstone, deleted. The limit is the query's: a target of a million records
        is not read whole (2 GB of rows) to show a page of it."""
        if state is not None and state not in STATES:
            raise PipelineError(f"unknown state {state!r} (known: {', '.join(STATES)})")
        query = (
            sa.select(records, drafts.c.kind.label("draft_kind"))
            .outerjoin(drafts, drafts.c.record_id == records.c.id)
            .order_by(records.c.created, records.c.id)
        )
        if harvester is not None:
            query = query.where(records.c.source_harvester == harvester)
        if state is not None:
            query = query.where(records.c.state == state)
        if limit is not None:
            query = query.limit(limit)
        with self.transaction(read_only=True) as tx:
            rows = list(tx.connection.execute(query))
        return [
            {
                "id": row.id,
                "state": row.state,
                "revision": row.revision,
                "doi": row.doi,
                "title": _title(row.data),
                "draft": row.draft_kind,
                "source_harvester": row.source_harvester,
                "source_identifier": row.source_identifier,
            }
            for row in rows
        ]

    def create_community(self, slug: str, *, parent: str | None = None) -> dict[str, Any]:
        """A new community; its slug follows the harvester-id rule (it is named in writer
        options and comma-separated lists) and must fit its column."""
        slug = slug.strip()
        try:
            check_slug(slug, "community slug", max_length=communities.c.slug.type.length)
        except ValueError as error:
            raise InvalidArgument(str(error)) from None
        with self.transaction() as tx:
            row = tx.create_community(slug, parent=parent)
        return {"id": row.id, "slug": row.slug, "parent": row.parent_id}

    def list_communities(self) -> list[dict[str, Any]]:
        with self.transaction(read_only=True) as tx:
            rows = list(tx.connection.execute(sa.select(communities).order_by(communities.c.slug)))
        return [{"id": row.id, "slug": row.slug, "parent": row.parent_id} for row in rows]

    def stats(self, harvester_id: str | None = None) -> dict[str, int]:
        """How many records the target holds (not hard deleted), and distinct source ids.

        Read from the counts the database keeps as records are written (`target_counts`),
        not counted from the records: a harvester of a million records took 0.2 s of each
        `status` and `written_records` materialisation, growing with the target."""
        query = sa.select(
            sa.func.coalesce(sa.func.sum(counts.c.records), 0),
            sa.func.coalesce(sa.func.sum(counts.c.source_identifiers), 0),
        )
        if harvester_id is not None:
            query = query.where(counts.c.source_harvester == harvester_id)
        with self.transaction(read_only=True) as tx:
            count, sources = tx.connection.execute(query).one()
        return {"records": int(count), "source_identifiers": int(sources)}

    # -- what the harvest needs ------------------------------------------------------------

    def lookup(self, harvester_id: str, keys: list[SourceKey]) -> dict[str, LocalRecord]:
        """The local record of each key (by OAI identifier): by source identifier, then by pid."""
        with self.transaction(read_only=True) as tx:
            return tx.local_records(harvester_id, [(key.identifier, key.pid) for key in keys])

    @staticmethod
    def _resolve(tx: TargetTransaction, references: list[str]) -> list[str]:
        ids = []
        for reference in references:
            row = tx.community(reference)
            if row is None:
                raise NotFound(f"community {reference!r} does not exist")
            ids.append(row.id)
        return ids


def _storable_doi(doi: str | None) -> str | None:
    """A user's DOI as the DOI column keeps it: PostgreSQL refuses a longer one and a NUL
    character (a traceback at the database; SQLite kept both). A harvested DOI is checked
    where its record is validated (rdm_record)."""
    if doi is not None and len(doi) > MAX_DOI_LENGTH:
        raise InvalidArgument(
            f"pids.doi: a DOI has at most {MAX_DOI_LENGTH} characters, not {len(doi)}"
        )
    if doi is not None and "\0" in doi:
        raise InvalidArgument(f"pids.doi: {doi!r} holds a NUL character")
    return doi


def _title(data: dict[str, Any] | None) -> str | None:
    title = ((data or {}).get("metadata") or {}).get("title")
    return title if isinstance(title, str) else None


__all__ = ["DEFAULT_PID_FIELD", "EmbeddedRepository", "set_path"]
