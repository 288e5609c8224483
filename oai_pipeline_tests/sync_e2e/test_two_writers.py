"""A harvester with two writers, end to end: the embedded target and a mirror of it.

The mirror is the embedded writer under another plug-in name, writing to a database of its
own (a writer is given once per harvester, by name): two independent targets, so what each
writer did to a record can be told apart.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import sqlalchemy as sa

from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.pipeline import discover as discover_module
from oai_pipeline.pipeline import reconcile as reconcile_module
from oai_pipeline.pipeline import write as write_module
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.reconcile import reconcile
from oai_pipeline.pipeline.rekey import rekey
from oai_pipeline.pipeline.runner import HarvestReport, run_harvest
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline.state.store import StateStore, writer_keys
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline.targets.embedded.writer import EmbeddedWriter
from oai_pipeline_tests.oai.fake_source import FakeRecord, FakeSource
from oai_pipeline_tests.support import (
    EVERYTHING,
    URN_TRANSFORMER,
    harvest_fake_source,
    oai_dc,
    raise_on_call,
    use_plugin,
    use_transformer,
)

MIRROR = '''
"""The embedded writer into a database of its own (`url`)."""
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline.targets.embedded.writer import EmbeddedWriter


class MirrorWriter(EmbeddedWriter):
    class Options(EmbeddedWriter.Options):
        url: str

    @property
    def repository(self):
        if self._repository is None:
            self._repository = EmbeddedRepository(self.options.url)
        return self._repository
'''


def dc(title: str, doi: str) -> str:
    return oai_dc(title).replace(
        "</oai_dc:dc>", f"<dc:identifier>https://doi.org/{doi}</dc:identifier></oai_dc:dc>"
    )


class TwoTargets:
    """The source, the harvester `sample` writing to the target and its mirror, and both."""

    def __init__(self, services: Services, source: FakeSource, mirror_url: str) -> None:
        self.services = services
        self.source = source
        self.mirror_url = mirror_url
        self.targets = [
            EmbeddedRepository(services.settings.target_db_url),
            EmbeddedRepository(mirror_url),
        ]

    def harvest(self, **options: object) -> HarvestReport:
        return run_harvest(
            self.services, EVERYTHING, RunOptions(**options), progress=lambda _m: None
        )

    def local(self, target: int, identifier: str) -> dict | None:
        repository = self.targets[target]
        rows = [
            r for r in repository.list(harvester="sample") if r["source_identifier"] == identifier
        ]
        assert len(rows) <= 1, rows
        return repository.show(rows[0]["id"]) if rows else None

    def close(self) -> None:
        for repository in self.targets:
            repository.close()


@pytest.fixture
def two(settings: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    use_plugin(
        monkeypatch,
        tmp_path / "site",
        "mirror_plugin",
        MIRROR,
        {"oai_pipeline.writers": {"mirror-service": "mirror_plugin:MirrorWriter"}},
    )
    records = [
        FakeRecord(
            f"oai:x:{n}", f"2024-03-01T10:00:0{n}Z", raw_metadata=dc(f"T{n}", f"10.5072/{n}")
        )
        for n in range(1, 4)
    ]
    source = harvest_fake_source(settings, monkeypatch, FakeSource(records))
    mirror_url = f"sqlite:///{tmp_path / 'mirror.db'}"
    with Services(settings) as services:
        registry = HarvesterRegistry(services.state)
        harvester = registry.get("sample")
        writers = [*harvester.writers, f'mirror-service{{url:"{mirror_url}"}}']
        services.state.save_harvester(harvester.model_copy(update={"writers": writers}))
        both = TwoTargets(services, source, mirror_url)
        try:
            yield both
        finally:
            both.close()


def test_a_record_one_writer_rewrites_and_the_other_skips_is_updated_in_the_run(
    two: TwoTargets,
) -> None:
    """A user edited the record in the first target only: the first writer brings it back,
    the second finds it as harvested. Its run status was the last writer's (`unchanged`,
    action `skip`): the run hid the write."""
    two.harvest()
    edit_in_first_target(two, "oai:x:1")
    report = two.harvest()
    assert report.actions == {"update": 1, "skip": 5}
    assert two.local(0, "oai:x:1")["data"]["metadata"]["title"] == "T1"
    statuses = two.services.state.earlier_actions(report.run_id, ["oai:x:1", "oai:x:2"])
    assert statuses["oai:x:1"][0] == "updated"
    assert statuses["oai:x:2"] == ("unchanged", "skip")
    assert report.updated == 1


def edit_in_first_target(two: TwoTargets, identifier: str) -> None:
    """A user edits the record in the first target only."""
    edit_in_target(two, 0, identifier)


def edit_in_target(two: TwoTargets, target: int, identifier: str) -> None:
    """A user edits the record in that target only."""
    local = two.local(target, identifier)
    assert local is not None
    repository = two.targets[target]
    repository.edit(local["id"], {"metadata": {**local["data"]["metadata"], "title": "E"}})
    repository.publish(local["id"])


@pytest.mark.parametrize("edited", [0, 1])
def test_each_writer_skips_what_it_left_as_harvested_after_an_edit_in_one_target(
    two: TwoTargets, edited: int
) -> None:
    """A user edited the record in one target only: that writer brings it back, the other
    skips it, and the harvest after skips it in both. One memory per record, the last
    writer's revision, planned an update in the target whose revision differed from it, at
    every harvest."""
    two.harvest()
    edit_in_target(two, edited, "oai:x:1")
    assert two.harvest().actions == {"update": 1, "skip": 5}
    revisions = [two.local(t, "oai:x:1")["revision"] for t in (0, 1)]
    assert revisions[edited] == 3 and revisions[1 - edited] == 1
    assert two.harvest().actions == {"skip": 6}
    assert [two.local(t, "oai:x:1")["revision"] for t in (0, 1)] == revisions


def test_each_writer_keeps_its_memory_when_the_writers_are_reordered(two: TwoTargets) -> None:
    """A writer's memory is its plug-in name's, not its position's: reordered, each still
    finds its target as it left it (the one memory, the mirror's revision 3, planned an
    update of the first target's revision 1)."""
    two.harvest()
    edit_in_target(two, 1, "oai:x:1")
    two.harvest()
    harvester = two.services.harvester("sample")
    reordered = list(reversed(harvester.writers))
    two.services.state.save_harvester(harvester.model_copy(update={"writers": reordered}))
    assert two.harvest().actions == {"skip": 6}
    assert [two.local(t, "oai:x:1")["revision"] for t in (0, 1)] == [1, 3]


def test_a_resumed_run_counts_what_each_writer_did_in_its_earlier_attempt(
    two: TwoTargets, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed in the write stage after both writers wrote every record: the resumed run
    reports what an uninterrupted one does, one action per writer and record (it counted
    the earlier attempt's once per record: created 3 of 6)."""
    raise_on_call(monkeypatch, write_module, "take_over_freed_pids", 1, RuntimeError("killed"))
    with pytest.raises(RuntimeError):
        two.harvest()
    report = two.harvest()
    assert (report.created, report.written_earlier) == (6, 6)
    assert report.actions == {"create": 6}
    assert [two.local(t, "oai:x:1")["revision"] for t in (0, 1)] == [1, 1]


def test_a_resumed_run_counts_each_writers_own_action_where_they_differ(
    two: TwoTargets, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The earlier attempt updated a record in one target and skipped it in the other: the
    resumed run says so, as an uninterrupted one does (it stored one action per record, the
    last writer's, and counted it for each writer: `skip` twice)."""
    two.harvest()
    edit_in_first_target(two, "oai:x:1")
    raise_on_call(monkeypatch, write_module, "take_over_freed_pids", 1, RuntimeError("killed"))
    with pytest.raises(RuntimeError):
        two.harvest()
    report = two.harvest()
    assert report.actions == {"update": 1, "skip": 5}
    assert report.updated == 1


def test_a_record_failing_in_one_writer_only_fails_its_run_and_keeps_the_other_write(
    two: TwoTargets, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN.md: a writer rejection is an error on the harvest record, and the harvest goes
    on; a record fails when any writer failed it. Each writer's target is its own: the other
    writer's write is kept, and the record is written again (both writers) until both take it."""
    only_the_first_target_has_the_community_of_set_special(two)
    two.harvest()
    move_into_special(two, "New")
    report = two.harvest()
    assert report.errors == 1 and report.error_types == {"missing_community": 1}
    statuses = two.services.state.earlier_actions(report.run_id, ["oai:x:1"])
    assert statuses["oai:x:1"] == ("failed", "update,error")  # each writer's
    record = two.services.state.get_record("oai:x:1", "sample")
    assert [e["type"] for e in record["errors"]] == ["missing_community"]
    assert two.local(0, "oai:x:1")["data"]["metadata"]["title"] == "New"
    assert two.local(1, "oai:x:1")["data"]["metadata"]["title"] == "T1"


def test_rekey_rewrites_both_writers_records(two: TwoTargets) -> None:
    two.harvest()
    report = rekey(two.services, "sample", "oai:x:", "oai:y:")
    assert report.rewritten == {"target": 6, "state": 3}
    for target in (0, 1):
        assert two.local(target, "oai:y:1") is not None
        assert two.local(target, "oai:x:1") is None
    two.source.records[:] = [
        dataclasses.replace(r, identifier=r.identifier.replace("x", "y"))
        for r in two.source.records
    ]
    assert two.harvest().actions == {"skip": 6}


def test_a_re_identified_record_takes_over_each_targets_record_by_its_writers_id(
    two: TwoTargets,
) -> None:
    """The source lists the record under a new identifier (same DOI), refused its DOI while
    the old one is live, and deletes the old one after: in each target the new identifier
    takes the old one's record over (`take_over_freed_pids`), by that writer's own id."""
    two.harvest()
    ids = [two.local(t, "oai:x:1")["id"] for t in (0, 1)]
    assert ids[0] != ids[1]
    old = two.source.records[0]
    two.source.records.append(
        dataclasses.replace(old, identifier="oai:z:1", datestamp="2024-03-02T10:00:00Z")
    )
    refused = two.harvest()
    assert refused.error_types == {"duplicate_pid": 2}, refused
    old.deleted, old.datestamp = True, "2024-03-02T10:00:01Z"
    report = two.harvest(identifiers=["oai:x:1"])  # the new one is not listed again
    assert report.errors == 0 and report.reidentified == {"restore": 2}, report
    for target in (0, 1):
        local = two.local(target, "oai:z:1")
        assert local is not None and local["id"] == ids[target]
        assert local["state"] == "live" and two.local(target, "oai:x:1") is None
        assert len(two.targets[target].list(harvester="sample")) == 3
    harvester = two.services.harvester("sample")
    for target, owner in enumerate(writer_keys(harvester.writers)):
        memory = two.services.state.get_memories("sample", ["oai:z:1"], owner)["oai:z:1"]
        assert memory.local_id == ids[target]
    assert two.services.state.get_record("oai:z:1", "sample")["errors"] == []
    assert two.harvest().actions == {"skip": 8}  # oai:x:1 too, deleted in both


def test_reconcile_deletes_a_vanished_record_and_restores_it_back_in_both_targets(
    two: TwoTargets, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source keeping no deletions drops a record, then lists it again: a reconcile
    tombstones it in both targets, the next brings it back in both, each writer's memory
    following its own target's revision."""
    two.source.deleted_record = "no"
    # reconcile lists the fake source as the harvest does
    monkeypatch.setattr(reconcile_module, "build_reader", discover_module.build_reader)
    two.harvest()
    gone = two.source.records.pop(1)
    report = reconcile(two.services, "sample")
    assert report.vanished == [gone.identifier] and report.actions == {"delete": 2}
    assert [two.local(t, gone.identifier)["state"] for t in (0, 1)] == ["tombstone"] * 2
    assert_memories_follow_the_targets(two, gone.identifier)
    two.source.records.insert(1, gone)
    report = reconcile(two.services, "sample")
    assert report.returned == [gone.identifier], report
    assert report.returned_actions == {"restore": 2}, report
    assert [two.local(t, gone.identifier)["state"] for t in (0, 1)] == ["live"] * 2
    assert_memories_follow_the_targets(two, gone.identifier)
    assert two.harvest().actions == {"skip": 6}


def assert_memories_follow_the_targets(two: TwoTargets, identifier: str) -> None:
    """Each writer's memory of the record is its own target's record, at its revision."""
    harvester = two.services.harvester("sample")
    for target, owner in enumerate(writer_keys(harvester.writers)):
        memory = two.services.state.get_memories("sample", [identifier], owner)[identifier]
        local = two.local(target, identifier)
        assert (memory.local_id, memory.written_revision) == (local["id"], local["revision"])


@pytest.mark.parametrize(
    ("killed_at", "left"),
    [
        ((EmbeddedWriter, "apply"), ["tombstone", "live"]),
        ((StateStore, "save_write_outcomes"), ["tombstone", "tombstone"]),
    ],
    ids=["before-the-second-writes", "before-the-second-saves"],
)
def test_a_reconcile_killed_between_the_writers_deletes_in_both_when_rerun(
    two: TwoTargets, monkeypatch: pytest.MonkeyPatch, killed_at: tuple[type, str], left: list
) -> None:
    """Killed after the first writer's deletion (and before the second writer's, or before
    the store heard of it): the rerun deletes in both targets and reports what an
    uninterrupted reconcile does."""
    two.source.deleted_record = "no"
    monkeypatch.setattr(reconcile_module, "build_reader", discover_module.build_reader)
    two.harvest()
    gone = two.source.records.pop(1)
    with monkeypatch.context() as patch:
        raise_on_call(patch, *killed_at, 2, RuntimeError("killed"))
        with pytest.raises(RuntimeError):
            reconcile(two.services, "sample")
    assert [two.local(t, gone.identifier)["state"] for t in (0, 1)] == left
    report = reconcile(two.services, "sample")
    assert report.vanished == [gone.identifier] and report.actions == {"delete": 2}, report
    assert [two.local(t, gone.identifier)["state"] for t in (0, 1)] == ["tombstone"] * 2
    assert_memories_follow_the_targets(two, gone.identifier)
    assert two.services.state.get_record(gone.identifier, "sample")["deleted"] is True


def test_a_run_killed_between_the_writers_writes_only_what_the_second_lacks(
    two: TwoTargets, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the first writer wrote the batch, before the second did: the rerun
    writes the records into the second target, finds them in the first as it left them,
    and reports what an uninterrupted run does."""
    with monkeypatch.context() as patch:
        raise_on_call(patch, EmbeddedWriter, "apply", 2, RuntimeError("killed"))
        with pytest.raises(RuntimeError):
            two.harvest()
    assert two.local(0, "oai:x:1") is not None and two.local(1, "oai:x:1") is None
    report = two.harvest()
    assert report.actions == {"create": 6}, report
    assert report.created == 6 and report.errors == 0
    for target in (0, 1):
        assert len(two.targets[target].list(harvester="sample")) == 3
        assert two.local(target, "oai:x:1")["revision"] == 1
    assert_memories_follow_the_targets(two, "oai:x:1")
    assert two.harvest().actions == {"skip": 6}


def test_a_run_whose_second_writer_fails_a_batch_saves_what_both_writers_finished(
    two: TwoTargets, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One record a batch: the first writer wrote all three, the second one, then its
    target failed the next batch. The record both wrote was left `running` (the group's
    outcomes were saved only after every batch), so the rerun counted it as its own; now
    it is saved as written by the failed attempt. The two only the first writer wrote stay
    as a killed run leaves them: running, unknown to both writers' memories."""
    harvester = two.services.harvester("sample")
    two.services.state.save_harvester(harvester.model_copy(update={"batch_size": 1}))
    with monkeypatch.context() as patch:
        raise_on_call(patch, EmbeddedWriter, "apply", 5, RuntimeError("target full"))
        with pytest.raises(RuntimeError, match="target full"):
            two.harvest()
    run = two.services.state.latest_run("sample")
    statuses = two.services.state.earlier_actions(run["id"], ["oai:x:1", "oai:x:2", "oai:x:3"])
    owners = writer_keys(two.services.harvester("sample").writers)
    remembered = [
        {
            i
            for i, m in two.services.state.get_memories("sample", ["oai:x:1", "oai:x:2"], o).items()
            if m.datestamp
        }
        for o in owners
    ]
    report = two.harvest()

    assert statuses == {
        "oai:x:1": ("imported", "create"),
        "oai:x:2": ("running", None),
        "oai:x:3": ("running", None),
    }
    assert remembered == [{"oai:x:1"}, {"oai:x:1"}]
    assert (report.created, report.written_earlier) == (6, 2)
    assert report.actions == {"create": 6}, report
    for target in (0, 1):
        assert len(two.targets[target].list(harvester="sample")) == 3
    assert_memories_follow_the_targets(two, "oai:x:2")


def test_a_failed_batch_whose_save_the_state_store_refuses_keeps_the_batchs_error(
    two: TwoTargets, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state store on the same full disk refuses saving the committed batches: the run
    fails with the batch's error, not the save's."""
    refused = sa.exc.OperationalError("INSERT", {}, Exception("state full"))
    with monkeypatch.context() as patch:
        raise_on_call(patch, EmbeddedWriter, "apply", 2, RuntimeError("target full"))
        raise_on_call(patch, StateStore, "save_written", 1, refused)
        with pytest.raises(RuntimeError, match="target full"):
            two.harvest()
    run = two.services.state.latest_run("sample")
    assert (run["status"], run["error"]) == ("failed", "RuntimeError: target full")


def only_the_first_target_has_the_community_of_set_special(two: TwoTargets) -> None:
    """The transform files records of set `special` under a community the first target has
    and the mirror lacks: a record moved into the set (`move_into_special`) fails in the
    mirror (`missing_community`), the first target takes it. Set before the first harvest:
    a writer's or transformer's option changed later re-plans every record."""
    two.targets[0].create_community("first-only")
    harvester = two.services.harvester("sample")
    chain = ['oai-import{model:"rdm", set_communities:{special: "first-only"}}']
    two.services.state.save_harvester(harvester.model_copy(update={"transformers": chain}))


def move_into_special(two: TwoTargets, title: str) -> None:
    """The source changes its first record and moves it into set `special`."""
    source = two.source.records[0]
    source.raw_metadata, source.datestamp = dc(title, "10.5072/1"), "2024-03-01T11:00:00Z"
    source.sets = ["special"]


def set_mirror_options(two: TwoTargets, options: str = "") -> None:
    """The mirror writer's spec: its url and `options` (`publish:false`, …)."""
    harvester = two.services.harvester("sample")
    mirror = f'mirror-service{{url:"{two.mirror_url}"{", " if options else ""}{options}}}'
    writers = [harvester.writers[0], mirror]
    two.services.state.save_harvester(harvester.model_copy(update={"writers": writers}))


@pytest.mark.parametrize("killed", [False, True], ids=["uninterrupted", "resumed"])
def test_a_resumed_run_reports_a_record_one_writer_failed_as_an_uninterrupted_one(
    two: TwoTargets, monkeypatch: pytest.MonkeyPatch, killed: bool
) -> None:
    """The first writer updated the record, the second failed it; killed after (before its
    take-overs), the rerun writes nothing again and counts the update as written earlier and
    the failure as failed earlier, one each, as the uninterrupted run counts one update and
    one error. Before, the run record kept `error` for both writers: the rerun counted the
    record failed earlier twice and the first writer's update not at all."""
    only_the_first_target_has_the_community_of_set_special(two)
    two.harvest()
    move_into_special(two, "New")
    if killed:
        with monkeypatch.context() as patch:
            raise_on_call(patch, write_module, "take_over_freed_pids", 1, RuntimeError("killed"))
            with pytest.raises(RuntimeError):
                two.harvest()
    report = two.harvest()
    assert (report.updated, report.unchanged) == (1, 4), report
    if killed:
        assert (report.written_earlier, report.failed_earlier, report.errors) == (5, 1, 0)
    else:
        assert (report.written_earlier, report.failed_earlier, report.errors) == (0, 0, 1)


def test_a_writer_made_to_publish_publishes_the_drafts_it_left_the_other_skips(
    two: TwoTargets,
) -> None:
    """`publish` false→true: the next harvest publishes that writer's drafts (a draft is not
    as it publishes records), unchanged at the source, and skips them in the other target."""
    set_mirror_options(two, "publish:false")
    two.harvest()
    assert two.local(1, "oai:x:1")["state"] != "live"
    set_mirror_options(two)
    report = two.harvest()
    assert report.actions == {"skip": 3, "publish_draft": 3}, report
    assert [two.local(t, "oai:x:1")["state"] for t in (0, 1)] == ["live"] * 2


def test_a_writer_given_a_community_files_the_records_it_wrote_there_the_other_skips(
    two: TwoTargets,
) -> None:
    """A writer's `community` changes what it writes, so it is in that writer's written
    fingerprint: the next harvest files the records it wrote there, unchanged at the source,
    without `update_all`, and the other writer skips them. Before, its memory compared the
    transform's fingerprint alone: the records were skipped until `update_all`."""
    two.harvest()
    two.targets[1].create_community("mirrored")
    set_mirror_options(two, 'community:"mirrored"')
    report = two.harvest()
    # Its data as written: filed without a new revision (`nothing`), but not skipped.
    assert report.actions == {"skip": 3, "nothing": 3}, report
    assert two.local(1, "oai:x:1")["communities"] == ["mirrored"]
    assert two.local(0, "oai:x:1")["communities"] == []
    assert two.harvest().actions == {"skip": 6}


@pytest.mark.parametrize("options", ["direct_update:true", "update_all:false"])
def test_a_writer_option_that_changes_nothing_written_replans_nothing(
    two: TwoTargets, options: str
) -> None:
    """Options that change how, not what, a writer writes leave its written fingerprint as
    it was: every record is skipped in both targets."""
    two.harvest()
    set_mirror_options(two, options)
    assert two.harvest().actions == {"skip": 6}
    assert [two.local(t, "oai:x:1")["revision"] for t in (0, 1)] == [1, 1]


def test_a_record_failing_its_transform_counts_once_whatever_the_writers(two: TwoTargets) -> None:
    """A transform failure is the record's, not a writer's: with two writers, 2 unreadable
    records were `errors: 4` in the run's report while `status` said 2 failed."""
    for record in two.source.records[:2]:
        record.raw_metadata = "<other xmlns='urn:not-dublin-core'/>"
    report = two.harvest()
    assert report.errors == 2, report
    assert sum(report.error_types.values()) == 2
    assert report.actions["error"] == 4  # each writer's action, as the other actions are
    failed = two.services.state.earlier_actions(report.run_id, ["oai:x:1", "oai:x:2"])
    assert {status for status, _ in failed.values()} == {"failed"}


def test_a_record_undone_after_a_writers_option_changed_is_skipped_at_the_next_harvest(
    two: TwoTargets,
) -> None:
    """A record edited in the mirror, not listed again, is brought back by the undo of local
    changes after the mirror was given a `community`: written with it, it is remembered so.
    The undo saved no written fingerprint: the next harvest planned the record once more for
    the mirror, which wrote `nothing`."""
    two.harvest()
    edit_in_target(two, 1, "oai:x:2")
    two.targets[1].create_community("mirrored")
    set_mirror_options(two, 'community:"mirrored"')
    report = two.harvest(identifiers=["oai:x:1"])  # oai:x:2 is not listed: undone
    assert report.local_changes_undone_actions == {"update": 1}, report
    assert two.local(1, "oai:x:2")["communities"] == ["mirrored"]
    report = two.harvest()
    decided = two.services.state.earlier_actions(report.run_id, ["oai:x:2"])
    assert decided["oai:x:2"] == ("unchanged", "skip")  # every writer skips it
    assert report.actions == {"skip": 5, "nothing": 1}, report  # oai:x:3 in the mirror
    assert two.harvest().actions == {"skip": 6}


def test_a_record_taken_over_after_a_writers_option_changed_is_skipped_at_the_next_harvest(
    two: TwoTargets,
) -> None:
    """A re-identified record takes its old record over in the mirror after the mirror was
    given a `community`: written with it, it is remembered so. The take-over saved no
    written fingerprint: the next harvest planned the record once more for the mirror,
    which wrote `nothing`."""
    two.harvest()
    old = two.source.records[0]
    two.source.records.append(
        dataclasses.replace(old, identifier="oai:z:1", datestamp="2024-03-02T10:00:00Z")
    )
    assert two.harvest().error_types == {"duplicate_pid": 2}
    two.targets[1].create_community("mirrored")
    set_mirror_options(two, 'community:"mirrored"')
    old.deleted, old.datestamp = True, "2024-03-02T10:00:01Z"
    report = two.harvest(identifiers=["oai:x:1"])  # the new one is not listed again
    assert report.reidentified == {"restore": 2}, report
    assert two.local(1, "oai:z:1")["communities"] == ["mirrored"]
    report = two.harvest()
    decided = two.services.state.earlier_actions(report.run_id, ["oai:z:1"])
    assert decided["oai:z:1"] == ("unchanged", "skip")  # every writer skips it
    # oai:x:2 and oai:x:3 in the mirror, written before it had the community
    assert report.actions == {"skip": 6, "nothing": 2}, report
    assert two.harvest().actions == {"skip": 8}


def test_a_writer_given_another_pid_field_writes_its_records_once_the_other_skips(
    two: TwoTargets, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A writer's `pid_field` is in its written fingerprint: changed after a harvest, the
    next harvest plans and writes every record that writer wrote, unchanged at the source,
    and the other writer skips them; the harvest after skips them all."""
    use_transformer(monkeypatch, tmp_path / "urn-site", "urn", "Urn", URN_TRANSFORMER)
    harvester = two.services.harvester("sample")
    chain = [*harvester.transformers, "urn"]
    two.services.state.save_harvester(harvester.model_copy(update={"transformers": chain}))
    two.harvest()
    set_mirror_options(two, 'pid_field:"pids.urn"')
    report = two.harvest()
    identifiers = [r.identifier for r in two.source.records]
    decided = two.services.state.earlier_actions(report.run_id, identifiers)
    assert {i: actions for i, (_status, actions) in decided.items()} == dict.fromkeys(
        identifiers, "skip,update"
    )
    assert report.actions == {"skip": 3, "update": 3}, report
    for identifier in identifiers:  # written once, in the mirror only, under its new pid
        doi = f"10.5072/{identifier.rsplit(':', 1)[-1]}"
        assert [two.local(t, identifier)["revision"] for t in (0, 1)] == [1, 2]
        assert [two.local(t, identifier)["doi"] for t in (0, 1)] == [doi, f"urn:x:{doi}"]
    assert two.harvest().actions == {"skip": 6}
    assert [two.local(t, "oai:x:1")["revision"] for t in (0, 1)] == [1, 2]


def test_a_record_undone_after_the_chain_changed_is_remembered_as_of_the_old_chain(
    two: TwoTargets, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The undo writes the record's last transform, made by the chain of that day: it is
    remembered with that chain's fingerprint, not the one of the chain now given, so the
    next harvest that lists the record writes what the new chain makes of it."""
    two.harvest()
    edit_in_target(two, 1, "oai:x:2")
    use_transformer(monkeypatch, tmp_path / "urn-site", "urn", "Urn", URN_TRANSFORMER)
    harvester = two.services.harvester("sample")
    chain = [*harvester.transformers, "urn"]
    two.services.state.save_harvester(harvester.model_copy(update={"transformers": chain}))
    report = two.harvest(identifiers=["oai:x:1"])  # oai:x:2 is not listed: undone
    assert report.local_changes_undone_actions == {"update": 1}, report
    assert "urn" not in two.local(1, "oai:x:2")["data"]["pids"]
    report = two.harvest()
    assert report.actions == {"skip": 2, "update": 4}, report
    assert [two.local(t, "oai:x:2")["data"]["pids"]["urn"] for t in (0, 1)] == [
        {"identifier": "urn:x:10.5072/2"}
    ] * 2
