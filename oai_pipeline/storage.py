"""Parquet files of the four assets: one folder per (asset, harvester, window) under a root.

A partition is a folder of part files so that every stage reads and writes in bounded chunks:
memory stays flat however large the source is. The root is a local folder or any fsspec URL
(``s3://bucket/prefix`` in production).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import fsspec
import polars as pl


class PartitionStore:
    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")
        self.fs, self._base = fsspec.core.url_to_fs(self.root)

    def _folder(self, asset: str, harvester_id: str, window: str) -> str:
        return f"{self._base}/{asset}/{harvester_id}/{window}"

    def clear(self, asset: str, harvester_id: str, window: str) -> None:
        """Drop what an earlier materialisation of this partition left."""
        folder = self._folder(asset, harvester_id, window)
        if self.fs.exists(folder):
            self.fs.rm(folder, recursive=True)

    def write_part(
        self, asset: str, harvester_id: str, window: str, part: int, frame: pl.DataFrame
    ) -> str:
        folder = self._folder(asset, harvester_id, window)
        self.fs.makedirs(folder, exist_ok=True)
        path = f"{folder}/part-{part:06d}.parquet"
        tmp_path = f"{path}.tmp"
        with self.fs.open(tmp_path, "wb") as handle:
            frame.write_parquet(handle)
        self.fs.mv(tmp_path, path)
        return path

    def part_names(self, asset: str, harvester_id: str, window: str) -> list[str]:
        folder = self._folder(asset, harvester_id, window)
        if not self.fs.exists(folder):
            return []
        names = [p.rsplit("/", 1)[-1] for p in self.fs.ls(folder, detail=False)]
        return sorted(n for n in names if n.endswith(".parquet"))

    def read_part(self, asset: str, harvester_id: str, window: str, name: str) -> pl.DataFrame:
        with self.fs.open(f"{self._folder(asset, harvester_id, window)}/{name}", "rb") as handle:
            return pl.read_parquet(handle)

    def iter_parts(
        self, asset: str, harvester_id: str, window: str
    ) -> Iterator[tuple[str, pl.DataFrame]]:
        for name in self.part_names(asset, harvester_id, window):
            yield name, self.read_part(asset, harvester_id, window, name)

    def write_manifest(self, asset: str, harvester_id: str, window: str, manifest: dict) -> None:
        """Small JSON beside the parts: which harvest run produced this partition."""
        folder = self._folder(asset, harvester_id, window)
        self.fs.makedirs(folder, exist_ok=True)
        with self.fs.open(f"{folder}/_manifest.json", "w") as handle:
            json.dump(manifest, handle)

    def read_manifest(self, asset: str, harvester_id: str, window: str) -> dict | None:
        path = f"{self._folder(asset, harvester_id, window)}/_manifest.json"
        if not self.fs.exists(path):
            return None
        with self.fs.open(path, "r") as handle:
            return json.load(handle)

    def read_partition(self, asset: str, harvester_id: str, window: str) -> pl.DataFrame | None:
        """The whole partition (for inspection and tests); None if never written."""
        frames = [frame for _, frame in self.iter_parts(asset, harvester_id, window)]
        if not frames:
            return None
        return pl.concat(frames, how="vertical_relaxed")
