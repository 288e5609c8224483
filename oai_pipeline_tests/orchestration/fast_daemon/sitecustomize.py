"""Loaded by every Python process of the live tests' `dagster dev` (live_dagster.py puts this
folder on PYTHONPATH): the daemon's backfill and sensor loops run every 2 s, not every 30 s.

A backfill waited up to 30 s for the loop to launch its run and up to 30 s more to be
marked completed: a third of the live tests' time, spent sleeping. Nothing else changes;
the module is patched once it is imported, so processes that never import it pay nothing.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from types import ModuleType

PATCHED, INTERVAL_SECONDS = "dagster._daemon.controller", 2


class _ShorterDaemonLoops(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: object, target: object = None) -> object:
        if name != PATCHED:
            return None
        sys.meta_path.remove(self)  # the real finders find it
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            load(module)
            module.DEFAULT_DAEMON_INTERVAL_SECONDS = INTERVAL_SECONDS  # type: ignore[attr-defined]

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


sys.meta_path.insert(0, _ShorterDaemonLoops())
