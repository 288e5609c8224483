"""A run whose process was killed is marked failed, so its harvester is not blocked for good."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import dagster as dg
from dagster._core.definitions.policy import calculate_delay
from dagster._core.storage.tags import PARENT_RUN_ID_TAG, ROOT_RUN_ID_TAG

from oai_pipeline.definitions import defs
from oai_pipeline.defs.assets import TRANSIENT_RETRY
from oai_pipeline.defs.dead_runs import QUIET_FOR, WORKER_TAG, dead_runs
from oai_pipeline.defs.launch import HARVESTER_TAG, materialize_windows
from oai_pipeline.defs.schedules import busy_harvesters
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline_tests.support import register, shifted_sample_records


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _started_run(instance: dg.DagsterInstance, pid: int) -> dg.DagsterRun:
    run = dg.DagsterRun(
        job_name="harvest_job",
        status=dg.DagsterRunStatus.STARTED,
        tags={HARVESTER_TAG: "alpha", WORKER_TAG: f"{socket.gethostname()}:{pid}:nonce"},
    )
    instance.add_run(run)
    return run


def _status(instance: dg.DagsterInstance, run: dg.DagsterRun) -> dg.DagsterRunStatus:
    return instance.get_run_by_id(run.run_id).status


def test_each_step_names_its_process_on_the_run(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    with OAIEndpoint(shifted_sample_records(), page_size=3) as endpoint:
        register(settings, endpoint.base_url, harvester_id="alpha", metadata_prefix="oai_datacite")
        result = materialize_windows(instance, "alpha", "2024-01-02", "2024-01-04")
    assert result.success
    host, pid, *_ = instance.get_run_by_id(result.run_id).tags[WORKER_TAG].split(":")
    assert (host, int(pid)) == (socket.gethostname(), os.getpid())


def test_a_started_run_whose_process_is_gone_is_found_once_quiet(
    instance: dg.DagsterInstance,
) -> None:
    dead = _started_run(instance, _dead_pid())
    alive = _started_run(instance, os.getpid())
    instance.report_engine_event("step started", dead)  # it logged something just now

    now = datetime.now(UTC)
    assert dead_runs(instance, now) == []  # maybe between two steps: not yet
    later = now + QUIET_FOR + timedelta(seconds=5)
    assert [run.run_id for run in dead_runs(instance, later)] == [dead.run_id]
    assert alive.run_id not in {run.run_id for run in dead_runs(instance, later)}


def test_the_sensor_marks_a_dead_run_failed_and_frees_its_harvester(
    instance: dg.DagsterInstance,
) -> None:
    dead = _started_run(instance, _dead_pid())  # no event at all: quiet
    alive = _started_run(instance, os.getpid())
    assert busy_harvesters(instance) == {"alpha"}

    sensor = defs.resolve_sensor_def("dead_run_sensor")
    sensor.evaluate_tick(dg.build_sensor_context(instance=instance))

    assert _status(instance, dead) is dg.DagsterRunStatus.FAILURE
    assert _status(instance, alive) is dg.DagsterRunStatus.STARTED
    failure = instance.get_records_for_run(
        dead.run_id, of_type=dg.DagsterEventType.RUN_FAILURE
    ).records
    assert "is gone" in failure[0].event_log_entry.message

    instance.report_run_failed(alive)
    assert busy_harvesters(instance) == set()


def test_a_run_waiting_for_a_step_retry_is_not_taken_for_dead() -> None:
    """While a step waits for its retry, its process has ended and the run logs nothing:
    the quiet a dead run needs is longer than the longest wait of the retry policy."""
    policy = TRANSIENT_RETRY
    longest = max(
        calculate_delay(attempt, policy.backoff, policy.jitter, policy.delay or 0)
        for attempt in range(1, policy.max_retries + 1)
    )
    assert QUIET_FOR.total_seconds() >= longest + 60


def test_a_reexecution_is_not_taken_for_dead_by_its_parents_process(
    instance: dg.DagsterInstance,
) -> None:
    """A re-execution from the UI copies its parent's tags, the parent's worker among them:
    until a step of its own starts (it may wait long for a pool slot), the tag names the
    parent's process, which is gone."""
    parent = _started_run(instance, _dead_pid())
    instance.report_run_failed(parent)
    child = dg.DagsterRun(
        job_name="harvest_job",
        status=dg.DagsterRunStatus.STARTED,
        tags={**parent.tags, PARENT_RUN_ID_TAG: parent.run_id, ROOT_RUN_ID_TAG: parent.run_id},
    )
    instance.add_run(child)
    later = datetime.now(UTC) + QUIET_FOR + timedelta(seconds=5)

    assert dead_runs(instance, later) == []

    # a step of its own started in a process that then died: found as any other run
    instance.add_run_tags(child.run_id, {WORKER_TAG: f"{socket.gethostname()}:{_dead_pid()}:n"})
    assert [run.run_id for run in dead_runs(instance, later)] == [child.run_id]
