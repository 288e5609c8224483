"""The writer is found through its entry point, with options from a harvester's spec."""

from __future__ import annotations

from oai_pipeline.harvesters.plugins import load_plugin_class, parse_spec
from oai_pipeline.settings import Settings
from oai_pipeline.sync.rules import LocalState
from oai_pipeline.targets.base import SourceKey
from oai_pipeline.targets.embedded.writer import EmbeddedWriter


def test_oai_service_entry_point_builds_the_embedded_writer(target_settings: Settings) -> None:
    spec = parse_spec('oai-service{model:"rdm", community:"cesnet", publish:false}')
    plugin = load_plugin_class("writers", spec.name)
    assert plugin is EmbeddedWriter
    writer = plugin(plugin.Options.model_validate(spec.options), target_settings)
    try:
        assert (writer.options.community, writer.options.publish) == ("cesnet", False)
        found = writer.lookup("h", [SourceKey("oai:1")])
        assert found["oai:1"].state is LocalState.MISSING
    finally:
        writer.close()
