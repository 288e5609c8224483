"""The sync rules under every writer option, end to end.

The model-based test (test_model_based.py) varies the source and the users but always
writes with the default writer. Here each combination of `publish`, `direct_update`,
`update_all`, `pid_field` and `community` (none, an existing one, a subcommunity, a missing
one) runs one story of source changes (create, update, update without a new datestamp,
delete, bring back), users' actions (deposit with a harvested DOI, edit, publish, delete,
purge, hard delete) and harvests, and the target is checked after each harvest against
DESIGN.md's sync rules: with `publish: false` what the harvest brings waits in a draft (the
published version, if any, untouched); with it, the record is published with no draft left.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.runner import run_harvest
from oai_pipeline.pipeline.scope import HarvestScope
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.oai.fake_source import FakeRecord, FakeSource
from oai_pipeline_tests.support import (
    EVERYTHING,
    URN_TRANSFORMER,
    harvest_fake_source,
    use_transformer,
)


@dataclass(frozen=True)
class Options:
    publish: bool
    direct_update: bool
    update_all: bool
    pid_field: str | None
    community: str | None  # "top" (exists), "sub" (of "top"), "nowhere" (missing)

    def writer(self) -> str:
        parts = ['model:"rdm"', f"publish:{str(self.publish).lower()}"]
        parts.append(f"direct_update:{str(self.direct_update).lower()}")
        parts.append(f"update_all:{str(self.update_all).lower()}")
        if self.pid_field:
            parts.append(f'pid_field:"{self.pid_field}"')
        if self.community:
            parts.append(f'community:"{self.community}"')
        return "oai-service{" + ", ".join(parts) + "}"

    def pid(self, doi: str) -> str:
        return f"urn:x:{doi}" if self.pid_field else doi

    def communities(self) -> set[str]:
        return {"top", "sub"} if self.community == "sub" else {self.community} - {None}

    def __str__(self) -> str:
        return (
            f"{'pub' if self.publish else 'draft'}{'-direct' if self.direct_update else ''}"
            f"{'-all' if self.update_all else ''}"
            f"{'-' + self.pid_field.rsplit('.', 1)[-1] if self.pid_field else ''}"
            f"-{self.community or 'nocomm'}"
        )


LATER = datetime(2025, 1, 1, tzinfo=UTC)  # after every datestamp of a story
WRITES = [(True, False), (True, True), (False, False)]  # (publish, direct_update)
COMMUNITIES = [None, "top", "sub", "nowhere"]


def all_options() -> list[Options]:
    """Every pair of option values in some case (12 of the 48 valid combinations;
    OAI_WRITER_OPTIONS_ALL=1 runs all of them)."""
    if os.environ.get("OAI_WRITER_OPTIONS_ALL"):
        return [
            Options(publish, direct, update_all, pid_field, community)
            for (publish, direct), update_all, pid_field, community in itertools.product(
                WRITES, [False, True], [None, "pids.urn"], COMMUNITIES
            )
        ]
    return [
        Options(publish, direct, (w + c) % 2 == 1, "pids.urn" if (w + c // 2) % 2 else None, comm)
        for w, (publish, direct) in enumerate(WRITES)
        for c, comm in enumerate(COMMUNITIES)
    ]


def dc(title: str, doi: str) -> str:
    return (
        '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f"<dc:title>{title}</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        f"<dc:identifier>https://doi.org/{doi}</dc:identifier></oai_dc:dc>"
    )


class Story:
    """The source, the repository's users and the checks of one option combination."""

    def __init__(self, services: Services, source: FakeSource, options: Options):
        self.services = services
        settings = services.settings
        self.source = source
        self.options = options
        self.repository = EmbeddedRepository(settings.target_db_url)
        self.titles: dict[str, str] = {}  # what the source says now (live records)
        self.seconds = 0

    # -- the source ------------------------------------------------------------------------
    def stamp(self) -> str:
        self.seconds += 1
        return f"2024-03-01T10:{self.seconds // 60:02d}:{self.seconds % 60:02d}Z"

    def record(self, identifier: str) -> FakeRecord:
        return next(r for r in self.source.records if r.identifier == identifier)

    def put(self, identifier: str, title: str, *, new_datestamp: bool = True) -> None:
        doi = self.doi(identifier)
        existing = [r for r in self.source.records if r.identifier == identifier]
        if not existing:
            self.source.records.append(FakeRecord(identifier, self.stamp()))
        record = self.record(identifier)
        record.raw_metadata, record.deleted = dc(title, doi), False
        if new_datestamp and existing:
            record.datestamp = self.stamp()
        self.titles[identifier] = title

    def delete_at_source(self, identifier: str) -> None:
        record = self.record(identifier)
        record.deleted, record.datestamp = True, self.stamp()
        del self.titles[identifier]

    @staticmethod
    def doi(identifier: str) -> str:
        return f"10.5072/{identifier.rsplit(':', 1)[-1]}"

    # -- the target ------------------------------------------------------------------------
    def harvest(self, *, incremental: bool = False) -> None:
        """`incremental`: since a time after every datestamp, so the source lists nothing
        and only the records users changed are written (brought back)."""
        scope = HarvestScope.adhoc("sample", since=LATER) if incremental else EVERYTHING
        run_harvest(self.services, scope, RunOptions(), progress=lambda _m: None)

    def local(self, identifier: str) -> dict | None:
        rows = [
            r
            for r in self.repository.list(harvester="sample")
            if r["source_identifier"] == identifier
        ]
        assert len(rows) <= 1, rows
        return self.repository.show(rows[0]["id"]) if rows else None

    def errors(self, identifier: str) -> list[dict]:
        record = self.services.state.get_record(identifier, "sample")
        assert record is not None
        return record["errors"]

    # -- the checks --------------------------------------------------------------------------
    def check(self, identifier: str, published: str | None = None) -> dict:
        """`identifier` is as the source says, as the options want it. `published`: with
        publish: false, the title of a published version a reviewer accepted (None: the
        record was never published, it is a draft only)."""
        options = self.options
        local = self.local(identifier)
        title = self.titles[identifier]
        assert local is not None, f"{identifier} is not in the target"
        assert self.errors(identifier) == [], self.errors(identifier)
        if options.publish:
            assert (local["state"], local["draft"]) == ("live", None), local
            assert local["data"]["metadata"]["title"] == title
        elif published is None:
            assert (local["state"], local["draft_kind"]) == ("draft", "new"), local
            assert local["draft"]["metadata"]["title"] == title
        else:
            assert local["state"] == "live", local
            assert local["data"]["metadata"]["title"] == published
            if published != title:
                assert local["draft_kind"] == "edit", local
                assert local["draft"]["metadata"]["title"] == title
            else:
                assert local["draft"] is None, local
        assert local["doi"] == options.pid(self.doi(identifier)), local
        assert options.communities() <= set(local["communities"]), local
        if options.community:
            assert local["default_community"] == options.community, local
        return local

    def check_gone(self, identifier: str) -> None:
        local = self.local(identifier)
        assert self.errors(identifier) == [], self.errors(identifier)
        if local is None:
            return
        assert local["state"] in ("tombstone", "deleted"), local
        assert local["draft"] is None, local


@pytest.fixture
def story(
    request: pytest.FixtureRequest,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[Story]:
    options: Options = request.param
    source = harvest_fake_source(settings, monkeypatch, FakeSource([]))
    transformers = ['oai-import{model:"rdm"}']
    if options.pid_field:
        use_transformer(monkeypatch, tmp_path / "site", "urn", "Urn", URN_TRANSFORMER)
        transformers.append("urn")
    with Services(settings) as services:
        HarvesterRegistry(services.state).update(
            "sample", transformers=transformers, writers=[options.writer()]
        )
    with Services(settings) as services:
        story = Story(services, source, options)
        story.repository.create_community("top")
        story.repository.create_community("sub", parent="top")
        yield story
        story.repository.close()


A, B, C = "oai:fake.test:a", "oai:fake.test:b", "oai:fake.test:c"


@pytest.mark.parametrize("story", all_options(), indirect=True, ids=str)
def test_a_story_of_source_changes_and_local_actions(story: Story) -> None:
    options, repository = story.options, story.repository
    # A user deposited C's DOI before the first harvest: C takes the deposit over.
    deposit = repository.deposit(
        {
            "metadata": {"title": "Deposited"},
            "pids": {"doi": {"identifier": story.doi(C), "provider": "external"}},
        },
        publish=True,
    )
    if options.pid_field:  # the deposit holds the pid the writer compares
        with repository.transaction() as tx:
            from oai_pipeline.targets.embedded.schema import records

            tx.connection.execute(
                records.update()
                .where(records.c.id == deposit)
                .values(doi=options.pid(story.doi(C)))
            )
    for identifier in (A, B, C):
        story.put(identifier, f"first {identifier}")
    story.harvest()

    if options.community == "nowhere":  # not written, the error on the harvest record
        assert [r["source_harvester"] for r in repository.list()] == [None]
        for identifier in (A, B, C):
            assert [e["type"] for e in story.errors(identifier)] == ["missing_community"]
        repository.create_community("nowhere")
        story.harvest()
    published = {A: None, B: None, C: "Deposited"}  # publish: false, what a reviewer accepted
    for identifier in (A, B, C):
        story.check(identifier, published[identifier])
    assert story.local(C)["id"] == deposit
    before = {i: story.local(i) for i in (A, B, C)}

    # a harvest with nothing new writes nothing (update_all rewrites)
    story.harvest()
    for identifier in (A, B, C):
        local = story.check(identifier, published[identifier])
        grows = options.update_all and options.publish
        assert local["revision"] == before[identifier]["revision"] + grows, local

    # updated at the source with a new datestamp, and without one
    story.put(A, "second a")
    story.put(B, "quietly b", new_datestamp=False)
    story.harvest()
    if not options.update_all:
        story.titles[B] = f"first {B}"  # the datestamp is trusted
    for identifier in (A, B, C):
        story.check(identifier, published[identifier])

    # a reviewer accepts the drafts (publish: false); the harvest leaves them as they are
    if not options.publish:
        for identifier in (A, B, C):
            repository.publish(story.local(identifier)["id"])
            published[identifier] = story.titles[identifier]
        story.harvest()
        for identifier in (A, B, C):
            story.check(identifier, published[identifier])
        story.put(A, "third a")  # a change after the review waits in an edit draft
        story.harvest()
        story.check(A, published[A])

    # users' changes: all undone by the next harvest
    ids = {i: story.local(i)["id"] for i in (A, B, C)}
    repository.edit(ids[A], {"metadata.title": "edited locally"})
    repository.delete(ids[B], purge=True)
    repository.hard_delete(ids[C])
    story.harvest()
    for identifier in (A, B, C):
        local = story.check(identifier, published[identifier])
        assert local["id"] == ids[identifier]

    # an edit published locally comes back too; a writer that does not publish leaves the
    # harvest in an edit draft beside it, for review
    repository.edit(ids[A], {"metadata.title": "published locally"})
    repository.publish(ids[A])
    story.harvest()
    if not options.publish:
        published[A] = "published locally"
    story.check(A, published[A])

    # deleted at the source, with a local edit draft; then brought back
    repository.edit(ids[B], {"metadata.title": "draft before deletion"})
    story.delete_at_source(B)
    story.harvest()
    story.check_gone(B)
    story.put(B, "back b")
    story.harvest()
    local = story.check(B, published[B])
    assert local["id"] == ids[B]
    assert len(repository.list(harvester="sample")) == 3


# A writer whose `pid_field` names a field the records lack: they have no pid, whatever
# DOI the import found (the Urn plug-in writes `pids.urn`, not `pids.handle`).
NO_PID = Options(True, False, False, "pids.handle", None)
NO_PID_DRAFTS = Options(False, False, False, "pids.handle", None)
URN_DRAFTS = Options(False, False, False, "pids.urn", None)


def deposit_doi(story: Story, doi: str) -> str:
    """A user's published deposit holding this pid (as `pids.doi`, how a user's is read)."""
    return story.repository.deposit(
        {"metadata": {"title": "Deposited"}, "pids": {"doi": {"identifier": doi}}},
        publish=True,
    )


def assert_untouched(story: Story, deposit: str, doi: str) -> None:
    shown = story.repository.show(deposit)
    assert (shown["data"]["metadata"]["title"], shown["doi"]) == ("Deposited", doi), shown
    assert (shown["source_harvester"], shown["revision"]) == (None, 1), shown


@pytest.mark.parametrize("story", [NO_PID], indirect=True, ids=str)
def test_a_record_without_a_pid_at_pid_field_takes_no_deposit_of_its_doi_over(
    story: Story,
) -> None:
    """Before, the writer looked the record up by the DOI the import found (the default
    field's) where its `pid_field` gave none: the plan said create, the write took the
    user's deposit of that DOI over, overwrote it and left it without its DOI."""
    deposit = deposit_doi(story, story.doi(A))
    story.put(A, "first a")
    story.harvest()

    local = story.local(A)
    assert local is not None and local["id"] != deposit
    assert (local["state"], local["doi"], story.errors(A)) == ("live", None, [])
    assert_untouched(story, deposit, story.doi(A))


@pytest.mark.parametrize("story", [NO_PID_DRAFTS], indirect=True, ids=str)
def test_a_changed_draft_comes_back_under_the_writers_pid_field(story: Story) -> None:
    """Bringing back a locally changed record read its pid from the default field, not the
    writer's: a harvested draft (publish: false) a user edited failed with `duplicate_pid`
    against a user's deposit of its DOI, and the edit stayed; with no such deposit, the
    draft reserved a DOI its writer does not give it."""
    story.put(A, "first a")
    story.harvest()
    record_id = story.local(A)["id"]
    story.repository.edit(record_id, {"metadata.title": "edited locally"})
    deposit = deposit_doi(story, story.doi(A))

    story.harvest(incremental=True)

    local = story.local(A)
    assert (local["id"], local["doi"], story.errors(A)) == (record_id, None, [])
    assert (local["state"], local["draft"]["metadata"]["title"]) == ("draft", "first a")
    assert_untouched(story, deposit, story.doi(A))


@pytest.mark.parametrize("story", [URN_DRAFTS], indirect=True, ids=str)
def test_a_hard_deleted_record_whose_pid_a_deposit_took_is_taken_over_not_revived(
    story: Story,
) -> None:
    """The harvest brings back a record a user hard deleted (no new datestamp): a deposit
    that took the pid the record gave up (the writer's `pid_field`, not the DOI) is taken
    over, no duplicate."""
    story.put(A, "first a")
    story.harvest()
    record_id = story.local(A)["id"]
    story.repository.publish(record_id)  # a reviewer accepts the draft
    story.repository.hard_delete(record_id)
    deposit = deposit_doi(story, story.options.pid(story.doi(A)))

    story.harvest(incremental=True)

    local = story.check(A, published="Deposited")
    assert local["id"] == deposit
    assert story.repository.show(record_id)["source_identifier"] is None
    assert [r["id"] for r in story.repository.list(harvester="sample")] == [deposit]
