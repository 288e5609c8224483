"""Parquet files of the four assets: one folder per (asset, harvester, window) under a root.

A partition is a folder of part files so that every stage reads and writes in bounded chunks:
memory stays flat however large the source is. The root is a local folder or any fsspec URL
(``s3://bucket/prefix`` in production).

A range run touches hundreds of small partitions per asset, so the fixed cost per partition
matters: on a local root the files are handled with plain ``os`` calls (no ``exists`` before
an open that may fail anyway, no folder creation before a write that finds its folder), and
every Parquet file is written and read as one block of bytes. Other roots go through fsspec
with the same layout.

A stage re-materialises a partition in place rather than deleting and re-creating its
folder: creating or deleting a file costs the file system tens of times what renaming or
overwriting one does, and an unchanged re-harvest rewrites every partition with as many parts
as before. So `begin` takes the manifest away (the partition reads as never written), each
part is written over the old file of its name (renamed to the temporary name first, so a
reader sees the old file, none, or the new one), and `finish` removes the parts the new
materialisation did not write and puts the manifest back: a partition with a manifest is
complete. A crash in between leaves a partition without a manifest, possibly holding old and
new parts; the stage is re-run on resume and rewrites it.
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

from oai_pipeline.errors import (
    ConfigurationError,
    PipelineError,
    disk_advice,
    without_password,
)

MANIFEST = "_manifest.json"
_TMP = ".tmp"


def part_name(part: int) -> str:
    return f"part-{part:06d}.parquet"


def _parquet_bytes(frame: pl.DataFrame) -> memoryview:
    """The frame as a Parquet file in memory: one write, whatever the destination."""
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    return buffer.getbuffer()


class PartitionStore:
    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")
        try:
            self.fs, self._base = fsspec.core.url_to_fs(self.root)
        except (ImportError, ValueError) as error:  # `Install s3fs to access S3`, `foo://`
            shown = without_password(root)
            raise ConfigurationError(f"storage URL {shown!r} is not usable: {error}") from None
        # Plain os calls for a local root: same files, a fraction of the calls.
        self._local = isinstance(self.fs, LocalFileSystem)
        if self._local:
            try:  # refused here, not as a traceback when the first page is staged
                os.makedirs(self._base, exist_ok=True)
            except OSError as error:
                raise ConfigurationError(
                    f"cannot create the storage folder {self._base}: {error.strerror}"
                ) from None

    def _folder(self, asset: str, harvester_id: str, window: str) -> str:
        return f"{self._base}/{asset}/{harvester_id}/{window}"

    @property
    def is_local(self) -> bool:
        return self._local

    def location(self, asset: str, harvester_id: str, window: str) -> str:
        """Where a partition's parts are, for a reader: a local folder, or the object
        store's URL with its protocol (``s3://bucket/prefix/…``)."""
        folder = self._folder(asset, harvester_id, window)
        return os.path.abspath(folder) if self._local else self.fs.unstrip_protocol(folder)

    def windows(self, asset: str, harvester_id: str) -> list[str]:
        """The keys of the harvester's partitions of this asset."""
        return self._names(f"{self._base}/{asset}/{harvester_id}")

    def clear(self, asset: str, harvester_id: str, window: str) -> None:
        """Drop the partition, folder and all (a stage rewrites with `begin`/`finish`)."""
        folder = self._folder(asset, harvester_id, window)
        if self._local:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(folder)
        elif self.fs.exists(folder):
            self.fs.rm(folder, recursive=True)

    def begin(self, asset: str, harvester_id: str, window: str) -> None:
        """Start re-materialising: until `finish`, the partition has no manifest."""
        path = f"{self._folder(asset, harvester_id, window)}/{MANIFEST}"
        if self._local:
            # Renamed, not deleted: `finish` writes the new manifest over the same file.
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                os.rename(path, f"{path}{_TMP}")
            return
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(path)

    def finish(
        self,
        asset: str,
        harvester_id: str,
        window: str,
        parts: int,
        manifest: dict | None,
        empty: pl.DataFrame | None = None,
    ) -> None:
        """End re-materialising with parts 0..parts-1 written: drop the rest, then the manifest.

        Stale parts go first, so a partition with a manifest never holds a part of an earlier
        materialisation. Without a manifest (the source had none) the partition stays without.
        A partition of no records gets `empty` (the asset's columns, no rows) as its one part:
        a reader of the window's folder gets an empty table, not "no files found".
        """
        folder = self._folder(asset, harvester_id, window)
        if parts == 0 and empty is not None and manifest is not None:
            self.write_part(asset, harvester_id, window, 0, empty)
            parts = 1
        keep = {part_name(part) for part in range(parts)}
        if manifest is not None:
            keep.add(f"{MANIFEST}{_TMP}")  # written over just below
        for name in self._names(folder):
            if name not in keep and (name.endswith(".parquet") or name.endswith(_TMP)):
                self._remove(f"{folder}/{name}")
        if manifest is not None:
            self.write_manifest(asset, harvester_id, window, manifest)

    def _names(self, folder: str) -> list[str]:
        if self._local:
            try:
                return os.listdir(folder)
            except (FileNotFoundError, NotADirectoryError):
                return []
        try:
            return [p.rsplit("/", 1)[-1] for p in self.fs.ls(folder, detail=False)]
        except FileNotFoundError:
            return []

    def _remove(self, path: str) -> None:
        if self._local:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        else:
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm(path)

    def _read(self, path: str) -> bytes:
        """A whole file, as one read (FileNotFoundError when there is none)."""
        if self._local:
            with open(path, "rb") as handle:
                return handle.read()
        with self.fs.open(path, "rb") as handle:
            return handle.read()

    def _write_local(self, folder: str, name: str, data: bytes | memoryview) -> None:
        """Write to a temporary name and rename: a reader never sees half a file.

        The file being replaced becomes the temporary file (a rename), so rewriting a
        partition neither deletes nor creates files; only a new name creates one. The old
        file is overwritten, then cut to length: emptying it first (``"wb"``) makes ext4
        flush it on close, which costs more than the write.
        """
        path = f"{folder}/{name}"
        tmp_path = f"{path}{_TMP}"
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            os.rename(path, tmp_path)
        try:
            handle = open(tmp_path, "r+b")  # noqa: SIM115 - closed below
        except (FileNotFoundError, NotADirectoryError):
            try:
                handle = open(tmp_path, "wb")  # noqa: SIM115
            except FileNotFoundError:
                os.makedirs(folder, exist_ok=True)
                handle = open(tmp_path, "wb")  # noqa: SIM115
        try:
            with handle:
                handle.write(data)
                handle.truncate()
        except OSError as error:
            # Half a file on a full disk: it held the space the operator must free, and
            # the bare error named no file. The partition has no manifest: it is rewritten.
            with contextlib.suppress(OSError):
                os.unlink(tmp_path)
            refused = OSError(error.errno, error.strerror, path)
            advice = disk_advice(error.errno)
            if advice:
                refused.add_note(advice)  # shown under the error in Dagster
            raise refused from None
        os.replace(tmp_path, path)

    def write_part(
        self, asset: str, harvester_id: str, window: str, part: int, frame: pl.DataFrame
    ) -> str:
        folder = self._folder(asset, harvester_id, window)
        name = part_name(part)
        data = _parquet_bytes(frame)
        if self._local:
            self._write_local(folder, name, data)
            return f"{folder}/{name}"
        self.fs.makedirs(folder, exist_ok=True)
        path = f"{folder}/{name}"
        tmp_path = f"{path}{_TMP}"
        with self.fs.open(tmp_path, "wb") as handle:
            handle.write(data)
        self.fs.mv(tmp_path, path)
        return path

    def part_names(self, asset: str, harvester_id: str, window: str) -> list[str]:
        names = self._names(self._folder(asset, harvester_id, window))
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
        data = self._read(path)
        try:
            return pl.read_parquet(data, columns=wanted)
        except pl.exceptions.ComputeError as error:
            # Parts are not fsynced (that would cost ~15 ms a partition): after a power cut
            # a part can be cut short. The state store still holds every record.
            raise PipelineError(
                f"{asset} partition {harvester_id}/{window} is damaged ({path}: {error}); "
                f"materialise {asset} for this window again"
            ) from None

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
        try:
            data = self._read(f"{self._folder(asset, harvester_id, window)}/{MANIFEST}")
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            return json.loads(data)
        except ValueError:  # cut short by a power cut: the partition was never completed
            return None

    def read_partition(self, asset: str, harvester_id: str, window: str) -> pl.DataFrame | None:
        """The whole partition (for inspection and tests); None if never written."""
        frames = [frame for _, frame in self.iter_parts(asset, harvester_id, window)]
        if not frames:
            return None
        return pl.concat(frames, how="vertical_relaxed")
