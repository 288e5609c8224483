"""The Dagster code location: assembles the small modules of `oai_pipeline/defs/`."""

from __future__ import annotations

import logging
from typing import Any

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


def _forked_steps(config: dict[str, Any]) -> dict[str, Any]:
    """Each step in a process of its own, as Dagster's default (the UI's Terminate stops a
    step where it is; in the run's own process Dagster retries an interrupted step under its
    retry policy, and the run goes on), but forked from a server that imported Dagster and
    the pipeline once per run unless the run config names a start method: spawned afresh,
    each step imported them again (~3 s a step on 2 vCPU; a one-window run took 20 s, of
    which 1.5 s of work). `execution: config: in_process: {}` still runs a run in-process."""
    steps = config.get("multiprocess")
    if steps is None or "start_method" in steps:
        return config
    return {**config, "multiprocess": {**steps, "start_method": {"forkserver": {}}}}


STEP_PROCESSES = dg.multi_or_in_process_executor.configured(
    _forked_steps, config_schema=dg.multi_or_in_process_executor.config_schema
)


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
        executor=STEP_PROCESSES,
    )


defs = build_definitions()
