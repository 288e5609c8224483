"""`oai-pipeline demo`: a real harvest of the shipped endpoint through all four assets.

Starts the sample OAI-PMH endpoint on loopback at a fixed port (where `./run.sh dev` serves
it too), registers it as the harvester `sample`, materialises the four assets over its
windows on the Dagster instance under DAGSTER_HOME (so the UI shows the runs afterwards), and
prints what happened.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, time

import click

from oai_pipeline.cli.output import FriendlyCommand, emit, json_option, report_text
from oai_pipeline.errors import ConfigurationError, PipelineError
from oai_pipeline.settings import ensure_dagster_home, load_settings

DEMO_HARVESTER = "sample"


def harvest_summary(harvester_id: str, window_keys: list[str]) -> dict:
    """What the latest materialisation of these windows did, read back from its Parquet."""
    from oai_pipeline.pipeline.frames import RAW_OAI_XML, WRITTEN_RECORDS
    from oai_pipeline.pipeline.runner import summarise
    from oai_pipeline.pipeline.services import Services

    actions: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    harvested = deleted = 0
    run_id = 0
    with Services(load_settings()) as services:
        storage = services.storage
        for key in window_keys:
            raw = storage.read_partition(RAW_OAI_XML, harvester_id, key)
            if raw is not None:
                harvested += raw.height
                deleted += int(raw["deleted"].sum())
            written = storage.read_partition(WRITTEN_RECORDS, harvester_id, key)
            if written is not None:
                actions.update(written["action"].to_list())
                errors.update(t for t in written["error_type"].to_list() if t)
            manifest = storage.read_manifest(WRITTEN_RECORDS, harvester_id, key)
            if manifest:
                run_id = int(manifest["run_id"])
    report = summarise(
        harvester_id, run_id, window_keys, harvested, deleted, False, actions, errors
    ).to_dict()
    report["windows"] = f"{window_keys[0]} .. {window_keys[-1]} ({len(window_keys)})"
    return report


@click.command(name="demo", cls=FriendlyCommand)
@json_option
def demo(as_json: bool) -> None:
    """Harvest the shipped sample endpoint into the embedded target and print what happened."""
    ensure_dagster_home()
    import dagster as dg

    from oai_pipeline.defs.instance_storage import (
        STORAGE_FAILED,
        dagster_storage_errors,
        refuse_held_storage,
    )
    from oai_pipeline.defs.launch import dagster_instance, materialize_windows, window_range
    from oai_pipeline.defs.partitions import window_partitions
    from oai_pipeline.harvesters.model import Harvester
    from oai_pipeline.harvesters.plugins import RDM_MODEL
    from oai_pipeline.harvesters.registry import HarvesterRegistry
    from oai_pipeline.pipeline.services import Services
    from oai_pipeline.sample_endpoint.records import SAMPLE_LAST_DAY

    # The instance first: one that does not open (a read-only DAGSTER_HOME), or whose runs.db
    # or index another process holds, fails the demo before it registers the harvester or serves the
    # endpoint.
    with dagster_instance() as instance:
        refuse_held_storage(instance)
        with sample_endpoint() as base_url:
            with Services(load_settings()) as services:
                HarvesterRegistry(services.state).upsert(
                    Harvester(
                        id=DEMO_HARVESTER,
                        name="oai-pipeline sample endpoint",
                        comment="the OAI-PMH endpoint shipped with oai-pipeline (oai-pipeline "
                        "demo; ./run.sh dev serves it beside the UI)",
                        base_url=base_url,
                        metadata_prefix="oai_datacite",
                        transformers=[RDM_MODEL.transformer],
                        writers=[RDM_MODEL.writer],
                    )
                )
            # A full harvest of the sample: the grid's windows up to its last datestamp, as one
            # run and one sweep (the grid's first window is open to the past).
            last_moment = datetime.combine(SAMPLE_LAST_DAY, time.max, tzinfo=UTC)
            first, last = window_range(None, last_moment)
            with dagster_storage_errors(STORAGE_FAILED):
                result = materialize_windows(
                    instance,
                    DEMO_HARVESTER,
                    first,
                    last,
                    raise_on_error=False,
                    log_level="WARNING",
                    base_url=base_url,
                    trigger="demo",
                )
            if not result.success:
                raise PipelineError(f"the demo harvest failed; see Dagster run {result.run_id}")
    keys = window_partitions.get_partition_keys_in_range(dg.PartitionKeyRange(first, last))
    report = harvest_summary(DEMO_HARVESTER, keys)
    report["dagster_run_id"] = result.run_id
    report["target_live_records"] = target_live_count(DEMO_HARVESTER)
    text = report_text(report) + (
        f"\n  target now holds {report['target_live_records']} live records of {DEMO_HARVESTER}"
        f"\n  Dagster run: {result.run_id} (./run.sh dev to see it in the UI)"
    )
    emit(report, as_json=as_json, text=text)


@contextmanager
def sample_endpoint() -> Iterator[str]:
    """The shipped endpoint at its fixed URL, served while the demo runs, or the one that
    `./run.sh dev` serves there already. The harvester `sample` keeps that URL, so it still
    harvests in the UI after the demo (on a port of its own, it pointed at a dead port)."""
    from oai_pipeline.sample_endpoint.records import load_sample_records
    from oai_pipeline.sample_endpoint.server import (
        SAMPLE_HOST,
        SAMPLE_PORT_ENV,
        OAIEndpoint,
        sample_base_url,
        sample_port,
        serves_the_sample,
    )

    port = sample_port()
    base_url = sample_base_url(port)
    endpoint: OAIEndpoint | None = OAIEndpoint(load_sample_records(), host=SAMPLE_HOST, port=port)
    try:
        endpoint.start()
    except OSError as error:
        if not serves_the_sample(base_url):
            raise ConfigurationError(
                f"cannot serve the sample endpoint on {SAMPLE_HOST}:{port}: "
                f"{error.strerror or error}; set {SAMPLE_PORT_ENV} to a free port"
            ) from None
        endpoint = None  # ./run.sh dev serves it there: the demo harvests that one
    try:
        yield base_url
    finally:
        if endpoint is not None:
            endpoint.stop()


def target_live_count(harvester_id: str) -> int:
    from oai_pipeline.targets.embedded.repository import EmbeddedRepository

    repository = EmbeddedRepository(load_settings().target_db_url)
    try:
        return len(repository.list(harvester=harvester_id, state="live"))
    finally:
        repository.close()
