"""A run queued before `harvesters update --base-url` reads the harvester as it starts: it
harvests the new URL, while its server tag (set when queued) names the old server. Before,
its log did not say so: a run queued for one server harvested another without a word."""

from __future__ import annotations

import logging

import dagster as dg

from oai_pipeline.defs.assets import raw_oai_xml
from oai_pipeline.defs.launch import range_tags
from oai_pipeline.defs.partitions import ensure_harvester_partitions
from oai_pipeline.defs.resources import HarvestOptions, PipelineResource
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline_tests.support import register, shifted_sample_records


def _warnings_of_a_run_queued_for(instance: dg.DagsterInstance, queued_for: str) -> list[str]:
    result = dg.materialize(
        [raw_oai_xml],
        instance=instance,
        resources={"pipeline": PipelineResource(), "harvest_options": HarvestOptions()},
        tags=range_tags("alpha", "2024-01-02", "2024-01-03", queued_for),
    )
    assert result.success
    return [
        entry.user_message
        for entry in instance.all_logs(result.run_id)
        if entry.level == logging.WARNING and "queued for server" in entry.user_message
    ]


def test_a_run_queued_for_the_old_base_url_says_which_one_it_lists_from(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    with OAIEndpoint(shifted_sample_records(), page_size=3) as endpoint:
        register(settings, endpoint.base_url, harvester_id="alpha", metadata_prefix="oai_datacite")
        ensure_harvester_partitions(instance, ["alpha"])

        moved = _warnings_of_a_run_queued_for(instance, "https://old.example.org/oai")
        current = _warnings_of_a_run_queued_for(instance, endpoint.base_url)

    assert len(moved) == 1 and "queued for server old.example.org" in moved[0]
    assert f"lists from {endpoint.base_url}" in moved[0]
    assert current == []
