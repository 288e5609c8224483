"""Which harvested records vanished from a source that keeps no deletions (pure)."""

from __future__ import annotations

from collections.abc import Collection, Sequence


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


# A sweep that lists nothing, or loses more than this share of what was harvested, more
# likely shows a broken source (an emptied index, a renamed set) than deletions: acting on
# it needs the operator's word. Also for a few records: losing 8 of 9 is no likelier.
SUSPICIOUS_SHARE = 0.5


def implausible_loss(
    harvested_live: int,
    listed: int,
    vanished: int,
    *,
    ended_early: tuple[int, int] | None = None,
    token_refused: bool = False,
    unidentified: int = 0,
) -> str | None:
    """Why deleting the vanished records looks wrong, or None when it looks like deletions.

    `ended_early`: (records listed, completeListSize announced) of a sweep that ended far
    short of the size its source announced: the missing records may be on the pages it
    never sent, which is no proof of absence (only a complete sweep is).
    `token_refused`: the list's last page named a token the source then answered with
    noRecordsMatch, and no size tells whether the list was whole: no proof either.
    `unidentified`: live records the sweep listed without an identifier: any of them may
    be a vanished one, so their absence is not proven either."""
    if not vanished:
        return None
    if ended_early is not None:
        records, announced = ended_early
        return (
            f"the source's list ended after {records} of the {announced} records it "
            f"announced (completeListSize): {vanished} harvested records"
        )
    if token_refused:
        return (
            "the source answered the list's last resumption token with noRecordsMatch, and "
            f"announced no completeListSize to tell a whole list: {vanished} harvested records"
        )
    if unidentified:
        plural = "s" if unidentified > 1 else ""
        return (
            f"the source listed {unidentified} record{plural} without an identifier (it may "
            f"be any of the vanished ones): {vanished} harvested records"
        )
    if listed == 0:
        return f"the source lists no identifiers at all: all {vanished} harvested records"
    if vanished > SUSPICIOUS_SHARE * harvested_live:
        return (
            f"the source lists {listed} identifiers: {vanished} of the {harvested_live} "
            "harvested records"
        )
    return None


# How many vanished records a reconcile asks the source for by GetRecord before it deletes
# any: some sources' ListIdentifiers leaves out records their GetRecord still serves (a stale
# identifier index), and each record is deleted only once GetRecord confirms it gone.
# 200: a few minutes at a polite rate limit, and more than most reconciles find vanished.
CONFIRM_BUDGET = 200


def spread_sample(identifiers: Collection[str], size: int = CONFIRM_BUDGET) -> list[str]:
    """At most `size` of `identifiers`, spread evenly over them in sorted order (the first
    included): the same every run for the same records, and not just the first few, which
    share an identifier prefix and may all come from one batch or one part of the source."""
    ordered = sorted(identifiers)
    if len(ordered) <= size:
        return ordered
    return [ordered[i * len(ordered) // size] for i in range(size)]


def check_order(
    vanished: Collection[str], kept_before: Sequence[str], budget: int = CONFIRM_BUDGET
) -> list[str]:
    """The vanished records to ask GetRecord for, at most `budget`, in order: those no
    reconcile asked for yet first (spread over them when more than the budget), then those
    an earlier one kept (`kept_before`: the least recently asked for first). Asked for first
    every time, one record a list hides but GetRecord serves held back every deletion for
    good; so ordered, each reconcile asks for records not asked for yet, or asked longest ago."""
    pending = set(vanished)
    kept = [i for i in dict.fromkeys(kept_before) if i in pending]
    fresh = spread_sample(pending - set(kept), budget)
    return fresh + kept[: max(budget - len(fresh), 0)]
