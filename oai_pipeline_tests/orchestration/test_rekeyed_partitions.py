"""A window harvested before `harvesters rekey` keeps Parquet partitions of the old identifiers.

Before, a downstream step of such a window run after the rekey (automation, a re-execution from
failure, a materialisation from the UI) read them as they were: transformed_records saved harvest
records under the old identifiers beside the rewritten ones (a rerun of the rekey then refused,
a reconcile found them vanished), sync_decisions planned every record as new, written_records
reported them `already_written` although none was written, and the harvest run the rekey had
superseded became `failed` again, which the next harvest resumes from the old identifiers'
resumption token. Now the step refuses the window, naming the rekey, and leaves everything
as it was; materialising raw_oai_xml of the window again lists the new identifiers.
"""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg
import pytest

from oai_pipeline.defs import assets
from oai_pipeline.defs.assets import harvest_assets, sync_decisions, written_records
from oai_pipeline.defs.assets import transformed_records as transformed
from oai_pipeline.defs.harvester_runs import DagsterRuns
from oai_pipeline.defs.partitions import ensure_harvester_partitions
from oai_pipeline.identifier_prefix import RekeyRefused
from oai_pipeline.pipeline.rekey import rekey
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.records import EndpointRecord
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline_tests.orchestration.dagster_runs import (
    a_window_whose_write_failed,
    materialise_window,
    step_errors,
    window_records,
)
from oai_pipeline_tests.support import register, target_by_source

OLD = "oai:old.example.org:"
NEW = "oai:repo.example.org:"
HARVESTER = "dspace"
WINDOW = "2024-01-03"
RECORDS = 5


def handle_records(prefix: str) -> list[EndpointRecord]:
    """Records without a DOI, all in WINDOW, identified by handle."""
    return window_records(f"{prefix}123456789/", RECORDS, "Thesis")


def materialise(instance: dg.DagsterInstance, selection: list) -> dg.ExecuteInProcessResult:
    return materialise_window(instance, selection, HARVESTER, WINDOW)


def state_identifiers(settings: Settings) -> list[str]:
    with Services(settings) as services:
        listed = services.state.list_records(harvester_id=HARVESTER, limit=1000)
    return sorted(record["identifier"] for record in listed)


@pytest.fixture
def harvested_then_rekeyed(
    instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> Iterator[int]:
    """The window harvested from the old host, its written_records failed (the target was
    down); the source moved and the harvester was rekeyed (its failed run superseded).
    Yields that harvest run's id."""
    first = a_window_whose_write_failed(
        instance, settings, monkeypatch, handle_records(OLD), HARVESTER, WINDOW
    )
    with Services(settings) as services:
        [run] = services.state.runs_of_dagster_run(first.run_id)
        report = rekey(
            services, HARVESTER, OLD, NEW, supersede_runs=True, orchestrator=DagsterRuns(instance)
        )
    assert report.rewritten == {"target": 0, "state": RECORDS}
    assert report.superseded_runs == [run["id"]]
    # the report names the window whose Parquet holds the old identifiers
    assert report.to_dict()["stale_windows"] == [WINDOW]
    yield run["id"]


@pytest.mark.parametrize(
    "selection",
    [[transformed, sync_decisions, written_records], [written_records]],
    ids=["from_transformed_records", "written_records_only"],
)
def test_a_step_after_a_rekey_refuses_the_windows_partitions_of_old_identifiers(
    instance: dg.DagsterInstance,
    settings: Settings,
    harvested_then_rekeyed: int,
    selection: list,
) -> None:
    again = materialise(instance, selection)

    assert not again.success
    [error] = step_errors(again)
    assert f"of {HARVESTER} {WINDOW} was made before the harvester's identifiers" in error
    assert f"rekeyed from {OLD!r} to {NEW!r}" in error
    assert "Materialise raw_oai_xml of these windows again" in error
    # nothing changed: no harvest record of an old identifier, the superseded run left so
    expected = [f"{NEW}123456789/{n}" for n in range(RECORDS)]
    assert state_identifiers(settings) == expected
    with Services(settings) as services:
        assert services.state.get_run(harvested_then_rekeyed)["status"] == "stopped"
    assert target_by_source(settings, HARVESTER) == {}

    # What the message says to do: the window listed again, from the moved source.
    with OAIEndpoint(handle_records(NEW), page_size=3) as new_host:
        register(settings, new_host.base_url, harvester_id=HARVESTER, metadata_prefix="oai_dc")
        listed_again = materialise(instance, harvest_assets)
    assert listed_again.success, step_errors(listed_again)
    assert sorted(target_by_source(settings, HARVESTER)) == expected  # each once
    assert state_identifiers(settings) == expected


def test_rekey_of_a_run_waiting_for_its_downstream_steps_says_what_to_do_and_may_supersede_it(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    """A Dagster run of raw_oai_xml alone succeeds and leaves its harvest run `running`: the
    downstream steps of its windows finish it. Before, rekey refused it as running ("neither
    failed nor canceled, nor its process found gone") even with --supersede-runs, and did not
    say what to do. Now it says (materialise the assets after raw_oai_xml of its window, or
    supersede it), and --supersede-runs supersedes it: its windows' partitions hold the old
    identifiers, which a harvest after the rekey lists again."""
    with OAIEndpoint(handle_records(OLD), page_size=3) as old_host:
        register(settings, old_host.base_url, harvester_id=HARVESTER, metadata_prefix="oai_dc")
        ensure_harvester_partitions(instance, [HARVESTER])
        harvested = materialise(instance, [assets.raw_oai_xml])
    assert harvested.success
    with Services(settings) as services:
        [run] = services.state.runs_of_dagster_run(harvested.run_id)
        assert run["status"] == "running"
        with pytest.raises(RekeyRefused) as refused:
            rekey(services, HARVESTER, OLD, NEW, orchestrator=DagsterRuns(instance))
        report = rekey(
            services, HARVESTER, OLD, NEW, supersede_runs=True, orchestrator=DagsterRuns(instance)
        )
        superseded = services.state.get_run(run["id"])

    message = str(refused.value)
    assert f"harvest run {run['id']}" in message and harvested.run_id in message
    assert "succeeded" in message and "transformed_records" in message
    assert "--supersede-runs" in message and "nothing was changed" in message
    assert report.superseded_runs == [run["id"]]
    assert report.rewritten == {"target": 0, "state": RECORDS}  # its staged records
    assert superseded["status"] == "stopped" and superseded["error"].startswith("superseded")

    # the window listed again under the new identifiers, written once each
    with OAIEndpoint(handle_records(NEW), page_size=3) as new_host:
        register(settings, new_host.base_url, harvester_id=HARVESTER, metadata_prefix="oai_dc")
        listed_again = materialise(instance, harvest_assets)
    assert listed_again.success, step_errors(listed_again)
    expected = [f"{NEW}123456789/{n}" for n in range(RECORDS)]
    assert sorted(target_by_source(settings, HARVESTER)) == expected


def test_the_write_of_a_window_is_refused_while_a_rekey_of_its_harvester_is_pending(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    """A rekey killed before its state store's rewrite may have left the target under the new
    prefix and the state store under the old one: written_records of a window planned before
    it would create each record anew under the old identifier. Refused, naming the rekey and
    what finishes it; nothing is written."""
    with OAIEndpoint(handle_records(OLD), page_size=3) as old_host:
        register(settings, old_host.base_url, harvester_id=HARVESTER, metadata_prefix="oai_dc")
        ensure_harvester_partitions(instance, [HARVESTER])
        planned = materialise(instance, [assets.raw_oai_xml, transformed, sync_decisions])
    assert planned.success, step_errors(planned)
    with Services(settings) as services:
        services.state.begin_rekey(HARVESTER, OLD, NEW)  # as a rekey killed in its targets

    refused = materialise(instance, [written_records])

    assert not refused.success
    [error] = step_errors(refused)
    assert f"write refused: the rekey of harvester {HARVESTER} from {OLD!r} to {NEW!r}" in error
    assert f"--from-prefix {OLD} --to-prefix {NEW}`" in error
    assert target_by_source(settings, HARVESTER) == {}
