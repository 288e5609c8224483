"""Which harvest run produced a scope's partitions (from the manifest beside them)."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from oai_pipeline.errors import PipelineError
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.harvesters.plugins import writers_update_all
from oai_pipeline.pipeline.frames import RAW_OAI_XML, SYNC_DECISIONS, TRANSFORMED_RECORDS
from oai_pipeline.pipeline.scope import ADHOC_PREFIX, HarvestScope
from oai_pipeline.state.store import Rekey, StateStore, superseded_because
from oai_pipeline.storage import PartitionStore

# The sync_decisions manifest's record of the harvester's writers the plan was made for.
PLANNED_WRITERS = "writers"


def run_id_of(storage: PartitionStore, asset: str, scope: HarvestScope) -> int:
    """The harvest run that produced the scope's upstream partitions."""
    return int(_first_manifest(storage, asset, scope)["run_id"])


def planned_run_id(storage: PartitionStore, scope: HarvestScope, harvester: Harvester) -> int:
    """The run whose sync_decisions the scope writes, if the harvester's writers are still
    those it was planned for: the plan names writers by position and decided with their
    options, so a plan applied to other writers would write to the wrong one, or not at all
    to one added since (a re-execution from failure after the harvester was changed)."""
    manifest = _first_manifest(storage, SYNC_DECISIONS, scope)
    planned = manifest.get(PLANNED_WRITERS)
    if planned is not None and planned != list(harvester.writers):
        raise PipelineError(
            f"the writers of harvester {scope.harvester_id} changed since its "
            f"{SYNC_DECISIONS} were planned ({', '.join(planned) or 'none'} then, "
            f"{', '.join(harvester.writers) or 'none'} now): materialise {SYNC_DECISIONS} "
            "again with the writers of now, then written_records (or run the harvest again)"
        )
    return int(manifest["run_id"])


def _first_manifest(storage: PartitionStore, asset: str, scope: HarvestScope) -> dict:
    manifest = storage.read_manifest(asset, scope.harvester_id, scope.keys[0])
    if manifest is None:
        raise PipelineError(
            f"{asset} has not been materialised for {scope.harvester_id} {scope.keys[0]}"
        )
    return manifest


def split_by_upstream_run(
    storage: PartitionStore, asset: str, scope: HarvestScope
) -> list[tuple[int, HarvestScope]]:
    """The scope cut where its upstream partitions come from another harvest run: each
    part with the run that produced it. A downstream stage works one harvest run at a time
    (it claims and writes that run's records); a range over windows two runs harvested
    would otherwise take the first window's run for all."""
    runs: list[int] = []
    missing: list[str] = []
    for key in scope.keys:
        manifest = storage.read_manifest(asset, scope.harvester_id, key)
        if manifest is None:
            missing.append(key)
        else:
            runs.append(int(manifest["run_id"]))
    if missing:
        shown = _first_windows(missing)
        raise PipelineError(
            f"{asset} has not been materialised for {scope.harvester_id} {shown}: "
            "materialise it for these windows first"
        )
    parts: list[tuple[int, HarvestScope]] = []
    start = 0
    for index in range(1, len(runs) + 1):
        if index == len(runs) or runs[index] != runs[start]:
            part = HarvestScope(scope.harvester_id, scope.windows[start:index])
            parts.append((runs[start], part))
            start = index
    return parts


def refuse_partitions_of_old_identifiers(
    state: StateStore,
    storage: PartitionStore,
    asset: str,
    parts: list[tuple[int, HarvestScope]],
) -> None:
    """Refuse upstream partitions (`split_by_upstream_run`'s parts) that hold identifiers a
    later `harvesters rekey` rewrote. The state store and the target know those records
    under their new identifiers only: a step reading the old ones (automation, a
    re-execution from failure, a materialisation from the UI) would transform them into
    harvest records of the old identifiers and plan them as new records. Checked before the
    step touches anything, so the run that made them is left as it was (a superseded one is
    not made resumable again by the step's failure)."""
    stale: list[tuple[str, Rekey]] = []
    for run_id, scope in parts:
        rekeys = state.rekeys_after_run(scope.harvester_id, run_id)
        if not rekeys:
            continue
        for window in scope.keys:
            rekey = _rekey_of_part(storage, asset, scope.harvester_id, window, rekeys)
            if rekey is not None:
                stale.append((window, rekey))
    if not stale:
        return
    windows = [window for window, _ in stale]
    shown = _first_windows(windows)
    harvester_id = parts[0][1].harvester_id
    rekey = stale[0][1]
    raise PipelineError(
        f"{asset} of {harvester_id} {shown} was made before the harvester's identifiers were "
        f"rekeyed from {rekey.old_prefix!r} to {rekey.new_prefix!r} (at {rekey.rekeyed_at}): "
        "it holds the old identifiers, which the state store and the target no longer know, "
        f"and would be written as new records. Materialise {RAW_OAI_XML} of these windows "
        "again (it lists their records under the new identifiers), then the assets after it"
    )


def refuse_partitions_of_superseded_runs(
    state: StateStore, asset: str, parts: list[tuple[int, HarvestScope]]
) -> None:
    """Refuse upstream partitions (`split_by_upstream_run`'s parts) that a harvest run made
    which was superseded since (the source moved, the harvester changed, a larger harvest
    or a rekey replaced it) while the harvest that replaced it has not listed the windows
    again (it failed first). A step continuing the run (a re-execution from failure of its
    old Dagster run, automation, the UI) made it `running` again, and a later failure left
    it resumable from the token of what replaced it. Checked before the step touches
    anything: the run stays superseded."""
    for run_id, scope in parts:
        run = state.get_run(run_id)
        why = None if run is None else superseded_because(run)
        if why is None:
            continue
        shown = _first_windows(scope.keys)
        raise PipelineError(
            f"{asset} of {scope.harvester_id} {shown} was made by harvest run {run_id}, which "
            f"was {why}; no step continues it. Materialise {RAW_OAI_XML} of these windows "
            "again (a new harvest run lists them), then the assets after it"
        )


def _rekey_of_part(
    storage: PartitionStore, asset: str, harvester_id: str, window: str, rekeys: list[Rekey]
) -> Rekey | None:
    """The rekey (of `rekeys`, oldest first) after which an identifier of the partition stayed
    rewritten: a rekey undone by a later one (A→B, then B→A) leaves the partition's
    identifiers those the stores know again, and A→B→A→C names A→C."""
    for held in _identifiers(storage, asset, harvester_id, window):
        now, last_held = held, pl.Series([-1] * len(held))
        for step, rekey in enumerate(rekeys):
            matches = now.str.starts_with(rekey.old_prefix)
            now = (rekey.new_prefix + now.str.slice(len(rekey.old_prefix))).zip_with(matches, now)
            last_held = pl.Series([step] * len(held)).zip_with(now == held, last_held)
        stale = now != held
        if stale.any():
            return rekeys[int(last_held.filter(stale).min()) + 1]
    return None


def windows_holding(storage: PartitionStore, harvester_id: str, prefix: str) -> list[str]:
    """The harvester's Dagster windows whose Parquet, of an asset a later step reads, holds
    an identifier beginning with `prefix`: after a rekey from it, those steps refuse them
    until raw_oai_xml of them is materialised again. (A CLI harvest's partitions are read by
    its own run only, which the rekey superseded or which ended.)"""
    stale: set[str] = set()
    for asset in (RAW_OAI_XML, TRANSFORMED_RECORDS, SYNC_DECISIONS):
        for window in storage.windows(asset, harvester_id):
            if window in stale or window.startswith(ADHOC_PREFIX):
                continue
            held = _identifiers(storage, asset, harvester_id, window)
            if any(identifiers.str.starts_with(prefix).any() for identifiers in held):
                stale.add(window)
    return sorted(stale)


def _identifiers(
    storage: PartitionStore, asset: str, harvester_id: str, window: str
) -> Iterator[pl.Series]:
    """The partition's identifiers, part by part."""
    for _, frame in storage.iter_parts(asset, harvester_id, window, columns=["identifier"]):
        yield frame["identifier"]


def run_updates_all(run: dict | None, harvester: Harvester | None = None) -> bool:
    """Whether every record of the run is rewritten, changed or not: the run was started with
    update_all (a resumed run keeps it), or a writer of the harvester has it on."""
    started_so = bool(run and run["options"].get("update_all"))
    return started_so or (harvester is not None and writers_update_all(harvester))


def _first_windows(windows: list[str], shown: int = 5) -> str:
    """The first windows of a refusal, and how many more: a range run may span years."""
    more = f" and {len(windows) - shown} more" if len(windows) > shown else ""
    return ", ".join(windows[:shown]) + more
