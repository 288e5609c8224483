"""Register a harvester from the Dagster UI: the `register_harvester` job's launchpad config
is a harvester as `oai_harvesters.yaml` describes it (create, or update to exactly this)."""

import hashlib
import logging
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field, ValidationError

from oai_pipeline.defs.partitions import ensure_harvester_partitions
from oai_pipeline.defs.resources import PipelineResource
from oai_pipeline.errors import PipelineError
from oai_pipeline.harvesters.fixtures import FixtureEntry, load_fixture_file
from oai_pipeline.harvesters.model import describe_validation_error
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.oai.base_url import pasted_arguments_note
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import load_settings

if TYPE_CHECKING:
    from oai_pipeline.defs.harvester_runs import DagsterRuns

logger = logging.getLogger(__name__)


def load_data_folder_fixture(
    services: Services | None = None, runs: "DagsterRuns | None" = None
) -> None:
    """A fixture `oai_harvesters.yaml` in the data folder is loaded when the definitions load
    (and by the harvester_registry_sensor, with its resource's `services` and its instance's
    `runs`), once per content. Every run worker loads the definitions: applied each time, the
    file undid a harvester's change made since in the UI or the CLI (disabled, say) at once.
    A file in error stores nothing: ConfigurationError. A new base URL warns of the runs
    queued for the old one (the instance under DAGSTER_HOME's when the definitions load).
    """
    if services is None:
        with Services(load_settings()) as opened:
            load_data_folder_fixture(opened, runs)
        return
    fixture = services.settings.fixture_file
    if not fixture.exists():
        return
    path = str(fixture.resolve())
    digest = hashlib.sha256(fixture.read_bytes()).hexdigest()
    if services.state.applied_fixture(path) == digest:
        return
    from oai_pipeline.defs.harvester_runs import waiting_in_home  # it imports the schedules

    queued_runs = waiting_in_home if runs is None else runs.waiting
    results = load_fixture_file(fixture, HarvesterRegistry(services.state), queued_runs)
    services.state.mark_fixture_applied(path, digest)
    logger.info("loaded %s: %s", fixture, results)


class HarvesterConfig(dg.Config):
    """A harvester, the fields of a fixture entry (`oai-pipeline harvesters load`)."""

    id: str = Field(description="a slug: letters, digits, '-' and '_', e.g. zenodo")
    name: str = Field(default="", description="a human name")
    comment: str = Field(default="", description="a note for operators")
    base_url: str = Field(description="the OAI-PMH endpoint, http(s)://…")
    metadata_prefix: str = Field(description="e.g. oai_dc, oai_datacite, arXiv")
    setspec: str | None = Field(default=None, description="harvest only this set")
    loader: str | None = Field(
        default=None, description="name{json5 options}, e.g. oai-pmh{timeout: 120}; default oai-pmh"
    )
    model: str | None = Field(
        default=None,
        description="fills in the transformer and writer not given (none given: rdm)",
    )
    transformers: list[str] = Field(default=[], description="name{json5 options} each")
    writers: list[str] = Field(default=[], description="name{json5 options} each")
    community: str | None = Field(default=None, description="added to every writer's options")
    harvest_managers: list[str] = Field(default=[], description="e-mail addresses")
    rate_limit_per_minute: int | None = Field(
        default=None, description="at most this many requests a minute"
    )
    batch_size: int | None = Field(default=None, description="records per writer transaction")
    enabled: bool = Field(default=True, description="harvested by the schedules?")


@dg.op
def register_harvester_op(
    context: dg.OpExecutionContext, config: HarvesterConfig, pipeline: PipelineResource
) -> dg.Output[str]:
    """Create the harvester, or update it to exactly this config; its partitions come at once."""
    try:
        harvester = FixtureEntry.model_validate(config.model_dump()).to_harvester()
    except ValidationError as error:
        raise dg.Failure(
            description=f"harvester {config.id!r}: {describe_validation_error(error)}"
        ) from None
    except PipelineError as error:
        raise dg.Failure(description=f"harvester {config.id!r}: {error}") from None
    from oai_pipeline.defs.harvester_runs import DagsterRuns

    changes: dict[str, list[str]] = {}
    with pipeline.services() as services:
        result = HarvesterRegistry(services.state).upsert(
            harvester, warnings=changes, queued_runs=DagsterRuns(context.instance).waiting
        )
    ensure_harvester_partitions(context.instance, [harvester.id])
    context.log.info(f"harvester {harvester.id}: {result}")
    note = pasted_arguments_note(config.base_url)
    warnings = ([note] if note else []) + changes.get(harvester.id, [])
    for warning in warnings:
        context.log.warning(f"harvester {harvester.id}: {warning}")
    return dg.Output(
        harvester.id,
        metadata={
            "harvester": harvester.id,
            "result": result,
            "harvester_config": dg.MetadataValue.json(harvester.shown()),
            "warnings": dg.MetadataValue.json(warnings),
        },
    )


@dg.job(
    description="Register a harvester (create, or update to exactly this config), as "
    "`oai-pipeline harvesters load` does for an entry of oai_harvesters.yaml."
)
def register_harvester() -> None:
    register_harvester_op()
