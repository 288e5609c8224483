"""Do the four stages of a scope add up? (the `reconciles` and `no_record_errors` checks)"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial

from oai_pipeline.pipeline.frames import (
    RAW_OAI_XML,
    SYNC_DECISIONS,
    TRANSFORMED_RECORDS,
    WRITTEN_RECORDS,
)
from oai_pipeline.pipeline.scope import HarvestScope
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
            found.append(f"decisions {self.decisions} != transformed {self.transformed}")
        if self.written != self.decisions:
            found.append(f"written + failed + skipped {self.written} != decisions {self.decisions}")
        return found


def count_stages(storage: PartitionStore, scopes: Iterable[HarvestScope]) -> StageCounts:
    """What every stage holds for the scopes' partitions, added up."""
    counts = StageCounts()
    writers: set[int] = set()
    for scope in scopes:
        for key in scope.keys:
            parts = partial(storage.iter_parts, harvester_id=scope.harvester_id, window=key)
            for _, raw in parts(RAW_OAI_XML):
                counts.raw += raw.height
                counts.raw_parse_errors += int(raw["error_type"].is_not_null().sum())
            for _, transformed in parts(TRANSFORMED_RECORDS):
                counts.transformed += transformed.height
                counts.transform_errors += int(transformed["error_type"].is_not_null().sum())
            for _, decisions in parts(SYNC_DECISIONS):
                counts.decisions += decisions.height
                writers.update(decisions["writer"].unique().to_list())
            for _, written in parts(WRITTEN_RECORDS):
                counts.written += written.height
                errors = [t for t in written["error_type"].to_list() if t]
                counts.write_errors += len(errors)
                counts.error_types.update(errors)
    counts.writers = max(1, len(writers))
    return counts
