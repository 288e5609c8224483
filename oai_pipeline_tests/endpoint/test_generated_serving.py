"""Serving generated DataCite records in bulk, complete (its speed is the benchmark's to show)."""

from __future__ import annotations

import pytest
from lxml import etree

from oai_pipeline.sample_endpoint import OAIEndpoint, generate_datacite_records
from oai_pipeline_tests.endpoint.oai_http import sweep

COUNT = 10_000


@pytest.fixture(scope="module")
def records():
    return generate_datacite_records(COUNT, seed=1)


def test_ten_thousand_records_are_served_paged(records):
    with OAIEndpoint(records, page_size=200) as endpoint:
        result = sweep(endpoint.base_url, metadataPrefix="oai_datacite")
    assert result.pages == COUNT // 200
    assert len(result.headers) == COUNT
    assert result.identifiers == {record.identifier for record in records}
    assert sum(header.deleted for header in result.headers) == round(COUNT * 0.02)
    assert sum(header.has_metadata for header in result.headers) == COUNT - round(COUNT * 0.02)


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


@pytest.mark.parametrize(
    ("error", "printed"),
    [
        (BrokenPipeError(32, "Broken pipe"), False),
        (ConnectionResetError(104, "Connection reset by peer"), False),
        (ValueError("a bug of the endpoint"), True),
    ],
)
def test_a_client_hanging_up_mid_reply_prints_no_traceback(
    records, capfd: pytest.CaptureFixture[str], error: Exception, printed: bool
) -> None:
    """A killed harvest's connection: the stdlib printed a traceback for it, which landed in
    the output of whatever ran next."""
    with OAIEndpoint(records[:10]) as endpoint:
        server = endpoint._server
        assert server is not None
        try:
            raise error
        except Exception:
            server.handle_error(None, ("127.0.0.1", 1))
    assert ("Traceback" in capfd.readouterr().err) is printed
