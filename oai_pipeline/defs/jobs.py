"""Jobs over the harvest assets."""

from __future__ import annotations

import dagster as dg

from oai_pipeline.defs.assets import GROUP
from oai_pipeline.defs.partitions import harvest_partitions

harvest_job = dg.define_asset_job(
    "harvest",
    selection=dg.AssetSelection.groups(GROUP),
    partitions_def=harvest_partitions,
    description="raw_oai_xml → transformed_records → sync_decisions → written_records for "
    "the chosen harvester|window partitions; the incremental_harvest_schedule launches it "
    "hourly for every enabled harvester.",
)

run_all_harvesters = dg.define_asset_job(
    "run_all_harvesters",
    selection=dg.AssetSelection.groups(GROUP),
    partitions_def=harvest_partitions,
    description="A full harvest of every enabled harvester: one run and one sweep per "
    "harvester, launched by the run_all_harvesters_schedule (for a backfill, Materialize the "
    "assets: the range runs of a job's backfill are refused).",
)
