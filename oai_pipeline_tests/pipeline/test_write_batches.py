"""The write stage's memory of record data: one batch's at a time, not a group's."""

from __future__ import annotations

from typing import Any

import pytest

from oai_pipeline import json_codec
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.pipeline import write as write_module
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.runner import run_harvest
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline.targets.base import PlannedWrite
from oai_pipeline.targets.embedded.writer import EmbeddedWriter
from oai_pipeline_tests.oai.fake_source import FakeSource, make_records
from oai_pipeline_tests.support import EVERYTHING, harvest_fake_source, oai_dc


class _CountingCodec:
    """json_codec as the write stage sees it, counting the record data it parses."""

    def __init__(self) -> None:
        self.parsed = 0

    def loads(self, text: Any) -> Any:
        self.parsed += 1
        return json_codec.loads(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(json_codec, name)


def test_each_batch_data_is_parsed_when_it_is_written(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group's records (up to 5,000) were all parsed into dicts before its first batch was
    written, and lived until its last: the garbage collector walked them at every young
    collection. Each batch's data is parsed as it goes to the writer, and the writer gets
    it parsed, as before."""
    records = make_records(10)
    for record in records:
        record.raw_metadata = oai_dc(record.title)
    harvest_fake_source(settings, monkeypatch, FakeSource(records))
    with Services(settings) as services:
        HarvesterRegistry(services.state).update("sample", batch_size=3)
    codec = _CountingCodec()
    monkeypatch.setattr(write_module, "json_codec", codec)
    handed: list[int] = []  # records handed to the writer, at each batch
    parsed: list[int] = []  # records parsed by then
    apply = EmbeddedWriter.apply

    def counting_apply(self: EmbeddedWriter, harvester_id: str, writes: list[PlannedWrite]):
        assert all(isinstance(w.data, dict) for w in writes), writes
        handed.append((handed[-1] if handed else 0) + len(writes))
        parsed.append(codec.parsed)
        return apply(self, harvester_id, writes)

    monkeypatch.setattr(EmbeddedWriter, "apply", counting_apply)
    with Services(settings) as services:
        report = run_harvest(services, EVERYTHING, RunOptions(), progress=lambda _m: None)
    assert report.created == 10 and report.errors == 0, report
    assert handed == [3, 6, 9, 10]
    assert parsed == handed
