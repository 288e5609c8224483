"""Where the suite's temporary files go: in memory when the machine has a tmpfs.

Thousands of small SQLite commits (state stores, targets, Dagster storage) each wait for the
disk otherwise, and a throwaway PostgreSQL server writes a database of ~7 MB for each test
that asks for one (1–1.5 GB per xdist worker by the end of the suite), which its removal
then read back from disk for up to a minute. What the tests check of crashes is a killed
process, which tmpfs keeps the same.
"""

from __future__ import annotations

import os
from pathlib import Path

_MEMORY_FOLDER = Path("/dev/shm")


def memory_folder() -> Path | None:
    """The tmpfs folder to make temporary folders in; None: the system's temporary folder."""
    if _MEMORY_FOLDER.is_dir() and os.access(_MEMORY_FOLDER, os.W_OK):
        return _MEMORY_FOLDER
    return None
