"""Garbage-collector settings while a stage works through thousands of records.

A stage allocates many small containers per record (parsed rows, dicts of record data) and
keeps a group of them alive at once. With CPython's default thresholds every 700 container
allocations start a collection, and the older generations get rescanned as the heap grows:
about a tenth of a harvest's time went to collections that found little. The stage's data
is acyclic, so collecting rarely loses nothing; the settings are restored afterwards.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

BULK_THRESHOLDS = (100_000, 50, 100)


@contextmanager
def bulk_allocation() -> Iterator[None]:
    previous = gc.get_threshold()
    if previous[0] == 0:  # collection switched off by the host: leave it so
        yield
        return
    gc.set_threshold(*BULK_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)
