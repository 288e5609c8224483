"""The oai-service writer applying each action, on SQLite and PostgreSQL.

`harvest()` does what the pipeline does for one batch: look up, decide, apply; the
returned outcomes give the memory (`HarvestMemory`) the next harvest decides with.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import ValidationError

from oai_pipeline.errors import PipelineError, RecordError
from oai_pipeline.settings import Settings
from oai_pipeline.sync.rules import Action, HarvestMemory, SourceRecord, decide
from oai_pipeline.targets.base import PlannedWrite, SourceKey, WriteOutcome
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline.targets.embedded.schema import revisions
from oai_pipeline.targets.embedded.transaction import TargetTransaction
from oai_pipeline.targets.embedded.writer import DELETED_AT_SOURCE_NOTE, EmbeddedWriter

H = "zenodo"
DATESTAMP = "2026-01-02T00:00:00Z"


def _now() -> datetime:
    return datetime.now(UTC)


def data(title: str = "Harvested", doi: str | None = None, communities=None) -> dict[str, Any]:
    result: dict[str, Any] = {"metadata": {"title": title}}
    if doi:
        result["pids"] = {"doi": {"identifier": doi, "provider": "external"}}
    if communities is not None:
        result["parent"] = {"communities": {"ids": communities}}
    return result


class Harness:
    """A writer plus the harvest-record memory the state store would keep."""

    def __init__(self, settings: Settings, **options: Any) -> None:
        self.settings = settings
        self.writer = EmbeddedWriter(EmbeddedWriter.Options(**options), settings)
        self.memory: dict[str, HarvestMemory] = {}

    def reconfigure(self, **options: Any) -> None:
        self.writer.close()
        self.writer = EmbeddedWriter(EmbeddedWriter.Options(**options), self.settings)

    def plan(
        self,
        sources: list[tuple[str, dict | None]],
        *,
        datestamp: str = DATESTAMP,
        run_started: datetime | None = None,
    ) -> list[PlannedWrite]:
        """Each (identifier, data or None for deleted) decided against the target now."""
        records = [
            SourceRecord(
                i, datestamp, d is None, (d or {}).get("pids", {}).get("doi", {}).get("identifier")
            )
            for i, d in sources
        ]
        local = self.writer.lookup(H, [SourceKey(r.identifier, r.pid) for r in records])
        update_all = self.writer.options.update_all
        writes = []
        for source, (_, payload) in zip(records, sources, strict=True):
            decision = decide(
                source,
                self.memory.get(source.identifier),
                local[source.identifier],
                update_all=update_all,
                publishes=self.writer.options.publish,
            )
            writes.append(
                PlannedWrite(
                    identifier=source.identifier,
                    action=decision.action,
                    reason=decision.reason,
                    datestamp=datestamp,
                    data=payload,
                    pid=source.pid,
                    communities=[],
                    local_id=local[source.identifier].local_id,
                    run_started=run_started,
                )
            )
        return writes

    def apply(self, writes: list[PlannedWrite]) -> list[WriteOutcome]:
        to_write = [w for w in writes if w.action is not Action.SKIP]
        outcomes = self.writer.apply(H, to_write)
        for write, outcome in zip(to_write, outcomes, strict=True):
            self.memory[outcome.identifier] = HarvestMemory(
                write.datestamp, outcome.error is not None, outcome.local_id, outcome.revision
            )
        skipped = [
            WriteOutcome(w.identifier, Action.SKIP, w.local_id, None)
            for w in writes
            if w.action is Action.SKIP
        ]
        return outcomes + skipped

    def harvest(self, sources: list[tuple[str, dict | None]], **kw: Any) -> list[WriteOutcome]:
        return self.apply(self.plan(sources, **kw))

    def one(self, identifier: str, payload: dict | None, **kw: Any) -> WriteOutcome:
        (outcome,) = self.harvest([(identifier, payload)], **kw)
        return outcome


def hold_doi_elsewhere(repo: EmbeddedRepository, doi: str) -> None:
    """Another harvester's published record holds this DOI."""
    with repo.transaction() as tx:
        tx.publish(
            tx.create(data(doi=doi), doi=doi, harvester_id="other", source_identifier="oai:o")
        )


@pytest.fixture
def harness(target_settings: Settings) -> Iterator[Harness]:
    h = Harness(target_settings)
    yield h
    h.writer.close()


@pytest.fixture
def repo(target_settings: Settings) -> Iterator[EmbeddedRepository]:
    with EmbeddedRepository(target_settings.target_db_url) as repository:
        yield repository


def test_create_then_skip_when_nothing_changed(harness: Harness, repo: EmbeddedRepository) -> None:
    created = harness.one("oai:1", data(doi="10.1/a"))
    assert (created.action, created.revision, created.error) == (Action.CREATE, 1, None)
    shown = repo.show(created.local_id)
    assert (shown["state"], shown["source_harvester"], shown["source_identifier"]) == (
        "live",
        H,
        "oai:1",
    )
    assert shown["doi"] == "10.1/a"
    assert harness.one("oai:1", data(doi="10.1/a")).action is Action.SKIP
    changed = harness.one("oai:1", data("New title", doi="10.1/a"), datestamp="2026-02-01")
    assert (changed.action, changed.local_id, changed.revision) == (
        Action.UPDATE,
        created.local_id,
        2,
    )
    assert repo.show(created.local_id)["data"]["metadata"]["title"] == "New title"


def test_update_all_rewrites_unchanged_records(harness: Harness) -> None:
    harness.one("oai:1", data())
    harness.reconfigure(update_all=True)
    assert harness.one("oai:1", data()).action is Action.UPDATE


def test_live_over_a_local_edit_draft_overwrites_it(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    local_id = harness.one("oai:1", data()).local_id
    repo.edit(local_id, {"metadata.title": "Local edit"})
    outcome = harness.one("oai:1", data())
    assert outcome.action is Action.UPDATE
    shown = repo.show(local_id)
    assert (shown["draft"], shown["data"]["metadata"]["title"]) == (None, "Harvested")
    assert harness.one("oai:1", data()).action is Action.SKIP


def test_a_locally_published_edit_is_undone(harness: Harness, repo: EmbeddedRepository) -> None:
    local_id = harness.one("oai:1", data()).local_id
    repo.edit(local_id, {"metadata.title": "Local edit"})
    repo.publish(local_id)
    assert harness.one("oai:1", data()).action is Action.UPDATE
    assert repo.show(local_id)["data"]["metadata"]["title"] == "Harvested"


def test_live_over_a_draft_publishes_it(harness: Harness, repo: EmbeddedRepository) -> None:
    harness.reconfigure(publish=False)
    drafted = harness.one("oai:1", data("First"))
    assert (drafted.action, drafted.revision) == (Action.CREATE, 0)
    assert repo.show(drafted.local_id)["state"] == "draft"
    harness.reconfigure()
    outcome = harness.one("oai:1", data("Second"))
    assert (outcome.action, outcome.local_id, outcome.revision) == (
        Action.PUBLISH_DRAFT,
        drafted.local_id,
        1,
    )
    shown = repo.show(drafted.local_id)
    assert (shown["state"], shown["data"]["metadata"]["title"]) == ("live", "Second")


@pytest.mark.parametrize("purge", [False, True])
def test_live_over_a_tombstone_restores_and_updates(
    harness: Harness, repo: EmbeddedRepository, purge: bool
) -> None:
    local_id = harness.one("oai:1", data("Old")).local_id
    repo.delete(local_id, purge=purge, note="local")
    outcome = harness.one("oai:1", data("New"), datestamp="2026-03-01")
    assert (outcome.action, outcome.local_id) == (Action.RESTORE, local_id)
    shown = repo.show(local_id)
    assert (shown["state"], shown["purge"], shown["tombstone_note"]) == ("live", False, None)
    assert shown["data"]["metadata"]["title"] == "New"
    assert outcome.revision == shown["revision"]


def test_live_over_a_hard_deleted_record_revives_the_same_id(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    local_id = harness.one("oai:1", data("Old", doi="10.1/h")).local_id
    repo.hard_delete(local_id)
    outcome = harness.one("oai:1", data("New", doi="10.1/h"))
    assert (outcome.action, outcome.local_id) == (Action.REVIVE, local_id)
    shown = repo.show(local_id)
    assert (shown["state"], shown["data"]["metadata"]["title"]) == ("live", "New")
    assert len(repo.list()) == 1


@pytest.mark.parametrize("removal", ["hard_delete", "purge"])
def test_a_users_deposit_of_a_removed_records_doi_is_taken_over(
    harness: Harness, repo: EmbeddedRepository, removal: str
) -> None:
    removed = harness.one("oai:1", data("Old", doi="10.1/r")).local_id
    if removal == "hard_delete":
        repo.hard_delete(removed)
    else:
        repo.delete(removed, purge=True)
    # the DOI is free again, and a user deposits a record with it
    users = repo.deposit(data("User's", doi="10.1/r"), publish=True)

    outcome = harness.one("oai:1", data("New", doi="10.1/r"), datestamp="2026-05-01")

    # the harvest wins without a duplicate DOI: the user's record becomes the harvested one
    assert (outcome.action, outcome.local_id, outcome.error) == (Action.UPDATE, users, None)
    shown = repo.show(users)
    assert (shown["source_identifier"], shown["doi"]) == ("oai:1", "10.1/r")
    assert shown["data"]["metadata"]["title"] == "New"
    assert repo.show(removed)["source_identifier"] is None  # the removed one lets go
    assert [r["id"] for r in repo.list(harvester=H)] == [users]
    again = harness.one("oai:1", data("New", doi="10.1/r"), datestamp="2026-05-01")
    assert (again.action, again.local_id) == (Action.SKIP, users)


def test_deleted_over_live_makes_a_tombstone_and_drops_the_edit_draft(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    local_id = harness.one("oai:1", data()).local_id
    repo.edit(local_id, {"metadata.title": "Local edit"})
    outcome = harness.one("oai:1", None, datestamp="2026-04-01")
    assert (outcome.action, outcome.local_id) == (Action.DELETE, local_id)
    shown = repo.show(local_id)
    assert (shown["state"], shown["tombstone_note"], shown["draft"]) == (
        "tombstone",
        DELETED_AT_SOURCE_NOTE,
        None,
    )
    assert harness.one("oai:1", None, datestamp="2026-04-01").action is Action.SKIP
    repo.restore(local_id)  # restored locally: the harvest deletes it again
    assert harness.one("oai:1", None, datestamp="2026-04-01").action is Action.DELETE


def test_a_batch_of_deletions_ends_as_each_record_would_alone(
    harness: Harness, repo: EmbeddedRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records the source deleted are tombstoned together (some eight statements each
    before): the same tombstones, revisions and outcomes as one by one; refused together,
    they go one by one."""
    refused: list[int] = []
    tombstone_many = TargetTransaction.tombstone_many

    def refuse_once(tx: TargetTransaction, published: list, **kw: Any) -> list[int]:
        if not refused:
            refused.append(len(published))
            raise sa.exc.IntegrityError("UPDATE target_records …", {}, Exception("refused"))
        return tombstone_many(tx, published, **kw)

    monkeypatch.setattr(TargetTransaction, "tombstone_many", refuse_once)
    for attempt in ("refused", "together"):
        identifiers = [f"oai:{attempt}:{number}" for number in range(3)]
        created = harness.harvest([(i, data(f"Title {i}")) for i in identifiers])
        local_ids = [o.local_id for o in created]
        repo.edit(local_ids[0], {"metadata.title": "Local edit"})
        outcomes = harness.harvest([(i, None) for i in identifiers], datestamp="2026-04-01")
        assert [(o.action, o.local_id, o.revision) for o in outcomes] == [
            (Action.DELETE, local_id, 2) for local_id in local_ids
        ]
        for identifier, local_id in zip(identifiers, local_ids, strict=True):
            shown = repo.show(local_id)
            assert (shown["state"], shown["tombstone_note"], shown["purge"]) == (
                "tombstone",
                DELETED_AT_SOURCE_NOTE,
                False,
            )
            assert (shown["draft"], shown["data"]["metadata"]["title"]) == (
                None,
                f"Title {identifier}",
            )
    assert refused == [3]


def test_deleted_over_a_draft_deletes_the_draft(harness: Harness, repo: EmbeddedRepository) -> None:
    harness.reconfigure(publish=False)
    local_id = harness.one("oai:1", data()).local_id
    outcome = harness.one("oai:1", None)
    assert (outcome.action, outcome.local_id) == (Action.DELETE_DRAFT, None)
    assert repo.list() == []
    with pytest.raises(PipelineError, match=f"no record '{local_id}'"):
        repo.show(local_id)


def test_deleted_over_deleted_removes_a_left_over_edit_draft(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    local_id = harness.one("oai:1", data()).local_id
    repo.edit(local_id, {"metadata.title": "Left over"})
    repo.delete(local_id)
    assert repo.show(local_id)["draft"] is not None
    outcome = harness.one("oai:1", None)
    assert (outcome.action, outcome.local_id) == (Action.NOTHING, local_id)
    shown = repo.show(local_id)
    assert (shown["state"], shown["draft"]) == ("tombstone", None)
    never_seen = harness.one("oai:2", None)
    assert (never_seen.action, never_seen.local_id) == (Action.NOTHING, None)


def test_takeover_of_a_user_deposit_with_the_same_doi(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    users = repo.deposit(data("User's", doi="10.1/t"), publish=True)
    writes = harness.plan([("oai:1", data("Harvested", doi="10.1/t"))])
    assert (writes[0].action, writes[0].reason, writes[0].local_id) == (
        Action.UPDATE,
        "takeover",
        users,
    )
    (outcome,) = harness.apply(writes)
    assert (outcome.action, outcome.local_id) == (Action.UPDATE, users)
    shown = repo.show(users)
    assert (shown["source_harvester"], shown["source_identifier"]) == (H, "oai:1")
    assert shown["data"]["metadata"]["title"] == "Harvested"
    assert len(repo.list()) == 1
    assert harness.one("oai:1", data("Harvested", doi="10.1/t")).action is Action.SKIP


@pytest.mark.parametrize(("publish", "delete"), [(False, False), (True, True)])
def test_takeover_of_a_users_draft_or_tombstone(
    harness: Harness, repo: EmbeddedRepository, publish: bool, delete: bool
) -> None:
    users = repo.deposit(data("User's", doi="10.1/d"), publish=publish)
    if delete:
        repo.delete(users, note="withdrawn")
    outcome = harness.one("oai:1", data("Harvested", doi="10.1/d"))
    assert outcome.action is (Action.RESTORE if delete else Action.PUBLISH_DRAFT)
    assert outcome.local_id == users
    shown = repo.show(users)
    assert (shown["state"], shown["source_identifier"]) == ("live", "oai:1")
    assert shown["data"]["metadata"]["title"] == "Harvested"


def test_a_record_the_source_re_identified_takes_over_its_own_tombstone(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    """A repository migration: `oai:old:1` deleted, `oai:new:1` live with the same DOI."""
    first = harness.one("oai:old:1", data("Before", doi="10.1/m"))
    harness.harvest([("oai:old:1", None)])  # deleted at the source: a tombstone, DOI kept
    outcome = harness.one("oai:new:1", data("After", doi="10.1/m"))
    assert (outcome.action, outcome.local_id, outcome.error) == (
        Action.RESTORE,
        first.local_id,
        None,
    )
    shown = repo.show(first.local_id)
    assert (shown["state"], shown["source_identifier"]) == ("live", "oai:new:1")
    assert shown["data"]["metadata"]["title"] == "After" and len(repo.list()) == 1
    # the former identifier has no record any more: its deletion leaves the record live
    assert harness.one("oai:old:1", None).action in (Action.SKIP, Action.NOTHING)
    assert repo.show(first.local_id)["state"] == "live"


def test_a_record_a_user_hard_deleted_is_not_taken_by_a_new_identifier(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    """Hard deleted by a user, then deleted at the source: its DOI is given up, so a new
    identifier with it is a new record, and the user's deletion stays (the model-based
    test took it for re-identified, seed 5656)."""
    first = harness.one("oai:old:1", data("Before", doi="10.1/h"))
    repo.hard_delete(first.local_id)  # type: ignore[arg-type]
    deleted = harness.one("oai:old:1", None, datestamp="2026-03-01T00:00:00Z")
    assert deleted.action is Action.NOTHING
    outcome = harness.one(
        "oai:new:1", data("After", doi="10.1/h"), datestamp="2026-03-01T00:00:00Z"
    )
    assert outcome.action is Action.CREATE and outcome.local_id != first.local_id
    assert repo.show(first.local_id)["state"] == "deleted"  # type: ignore[arg-type]


def test_a_tombstone_a_user_made_is_not_taken_by_another_identifier(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    """Deleted locally, live at the source: it is still its own identifier's record."""
    first = harness.one("oai:a:1", data("A", doi="10.1/u"))
    repo.delete(first.local_id, note="by a user")
    outcome = harness.one("oai:b:1", data("B", doi="10.1/u"))
    assert outcome.error is not None and outcome.error.type == "duplicate_pid"
    assert repo.show(first.local_id)["source_identifier"] == "oai:a:1"


def test_two_harvesters_write_side_by_side(target_settings: Settings) -> None:
    def run(harvester: str) -> list[WriteOutcome]:
        writer = EmbeddedWriter(EmbeddedWriter.Options(), target_settings)
        try:
            outcomes = []
            for batch in range(10):
                writes = [
                    PlannedWrite(f"oai:{batch}:{i}", Action.CREATE, "new", DATESTAMP, data=data())
                    for i in range(5)
                ]
                outcomes += writer.apply(harvester, writes)
            return outcomes
        finally:
            writer.close()

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run, ["one", "two"]))
    assert [o.error for outcomes in results for o in outcomes] == [None] * 100
    with EmbeddedRepository(target_settings.target_db_url) as repository:
        assert repository.stats("one") == {"records": 50, "source_identifiers": 50}
        assert repository.stats("two") == {"records": 50, "source_identifiers": 50}


def test_two_harvesters_taking_over_one_deposit_at_once(target_settings: Settings) -> None:
    """The harvest that commits first owns the deposit; the other one's takeover is refused
    (on PostgreSQL it found the deposit unclaimed, then waited for the first one's lock)."""
    doi = "10.1234/shared"
    with EmbeddedRepository(target_settings.target_db_url) as repository:
        deposit = repository.deposit(data("mine", doi=doi), publish=True)
    first, second = (EmbeddedWriter(EmbeddedWriter.Options(), target_settings) for _ in range(2))

    def takeover(harvester: str) -> PlannedWrite:
        return PlannedWrite(
            f"oai:{harvester}:1",
            Action.UPDATE,
            "takeover",
            DATESTAMP,
            data(harvester, doi),
            doi,
            local_id=deposit,  # as planned: the deposit both found unclaimed
        )

    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            with first.repository.transaction() as tx:
                first._apply_isolated(tx, "one", takeover("one"), None)
                later = pool.submit(second.apply, "two", [takeover("two")])
                time.sleep(1)  # the second looks the deposit up and waits for the first
            [outcome] = later.result(timeout=60)
    finally:
        first.close()
        second.close()

    assert outcome.error is not None and outcome.error.type == "duplicate_pid"
    assert outcome.local_id is None  # not the record the other harvester owns
    with EmbeddedRepository(target_settings.target_db_url) as repository:
        record = repository.show(deposit)
        assert (record["source_harvester"], record["source_identifier"]) == ("one", "oai:one:1")
        assert record["data"]["metadata"]["title"] == "one"


@pytest.mark.parametrize("publish", [True, False])
def test_two_harvesters_creating_one_doi_at_once(target_settings: Settings, publish: bool) -> None:
    """The second waits for the first's uncommitted record (PostgreSQL) and is told whose
    record holds the DOI: duplicate_pid, as when they write one after the other."""
    doi = "10.1234/both"
    first, second = (
        EmbeddedWriter(EmbeddedWriter.Options(publish=publish), target_settings) for _ in range(2)
    )

    def create(harvester: str) -> PlannedWrite:
        return PlannedWrite(
            f"oai:{harvester}:1", Action.CREATE, "new", DATESTAMP, data(harvester, doi), doi
        )

    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            with first.repository.transaction() as tx:
                first._apply_isolated(tx, "one", create("one"), None)
                later = pool.submit(second.apply, "two", [create("two")])
                time.sleep(1)
            [outcome] = later.result(timeout=60)
    finally:
        first.close()
        second.close()

    assert outcome.error is not None
    assert (outcome.error.type, outcome.error.location) == ("duplicate_pid", "pids.doi")
    assert "harvested by one as oai:one:1" in outcome.error.message


def test_pid_field_names_where_the_pid_lives(harness: Harness, repo: EmbeddedRepository) -> None:
    harness.reconfigure(pid_field="metadata.identifier")
    users = repo.deposit(data("User's"), publish=True)
    with repo.transaction() as tx:  # the user's record holds the pid the harvest will bring
        from oai_pipeline.targets.embedded.schema import records

        tx.connection.execute(records.update().values(doi="hdl:1/2"))
    payload = {"metadata": {"title": "Harvested", "identifier": "hdl:1/2"}}
    write = PlannedWrite("oai:1", Action.CREATE, "new", DATESTAMP, data=payload)
    (outcome,) = harness.writer.apply(H, [write])  # the plan was stale: re-checked by pid
    assert (outcome.action, outcome.local_id) == (Action.UPDATE, users)
    assert repo.show(users)["doi"] == "hdl:1/2"
    other = harness.one("oai:2", {"metadata": {"title": "B", "identifier": "hdl:1/3"}})
    assert repo.show(other.local_id)["doi"] == "hdl:1/3"


@pytest.mark.parametrize("publish", [True, False])
def test_a_pid_at_pid_field_longer_than_the_target_keeps_is_that_records_error(
    harness: Harness, repo: EmbeddedRepository, publish: bool
) -> None:
    """The transform checks only the DOI it reads (pids.doi). Before, a longer value at
    another pid_field failed the write on PostgreSQL with the database's 'value too long
    for type character varying(512)', and SQLite wrote it."""
    harness.reconfigure(pid_field="metadata.identifier", publish=publish)
    sources = [
        (f"oai:{n}", {"metadata": {"title": "T", "identifier": identifier}})
        for n, identifier in enumerate(["hdl:1/" + "x" * 600, "hdl:1/2"])
    ]

    too_long, fine = harness.harvest(sources)

    assert (too_long.action, too_long.error) == (
        Action.ERROR,
        RecordError(
            type="invalid_pid",
            message="the pid has 606 characters, more than the 512 the target keeps",
            location="metadata.identifier",
        ),
    )
    assert fine.action is Action.CREATE and fine.error is None
    assert [row["source_identifier"] for row in repo.list(harvester=H)] == ["oai:1"]


@pytest.mark.parametrize("kind", ["new draft", "edit draft"])
def test_a_reviewer_publishing_a_harvested_draft_keeps_the_writers_pid(
    harness: Harness, repo: EmbeddedRepository, kind: str
) -> None:
    """publish: false with a pid_field other than pids.doi. Before, publishing the draft
    (or a user's edit of it) in the target made the record hold the DOI at pids.doi: the
    writer's pid was free for another record, and the harvest never set it back."""
    harness.reconfigure(pid_field="metadata.identifier", publish=False)
    payload = data("Harvested", doi="10.1/a")
    payload["metadata"]["identifier"] = "hdl:1/2"
    record_id = harness.one("oai:1", payload).local_id
    if kind == "edit draft":  # published once; the source then changes the record's pid
        repo.publish(record_id)
        payload = data("Changed", doi="10.1/a")
        payload["metadata"]["identifier"] = "hdl:1/3"
        harness.one("oai:1", payload)
    repo.edit(record_id, {"metadata.title": "Reviewed"})

    repo.publish(record_id)

    expected = "hdl:1/2" if kind == "new draft" else "hdl:1/3"
    assert repo.show(record_id)["doi"] == expected
    with repo.transaction(read_only=True) as tx:  # no other record can take it
        assert tx.pid_holder(expected) == record_id


def test_a_stale_create_after_a_crash_makes_no_duplicate(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    writes = harness.plan([("oai:1", data()), ("oai:2", data("Two"))], run_started=_now())
    first = harness.writer.apply(H, writes)  # written, but the harvest store never heard of it
    repo.edit(first[1].local_id, {"metadata.title": "Mine"})  # ... and a user edited one since
    again = harness.writer.apply(H, writes)
    # No duplicate; the untouched one gets no new revision, the edited one is overwritten.
    assert [o.local_id for o in again] == [o.local_id for o in first]
    assert [(o.action, o.revision) for o in again] == [(Action.CREATE, 1), (Action.UPDATE, 2)]
    assert len(repo.list()) == 2
    assert repo.show(first[1].local_id)["draft"] is None


def test_a_resumed_run_does_not_rewrite_what_its_crashed_attempt_wrote(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    harness.reconfigure(update_all=True)
    old = harness.one("oai:1", data("Old")).local_id
    harness.one("oai:2", data("Two"))
    started = _now()
    # The attempt rewrote both (update_all) and crashed before saving the outcomes: the
    # resumed run plans them again, as updates of records the store thinks are unchanged.
    crashed = harness.plan([("oai:1", data("New")), ("oai:2", data("Two"))], run_started=started)
    assert [o.revision for o in harness.writer.apply(H, crashed)] == [2, 2]
    again = harness.plan([("oai:1", data("New")), ("oai:2", data("Two"))], run_started=started)
    outcomes = harness.writer.apply(H, again)
    assert [(o.action, o.revision) for o in outcomes] == [(Action.UPDATE, 2), (Action.UPDATE, 2)]
    assert repo.show(old)["revision"] == 2
    # A later run (started after those writes) rewrites as update_all asks.
    later = harness.plan([("oai:1", data("New")), ("oai:2", data("Two"))], run_started=_now())
    assert [o.revision for o in harness.writer.apply(H, later)] == [3, 3]


def test_a_stale_plan_still_ends_in_the_source_state(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    local_id = harness.one("oai:1", data("Old")).local_id
    update = harness.plan([("oai:1", data("New"))], datestamp="2026-05-01")
    delete = harness.plan([("oai:1", None)], datestamp="2026-05-01")
    repo.delete(local_id)  # a user deleted it after the plan was made
    (outcome,) = harness.apply(update)
    assert (outcome.action, repo.show(local_id)["state"]) == (Action.RESTORE, "live")
    repo.hard_delete(local_id)
    (outcome,) = harness.apply(delete)  # planned DELETE; already gone: nothing to do
    assert (outcome.action, repo.show(local_id)["state"]) == (Action.NOTHING, "deleted")


def test_one_failing_record_does_not_lose_the_batch(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    hold_doi_elsewhere(repo, "10.1/taken")
    outcomes = harness.harvest(
        [
            ("oai:1", data("One")),
            ("oai:2", data("Two", doi="10.1/taken")),
            ("oai:3", {"metadata": {"title": {1, 2}}}),  # not JSON: the database refuses it
            ("oai:4", data("Four")),
        ]
    )
    by_id = {o.identifier: o for o in outcomes}
    assert by_id["oai:1"].action is Action.CREATE and by_id["oai:4"].action is Action.CREATE
    assert by_id["oai:2"].action is Action.ERROR
    assert (by_id["oai:2"].error.type, by_id["oai:2"].error.location) == (
        "duplicate_pid",
        "pids.doi",
    )
    assert by_id["oai:3"].error.type == "write_failed"
    assert by_id["oai:3"].local_id is None
    titles = sorted(r["title"] for r in repo.list(harvester=H))
    assert titles == ["Four", "One"]


def _updated_batch(harness: Harness, repo: EmbeddedRepository) -> dict[str, WriteOutcome]:
    """Five published records, then one batch of what the source says of them later: plain
    updates (one in its community already, one with a new DOI, one over a user's edit draft)
    and one whose data the target holds already."""
    repo.create_community("c")
    originals = [
        ("oai:1", data("One", doi="10.1/one")),
        ("oai:2", data("Two")),
        ("oai:3", data("Three", communities=["c"])),
        ("oai:4", data("Four", doi="10.1/four")),
        ("oai:5", data("Five", doi="10.1/five")),
    ]
    created = {o.identifier: o.local_id for o in harness.harvest(originals)}
    repo.edit(created["oai:2"], {"metadata.title": "Local edit"})
    outcomes = harness.harvest(
        [
            ("oai:1", data("One, revised", doi="10.1/one")),
            ("oai:2", data("Two, revised")),
            ("oai:3", data("Three, revised", communities=["c"])),
            ("oai:4", data("Four, revised", doi="10.1/four-b")),
            ("oai:5", data("Five", doi="10.1/five")),
        ],
        datestamp="2026-03-01T00:00:00Z",
    )
    by_id = {o.identifier: o for o in outcomes}
    assert {i: o.local_id for i, o in by_id.items()} == created
    return by_id


def _assert_written_as_each_alone(by_id: dict[str, WriteOutcome], repo: EmbeddedRepository) -> None:
    assert {i: (o.action, o.revision, o.error) for i, o in by_id.items()} == {
        "oai:1": (Action.UPDATE, 2, None),
        "oai:2": (Action.UPDATE, 2, None),
        "oai:3": (Action.UPDATE, 2, None),
        "oai:4": (Action.UPDATE, 2, None),
        "oai:5": (Action.NOTHING, 1, None),
    }
    shown = {i: repo.show(o.local_id) for i, o in by_id.items()}
    assert {
        i: (s["data"]["metadata"]["title"], s["doi"], s["revision"]) for i, s in shown.items()
    } == {
        "oai:1": ("One, revised", "10.1/one", 2),
        "oai:2": ("Two, revised", None, 2),
        "oai:3": ("Three, revised", None, 2),
        "oai:4": ("Four, revised", "10.1/four-b", 2),
        "oai:5": ("Five", "10.1/five", 1),
    }
    assert shown["oai:2"]["draft"] is None  # the user's edit draft was overwritten
    assert shown["oai:3"]["communities"] == ["c"]
    for identifier, record in shown.items():
        assert record["state"] == "live" and record["source_identifier"] == identifier
        with repo.transaction(read_only=True) as tx:
            made = tx.connection.execute(
                sa.select(revisions.c.revision, revisions.c.data)
                .where(revisions.c.record_id == record["id"])
                .order_by(revisions.c.revision)
            ).all()
        assert [r.revision for r in made] == list(range(1, record["revision"] + 1))
        assert made[-1].data == record["data"]


def test_a_batch_of_updates_ends_as_each_record_would_alone(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    """Updates of records published as harvested go to the target together (some eight
    statements each before, a round trip each on PostgreSQL across a network): the
    records, their revisions and outcomes are what the one-by-one path makes."""
    _assert_written_as_each_alone(_updated_batch(harness, repo), repo)


def test_a_batch_of_updates_the_database_refuses_goes_one_by_one(
    harness: Harness, repo: EmbeddedRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused together (a database error of one row fails the statement), the updates are
    written one by one, each in its savepoint, as the batch's creations are."""
    refusals = []

    def refuse(_tx: object, updates: list) -> list[int]:
        refusals.append(len(updates))
        raise sa.exc.IntegrityError("UPDATE target_records …", {}, Exception("refused"))

    monkeypatch.setattr(TargetTransaction, "update_many_published", refuse)
    _assert_written_as_each_alone(_updated_batch(harness, repo), repo)
    # oai:1, oai:2 (its user's edit draft dropped), oai:3 (in its community already) and
    # oai:4 (a free DOI); oai:5 needs no write
    assert refusals == [4]


def test_a_batch_of_new_records_in_communities_is_created_together(
    harness: Harness, repo: EmbeddedRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a writer's community, every record of a first harvest took the one-by-one path
    (four times as long on SQLite, some nine round trips each on PostgreSQL): records whose
    communities exist are created together, with the memberships the one-by-one path
    gives; a record naming a missing community still fails alone."""
    repo.create_community("top")
    repo.create_community("sub", parent="top")
    repo.create_community("x")
    harness.reconfigure(community="sub")
    batched: list[int] = []
    create_many = TargetTransaction.create_many

    def spy(tx: TargetTransaction, new_records: list, **kw: Any) -> list[str]:
        batched.append(len(new_records))
        return create_many(tx, new_records, **kw)

    monkeypatch.setattr(TargetTransaction, "create_many", spy)
    outcomes = harness.harvest(
        [
            ("oai:1", data("One")),
            ("oai:2", data("Two", communities=["x", "top"])),
            ("oai:3", data("Three", communities=["nowhere"])),
        ]
    )
    by_id = {o.identifier: o for o in outcomes}
    assert batched == [2]
    assert [by_id[i].action for i in ("oai:1", "oai:2", "oai:3")] == [
        Action.CREATE,
        Action.CREATE,
        Action.ERROR,
    ]
    assert by_id["oai:3"].error.type == "missing_community"
    one, two = (repo.show(by_id[i].local_id) for i in ("oai:1", "oai:2"))
    assert (one["communities"], one["default_community"]) == (["sub", "top"], "sub")
    assert (two["communities"], two["default_community"]) == (["sub", "top", "x"], "sub")
    assert (one["revision"], one["state"], two["revision"], two["state"]) == (1, "live", 1, "live")


MALFORMED_PARENTS = [
    {"parent": "cesnet"},
    {"parent": {"communities": ["cesnet"]}},
    {"parent": {"communities": {"ids": "cesnet"}}},
    {"parent": {"communities": {"ids": [{"slug": "cesnet"}]}}},
]


def test_a_malformed_parent_is_the_records_error(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    repo.create_community("cesnet")
    sources = [(f"oai:{n}", {**data(f"R{n}"), **bad}) for n, bad in enumerate(MALFORMED_PARENTS)]
    outcomes = harness.harvest([*sources, ("oai:ok", data("Fine"))])
    by_id = {o.identifier: o for o in outcomes}
    assert by_id.pop("oai:ok").action is Action.CREATE
    for outcome in by_id.values():
        assert (outcome.action, outcome.error.type) == (Action.ERROR, "write_failed")
        assert "parent" in outcome.error.message
    assert [r["title"] for r in repo.list(harvester=H)] == ["Fine"]


@pytest.mark.parametrize("bad", MALFORMED_PARENTS)
def test_a_deposit_with_a_malformed_parent_is_refused(
    repo: EmbeddedRepository, bad: dict[str, Any]
) -> None:
    repo.create_community("cesnet")
    with pytest.raises(PipelineError, match="parent"):
        repo.deposit({**data("Mine"), **bad}, publish=True)
    assert repo.list() == []


def test_a_live_record_without_data_is_an_error(harness: Harness) -> None:
    write = PlannedWrite("oai:1", Action.CREATE, "new", DATESTAMP, data=None)
    (outcome,) = harness.writer.apply(H, [write])
    assert (outcome.action, outcome.error.type) == (Action.ERROR, "no_data")


def test_planned_skip_and_error_write_nothing(harness: Harness, repo: EmbeddedRepository) -> None:
    created = harness.one("oai:1", data())
    skip = PlannedWrite("oai:1", Action.SKIP, "unchanged", DATESTAMP, data=data("Other"))
    error = PlannedWrite("oai:2", Action.ERROR, "transform failed", DATESTAMP, data=data())
    skipped, failed = harness.writer.apply(H, [skip, error])
    assert (skipped.action, skipped.local_id, skipped.revision, skipped.error) == (
        Action.SKIP,
        created.local_id,
        created.revision,
        None,
    )
    assert (failed.action, failed.error.type) == (Action.ERROR, "not_written")
    assert [r["title"] for r in repo.list()] == ["Harvested"]


def test_publish_false_leaves_drafts(harness: Harness, repo: EmbeddedRepository) -> None:
    local_id = harness.one("oai:1", data("Published")).local_id
    harness.reconfigure(publish=False)
    outcome = harness.one("oai:1", data("Proposed"), datestamp="2026-06-01")
    assert outcome.action is Action.UPDATE
    shown = repo.show(local_id)
    assert shown["data"]["metadata"]["title"] == "Published"
    assert (shown["draft_kind"], shown["draft"]["metadata"]["title"]) == ("edit", "Proposed")
    created = harness.one("oai:2", data("New"))
    assert repo.show(created.local_id)["state"] == "draft"


def test_publish_false_skips_its_own_untouched_drafts(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    published = harness.one("oai:1", data("Published")).local_id
    harness.reconfigure(publish=False)
    harness.one("oai:1", data("Proposed"), datestamp="2026-06-01")
    drafted = harness.one("oai:2", data("New"), datestamp="2026-06-01").local_id
    again = harness.harvest(
        [("oai:1", data("Proposed")), ("oai:2", data("New"))], datestamp="2026-06-01"
    )
    assert [o.action for o in again] == [Action.SKIP, Action.SKIP]
    # A user's edit of the proposed draft: the harvest wins again, the draft is its own.
    repo.edit(drafted, {"metadata.title": "Mine"})
    repo.edit(published, {"metadata.title": "Mine too"})
    again = harness.harvest(
        [("oai:1", data("Proposed")), ("oai:2", data("New"))], datestamp="2026-06-01"
    )
    assert [o.action for o in again] == [Action.UPDATE, Action.PUBLISH_DRAFT]
    assert repo.show(drafted)["draft"]["metadata"]["title"] == "New"
    assert repo.show(published)["draft"]["metadata"]["title"] == "Proposed"
    assert [
        o.action for o in harness.harvest([("oai:2", data("New"))], datestamp="2026-06-01")
    ] == [Action.SKIP]


def test_publish_false_asks_no_second_review_of_what_a_reviewer_published(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    harness.reconfigure(publish=False)
    drafted = harness.one("oai:1", data("New")).local_id
    repo.publish(drafted)  # the reviewer accepts the harvested draft as it is

    outcome = harness.one("oai:1", data("New"))

    assert outcome.action is Action.UPDATE  # the record changed since the harvest wrote it
    shown = repo.show(drafted)
    assert (shown["state"], shown["draft"], shown["revision"]) == ("live", None, 1)
    assert harness.one("oai:1", data("New")).action is Action.SKIP  # and then it is settled


def test_direct_update_changes_the_published_record_in_place(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    local_id = harness.one("oai:1", data("Old")).local_id
    repo.edit(local_id, {"metadata.title": "Local"})
    harness.reconfigure(direct_update=True)
    outcome = harness.one("oai:1", data("New"), datestamp="2026-06-01")
    assert (outcome.action, outcome.revision) == (Action.UPDATE, 2)
    shown = repo.show(local_id)
    assert (shown["data"]["metadata"]["title"], shown["draft"]) == ("New", None)


@pytest.mark.parametrize("direct_update", [False, True])
def test_direct_update_gives_the_record_the_pid_a_publish_gives_it(
    harness: Harness, repo: EmbeddedRepository, direct_update: bool
) -> None:
    """The transform named a pid its data no longer carries (a later transformer moved it).
    Before, direct_update made the record hold the transform's pid while a created or an
    edit-and-publish updated record held the data's: the option changed what the record
    holds, although a direct update and a published edit draft end the same."""
    harness.reconfigure(direct_update=direct_update)

    def write(title: str, datestamp: str) -> WriteOutcome:
        (outcome,) = harness.writer.apply(
            H,
            [PlannedWrite("oai:1", Action.UPDATE, "x", datestamp, data(title), pid="10.1/a")],
        )
        return outcome

    created = write("Old", DATESTAMP)
    assert repo.show(created.local_id)["doi"] is None  # as publishing the data gives it
    updated = write("New", "2026-06-01")
    assert (updated.action, updated.local_id) == (Action.UPDATE, created.local_id)
    assert repo.show(created.local_id)["doi"] is None


def test_communities_writer_and_record_slug_or_id_parents_and_default(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    repo.create_community("cesnet")
    child = repo.create_community("cesnet-data", parent="cesnet")
    repo.create_community("extra")
    harness.reconfigure(community="extra")
    outcome = harness.one("oai:1", data(communities=[child["id"]]))
    shown = repo.show(outcome.local_id)
    assert shown["communities"] == ["extra", "cesnet-data", "cesnet"]
    assert shown["default_community"] == "extra"


def test_communities_are_never_removed_and_the_default_is_kept(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    for slug in ("a", "b", "c"):
        repo.create_community(slug)
    local_id = harness.one("oai:1", data(communities=["a", "b"])).local_id
    outcome = harness.one("oai:1", data(communities=["c"]), datestamp="2026-07-01")
    assert outcome.error is None
    shown = repo.show(local_id)
    assert shown["communities"] == ["a", "b", "c"]
    assert shown["default_community"] == "a"


def test_the_first_community_becomes_default_of_a_users_record_without_one(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    repo.create_community("a")
    users = repo.deposit(data(doi="10.1/c"), publish=True)
    harness.one("oai:1", data(doi="10.1/c", communities=["a"]))
    assert repo.show(users)["default_community"] == "a"


def test_a_missing_community_means_the_record_is_not_written(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    repo.create_community("a")
    outcome = harness.one("oai:1", data(communities=["a", "missing"]))
    assert outcome.action is Action.ERROR
    assert (outcome.error.type, outcome.error.location) == (
        "missing_community",
        "parent.communities.ids[1]",
    )
    assert repo.list() == []
    planned = PlannedWrite(
        "oai:2", Action.CREATE, "new", DATESTAMP, data=data(), communities=["nope"]
    )
    (outcome,) = harness.writer.apply(H, [planned])
    assert (outcome.error.type, outcome.error.location) == (
        "missing_community",
        "parent.communities.ids[0]",
    )
    harness.reconfigure(community="nowhere")
    outcome = harness.one("oai:3", data())
    assert (outcome.error.type, outcome.error.location) == ("missing_community", "community")
    assert repo.list() == []
    repo.create_community("missing")  # once it exists, the failed record is written next time
    harness.reconfigure()
    assert harness.one("oai:1", data(communities=["a", "missing"])).action is Action.CREATE


def test_options_accept_only_the_rdm_model() -> None:
    assert EmbeddedWriter.Options(model="rdm").publish is True
    with pytest.raises(ValidationError):
        EmbeddedWriter.Options(model="other")
    with pytest.raises(ValidationError):
        EmbeddedWriter.Options(colour="red")


def test_released_records_are_taken_over_by_oai_identifiers_only(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    """After `harvesters delete --delete-records`: `oai:…` names its repository, a bare
    identifier could be another source's record of the same number."""
    named = harness.one("oai:src.org:1", data("Named")).local_id
    bare = harness.one("17", data("Bare")).local_id
    with repo.transaction() as tx:
        assert tx.release(H) == 2
    later = Harness(harness.settings)
    try:
        assert later.one("oai:src.org:1", data("Again")).local_id == named
        assert later.one("17", data("Another 17")).local_id not in (None, bare)
    finally:
        later.writer.close()


def test_publish_false_a_pid_the_source_changes_waits_for_review_with_the_data(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    """DESIGN.md: with publish: false the published version stays as a reviewer accepted
    it, its pid too, until the draft with the new one is published; then the old pid is
    free for another record."""
    harness.reconfigure(pid_field="metadata.identifier", publish=False)
    payload = data("First", doi="10.1/a")
    payload["metadata"]["identifier"] = "hdl:1/2"
    record_id = harness.one("oai:1", payload).local_id
    repo.publish(record_id)
    changed = data("First", doi="10.1/a")
    changed["metadata"]["identifier"] = "hdl:1/3"
    harness.one("oai:1", changed, datestamp="2026-06-01")
    shown = repo.show(record_id)
    assert (shown["doi"], shown["draft_kind"]) == ("hdl:1/2", "edit")
    assert shown["draft"]["metadata"]["identifier"] == "hdl:1/3"

    repo.publish(record_id)

    assert repo.show(record_id)["doi"] == "hdl:1/3"
    assert harness.one("oai:2", {"metadata": {"title": "B", "identifier": "hdl:1/2"}}).error is None


def test_publish_false_a_reviewed_record_gets_the_pid_of_a_new_pid_field(
    harness: Harness, repo: EmbeddedRepository
) -> None:
    """The operator moves the writer's pid to another field and rewrites everything
    (update_all): a record a reviewer published as the harvest has it has no draft to
    review, its pid is the one its writer now reads."""
    harness.reconfigure(publish=False)
    payload = data("First", doi="10.1/a")
    payload["metadata"]["identifier"] = "hdl:1/2"
    record_id = harness.one("oai:1", payload).local_id
    repo.publish(record_id)
    harness.reconfigure(publish=False, pid_field="metadata.identifier", update_all=True)

    outcome = harness.one("oai:1", payload)

    assert (outcome.action, outcome.error) == (Action.UPDATE, None)
    shown = repo.show(record_id)
    assert (shown["doi"], shown["draft"], shown["revision"]) == ("hdl:1/2", None, 1)
