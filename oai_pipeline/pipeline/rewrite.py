"""Writing records again from their last transform, outside the plan.

Two steps write records the source did not list this time: the undo of local changes
(`local_changes`) and the take-over of a freed pid (`reidentified`). Both read, a batch at a
time and for one writer, what the source last reported, what that writer remembers, and what
its target holds, then write the stored transform through the sync rules; this module is
that shared reading, so both find records, pids and fingerprints the same way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from oai_pipeline import json_codec
from oai_pipeline.harvesters.plugins import rewritten_fingerprints
from oai_pipeline.pipeline.services import Services
from oai_pipeline.state.store import ReportedRecord, StoredTransform, WriterKey
from oai_pipeline.sync.rules import Decision, HarvestMemory, LocalRecord
from oai_pipeline.targets.base import PlannedWrite, SourceKey, Writer

BATCH = 500


@dataclass(frozen=True)
class RewriteBatch:
    """One batch of records to write again for one writer: what the source last reported,
    the writer's memory and its target's state of each, keyed by the writer's pid."""

    reported: dict[str, ReportedRecord]
    memories: dict[str, HarvestMemory]
    transforms: dict[str, StoredTransform | None]
    data: dict[str, dict[str, Any] | None]
    keys: list[SourceKey]
    local: dict[str, LocalRecord]

    def planned(
        self,
        key: SourceKey,
        decision: Decision,
        reason: str,
        local_id: str | None,
        run_started: datetime | None,
        **extra: Any,
    ) -> PlannedWrite:
        """The write of the record's stored transform the sync rules decided."""
        transform = self.transforms.get(key.identifier)
        return PlannedWrite(
            identifier=key.identifier,
            action=decision.action,
            reason=f"{reason}: {decision.reason}",
            datestamp=self.reported[key.identifier].datestamp,
            data=self.data[key.identifier],
            pid=key.pid,
            communities=transform.communities if transform else [],
            local_id=local_id,
            run_started=run_started,
            **extra,
        )

    def fingerprints(self, writer: Writer) -> dict[str, str]:
        """What `writer` remembers writing for each record (see `rewritten_fingerprints`)."""
        return rewritten_fingerprints(
            {i: t.fingerprint if t else None for i, t in self.transforms.items()}, writer
        )


def rewrite_batches(
    services: Services,
    harvester_id: str,
    writer: Writer,
    owner: WriterKey,
    identifiers: Sequence[str],
    *,
    live_only: bool,
) -> Iterator[RewriteBatch]:
    """The records among `identifiers` the source reported, in batches; `live_only`: only
    those it reported live with a transform (else deleted ones and failed ones too)."""
    state = services.state
    for start in range(0, len(identifiers), BATCH):
        chunk = list(identifiers[start : start + BATCH])
        reported = state.last_reported(harvester_id, chunk)
        transforms = {
            i: reported[i].transform
            for i in chunk
            if i in reported
            and (not live_only or (not reported[i].deleted and reported[i].transform is not None))
        }
        data = {i: json_codec.loads(t.data_json) if t else None for i, t in transforms.items()}
        # Found by the writer's pid (its `pid_field`) as the plan finds them, not by the
        # transform's DOI: that gave a record a pid its writer does not give it.
        keys = [
            SourceKey(i, writer.options.pid_in(data[i], t.pid if t else None))
            for i, t in transforms.items()
        ]
        yield RewriteBatch(
            reported=reported,
            memories=state.get_memories(harvester_id, chunk, owner),
            transforms=transforms,
            data=data,
            keys=keys,
            local=writer.lookup(harvester_id, keys),
        )
