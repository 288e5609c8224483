"""Do the four stages of a scope add up? (the `reconciles` and `no_record_errors` checks)"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

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


def count_stages(storage: PartitionStore, scope: HarvestScope) -> StageCounts:
    counts = StageCounts()
    writers: set[int] = set()
    for key in scope.keys:
        for _, raw in storage.iter_parts(RAW_OAI_XML, scope.harvester_id, key):
            counts.raw += raw.height
            counts.raw_parse_errors += raw["error_type"].is_not_null().sum()
        for _, transformed in storage.iter_parts(TRANSFORMED_RECORDS, scope.harvester_id, key):
            counts.transformed += transformed.height
            errors = [t for t in transformed["error_type"].to_list() if t]
            counts.transform_errors += len(errors)
        for _, decisions in storage.iter_parts(SYNC_DECISIONS, scope.harvester_id, key):
            counts.decisions += decisions.height
            writers.update(decisions["writer"].unique().to_list())
        for _, written in storage.iter_parts(WRITTEN_RECORDS, scope.harvester_id, key):
            counts.written += written.height
            errors = [t for t in written["error_type"].to_list() if t]
            counts.write_errors += len(errors)
            counts.error_types.update(errors)
    counts.writers = max(1, len(writers))
    return counts
