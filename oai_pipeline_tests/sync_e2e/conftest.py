"""A harness for sync scenarios: a small source, one window, harvests through the assets.

A scenario runs on SQLite and on PostgreSQL (state store and target on a fresh database of
the throwaway server), unless its module says `SQLITE_ONLY`: those whose SQL the state
store's and the target's own tests run on both already, and whose rules the model-based
test runs on PostgreSQL too (`SQLITE_ONLY` marks a single test so too). Scenarios where the
databases differ (DOIs longer than a column, case of identifiers, unique DOIs swapped in one
batch) keep both.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from datetime import UTC, datetime

import dagster as dg
import pytest

from oai_pipeline.defs.launch import materialize_windows
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.records import EndpointRecord, load_sample_records
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings, load_settings
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.support import register

PREFIX = "oai_datacite"
DAY = "2024-02-01"
# The scenarios of a module (or a test) on SQLite only (see above): their PostgreSQL runs
# took an eighth of the suite's time for what the other tests on PostgreSQL run already.
SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2024, 2, 1, hour, minute, tzinfo=UTC)


def source_records() -> list[EndpointRecord]:
    """Three live DataCite records, all in one window."""
    live = [r for r in load_sample_records() if not r.deleted and PREFIX in r.metadata][:3]
    return [
        dataclasses.replace(r, datestamp=at(8, i), set_specs=list(r.set_specs))
        for i, r in enumerate(live)
    ]


class Harness:
    """Acts as the source (endpoint), the operator (harvests) and the repository's users."""

    def __init__(self, instance: dg.DagsterInstance, settings: Settings, endpoint: OAIEndpoint):
        self.instance = instance
        self.settings = settings
        self.endpoint = endpoint
        self.records = {r.identifier: r for r in endpoint.records()}
        self.repository = EmbeddedRepository(settings.target_db_url)

    def register(self, **kwargs: object) -> None:
        register(self.settings, self.endpoint.base_url, metadata_prefix=PREFIX, **kwargs)

    def set_writer(self, writer: str) -> None:
        self._update_harvester(writers=[writer])

    def set_batch_size(self, size: int) -> None:
        self._update_harvester(batch_size=size)

    def set_transformer(self, transformer: str) -> None:
        self._update_harvester(transformers=[transformer])

    def _update_harvester(self, **fields: object) -> None:
        with Services(self.settings) as services:
            registry = HarvesterRegistry(services.state)
            harvester = registry.get("sample")
            services.state.save_harvester(harvester.model_copy(update=fields))

    def harvest(self, **options: object) -> dg.ExecuteInProcessResult:
        result = materialize_windows(self.instance, "sample", DAY, DAY, options=options)
        assert result.success
        return result

    def identifiers(self) -> list[str]:
        return sorted(self.records)

    # -- the source ---------------------------------------------------------------------
    def change_title(self, identifier: str, title: str, when: datetime) -> None:
        self._change_text(identifier, r"(<(?:\w+:)?title(?: [^>]*)?>)", "title", title, when)

    def change_doi(self, identifier: str, doi: str, when: datetime) -> None:
        """The source gives the record another DOI."""
        opening = r'(<(?:\w+:)?identifier identifierType="DOI">)'
        self._change_text(identifier, opening, "identifier", doi, when)

    def _change_text(
        self, identifier: str, opening: str, element: str, text: str, when: datetime
    ) -> None:
        """The first element `opening` starts gets `text`, and the record a new datestamp."""
        record = self.records[identifier]
        xml = record.metadata[PREFIX].decode()
        changed = re.sub(
            rf"{opening}[^<]*(</(?:\w+:)?{element}>)", rf"\g<1>{text}\g<2>", xml, count=1
        )
        assert changed != xml
        updated = dataclasses.replace(
            record, datestamp=when, metadata={**record.metadata, PREFIX: changed.encode()}
        )
        self.records[identifier] = updated
        self.endpoint.upsert(updated)

    def delete_at_source(self, identifier: str, when: datetime) -> None:
        self.endpoint.mark_deleted(identifier, at=when)

    # -- the target ---------------------------------------------------------------------
    def local(self, identifier: str) -> dict | None:
        for row in self.repository.list(harvester="sample"):
            if row["source_identifier"] == identifier:
                return self.repository.show(row["id"])
        return None

    def all_local(self) -> list[dict]:
        return self.repository.list()

    def harvest_record(self, identifier: str) -> dict:
        with Services(load_settings()) as services:
            record = services.state.get_record(identifier, "sample")
        assert record is not None
        return record

    def close(self) -> None:
        self.repository.close()


@pytest.fixture
def harness(backend: str, instance: dg.DagsterInstance) -> Iterator[Harness]:
    settings = load_settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    records = source_records()
    with OAIEndpoint(records, page_size=2) as endpoint:
        harness = Harness(instance, settings, endpoint)
        try:
            yield harness
        finally:
            harness.close()
