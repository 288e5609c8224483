"""`./run.sh dev` stops on SIGTERM (what supervisors and `kill` send), also when started in
the background from a script.

A script's background job (`./run.sh dev &` without job control, nohup, many process
supervisors) starts with SIGINT ignored, and `dagster dev` gives SIGTERM SIGINT's handler:
unless run.sh restores SIGINT, the UI and daemon ignore both and only SIGKILL stops them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from oai_pipeline_tests.orchestration.live_dagster import PROJECT, free_port, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _as_a_scripts_background_job() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _webserver_answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=2).is_success
    except httpx.HTTPError:
        return False


def _group_gone(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True
    return False


def test_run_sh_dev_in_the_background_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OAI_PIPELINE_", "DAGSTER_"))
    }
    env.update(
        DAGSTER_HOME=str(tmp_path / "dagster_home"),
        OAI_PIPELINE_HOME=str(tmp_path / "oai_home"),
        OAI_PIPELINE_SAMPLE_PORT=str(free_port()),
    )
    log_path = tmp_path / "dev.log"
    with log_path.open("wb") as log:
        dev = subprocess.Popen(
            [str(PROJECT / "run.sh"), "dev", "-h", "127.0.0.1", "-p", str(port)],
            cwd=PROJECT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group, so the test can clean up all of it
            preexec_fn=_as_a_scripts_background_job,
        )
    group = dev.pid
    try:
        wait_for("the Dagster webserver", lambda: _webserver_answers(port), timeout=180)
        dev.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            dev.wait(timeout=90)
        log_tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
        assert dev.poll() is not None, f"dagster dev ignored SIGTERM:\n{log_tail}"
        assert "Dagster services shut down" in log_tail
        # the webserver, daemon, code server and the sample endpoint end with it
        wait_for("every process of ./run.sh dev to end", lambda: _group_gone(group), timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
        dev.wait(timeout=10)
