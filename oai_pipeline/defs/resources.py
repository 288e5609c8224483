"""Resources: where data lives (the same settings as the CLI) and the run's harvest options."""

from __future__ import annotations

import os
from enum import Enum

import dagster as dg
from pydantic import Field

from oai_pipeline.pipeline.options import SCALES, RunOptions
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings, load_settings


class PipelineResource(dg.ConfigurableResource):
    """Where the harvest data lives: the data folder, the state store, the target and the
    Parquet partitions. Each unset one is what the CLI reads (OAI_PIPELINE_* variables)."""

    # Described, as the UI's Resources page and the launchpad show these fields bare
    # otherwise. A URL with a password belongs in the environment (or dg.EnvVar), not here:
    # the Resources page shows the values set.
    home: str | None = Field(
        default=None,
        description="The data folder (default OAI_PIPELINE_HOME, else .oai_pipeline_home/).",
    )
    state_db_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the state store: harvesters, harvest records and runs "
        "(default OAI_PIPELINE_STATE_DB_URL, else state.sqlite in the data folder).",
    )
    target_db_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the embedded target repository (default "
        "OAI_PIPELINE_TARGET_DB_URL, else target.sqlite in the data folder).",
    )
    storage_url: str | None = Field(
        default=None,
        description="Folder or fsspec URL of the four assets' Parquet partitions (default "
        "OAI_PIPELINE_STORAGE_URL, else storage/ in the data folder).",
    )
    tick_lock_wait_seconds: float = Field(
        default=5.0,
        gt=0,
        description="How long a sensor's write to the state store waits for another writer "
        "(a harvest's transaction) before the tick leaves it to the next tick, on SQLite and "
        "PostgreSQL; a harvest waits 60 s on SQLite, as long as a row is held on PostgreSQL.",
    )

    def settings(self) -> Settings:
        env: dict[str, str] = {}
        for name, value in (
            ("OAI_PIPELINE_HOME", self.home),
            ("OAI_PIPELINE_STATE_DB_URL", self.state_db_url),
            ("OAI_PIPELINE_TARGET_DB_URL", self.target_db_url),
            ("OAI_PIPELINE_STORAGE_URL", self.storage_url),
        ):
            if value:
                env[name] = value
        return load_settings({**os.environ, **env})

    def services(self) -> Services:
        return Services(self.settings())

    def tick_services(self) -> Services:
        """The services for a sensor's tick: its writes wait `tick_lock_wait_seconds` for a
        harvest's transaction, not a minute of Dagster's daemon thread."""
        return Services(self.settings(), state_lock_wait=self.tick_lock_wait_seconds)


# An enum, so the launchpad offers the scales by name.
ScaleChoice = Enum("ScaleChoice", {name: name for name in SCALES}, type=str)


class HarvestOptions(dg.ConfigurableResource):
    """The harvest run's options, set in the launchpad or a backfill's run config."""

    scale: ScaleChoice | None = Field(default=None, description=RunOptions.describe("scale"))
    max_records: int = Field(default=0, description=RunOptions.describe("max_records"))
    include_existing: bool = Field(
        default=False, description=RunOptions.describe("include_existing")
    )
    rate_limit_per_minute: int | None = Field(
        default=None, description=RunOptions.describe("rate_limit_per_minute")
    )
    update_all: bool = Field(default=False, description=RunOptions.describe("update_all"))
    progress_every: int = Field(default=1000, description=RunOptions.describe("progress_every"))
    reset_stale_running_minutes: int | None = Field(
        default=None, description=RunOptions.describe("reset_stale_running_minutes")
    )
    retry_failed: bool = Field(default=False, description=RunOptions.describe("retry_failed"))
    # No `identifiers`: selected records belong to no window of the grid, and a partitioned
    # run would replace its windows' partitions with them (`oai-pipeline harvest ID OAI_ID…`).

    def run_options(self) -> RunOptions:
        values = {name: getattr(self, name) for name in type(self).model_fields}
        if values["scale"] is not None:
            values["scale"] = ScaleChoice(values["scale"]).value
        return RunOptions.model_validate(values)
