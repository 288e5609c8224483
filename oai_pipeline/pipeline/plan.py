"""Stage 3, `sync_decisions`: what must happen to the target for each record, and why.

A materialised plan: an operator can read it before `written_records` applies it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import polars as pl

from oai_pipeline import json_codec
from oai_pipeline.harvesters.plugins import (
    build_writers,
    transform_fingerprint,
    written_fingerprint,
)
from oai_pipeline.pipeline.frames import (
    DECISIONS_SCHEMA,
    SYNC_DECISIONS,
    TRANSFORMED_RECORDS,
    frame,
)
from oai_pipeline.pipeline.groups import PartRef, map_partition_groups
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.partitions import PLANNED_WRITERS, run_id_of, run_updates_all
from oai_pipeline.pipeline.scope import HarvestScope
from oai_pipeline.pipeline.services import Services
from oai_pipeline.state.store import writer_keys
from oai_pipeline.sync.rules import SourceRecord, decide
from oai_pipeline.targets.base import DEFAULT_PID_FIELD, SourceKey

# What the plan reads of a transformed record: not its data.
PLAN_COLUMNS = ("identifier", "datestamp", "deleted", "pid", "error_type")


def source_records(transformed: pl.DataFrame, fingerprint: str | None = None) -> list[SourceRecord]:
    """The transformed records as the sync rules see them; `fingerprint`: of the chain that
    transformed them."""
    return [
        SourceRecord(
            identifier=row["identifier"],
            datestamp=row["datestamp"],
            deleted=bool(row["deleted"]),
            pid=row["pid"],
            # Every live record without data has an error (`no_data` at the least).
            has_error=not row["deleted"] and row["error_type"] is not None,
            fingerprint=fingerprint,
        )
        for row in transformed.iter_rows(named=True)
    ]


def plan(services: Services, scope: HarvestScope, options: RunOptions) -> Counter[str]:
    harvester = services.harvester(scope.harvester_id)
    writers = build_writers(harvester, services.settings)
    owners = writer_keys(harvester.writers)
    fingerprint = transform_fingerprint(harvester)
    actions: Counter[str] = Counter()
    # A resumed run stays what it was started as: an update_all run rewrites every record
    # even when the attempt that resumes it did not ask for it again.
    run = services.state.get_run(run_id_of(services.storage, TRANSFORMED_RECORDS, scope))
    run_update_all = options.update_all or run_updates_all(run)

    # A writer whose pid is elsewhere than the DOI the transform names finds records by that.
    other_pid_fields = {w.options.pid_field for w in writers} - {DEFAULT_PID_FIELD}

    def plan_group(_parts: list[PartRef], transformed: pl.DataFrame) -> pl.DataFrame:
        base_sources = source_records(transformed, fingerprint)
        identifiers = [s.identifier for s in base_sources]
        data = transformed["data"].to_list() if other_pid_fields else []
        rows = []
        for index, writer in enumerate(writers):
            # Each writer's own memory: its target is edited apart from the others'.
            memories = services.state.get_memories(scope.harvester_id, identifiers, owners[index])
            update_all = run_update_all or writer.options.update_all
            sources = base_sources
            if writer.options.pid_field != DEFAULT_PID_FIELD:
                pid_in = writer.options.pid_in
                sources = [
                    dataclasses.replace(s, pid=pid_in(json_codec.loads(d) if d else None, s.pid))
                    for s, d in zip(base_sources, data, strict=True)
                ]
            # Compared with what this writer remembers writing: its options are in it.
            written = written_fingerprint(fingerprint, writer)
            if written != fingerprint:
                sources = [dataclasses.replace(s, fingerprint=written) for s in sources]
            locals_ = writer.lookup(
                scope.harvester_id, [SourceKey(s.identifier, s.pid) for s in sources]
            )
            for source in sources:
                local = locals_[source.identifier]
                decision = decide(
                    source,
                    memories.get(source.identifier),
                    local,
                    update_all=update_all,
                    publishes=writer.options.publish,
                )
                actions[decision.action.value] += 1
                rows.append(
                    {
                        "identifier": source.identifier,
                        "writer": index,
                        "datestamp": source.datestamp,
                        "deleted": source.deleted,
                        "pid": source.pid,
                        "local_id": local.local_id,
                        "local_state": local.state.value,
                        "action": decision.action.value,
                        "reason": decision.reason,
                    }
                )
        return frame(rows, DECISIONS_SCHEMA)

    try:
        map_partition_groups(
            services.storage,
            scope,
            TRANSFORMED_RECORDS,
            SYNC_DECISIONS,
            plan_group,
            columns=PLAN_COLUMNS + (("data",) if other_pid_fields else ()),
            # rows name writers by position: the write stage checks they are still these
            manifest_extra={PLANNED_WRITERS: list(harvester.writers)},
        )
    finally:
        for writer in writers:
            writer.close()
    return actions
