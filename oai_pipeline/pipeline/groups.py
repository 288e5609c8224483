"""Walk a scope's partitions in groups of parts: per-call costs paid per group, not per window.

A backfill range holds hundreds of daily windows with a few records each. A stage that opens
a transaction or looks records up per part would pay that cost per window; grouping
consecutive parts (up to `GROUP_ROWS` records) pays it once per group. Every result row goes
back to the part of the window its identifier came from, so the stored partitions are the
same as part-by-part processing writes, and memory stays bounded by the group.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl

from oai_pipeline.errors import PipelineError
from oai_pipeline.pipeline.collector import bulk_allocation
from oai_pipeline.pipeline.frames import SCHEMAS
from oai_pipeline.pipeline.partition_summary import WindowCounts
from oai_pipeline.pipeline.scope import HarvestScope
from oai_pipeline.storage import PartitionStore

GROUP_ROWS = 5000
_PART = "__part"


@dataclass(frozen=True)
class PartRef:
    """Where a part of the group came from: its window and its part file name."""

    window: str
    name: str
    index: int


# What finishes a group handed out (`map_partition_groups_ahead`): its result rows.
FinishGroup = Callable[[], pl.DataFrame]
StartGroup = Callable[[list[PartRef], pl.DataFrame], FinishGroup]


class _Group:
    def __init__(self) -> None:
        self.parts: list[PartRef] = []
        self.frames: list[pl.DataFrame] = []
        # identifier -> position of its part in `parts`: the way back for result rows
        self.part_of: dict[str, int] = {}
        self.rows = 0

    def overlaps(self, frame: pl.DataFrame) -> bool:
        return not self.part_of.keys().isdisjoint(frame["identifier"].to_list())

    def add(self, part: PartRef, frame: pl.DataFrame) -> None:
        position = len(self.parts)
        self.parts.append(part)
        self.frames.append(frame)
        self.part_of.update(dict.fromkeys(frame["identifier"].to_list(), position))
        self.rows += frame.height


def map_partition_groups(
    storage: PartitionStore,
    scope: HarvestScope,
    source_asset: str,
    target_asset: str,
    transform_group: Callable[[list[PartRef], pl.DataFrame], pl.DataFrame],
    *,
    group_rows: int = GROUP_ROWS,
    columns: Sequence[str] | None = None,
    manifest_extra: dict | None = None,
) -> None:
    """Replace target_asset's partitions of the scope with transform_group of source parts.

    `transform_group(parts, frame)` gets the rows of consecutive parts concatenated and
    returns rows carrying an `identifier` column; each target part keeps its source part's
    name. A group never holds one identifier in two parts, so the way back is unambiguous.
    `columns` reads only those columns of the source parts; `manifest_extra` is added to
    each target partition's manifest (what the next stage must know the stage was run with).
    """

    def start_group(parts: list[PartRef], frame: pl.DataFrame) -> FinishGroup:
        result = transform_group(parts, frame)
        return lambda: result

    walk_partition_groups(
        storage,
        scope,
        source_asset,
        target_asset,
        start_group,
        ahead=False,
        group_rows=group_rows,
        columns=columns,
        manifest_extra=manifest_extra,
    )


def walk_partition_groups(
    storage: PartitionStore,
    scope: HarvestScope,
    source_asset: str,
    target_asset: str,
    start_group: StartGroup,
    *,
    ahead: bool,
    group_rows: int = GROUP_ROWS,
    columns: Sequence[str] | None = None,
    manifest_extra: dict | None = None,
) -> None:
    """`map_partition_groups` for a stage whose groups can be worked on elsewhere (processes).

    `start_group(parts, frame)` hands the group out and returns what finishes it. `ahead`:
    the next group is started before the previous one is finished, so this process's
    finishing (its saves, the parts it writes) runs while the others work, not while they
    wait. Groups are still finished, and their parts and windows written, in order: a stage
    killed at any point leaves what the group-by-group walk would have left.
    """
    with bulk_allocation():
        _map_groups(
            storage,
            scope,
            source_asset,
            target_asset,
            start_group,
            group_rows,
            columns,
            manifest_extra or {},
            ahead=ahead,
        )


@dataclass
class _Started:
    """A group handed out, and the windows to finish once its parts are written."""

    group: _Group
    finish: FinishGroup | None
    windows: list[tuple[str, int, dict | None]]


def _map_groups(
    storage: PartitionStore,
    scope: HarvestScope,
    source_asset: str,
    target_asset: str,
    start_group: StartGroup,
    group_rows: int,
    columns: Sequence[str] | None,
    manifest_extra: dict,
    *,
    ahead: bool,
) -> None:
    group = _Group()
    counts = WindowCounts()
    # Windows read to the end whose last parts may still wait in the group: each is
    # finished (stale parts dropped, manifest written) once its parts are all written.
    read: list[tuple[str, int, dict | None]] = []
    started: _Started | None = None  # with `ahead`: handed out, not yet finished

    def finish(work: _Started) -> None:
        if work.finish is not None:
            _write_group(storage, scope, target_asset, work.group, work.finish(), counts)
        for key, parts, manifest in work.windows:
            storage.finish(
                target_asset,
                scope.harvester_id,
                key,
                parts,
                counts.manifest(key, manifest),
                empty=empty,
            )

    def flush() -> None:
        nonlocal group, started
        if not group.parts:  # windows only: finished after the group handed out before
            if started is not None:
                started.windows.extend(read)
            else:
                finish(_Started(group, None, list(read)))
            read.clear()
            return
        work = _Started(group, start_group(group.parts, _combined(group)), list(read))
        group = _Group()
        read.clear()
        if started is not None:
            finish(started)
        started = work
        if not ahead:
            finish(work)
            started = None

    empty = _empty_part(target_asset)
    for key in scope.keys:
        manifest = storage.read_manifest(source_asset, scope.harvester_id, key)
        storage.begin(target_asset, scope.harvester_id, key)
        parts = 0
        for index, (name, source) in enumerate(
            storage.iter_parts(source_asset, scope.harvester_id, key, columns)
        ):
            if source.is_empty() and empty is not None:  # an empty window's: no work
                storage.write_part(target_asset, scope.harvester_id, key, index, empty)
                parts = index + 1
                continue
            if group.overlaps(source):
                flush()
            group.add(PartRef(key, name, index), source)
            parts = index + 1
            if group.rows >= group_rows:
                flush()
        read.append((key, parts, None if manifest is None else {**manifest, **manifest_extra}))
        if not group.parts:
            flush()
    flush()
    if started is not None:
        finish(started)


def _empty_part(asset: str) -> pl.DataFrame | None:
    """The part of no records of one of the four assets: its columns, no rows."""
    schema = SCHEMAS.get(asset)
    return None if schema is None else schema.to_frame()


def _combined(group: _Group) -> pl.DataFrame:
    return pl.concat(group.frames, how="vertical_relaxed")


def _write_group(
    storage: PartitionStore,
    scope: HarvestScope,
    target_asset: str,
    group: _Group,
    result: pl.DataFrame,
    counts: WindowCounts,
) -> None:
    # Routed with the group's own map, not with frame operations per part: a range of daily
    # windows makes hundreds of small parts, and every polars call has a fixed cost.
    identifiers = result["identifier"].to_list()
    positions = [group.part_of.get(identifier) for identifier in identifiers]
    if None in positions:
        stray = [i for i, p in zip(identifiers, positions, strict=True) if p is None]
        raise PipelineError(f"{target_asset}: result rows of records not in the group: {stray[:3]}")
    routed = result.with_columns(pl.Series(_PART, positions, dtype=pl.Int32))
    by_part = routed.partition_by(_PART, as_dict=True, include_key=False, maintain_order=True)
    for position, part in enumerate(group.parts):
        rows = by_part.get((position,), result.clear())
        storage.write_part(target_asset, scope.harvester_id, part.window, part.index, rows)
        counts.add_part(part.window, rows)


def read_group(
    storage: PartitionStore,
    asset: str,
    harvester_id: str,
    parts: list[PartRef],
    columns: Sequence[str] | None = None,
) -> pl.DataFrame:
    """Another asset's parts of the same names, side by side with the group's."""
    return pl.concat(
        [storage.read_part(asset, harvester_id, part.window, part.name, columns) for part in parts],
        how="vertical_relaxed",
    )
