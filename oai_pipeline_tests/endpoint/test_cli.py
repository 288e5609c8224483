"""`oai-pipeline sample-endpoint serve`, driven through click's CliRunner (and once as
processes: `--exit-with-parent`)."""

from __future__ import annotations

import _thread
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import click
import httpx
import pytest
from click.testing import CliRunner
from lxml import etree

from oai_pipeline.cli import main
from oai_pipeline.cli.sample_endpoint import sample_endpoint
from oai_pipeline_tests.endpoint.oai_http import NS


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _serve_and_probe(args: list[str], port: int) -> tuple[object, dict[str, etree._Element]]:
    """Run `serve` in the main thread; a helper probes it, then presses Ctrl-C."""
    found: dict[str, etree._Element] = {}
    cli_done = threading.Event()

    def probe() -> None:
        url = f"http://127.0.0.1:{port}/oai"
        deadline = time.monotonic() + 60  # a loaded CI machine starts the CLI slowly
        while time.monotonic() < deadline and not cli_done.is_set():
            try:
                response = httpx.get(url, params={"verb": "Identify"}, timeout=2)
                found["identify"] = etree.fromstring(response.content)
                listed = httpx.get(
                    url, params={"verb": "ListIdentifiers", "metadataPrefix": "oai_datacite"}
                )
                found["list"] = etree.fromstring(listed.content)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        # Ctrl-C only while `serve` still runs, and again until it stops: one that lands
        # while the CLI still starts may be swallowed by an import, and `serve` ran for good.
        while not cli_done.is_set():
            _thread.interrupt_main()
            cli_done.wait(5)

    # Ctrl-C as a terminal sends it, whatever an earlier test in this worker left: Dagster's
    # in-process runs swap SIGINT's handler for one that only records it, and one left so
    # (a run's generator never closed) turned these Ctrl-Cs into nothing, and `serve` ran on.
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    helper = threading.Thread(target=probe)
    helper.start()
    try:
        result = CliRunner().invoke(sample_endpoint, ["serve", "--port", str(port), *args])
    finally:
        cli_done.set()
        helper.join()
        signal.signal(signal.SIGINT, handler)
    return result, found


def test_serve_prints_the_base_url_and_stops_on_ctrl_c():
    port = _free_port()
    result, found = _serve_and_probe(["--page-size", "2", "--granularity", "day"], port)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == f"http://127.0.0.1:{port}/oai"
    granularity = found["identify"].findtext(".//oai:granularity", namespaces=NS)
    assert granularity == "YYYY-MM-DD"
    assert len(found["list"].findall(".//oai:header", NS)) == 2


def test_serve_generated_records():
    port = _free_port()
    result, found = _serve_and_probe(["--generated", "150"], port)
    assert result.exit_code == 0, result.output
    token = found["list"].find(".//oai:resumptionToken", NS)
    assert token.get("completeListSize") == "150"
    assert len(found["list"].findall(".//oai:header", NS)) == 100


def test_a_taken_port_is_a_one_line_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(sample_endpoint, ["serve", "--port", str(port)])
    assert result.exit_code == 1
    assert f"cannot serve on 127.0.0.1:{port}" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("args", [["--granularity", "hours"], ["--page-size", "0"]])
def test_bad_options_are_usage_errors(args):
    result = CliRunner().invoke(sample_endpoint, ["serve", *args])
    assert result.exit_code == 2


def test_group_name_and_help():
    assert sample_endpoint.name == "sample-endpoint"
    assert main.get_command(click.Context(main), "sample-endpoint") is sample_endpoint
    result = CliRunner().invoke(sample_endpoint, ["serve", "--help"])
    assert result.exit_code == 0
    assert "--generated" in result.output and "Ctrl-C" in result.output


def test_serve_with_exit_with_parent_stops_when_its_parent_ends(tmp_path):
    """`./run.sh dev` starts `serve --exit-with-parent` in the background and execs into
    `dagster dev`: when that ends (Ctrl-C, SIGTERM), the endpoint ends too, not left
    serving the port for good."""
    port = _free_port()
    pid_file = tmp_path / "serve.pid"
    parent = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'from oai_pipeline.cli import main;"
        f" main()', 'sample-endpoint', 'serve', '--port', '{port}', '--exit-with-parent'],"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    starter = subprocess.Popen([sys.executable, "-c", parent])
    try:
        deadline = time.monotonic() + 60
        while not _answers(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _answers(port), "serve did not start"
        child = int(pid_file.read_text())
    finally:
        starter.kill()
        starter.wait()
    deadline = time.monotonic() + 20
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.2)
    still_serving = _alive(child)
    if still_serving:
        os.kill(child, signal.SIGKILL)
    assert not still_serving
    assert not _answers(port)


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/oai?verb=Identify", timeout=2).is_success
    except httpx.HTTPError:
        return False


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie whose parent has not reaped it does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
