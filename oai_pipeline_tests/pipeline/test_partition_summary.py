"""A partition's counts come from its manifest, written with its parts, and equal a recount."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from oai_pipeline.defs.partitions import partition_key, scopes_for_keys
from oai_pipeline.pipeline.frames import (
    RAW_OAI_XML,
    SYNC_DECISIONS,
    TRANSFORMED_RECORDS,
    WRITTEN_RECORDS,
)
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.partition_summary import (
    ERROR_PREVIEW,
    PartitionSummary,
    summarise_partition,
)
from oai_pipeline.pipeline.runner import run_harvest
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.records import records_for_prefix
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline.storage import MANIFEST, PartitionStore
from oai_pipeline_tests.support import register, shifted_sample_records, window_keys

PREFIX = "oai_datacite"
ASSETS = (RAW_OAI_XML, TRANSFORMED_RECORDS, SYNC_DECISIONS, WRITTEN_RECORDS)


@pytest.fixture
def harvested(settings: Settings) -> Iterator[tuple[PartitionStore, list[str], dict]]:
    """The shifted sample harvested over daily windows, one record unreadable."""
    records = shifted_sample_records()
    live = [r for r in records_for_prefix(records, PREFIX) if not r.deleted]
    broken = dataclasses.replace(live[0], metadata={PREFIX: b"<nonsense/>"})
    records = [broken if r.identifier == broken.identifier else r for r in records]
    days = window_keys(
        min(r.datestamp.date() for r in records), max(r.datestamp.date() for r in records)
    )
    (scope,) = scopes_for_keys([str(partition_key("sample", day)) for day in days])
    with OAIEndpoint(records, page_size=3) as endpoint:
        register(settings, endpoint.base_url, metadata_prefix=PREFIX)
        with Services(settings) as services:
            run_harvest(services, scope, RunOptions(), progress=lambda _m: None)
            yield (
                services.storage,
                days,
                {
                    "broken": broken,
                    "per_window": Counter(
                        r.datestamp.date().isoformat() for r in records_for_prefix(records, PREFIX)
                    ),
                    "deleted": Counter(
                        r.datestamp.date().isoformat()
                        for r in records_for_prefix(records, PREFIX)
                        if r.deleted
                    ),
                },
            )


def _recount(storage: PartitionStore, asset: str, day: str, preview: int) -> PartitionSummary:
    """The same partition counted from its parts: its manifest without the counts (as an
    earlier version wrote it)."""
    path = Path(storage.root) / asset / "sample" / day / MANIFEST
    manifest = json.loads(path.read_text())
    manifest.pop("summary")
    path.write_text(json.dumps(manifest))
    return summarise_partition(storage, asset, "sample", day, preview=preview)


def test_each_window_counts_its_own_records(harvested) -> None:
    storage, days, expected = harvested
    broken_day = expected["broken"].datestamp.date().isoformat()
    for day in days:
        raw = summarise_partition(storage, RAW_OAI_XML, "sample", day)
        transformed = summarise_partition(
            storage, TRANSFORMED_RECORDS, "sample", day, preview=ERROR_PREVIEW
        )
        decisions = summarise_partition(storage, SYNC_DECISIONS, "sample", day)
        written = summarise_partition(storage, WRITTEN_RECORDS, "sample", day)
        assert raw.records == transformed.records == expected["per_window"][day]
        assert raw.deleted == expected["deleted"][day]
        assert transformed.errors.total() == (day == broken_day)
        if day == broken_day:
            [row] = transformed.error_rows
            assert row["identifier"] == expected["broken"].identifier
            assert row["error_type"]
        assert decisions.writers == ({0} if decisions.records else set())
        assert sum(written.actions.values()) == written.records == decisions.records


def test_the_counts_kept_in_the_manifest_equal_a_recount_of_the_parts(harvested) -> None:
    storage, days, _ = harvested
    for asset in ASSETS:
        for day in days:
            kept = summarise_partition(storage, asset, "sample", day, preview=ERROR_PREVIEW)
            assert kept == _recount(storage, asset, day, ERROR_PREVIEW), (asset, day)


def test_counts_kept_in_the_manifest_read_no_part(
    harvested, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage, days, _ = harvested

    def no_part(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a part was read")

    monkeypatch.setattr(storage, "read_part", no_part)
    for asset in ASSETS:
        for day in days:
            summarise_partition(storage, asset, "sample", day, preview=ERROR_PREVIEW)


def test_the_error_preview_is_cut_to_what_is_asked(harvested) -> None:
    storage, _, expected = harvested
    broken_day = expected["broken"].datestamp.date().isoformat()
    counted = summarise_partition(storage, TRANSFORMED_RECORDS, "sample", broken_day)
    assert counted.errors.total() == 1
    assert counted.error_rows == []
