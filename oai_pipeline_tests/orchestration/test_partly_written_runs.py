"""A harvest run whose Dagster run was killed, partly written meanwhile by a later Dagster run,
ends with the right status instead of `running` for ever."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta

import dagster as dg
import pytest

from oai_pipeline.definitions import defs
from oai_pipeline.defs import dead_runs
from oai_pipeline.defs.assets import harvest_assets, sync_decisions, written_records
from oai_pipeline.defs.assets import transformed_records as transformed
from oai_pipeline.defs.launch import range_tags
from oai_pipeline.defs.partitions import ensure_harvester_partitions
from oai_pipeline.defs.resources import HarvestOptions, PipelineResource
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline_tests.orchestration.dagster_runs import run_status_sensor
from oai_pipeline_tests.support import register, shifted_sample_records

# A range run of the harvester whose process is SIGKILLed as its first downstream step
# starts: its raw_oai_xml is materialised, its harvest run left `running`, and the Dagster
# run STARTED, as after `kill -9` or the OOM killer.
KILLED_AT_TRANSFORM = """
import os, signal, sys
import dagster as dg
from oai_pipeline.defs import assets
from oai_pipeline.defs.launch import materialize_windows

assets.transform = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)
with dg.DagsterInstance.local_temp(sys.argv[1]) as instance:
    materialize_windows(instance, "alpha", sys.argv[2], sys.argv[3])
"""


@pytest.fixture
def instance(persistent_instance: dg.DagsterInstance) -> dg.DagsterInstance:
    """On disk: a child process runs a job on it."""
    return persistent_instance


@pytest.fixture
def endpoint() -> Iterator[OAIEndpoint]:
    with OAIEndpoint(shifted_sample_records(), page_size=3) as endpoint:
        yield endpoint


def _killed_range_run(instance: dg.DagsterInstance, first: str, last: str) -> dg.DagsterRun:
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AT_TRANSFORM, instance.root_directory, first, last],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    [run] = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
    return run


def _downstream(
    instance: dg.DagsterInstance, first: str, last: str, assets: list | None = None
) -> dg.ExecuteInProcessResult:
    """A later run of the downstream `assets` (default: all three) over some windows (say,
    from the UI)."""
    return dg.materialize(
        harvest_assets,
        selection=assets or [transformed, sync_decisions, written_records],
        instance=instance,
        resources={"pipeline": PipelineResource(), "harvest_options": HarvestOptions()},
        tags=range_tags("alpha", first, last),
    )


def _dead_run_sensor_and_failure_sensor(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch, killed: dg.DagsterRun
) -> None:
    """The daemon's ticks once the killed run has been quiet long enough: the dead-run
    sensor marks it failed, the failure sensor records that on its harvest runs."""
    monkeypatch.setattr(dead_runs, "QUIET_FOR", timedelta(0))
    context = dg.build_sensor_context(instance=instance, resources=defs.resources)
    defs.resolve_sensor_def("dead_run_sensor").evaluate_tick(context)
    assert instance.get_run_by_id(killed.run_id).status is dg.DagsterRunStatus.FAILURE
    run_status_sensor(
        instance, "harvest_failure_sensor", killed.run_id, dg.DagsterEventType.RUN_FAILURE
    )


def _harvest_run(settings: Settings, run_id: int) -> dict:
    with Services(settings) as services:
        return services.state.get_run(run_id) | {"owed": services.state.records_owed(run_id)}


@pytest.mark.parametrize("sensors_first", [False, True])
def test_a_killed_run_partly_written_later_ends_failed(
    instance: dg.DagsterInstance,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    endpoint: OAIEndpoint,
    sensors_first: bool,
) -> None:
    """Run 1 (01-02 .. 01-06) is killed after harvesting; a later run writes 01-02 .. 01-03
    of it. Whether the sensors see the kill before or after that run, the harvest run ends
    failed (resumable, its other windows' records still to write), not running."""
    register(settings, endpoint.base_url, harvester_id="alpha", metadata_prefix="oai_datacite")
    ensure_harvester_partitions(instance, ["alpha"])
    killed = _killed_range_run(instance, "2024-01-02", "2024-01-06")
    with Services(settings) as services:
        [harvest_run] = services.state.runs_of_dagster_run(killed.run_id)
    assert harvest_run["status"] == "running"

    if sensors_first:
        _dead_run_sensor_and_failure_sensor(instance, monkeypatch, killed)
        assert _harvest_run(settings, harvest_run["id"])["status"] == "failed"
    assert _downstream(instance, "2024-01-02", "2024-01-03").success
    if not sensors_first:
        _dead_run_sensor_and_failure_sensor(instance, monkeypatch, killed)

    run = _harvest_run(settings, harvest_run["id"])
    assert run["owed"] > 0  # 01-04 .. 01-06 are not written
    assert run["status"] == "failed"
    assert run["finished_at"] is not None
    # What is left is written by materialising the rest: the run then succeeds.
    assert _downstream(instance, "2024-01-04", "2024-01-06").success
    run = _harvest_run(settings, harvest_run["id"])
    assert (run["status"], run["owed"]) == ("succeeded", 0)


def test_a_later_run_that_only_transforms_leaves_a_failed_run_failed(
    instance: dg.DagsterInstance,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    endpoint: OAIEndpoint,
) -> None:
    """The failure was recorded on run 1; a later Dagster run transforms 01-02 .. 01-03 again
    (no written_records step to end with): it took run 1 on, and when it succeeds, run 1 is
    failed again, not running."""
    register(settings, endpoint.base_url, harvester_id="alpha", metadata_prefix="oai_datacite")
    ensure_harvester_partitions(instance, ["alpha"])
    killed = _killed_range_run(instance, "2024-01-02", "2024-01-06")
    with Services(settings) as services:
        [harvest_run] = services.state.runs_of_dagster_run(killed.run_id)
    _dead_run_sensor_and_failure_sensor(instance, monkeypatch, killed)

    later = _downstream(instance, "2024-01-02", "2024-01-03", [transformed])
    assert later.success
    assert _harvest_run(settings, harvest_run["id"])["status"] == "running"  # taken on
    run_status_sensor(
        instance, "harvest_success_sensor", later.run_id, dg.DagsterEventType.RUN_SUCCESS
    )

    run = _harvest_run(settings, harvest_run["id"])
    assert run["status"] == "failed"
    assert f"the Dagster run {killed.run_id} failed before writing them" in run["error"]
