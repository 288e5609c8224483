"""Parquet files of the four assets: one folder per (asset, harvester, window) under a root.

A partition is a folder of part files so that every stage reads and writes in bounded chunks:
memory stays flat however large the source is. The root is a local folder or any fsspec URL
(``s3://bucket/prefix`` in production).

A range run touches hundreds of small partitions per asset, so the fixed cost per partition
matters: on a local root the files are handled with plain ``os`` calls (no ``exists`` before
an open that may fail anyway, no folder creation before a write that finds its folder), and
every Parquet file is written and read as one block of bytes. Other roots go through fsspec
with the same layout.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from collections.abc import Iterator, Sequence

import fsspec
import polars as pl
from fsspec.implementations.local import LocalFileSystem

MANIFEST = "_manifest.json"


def _parquet_bytes(frame: pl.DataFrame) -> memoryview:
    """The frame as a Parquet file in memory: one write, whatever the destination."""
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    return buffer.getbuffer()


class PartitionStore:
    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")
        self.fs, self._base = fsspec.core.url_to_fs(self.root)
        # Plain os calls for a local root: same files, a fraction of the calls.
        self._local = isinstance(self.fs, LocalFileSystem)

    def _folder(self, asset: str, harvester_id: str, window: str) -> str:
        return f"{self._base}/{asset}/{harvester_id}/{window}"

    def clear(self, asset: str, harvester_id: str, window: str) -> None:
        """Drop what an earlier materialisation of this partition left."""
        folder = self._folder(asset, harvester_id, window)
        if self._local:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(folder)
        elif self.fs.exists(folder):
            self.fs.rm(folder, recursive=True)

    def _write_local(self, folder: str, name: str, data: bytes | memoryview) -> None:
        """Write to a temporary name and rename: a reader never sees half a file."""
        path = f"{folder}/{name}"
        tmp_path = f"{path}.tmp"
        try:
            handle = open(tmp_path, "wb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            os.makedirs(folder, exist_ok=True)
            handle = open(tmp_path, "wb")  # noqa: SIM115
        with handle:
            handle.write(data)
        os.replace(tmp_path, path)

    def write_part(
        self, asset: str, harvester_id: str, window: str, part: int, frame: pl.DataFrame
    ) -> str:
        folder = self._folder(asset, harvester_id, window)
        name = f"part-{part:06d}.parquet"
        data = _parquet_bytes(frame)
        if self._local:
            self._write_local(folder, name, data)
            return f"{folder}/{name}"
        self.fs.makedirs(folder, exist_ok=True)
        path = f"{folder}/{name}"
        tmp_path = f"{path}.tmp"
        with self.fs.open(tmp_path, "wb") as handle:
            handle.write(data)
        self.fs.mv(tmp_path, path)
        return path

    def part_names(self, asset: str, harvester_id: str, window: str) -> list[str]:
        folder = self._folder(asset, harvester_id, window)
        if self._local:
            try:
                names = os.listdir(folder)
            except (FileNotFoundError, NotADirectoryError):
                return []
        else:
            if not self.fs.exists(folder):
                return []
            names = [p.rsplit("/", 1)[-1] for p in self.fs.ls(folder, detail=False)]
        return sorted(n for n in names if n.endswith(".parquet"))

    def read_part(
        self,
        asset: str,
        harvester_id: str,
        window: str,
        name: str,
        columns: Sequence[str] | None = None,
    ) -> pl.DataFrame:
        """A part file; `columns` reads only those (the record data is most of a file)."""
        path = f"{self._folder(asset, harvester_id, window)}/{name}"
        wanted = list(columns) if columns is not None else None
        if self._local:
            with open(path, "rb") as handle:
                return pl.read_parquet(handle.read(), columns=wanted)
        with self.fs.open(path, "rb") as handle:
            return pl.read_parquet(handle.read(), columns=wanted)

    def iter_parts(
        self,
        asset: str,
        harvester_id: str,
        window: str,
        columns: Sequence[str] | None = None,
    ) -> Iterator[tuple[str, pl.DataFrame]]:
        for name in self.part_names(asset, harvester_id, window):
            yield name, self.read_part(asset, harvester_id, window, name, columns)

    def write_manifest(self, asset: str, harvester_id: str, window: str, manifest: dict) -> None:
        """Small JSON beside the parts: which harvest run produced this partition."""
        folder = self._folder(asset, harvester_id, window)
        data = json.dumps(manifest).encode()
        if self._local:
            self._write_local(folder, MANIFEST, data)
            return
        self.fs.makedirs(folder, exist_ok=True)
        with self.fs.open(f"{folder}/{MANIFEST}", "wb") as handle:
            handle.write(data)

    def read_manifest(self, asset: str, harvester_id: str, window: str) -> dict | None:
        path = f"{self._folder(asset, harvester_id, window)}/{MANIFEST}"
        if self._local:
            try:
                with open(path, "rb") as handle:
                    return json.loads(handle.read())
            except (FileNotFoundError, NotADirectoryError):
                return None
        if not self.fs.exists(path):
            return None
        with self.fs.open(path, "rb") as handle:
            return json.loads(handle.read())

    def read_partition(self, asset: str, harvester_id: str, window: str) -> pl.DataFrame | None:
        """The whole partition (for inspection and tests); None if never written."""
        frames = [frame for _, frame in self.iter_parts(asset, harvester_id, window)]
        if not frames:
            return None
        return pl.concat(frames, how="vertical_relaxed")
