"""Do the four stages of a scope add up? (the `reconciles` and `no_record_errors` checks)"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from oai_pipeline.pipeline.frames import STAGE_ASSETS
from oai_pipeline.pipeline.partition_summary import summarise_partition
from oai_pipeline.storage import PartitionStore


@dataclass
class StageCounts:
    raw: int = 0
    raw_parse_errors: int = 0
    transformed: int = 0
    transform_errors: int = 0
    decisions: int = 0
    written: int = 0
    write_errors: int = 0
    writers: int = 1
    error_types: Counter[str] = field(default_factory=Counter)

    @property
    def problems(self) -> list[str]:
        found = []
        if self.raw != self.transformed:
            found.append(f"raw {self.raw} != transformed {self.transformed} (incl. parse errors)")
        if self.decisions != self.transformed * self.writers:
            found.append(
                f"decisions {self.decisions} != transformed {self.transformed} "
                f"x writers {self.writers}"
            )
        if self.written != self.decisions:
            found.append(f"written + failed + skipped {self.written} != decisions {self.decisions}")
        return found


def count_window(storage: PartitionStore, harvester_id: str, window: str) -> StageCounts:
    """What every stage holds for one window."""
    raw, transformed, decisions, written = (
        summarise_partition(storage, asset, harvester_id, window) for asset in STAGE_ASSETS
    )
    return StageCounts(
        raw=raw.records,
        raw_parse_errors=raw.errors.total(),
        transformed=transformed.records,
        transform_errors=transformed.errors.total(),
        decisions=decisions.records,
        written=written.records,
        write_errors=written.errors.total(),
        writers=max(1, len(decisions.writers)),
        error_types=written.errors,
    )


def sum_counts(counts: Iterable[StageCounts]) -> StageCounts:
    """Windows added up (a range run's totals)."""
    total = StageCounts()
    for each in counts:
        for name in _ADDED:
            setattr(total, name, getattr(total, name) + getattr(each, name))
        # Every window is written by the harvester's writers: the most any window shows.
        total.writers = max(total.writers, each.writers)
        total.error_types.update(each.error_types)
    return total


_ADDED = (
    "raw",
    "raw_parse_errors",
    "transformed",
    "transform_errors",
    "decisions",
    "written",
    "write_errors",
)
