"""Which harvested records vanished from a source that keeps no deletions (pure)."""

from __future__ import annotations


def vanished_identifiers(
    harvested_live: set[str], source_identifiers: set[str], *, sweep_complete: bool
) -> set[str]:
    """Harvested live records the source no longer lists: they count as deleted at the source.

    Only a complete sweep without errors proves absence; after a partial sweep a missing
    identifier may just be on a page that was never read, so nothing vanished.
    """
    if not sweep_complete:
        return set()
    return harvested_live - source_identifiers
