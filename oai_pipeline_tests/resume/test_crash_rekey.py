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


def test_a_rekey_and_the_harvest_after_it_killed_end_like_uninterrupted_ones(
    tmp_path: Path,
) -> None:
    args = argparse.Namespace(records=200, page_size=10, batch_size=10, per_point=1, double=False)
    results: dict[str, Any] = {}
    lines: list[str] = []
    failures = crash_sweep.sweep_rekey(
        crash_sweep.Backend(),
        tmp_path,
        args,
        ["writer_apply:1:after"],
        results,
        lines.append,
        rekey_kills=["rekey_target:1:after"],
    )

    outcomes = results["sqlite-rekey-harvest"]
    assert [o["spec"] for o in outcomes] == [
        "rekey rekey_target:1:after",
        "writer_apply:1:after",
    ]
    assert all(o.get("reached", True) for o in outcomes)  # each attempt killed at its point
    assert failures == 0, lines
