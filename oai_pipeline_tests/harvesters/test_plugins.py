"""Plug-in specs (`name{json5 options}`) and loading plug-ins through entry points."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from oai_pipeline.errors import ConfigurationError
from oai_pipeline.harvesters import plugins
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.harvesters.plugins import (
    RDM_MODEL,
    PluginSpec,
    build_reader,
    build_transformers,
    build_writers,
    load_model,
    load_plugin_class,
    parse_spec,
    validate_spec,
    with_option,
    written_fingerprint,
)
from oai_pipeline.transform.base import TransformItem
from oai_pipeline_tests.harvesters import fakes


@pytest.mark.parametrize(
    ("text", "name", "options"),
    [
        ("oai-pmh", "oai-pmh", {}),
        ("  oai-import  ", "oai-import", {}),
        ('oai-import{model:"rdm"}', "oai-import", {"model": "rdm"}),
        (
            "oai-service{model:'rdm', community: \"cesnet\", publish: false,}",
            "oai-service",
            {"model": "rdm", "community": "cesnet", "publish": False},
        ),
        ('x{"quoted": 1, nested: {list: [1, 2]}}', "x", {"quoted": 1, "nested": {"list": [1, 2]}}),
        ("name {}", "name", {}),
    ],
)
def test_parse_spec_reads_json5_with_unquoted_keys(text, name, options):
    assert parse_spec(text) == PluginSpec(name=name, options=options)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("oai-import{model:}", "do not parse as JSON5"),
        ("oai-import{model:'rdm'", "do not parse as JSON5"),
        ("oai-import{model:'rdm'} trailing", "do not parse as JSON5"),
        ("oai-import[1, 2]", "not a plug-in spec"),
        ("{model:'rdm'}", "not a plug-in spec"),
        ("", "not a plug-in spec"),
        ("two words", "not a plug-in spec"),
    ],
)
def test_parse_spec_rejects_malformed_specs(text, message):
    with pytest.raises(ConfigurationError, match=message):
        parse_spec(text)


def test_render_round_trips_through_parse():
    spec = PluginSpec(name="oai-service", options={"model": "rdm", "community": "čeština"})
    assert parse_spec(spec.render()) == spec
    assert PluginSpec(name="oai-pmh").render() == "oai-pmh"


def test_with_option_sets_one_option():
    text = with_option('oai-service{model:"rdm"}', "community", "cesnet")
    assert parse_spec(text).options == {"model": "rdm", "community": "cesnet"}


def test_unknown_plugin_names_group_and_known_names():
    with pytest.raises(ConfigurationError) as raised:
        load_plugin_class("writers", "s3")
    assert str(raised.value) == "unknown writer 's3' (known writers: oai-service)"


def test_broken_or_optionless_plugins_are_configuration_errors():
    with pytest.raises(ConfigurationError, match="cannot be loaded"):
        load_plugin_class("transformers", "not-installed")
    with pytest.raises(ConfigurationError, match="declares no Options"):
        validate_spec("transformers", "no-options")


def test_validate_spec_applies_the_plugins_options_model():
    assert validate_spec("readers", "oai-pmh{page_size: 5}").options == {"page_size": 5}
    with pytest.raises(ConfigurationError, match="rejects its options: page_size"):
        validate_spec("readers", "oai-pmh{page_size: 'many'}")
    with pytest.raises(ConfigurationError, match="rejects its options: colour"):
        validate_spec("writers", "oai-service{colour: 'red'}")


def _harvester(**changes) -> Harvester:
    data = {
        "id": "h",
        "base_url": "https://example.org/oai",
        "metadata_prefix": "oai_dc",
        "loader": "oai-pmh{page_size: 7}",
        "transformers": ["oai-import{model: 'rdm'}", "upper-title"],
        "writers": ["oai-service{community: 'cesnet'}"],
    }
    return Harvester.model_validate(data | changes)


def test_build_reader_transformers_writers(settings):
    harvester = _harvester()
    reader = build_reader(harvester)
    assert isinstance(reader, fakes.FakeReader)
    assert reader.options.page_size == 7 and reader.harvester is harvester
    transformers = build_transformers(harvester)
    assert [type(t) for t in transformers] == [fakes.FakeImport, fakes.UpperTitle]
    [writer] = build_writers(harvester, settings)
    assert writer.options.community == "cesnet" and writer.options.publish is True
    assert writer.settings is settings


@pytest.mark.parametrize(
    ("writer", "same"),
    [
        ("oai-service", True),
        # options that change how or when, not what, the writer writes
        ("oai-service{publish: false, update_all: true}", True),
        ("oai-service{pid_field: 'pids.doi'}", True),  # the default, given
        ("oai-service{community: 'cesnet'}", False),
        ("oai-service{pid_field: 'pids.urn'}", False),
    ],
)
def test_a_writers_written_fingerprint_holds_the_options_that_change_what_it_writes(
    settings, writer: str, same: bool
):
    """Without such options it is the transform's: records written before the writer's
    options counted are not all written again after the upgrade."""
    [built] = build_writers(_harvester(writers=[writer]), settings)
    assert (written_fingerprint("0123456789abcdef", built) == "0123456789abcdef") is same


def test_writers_given_other_communities_have_other_written_fingerprints(settings):
    built = build_writers(
        _harvester(writers=["oai-service{community: 'a'}", "oai-service{community: 'b'}"]),
        settings,
    )
    assert len({written_fingerprint("0123456789abcdef", w) for w in built}) == 2


def test_custom_transformer_declared_as_entry_point_runs(monkeypatch):
    """A user package's transformer, declared only as an entry point, joins the chain."""
    extra = {
        "shout": EntryPoint(
            name="shout",
            value="oai_pipeline_tests.harvesters.fakes:UpperTitle",
            group="oai_pipeline.transformers",
        )
    }
    original = plugins.available
    monkeypatch.setattr(
        plugins,
        "available",
        lambda group: original(group) | (extra if group == "transformers" else {}),
    )
    harvester = _harvester(transformers=["oai-import", "shout"])
    items = [TransformItem("oai:x:1", "2024-01-01", [], b"<record/>")]
    for transformer in build_transformers(harvester):
        transformer.transform(items)
    assert items[0].data == {"metadata": {"title": "OAI:X:1"}, "model": "rdm"}


def test_models_builtin_and_from_entry_points():
    assert load_model("rdm") == RDM_MODEL
    assert parse_spec(RDM_MODEL.transformer) == PluginSpec(
        name="oai-import", options={"model": "rdm"}
    )
    assert load_model("custom").transformer == "upper-title"
    with pytest.raises(
        ConfigurationError, match=r"unknown model 'x' \(known models: custom, rdm\)"
    ):
        load_model("x")


def test_real_entry_points_of_the_project_are_declared():
    """The built-ins register the way a user package would (pyproject entry points)."""
    from importlib.metadata import entry_points

    declared = {
        group: {ep.name for ep in entry_points(group=f"oai_pipeline.{group}")}
        for group in ("readers", "transformers", "writers", "models")
    }
    assert "oai-pmh" in declared["readers"]
    assert "oai-import" in declared["transformers"]
    assert "oai-service" in declared["writers"]
    assert "rdm" in declared["models"]
