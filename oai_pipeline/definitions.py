"""The Dagster code location: assembles the small modules of `oai_pipeline/defs/`."""

from __future__ import annotations

import hashlib
import logging

import dagster as dg

from oai_pipeline.defs.assets import harvest_assets
from oai_pipeline.defs.checks import harvest_checks
from oai_pipeline.defs.dead_runs import dead_run_sensor
from oai_pipeline.defs.jobs import harvest_job, run_all_harvesters
from oai_pipeline.defs.reconcile import reconcile_schedule, reconcile_sources
from oai_pipeline.defs.registration import register_harvester
from oai_pipeline.defs.resources import HarvestOptions, PipelineResource
from oai_pipeline.defs.schedules import incremental_harvest_schedule, run_all_harvesters_schedule
from oai_pipeline.defs.sensors import (
    automation_sensor,
    harvest_canceled_sensor,
    harvest_failure_sensor,
    harvest_success_sensor,
    harvester_registry_sensor,
)
from oai_pipeline.harvesters.fixtures import load_fixture_file
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import load_settings

logger = logging.getLogger(__name__)


def load_data_folder_fixture() -> None:
    """A fixture `oai_harvesters.yaml` in the data folder is loaded when the definitions load,
    once per content. Every run worker loads the definitions: applied each time, the file
    undid a harvester's change made since in the UI or the CLI (disabled, say) at once."""
    settings = load_settings()
    if not settings.fixture_file.exists():
        return
    path = str(settings.fixture_file.resolve())
    digest = hashlib.sha256(settings.fixture_file.read_bytes()).hexdigest()
    with Services(settings) as services:
        if services.state.applied_fixture(path) == digest:
            return
        results = load_fixture_file(settings.fixture_file, HarvesterRegistry(services.state))
        services.state.mark_fixture_applied(path, digest)
    logger.info("loaded %s: %s", settings.fixture_file, results)


def build_definitions() -> dg.Definitions:
    load_data_folder_fixture()
    return dg.Definitions(
        assets=harvest_assets,
        asset_checks=harvest_checks,
        jobs=[harvest_job, run_all_harvesters, register_harvester, reconcile_sources],
        schedules=[
            incremental_harvest_schedule,
            run_all_harvesters_schedule,
            reconcile_schedule,
        ],
        sensors=[
            harvester_registry_sensor,
            harvest_failure_sensor,
            harvest_canceled_sensor,
            harvest_success_sensor,
            automation_sensor,
            dead_run_sensor,
        ],
        resources={"pipeline": PipelineResource(), "harvest_options": HarvestOptions()},
    )


defs = build_definitions()
