"""Stage 2, `transformed_records`: each harvested record through the harvester's transformers."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import polars as pl

from oai_pipeline.errors import RecordError
from oai_pipeline.harvesters.plugins import transform_fingerprint
from oai_pipeline.pipeline.frames import (
    RAW_OAI_XML,
    RAW_SCHEMA,
    TRANSFORMED_RECORDS,
    TRANSFORMED_SCHEMA,
    error_columns,
    error_from_row,
    frame,
)
from oai_pipeline.pipeline.groups import (
    FinishGroup,
    PartRef,
    read_group,
    walk_partition_groups,
)
from oai_pipeline.pipeline.partitions import run_id_of, run_updates_all
from oai_pipeline.pipeline.scope import HarvestScope
from oai_pipeline.pipeline.services import Services
from oai_pipeline.pipeline.transform_workers import TransformChain
from oai_pipeline.state.store import StoredTransform
from oai_pipeline.transform.base import TransformItem


@dataclass
class TransformSummary:
    records: int = 0
    transformed: int = 0
    deleted: int = 0
    reused: int = 0  # unchanged records whose stored transform was taken
    workers: int = 1  # processes that ran the chain (see transform_workers)
    errors: Counter[str] = field(default_factory=Counter)


def no_data_error() -> RecordError:
    """A live record the chain made nothing of (e.g. no <metadata>): nothing to write."""
    return RecordError(type="no_data", message="the transformers produced no record data")


def _xml_of(
    services: Services,
    scope: HarvestScope,
    parts: list[PartRef],
    live: pl.Series,
    stored: dict[str, object],
) -> dict[str, bytes]:
    """The XML of the group's live records that have no stored transform to reuse."""
    wanted = [identifier for identifier in live.to_list() if identifier not in stored]
    if not wanted:
        return {}
    rows = read_group(
        services.storage, RAW_OAI_XML, scope.harvester_id, parts, columns=["identifier", "xml"]
    ).filter(pl.col("identifier").is_in(wanted))
    return dict(zip(rows["identifier"], rows["xml"], strict=True))


def transform(services: Services, scope: HarvestScope) -> TransformSummary:
    harvester = services.harvester(scope.harvester_id)
    fingerprint = transform_fingerprint(harvester)
    summary = TransformSummary()
    # update_all: every record is transformed again from the XML just harvested (a source
    # may change a record without changing its datestamp), none taken from the store.
    reuse = not run_updates_all(
        services.state.get_run(run_id_of(services.storage, RAW_OAI_XML, scope)), harvester
    )

    def start_group(parts: list[PartRef], raw: pl.DataFrame) -> FinishGroup:
        # A record unchanged since the chain of the same fingerprint transformed it cleanly
        # is not transformed again: its stored transform is what the chain would make.
        # The group is read without its XML; only the records to transform need theirs.
        clean_live = raw.filter(~pl.col("deleted") & pl.col("error_type").is_null())
        stored = (
            services.state.stored_transforms(
                scope.harvester_id,
                dict(zip(clean_live["identifier"], clean_live["datestamp"], strict=True)),
                fingerprint,
            )
            if reuse
            else {}
        )
        xml_of = _xml_of(
            services, scope, parts, raw.filter(~pl.col("deleted"))["identifier"], stored
        )
        items: list[TransformItem] = []
        for row in raw.iter_rows(named=True):
            deleted = bool(row["deleted"])
            items.append(
                TransformItem(
                    identifier=row["identifier"],
                    datestamp=row["datestamp"],
                    set_specs=list(row["set_specs"] or []),
                    xml=None if deleted else xml_of.get(row["identifier"]),
                    error=error_from_row(row),
                )
            )
        fresh = [i for i in items if i.identifier not in stored]
        # Handed to the workers; this process saves the group before meanwhile.
        batch = chain.start([i for i in fresh if i.xml is not None])
        return lambda: finish_group(raw, items, stored, fresh, batch.result())

    def finish_group(
        raw: pl.DataFrame,
        items: list[TransformItem],
        stored: dict[str, StoredTransform],
        fresh: list[TransformItem],
        encoded: dict[str, str],  # only stored: the text is the data
    ) -> pl.DataFrame:
        for item in fresh:
            if item.xml is not None and item.error is None and item.identifier not in encoded:
                item.error = no_data_error()
        services.state.save_transformed(
            scope.harvester_id, fresh, fingerprint=fingerprint, data_json=encoded
        )
        rows = []
        for item, deleted in zip(items, raw["deleted"].to_list(), strict=True):
            summary.records += 1
            reused = stored.get(item.identifier)
            if reused is not None:
                summary.reused += 1
                data_json, pid, communities = reused.data_json, reused.pid, reused.communities
            else:
                data_json = encoded.get(item.identifier)
                pid, communities = item.pid, item.communities
            if deleted:
                summary.deleted += 1
            elif item.error is not None:
                summary.errors[item.error.type] += 1
            else:
                summary.transformed += 1
            rows.append(
                {
                    "identifier": item.identifier,
                    "datestamp": item.datestamp,
                    "deleted": deleted,
                    "data": data_json,
                    "pid": pid,
                    "communities": communities,
                    **error_columns(item.error),
                }
            )
        return frame(rows, TRANSFORMED_SCHEMA)

    with TransformChain(harvester, workers=services.settings.transform_workers) as chain:
        walk_partition_groups(
            services.storage,
            scope,
            RAW_OAI_XML,
            TRANSFORMED_RECORDS,
            start_group,
            ahead=True,  # the workers transform the next group while this one is saved
            columns=[name for name in RAW_SCHEMA.names() if name != "xml"],
        )
        summary.workers = chain.workers
    return summary
