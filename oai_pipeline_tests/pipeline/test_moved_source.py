"""A source that moves (a DSpace upgrade moves its OAI-PMH path, a host name changes, http
becomes https): the operator updates the harvester's base URL, and what oai-pipeline knew of
the old endpoint (its run's resumption token, the sets it confirmed) is not taken for the
new one's."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.oai.errors import UnknownSet
from oai_pipeline.oai.types import IdentifyInfo
from oai_pipeline.pipeline.discover import discover
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.runner import HarvestReport, run_harvest
from oai_pipeline.pipeline.scope import HarvestScope
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline_tests.oai.fake_source import FakeSource, make_records
from oai_pipeline_tests.support import EVERYTHING, harvest_fake_source, raise_on_call, register

NEW_URL = "https://repository.example.org/server/oai/request"


def harvest(settings: Settings, scope: HarvestScope = EVERYTHING) -> HarvestReport:
    with Services(settings) as services:
        return run_harvest(services, scope, RunOptions(), progress=lambda _m: None)


def move(settings: Settings, base_url: str = NEW_URL) -> None:
    with Services(settings) as services:
        HarvesterRegistry(services.state).update("sample", base_url=base_url)


def test_a_stopped_run_of_the_old_base_url_is_not_resumed_at_the_new_one(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stopped run's resumption token was issued by the old server: before, the next
    harvest after the move resumed it at the new one (which does not know it, or names
    another list with it)."""
    source = FakeSource(make_records(10), page_size=3)
    harvest_fake_source(settings, monkeypatch, source, reader_options={"prefetch": False})
    told: list[str] = []
    with Services(settings) as services:
        raise_on_call(monkeypatch, services.state, "stage", 2, RuntimeError("killed"))
        with pytest.raises(RuntimeError, match="killed"):
            discover(services, EVERYTHING, RunOptions(), progress=told.append)
    move(settings)
    with Services(settings) as services:
        (stopped,) = services.state.list_runs(harvester_id="sample")
        assert stopped["checkpoint"].resumption_token is not None
        result = discover(services, EVERYTHING, RunOptions(), progress=told.append)
        old = services.state.get_run(stopped["id"])
    assert result.run_id != stopped["id"] and result.counters["staged"] == 10
    assert old["status"] == "stopped"
    assert "the base URL changed" in old["error"] and NEW_URL in old["error"], old["error"]
    assert any("the base URL changed" in line for line in told), told


def test_a_set_confirmed_at_the_old_base_url_is_checked_at_the_new_one(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty incremental list of a set the old endpoint confirmed was a quiet day: after
    the move to an endpoint that names its sets otherwise, every incremental harvest
    succeeded empty, and the set's records were no longer harvested, unnoticed."""
    records = make_records(4)
    for record in records:
        record.sets = ["hdl_123_4"]
    source = harvest_fake_source(settings, monkeypatch, FakeSource(records), setspec="hdl_123_4")
    assert harvest(settings).harvested == 4
    since = HarvestScope.adhoc("sample", since=datetime(2024, 3, 2, tzinfo=UTC))
    assert harvest(settings, since).harvested == 0  # a quiet day at the old endpoint
    assert "ListSets" not in source.verbs

    for record in records:  # the new endpoint names the set otherwise
        record.sets = ["col_123_4"]
    source.sets = ["col_123_4"]
    move(settings)
    with pytest.raises(UnknownSet, match="the source has no set 'hdl_123_4'"):
        harvest(settings, since)
    assert source.verbs.count("ListSets") == 1


def test_the_saved_identify_goes_with_the_endpoint_not_with_how_its_url_is_written(
    settings: Settings,
) -> None:
    """A base URL written otherwise (case, default port, trailing slash) is the same
    endpoint: its Identify stays. Another endpoint drops it (see
    oai_pipeline_tests/cli/test_moved_source.py)."""
    register(settings, "https://Repo.example.org:443/oai/request")
    identify = IdentifyInfo(
        "repo", "https://repo.example.org/oai/request", "seconds", "2020-01-01", "no", "2026"
    )
    with Services(settings) as services:
        services.state.save_identify("sample", identify)
        registry = HarvesterRegistry(services.state)
        registry.update("sample", base_url="https://repo.example.org/oai/request/")
        kept = services.state.get_identify("sample")
        registry.update("sample", base_url=NEW_URL)
        dropped = services.state.get_identify("sample")
    assert kept == identify and dropped is None
