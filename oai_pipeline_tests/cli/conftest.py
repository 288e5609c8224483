"""A running sample endpoint, and the harvester `sample` registered on it through the CLI;
a folder mounted again read-only."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from oai_pipeline.cli import main
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import load_settings
from oai_pipeline.state.store import StateStore
from oai_pipeline_tests.support import shifted_sample_records

RECORDS = shifted_sample_records()


def create_args(harvester_id: str, base_url: str) -> list[str]:
    return [
        "harvesters", "create", "--id", harvester_id, "--base-url", base_url,
        "--metadata-prefix", "oai_datacite", "--model", "rdm",
    ]  # fmt: skip


@pytest.fixture
def endpoint() -> Iterator[OAIEndpoint]:
    with OAIEndpoint(RECORDS, page_size=3) as endpoint:
        yield endpoint


@pytest.fixture
def registered(endpoint: OAIEndpoint) -> str:
    result = CliRunner().invoke(main, create_args("sample", endpoint.base_url))
    assert result.exit_code == 0, result.output
    return "sample"


def pid_of_no_process() -> int:
    pid = 4_000_000  # above Linux's pid_max (4,194,304 at most) once a free one is found
    while Path(f"/proc/{pid}").exists():
        pid += 1
    return pid


def run_left_running(
    harvester_id: str, worker: str | None = None, dagster_run_id: str | None = None
) -> int:
    """A harvest run left `running`, by default by a process that is gone (a killed harvest):
    a status that can write fails it."""
    with StateStore(load_settings().state_db_url) as state:
        return state.create_run(
            harvester_id,
            window_from=None,
            window_until=None,
            scale=None,
            max_records=0,
            options={},
            worker=worker or f"{socket.gethostname()}:{pid_of_no_process()}:gone",
            dagster_run_id=dagster_run_id,
        )


@pytest.fixture
def read_only_mount(tmp_path: Path) -> Iterator[Callable[[Path], Path]]:
    """Mounts a folder again, read-only (a real read-only file system), where `mount` is
    permitted (root); the mount point is returned."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a bind mount needs root")
    mounted: list[Path] = []

    def mount(folder: Path) -> Path:
        point = tmp_path / f"read-only-{len(mounted)}"
        point.mkdir()
        for command in (
            ["mount", "--bind", str(folder), str(point)],
            ["mount", "-o", "remount,ro,bind", str(point)],
        ):
            done = subprocess.run(command, capture_output=True)
            if done.returncode != 0:
                if command[1] != "--bind":
                    subprocess.run(["umount", str(point)], check=True)
                pytest.skip(f"cannot bind-mount here: {done.stderr.decode().strip()}")
        mounted.append(point)
        return point

    try:
        yield mount
    finally:
        for point in reversed(mounted):
            # lazily: a SQLite connection of this process may still hold a file open
            subprocess.run(["umount", "--lazy", str(point)], check=True)
