"""`oai-pipeline demo`: the harvester it leaves registered keeps working in the UI."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, time

import dagster as dg
import pytest
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.defs.launch import materialize_windows, window_range
from oai_pipeline.defs.partitions import HARVESTER_TAG, SOURCE_TAG, TRIGGER_TAG, source_tag
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.records import SAMPLE_LAST_DAY
from oai_pipeline.sample_endpoint.server import SAMPLE_PORT_ENV, sample_base_url, serve_forever
from oai_pipeline.settings import Settings


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def port(monkeypatch: pytest.MonkeyPatch) -> int:
    port = _free_port()
    monkeypatch.setenv(SAMPLE_PORT_ENV, str(port))
    return port


@contextmanager
def served_as_run_sh_dev(port: int) -> Iterator[str]:
    """The sample endpoint as `./run.sh dev` serves it beside the UI (`sample-endpoint serve`
    with its defaults, on OAI_PIPELINE_SAMPLE_PORT)."""
    ready, stop = threading.Event(), threading.Event()
    server = threading.Thread(
        target=serve_forever,
        kwargs={"on_ready": lambda _url: ready.set(), "stop": stop, "port": port},
        daemon=True,
    )
    server.start()
    try:
        assert ready.wait(30)
        yield sample_base_url(port)
    finally:
        stop.set()
        server.join(30)


def _demo() -> Result:
    return CliRunner().invoke(main, ["demo", "--json"])


def _report(result: Result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_harvester_the_demo_leaves_harvests_in_the_ui(
    port: int, settings: Settings, instance: dg.DagsterInstance
) -> None:
    """The demo registered `sample` on its endpoint's random port, dead once the demo exited:
    in `./run.sh dev` its schedules and new materialisations failed on connection refused.
    It now keeps the fixed URL that `./run.sh dev` serves the endpoint on."""
    _report(_demo())
    with Services(settings) as services:
        assert services.harvester("sample").base_url == sample_base_url(port)

    with served_as_run_sh_dev(port):
        first, last = window_range(None, datetime.combine(SAMPLE_LAST_DAY, time.max, UTC))
        result = materialize_windows(instance, "sample", first, last, raise_on_error=False)
    assert result.success


def test_the_demo_harvests_the_endpoint_run_sh_dev_serves_and_stays_idempotent(
    port: int, settings: Settings
) -> None:
    """With `./run.sh dev` running, its endpoint holds the port: the demo harvests that one."""
    with served_as_run_sh_dev(port) as base_url:
        first = _report(_demo())
        assert first["created"] == 8 and first["errors"] == 0
        again = _report(_demo())
    assert again["unchanged"] == 9 and again["created"] == again["updated"] == 0
    with Services(settings) as services:
        assert services.harvester("sample").base_url == base_url


def test_the_demos_run_carries_the_tags_of_a_run_dagster_launches(port: int) -> None:
    """The demo's run, in the instance the UI shows, named its harvester but not its server
    (`oai_pipeline/source`), which the schedules' and `harvest --submit`'s runs name: the
    Runs page's filter by server left it out. Nor what asked for it (`oai_pipeline/trigger`),
    which the schedules', the sensors' and the CLI's runs say: the filter by trigger left it
    out too."""
    report = _report(_demo())

    with dg.DagsterInstance.get() as instance:
        run = instance.get_run_by_id(report["dagster_run_id"])
    assert run is not None
    assert {key: run.tags.get(key) for key in (HARVESTER_TAG, SOURCE_TAG, TRIGGER_TAG)} == {
        HARVESTER_TAG: "sample",
        SOURCE_TAG: source_tag(sample_base_url(port)),
        TRIGGER_TAG: "demo",
    }


def test_a_port_taken_by_another_program_is_one_line(port: int) -> None:
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", port))
        taken.listen()
        result = _demo()
    assert result.exit_code == 1
    assert f"cannot serve the sample endpoint on 127.0.0.1:{port}" in result.output
    assert f"set {SAMPLE_PORT_ENV} to a free port" in result.output
    assert "Traceback" not in result.output


def test_a_mistyped_sample_port_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SAMPLE_PORT_ENV, "80a")
    result = _demo()
    assert result.exit_code == 1
    assert f"{SAMPLE_PORT_ENV} must be a port from 1 to 65535, not '80a'" in result.output
