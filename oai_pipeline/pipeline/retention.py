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
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from oai_pipeline.pipeline.frames import RAW_OAI_XML, STAGE_ASSETS
from oai_pipeline.pipeline.scope import adhoc_started
from oai_pipeline.pipeline.services import Services
from oai_pipeline.storage import PartitionStore


@dataclass
class Pruned:
    harvester_id: str
    run_records: int  # per-record rows dropped
    partitions: list[str]  # keys whose four partitions were dropped

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def prune(
    services: Services,
    harvester_id: str,
    keep: Collection[str] = (),
    *,
    every_key: bool = True,
) -> Pruned:
    """What a harvest that writes drops of the harvester's finished runs (after
    OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS; 0: nothing), and `oai-pipeline prune` on demand:
    the per-record rows of its old succeeded runs, then the partitions only they wrote, and
    the CLI harvests' partitions started that long ago. `keep`: keys of the caller's scope.

    A partition can go only once its run's rows went, so a harvest (`every_key=False`)
    looks at the grid's partitions only when it pruned a run: their manifests are a read per
    key, a request each on an object store, and most harvests prune none."""
    days = services.settings.keep_run_records_days
    pruned_runs = services.state.prune_run_records(harvester_id, keep_days=days)
    keys = prune_partitions(services, harvester_id, keep) if every_key or pruned_runs.runs else []
    keys += prune_adhoc_partitions(services, harvester_id, keep)
    return Pruned(harvester_id, pruned_runs.rows, sorted(keys))


def drop_partitions(services: Services, harvester_id: str) -> int:
    """Drop every partition (all four assets, every key) of a harvester deleted with its
    harvest records; returns how many keys. Downstream first, as `prune_partitions` does."""
    storage = services.storage
    keys = set().union(*(storage.windows(asset, harvester_id) for asset in STAGE_ASSETS))
    for key in keys:
        for asset in reversed(STAGE_ASSETS):
            storage.clear(asset, harvester_id, key)
    return len(keys)


def prune_adhoc_partitions(
    services: Services, harvester_id: str, keep: Collection[str] = ()
) -> list[str]:
    """Drop the harvester's ad-hoc partitions (a CLI harvest's Parquet, one key per run)
    started more than OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS ago (0: never), whatever became of
    their run: no run reads them again (a resumed run exports under its own key), and each
    full harvest added all of its XML. Returns the keys dropped."""
    keep_days = services.settings.keep_run_records_days
    if keep_days <= 0:
        return []
    cutoff = datetime.now(UTC) - timedelta(days=keep_days)
    storage = services.storage
    dropped = sorted(
        key
        for key in storage.windows(RAW_OAI_XML, harvester_id)
        if key not in keep and (started := adhoc_started(key)) is not None and started < cutoff
    )
    for key in dropped:
        for asset in STAGE_ASSETS:
            storage.clear(asset, harvester_id, key)
    return dropped


def prune_partitions(
    services: Services, harvester_id: str, keep: Collection[str] = ()
) -> list[str]:
    """Drop the harvester's partitions (all four assets of a key) that only runs with pruned
    per-record rows wrote, except the keys in `keep` (the caller's scope). Returns the keys
    dropped."""
    if services.settings.keep_run_records_days <= 0:
        return []
    storage = services.storage
    present = {asset: set(storage.windows(asset, harvester_id)) for asset in STAGE_ASSETS}
    # One manifest a key (its most upstream partition's) to tell the keys of runs still
    # needed, which are most of those kept: the others are read only for keys to drop.
    writers: dict[str, dict[str, int | None]] = {}
    for key in set().union(*present.values()).difference(keep):
        assets = [asset for asset in STAGE_ASSETS if key in present[asset]]
        writers[key] = {asset: None for asset in assets}
        writers[key][assets[0]] = _writer(storage, assets[0], harvester_id, key)
    pruned = _pruned(services, writers)
    for key, runs in writers.items():
        if next(iter(runs.values())) in pruned:
            for asset in list(runs)[1:]:
                runs[asset] = _writer(storage, asset, harvester_id, key)
    pruned = _pruned(services, writers)
    dropped = sorted(key for key, runs in writers.items() if set(runs.values()) <= pruned)
    for key in dropped:
        # Downstream first: a crash in between leaves the upstream whole, and the next prune
        # finds the key again by its upstream's manifest.
        for asset in reversed(STAGE_ASSETS):
            storage.clear(asset, harvester_id, key)
    return dropped


def _writer(storage: PartitionStore, asset: str, harvester_id: str, key: str) -> int | None:
    """The run that wrote the partition; None without a manifest (being written, or left so
    by a crash: its run is not known, the key is kept)."""
    manifest = storage.read_manifest(asset, harvester_id, key)
    if manifest is None or "run_id" not in manifest:
        return None
    return int(manifest["run_id"])


def _pruned(services: Services, writers: dict[str, dict[str, int | None]]) -> set[int | None]:
    named = {run for runs in writers.values() for run in runs.values() if run is not None}
    return set(services.state.pruned_runs(named)) if named else set()
