"""The forked children the crash tests run their CLI in end as fresh interpreters do: the same
exit codes, output, environment, folder, arguments and exit handlers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from oai_pipeline_tests import forked_python

PROBE = """
import atexit, json, os, sys, time
from pathlib import Path

how = sys.argv[1]
atexit.register(lambda: Path("atexit-ran").write_text(how))
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "probe": os.environ.get("PROBE"),
                  "home": os.environ.get("HOME"), "stdin": sys.stdin.read()}))
sys.stdout.flush()
print("to stderr", file=sys.stderr)
if how == "os_exit":
    os._exit(75)
if how == "exit_text":
    sys.exit("a message")
if how == "raise":
    raise ValueError("boom")
if how == "sleep":
    time.sleep(60)
sys.exit(3 if how == "exit_3" else 0)
"""


@pytest.fixture
def probe(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "forked_probe.py").write_text(PROBE)
    (site / "forked_function.py").write_text(
        "import sys\n\ndef main(argv):\n    print(argv, sys.argv[1:])\n    return int(argv[0])\n"
    )
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = {"PROBE": "here", "PATH": os.environ["PATH"], "PYTHONPATH": str(site)}
    return workdir, env


@pytest.mark.parametrize(
    ("how", "returncode", "atexit_ran", "stderr_has"),
    [
        ("exit_0", 0, True, "to stderr"),
        ("exit_3", 3, True, "to stderr"),
        ("exit_text", 1, True, "a message"),
        ("raise", 1, True, "ValueError: boom"),
        ("os_exit", 75, False, "to stderr"),  # a crash point: nothing more runs
    ],
)
def test_a_forked_child_ends_as_a_fresh_interpreter_does(
    probe: tuple[Path, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    returncode: int,
    atexit_ran: bool,
    stderr_has: str,
) -> None:
    workdir, env = probe
    monkeypatch.chdir(workdir)
    results = {}
    for fresh in ("1", "0"):
        monkeypatch.setenv(forked_python.FRESH_ENV, fresh)
        (workdir / "atexit-ran").unlink(missing_ok=True)
        result = forked_python.run_module("forked_probe", [how, "x y"], env, timeout=60)
        assert result.returncode == returncode, result.stderr
        assert stderr_has in result.stderr
        assert (workdir / "atexit-ran").exists() == atexit_ran
        results[fresh] = result.stdout
    assert results["0"] == results["1"]
    assert results["0"].startswith('{"argv": ["' + how + '", "x y"], "cwd": "' + str(workdir))
    assert '"probe": "here", "home": null, "stdin": ""' in results["0"]


def test_a_forked_child_past_its_timeout_is_killed(
    probe: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    workdir, env = probe
    monkeypatch.chdir(workdir)
    monkeypatch.setenv(forked_python.FRESH_ENV, "0")
    with pytest.raises(subprocess.TimeoutExpired):
        forked_python.run_module("forked_probe", ["sleep"], env, timeout=1)
    # the forking process goes on with the next child
    assert forked_python.run_module("forked_probe", ["exit_3"], env, timeout=60).returncode == 3


def test_forked_children_see_no_module_the_forking_process_did_not_import() -> None:
    """What the forking process imports must not read the environment at import: the
    Dagster definitions do (partitions), so each child imports them itself."""
    code = (
        "import sys; from oai_pipeline_tests import forked_python as f; "
        "[__import__(m) for m in f.PRELOADED]; "
        "print(sorted(m for m in sys.modules if m.startswith(('oai_pipeline.defs', "
        "'oai_pipeline.definitions'))))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "[]"


@pytest.mark.parametrize("fresh", ["1", "0"])
def test_a_function_run_in_a_child_gives_its_result_as_the_exit_code(
    probe: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch, fresh: str
) -> None:
    """`module:function`: for a module that must not run twice in one process (soak.py)."""
    workdir, env = probe
    monkeypatch.chdir(workdir)
    monkeypatch.setenv(forked_python.FRESH_ENV, fresh)
    result = forked_python.run_module("forked_function:main", ["4", "x"], env, timeout=60)
    assert (result.returncode, result.stdout) == (4, "['4', 'x'] ['4', 'x']\n"), result.stderr


def test_a_reply_that_came_with_the_one_before_is_read_at_once() -> None:
    """A child that ends at once: the forking process writes its pid and its exit code
    together, and the read of the first took both into the stream's buffer. Waiting on the
    pipe for the second then timed out (it had come), and each later request of the worker
    read the reply to the one before (`KeyError: 'pid'`, 17 crash tests failing together)."""
    both_then_wait = 'printf \'{"pid": 1}\\n{"returncode": 3}\\n\'; sleep 30'
    forker = forked_python._Forker("", command=["sh", "-c", both_then_wait])
    try:
        assert forker._reply(timeout=10) == '{"pid": 1}\n'
        assert forker._reply(timeout=2) == '{"returncode": 3}\n'
        with pytest.raises(TimeoutError):
            forker._reply(timeout=0.2)
    finally:
        forker._process.kill()
        forker._process.wait()
