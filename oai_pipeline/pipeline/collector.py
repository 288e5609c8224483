"""Garbage-collector settings while a stage works through thousands of records.

A stage allocates many small containers per record (parsed rows, dicts of record data) and
keeps a group of them alive at once. With CPython's default thresholds every 700 container
allocations start a collection, and the older generations get rescanned as the heap grows:
about a tenth of a harvest's time went to collections that found little. The stage's data
is acyclic, so collecting rarely loses nothing; the settings are restored afterwards.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

BULK_THRESHOLDS = (100_000, 50, 100)

# The thresholds are the process's, while stages overlap in threads (a Dagster run's steps
# in-process, discovery's page thread): the first stage in saves them, the last one out
# restores them. Each saving and restoring its own, two overlapping left the bulk ones set
# when the first in was the last out.
_lock = threading.Lock()
_inside = 0
_saved: tuple[int, ...] | None = None


@contextmanager
def bulk_allocation() -> Iterator[None]:
    global _inside, _saved
    with _lock:
        if _inside == 0:
            previous = gc.get_threshold()
            # collection switched off by the host: leave it so
            _saved = None if previous[0] == 0 else previous
            if _saved is not None:
                gc.set_threshold(*BULK_THRESHOLDS)
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0 and _saved is not None:
                gc.set_threshold(*_saved)
