"""Walk a scope's partitions part by part: read the upstream asset, write this one."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from oai_pipeline.errors import PipelineError
from oai_pipeline.pipeline.scope import HarvestScope
from oai_pipeline.storage import PartitionStore


def run_id_of(storage: PartitionStore, asset: str, scope: HarvestScope) -> int:
    """The harvest run that produced the scope's upstream partitions."""
    manifest = storage.read_manifest(asset, scope.harvester_id, scope.keys[0])
    if manifest is None:
        raise PipelineError(
            f"{asset} has not been materialised for {scope.harvester_id} {scope.keys[0]}"
        )
    return int(manifest["run_id"])


def map_partitions(
    storage: PartitionStore,
    scope: HarvestScope,
    source_asset: str,
    target_asset: str,
    transform_part: Callable[[str, str, pl.DataFrame], pl.DataFrame],
) -> None:
    """Replace target_asset's partitions of the scope with transform_part of each source part.

    `transform_part(window_key, part_name, frame)`; the target part keeps the source part's
    name, so a later stage can read two assets' parts side by side.
    """
    for key in scope.keys:
        manifest = storage.read_manifest(source_asset, scope.harvester_id, key)
        storage.clear(target_asset, scope.harvester_id, key)
        if manifest is not None:
            storage.write_manifest(target_asset, scope.harvester_id, key, manifest)
        for index, (name, source) in enumerate(
            storage.iter_parts(source_asset, scope.harvester_id, key)
        ):
            result = transform_part(key, name, source)
            storage.write_part(target_asset, scope.harvester_id, key, index, result)
