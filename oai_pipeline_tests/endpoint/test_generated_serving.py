"""Serving generated DataCite records in bulk: complete, and fast enough for a benchmark."""

from __future__ import annotations

import time

import pytest
from lxml import etree

from oai_pipeline.sample_endpoint import OAIEndpoint, generate_datacite_records
from oai_pipeline_tests.endpoint.oai_http import sweep

COUNT = 10_000


@pytest.fixture(scope="module")
def records():
    return generate_datacite_records(COUNT, seed=1)


def test_ten_thousand_records_are_served_paged_and_quickly(records):
    with OAIEndpoint(records, page_size=200) as endpoint:
        started = time.perf_counter()
        result = sweep(endpoint.base_url, metadataPrefix="oai_datacite")
        elapsed = time.perf_counter() - started
    assert result.pages == COUNT // 200
    assert len(result.headers) == COUNT
    assert result.identifiers == {record.identifier for record in records}
    assert sum(header.deleted for header in result.headers) == round(COUNT * 0.02)
    assert sum(header.has_metadata for header in result.headers) == COUNT - round(COUNT * 0.02)
    assert elapsed < 10, f"{COUNT} records took {elapsed:.1f} s"  # about 1.5 s on a laptop


def test_generated_sets_and_windows_select_subsets(records):
    with OAIEndpoint(records, page_size=500) as endpoint:
        datasets = sweep(
            endpoint.base_url, "ListIdentifiers", metadataPrefix="datacite", set="dataset"
        )
        january = sweep(
            endpoint.base_url,
            "ListIdentifiers",
            metadataPrefix="datacite",
            **{"from": "2024-01-01", "until": "2024-01-31"},
        )
    assert datasets.identifiers == {r.identifier for r in records if "dataset" in r.set_specs}
    assert january.identifiers == {r.identifier for r in records if r.datestamp.month == 1}
    assert 0 < len(january.identifiers) < COUNT


def test_served_generated_metadata_parses(records):
    with OAIEndpoint(records[:50], page_size=50) as endpoint:
        result = sweep(endpoint.base_url, metadataPrefix="datacite")
    assert len(result.headers) == 50
    for record in records[:50]:
        if not record.deleted:
            etree.fromstring(record.metadata["datacite"])
