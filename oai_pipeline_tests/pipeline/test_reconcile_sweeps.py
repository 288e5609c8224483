"""Reconcile against a source that pages by offset and drops a record while it is listed."""

from __future__ import annotations

import httpx
import pytest

from oai_pipeline.oai.reader import OAIPMHReader
from oai_pipeline.pipeline import discover as discover_module
from oai_pipeline.pipeline import reconcile as reconcile_module
from oai_pipeline.pipeline.discover import discover
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.reconcile import reconcile
from oai_pipeline.pipeline.scope import HarvestScope, Window
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline_tests.oai.fake_source import BASE_URL, FakeSource, make_records
from oai_pipeline_tests.support import register


@pytest.fixture
def source(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> FakeSource:
    """A FakeSource (offset tokens, deletedRecord=no) behind the harvester `sample`, its
    ten records harvested."""
    fake = FakeSource(make_records(10), page_size=3, deleted_record="no")
    register(settings, BASE_URL, metadata_prefix="oai_dc")

    def reader(harvester):
        return OAIPMHReader(None, harvester, transport=fake.transport(), sleep=lambda _s: None)

    monkeypatch.setattr(discover_module, "build_reader", reader)
    monkeypatch.setattr(reconcile_module, "build_reader", reader)
    with Services(settings) as services:
        scope = HarvestScope("sample", (Window("all", None, None),))
        discover(services, scope, RunOptions(), progress=lambda _m: None)
    return fake


def test_a_record_shifted_past_a_page_by_a_deletion_is_not_taken_for_deleted(
    source: FakeSource, settings: Settings
) -> None:
    """Before, the record the deletion shifted onto the first page was listed by no page,
    and reconcile deleted it in the target although the source still has it."""
    dropped = source.records[0]
    shifted = source.records[3]  # first on page two, on page one once the list shrank

    def drop_after_page_one(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        source.records.remove(dropped)
        return source.answer(request)

    source.faults[len(source.requests) + 3] = drop_after_page_one  # Identify, page one, here
    with Services(settings) as services:
        report = reconcile(services, "sample")
        assert services.state.get_record(shifted.identifier, "sample")["deleted"] is False
        # Listed again until a sweep saw one list; what any sweep listed is kept, so the
        # record dropped meanwhile goes with the next reconcile.
        assert source.verbs.count("ListIdentifiers") == 3 + 3
        assert report.vanished == []
        assert reconcile(services, "sample").vanished == [dropped.identifier]
        assert services.state.get_record(shifted.identifier, "sample")["deleted"] is False


def test_a_stable_list_is_swept_once(source: FakeSource, settings: Settings) -> None:
    source.records.pop()
    with Services(settings) as services:
        report = reconcile(services, "sample")
    assert len(report.vanished) == 1 and source.verbs.count("ListIdentifiers") == 3
