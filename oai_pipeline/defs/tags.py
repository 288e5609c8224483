"""The run tags that name what a run harvests (read by schedules, sensors and retention)."""

from __future__ import annotations

HARVESTER_TAG = "oai_pipeline/harvester"
# The source's server (`source_key`): runs of harvesters of one server queue one after the
# other (dagster.yaml), instead of waiting in a pool slot for the server's lease.
SOURCE_TAG = "oai_pipeline/source"
# What Dagster tags a run of one multi-partition key with (launched in the UI): its harvester.
PARTITION_HARVESTER_TAG = "dagster/partition/harvester"
