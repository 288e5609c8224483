"""The registry over the state store, and loading the fixture file."""

from __future__ import annotations

from pathlib import Path

import pytest

from oai_pipeline.errors import ConfigurationError, PipelineError
from oai_pipeline.harvesters.fixtures import load_fixture_file
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.harvesters.plugins import parse_spec
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.state.store import StateStore


@pytest.fixture
def registry(tmp_path: Path):
    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    yield HarvesterRegistry(store)
    store.close()


def _harvester(harvester_id: str = "zenodo", **changes) -> Harvester:
    return Harvester.from_input(
        {"id": harvester_id, "base_url": "https://zenodo.org/oai2d", "metadata_prefix": "oai_dc"}
        | changes,
        model="rdm",
    )


def test_create_get_list_update_delete(registry):
    registry.create(_harvester())
    registry.create(_harvester("arxiv", setspec="cs"))
    assert [h.id for h in registry.list()] == ["arxiv", "zenodo"]
    with pytest.raises(PipelineError, match="already exists"):
        registry.create(_harvester())
    updated = registry.update("zenodo", name="Zenodo", batch_size=20, community="cesnet")
    assert registry.get("zenodo") == updated
    assert updated.name == "Zenodo" and updated.batch_size == 20
    assert parse_spec(updated.writers[0]).options["community"] == "cesnet"
    registry.delete("zenodo")
    with pytest.raises(PipelineError, match="unknown harvester 'zenodo'"):
        registry.get("zenodo")
    with pytest.raises(PipelineError, match="unknown harvester 'zenodo'"):
        registry.delete("zenodo")


def test_update_validates_and_stores_nothing_when_invalid(registry):
    registry.create(_harvester())
    with pytest.raises(ValueError):
        registry.update("zenodo", base_url="gopher://x")
    with pytest.raises(PipelineError, match="cannot be changed"):
        registry.update("zenodo", id="other")
    assert registry.get("zenodo") == _harvester()


def test_update_with_a_model_replaces_transformers_and_writers(registry):
    registry.create(_harvester(transformers=["upper-title"], writers=["oai-service"]))
    updated = registry.update("zenodo", model="custom")
    assert updated.transformers == ["upper-title"] and updated.writers == ["oai-service"]
    updated = registry.update("zenodo", model="rdm")
    assert parse_spec(updated.transformers[0]).name == "oai-import"


def test_upsert(registry):
    assert registry.upsert(_harvester()) == "created"
    assert registry.upsert(_harvester()) == "unchanged"
    assert registry.upsert(_harvester(name="Zenodo")) == "updated"
    assert registry.get("zenodo").name == "Zenodo"


FIXTURE = """\
- id: zenodo-cesnet
  name: Zenodo, CESNET community
  base-url: https://zenodo.org/oai2d
  metadata-prefix: oai_datacite
  setspec: user-cesnet
  model: rdm
  community: cesnet
  harvest-manager: oai@example.org
  rate-limit-per-minute: 60
- id: arxiv
  base-url: http://export.arxiv.org/oai2
  metadata-prefix: oai_dc
  loader: 'oai-pmh{page_size: 10}'
  transformer: oai-import
  writers: ['oai-service{publish: false}']
  harvest-manager: [a@example.org, b@example.org]
  batch-size: 10
"""


def test_fixture_load_twice_gives_the_same_state(registry, tmp_path):
    path = tmp_path / "oai_harvesters.yaml"
    path.write_text(FIXTURE)
    assert load_fixture_file(path, registry) == [
        ("zenodo-cesnet", "created"),
        ("arxiv", "created"),
    ]
    first = registry.list()
    assert load_fixture_file(path, registry) == [
        ("zenodo-cesnet", "unchanged"),
        ("arxiv", "unchanged"),
    ]
    assert registry.list() == first
    zenodo, arxiv = registry.get("zenodo-cesnet"), registry.get("arxiv")
    assert zenodo.setspec == "user-cesnet" and zenodo.rate_limit_per_minute == 60
    assert zenodo.harvest_managers == ["oai@example.org"]
    assert parse_spec(zenodo.writers[0]).options == {"model": "rdm", "community": "cesnet"}
    assert arxiv.harvest_managers == ["a@example.org", "b@example.org"]
    assert arxiv.transformers == ["oai-import"] and arxiv.batch_size == 10
    path.write_text(FIXTURE.replace("batch-size: 10", "batch-size: 20"))
    assert load_fixture_file(path, registry)[1] == ("arxiv", "updated")


def test_fixture_also_accepts_a_harvesters_mapping(registry, tmp_path):
    path = tmp_path / "h.yaml"
    path.write_text("harvesters:\n" + "".join(f"  {line}\n" for line in FIXTURE.splitlines()))
    assert [result for _, result in load_fixture_file(path, registry)] == ["created", "created"]


@pytest.mark.parametrize(
    ("bad_entry", "message"),
    [
        ("- id: Bad|Id\n  base-url: http://x.org\n  metadata-prefix: oai_dc\n", "invalid id"),
        ("- id: bad\n  base-url: ftp://x.org\n  metadata-prefix: oai_dc\n", "invalid base_url"),
        (
            "- id: bad\n  base-url: http://x.org\n  metadata-prefix: oai_dc\n  writer: s3\n",
            "invalid writers.0: unknown writer 's3'",
        ),
        (
            "- id: bad\n  base-url: http://x.org\n  metadata-prefix: oai_dc\n  colour: red\n",
            "colour",
        ),
        ("- id: zenodo-cesnet\n  base-url: http://x.org\n  metadata-prefix: oai_dc\n", "twice"),
        (
            "- id: bad\n  base-url: http://x.org\n  metadata-prefix: oai_dc\n  model: nope\n",
            "model",
        ),
        ("- [not, a, mapping]\n", "harvesters.2"),
        ("- id: x\n  base-url: [unclosed\n", "not valid YAML"),
    ],
)
def test_fixture_is_all_or_nothing(registry, tmp_path, bad_entry, message):
    path = tmp_path / "oai_harvesters.yaml"
    path.write_text(FIXTURE + bad_entry)
    with pytest.raises(ConfigurationError, match=message.replace("|", r"\|")) as raised:
        load_fixture_file(path, registry)
    assert "\n" not in str(raised.value)
    assert registry.list() == []


def test_missing_fixture_file_is_a_configuration_error(registry, tmp_path):
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_fixture_file(tmp_path / "absent.yaml", registry)


def test_a_fixture_changing_a_set_logs_what_it_means_for_the_next_runs(
    registry, tmp_path, caplog: pytest.LogCaptureFixture
):
    """What the data folder's fixture (loaded by the sensor) does: before, a new set or
    metadata prefix was stored without a word; `harvesters update` warned of the prefix."""
    path = tmp_path / "oai_harvesters.yaml"
    path.write_text(FIXTURE)
    load_fixture_file(path, registry)
    path.write_text(FIXTURE.replace("setspec: user-cesnet", "setspec: user-other"))
    with caplog.at_level("WARNING", logger="oai_pipeline.harvesters.fixtures"):
        assert load_fixture_file(path, registry)[0] == ("zenodo-cesnet", "updated")
    assert any(
        "harvester zenodo-cesnet: the set changed from 'user-cesnet' to 'user-other'"
        in record.getMessage()
        for record in caplog.records
    ), caplog.text
