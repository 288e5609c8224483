"""`python -m MODULE ARGS…` run in a child forked from a process that imported the harvest's
modules once, instead of a fresh interpreter: the suite's crash tests start about a thousand
CLI processes, and each fresh one spent 1–3 s importing polars, SQLAlchemy, httpx, pydantic
and the pipeline before doing a second of work.

The child is still its own process, as a fresh one is: it dies where a fault kills it
(`os._exit`), its files and connections are its own, its environment, working directory and
arguments are the caller's, and it exits through the interpreter's own shutdown (atexit
handlers run). The parent it is forked from only imported modules whose import reads no
environment, and it runs nothing else (but making the TLS context harvests verify with,
which `oai.tls` keys by the bundle a process's environment names), so no state of one child
reaches the next.

`OAI_PIPELINE_TESTS_FRESH_PROCESSES=1` runs fresh interpreters instead (to rule this out).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import queue
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

# Imported once by the forking process: what a CLI harvest, reconcile or status and a
# Dagster run import, none of it reading the environment at import (the Dagster
# definitions do: `oai_pipeline.defs` is imported by each child).
PRELOADED = (
    "dagster",
    "dagster._core.storage.event_log",
    "dagster._core.storage.runs",
    "dagster._core.execution.asset_backfill",
    "dagster._daemon.types",
    "oai_pipeline.cli",
    "oai_pipeline.pipeline.runner",
    "oai_pipeline.pipeline.reconcile",
    "oai_pipeline.pipeline.rekey",
    "oai_pipeline.pipeline.status",
    # The built-in plug-ins (pyproject's entry points), which each harvest loads: importing
    # them in every child was ~7 % of the crash tests' time.
    "oai_pipeline.oai.reader",
    "oai_pipeline.transform.oai_import",
    "oai_pipeline.targets.embedded.writer",
)
FRESH_ENV = "OAI_PIPELINE_TESTS_FRESH_PROCESSES"


class _Forker:
    """One forking process (`main` below), asked over its stdin/stdout for one child at a
    time."""

    def __init__(self, prelude: str, command: list[str] | None = None) -> None:
        """`command`: what to start instead of the forking process (a test's stand-in)."""
        self._process = subprocess.Popen(
            command or [sys.executable, "-m", __name__, *([prelude] if prelude else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        # Its reply lines, read as they come (None: it ended). select() on the pipe missed a
        # child's exit code when one read had taken both of its lines into the stream's
        # buffer (a child ending at once): the next wait timed out though the line had come,
        # and every later request of the worker read the reply before its own.
        self._replies: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read_replies, daemon=True).start()

    def _read_replies(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._replies.put(line)
        self._replies.put(None)

    def alive(self) -> bool:
        return self._process.poll() is None

    def run(
        self, module: str, args: list[str], env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        assert self._process.stdin is not None and self._process.stdout is not None
        with tempfile.TemporaryDirectory(prefix="forked-") as folder:
            stdout, stderr = Path(folder, "stdout"), Path(folder, "stderr")
            request = {
                "module": module,
                "args": args,
                "env": env,
                "cwd": os.getcwd(),
                "stdout": str(stdout),
                "stderr": str(stderr),
            }
            self._process.stdin.write(json.dumps(request) + "\n")
            pid = int(json.loads(self._reply(timeout=60))["pid"])
            try:
                returncode = int(json.loads(self._reply(timeout))["returncode"])
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                    os.kill(pid, signal.SIGKILL)
                self._reply(timeout=60)
                raise subprocess.TimeoutExpired([module, *args], timeout) from None
            return subprocess.CompletedProcess(
                [sys.executable, "-m", module, *args],
                returncode,
                stdout.read_text(errors="replace"),
                stderr.read_text(errors="replace"),
            )

    def _reply(self, timeout: float) -> str:
        try:
            line = self._replies.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None
        if line is None:
            raise RuntimeError(f"the forking process ended (exit code {self._process.wait()})")
        return line

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=30)


_forkers = threading.local()


def run_module(
    module: str, args: list[str], env: dict[str, str], timeout: float = 900, prelude: str = ""
) -> subprocess.CompletedProcess[str]:
    """What `subprocess.run([python, -m, module, *args], env=env, capture_output=True,
    text=True, timeout=timeout)` returns, from a forked child (one forking process per
    calling thread and prelude). `module` may be `module:function`: `function(args)` is
    called, its result the exit code (a module that must not run twice in one process).
    `prelude`: `module:function` the forking process calls before it imports anything else,
    as the module's own child does first (soak.py's shifted clock)."""
    if os.environ.get(FRESH_ENV) == "1":
        command = [sys.executable, *_fresh_start(module), *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    forkers: dict[str, _Forker] = _forkers.__dict__.setdefault("by_prelude", {})
    forker = forkers.get(prelude)
    if forker is None or not forker.alive():
        forker = forkers[prelude] = _Forker(prelude)
    return forker.run(module, args, env, timeout)


def _fresh_start(module: str) -> list[str]:
    if ":" not in module:
        return ["-m", module]
    name, function = module.split(":")
    return ["-c", f"import sys; from {name} import {function}; sys.exit({function}(sys.argv[1:]))"]


def _child(request: dict[str, object]) -> None:
    """In the forked child: the request's standard streams, environment, folder and
    arguments, then the module run as `python -m` runs it (or its function called), and the
    end of the process as the interpreter ends a fresh one (`_exit`)."""
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        opened = os.open(str(path), flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = open(os.devnull)  # noqa: SIM115 (the forking process's requests: none of its)
    os.environ.clear()
    os.environ.update(request["env"])  # type: ignore[arg-type]
    # where a fresh interpreter puts PYTHONPATH: first after the script's folder (plug-ins
    # installed for a child are found through it)
    added = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[1:1] = [path for path in added if path not in sys.path]
    os.chdir(str(request["cwd"]))
    module = str(request["module"])
    sys.argv = [module, *request["args"]]  # type: ignore[misc]
    code: int | str | None = 0
    try:
        if ":" in module:
            name, function = module.split(":")
            code = getattr(importlib.import_module(name), function)(sys.argv[1:])
        else:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = exit_.code
    except BaseException:
        traceback.print_exc()
        code = 1
    _exit(code)


def _exit(code: int | str | None) -> None:
    """How the interpreter ends a fresh process (threads joined, atexit handlers run, streams
    flushed), less tearing down every module it imported: most of a second."""
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message")
        print(code, file=sys.stderr)
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def main(argv: list[str]) -> None:
    """The forking process: calls its prelude (ARGV: `module:function`, if any), imports
    PRELOADED, then forks one child per request line."""
    for prelude in argv:
        module, function = prelude.split(":")
        getattr(importlib.import_module(module), function)()
    for name in PRELOADED:
        importlib.import_module(name)
    # The TLS context every harvest's client verifies with (loading the CA bundle was ~5 %
    # of a crash test's child); a child whose environment names another bundle makes its own.
    from oai_pipeline.oai.tls import trusted_tls_context

    trusted_tls_context()
    requests, replies = sys.stdin, sys.stdout
    while line := requests.readline():
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
        replies.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
