"""Dagster runs as the run coordinator and the daemon leave them, and a window's assets run in
process with the sensors' ticks that follow."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest

from oai_pipeline.definitions import defs
from oai_pipeline.defs.assets import harvest_assets
from oai_pipeline.defs.launch import range_tags
from oai_pipeline.defs.resources import HarvestOptions, PipelineResource
from oai_pipeline.sample_endpoint.records import EndpointRecord
from oai_pipeline.settings import Settings
from oai_pipeline_tests.support import oai_dc, register


def add_queued_run(instance: dg.DagsterInstance, tags: Mapping[str, str]) -> dg.DagsterRun:
    """A run of the code location waiting in the queue, as the run coordinator leaves it."""
    from dagster._core.remote_origin import (
        RegisteredCodeLocationOrigin,
        RemoteJobOrigin,
        RemoteRepositoryOrigin,
    )

    location = RegisteredCodeLocationOrigin("oai_pipeline.definitions")
    origin = RemoteJobOrigin(RemoteRepositoryOrigin(location, "__repository__"), "harvest")
    return instance.add_run(
        dg.DagsterRun(
            job_name="harvest",
            tags=dict(tags),
            status=dg.DagsterRunStatus.QUEUED,
            remote_job_origin=origin,
        )
    )


def materialise_window(
    instance: dg.DagsterInstance, selection: list, harvester_id: str, window: str
) -> dg.ExecuteInProcessResult:
    """The selected harvest assets of one window, as a run from the UI; failures returned."""
    return dg.materialize(
        harvest_assets,
        selection=selection,
        instance=instance,
        resources={"pipeline": PipelineResource(), "harvest_options": HarvestOptions()},
        tags=range_tags(harvester_id, window, window),
        raise_on_error=False,
    )


def run_status_sensor(
    instance: dg.DagsterInstance,
    name: str,
    run_id: str,
    event_type: dg.DagsterEventType = dg.DagsterEventType.RUN_FAILURE,
) -> None:
    """One evaluation of the run status sensor `name` for the run's `event_type` event (by
    default the failure sensor's: the run's harvest runs become `failed`)."""
    [event] = instance.get_records_for_run(run_id, of_type=event_type).records
    sensor = defs.resolve_sensor_def(name)
    context = dg.build_run_status_sensor_context(
        sensor_name=sensor.name,
        dagster_event=event.event_log_entry.dagster_event,
        dagster_instance=instance,
        dagster_run=instance.get_run_by_id(run_id),
        resources=defs.resources,
    )
    failed = event_type is dg.DagsterEventType.RUN_FAILURE
    sensor(context.for_run_failure() if failed else context)


def step_errors(result: dg.ExecuteInProcessResult) -> list[str]:
    return [
        event.step_failure_data.error.message
        for event in result.all_events
        if event.is_step_failure
    ]


def window_records(prefix: str, count: int, title: str) -> list[EndpointRecord]:
    """`count` oai_dc records without a DOI, `{prefix}{n}`, all on 2024-01-03 (one window):
    nothing but the identifier says which is which."""
    stamp = datetime(2024, 1, 3, 10, tzinfo=UTC)
    return [
        EndpointRecord(
            identifier=f"{prefix}{n}",
            datestamp=stamp + timedelta(minutes=n),
            metadata={"oai_dc": oai_dc(f"{title} {n}").encode()},
        )
        for n in range(count)
    ]


def failure_sensor(instance: dg.DagsterInstance, run_id: str) -> None:
    """The failure sensor's tick for the failed run: its harvest runs become `failed`."""
    run_status_sensor(instance, "harvest_failure_sensor", run_id)


def a_window_whose_write_failed(
    instance: dg.DagsterInstance,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    records: list[EndpointRecord],
    harvester_id: str,
    window: str,
) -> dg.ExecuteInProcessResult:
    """The window harvested from a server serving `records` (gone afterwards), its
    written_records failed (the target was down) and the failure sensor's tick after it: its
    harvest run is `failed`, its raw and transformed Parquet written."""
    from oai_pipeline.defs import assets
    from oai_pipeline.defs.partitions import ensure_harvester_partitions
    from oai_pipeline.errors import PipelineError
    from oai_pipeline.sample_endpoint.server import OAIEndpoint

    def target_down(*args: object, **kwargs: object) -> None:
        raise PipelineError("the target is down")

    with OAIEndpoint(records, page_size=3) as server:
        register(settings, server.base_url, harvester_id=harvester_id, metadata_prefix="oai_dc")
        ensure_harvester_partitions(instance, [harvester_id])
        with monkeypatch.context() as patch:
            patch.setattr(assets, "write", target_down)
            first = materialise_window(instance, harvest_assets, harvester_id, window)
    assert not first.success
    failure_sensor(instance, first.run_id)
    return first
