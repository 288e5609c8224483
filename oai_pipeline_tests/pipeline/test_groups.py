"""Grouped parts: each result row lands in the part of the window its record came from."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from oai_pipeline.errors import PipelineError
from oai_pipeline.pipeline.groups import (
    FinishGroup,
    PartRef,
    map_partition_groups,
    walk_partition_groups,
)
from oai_pipeline.pipeline.partition_summary import summarise_partition
from oai_pipeline.pipeline.scope import HarvestScope, Window
from oai_pipeline.storage import PartitionStore

H = "h"


def _scope(days: int) -> HarvestScope:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    return HarvestScope(
        H,
        tuple(
            Window(f"2024-01-{day + 1:02d}", start + timedelta(days), start + timedelta(day + 1))
            for day in range(days)
        ),
    )


def _fill(store: PartitionStore, scope: HarvestScope, parts: dict[str, list[list[str]]]) -> None:
    for key in scope.keys:
        store.write_manifest("source", H, key, {"run_id": 7})
        for index, identifiers in enumerate(parts.get(key, [])):
            frame = pl.DataFrame({"identifier": identifiers, "n": range(len(identifiers))})
            store.write_part("source", H, key, index, frame)


def _doubled(calls: list[list[PartRef]]):
    def transform(parts: list[PartRef], frame: pl.DataFrame) -> pl.DataFrame:
        calls.append(parts)
        # Two rows per record (as with two writers), in an order unlike the input's.
        return pl.concat([frame.with_columns(copy=pl.lit(c)) for c in (1, 2)]).sort(
            "identifier", descending=True
        )

    return transform


Transform = Callable[[list[PartRef], pl.DataFrame], pl.DataFrame]


def _map_ahead(
    store: PartitionStore,
    scope: HarvestScope,
    source: str,
    target: str,
    transform: Transform,
    **options: Any,
) -> None:
    """`walk_partition_groups` with the transform run when the group is finished."""

    def start(parts: list[PartRef], frame: pl.DataFrame) -> FinishGroup:
        return lambda: transform(parts, frame)

    walk_partition_groups(store, scope, source, target, start, ahead=True, **options)


# Both walks write the same partitions; the one ahead only finishes each group later.
MAPPERS = pytest.mark.parametrize("mapper", [map_partition_groups, _map_ahead])


@MAPPERS
@pytest.mark.parametrize("group_rows", [1, 3, 1000])
def test_rows_go_back_to_their_parts(tmp_path: Path, group_rows: int, mapper) -> None:
    store = PartitionStore(str(tmp_path))
    scope = _scope(4)
    parts = {
        "2024-01-01": [["a", "b"], ["c"]],
        "2024-01-02": [],  # an empty window: cleared, manifest copied, no part
        "2024-01-03": [["d", "e", "f"]],
        "2024-01-04": [[]],  # a part without rows still gets its (empty) result part
    }
    _fill(store, scope, parts)
    store.write_part("target", H, "2024-01-02", 0, pl.DataFrame({"identifier": ["old"]}))
    calls: list[list[PartRef]] = []
    mapper(store, scope, "source", "target", _doubled(calls), group_rows=group_rows)
    for key, key_parts in parts.items():
        assert store.read_manifest("target", H, key)["run_id"] == 7
        # the counts of the rows written, not the source's
        counted = summarise_partition(store, "target", H, key)
        assert counted.records == 2 * sum(len(identifiers) for identifiers in key_parts)
        assert store.part_names("target", H, key) == [
            f"part-{i:06d}.parquet" for i in range(len(key_parts))
        ]
        for index, identifiers in enumerate(key_parts):
            written = store.read_part("target", H, key, f"part-{index:06d}.parquet")
            assert sorted(written["identifier"].to_list()) == sorted(identifiers * 2)
            assert set(written.columns) == {"identifier", "n", "copy"}
    # A group closes once it holds group_rows records; the last one at the end.
    assert len(calls) == {1: 4, 3: 3, 1000: 1}[group_rows]


@MAPPERS
def test_an_identifier_in_two_parts_splits_the_group(tmp_path: Path, mapper) -> None:
    store = PartitionStore(str(tmp_path))
    scope = _scope(2)
    parts = {"2024-01-01": [["a", "b"]], "2024-01-02": [["b", "c"]]}
    _fill(store, scope, parts)
    calls: list[list[PartRef]] = []
    mapper(store, scope, "source", "target", _doubled(calls))
    assert [[p.window for p in call] for call in calls] == [["2024-01-01"], ["2024-01-02"]]
    second = store.read_part("target", H, "2024-01-02", "part-000000.parquet")
    assert sorted(second["identifier"].to_list()) == ["b", "b", "c", "c"]


def test_a_result_row_of_an_unknown_record_is_an_error(tmp_path: Path) -> None:
    store = PartitionStore(str(tmp_path))
    scope = _scope(1)
    _fill(store, scope, {"2024-01-01": [["a"]]})

    def stray(_parts: list[PartRef], frame: pl.DataFrame) -> pl.DataFrame:
        return pl.DataFrame({"identifier": ["zzz"], "n": [0]})

    with pytest.raises(PipelineError, match="zzz"):
        map_partition_groups(store, scope, "source", "target", stray)


@MAPPERS
def test_a_window_gets_its_manifest_once_all_its_parts_are_written(tmp_path: Path, mapper) -> None:
    """A target window with a manifest is complete, even when its parts span groups."""
    store = PartitionStore(str(tmp_path))
    scope = _scope(3)
    _fill(store, scope, {"2024-01-01": [["a"], ["b"], ["c"]], "2024-01-03": [["d"]]})
    seen: list[tuple[str, dict | None]] = []

    def check(parts: list[PartRef], frame: pl.DataFrame) -> pl.DataFrame:
        seen.extend((p.window, store.read_manifest("target", H, p.window)) for p in parts)
        return frame

    # group_rows=2: the third part still waits in the group when its window has been read
    mapper(store, scope, "source", "target", check, group_rows=2)
    assert seen == [("2024-01-01", None)] * 3 + [("2024-01-03", None)]
    for key, records in {"2024-01-01": 3, "2024-01-02": 0, "2024-01-03": 1}.items():
        assert store.read_manifest("target", H, key)["run_id"] == 7
        # counted over the groups its parts were in
        assert summarise_partition(store, "target", H, key).records == records


def test_mapping_again_after_the_source_shrank_leaves_no_stale_part(tmp_path: Path) -> None:
    store = PartitionStore(str(tmp_path))
    scope = _scope(2)
    _fill(store, scope, {"2024-01-01": [["a"], ["b"], ["c"]], "2024-01-02": [["d"]]})
    map_partition_groups(store, scope, "source", "target", _doubled([]))
    assert len(store.part_names("target", H, "2024-01-01")) == 3
    for key in scope.keys:  # the source re-materialised: one part, then none
        store.begin("source", H, key)
    store.write_part("source", H, "2024-01-01", 0, pl.DataFrame({"identifier": ["x"], "n": [0]}))
    store.finish("source", H, "2024-01-01", 1, {"run_id": 8})
    store.finish("source", H, "2024-01-02", 0, {"run_id": 8})
    map_partition_groups(store, scope, "source", "target", _doubled([]))
    assert store.part_names("target", H, "2024-01-01") == ["part-000000.parquet"]
    assert store.read_partition("target", H, "2024-01-01")["identifier"].to_list() == ["x", "x"]
    assert store.part_names("target", H, "2024-01-02") == []  # the window became empty
    assert store.read_manifest("target", H, "2024-01-02")["run_id"] == 8
    assert summarise_partition(store, "target", H, "2024-01-02").records == 0
    assert sorted(p.name for p in (tmp_path / "target" / H / "2024-01-02").iterdir()) == [
        "_manifest.json"
    ]


def test_ahead_the_next_group_is_handed_out_before_the_one_before_is_finished(
    tmp_path: Path,
) -> None:
    """The point of the walk ahead: while others work on a group, this process finishes the
    one before. Its parts and windows are still written in order, each window only once all
    its parts are: what a kill at any moment leaves is what the plain walk would leave."""
    store = PartitionStore(str(tmp_path))
    scope = _scope(3)
    _fill(store, scope, {"2024-01-01": [["a"], ["b"]], "2024-01-02": [["c"]], "2024-01-03": []})
    events: list[str] = []

    def start(parts: list[PartRef], frame: pl.DataFrame) -> FinishGroup:
        name = "+".join(frame["identifier"].to_list())
        events.append(f"start {name}")

        def finish() -> pl.DataFrame:
            written = {k: store.read_manifest("target", H, k) is not None for k in scope.keys}
            events.append(f"finish {name} {sorted(k for k, done in written.items() if done)}")
            return frame

        return finish

    walk_partition_groups(store, scope, "source", "target", start, ahead=True, group_rows=1)
    assert events == [
        "start a",
        "start b",
        "finish a []",
        "start c",
        "finish b []",
        "finish c ['2024-01-01']",
    ]
    for key, records in {"2024-01-01": 2, "2024-01-02": 1, "2024-01-03": 0}.items():
        assert store.read_manifest("target", H, key)["run_id"] == 7
        assert summarise_partition(store, "target", H, key).records == records
