"""`harvest --use-job`: hand the run to the running Dagster instance, through its run queue.

The same path as a run launched from the UI: the `harvest` job over the windows of the
requested range, options as the `harvest_options` resource config.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING
from urllib.parse import ParseResult, urlparse

from oai_pipeline.cli.harvesters import disabled_warning, open_store
from oai_pipeline.errors import PipelineError
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.state.store import jsonable_run

if TYPE_CHECKING:
    from dagster_graphql import DagsterGraphQLClient

DEFAULT_WEBSERVER = "http://127.0.0.1:3000"
# How often --wait asks the webserver how the run stands: a small query, so it ends within
# a second of the run's end (at 5 s it waited up to 5 s more for a run of ~13 s).
POLL_SECONDS = 1.0
# Dagster's run statuses a run does not leave.
FINISHED = frozenset({"SUCCESS", "FAILURE", "CANCELED"})


class WaitedRunFailed(PipelineError):
    """The Dagster run `--wait` followed failed or was canceled (exit code 1)."""


def harvest_run_config(options: RunOptions) -> dict:
    fields = options.model_dump(exclude={"resume_batch_id"}, exclude_defaults=True)
    return {"resources": {"harvest_options": {"config": fields}}} if fields else {}


def _connection_failure(error: BaseException) -> BaseException | None:
    """The innermost connection error if the webserver was not reached at all (dagster-graphql
    raises its DagsterGraphQLClientError for that too, the connection error as its cause)."""
    import socket

    import requests
    from gql.transport.exceptions import TransportConnectionFailed

    unreachable = (  # refused, DNS, timeouts; not an HTTP error status (that is an answer)
        ConnectionError,
        TimeoutError,
        socket.gaierror,
        requests.ConnectionError,
        requests.Timeout,
        TransportConnectionFailed,
    )
    found = None
    current: BaseException | None = error
    visited: set[int] = set()
    while current is not None and id(current) not in visited:
        visited.add(id(current))
        if isinstance(current, unreachable):
            found = current
        current = current.__cause__ or current.__context__
    return found


def _refusal(error: BaseException) -> str:
    """The webserver's answer in one line (the client's own text carries the whole query)."""
    if len(error.args) >= 2:  # (result type, message): JobNotFoundError, RunConflict, …
        return f"{error.args[0]}: {error.args[1]}".splitlines()[0]
    cause = error.__cause__
    if cause is not None:
        return f"{type(cause).__name__}: {cause}".splitlines()[0]
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _ensure_partition(harvester_id: str) -> None:
    """The harvester's partition on the instance under DAGSTER_HOME (the one `./run.sh dev`
    serves): registered a moment ago, it may not be there until the registry sensor's next
    tick, and a run for it would be stored, then never start. A runs.db or index another
    process holds a write on is refused at once (`refuse_held_storage`): the webserver
    waited 30 s to store the run, and the CLI said only that it was refused."""
    from oai_pipeline.defs.instance_storage import (
        STORAGE_FAILED,
        dagster_storage_errors,
        refuse_held_storage,
    )
    from oai_pipeline.defs.launch import dagster_instance
    from oai_pipeline.defs.partitions import ensure_harvester_partitions
    from oai_pipeline.settings import ensure_dagster_home

    ensure_dagster_home()
    with dagster_instance() as instance:
        refuse_held_storage(instance)
        with dagster_storage_errors(STORAGE_FAILED):
            ensure_harvester_partitions(instance, [harvester_id])


def _webserver_url() -> ParseResult:
    """DAGSTER_WEBSERVER_URL, checked: a bad one was a ValueError traceback (`http://[::1`)
    or passed for a webserver that is not there (a port above 65535)."""
    text = os.environ.get("DAGSTER_WEBSERVER_URL", DEFAULT_WEBSERVER)
    try:
        url = urlparse(text)
        url.port  # noqa: B018 - ValueError if not a port number
    except ValueError as error:
        raise PipelineError(f"DAGSTER_WEBSERVER_URL {text!r} is not a URL: {error}") from None
    return url


def _client(url: ParseResult) -> DagsterGraphQLClient:
    from dagster_graphql import DagsterGraphQLClient

    return DagsterGraphQLClient(
        url.hostname or "127.0.0.1", port_number=url.port, use_https=url.scheme == "https"
    )


def wait_for_run(run_id: str, *, progress: Callable[[str], None]) -> dict:
    """Follow a submitted run to its end (`harvest --use-job --wait`): a script or cron job
    learns how the harvest went from the exit code, as from a harvest in this process.

    The harvest runs it worked on are read from the state store once it ended; a failed or
    canceled run is a WaitedRunFailed naming their error. Ctrl-C stops the wait, not the run."""
    from dagster_graphql import DagsterGraphQLClientError

    url = _webserver_url()
    client = _client(url)
    page = f"{url.geturl().rstrip('/')}/runs/{run_id}"
    seen = None
    try:
        while True:
            try:
                status = client.get_run_status(run_id).value
            except DagsterGraphQLClientError as error:
                failure = _connection_failure(error)
                if failure is None:
                    raise PipelineError(f"Dagster run {run_id}: {_refusal(error)}") from error
                raise PipelineError(
                    f"lost the Dagster webserver at {url.geturl()} while waiting for run "
                    f"{run_id} ({type(failure).__name__}); the run goes on: see {page}"
                ) from error
            if status != seen:
                progress(f"Dagster run {run_id}: {status}")
                seen = status
            if status in FINISHED:
                break
            time.sleep(POLL_SECONDS)
    except KeyboardInterrupt:
        progress(f"stopped waiting; Dagster run {run_id} goes on: see {page}")
        raise
    with open_store(only_reads=True) as store:
        harvest_runs = [jsonable_run(run) for run in store.runs_of_dagster_run(run_id)]
    result = {"status": status, "harvest_runs": harvest_runs, "page": page}
    if status != "SUCCESS":
        errors = [
            f"harvest run {run['id']}: {run['error']}" for run in harvest_runs if run["error"]
        ]
        reason = "; ".join(errors) or "its step errors are in its log"
        raise WaitedRunFailed(f"Dagster run {run_id} ended {status}: {reason} (see {page})")
    return result


def submit_harvest_job(
    harvester_id: str, start: datetime | None, end: datetime | None, options: RunOptions
) -> dict:
    from dagster_graphql import DagsterGraphQLClientError

    from oai_pipeline.defs.jobs import harvest_job
    from oai_pipeline.defs.launch import range_tags, window_range
    from oai_pipeline.defs.partitions import TRIGGER_TAG

    if options.resume_batch_id is not None:
        raise PipelineError(
            "--resume works in this process; a Dagster run resumes by re-executing it"
        )
    with open_store() as store:  # a run for an unknown harvester must not be queued
        harvester = HarvesterRegistry(store).get(harvester_id)
    _ensure_partition(harvester_id)
    url = _webserver_url()
    first, last = window_range(start, end)
    try:
        run_id = _client(url).submit_job_execution(
            harvest_job.name,
            run_config=harvest_run_config(options),
            tags={
                **range_tags(harvester_id, first, last, harvester.base_url),
                TRIGGER_TAG: "cli",
            },
        )
    except Exception as error:  # connection refused, DNS, timeouts, or a refusal
        failure = _connection_failure(error)
        if isinstance(error, DagsterGraphQLClientError) and failure is None:
            raise PipelineError(f"Dagster refused the run: {_refusal(error)}") from error
        raise PipelineError(
            f"no Dagster webserver at {url.geturl()} ({type(failure or error).__name__}); "
            "start it with `./run.sh dev` or set DAGSTER_WEBSERVER_URL"
        ) from error
    payload: dict = {"run_id": run_id, "harvester_id": harvester_id, "windows": [first, last]}
    warning = disabled_warning(harvester)
    payload["warnings"] = [warning] if warning else []
    if note := _widened(start, end, first, last):
        payload["note"] = note
    return payload


def _widened(start: datetime | None, end: datetime | None, first: str, last: str) -> str | None:
    """What a Dagster run harvests beyond --since/--until: its partitions are whole windows
    of the grid, so a range within windows (hours of a day) is widened, and would otherwise
    be so without a word."""
    from oai_pipeline.defs.partitions import window_partitions

    first_start = window_partitions.time_window_for_partition_key(first).start
    last_end = window_partitions.time_window_for_partition_key(last).end
    if (start is None or start <= first_start) and (end is None or end >= last_end):
        return None
    return (
        f"the Dagster run harvests whole windows of the grid: {first} .. {last} "
        f"({first_start.isoformat()} to {last_end.isoformat()}), not just --since/--until; "
        "harvest without --use-job to keep to the range"
    )
