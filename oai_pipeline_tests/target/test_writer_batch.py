"""Plain creations are inserted together; the result must be what one-by-one writing gives."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from oai_pipeline.settings import Settings
from oai_pipeline.sync.rules import Action
from oai_pipeline.targets.embedded import transaction
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline.targets.embedded.schema import records, revisions
from oai_pipeline.targets.embedded.writer import EmbeddedWriter
from oai_pipeline_tests.target.test_writer import H, Harness, data, hold_doi_elsewhere


def _mixed_batch() -> list[tuple[str, dict | None]]:
    """Plain creations among records that must not be created together."""
    return [
        ("oai:plain-1", data("Plain one", doi="10.1/p1")),
        ("oai:same-doi-a", data("Same DOI A", doi="10.1/same")),
        ("oai:plain-2", data("Plain two")),
        ("oai:same-doi-b", data("Same DOI B", doi="10.1/same")),  # repeated in the batch
        ("oai:taken", data("Taken", doi="10.1/taken")),  # another harvester holds it
        ("oai:user", data("Takes over", doi="10.1/user")),  # a user's deposit: takeover
        ("oai:community", data("In a community", communities=["missing"])),
        ("oai:not-json", {"metadata": {"title": {1, 2}}}),
        ("oai:deleted", None),
        ("oai:plain-3", data("Plain three", doi="10.1/p3")),
    ]


def _seed(repo: EmbeddedRepository) -> None:
    hold_doi_elsewhere(repo, "10.1/taken")
    repo.deposit(data("User's", doi="10.1/user"), publish=True)


def _target_state(repo: EmbeddedRepository) -> list[tuple[Any, ...]]:
    with repo.transaction(read_only=True) as tx:
        rows = tx.connection.execute(
            sa.select(records.c.source_identifier, records.c.state, records.c.doi)
            .add_columns(records.c.revision, records.c.data)
            .order_by(records.c.source_identifier, records.c.doi)
        ).all()
        revision_count = tx.connection.execute(
            sa.select(sa.func.count()).select_from(revisions)
        ).scalar()
    return [tuple(row) for row in rows] + [("revisions", revision_count)]


def _harvest(settings: Settings, monkeypatch: pytest.MonkeyPatch, *, together: bool):
    if not together:
        monkeypatch.setattr(EmbeddedWriter, "_plain_creations", lambda *_args: {})
    harness = Harness(settings)
    try:
        with EmbeddedRepository(settings.target_db_url) as repo:
            _seed(repo)
            outcomes = harness.harvest(_mixed_batch())
            state = _target_state(repo)
    finally:
        harness.writer.close()
        monkeypatch.undo()
    summary = [
        (o.identifier, o.action, o.revision, o.error and (o.error.type, o.error.location))
        for o in outcomes
    ]
    return summary, state


def test_creations_together_end_as_one_by_one(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    together = _harvest(target_settings, monkeypatch, together=True)
    with EmbeddedRepository(target_settings.target_db_url) as repo, repo.transaction() as tx:
        for table in (revisions, records):
            tx.connection.execute(sa.delete(table))
    one_by_one = _harvest(target_settings, monkeypatch, together=False)
    assert together == one_by_one
    outcomes = {identifier: (action, error) for identifier, action, _, error in together[0]}
    assert outcomes["oai:same-doi-b"] == (Action.ERROR, ("duplicate_pid", "pids.doi"))
    assert outcomes["oai:taken"] == (Action.ERROR, ("duplicate_pid", "pids.doi"))
    assert outcomes["oai:user"][0] is Action.UPDATE
    assert outcomes["oai:community"] == (
        Action.ERROR,
        ("missing_community", "parent.communities.ids[0]"),
    )
    assert outcomes["oai:not-json"][1][0] == "write_failed"


def test_plain_creations_skip_the_one_by_one_path(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    one_by_one: list[str] = []
    original = EmbeddedWriter._apply_isolated

    def counting(self, tx, harvester_id, write, known):  # type: ignore[no-untyped-def]
        one_by_one.append(write.identifier)
        return original(self, tx, harvester_id, write, known)

    monkeypatch.setattr(EmbeddedWriter, "_apply_isolated", counting)
    harness = Harness(target_settings)
    with EmbeddedRepository(target_settings.target_db_url) as repo:
        _seed(repo)
        harness.harvest([(i, d) for i, d in _mixed_batch() if i != "oai:not-json"])
    harness.writer.close()
    # the user's deposit is taken over with the batch's updates (test_writer_takeovers.py)
    assert not {"oai:plain-1", "oai:plain-2", "oai:plain-3", "oai:user"} & set(one_by_one)
    assert {"oai:same-doi-a", "oai:same-doi-b", "oai:taken"} <= set(one_by_one)


def test_an_id_clash_sends_the_creations_one_by_one(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = Harness(target_settings)
    with EmbeddedRepository(target_settings.target_db_url) as repo:
        existing = repo.deposit(data("User's"), publish=True)
        fresh = iter([existing] + [f"fresh-{n:04d}" for n in range(10)])
        monkeypatch.setattr(transaction, "new_record_id", lambda: next(fresh))
        outcomes = harness.harvest([("oai:1", data("One")), ("oai:2", data("Two"))])
        assert [o.action for o in outcomes] == [Action.CREATE, Action.CREATE]
        assert sorted(r["title"] for r in repo.list(harvester=H)) == ["One", "Two"]
    harness.writer.close()


def test_record_ids_look_like_invenio_ids() -> None:
    ids = {transaction.new_record_id() for _ in range(2000)}
    assert len(ids) == 2000
    for record_id in ids:
        head, tail = record_id.split("-")
        assert len(head) == len(tail) == 5
        assert set(head + tail) <= set(transaction._ID_ALPHABET)
