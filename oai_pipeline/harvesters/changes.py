"""What a change of a harvester's configuration means for its next runs, as warnings.

One place for every way a harvester is changed (`harvesters update`, `harvesters load`, the
data folder's fixture, the `register_harvester` job): before, only `update` warned of a new
metadata prefix, and none of them of a new set, so the same change said nothing elsewhere.
"""

from __future__ import annotations

from oai_pipeline.harvesters.model import Harvester

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
    return warnings
