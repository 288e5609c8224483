"""`crash_sweep --scenario rekey` at a few points, so that the scenario cannot rot: a DSpace
of handles (no DOIs) moved to a new host that lists every record under a new prefix, the
harvester rekeyed. `harvesters rekey` killed between its two stores' rewrites and rerun, and
the first harvest after a rekey killed once its writes began, end as an uninterrupted rekey
and harvest: the same target ids, nothing created, no new revision.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from oai_pipeline_tests.resume import crash_sweep


def sweep(
    tmp_path: Path, points: list[str], detour: list[list[str]] | None = None
) -> tuple[list[dict[str, Any]], int]:
    """The rekey killed between its two stores, then (`points`) the harvest after an
    uninterrupted one killed there: the outcomes and how many failed."""
    args = argparse.Namespace(records=200, page_size=10, batch_size=10, per_point=1, double=False)
    results: dict[str, Any] = {}
    failures = crash_sweep.sweep_rekey(
        crash_sweep.Backend(),
        tmp_path,
        args,
        points,
        results,
        lambda _: None,
        rekey_kills=["rekey_target:1:after"],
        detour=detour,
    )
    return results["sqlite-rekey-harvest"], failures


def test_a_rekey_and_the_harvest_after_it_killed_end_like_uninterrupted_ones(
    tmp_path: Path,
) -> None:
    outcomes, failures = sweep(tmp_path, ["writer_apply:1:after"])

    assert [o["spec"] for o in outcomes] == [
        "rekey rekey_target:1:after",
        "writer_apply:1:after",
    ]
    assert all(o.get("reached", True) for o in outcomes)  # each attempt killed at its point
    assert failures == 0, outcomes


def test_a_rekey_killed_between_its_stores_refuses_another_rekey_until_it_is_finished(
    tmp_path: Path,
) -> None:
    """Killed between the target's rewrite and the state store's, the rekey from the old
    host to the new one is pending: a rekey to a third prefix, and a harvest, are refused
    (before, the third rekey ran: the target stayed under the new prefix and the state
    store went to the third, and the harvest after found neither); its rerun finishes it,
    and the harvest after ends as after an uninterrupted rekey."""
    elsewhere = "oai:elsewhere.example.org:"
    other_rekey = [*crash_sweep.REKEY[:-1], elsewhere]
    assert other_rekey[-2:] == ["--to-prefix", elsewhere]

    outcomes, failures = sweep(tmp_path, [], [other_rekey, ["harvest", crash_sweep.HARVESTER]])

    assert [o["spec"] for o in outcomes] == ["rekey rekey_target:1:after"]
    assert failures == 0, outcomes
