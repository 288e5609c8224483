"""A harvester with two writers, end to end: the embedded target and a mirror of it.

The mirror is the embedded writer under another plug-in name, writing to a database of its
own (a writer is given once per harvester, by name): two independent targets, so what each
writer did to a record can be told apart.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.pipeline import write as write_module
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.rekey import rekey
from oai_pipeline.pipeline.runner import HarvestReport, run_harvest
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.oai.fake_source import FakeRecord, FakeSource
from oai_pipeline_tests.support import (
    EVERYTHING,
    harvest_fake_source,
    oai_dc,
    raise_on_call,
    use_plugin,
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
    two.harvest()
    with Services(two.services.settings) as services:
        harvester = services.harvester("sample")
        writers = [harvester.writers[0], harvester.writers[1][:-1] + ', community:"nowhere"}']
        services.state.save_harvester(harvester.model_copy(update={"writers": writers}))
    source = two.source.records[0]
    source.raw_metadata, source.datestamp = dc("New", "10.5072/1"), "2024-03-01T11:00:00Z"
    report = two.harvest()
    assert report.errors == 1 and report.error_types == {"missing_community": 1}
    statuses = two.services.state.earlier_actions(report.run_id, ["oai:x:1"])
    # each writer's action kept, for a resumed attempt's report of it
    assert statuses["oai:x:1"] == ("failed", "update,error")
    record = two.services.state.get_record("oai:x:1", "sample")
    assert [e["type"] for e in record["errors"]] == ["missing_community"]
    assert two.local(0, "oai:x:1")["data"]["metadata"]["title"] == "New"
    assert two.local(1, "oai:x:1")["data"]["metadata"]["title"] == "T1"


def test_a_resumed_run_counts_a_record_one_writer_failed_as_the_other_writer_wrote_it(
    two: TwoTargets, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the first writer created every record and the mirror refused them all:
    the resumed run reports each record failed once (the mirror's) and created once, as an
    uninterrupted run does (it counted every writer's outcome `failed_before`: 6 failures,
    no creation; the crash sweep's `--writers 2 --failing-records` found it)."""
    with Services(two.services.settings) as services:
        harvester = services.harvester("sample")
        writers = [harvester.writers[0], harvester.writers[1][:-1] + ', community:"nowhere"}']
        services.state.save_harvester(harvester.model_copy(update={"writers": writers}))
    raise_on_call(monkeypatch, write_module, "take_over_freed_pids", 1, RuntimeError("killed"))
    with pytest.raises(RuntimeError):
        two.harvest()
    report = two.harvest()
    assert report.actions == {"create": 3, "failed_before": 3}
    assert (report.created, report.failed_earlier) == (3, 3)


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
