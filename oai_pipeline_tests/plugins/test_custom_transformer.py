"""A user package adds a transformer through the `oai_pipeline.transformers` entry point."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa
from pydantic import ValidationError

from oai_pipeline.defs.launch import materialize_windows
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline.targets.embedded.schema import records as records_table
from oai_pipeline_tests.dagster_results import run_totals
from oai_pipeline_tests.support import (
    URN_TRANSFORMER,
    live_records,
    register,
    shifted_sample_records,
    target_by_source,
    use_plugin,
    use_transformer,
)

PLUGIN = '''
"""A user's own transformer: shouts the title."""
from pydantic import BaseModel

from oai_pipeline.transform.base import Transformer


class Shout(Transformer):
    class Options(BaseModel, extra="forbid"):
        suffix: str = "!"

    def transform(self, items):
        for item in items:
            title = item.data["metadata"]["title"]
            item.data["metadata"]["title"] = title.upper() + self.options.suffix
'''


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_plugin(
        monkeypatch,
        tmp_path / "site",
        "shout_plugin",
        PLUGIN,
        {"oai_pipeline.transformers": {"shout": "shout_plugin:Shout"}},
    )


def _harvest_with(
    instance: dg.DagsterInstance, settings: Settings, records: list, transformer: str
) -> dg.ExecuteInProcessResult:
    """Harvest `records` with the default chain plus `transformer`, over all their windows."""
    with OAIEndpoint(records) as endpoint:
        harvester = register(settings, endpoint.base_url)
        with Services(settings) as services:
            HarvesterRegistry(services.state).update(
                "sample", transformers=[*harvester.transformers, transformer]
            )
        days = sorted(r.datestamp.date().isoformat() for r in records)
        return materialize_windows(instance, "sample", days[0], days[-1])


def test_harvest_with_a_transformer_from_an_entry_point(
    installed_plugin: None, instance: dg.DagsterInstance, settings: Settings
) -> None:
    records = shifted_sample_records()
    assert _harvest_with(instance, settings, records, 'shout{suffix:"?!"}').success

    target = target_by_source(settings, "sample")
    live = live_records(records, "oai_datacite")
    assert set(target) == {r.identifier for r in live}
    for local in target.values():
        title = local["data"]["metadata"]["title"]
        assert title.endswith("?!") and title[:-2] == title[:-2].upper()


def test_the_plugins_own_options_model_validates_the_spec(installed_plugin: None) -> None:
    with pytest.raises(ValidationError, match="transformers"):
        Harvester(
            id="h",
            base_url="https://example.org/oai",
            metadata_prefix="oai_dc",
            transformers=['oai-import{model:"rdm"}', "shout{volume: 11}"],
            writers=['oai-service{model:"rdm"}'],
        )


FORGETFUL = '''
"""A transformer that drops the data of every record (without saying why)."""
from oai_pipeline.transform.base import Transformer


class Forget(Transformer):
    def transform(self, items):
        for item in items:
            item.data = None
'''


def test_a_record_the_chain_made_nothing_of_is_a_no_data_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    instance: dg.DagsterInstance,
    settings: Settings,
) -> None:
    use_plugin(
        monkeypatch,
        tmp_path / "site",
        "forget_plugin",
        FORGETFUL,
        {"oai_pipeline.transformers": {"forget": "forget_plugin:Forget"}},
    )
    records = shifted_sample_records()
    result = _harvest_with(instance, settings, records, "forget")
    assert result.success

    assert target_by_source(settings, "sample") == {}
    live = live_records(records, "oai_datacite")
    assert run_totals(result, "transformed_records")["run_errors_no_data"].value == len(live)
    with Services(settings) as services:
        record = services.state.get_record(live[0].identifier, "sample")
    assert record is not None and record["data"] is None
    # Stored once, by the stage that failed: not again as a write error.
    assert [(e["stage"], e["type"]) for e in record["errors"]] == [("transform", "no_data")]


NOT_JSON = '''
"""A transformer that puts a set (not JSON) into the data of every other record."""
from oai_pipeline.transform.base import Transformer


class Sets(Transformer):
    def transform(self, items):
        for index, item in enumerate(items):
            if index % 2 == 0:
                item.data["metadata"]["keywords"] = {"a", "b"}
'''


def test_data_that_is_not_json_is_the_records_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    instance: dg.DagsterInstance,
    settings: Settings,
) -> None:
    use_transformer(monkeypatch, tmp_path / "site", "sets", "Sets", NOT_JSON)
    records = shifted_sample_records()
    result = _harvest_with(instance, settings, records, "sets")
    assert result.success

    live = live_records(records, "oai_datacite")
    failed = run_totals(result, "transformed_records")["run_errors_transformer_failure"].value
    assert 0 < failed < len(live)
    assert len(target_by_source(settings, "sample")) == len(live) - failed
    with Services(settings) as services:
        errors = [
            error
            for record in live
            for error in services.state.get_record(record.identifier, "sample")["errors"]
        ]
    assert any("not JSON" in e["message"] for e in errors if e["type"] == "transformer_failure")


def test_a_writer_pid_field_is_what_the_plan_finds_records_by(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    instance: dg.DagsterInstance,
    settings: Settings,
) -> None:
    """The plan looks records up by the writer's pid_field, as the writer does: a record
    holding the URN is taken over (planned and done alike), not created beside it."""
    use_transformer(monkeypatch, tmp_path / "site", "urn", "Urn", URN_TRANSFORMER)
    records = shifted_sample_records()
    doi_of = {
        r.identifier: match[1].lower()
        for r in live_records(records, "oai_datacite")
        if (match := re.search(rb'identifierType="DOI">([^<]+)<', r.metadata["oai_datacite"]))
    }
    first = sorted(doi_of)[0]
    urn = "urn:x:" + doi_of[first].decode()
    with EmbeddedRepository(settings.target_db_url) as repository:
        users = repository.deposit({"metadata": {"title": "A user's"}}, publish=True)
        with repository.transaction() as tx:  # the deposit holds the URN as its pid
            tx.connection.execute(
                sa.update(records_table).where(records_table.c.id == users).values(doi=urn)
            )
    with OAIEndpoint(records) as endpoint:
        harvester = register(settings, endpoint.base_url)
        with Services(settings) as services:
            HarvesterRegistry(services.state).update(
                "sample",
                transformers=[*harvester.transformers, "urn"],
                writers=['oai-service{model:"rdm", pid_field:"pids.urn"}'],
            )
        days = sorted(r.datestamp.date().isoformat() for r in records)
        result = materialize_windows(instance, "sample", days[0], days[-1])
    assert result.success
    plan = run_totals(result, "sync_decisions")
    written = run_totals(result, "written_records")
    assert target_by_source(settings, "sample")[first]["id"] == users
    assert int(plan["run_action_update"].value) == 1  # the takeover, planned as done
    assert int(written["run_action_update"].value) == 1
    assert int(written["run_action_create"].value) == len(doi_of) - 1
