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
