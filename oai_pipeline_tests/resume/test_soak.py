"""The soak driver (`soak.py`) runs: a few simulated days, a fixed seed, every harvest killed
once, a reconcile and the check against a fresh full harvest on the last day."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SOAK = [sys.executable, "-m", "oai_pipeline_tests.resume.soak"]


@pytest.mark.parametrize("policy", ["persistent", "transient"])
def test_a_short_soak_stays_in_step_with_the_source(tmp_path: Path, policy: str) -> None:
    args = ["--days", "3", "--records", "40", "--changes", "4", "--seed", "3"]
    args += ["--crash-rate", "1", "--crash-points", "list_page,writer_apply,finish_run"]
    args += ["--crash-calls", "1", "--deleted-record", policy, "--work", str(tmp_path / "w")]
    done = subprocess.run([*SOAK, *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "check day 3: OK" in done.stdout
    assert "killed at" in done.stdout  # the reruns after a kill were exercised


def test_the_soak_driver_explains_itself() -> None:
    done = subprocess.run([*SOAK, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "--deleted-record" in done.stdout
