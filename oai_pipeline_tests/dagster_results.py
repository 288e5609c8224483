"""Reading a Dagster run's results in tests."""

from __future__ import annotations

import dagster as dg

from oai_pipeline.defs.assets import RUN_TOTALS


def run_totals(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, dg.MetadataValue]:
    """`asset`'s totals of the run: its one observation of the run (see `_run_result`)."""
    [observation] = [
        event
        for event in result.asset_observations_for_node(asset)
        if event.description == RUN_TOTALS
    ]
    return dict(observation.metadata)
