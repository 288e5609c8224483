"""What one stage's stored partition holds: the counts its window's materialisation shows.

A range run materialises hundreds of windows at once, and Dagster copies the run's metadata
onto every one of them. Counting each window's own Parquet instead gives each window the
figures of its own records, read back from what was stored (only the few columns counted).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import polars as pl

from oai_pipeline.pipeline.frames import ERROR_COLUMNS, SCHEMAS
from oai_pipeline.storage import PartitionStore


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


def summarise_partition(
    storage: PartitionStore, asset: str, harvester_id: str, window: str, *, preview: int = 0
) -> PartitionSummary:
    """Counts of the partition's rows: deleted, per action, per error type, per writer."""
    schema = SCHEMAS[asset]
    wanted = ["deleted", "action", "writer", "error_type"]
    if preview:
        wanted += ["identifier", *ERROR_COLUMNS]
    columns = [name for name in dict.fromkeys(wanted) if name in schema]
    summary = PartitionSummary()
    for _, part in storage.iter_parts(asset, harvester_id, window, columns):
        summary.records += part.height
        if "deleted" in columns:
            summary.deleted += int(part["deleted"].sum())
        if "action" in columns:
            summary.actions.update(_value_counts(part["action"]))
        if "writer" in columns:
            summary.writers.update(part["writer"].drop_nulls().unique().to_list())
        if "error_type" in columns:
            failed = part.filter(pl.col("error_type").is_not_null())
            summary.errors.update(_value_counts(failed["error_type"]))
            room = preview - len(summary.error_rows)
            if room > 0 and failed.height:
                summary.error_rows.extend(failed.head(room).to_dicts())
    return summary


def _value_counts(values: pl.Series) -> dict[str, int]:
    counts = values.drop_nulls().value_counts()
    return dict(zip(counts[values.name].to_list(), counts["count"].to_list(), strict=True))
