"""A real `dagster dev` (webserver + daemon) in its own process group, driven over GraphQL."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

PROJECT = Path(__file__).resolve().parents[2]
FAST_DAEMON = Path(__file__).resolve().parent / "fast_daemon"
T = TypeVar("T")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, every: float = 0.5) -> T:
    """Poll `probe` until it returns something truthy; fail with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


class LiveDagster:
    """`dagster dev -w workspace.yaml` with its own DAGSTER_HOME (the shipped dagster.yaml)
    and OAI_PIPELINE_HOME, on a free loopback port; `stop()` kills the whole process group."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dagster_home = root / "dagster_home"
        self.oai_home = root / "oai_home"
        self.log_path = root / "dagster-dev.log"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self._http = httpx.Client(timeout=30)

    @property
    def env(self) -> dict[str, str]:
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("OAI_PIPELINE_", "DAGSTER_"))
        }
        env.update(
            DAGSTER_HOME=str(self.dagster_home),
            OAI_PIPELINE_HOME=str(self.oai_home),
            DAGSTER_WEBSERVER_URL=self.url,
            # the daemon's loops every 2 s (fast_daemon/sitecustomize.py), not 30 s
            PYTHONPATH=os.pathsep.join(filter(None, [str(FAST_DAEMON), env.get("PYTHONPATH")])),
        )
        return env

    def start(self, timeout: float = 90) -> None:
        self.dagster_home.mkdir(parents=True, exist_ok=True)
        self.oai_home.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROJECT / "dagster.yaml", self.dagster_home / "dagster.yaml")
        dagster = str(Path(sys.executable).with_name("dagster"))
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [dagster, "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(self.port)],
                cwd=PROJECT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() kills all of it
            )
        wait_for("the Dagster webserver and code location", self._location_loaded, timeout)

    def _location_loaded(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"dagster dev exited early:\n{self.log_tail()}")
        try:
            data = self.graphql(
                """{ workspaceOrError { ... on Workspace { locationEntries {
                     name locationOrLoadError { __typename } } } } }"""
            )
        except (httpx.HTTPError, RuntimeError):
            return False
        entries = data["workspaceOrError"].get("locationEntries") or []
        return any(
            (e["locationOrLoadError"] or {}).get("__typename") == "RepositoryLocation"
            for e in entries
        )

    def stop(self) -> None:
        self._http.close()
        if self.process is None or self.process.poll() is not None:
            return
        group = os.getpgid(self.process.pid)
        os.killpg(group, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=20)
        with contextlib.suppress(ProcessLookupError):  # what is left: run workers, code server
            os.killpg(group, signal.SIGKILL)
        self.process.wait(timeout=10)

    def log_tail(self, lines: int = 60) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def graphql(self, query: str, **variables: Any) -> dict[str, Any]:
        response = self._http.post(
            f"{self.url}/graphql", json={"query": query, "variables": variables}
        )
        response.raise_for_status()
        body = response.json()
        if body.get("errors"):
            raise RuntimeError(f"GraphQL errors: {body['errors']}")
        return body["data"]

    # -- what the tests ask -----------------------------------------------------------

    def dynamic_partitions(self, dimension: str) -> list[str]:
        """The keys of one dimension of the harvest assets' partitions, as the UI sees them."""
        data = self.graphql(
            """{ assetNodeOrError(assetKey: {path: ["raw_oai_xml"]}) {
                 ... on AssetNode { partitionKeysByDimension { name partitionKeys } } } }"""
        )
        for keys in data["assetNodeOrError"]["partitionKeysByDimension"]:
            if keys["name"] == dimension:
                return keys["partitionKeys"]
        return []

    def repository_selector(self) -> dict[str, str]:
        data = self.graphql(
            "{ repositoriesOrError { ... on RepositoryConnection {"
            " nodes { name location { name } } } } }"
        )
        (node,) = data["repositoriesOrError"]["nodes"]
        return {"repositoryLocationName": node["location"]["name"], "repositoryName": node["name"]}

    def stop_schedule(self, name: str) -> None:
        """Stop a running schedule (as an operator does in the UI), so it cannot fire mid-test."""
        data = self.graphql(
            """query($selector: ScheduleSelector!) { scheduleOrError(scheduleSelector: $selector) {
                 __typename ... on Schedule { scheduleState { id status } } } }""",
            selector={**self.repository_selector(), "scheduleName": name},
        )
        state = data["scheduleOrError"]["scheduleState"]
        result = self.graphql(
            """mutation($id: String!) { stopRunningSchedule(id: $id) {
                 __typename ... on ScheduleStateResult { scheduleState { status } }
                 ... on PythonError { message } } }""",
            id=state["id"],
        )["stopRunningSchedule"]
        if (result.get("scheduleState") or {}).get("status") != "STOPPED":
            raise RuntimeError(f"could not stop schedule {name}: {result}")

    def run_events(self, run_id: str) -> list[str]:
        """The event types of a run's log (e.g. RunEnqueuedEvent: it went through the queue)."""
        data = self.graphql(
            """query($id: ID!) { logsForRun(runId: $id) {
                 ... on EventConnection { events { __typename } } } }""",
            id=run_id,
        )
        return [event["__typename"] for event in data["logsForRun"]["events"]]

    def launch_asset_backfill(
        self, assets: list[str], partition_names: list[str], tags: dict[str, str] | None = None
    ) -> str:
        data = self.graphql(
            """mutation($params: LaunchBackfillParams!) {
                 launchPartitionBackfill(backfillParams: $params) {
                   __typename
                   ... on LaunchBackfillSuccess { backfillId }
                   ... on PythonError { message stack }
                   ... on InvalidSubsetError { message }
                   ... on UnauthorizedError { message } } }""",
            params={
                "assetSelection": [{"path": [name]} for name in assets],
                "partitionNames": partition_names,
                "tags": [{"key": k, "value": v} for k, v in (tags or {}).items()],
            },
        )
        result = data["launchPartitionBackfill"]
        if result["__typename"] != "LaunchBackfillSuccess":
            raise RuntimeError(f"backfill refused: {result}")
        return result["backfillId"]

    def launch_partition_run(self, assets: list[str], partition_key: str) -> str:
        """A run of one partition key as the UI's Materialize launches it: its only tag
        names the partition."""
        data = self.graphql(
            """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
                 __typename
                 ... on LaunchRunSuccess { run { runId } }
                 ... on PythonError { message stack }
                 ... on InvalidSubsetError { message } } }""",
            params={
                "selector": {
                    **self.repository_selector(),
                    "jobName": "__ASSET_JOB",
                    "assetSelection": [{"path": [name]} for name in assets],
                    "assetCheckSelection": [],
                },
                "mode": "default",
                "runConfigData": {},
                "executionMetadata": {
                    "tags": [{"key": "dagster/partition", "value": partition_key}]
                },
            },
        )
        result = data["launchRun"]
        if result["__typename"] != "LaunchRunSuccess":
            raise RuntimeError(f"run refused: {result}")
        return result["run"]["runId"]

    def cancel_run(self, run_id: str) -> None:
        """Cancel a run (a queued one leaves the queue at once), as the UI's Terminate does."""
        result = self.graphql(
            """mutation($id: String!) { terminateRun(runId: $id) { __typename
                 ... on TerminateRunFailure { message } ... on PythonError { message } } }""",
            id=run_id,
        )["terminateRun"]
        if result["__typename"] != "TerminateRunSuccess":
            raise RuntimeError(f"could not cancel run {run_id}: {result}")

    def backfill_status(self, backfill_id: str) -> str:
        data = self.graphql(
            """query($id: String!) { partitionBackfillOrError(backfillId: $id) {
                 ... on PartitionBackfill { status } ... on PythonError { message } } }""",
            id=backfill_id,
        )
        return data["partitionBackfillOrError"]["status"]

    def runs(self, tags: dict[str, str]) -> list[dict[str, Any]]:
        data = self.graphql(
            """query($filter: RunsFilter!) { runsOrError(filter: $filter) {
                 ... on Runs { results { runId status jobName
                   tags { key value } } } } }""",
            filter={"tags": [{"key": k, "value": v} for k, v in tags.items()]},
        )
        runs = data["runsOrError"]["results"]
        for run in runs:
            run["tags"] = {t["key"]: t["value"] for t in run["tags"]}
        return runs

    def run(self, run_id: str) -> dict[str, Any]:
        data = self.graphql(
            """query($id: ID!) { runOrError(runId: $id) {
                 __typename ... on Run { runId status jobName tags { key value } } } }""",
            id=run_id,
        )
        run = data["runOrError"]
        run["tags"] = {t["key"]: t["value"] for t in run.get("tags", [])}
        return run
