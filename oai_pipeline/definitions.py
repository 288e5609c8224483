"""The Dagster code location: assembles the small modules of `oai_pipeline/defs/`."""

from __future__ import annotations

import logging

import dagster as dg

from oai_pipeline.defs.assets import harvest_assets, with_owners
from oai_pipeline.defs.checks import harvest_checks
from oai_pipeline.defs.dead_runs import dead_run_sensor
from oai_pipeline.defs.jobs import harvest_job, run_all_harvesters
from oai_pipeline.defs.prune_runs import prune_run_history_job, prune_run_history_schedule
from oai_pipeline.defs.reconcile import reconcile_schedule, reconcile_sources
from oai_pipeline.defs.registration import load_data_folder_fixture, register_harvester
from oai_pipeline.defs.resources import HarvestOptions, PipelineResource
from oai_pipeline.defs.schedules import incremental_harvest_schedule, run_all_harvesters_schedule
from oai_pipeline.defs.sensors import (
    automation_sensor,
    harvest_canceled_sensor,
    harvest_failure_sensor,
    harvest_success_sensor,
    harvester_registry_sensor,
)
from oai_pipeline.errors import ConfigurationError

logger = logging.getLogger(__name__)


def build_definitions() -> dg.Definitions:
    try:
        load_data_folder_fixture()
    except ConfigurationError as error:
        # Raised here, a typo in the file failed the code location: no schedule, sensor or
        # run of any harvester until it was fixed. The registry stays as it was; the
        # harvester_registry_sensor fails its ticks with this error until the file is fixed.
        logger.error("%s (harvesters unchanged; fix the file)", error)
    return dg.Definitions(
        assets=with_owners(harvest_assets),
        asset_checks=harvest_checks,
        jobs=[
            harvest_job,
            run_all_harvesters,
            register_harvester,
            reconcile_sources,
            prune_run_history_job,
        ],
        schedules=[
            incremental_harvest_schedule,
            run_all_harvesters_schedule,
            reconcile_schedule,
            prune_run_history_schedule,
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
        # Every job here is a chain (the four assets, then their checks): no two steps can
        # run at once, so Dagster's default of a process per step bought no parallelism and
        # cost each run a fresh interpreter importing Dagster and the pipeline per step
        # (~3 s a step here: a one-window run took 20 s, of which 1.5 s of work). Pools
        # (`oai_source_requests`), retries and run termination work the same in-process.
        executor=dg.in_process_executor,
    )


defs = build_definitions()
