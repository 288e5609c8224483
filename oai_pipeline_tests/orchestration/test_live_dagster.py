"""A real Dagster webserver and daemon: a year-long backfill of one harvester, `--use-job`, and runs
launched as the UI does.

`dagster dev` runs in its own process group with DAGSTER_HOME (the shipped dagster.yaml) and
OAI_PIPELINE_HOME in a temp dir; the harvester points at the shipped endpoint serving records
spread over 2024. The process group is killed at the end, whatever happened.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from oai_pipeline.defs.launch import HARVESTER_TAG, RANGE_END_TAG, RANGE_START_TAG, SOURCE_TAG
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.records import EndpointRecord, generate_datacite_records
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings, load_settings
from oai_pipeline.state.harvester_lock import source_key
from oai_pipeline_tests.orchestration.live_dagster import LiveDagster, wait_for
from oai_pipeline_tests.support import register, target_by_source

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

ASSETS = ["raw_oai_xml", "transformed_records", "sync_decisions", "written_records"]
YEAR = [date(2024, 1, 1) + timedelta(days=i) for i in range(366)]
PAGE_SIZE = 25
TERMINAL = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}


@dataclass
class Live:
    """The running Dagster, the source it harvests, and the data folder it writes."""

    dagster: LiveDagster
    endpoint: OAIEndpoint
    records: list[EndpointRecord]
    settings: Settings


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    records = generate_datacite_records(
        60,
        start=datetime(2024, 1, 1, tzinfo=UTC),
        span_days=366,
        prefixes=("oai_datacite",),
        deleted_fraction=0.05,
        seed=8,
    )
    assert {r.datestamp.year for r in records} == {2024}
    dagster = LiveDagster(tmp_path_factory.mktemp("live_dagster"))
    settings = load_settings({"OAI_PIPELINE_HOME": str(dagster.oai_home)})
    with OAIEndpoint(records, page_size=PAGE_SIZE) as endpoint:
        try:
            register(settings, endpoint.base_url, harvester_id="yearly")
            dagster.start()
            # the default-running hourly schedule must not add runs while we count them
            dagster.stop_schedule("incremental_harvest_schedule")
            # the registry sensor (running by default in the daemon) adds the partition
            wait_for(
                "the harvester_registry_sensor to add the harvester partition",
                lambda: "yearly" in dagster.dynamic_partitions("harvester"),
                timeout=60,
            )
            yield Live(dagster, endpoint, records, settings)
        finally:
            dagster.stop()


def _fail_with_log(live: Live, message: str) -> str:
    return f"{message}\n--- dagster dev log ---\n{live.dagster.log_tail()}"


def _ended(live: Live, run_id: str) -> str:
    """The status a run ends with (within a minute)."""
    return wait_for(
        f"run {run_id} to end",
        lambda: (
            (s := live.dagster.run(run_id)["status"]) in ("SUCCESS", "FAILURE", "CANCELED") and s
        ),
        timeout=60,
        every=0.5,
    )


def test_backfill_of_a_year_finishes_in_one_run_with_the_target_complete(live: Live) -> None:
    dagster = live.dagster
    requests_before = len(live.endpoint.requests)

    backfill_id = dagster.launch_asset_backfill(ASSETS, [f"yearly|{day}" for day in YEAR])
    try:
        status = wait_for(
            "the backfill to finish",
            lambda: (s := dagster.backfill_status(backfill_id)) in TERMINAL and s,
            timeout=240,
            every=2,
        )
    except TimeoutError as error:
        raise AssertionError(_fail_with_log(live, str(error))) from error

    assert status in ("COMPLETED", "COMPLETED_SUCCESS"), _fail_with_log(live, status)
    runs = dagster.runs({"dagster/backfill": backfill_id})
    # the single-run backfill policy: the whole year in one run, one ListRecords sweep
    assert len(runs) == 1, runs
    (run,) = runs
    assert run["status"] == "SUCCESS"
    assert run["tags"][RANGE_START_TAG] == "yearly|2024-01-01"
    assert run["tags"][RANGE_END_TAG] == "yearly|2024-12-31"
    sweep = [r for r in live.endpoint.requests[requests_before:] if r["verb"] == "ListRecords"]
    assert len(sweep) == -(-len(live.records) // PAGE_SIZE)  # pages of one sweep, not 366
    assert "from" not in sweep[0]  # the first window is open to the past
    assert sweep[0]["until"] == "2024-12-31T23:59:59Z"

    live_ids = {r.identifier for r in live.records if not r.deleted}
    deleted_ids = {r.identifier for r in live.records if r.deleted}
    target = target_by_source(live.settings, "yearly")
    assert set(target) == live_ids  # every live record, no deleted one
    assert deleted_ids and not deleted_ids & set(target)
    assert all(record["state"] == "live" for record in target.values())


def test_use_job_goes_through_the_same_queue(live: Live) -> None:
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("oai-pipeline")),
            "harvest",
            "yearly",
            "--since",
            "2024-06-01",
            "--until",
            "2024-06-08",
            "--use-job",
            "--wait",  # follows the run through the webserver to its end
            "--json",
        ],
        env=live.dagster.env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, _fail_with_log(live, result.stdout + result.stderr)
    submitted = json.loads(result.stdout)
    run_id = submitted["run_id"]
    assert submitted["windows"] == ["2024-06-01", "2024-06-07"]
    assert submitted["status"] == "SUCCESS"
    assert f"Dagster run {run_id}: SUCCESS" in result.stderr

    run = live.dagster.run(run_id)
    assert run["jobName"] == "harvest"
    assert run["tags"][RANGE_START_TAG] == "yearly|2024-06-01"
    assert run["tags"][RANGE_END_TAG] == "yearly|2024-06-07"
    assert run["tags"][HARVESTER_TAG] == "yearly"
    assert run["tags"][SOURCE_TAG] == source_key(live.endpoint.base_url).removeprefix("source:")
    assert run["status"] == "SUCCESS"
    # queued like a UI launch: the run coordinator enqueued it, the daemon dequeued it
    assert "RunEnqueuedEvent" in live.dagster.run_events(run_id)
    with Services(live.settings) as services:
        harvest_runs = [
            r
            for r in services.state.list_runs(harvester_id="yearly")
            if r["dagster_run_id"] == run_id
        ]
    assert len(harvest_runs) == 1
    assert harvest_runs[0]["status"] == "succeeded"
    assert harvest_runs[0]["window_from"].startswith("2024-06-01")
    assert [r["id"] for r in submitted["harvest_runs"]] == [harvest_runs[0]["id"]]


def test_a_second_ui_run_of_a_harvester_waits_in_the_queue(live: Live) -> None:
    """Runs launched in the UI name their partition only; the shipped run coordinator, in the
    webserver's process, tags them, so a second run of the harvester stays queued while the
    first runs, instead of waiting for the lease in a run slot."""
    dagster = live.dagster
    first = dagster.launch_partition_run(ASSETS, "yearly|2024-03-01")
    second = dagster.launch_partition_run(ASSETS, "yearly|2024-03-02")
    expected = {
        HARVESTER_TAG: "yearly",
        SOURCE_TAG: source_key(live.endpoint.base_url).removeprefix("source:"),
    }
    for run_id in (first, second):
        tags = dagster.run(run_id)["tags"]
        assert {key: tags.get(key) for key in expected} == expected, tags
    wait_for(
        "the first UI run to leave the queue",
        lambda: dagster.run(first)["status"] in ("STARTING", "STARTED", "SUCCESS"),
        timeout=30,
    )
    assert dagster.run(second)["status"] == "QUEUED"
    dagster.cancel_run(second)  # enough: it waited; not worth a second run's time
    status = _ended(live, first)
    assert status == "SUCCESS", _fail_with_log(live, status)


def test_terminate_in_the_ui_stops_a_running_harvest_and_frees_the_harvester(live: Live) -> None:
    """The UI's Terminate interrupts the step where it is (in the step's own process): the run
    ends CANCELED, its harvest run `stopped`, the lease free."""
    dagster = live.dagster
    backfill_id = dagster.launch_asset_backfill(ASSETS, [f"yearly|{day}" for day in YEAR])

    def harvest_runs(run_id: str) -> list[dict]:
        with Services(live.settings) as services:
            return services.state.runs_of_dagster_run(run_id)

    def started() -> str | None:
        runs = dagster.runs({"dagster/backfill": backfill_id})
        if runs and runs[0]["status"] == "STARTED" and harvest_runs(runs[0]["runId"]):
            return runs[0]["runId"]
        return None

    run_id = wait_for("the backfill's run to start its harvest", started, timeout=120, every=0.2)
    dagster.cancel_run(run_id)
    status = _ended(live, run_id)
    assert status == "CANCELED", _fail_with_log(live, status)

    def stopped_runs() -> list[dict] | None:
        runs = harvest_runs(run_id)
        return runs if all(r["status"] == "stopped" for r in runs) else None

    stopped = wait_for("the harvest run to end stopped", stopped_runs, timeout=60)
    assert {run["error"] for run in stopped} == {"the Dagster run was canceled"}, stopped
    with Services(live.settings) as services:
        assert services.harvester_lock.try_acquire("yearly", "test-after-terminate")
        services.harvester_lock.release("yearly", "test-after-terminate")


def test_the_live_dagsters_daemon_loops_every_two_seconds(tmp_path: Path) -> None:
    """What keeps the tests above from sleeping in the daemon's 30 s loops: its processes'
    environment, which changes that and nothing else."""
    code = "import dagster._daemon.controller as c; print(c.DEFAULT_DAEMON_INTERVAL_SECONDS)"
    env = LiveDagster(tmp_path).env
    shortened = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True)
    assert (shortened.returncode, shortened.stdout) == (0, b"2\n"), shortened.stderr
