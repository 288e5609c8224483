"""A failed range run re-executed from the UI (from failure, all steps) after later runs."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from datetime import UTC, datetime

import dagster as dg
import pytest

from oai_pipeline.defs import assets
from oai_pipeline.defs.launch import materialize_windows, range_tags
from oai_pipeline.defs.partitions import ensure_harvester_partitions
from oai_pipeline.errors import PipelineError
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.records import EndpointRecord, records_for_prefix
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.dagster_results import run_totals
from oai_pipeline_tests.support import register, shifted_sample_records, target_by_source

PREFIX = "oai_datacite"
IN_PROCESS = {"execution": {"config": {"in_process": {}}}}


def harvest_job() -> dg.JobDefinition:
    """The `harvest` job of the code location, as the UI launches and re-executes it."""
    from oai_pipeline.definitions import defs

    return defs.resolve_job_def("harvest")


@pytest.fixture
def endpoint() -> Iterator[OAIEndpoint]:
    with OAIEndpoint(shifted_sample_records(), page_size=3) as endpoint:
        yield endpoint


def _live_in(endpoint: OAIEndpoint, first: str, last: str) -> list[EndpointRecord]:
    return [
        r
        for r in records_for_prefix(endpoint.records(), PREFIX)
        if not r.deleted and first <= r.datestamp.date().isoformat() <= last
    ]


def _retitled(record: EndpointRecord, title: str, when: datetime) -> EndpointRecord:
    xml = record.metadata[PREFIX].decode()
    changed = re.sub(r"(<title(?: [^>]*)?>)[^<]*", rf"\g<1>{title}", xml, count=1)
    assert changed != xml
    return dataclasses.replace(
        record, datestamp=when, metadata={**record.metadata, PREFIX: changed.encode()}
    )


# The stage function each asset calls, by the asset's name.
STAGES = {"transformed_records": "transform", "written_records": "write"}


def _failed_range_run(
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
    first: str,
    last: str,
    step: str,
) -> str:
    """A range run of the harvest job whose `step` fails (e.g. the target was down): the
    assets before it are materialised."""

    def down(*_args: object, **_kwargs: object) -> None:
        raise PipelineError(f"{step} cannot run: a service is down")

    with monkeypatch.context() as patch:
        patch.setattr(assets, STAGES[step], down)
        result = dg.execute_job(
            dg.reconstructable(harvest_job),
            instance,
            run_config=IN_PROCESS,
            tags=range_tags("alpha", first, last),
            raise_on_error=False,
        )
    assert not result.success
    [failed] = [e.step_key for e in result.all_events if e.is_step_failure]
    assert failed == step
    return result.run_id


@pytest.mark.parametrize(
    ("step", "strategy"),
    [
        ("written_records", "from_failure"),
        ("written_records", "all_steps"),
        ("transformed_records", "from_failure"),
    ],
)
def test_a_reexecuted_run_does_not_roll_back_what_a_later_run_wrote(
    instance: dg.DagsterInstance,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    endpoint: OAIEndpoint,
    step: str,
    strategy: str,
) -> None:
    """Run 1 (windows 01-02 .. 01-06) fails at `step`; meanwhile the source changes one of
    its records and deletes another, and run 2 (an incremental run of 01-15) writes both.
    Re-executing run 1 must not write its older copies over run 2's, neither to the target
    nor to the harvest records (whose data brings back a record edited locally)."""
    register(settings, endpoint.base_url, harvester_id="alpha", metadata_prefix=PREFIX)
    ensure_harvester_partitions(instance, ["alpha"])
    first_run = _failed_range_run(instance, monkeypatch, "2024-01-02", "2024-01-06", step)
    changed, deleted = _live_in(endpoint, "2024-01-02", "2024-01-06")[:2]
    later = datetime(2024, 1, 15, 9, tzinfo=UTC)
    endpoint.upsert(_retitled(changed, "Changed at the source", later))
    endpoint.mark_deleted(deleted.identifier, at=later)
    assert materialize_windows(instance, "alpha", "2024-01-15", "2024-01-15").success
    assert target_by_source(settings, "alpha")[changed.identifier]["data"]["metadata"]["title"] == (
        "Changed at the source"
    )
    assert deleted.identifier not in target_by_source(settings, "alpha")

    options = (
        dg.ReexecutionOptions.from_failure(first_run, instance)
        if strategy == "from_failure"
        else dg.ReexecutionOptions(parent_run_id=first_run)
    )
    again = dg.execute_job(
        dg.reconstructable(harvest_job),
        instance,
        run_config=IN_PROCESS,
        reexecution_options=options,
        # the UI gives a re-execution its parent's tags; this API takes them as given
        tags=range_tags("alpha", "2024-01-02", "2024-01-06"),
        raise_on_error=False,
    )

    assert again.success
    target = target_by_source(settings, "alpha")
    assert target[changed.identifier]["data"]["metadata"]["title"] == "Changed at the source"
    assert deleted.identifier not in target  # never created from run 1's live copy
    # every other record of run 1's windows is written
    others = {r.identifier for r in _live_in(endpoint, "2024-01-02", "2024-01-06")}
    assert others <= set(target)
    with Services(settings) as services:
        record = services.state.get_record(changed.identifier, "alpha")
    assert record["written_datestamp"] == "2024-01-15T09:00:00Z"
    assert record["data"]["metadata"]["title"] == "Changed at the source"
    if strategy == "from_failure":  # the plan made before run 2: both copies left out
        written = run_totals(again, "written_records")
        assert written["run_action_superseded_by_a_later_harvest"].value == 2


def _counts_by_window(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, int]:
    """Each window's `record_count` in the run's materialisations of `asset`."""
    return {
        m.metadata["window"].value: m.metadata["record_count"].value
        for m in result.asset_materializations_for_node(asset)
    }


def test_an_all_steps_reexecution_counts_a_moved_record_in_its_window_of_now(
    instance: dg.DagsterInstance,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    endpoint: OAIEndpoint,
) -> None:
    """Run 1 (01-02 .. 01-06) fails; the source changes one of its records and deletes
    another, which run 2 (01-15) harvests. Re-executing run 1 with all steps rebuilds its
    windows: the two records belong to 01-15 now and count there only, not also in one of
    run 1's windows."""
    register(settings, endpoint.base_url, harvester_id="alpha", metadata_prefix=PREFIX)
    ensure_harvester_partitions(instance, ["alpha"])
    first_run = _failed_range_run(
        instance, monkeypatch, "2024-01-02", "2024-01-06", "written_records"
    )
    changed, deleted = _live_in(endpoint, "2024-01-02", "2024-01-06")[:2]
    later = datetime(2024, 1, 15, 9, tzinfo=UTC)
    endpoint.upsert(_retitled(changed, "Changed at the source", later))
    endpoint.mark_deleted(deleted.identifier, at=later)
    second = materialize_windows(instance, "alpha", "2024-01-15", "2024-01-15")
    assert _counts_by_window(second, "raw_oai_xml") == {"2024-01-15": 2}

    again = dg.execute_job(
        dg.reconstructable(harvest_job),
        instance,
        run_config=IN_PROCESS,
        reexecution_options=dg.ReexecutionOptions(parent_run_id=first_run),
        tags=range_tags("alpha", "2024-01-02", "2024-01-06"),
        raise_on_error=False,
    )

    assert again.success
    now = {
        f"2024-01-0{day}": sum(
            1
            for r in records_for_prefix(endpoint.records(), PREFIX)
            if r.datestamp.date().isoformat() == f"2024-01-0{day}"
        )
        for day in range(2, 7)
    }
    for asset in ("raw_oai_xml", "transformed_records", "sync_decisions", "written_records"):
        assert _counts_by_window(again, asset) == now, asset


def test_a_reexecution_refuses_a_plan_made_for_other_writers_and_a_new_plan_writes_them(
    instance: dg.DagsterInstance,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    endpoint: OAIEndpoint,
) -> None:
    """Run 1 fails at written_records; the operator then gives the harvester a second
    writer (another community). The plan names writers by position: re-executed from
    failure, it would write as before and the new writer not at all, with the run a
    success. It fails naming what to do instead; materialising the plan again writes both."""
    register(settings, endpoint.base_url, harvester_id="alpha", metadata_prefix=PREFIX)
    ensure_harvester_partitions(instance, ["alpha"])
    EmbeddedRepository(settings.target_db_url).create_community("added")
    first_run = _failed_range_run(
        instance, monkeypatch, "2024-01-02", "2024-01-06", "written_records"
    )
    with Services(settings) as services:
        harvester = services.harvester("alpha")
        writers = [*harvester.writers, 'oai-service{model:"rdm", community:"added"}']
        services.state.save_harvester(harvester.model_copy(update={"writers": writers}))

    again = dg.execute_job(
        dg.reconstructable(harvest_job),
        instance,
        run_config=IN_PROCESS,
        reexecution_options=dg.ReexecutionOptions.from_failure(first_run, instance),
        tags=range_tags("alpha", "2024-01-02", "2024-01-06"),
        raise_on_error=False,
    )

    assert not again.success
    [failure] = [e for e in again.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message
    assert "the writers of harvester alpha changed since its sync_decisions were planned" in (
        message
    )
    assert "materialise sync_decisions again" in message
    assert target_by_source(settings, "alpha") == {}  # nothing written from the old plan

    assert materialize_windows(instance, "alpha", "2024-01-02", "2024-01-06").success
    target = target_by_source(settings, "alpha")
    live = {r.identifier for r in _live_in(endpoint, "2024-01-02", "2024-01-06")}
    assert set(target) == live
    assert all("added" in record["communities"] for record in target.values())
