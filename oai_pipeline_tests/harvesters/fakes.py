"""Plug-in classes the tests register through entry points (the real ones live elsewhere)."""

from __future__ import annotations

from pydantic import BaseModel

from oai_pipeline.harvesters.plugins import ModelSpec
from oai_pipeline.settings import Settings
from oai_pipeline.sync.rules import LocalRecord, LocalState
from oai_pipeline.targets.base import PlannedWrite, SourceKey, WriteOutcome, Writer, WriterOptions
from oai_pipeline.transform.base import Transformer, TransformItem


class FakeReader:
    class Options(BaseModel):
        model_config = {"extra": "forbid"}

        page_size: int = 50

    def __init__(self, options: Options, harvester) -> None:
        self.options = options
        self.harvester = harvester


class ImportOptions(BaseModel):
    model_config = {"extra": "forbid"}

    model: str = "rdm"


class FakeImport(Transformer):
    Options = ImportOptions

    def transform(self, items: list[TransformItem]) -> None:
        for item in items:
            item.data = {"metadata": {"title": item.identifier}, "model": self.options.model}


class UpperTitle(Transformer):
    """A 'user package' transformer: upper-cases the title the import made."""

    def transform(self, items: list[TransformItem]) -> None:
        for item in items:
            item.data["metadata"]["title"] = item.data["metadata"]["title"].upper()


class ServiceOptions(WriterOptions):
    model: str = "rdm"


class FakeWriter(Writer):
    Options = ServiceOptions

    def __init__(self, options: ServiceOptions, settings: Settings) -> None:
        super().__init__(options, settings)

    def lookup(self, harvester_id: str, keys: list[SourceKey]) -> dict[str, LocalRecord]:
        return {key.identifier: LocalRecord(LocalState.MISSING) for key in keys}

    def apply(self, harvester_id: str, writes: list[PlannedWrite]) -> list[WriteOutcome]:
        return [WriteOutcome(w.identifier, w.action, None, None) for w in writes]


class Broken:
    """Not importable's cousin: a plug-in without an Options model."""


CUSTOM_MODEL = ModelSpec(name="custom", transformer="upper-title", writer="oai-service")
