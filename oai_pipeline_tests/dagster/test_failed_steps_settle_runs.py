"""A Dagster step that fails ends its harvest run as failed itself, with the error: the
failure sensor (a daemon that may not run, or run minutes later) is no longer what tells
`status` the run is not going on. The re-execution from failure resumes it."""

from __future__ import annotations

import errno

import dagster as dg
import pytest

from oai_pipeline.defs.assets import TRANSIENT_RETRY, step_error_text
from oai_pipeline.defs.launch import range_tags
from oai_pipeline.defs.partitions import (
    RANGE_END_TAG,
    RANGE_START_TAG,
    ensure_harvester_partitions,
    partition_key,
)
from oai_pipeline.defs.sensors import RUN_CANCELED
from oai_pipeline.pipeline.frames import TRANSFORMED_RECORDS
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline.state.store import StateStore
from oai_pipeline.storage import PartitionStore
from oai_pipeline_tests.orchestration.dagster_runs import failure_sensor
from oai_pipeline_tests.state.test_store import new_run
from oai_pipeline_tests.support import live_records, register, target_by_source

PREFIX = "oai_datacite"
IN_PROCESS = {"execution": {"config": {"in_process": {}}}}
FIRST, LAST = "2024-01-03", "2024-01-12"


def harvest_job() -> dg.JobDefinition:
    from oai_pipeline.definitions import defs

    return defs.resolve_job_def("harvest")


def _run(instance: dg.DagsterInstance, **kwargs: object) -> dg.ExecuteInProcessResult:
    return dg.execute_job(
        dg.reconstructable(harvest_job),
        instance,
        run_config=IN_PROCESS,
        tags=range_tags("sample", FIRST, LAST),
        raise_on_error=False,
        **kwargs,
    )


def test_a_step_failed_on_a_full_disk_fails_its_run_and_a_reexecution_resumes_it(
    instance: dg.DagsterInstance,
    settings: Settings,
    endpoint: OAIEndpoint,
    records: list,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    register(settings, endpoint.base_url, metadata_prefix=PREFIX)
    ensure_harvester_partitions(instance, ["sample"])
    write_local = PartitionStore._write_local

    def full_for_transforms(store: PartitionStore, folder: str, name: str, data: bytes) -> None:
        if TRANSFORMED_RECORDS in folder:
            raise OSError(errno.ENOSPC, "No space left on device", f"{folder}/{name}")
        write_local(store, folder, name, data)

    with monkeypatch.context() as patched:
        patched.setattr(PartitionStore, "_write_local", full_for_transforms)
        failed = _run(instance)

    assert not failed.success
    [step] = [e.step_key for e in failed.all_events if e.is_step_failure]
    assert step == "transformed_records"
    with Services(settings) as services:
        [run] = services.state.runs_of_dagster_run(failed.run_id)
    assert run["status"] == "failed"  # before: `running` until the failure sensor ran
    assert "No space left on device" in run["error"]
    assert run["finished_at"] is not None

    again = _run(
        instance, reexecution_options=dg.ReexecutionOptions.from_failure(failed.run_id, instance)
    )

    assert again.success
    with Services(settings) as services:
        resumed = services.state.get_run(run["id"])
    assert resumed["status"] == "succeeded"
    in_windows = [
        r for r in live_records(records, PREFIX) if FIRST <= r.datestamp.date().isoformat() <= LAST
    ]
    assert in_windows
    assert {r.identifier for r in in_windows} <= set(target_by_source(settings, "sample"))


def test_a_step_dagster_retries_leaves_its_run_running_until_the_last_attempt_fails(
    instance: dg.DagsterInstance,
    settings: Settings,
    endpoint: OAIEndpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A transient error (a disk's I/O error, a network hiccup) fails the step, and Dagster
    retries it (RetryPolicy): between the attempts `status` showed the run `failed`, then
    `running` again. It stays `running`, saying which attempt failed and why, and ends
    `failed` once the last attempt fails."""
    register(settings, endpoint.base_url, metadata_prefix=PREFIX)
    ensure_harvester_partitions(instance, ["sample"])
    write_local = PartitionStore._write_local
    resume_run = StateStore.resume_run
    between_attempts: list[tuple[str, str | None]] = []

    def failing_transforms(store: PartitionStore, folder: str, name: str, data: bytes) -> None:
        if TRANSFORMED_RECORDS in folder:
            raise OSError(errno.EIO, "Input/output error", f"{folder}/{name}")
        write_local(store, folder, name, data)

    def seen_as_resumed(state: StateStore, run_id: int, *args: object, **kwargs: object) -> None:
        run = state.get_run(run_id)
        assert run is not None
        between_attempts.append((run["status"], run["error"]))
        resume_run(state, run_id, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(PartitionStore, "_write_local", failing_transforms)
        patched.setattr(StateStore, "resume_run", seen_as_resumed)
        patched.setattr(dg.RetryPolicy, "calculate_delay", lambda policy, attempt: 0)
        failed = _run(instance)

    assert not failed.success
    retries = TRANSIENT_RETRY.max_retries
    assert len([e for e in failed.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]) == (
        retries
    )
    first, *retried = between_attempts
    assert first == ("running", None)  # the transform's first attempt
    assert [status for status, _ in retried] == ["running"] * retries
    for attempt, (_, error) in enumerate(retried, start=1):
        assert error is not None and "Input/output error" in error
        assert f"attempt {attempt} of {retries + 1} failed; Dagster retries the step" in error
    with Services(settings) as services:
        [run] = services.state.runs_of_dagster_run(failed.run_id)
    assert run["status"] == "failed"
    assert run["error"].startswith("OSError: [Errno 5] Input/output error")


def test_a_step_over_several_harvesters_gives_each_harvest_run_its_own_error(
    instance: dg.DagsterInstance,
    settings: Settings,
    endpoint: OAIEndpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step covering several harvesters (a UI backfill over alpha and beta) fails once, its
    description all harvesters' errors. A harvest run the step could not end itself (the
    state database away at the time) is ended by the failure sensor: it read all of them,
    `alpha: …; beta: …`, where its own harvester's error is its own."""
    for harvester_id in ("alpha", "beta"):
        register(
            settings,
            endpoint.base_url,
            harvester_id=harvester_id,
            metadata_prefix=f"{harvester_id}_format",
        )
    ensure_harvester_partitions(instance, ["alpha", "beta"])
    with monkeypatch.context() as patched:
        patched.setattr(Services, "record_failure", lambda services, run_id, error: None)
        failed = dg.execute_job(
            dg.reconstructable(harvest_job),
            instance,
            run_config=IN_PROCESS,
            tags={
                RANGE_START_TAG: str(partition_key("alpha", FIRST)),
                RANGE_END_TAG: str(partition_key("beta", FIRST)),
            },
            raise_on_error=False,
        )
    assert not failed.success
    [step] = [e for e in failed.all_events if e.is_step_failure]
    description = step.step_failure_data.user_failure_data.description
    assert "alpha_format" in description and "beta_format" in description

    failure_sensor(instance, failed.run_id)

    with Services(settings) as services:
        runs = {
            run["harvester_id"]: run for run in services.state.runs_of_dagster_run(failed.run_id)
        }
    for own, other in (("alpha", "beta"), ("beta", "alpha")):
        error = runs[own]["error"]
        assert runs[own]["status"] == "failed"
        assert error.startswith("raw_oai_xml: ") and f"{own}_format" in error
        assert f"{other}_format" not in error and f"{other}: " not in error


def test_a_step_stopped_by_terminate_says_its_dagster_run_was_canceled(settings: Settings) -> None:
    """The step's interrupt is recorded before the canceled sensor runs: it says what the sensor
    would, not `DagsterExecutionInterruptedError` (live: `test_live_dagster.py`'s Terminate)."""
    with Services(settings) as services:
        services.error_text = step_error_text  # as the steps set it
        terminated, failed = new_run(services.state), new_run(services.state)
        services.record_failure(terminated, dg.DagsterExecutionInterruptedError())
        services.record_failure(failed, ValueError("bad page"))

        stopped = services.state.get_run(terminated)
        assert (stopped["status"], stopped["error"]) == ("stopped", RUN_CANCELED)
        assert services.state.get_run(failed)["error"] == "ValueError: bad page"
