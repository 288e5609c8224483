from __future__ import annotations

from pathlib import Path

import polars as pl

from oai_pipeline.pipeline.frames import RAW_SCHEMA, frame
from oai_pipeline.storage import PartitionStore


def _rows(n: int, offset: int = 0) -> pl.DataFrame:
    return frame(
        [
            {
                "identifier": f"oai:x:{i}",
                "datestamp": "2024-01-01",
                "deleted": False,
                "set_specs": ["a"],
                "xml": b"<record/>",
                "error_type": None,
                "error_message": None,
                "error_location": None,
            }
            for i in range(offset, offset + n)
        ],
        RAW_SCHEMA,
    )


def test_parts_round_trip_in_order_and_clear(tmp_path: Path) -> None:
    store = PartitionStore(str(tmp_path / "storage"))
    assert store.read_partition("raw", "h", "2024-01-01") is None
    store.write_part("raw", "h", "2024-01-01", 0, _rows(3))
    store.write_part("raw", "h", "2024-01-01", 1, _rows(2, offset=3))
    store.write_manifest("raw", "h", "2024-01-01", {"run_id": 7})
    assert store.part_names("raw", "h", "2024-01-01") == [
        "part-000000.parquet",
        "part-000001.parquet",
    ]
    whole = store.read_partition("raw", "h", "2024-01-01")
    assert whole is not None
    assert whole["identifier"].to_list() == [f"oai:x:{i}" for i in range(5)]
    assert store.read_manifest("raw", "h", "2024-01-01") == {"run_id": 7}
    store.clear("raw", "h", "2024-01-01")
    assert store.read_partition("raw", "h", "2024-01-01") is None
    assert store.read_manifest("raw", "h", "2024-01-01") is None


def test_fsspec_url_root(tmp_path: Path) -> None:
    store = PartitionStore(f"file://{tmp_path}/remote")
    store.write_part("raw", "h", "w", 0, _rows(1))
    assert (tmp_path / "remote" / "raw" / "h" / "w" / "part-000000.parquet").exists()
    assert store.read_partition("raw", "h", "w").height == 1


def _exercise(store: PartitionStore) -> dict:
    """Everything a stage does to a partition, as plain data to compare across roots."""
    seen: dict = {"missing": store.read_partition("raw", "h", "w")}
    seen["missing_manifest"] = store.read_manifest("raw", "h", "w")
    seen["missing_names"] = store.part_names("raw", "h", "w")
    store.clear("raw", "h", "w")  # nothing there: no error
    store.write_manifest("raw", "h", "w", {"run_id": 3, "from": None, "until": "2024-01-02"})
    store.write_part("raw", "h", "w", 1, _rows(2, offset=3))
    store.write_part("raw", "h", "w", 0, _rows(3))
    seen["names"] = store.part_names("raw", "h", "w")
    seen["manifest"] = store.read_manifest("raw", "h", "w")
    seen["rows"] = store.read_partition("raw", "h", "w").rows()
    seen["parts"] = [(n, f.rows()) for n, f in store.iter_parts("raw", "h", "w")]
    store.write_part("raw", "h", "w", 0, _rows(1, offset=9))  # a part rewritten in place
    seen["rewritten"] = store.read_partition("raw", "h", "w").rows()
    store.clear("raw", "h", "w")
    seen["cleared"] = (store.part_names("raw", "h", "w"), store.read_manifest("raw", "h", "w"))
    store.write_part("raw", "h", "w", 0, _rows(1))  # the folder comes back
    seen["again"] = store.read_partition("raw", "h", "w").rows()
    return seen


def _rematerialise(store: PartitionStore) -> dict:
    """Partitions rewritten in place with fewer parts, none, more; a rewrite cut short."""
    seen: dict = {}

    def run(window: str, parts: list[int], manifest: dict | None) -> None:
        store.begin("raw", "h", window)
        seen[f"{window} during"] = store.read_manifest("raw", "h", window)
        for part, rows in enumerate(parts):
            store.write_part("raw", "h", window, part, _rows(rows, offset=10 * part))
        store.finish("raw", "h", window, len(parts), manifest)
        partition = store.read_partition("raw", "h", window)
        seen[window] = seen.get(window, []) + [
            (
                store.part_names("raw", "h", window),
                store.read_manifest("raw", "h", window),
                None if partition is None else partition["identifier"].to_list(),
            )
        ]

    run("fewer", [2, 1, 3], {"run_id": 1})
    run("fewer", [1], {"run_id": 2, "from": "2024-01-01", "until": None})
    run("empty", [1, 1], {"run_id": 1})
    run("empty", [], {"run_id": 2})
    run("more", [], {"run_id": 1})
    run("more", [1, 2], {"run_id": 2})
    run("none", [1], None)  # the source had no manifest: none here either
    run("never", [], None)
    # Cut short after one part: no manifest, so not taken for a complete partition.
    store.begin("raw", "h", "fewer")
    store.write_part("raw", "h", "fewer", 0, _rows(2, offset=50))
    seen["cut short"] = store.read_manifest("raw", "h", "fewer")
    run("fewer", [1], {"run_id": 3})  # the resumed stage rewrites it
    return seen


def test_rematerialising_in_place_on_local_and_fsspec_roots(tmp_path: Path) -> None:
    local = _rematerialise(PartitionStore(str(tmp_path / "local")))
    assert local == _rematerialise(PartitionStore(f"memory://{tmp_path.name}/again"))
    one = ["part-000000.parquet"]
    assert local["fewer"] == [
        (
            ["part-000000.parquet", "part-000001.parquet", "part-000002.parquet"],
            {"run_id": 1},
            ["oai:x:0", "oai:x:1", "oai:x:10", "oai:x:20", "oai:x:21", "oai:x:22"],
        ),
        (one, {"run_id": 2, "from": "2024-01-01", "until": None}, ["oai:x:0"]),
        (one, {"run_id": 3}, ["oai:x:0"]),
    ]
    assert local["empty"][1] == ([], {"run_id": 2}, None)
    assert local["more"][1][0] == ["part-000000.parquet", "part-000001.parquet"]
    assert local["none"] == [(one, None, ["oai:x:0"])]
    assert local["never"] == [([], None, None)]
    assert local["fewer during"] is None and local["cut short"] is None
    folder = tmp_path / "local" / "raw" / "h"
    assert sorted(p.name for p in (folder / "fewer").iterdir()) == ["_manifest.json", *one]
    assert sorted(p.name for p in (folder / "empty").iterdir()) == ["_manifest.json"]
    assert not (folder / "never").exists()


def test_a_rewritten_part_and_manifest_keep_their_files(tmp_path: Path) -> None:
    """Rewriting in place renames and overwrites: no file deleted and created again."""
    store = PartitionStore(str(tmp_path))
    folder = tmp_path / "raw" / "h" / "w"
    store.begin("raw", "h", "w")
    store.write_part("raw", "h", "w", 0, _rows(1))
    store.finish("raw", "h", "w", 1, {"run_id": 1})
    files = {p.name: p.stat().st_ino for p in folder.iterdir()}
    store.begin("raw", "h", "w")
    store.write_part("raw", "h", "w", 0, _rows(2))
    store.finish("raw", "h", "w", 1, {"run_id": 2})
    assert {p.name: p.stat().st_ino for p in folder.iterdir()} == files
    assert store.read_partition("raw", "h", "w").height == 2
    assert store.read_manifest("raw", "h", "w") == {"run_id": 2}


def test_local_fast_path_matches_fsspec(tmp_path: Path) -> None:
    """The plain-os path for local roots gives what fsspec gives for another filesystem."""
    local = PartitionStore(str(tmp_path / "local"))
    memory = PartitionStore(f"memory://{tmp_path.name}/storage")
    assert local._local and not memory._local
    assert _exercise(local) == _exercise(memory)
    folder = tmp_path / "local" / "raw" / "h" / "w"
    assert sorted(p.name for p in folder.iterdir()) == ["part-000000.parquet"]


def test_no_temporary_files_left_and_manifest_is_plain_json(tmp_path: Path) -> None:
    store = PartitionStore(str(tmp_path))
    store.write_manifest("raw", "h", "w", {"run_id": 1})
    store.write_part("raw", "h", "w", 0, _rows(1))
    folder = tmp_path / "raw" / "h" / "w"
    assert sorted(p.name for p in folder.iterdir()) == ["_manifest.json", "part-000000.parquet"]
    assert (folder / "_manifest.json").read_text() == '{"run_id": 1}'
    assert pl.read_parquet(folder / "part-000000.parquet").equals(_rows(1))


def _scope(keys: list[str]):
    from oai_pipeline.pipeline.scope import HarvestScope, Window

    return HarvestScope("h", tuple(Window(key, None, None) for key in keys))


def _map_twice(store: PartitionStore) -> dict:
    from oai_pipeline.pipeline.groups import PartRef, map_partition_groups

    keys = [f"w{i:02d}" for i in range(12)]
    for number, key in enumerate(keys):
        if number % 3:  # some windows without parts, one without a manifest
            store.write_manifest("raw", "h", key, {"run_id": number})
        for part in range(number % 4):
            store.write_part("raw", "h", key, part, _rows(part + 1, offset=10 * number))
    store.write_part("out", "h", "w00", 7, _rows(1))  # left by an earlier materialisation

    def double(parts: list[PartRef], frame: pl.DataFrame) -> pl.DataFrame:
        return pl.concat([frame, frame]).sort("identifier", maintain_order=True)

    map_partition_groups(store, _scope(keys), "raw", "out", double, group_rows=4)
    map_partition_groups(store, _scope(keys), "raw", "out", double)  # again: same result
    return {
        key: (
            store.part_names("out", "h", key),
            store.read_manifest("out", "h", key),
            None if (p := store.read_partition("out", "h", key)) is None else p.rows(),
        )
        for key in keys
    }


def test_map_partition_groups_same_on_local_and_fsspec_roots(tmp_path: Path) -> None:
    local = _map_twice(PartitionStore(str(tmp_path / "local")))
    assert local == _map_twice(PartitionStore(f"memory://{tmp_path.name}/map"))
    assert local["w00"] == ([], None, None)  # the stale part is gone
    assert local["w03"][0] == ["part-000000.parquet", "part-000001.parquet", "part-000002.parquet"]
