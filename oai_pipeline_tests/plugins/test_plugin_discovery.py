"""Plug-ins are looked up once per installation, not on each of a harvest's many lookups:
what pip installs, upgrades or removes while a process runs is still seen."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from oai_pipeline.harvesters import plugins
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.harvesters.plugins import parse_spec, transform_fingerprint
from oai_pipeline_tests.support import install_plugin

SOURCE = """
from oai_pipeline.transform.base import Transformer


class Late(Transformer):
    def transform(self, items):
        pass
"""
ENTRY_POINTS = {"oai_pipeline.transformers": {"late": "late_plugin:Late"}}


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on the import path, looked up once before anything is installed there."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    assert "late" not in plugins.available("transformers")
    return site


def _harvester() -> Harvester:
    return Harvester.model_validate(
        {
            "id": "h",
            "base_url": "https://example.org/oai",
            "metadata_prefix": "oai_dc",
            "transformers": ["oai-import{model: 'rdm'}", "late"],
        }
    )


def test_a_plugin_installed_into_a_folder_already_searched_is_found(site: Path) -> None:
    install_plugin(site, "late_plugin", SOURCE, ENTRY_POINTS)
    assert plugins.available("transformers")["late"].value == "late_plugin:Late"
    assert plugins.load_plugin_class("transformers", "late").__name__ == "Late"


def test_a_removed_plugin_is_gone(site: Path) -> None:
    install_plugin(site, "late_plugin", SOURCE, ENTRY_POINTS)
    assert "late" in plugins.available("transformers")
    shutil.rmtree(site / "late_plugin-1.0.dist-info")
    assert "late" not in plugins.available("transformers")


def test_an_upgraded_plugin_changes_the_transform_fingerprint(site: Path) -> None:
    """The stored transforms of the old version are not taken for the new one's."""
    install_plugin(site, "late_plugin", SOURCE, ENTRY_POINTS)
    old = transform_fingerprint(_harvester())
    assert transform_fingerprint(_harvester()) == old
    install_plugin(site, "late_plugin", SOURCE, ENTRY_POINTS, version="2.0")
    assert transform_fingerprint(_harvester()) != old


def test_a_plugin_on_a_folder_put_on_the_import_path_later_is_found(tmp_path: Path) -> None:
    assert "late" not in plugins.available("transformers")
    site = install_plugin(tmp_path / "later", "late_plugin", SOURCE, ENTRY_POINTS)
    sys.path.insert(0, str(site))
    try:
        assert "late" in plugins.available("transformers")
    finally:
        sys.path.remove(str(site))
    assert "late" not in plugins.available("transformers")


def test_a_parsed_specs_options_are_the_callers_own() -> None:
    first = parse_spec("oai-service{community: 'a', nested: {b: 1}}")
    first.options["community"] = "changed"
    first.options["nested"]["b"] = 2
    assert parse_spec("oai-service{community: 'a', nested: {b: 1}}").options == {
        "community": "a",
        "nested": {"b": 1},
    }
