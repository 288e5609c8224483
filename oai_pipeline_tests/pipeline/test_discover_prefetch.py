"""discover with the next page fetched ahead: a run that stops early (cap, an error while
staging) keeps the checkpoint of the last page it was handed and leaves no thread behind."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from oai_pipeline.pipeline.discover import discover
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.scope import HarvestScope, Window
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.records import GENERATED_START, generate_datacite_records
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline_tests.support import raise_on_call, register

RECORDS = generate_datacite_records(300, span_days=5, prefixes=("oai_datacite",))
SCOPE = HarvestScope(
    "sample", (Window("all", GENERATED_START, GENERATED_START + timedelta(days=5)),)
)


def ahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("oai-ahead")]


def list_tokens(endpoint: OAIEndpoint) -> list[str | None]:
    return [r.get("resumptionToken") for r in endpoint.requests if r.get("verb") == "ListRecords"]


def test_a_cap_reached_mid_sweep_keeps_the_checkpoint_of_the_last_page_staged(
    settings: Settings,
) -> None:
    with OAIEndpoint(RECORDS, page_size=50) as endpoint, Services(settings) as services:
        register(settings, endpoint.base_url, metadata_prefix="oai_datacite")
        result = discover(services, SCOPE, RunOptions(max_records=120), progress=lambda _m: None)
        assert result.cap_reached and result.counters["staged"] == 120
        # The cap is reached on page three; page four was (being) fetched ahead, but its
        # checkpoint was never saved: a resumed run starts at page three again.
        checkpoint = services.state.get_run(result.run_id)["checkpoint"]
        assert checkpoint.pages_read == 2
        assert checkpoint.resumption_token == list_tokens(endpoint)[2]
        assert not ahead_threads()


def test_an_error_while_staging_keeps_the_checkpoint_and_leaves_no_thread(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OAIEndpoint(RECORDS, page_size=50) as endpoint, Services(settings) as services:
        register(settings, endpoint.base_url, metadata_prefix="oai_datacite")
        raise_on_call(monkeypatch, services.state, "stage", 2, RuntimeError("disk full"))
        with pytest.raises(RuntimeError, match="disk full"):
            discover(services, SCOPE, RunOptions(), progress=lambda _m: None)
        assert not ahead_threads()
        (run,) = services.state.list_runs(harvester_id="sample")
        assert run["checkpoint"].pages_read == 1
        assert run["checkpoint"].resumption_token == list_tokens(endpoint)[1]
        assert run["staged"] == 50
