"""A harvest run a later harvest superseded stays superseded.

A harvest run is superseded (stopped, its error beginning "superseded") when a harvest of its
window after the source moved (`harvesters update --base-url`), after the harvester changed,
or over a larger window, or `harvesters rekey --supersede-runs`, replaces it: its resumption
token lists from the old server, the old prefix or the old identifiers. Before, any step that
took it up again made it `running` (StateStore.resume_run cleared its error): a re-execution
from failure of its old Dagster run, or a downstream step of its window materialised from
the UI or by automation, while the harvest that replaced it had failed before listing the
window again. A later failure then left it `failed` and resumable, and `harvest --resume`
resumed it from the old server's token. Now a step refuses the window, naming the run and why
it was superseded, and says what to do: materialise raw_oai_xml of the window again.
"""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg
import pytest

from oai_pipeline.defs import assets
from oai_pipeline.defs.assets import harvest_assets, raw_oai_xml, sync_decisions, written_records
from oai_pipeline.defs.assets import transformed_records as transformed
from oai_pipeline.errors import PipelineError
from oai_pipeline.pipeline import discover as discover_module
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.records import EndpointRecord
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline_tests.orchestration.dagster_runs import (
    a_window_whose_write_failed,
    failure_sensor,
    materialise_window,
    step_errors,
    window_records,
)
from oai_pipeline_tests.support import register, target_by_source

HARVESTER = "moved"
WINDOW = "2024-01-03"
RECORDS = 4


def records() -> list[EndpointRecord]:
    return window_records("oai:repo.example.org:", RECORDS, "Record")


def materialise(instance: dg.DagsterInstance, selection: list) -> dg.ExecuteInProcessResult:
    return materialise_window(instance, selection, HARVESTER, WINDOW)


def _refuse(*args: object, **kwargs: object) -> None:
    raise PipelineError("the new server refuses for now")


@pytest.fixture
def superseded_by_the_move(
    instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[int, OAIEndpoint]]:
    """The window harvested from the old server, its written_records failed (the target was
    down); the source moved, and the harvest of the window from the new server superseded
    that run, then failed before listing anything. Yields the superseded run's id and the
    new server (running)."""
    first = a_window_whose_write_failed(
        instance, settings, monkeypatch, records(), HARVESTER, WINDOW
    )
    with Services(settings) as services:
        [old_run] = services.state.runs_of_dagster_run(first.run_id)
    with OAIEndpoint(records(), page_size=3) as new_server:
        register(settings, new_server.base_url, harvester_id=HARVESTER, metadata_prefix="oai_dc")
        with monkeypatch.context() as patch:
            patch.setattr(discover_module, "_fetch", _refuse)
            moved = materialise(instance, [raw_oai_xml])
        assert not moved.success
        with Services(settings) as services:
            superseded = services.state.get_run(old_run["id"])
        assert superseded["status"] == "stopped"
        assert superseded["error"].startswith("superseded: the base URL changed")
        yield old_run["id"], new_server


@pytest.mark.parametrize(
    "selection",
    [[transformed, sync_decisions, written_records], [written_records]],
    ids=["from_transformed_records", "reexecution_of_the_failed_step"],
)
def test_a_step_of_a_superseded_runs_window_refuses_and_leaves_it_superseded(
    instance: dg.DagsterInstance,
    settings: Settings,
    superseded_by_the_move: tuple[int, OAIEndpoint],
    monkeypatch: pytest.MonkeyPatch,
    selection: list,
) -> None:
    run_id, _ = superseded_by_the_move
    with monkeypatch.context() as patch:
        patch.setattr(assets, "write", _refuse)  # the target still down: the step would fail
        again = materialise(instance, selection)

    assert not again.success
    [error] = step_errors(again)
    assert f"harvest run {run_id}" in error and "superseded: the base URL changed" in error
    assert "Materialise raw_oai_xml of these windows again" in error
    if again.run_id:
        failure_sensor(instance, again.run_id)
    with Services(settings) as services:
        run = services.state.get_run(run_id)
        assert run["status"] == "stopped" and run["error"].startswith("superseded")
        assert run_id not in [r["id"] for r in services.state.unfinished_runs(HARVESTER)]
    assert target_by_source(settings, HARVESTER) == {}

    # What the message says to do: the window listed again, from the new server.
    listed_again = materialise(instance, harvest_assets)
    assert listed_again.success, step_errors(listed_again)
    assert len(target_by_source(settings, HARVESTER)) == RECORDS
