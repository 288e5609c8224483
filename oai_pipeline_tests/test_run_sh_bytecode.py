"""`./run.sh` writes the project's bytecode, also where Python is told not to.

With PYTHONDONTWRITEBYTECODE set (the VMs here set it) no process writes a
.pyc, so every process compiled the project's modules from source again: each xdist worker,
each CLI child a crash test forks, each Dagster step.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

from oai_pipeline.settings import PROJECT_ROOT


def _bytecode_is_current(source: Path) -> bool:
    """Whether the .pyc next to `source` is the one Python would load for it (its header:
    the interpreter's magic number, then the source's mtime and size)."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    if not cached.exists():
        return False
    header = cached.read_bytes()[:16]
    stat = source.stat()
    return (
        header[:4] == importlib.util.MAGIC_NUMBER
        and int.from_bytes(header[4:8], "little") == 0  # checked by timestamp
        and int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF
    )


def test_run_sh_writes_the_projects_bytecode_where_python_would_not(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "DAGSTER_HOME": str(tmp_path)}
    finished = subprocess.run(
        [str(PROJECT_ROOT / "run.sh"), "cli", "--help"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert finished.returncode == 0, finished.stderr
    assert "Usage" in finished.stdout
    sources = [
        path
        for package in ("oai_pipeline", "oai_pipeline_tests")
        for path in (PROJECT_ROOT / package).rglob("*.py")
    ]
    stale = [
        str(path.relative_to(PROJECT_ROOT)) for path in sources if not _bytecode_is_current(path)
    ]
    assert len(sources) > 100 and not stale, f"no current bytecode for {stale[:5]}"
