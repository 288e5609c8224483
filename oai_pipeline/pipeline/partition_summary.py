"""What one stage's stored partition holds: the counts its window's materialisation shows.

A range run materialises hundreds of windows at once, and Dagster copies the run's metadata
onto every one of them. Each window gets instead the figures of its own records.

A stage counts the rows of every part as it writes it and keeps the window's counts in the
manifest it writes last: a partition with a manifest is complete, so its counts describe
exactly the parts beside them. Reading them back is one small file per window; counting the
parts again cost ~1 ms a window and asset (a year of daily windows: ~3 s a run, twice with
the checks). A partition written before manifests held counts is counted from its parts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import polars as pl

from oai_pipeline.pipeline.frames import ERROR_COLUMNS, SCHEMAS
from oai_pipeline.storage import PartitionStore

# The failed rows a partition's counts keep (its materialisation shows them as a table).
ERROR_PREVIEW = 50
_MANIFEST_KEY = "summary"
_COUNTED = ["deleted", "action", "writer", "error_type"]


@dataclass
class PartitionSummary:
    records: int = 0
    deleted: int = 0
    actions: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    writers: set[int] = field(default_factory=set)
    error_rows: list[dict] = field(default_factory=list)  # the first `preview` failed rows

    def add(self, other: PartitionSummary, *, preview: int = 0) -> None:
        self.records += other.records
        self.deleted += other.deleted
        self.actions.update(other.actions)
        self.errors.update(other.errors)
        self.writers |= other.writers
        self.error_rows.extend(other.error_rows[: max(0, preview - len(self.error_rows))])

    def to_json(self) -> dict:
        return {
            "records": self.records,
            "deleted": self.deleted,
            "actions": dict(self.actions),
            "errors": dict(self.errors),
            "writers": sorted(self.writers),
            "error_rows": self.error_rows,
        }

    @classmethod
    def from_json(cls, data: dict) -> PartitionSummary:
        return cls(
            records=data["records"],
            deleted=data["deleted"],
            actions=Counter(data["actions"]),
            errors=Counter(data["errors"]),
            writers=set(data["writers"]),
            error_rows=list(data["error_rows"]),
        )


def summarise_frame(part: pl.DataFrame, *, preview: int = ERROR_PREVIEW) -> PartitionSummary:
    """Counts of a part's rows: deleted, per action, per error type, per writer (whichever of
    these columns the part has), and its first `preview` failed rows.

    Every stage counts every part it writes (a year of daily windows: ~1,500 parts a run),
    so values are counted in Python (a polars call costs ~20 µs however small the part)
    and the failed rows are looked for only in a part that has some."""
    summary = PartitionSummary(records=part.height)
    if "deleted" in part.columns:
        summary.deleted = int(part["deleted"].sum())
    if "action" in part.columns:
        summary.actions.update(_present(part["action"].to_list()))
    if "writer" in part.columns:
        summary.writers.update(_present(part["writer"].to_list()))
    if "error_type" in part.columns and part["error_type"].null_count() < part.height:
        failed = part.filter(pl.col("error_type").is_not_null())
        summary.errors.update(failed["error_type"].to_list())
        if preview:
            shown = [name for name in ("identifier", *ERROR_COLUMNS) if name in part.columns]
            summary.error_rows = failed.select(shown).head(preview).to_dicts()
    return summary


def _present(values: list) -> list:
    return [value for value in values if value is not None]


class WindowCounts:
    """The counts of the parts a stage writes, per window, for the windows' manifests."""

    def __init__(self) -> None:
        self._by_window: dict[str, PartitionSummary] = {}

    def add_part(self, window: str, part: pl.DataFrame) -> None:
        counts = self._by_window.setdefault(window, PartitionSummary())
        counts.add(summarise_frame(part), preview=ERROR_PREVIEW)

    def manifest(self, window: str, manifest: dict | None) -> dict | None:
        """`manifest` with the window's counts (none without a manifest: the partition then
        stays without one, see `PartitionStore.finish`)."""
        counts = self._by_window.pop(window, PartitionSummary())
        if manifest is None:
            return None
        return {**manifest, _MANIFEST_KEY: counts.to_json()}


def summarise_partition(
    storage: PartitionStore, asset: str, harvester_id: str, window: str, *, preview: int = 0
) -> PartitionSummary:
    """The partition's counts (see `summarise_frame`), with its first `preview` failed rows
    (at most `ERROR_PREVIEW`)."""
    preview = min(preview, ERROR_PREVIEW)
    manifest = storage.read_manifest(asset, harvester_id, window)
    if manifest is not None and _MANIFEST_KEY in manifest:
        summary = PartitionSummary.from_json(manifest[_MANIFEST_KEY])
        summary.error_rows = summary.error_rows[:preview]
        return summary
    wanted = [*_COUNTED, *(["identifier", *ERROR_COLUMNS] if preview else [])]
    columns = [name for name in dict.fromkeys(wanted) if name in SCHEMAS[asset]]
    summary = PartitionSummary()
    for _, part in storage.iter_parts(asset, harvester_id, window, columns):
        summary.add(summarise_frame(part, preview=preview), preview=preview)
    return summary
