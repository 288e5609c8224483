"""One harvest at a time lists records from a source's server (DESIGN: be polite, one
request at a time per source), whichever harvesters and processes share it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from oai_pipeline.errors import PipelineError
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.runner import run_harvest
from oai_pipeline.pipeline.scope import HarvestScope
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.faults import Faults
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline.state.harvester_lock import HarvesterLock, source_key
from oai_pipeline_tests.support import register


def test_a_server_is_its_host_and_port_whatever_the_path() -> None:
    assert source_key("https://Zenodo.org/oai2d") == source_key("https://zenodo.org/other")
    assert source_key("http://repo.example/oai/request") == "source:repo.example"
    assert source_key("http://127.0.0.1:8080/oai") != source_key("http://127.0.0.1:8081/oai")


def test_a_second_harvest_of_the_server_waits_saying_why(tmp_path: Path) -> None:
    lock = HarvesterLock(sa.create_engine(f"sqlite:///{tmp_path / 'state.sqlite'}"))
    refused: list[PipelineError] = []

    def another_harvest(base_url: str) -> None:
        try:
            with lock.hold_source(base_url, wait_seconds=0, sleep=lambda _s: None):
                pass
        except PipelineError as error:
            refused.append(error)

    with lock.hold_source("https://zenodo.org/oai2d"):
        for base_url in ("https://zenodo.org/oai2d", "https://export.arxiv.org/oai2"):
            thread = threading.Thread(target=another_harvest, args=(base_url,))
            thread.start()
            thread.join()
    assert len(refused) == 1  # only zenodo's was refused: arXiv is another server
    assert "another harvest is listing records from zenodo.org" in str(refused[0])


@pytest.fixture
def slow_endpoint():
    with OAIEndpoint(page_size=2) as endpoint:
        # every request answers slowly: two sweeps at once would overlap
        endpoint.faults = Faults(slow_on={n: 0.05 for n in range(1, 200)})
        yield endpoint


def test_two_harvesters_of_one_server_never_send_requests_at_once(
    settings: Settings, slow_endpoint: OAIEndpoint
) -> None:
    for harvester_id in ("first", "second"):
        register(settings, slow_endpoint.base_url, harvester_id=harvester_id)
    reports: dict[str, int] = {}

    def harvest(harvester_id: str) -> None:
        with Services(settings) as services:
            scope = HarvestScope.adhoc(harvester_id, None, None)
            reports[harvester_id] = run_harvest(services, scope, RunOptions()).harvested

    threads = [threading.Thread(target=harvest, args=(h,)) for h in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    listed = [r for r in slow_endpoint.records() if "oai_datacite" in r.metadata]
    assert reports["first"] == reports["second"] == len(listed) > 0
    assert slow_endpoint.max_in_flight == 1
