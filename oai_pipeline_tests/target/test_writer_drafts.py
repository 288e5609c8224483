"""A writer with `publish: false` writes its batches together, as a publishing one does: the
harvested drafts it creates, rewrites and discards, and the edit drafts it gives records a
reviewer published, end as the one-by-one path leaves them.

Before, each of its records went one by one (7.4 round trips a record on PostgreSQL, eight
times as long as a publishing writer behind 0.5 ms a round trip; twice as long on SQLite).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from oai_pipeline.settings import Settings
from oai_pipeline.sync.rules import Action
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline.targets.embedded.schema import (
    communities,
    drafts,
    memberships,
    records,
    revisions,
)
from oai_pipeline.targets.embedded.transaction import TargetTransaction
from oai_pipeline.targets.embedded.writer import EmbeddedWriter
from oai_pipeline_tests.target.test_writer import H, Harness, data, hold_doi_elsewhere

CHANGED = "2026-03-01T00:00:00Z"
DELETED = "2026-04-01T00:00:00Z"
BATCHES = ("_plain_creations", "_plain_drafts", "_plain_deletions")
BATCH_WRITES = ("create_many", "save_many_drafts", "discard_many", "tombstone_many")


def _first(repo: EmbeddedRepository) -> list[tuple[str, dict | None]]:
    """New records: plain ones (one in an existing community) among records that must go
    alone (a DOI repeated in the batch, one another harvester holds, a missing community,
    data that is not JSON)."""
    repo.create_community("top")
    repo.create_community("sub", parent="top")
    hold_doi_elsewhere(repo, "10.1/taken")
    return [
        ("oai:plain-1", data("Plain one", doi="10.1/p1")),
        ("oai:plain-2", data("Plain two")),
        ("oai:in-sub", data("In sub", communities=["sub"])),
        ("oai:same-a", data("Same A", doi="10.1/same")),
        ("oai:same-b", data("Same B", doi="10.1/same")),
        ("oai:taken", data("Taken", doi="10.1/taken")),
        ("oai:missing-community", data("Nowhere", communities=["nowhere"])),
        ("oai:not-json", {"metadata": {"title": {1, 2}}}),
        ("oai:plain-3", data("Plain three", doi="10.1/p3")),
        ("oai:to-join", data("Joins later")),
        ("oai:new-doi", data("New DOI later", doi="10.1/old")),
    ]


def _changed(repo: EmbeddedRepository, created: dict[str, str]) -> list[tuple[str, dict | None]]:
    """What the source says later: plain changes, one with its data as it was, one a user
    edited meanwhile, one joining a community, one with a new DOI, one deleted; and of two
    records a reviewer published meanwhile, one changed (its edit draft the harvest's), one
    as it was published (the edit draft a reviewer began since is removed)."""
    repo.edit(created["oai:plain-2"], {"metadata.title": "A reviewer's edit"})
    repo.publish(created["oai:plain-1"])
    repo.publish(created["oai:in-sub"])
    repo.edit(created["oai:in-sub"], {"metadata.title": "A reviewer's second thoughts"})
    return [
        ("oai:plain-1", data("Plain one, revised", doi="10.1/p1")),
        ("oai:plain-2", data("Plain two, revised")),
        ("oai:in-sub", data("In sub", communities=["sub"])),
        ("oai:same-a", data("Same A, revised", doi="10.1/same")),
        ("oai:plain-3", None),
        ("oai:to-join", data("Joins later", communities=["sub"])),
        ("oai:new-doi", data("New DOI later", doi="10.1/new")),
    ]


def _snapshot(repo: EmbeddedRepository) -> dict[str, Any]:
    """The target as a user sees it, by source identifier (record ids are random)."""
    source = records.c.source_identifier
    with repo.transaction(read_only=True) as tx:
        rows = tx.connection.execute(
            sa.select(source, records.c.state, records.c.doi, records.c.revision, records.c.data)
            .where(records.c.source_harvester == H)
            .order_by(source)
        ).all()
        held = tx.connection.execute(
            sa.select(source, drafts.c.kind, drafts.c.data, drafts.c.harvested, drafts.c.doi)
            .join(records, records.c.id == drafts.c.record_id)
            .order_by(source)
        ).all()
        joined = tx.connection.execute(
            sa.select(source, communities.c.slug, memberships.c.is_default, memberships.c.position)
            .join(records, records.c.id == memberships.c.record_id)
            .join(communities, communities.c.id == memberships.c.community_id)
            .order_by(source, memberships.c.position)
        ).all()
        revision_count = tx.connection.execute(
            sa.select(sa.func.count()).select_from(revisions)
        ).scalar()
    return {
        "records": [tuple(row) for row in rows],
        "drafts": [tuple(row) for row in held],
        "memberships": [tuple(row) for row in joined],
        "revisions": revision_count,
        "stats": repo.stats(H),
    }


def _harvests(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, *, together: bool
) -> tuple[list[Any], Counter[str]]:
    """Three harvests (new records, changes, every record deleted) into a fresh target: what
    each harvest did and the target after it; and how many records each batch write took."""
    batched: Counter[str] = Counter()
    count_writes(monkeypatch, batched, BATCH_WRITES, alone=False)
    if not together:
        for name in BATCHES:
            monkeypatch.setattr(EmbeddedWriter, name, lambda *_args: {})
    harness = Harness(settings, publish=False)
    seen: list[Any] = []
    try:
        with EmbeddedRepository(settings.target_db_url) as repo:
            first = _first(repo)
            outcomes = harness.harvest(first)
            created = {o.identifier: o.local_id for o in outcomes if o.local_id}
            seen.append((_summary(outcomes), _snapshot(repo)))
            outcomes = harness.harvest(_changed(repo, created), datestamp=CHANGED)
            seen.append((_summary(outcomes), _snapshot(repo)))
            gone = [(identifier, None) for identifier, _ in first]
            outcomes = harness.harvest(gone, datestamp=DELETED)
            seen.append((_summary(outcomes), _snapshot(repo)))
    finally:
        harness.writer.close()
        monkeypatch.undo()
    return seen, batched


def count_writes(
    monkeypatch: pytest.MonkeyPatch,
    seen: Counter[str],
    batch_writes: Iterable[str],
    *,
    alone: bool = True,
) -> None:
    """Counts in `seen` the records each of the transaction's `batch_writes` took (its last
    positional argument, and `kept`) and, with `alone`, each write of a record one by one."""
    for name in batch_writes:
        original = getattr(TargetTransaction, name)

        def spy(tx: TargetTransaction, *args: Any, _o=original, _n=name, **kw: Any) -> Any:
            seen[_n] += len(args[-1]) + len(kw.get("kept", ()))
            return _o(tx, *args, **kw)

        monkeypatch.setattr(TargetTransaction, name, spy)
    if not alone:
        return
    isolated = EmbeddedWriter._apply_isolated

    def one_by_one(
        writer: EmbeddedWriter, tx: Any, harvester_id: str, write: Any, *a: Any, **kw: Any
    ) -> Any:
        seen[f"alone {write.identifier}"] += 1
        return isolated(writer, tx, harvester_id, write, *a, **kw)

    monkeypatch.setattr(EmbeddedWriter, "_apply_isolated", one_by_one)


def create_communities(repo: EmbeddedRepository) -> None:
    """The scenarios' communities: `sub` (a writer's `community`) under `top`, and `x`."""
    for slug, parent in (("top", None), ("sub", "top"), ("x", None)):
        repo.create_community(slug, parent=parent)


@contextmanager
def writing(
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    *,
    together: bool,
    spied: Iterable[str],
    **options: Any,
) -> Iterator[tuple[Harness, EmbeddedRepository, Counter[str]]]:
    """A writer of these options and its target (with `create_communities`), for one
    scenario: with the batch paths (`together`), or with every record going one by one;
    `count_writes` of the `spied` batch writes and of each record written alone."""
    seen: Counter[str] = Counter()
    count_writes(monkeypatch, seen, spied)
    if not together:
        for batch in ("_plain_creations", "_plain_updates", "_plain_drafts", "_plain_deletions"):
            monkeypatch.setattr(EmbeddedWriter, batch, lambda *_args: {})
    harness = Harness(settings, **options)
    try:
        with EmbeddedRepository(settings.target_db_url) as repo:
            create_communities(repo)
            yield harness, repo, seen
    finally:
        harness.writer.close()
        monkeypatch.undo()


def both_ways(
    scenario: Callable[..., tuple[Any, ...]],
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    **kw: Any,
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The scenario written with the batch paths, then one by one into an emptied target."""
    together = scenario(settings, monkeypatch, together=True, **kw)
    _empty(settings)
    return together, scenario(settings, monkeypatch, together=False, **kw)


def harvested_as_reviewed(
    harness: Harness,
    repo: EmbeddedRepository,
    sources: list[tuple[str, dict | None]],
    *,
    publish: bool,
) -> dict[str, str]:
    """A scenario's first harvest, each record published: by the writer, or (`publish:
    false`) by a reviewer who publishes each harvested draft. Returns the target ids."""
    ids = {o.identifier: o.local_id for o in harness.harvest(sources) if o.local_id is not None}
    for record_id in ids.values() if not publish else ():
        repo.publish(record_id)
    return ids


def review_drafts(repo: EmbeddedRepository, order: tuple[str, ...] = ()) -> None:
    """A reviewer publishes the drafts of the records of these source identifiers, in this
    order (none given: every draft, oldest record first)."""
    listed = repo.list(harvester=H)
    by_source = {r["source_identifier"]: r for r in listed}
    for record in [by_source[i] for i in order] if order else listed:
        if record["draft"] is not None:
            repo.publish(record["id"])


def as_one_by_one(
    scenario: Callable[..., tuple[Any, ...]],
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    **kw: Any,
) -> tuple[Any, ...]:
    """`both_ways`, holding the batch paths' outcomes and target to the one-by-one path's;
    returns the scenario's result with the batch paths."""
    together, one_by_one = both_ways(scenario, settings, monkeypatch, **kw)
    assert together[:2] == one_by_one[:2]
    return together


def last_harvest(
    harness: Harness,
    repo: EmbeddedRepository,
    seen: Counter[str],
    sources: list[tuple[str, dict | None]],
    **kw: Any,
) -> tuple[dict[str, tuple[Any, ...]], dict[str, Any], Counter[str]]:
    """A scenario's harvest under test: what it did to each record, the target after it, and
    the writes `seen` counted in it alone."""
    seen.clear()
    outcomes = harness.harvest(sources, **kw)
    return _summary(outcomes), _snapshot(repo), seen


def _summary(outcomes: list) -> dict[str, tuple[Any, ...]]:
    return {
        o.identifier: (o.action, o.revision, o.error and (o.error.type, o.error.location))
        for o in outcomes
    }


def _empty(settings: Settings) -> None:
    with EmbeddedRepository(settings.target_db_url) as repo, repo.transaction() as tx:
        for table in (memberships, drafts, revisions, records, communities):
            tx.connection.execute(sa.delete(table))


def test_drafts_written_together_end_as_one_by_one(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    together, batched = _harvests(target_settings, monkeypatch, together=True)
    _empty(target_settings)
    one_by_one, unbatched = _harvests(target_settings, monkeypatch, together=False)

    assert together == one_by_one
    assert not unbatched
    # Every plain record went in a batch: created (plain-1..3, in-sub, to-join, new-doi),
    # drafts written (plain-1's edit draft, plain-2 with its reviewer's edit, same-a, to-join
    # joining its community, new-doi taking up its free new DOI; in-sub, published as
    # harvested, keeps none), discarded (plain-3 in the second harvest; then the four drafts
    # left), tombstoned (the two published).
    assert batched == {
        "create_many": 6,
        "save_many_drafts": 6,
        "discard_many": 5,
        "tombstone_many": 2,
    }
    (created, _), (changed, after_changes), (deleted, at_end) = together
    assert {i: a for i, (a, _, _) in created.items() if a is not Action.CREATE} == {
        "oai:same-b": Action.ERROR,
        "oai:taken": Action.ERROR,
        "oai:missing-community": Action.ERROR,
        "oai:not-json": Action.ERROR,
    }
    assert {i: a for i, (a, _, _) in changed.items()} == {
        **dict.fromkeys(
            ["oai:plain-2", "oai:same-a", "oai:to-join", "oai:new-doi"], Action.PUBLISH_DRAFT
        ),
        "oai:plain-1": Action.UPDATE,
        "oai:in-sub": Action.UPDATE,
        "oai:plain-3": Action.DELETE_DRAFT,
    }
    drafts_now = {row[0]: row for row in after_changes["drafts"]}
    assert drafts_now["oai:plain-2"][2] == data("Plain two, revised")
    assert drafts_now["oai:plain-2"][3] is True  # the harvest's draft again, not the edit
    assert drafts_now["oai:new-doi"][4] == "10.1/new"
    assert ("oai:to-join", "sub", True, 0) in after_changes["memberships"]
    assert drafts_now["oai:plain-1"][1:4] == ("edit", data("Plain one, revised", "10.1/p1"), True)
    assert "oai:in-sub" not in drafts_now  # published as the source has it
    states = {row[0]: row[1] for row in after_changes["records"]}
    assert (states["oai:plain-1"], states["oai:in-sub"], states["oai:plain-2"]) == (
        "live",
        "live",
        "draft",
    )
    assert {i for i, (a, _, _) in deleted.items() if a is Action.DELETE} == {
        "oai:plain-1",
        "oai:in-sub",
    }
    assert [row[:2] for row in at_end["records"]] == [
        ("oai:in-sub", "tombstone"),
        ("oai:plain-1", "tombstone"),
    ]
    assert at_end["drafts"] == []


def test_a_batch_of_drafts_the_database_refuses_goes_one_by_one(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused together (a database error of one row fails the statement), each record is
    written alone in its savepoint, and the harvest ends the same."""
    expected, _ = _harvests(target_settings, monkeypatch, together=False)
    _empty(target_settings)
    refusals: Counter[str] = Counter()
    for name in BATCH_WRITES:

        def refuse(_tx: TargetTransaction, many: list, *_a: Any, _n=name, **_kw: Any) -> list:
            refusals[_n] += 1
            raise sa.exc.IntegrityError("INSERT …", {}, Exception("refused"))

        monkeypatch.setattr(TargetTransaction, name, refuse)
    # `_harvests` spies on the refusing methods and keeps them (its undo comes after).
    got, _ = _harvests(target_settings, monkeypatch, together=True)
    assert got == expected
    assert refusals == {
        "create_many": 1,
        "save_many_drafts": 1,
        "discard_many": 2,
        "tombstone_many": 1,
    }
