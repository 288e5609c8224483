"""Minimal repros of divergences the model-based test (test_model_based.py) found."""

from __future__ import annotations

import pytest

from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.runner import run_harvest
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.oai.fake_source import FakeRecord, FakeSource
from oai_pipeline_tests.support import EVERYTHING, harvest_fake_source, oai_dc


def dc(title: str) -> str:
    return oai_dc(title, creator="Doe, J", date_text="2020")


def harvest(settings: Settings, **options: object) -> None:
    with Services(settings) as services:
        run_harvest(services, EVERYTHING, RunOptions(**options), progress=lambda _m: None)


def titles(settings: Settings) -> dict[str, str]:
    with EmbeddedRepository(settings.target_db_url) as repository:
        return {
            r["source_identifier"]: r["title"]
            for r in repository.list(harvester="sample", state="live")
        }


def errors_of(settings: Settings, identifier: str) -> list[dict]:
    with Services(settings) as services:
        return services.state.get_record(identifier, "sample")["errors"]


@pytest.mark.parametrize("granularity", ["seconds", "day"])
def test_a_record_fixed_at_the_source_without_a_new_datestamp_is_written(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, granularity: str
) -> None:
    """Its transform failed; the source fixed it and kept its datestamp. Before, the harvest
    kept the stored (broken) XML of a record listed again with the same datestamp and
    transformed that again: the record failed for ever, although its last write had errors
    (so it is not skipped) and the source now serves it fixed."""
    record = FakeRecord("oai:fake.test:1", "2024-03-01T10:00:00Z", raw_metadata=dc(""))
    source = harvest_fake_source(
        settings, monkeypatch, FakeSource([record], granularity=granularity)
    )
    harvest(settings)
    assert errors_of(settings, record.identifier)[0]["type"] == "missing_field"

    source.records[0].raw_metadata = dc("Fixed")
    harvest(settings)

    assert titles(settings) == {record.identifier: "Fixed"}
    assert errors_of(settings, record.identifier) == []


def test_a_harvested_record_that_failed_is_rewritten_once_fixed_without_a_new_datestamp(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written, then broken with a new datestamp (its transform fails), then fixed at the
    source with that datestamp. Before, the failed write stored the broken datestamp as
    written and the retry's transform cleared the error before the plan read it, so the plan
    saw "same datestamp, no error, local record as written" and skipped it: the target kept
    the old data for good although the record's last write had failed."""
    record = FakeRecord("oai:fake.test:1", "2024-03-01T10:00:00Z", raw_metadata=dc("Good"))
    source = harvest_fake_source(settings, monkeypatch, FakeSource([record]))
    harvest(settings)
    source.records[0].raw_metadata = dc("")
    source.records[0].datestamp = "2024-03-02T10:00:00Z"
    harvest(settings)
    assert errors_of(settings, record.identifier)[0]["type"] == "missing_field"

    source.records[0].raw_metadata = dc("Fixed")
    harvest(settings)

    assert errors_of(settings, record.identifier) == []
    assert titles(settings) == {record.identifier: "Fixed"}


def test_a_record_whose_write_failed_is_transformed_again_from_what_the_source_lists(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its write failed (a missing community); the source then changed it on the same day
    (a day-granular source: the same datestamp). Before, the retry reused the transform
    stored from the failed attempt's XML and failed the same way, for good."""
    record = FakeRecord(
        "oai:fake.test:1", "2024-03-01T10:00:00Z", sets=["sx"], raw_metadata=dc("First")
    )
    source = harvest_fake_source(settings, monkeypatch, FakeSource([record], granularity="day"))
    with Services(settings) as services:
        harvester = services.state.get_harvester("sample")
        transformer = 'oai-import{model:"rdm", set_communities:{sx: "nowhere"}}'
        services.state.save_harvester(harvester.model_copy(update={"transformers": [transformer]}))
    harvest(settings)
    assert errors_of(settings, record.identifier)[0]["type"] == "missing_community"

    source.records[0] = FakeRecord(
        record.identifier, "2024-03-01T15:00:00Z", raw_metadata=dc("Second")
    )
    harvest(settings)

    assert errors_of(settings, record.identifier) == []
    assert titles(settings) == {record.identifier: "Second"}


def test_a_failed_record_that_vanished_is_no_longer_failed_after_reconcile(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source keeping no deletions dropped a record whose transform had failed. Before,
    reconcile marked it deleted but left its transform error: it counted as failed for good
    (`records list --error-type`), although nothing is left to fix."""
    from oai_pipeline.oai.reader import OAIPMHReader
    from oai_pipeline.pipeline import reconcile as reconcile_module
    from oai_pipeline.pipeline.reconcile import reconcile

    records = [
        FakeRecord("oai:fake.test:1", "2024-03-01T10:00:00Z", raw_metadata=dc("")),
        FakeRecord("oai:fake.test:2", "2024-03-01T10:00:00Z", sets=["sx"], raw_metadata=dc("W")),
        *(
            FakeRecord(f"oai:fake.test:{n}", "2024-03-01T10:00:00Z", raw_metadata=dc("Kept"))
            for n in (3, 4, 5)
        ),
    ]
    source = harvest_fake_source(settings, monkeypatch, FakeSource(records, deleted_record="no"))
    with Services(settings) as services:  # record 2's write fails: a missing community
        harvester = services.state.get_harvester("sample")
        transformer = 'oai-import{model:"rdm", set_communities:{sx: "nowhere"}}'
        services.state.save_harvester(harvester.model_copy(update={"transformers": [transformer]}))
    monkeypatch.setattr(
        reconcile_module,
        "build_reader",
        lambda harvester: OAIPMHReader(None, harvester, transport=source.transport()),
    )
    harvest(settings)
    assert errors_of(settings, "oai:fake.test:1")[0]["type"] == "missing_field"
    assert errors_of(settings, "oai:fake.test:2")[0]["type"] == "missing_community"

    source.records = source.records[2:]
    with Services(settings) as services:
        assert reconcile(services, "sample").vanished == ["oai:fake.test:1", "oai:fake.test:2"]

    assert errors_of(settings, "oai:fake.test:1") == []
    assert errors_of(settings, "oai:fake.test:2") == []


def test_a_hard_deleted_record_refused_a_deposits_doi_does_not_take_the_deposit_over(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source gives a harvested record the DOI of a user's deposit: refused
    (duplicate_pid), the deposit is the user's. Before, once a user hard deleted the
    harvested record, the next harvest took the deposit over and overwrote it, and left
    the harvested record detached from its source; a hard-deleted record gives up its own
    DOI, not the deposit's. Now it is revived and refused the DOI, as a live record is."""
    with_doi = dc("T1").replace(
        "</oai_dc:dc>", "<dc:identifier>https://doi.org/10.5072/own</dc:identifier></oai_dc:dc>"
    )
    record = FakeRecord("oai:fake.test:1", "2024-03-01T10:00:00Z", raw_metadata=with_doi)
    source = harvest_fake_source(settings, monkeypatch, FakeSource([record]))
    harvest(settings)
    with EmbeddedRepository(settings.target_db_url) as repository:
        deposit = repository.deposit(
            {"metadata": {"title": "mine"}, "pids": {"doi": {"identifier": "10.5072/mine"}}},
            publish=True,
        )
    source.records[0] = FakeRecord(
        record.identifier,
        "2024-03-02T10:00:00Z",
        raw_metadata=with_doi.replace("10.5072/own", "10.5072/mine"),
    )
    harvest(settings)
    assert errors_of(settings, record.identifier)[0]["type"] == "duplicate_pid"
    with EmbeddedRepository(settings.target_db_url) as repository:
        (own,) = repository.list(harvester="sample")
        repository.hard_delete(own["id"])

    harvest(settings)

    assert errors_of(settings, record.identifier)[0]["type"] == "duplicate_pid"
    with EmbeddedRepository(settings.target_db_url) as repository:
        mine = repository.show(deposit)
        assert (mine["source_harvester"], mine["data"]["metadata"]["title"]) == (None, "mine")
        assert repository.show(own["id"])["source_identifier"] == record.identifier


def with_doi(title: str, doi: str) -> str:
    return dc(title).replace(
        "</oai_dc:dc>", f"<dc:identifier>https://doi.org/{doi}</dc:identifier></oai_dc:dc>"
    )


def test_a_record_coming_back_keeps_its_tombstone_from_a_new_record_with_its_old_doi(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deleted record comes back with a new DOI while a new record carries its old one,
    the new record listed first. Before, the new record took the tombstone over (as if the
    source had re-identified the record) and the record coming back failed ("record … is
    live, not deleted") with no live target record: the outcome hung on the listing order."""
    old = FakeRecord(
        "oai:fake.test:a", "2024-03-01T10:00:00Z", raw_metadata=with_doi("A", "10.5072/d1")
    )
    source = harvest_fake_source(settings, monkeypatch, FakeSource([old]))
    harvest(settings)
    source.records = [FakeRecord(old.identifier, "2024-03-02T10:00:00Z", deleted=True)]
    harvest(settings)

    source.records = [
        FakeRecord(
            "oai:fake.test:b", "2024-03-03T10:00:00Z", raw_metadata=with_doi("B", "10.5072/d1")
        ),
        FakeRecord(
            old.identifier, "2024-03-03T10:00:00Z", raw_metadata=with_doi("A", "10.5072/d2")
        ),
    ]
    harvest(settings)

    assert errors_of(settings, old.identifier) == []
    assert titles(settings) == {old.identifier: "A", "oai:fake.test:b": "B"}


def test_a_record_moved_to_another_set_without_a_new_datestamp_is_written_as_listed(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A day-granular source changed a record and moved it to another set on the day of its
    datestamp; harvested after that day, it is written again (moved). Before, staging kept the
    XML stored from the last harvest (same datestamp: "unchanged") and transformed that again
    for the move: the target got the old title under the new sets, a copy the source never
    had, although the copy just listed was at hand (model-based seed 124)."""
    record = FakeRecord(
        "oai:fake.test:1", "2024-03-01T10:00:00Z", sets=["sa"], raw_metadata=dc("A")
    )
    source = harvest_fake_source(settings, monkeypatch, FakeSource([record], granularity="day"))
    harvest(settings)
    assert titles(settings) == {record.identifier: "A"}

    source.records[0] = FakeRecord(
        record.identifier, "2024-03-01T15:00:00Z", sets=["sb"], raw_metadata=dc("B")
    )
    harvest(settings)

    assert titles(settings) == {record.identifier: "B"}
    with Services(settings) as services:
        assert services.state.get_record(record.identifier, "sample")["set_specs"] == ["sb"]


@pytest.mark.parametrize("granularity", ["seconds", "day"])
@pytest.mark.parametrize("between", ["deleted", "unreadable"])
def test_a_record_listed_again_the_day_it_was_deleted_or_unreadable_is_written_as_listed(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, granularity: str, between: str
) -> None:
    """Model seed 3769: at a day's granularity, deleted and listed live again with a new
    title the same day (one datestamp, `2024-03-01`, for all three copies), the record was
    restored with the transform of its copy before the deletion: that transform's datestamp
    was still the one listed, so it was reused, and the target kept the old title. After a
    copy that did not parse instead, the write was skipped: the datestamp written was the
    one listed."""
    record = FakeRecord("oai:fake.test:1", "2024-03-01T08:00:00Z", raw_metadata=dc("First"))
    source = harvest_fake_source(
        settings, monkeypatch, FakeSource([record], granularity=granularity)
    )
    harvest(settings)
    source.records[0] = FakeRecord(
        record.identifier,
        "2024-03-01T09:00:00Z",
        deleted=between == "deleted",
        raw_metadata="<broken><title>First</broken>",
    )
    harvest(settings)
    assert titles(settings) == ({} if between == "deleted" else {record.identifier: "First"})

    source.records[0] = FakeRecord(
        record.identifier, "2024-03-01T10:00:00Z", raw_metadata=dc("Back")
    )
    harvest(settings)

    assert titles(settings) == {record.identifier: "Back"}
