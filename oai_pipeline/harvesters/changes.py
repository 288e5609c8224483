"""What a change of a harvester's configuration means for its next runs, as warnings.

One place for every way a harvester is changed (`harvesters update`, `harvesters load`, the
data folder's fixture, the `register_harvester` job): before, only `update` warned of a new
metadata prefix, and none of them of a new set, so the same change said nothing elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable

from oai_pipeline.errors import PipelineError
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.harvesters.plugins import written_options

# An incremental harvest lists only records changed since the last one: records the new
# configuration asks for whose datestamps are older are never listed by it.
_HARVEST_AGAIN = (
    "an incremental harvest lists only records changed since: harvest them all again (a full "
    "harvest, or a backfill of every window)"
)


def _set_name(setspec: str | None) -> str:
    return repr(setspec) if setspec else "the whole source (no set)"


def change_warnings(before: Harvester | None, after: Harvester) -> list[str]:
    """What the operator must know, or do, after `before` became `after` (None: created)."""
    if before is None:
        return []
    warnings: list[str] = []
    if after.metadata_prefix != before.metadata_prefix:
        warnings.append(
            f"the metadata prefix changed from {before.metadata_prefix!r} to "
            f"{after.metadata_prefix!r}: a reconcile deletes no record harvested as "
            f"{before.metadata_prefix!r} that the source does not list as "
            f"{after.metadata_prefix!r} unless run with --force; {_HARVEST_AGAIN} to have "
            "each in the new format"
        )
    if after.setspec != before.setspec:
        old, new = _set_name(before.setspec), _set_name(after.setspec)
        warning = (
            f"the set changed from {old} to {new}: {_HARVEST_AGAIN} to have the records of {new}"
        )
        if after.setspec:  # the target mirrors the set: what left it is deleted
            warning += (
                f"; the next reconcile deletes the records harvested from {old} that {new} "
                "does not hold"
            )
        warnings.append(warning)
    if after.transformers != before.transformers:
        warnings.append(
            "the transformers changed: a record already harvested is transformed and written "
            f"again at the next harvest that lists it; {_HARVEST_AGAIN} to have every record so"
        )
    wrote, writes = written_options(before), written_options(after)
    for name in sorted(writes.keys() & wrote.keys()):
        if writes[name] != wrote[name]:
            warnings.append(
                f"writer {name!r} writes otherwise ({wrote[name] or 'defaults'} -> "
                f"{writes[name] or 'defaults'}): a record it wrote is written again at the next "
                f"harvest that lists it; {_HARVEST_AGAIN} to have every record so"
            )
    for name in sorted(writes.keys() - wrote.keys()):
        warnings.append(
            f"writer {name!r} is new: it writes a record at the next harvest that lists it; "
            f"{_HARVEST_AGAIN} to have every record in its target"
        )
    for name in sorted(wrote.keys() - writes.keys()):
        warnings.append(
            f"writer {name!r} was removed: what it wrote stays in its target, which no harvest "
            "of this harvester updates or deletes any more"
        )
    return warnings


def queued_runs_warnings(harvester_id: str, queued_runs: Callable[[str], list[str]]) -> list[str]:
    """The harvester's Dagster runs queued or running when its base URL changed
    (`queued_runs`: DagsterRuns.waiting), as a warning: a run reads the harvester as it starts,
    so it harvests the new URL (which the operator may not expect of a run queued for the old
    one), while its server tag, which the run queue holds it back by, still names the old
    server. Every way a harvester is changed says it (before, only `harvesters update`)."""
    try:
        waiting = queued_runs(harvester_id)
    except PipelineError as error:  # the change is done: the instance's trouble is a warning
        return [f"could not ask the Dagster instance for runs queued for the old URL: {error}"]
    if not waiting:
        return []
    return [
        f"Dagster runs of {harvester_id} queued or running: {', '.join(waiting)}. Those not "
        "started yet harvest the new base URL when they start (the run queue still holds "
        f"them back by the old one's server); if the source changed its identifiers too, "
        f"terminate them before `oai-pipeline harvesters rekey {harvester_id}`"
    ]
