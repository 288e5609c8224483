"""Fake plug-ins declared as entry points, so the registry is tested without the real ones."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from oai_pipeline.harvesters import plugins

FAKES = "oai_pipeline_tests.harvesters.fakes"

ENTRY_POINTS = {
    "readers": {"oai-pmh": f"{FAKES}:FakeReader"},
    "transformers": {
        "oai-import": f"{FAKES}:FakeImport",
        "upper-title": f"{FAKES}:UpperTitle",
        "no-options": f"{FAKES}:Broken",
        "not-installed": "oai_pipeline_tests.harvesters.missing_module:Nothing",
    },
    "writers": {"oai-service": f"{FAKES}:FakeWriter"},
    "models": {"custom": f"{FAKES}:CUSTOM_MODEL"},
}


def fake_available(group: str) -> dict[str, EntryPoint]:
    return {
        name: EntryPoint(name=name, value=value, group=f"oai_pipeline.{group}")
        for name, value in ENTRY_POINTS[group].items()
    }


@pytest.fixture(autouse=True)
def fake_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugins, "available", fake_available)
