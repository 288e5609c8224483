"""Jobs over the harvest assets."""

from __future__ import annotations

import dagster as dg

from oai_pipeline.defs.assets import GROUP
from oai_pipeline.defs.partitions import harvest_partitions

harvest_job = dg.define_asset_job(
    "harvest",
    selection=dg.AssetSelection.groups(GROUP),
    partitions_def=harvest_partitions,
    description="raw_oai_xml → transformed_records → sync_decisions → written_records",
)
