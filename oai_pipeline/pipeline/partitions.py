"""Which harvest run produced a scope's partitions (from the manifest beside them)."""

from __future__ import annotations

from oai_pipeline.errors import PipelineError
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.harvesters.plugins import writers_update_all
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


def run_updates_all(run: dict | None, harvester: Harvester | None = None) -> bool:
    """Whether every record of the run is rewritten, changed or not: the run was started with
    update_all (a resumed run keeps it), or a writer of the harvester has it on."""
    started_so = bool(run and run["options"].get("update_all"))
    return started_so or (harvester is not None and writers_update_all(harvester))
