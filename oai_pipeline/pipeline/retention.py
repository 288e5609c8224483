"""What the Parquet storage keeps of finished harvest runs.

Each window of the partition grid keeps its four partitions until a run harvests it again: a
daily incremental harvest adds a window a day, and the first full harvest one per day of the
grid, so three years of a harvester left ~1,500 partitions per asset (~2,700 files), most of
them of runs nothing reads again. A partition is read again only by a later stage of the run
that wrote it: a resume, a Dagster re-execution, a downstream materialisation. Once its run's
per-record rows are pruned (OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS after it succeeded, and not the
harvester's latest success) no stage can write its records again, so its partitions go too.
"""

from __future__ import annotations

from collections.abc import Collection

from oai_pipeline.pipeline.frames import STAGE_ASSETS
from oai_pipeline.pipeline.services import Services


def prune_partitions(
    services: Services, harvester_id: str, keep: Collection[str] = ()
) -> list[str]:
    """Drop the harvester's partitions (all four assets of a key) that only runs with pruned
    per-record rows wrote, except the keys in `keep` (the caller's scope). A key any of whose
    partitions lacks a manifest (being written, or left so by a crash) is kept: its run is
    not known. Returns the keys dropped."""
    if services.settings.keep_run_records_days <= 0:
        return []
    storage = services.storage
    present = {asset: set(storage.windows(asset, harvester_id)) for asset in STAGE_ASSETS}
    writers: dict[str, set[int]] = {}
    for key in set().union(*present.values()).difference(keep):
        runs: set[int] = set()
        for asset in STAGE_ASSETS:
            if key not in present[asset]:
                continue
            manifest = storage.read_manifest(asset, harvester_id, key)
            if manifest is None or "run_id" not in manifest:
                break
            runs.add(int(manifest["run_id"]))
        else:
            writers[key] = runs
    if not writers:
        return []
    pruned = services.state.pruned_runs(set().union(*writers.values()))
    dropped = sorted(key for key, runs in writers.items() if runs <= pruned)
    for key in dropped:
        # Downstream first: a crash in between leaves the upstream whole, and the next prune
        # finds the key again by its upstream's manifest.
        for asset in reversed(STAGE_ASSETS):
            storage.clear(asset, harvester_id, key)
    return dropped
