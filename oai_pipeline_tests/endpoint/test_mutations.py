"""Changing the endpoint's records while it runs, as sync tests do."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from lxml import etree

from oai_pipeline.sample_endpoint import (
    EndpointRecord,
    OAIEndpoint,
    load_sample_records,
    records_for_prefix,
)
from oai_pipeline_tests.endpoint.oai_http import NS, error_codes, get, headers_of, sweep

NEW_DAY = datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC)


def _dc(title: str) -> bytes:
    return (
        b'<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
        b'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>'
        + title.encode()
        + b"</dc:title></oai_dc:dc>"
    )


def _get_record(base_url: str, identifier: str, prefix: str = "oai_dc"):
    return get(base_url, verb="GetRecord", identifier=identifier, metadataPrefix=prefix)[1]


def test_upsert_adds_a_record():
    new = EndpointRecord(
        "oai:test:new", NEW_DAY, set_specs=["zenodo"], metadata={"oai_dc": _dc("New")}
    )
    with OAIEndpoint() as endpoint:
        endpoint.upsert(new)
        root = _get_record(endpoint.base_url, "oai:test:new")
        assert root.findtext(".//{http://purl.org/dc/elements/1.1/}title") == "New"
        window = sweep(endpoint.base_url, metadataPrefix="oai_dc", **{"from": "2024-06-01"})
        assert window.identifiers == {"oai:test:new"}
        everything = sweep(endpoint.base_url, metadataPrefix="oai_dc").identifiers
    expected = {r.identifier for r in records_for_prefix(load_sample_records(), "oai_dc")}
    assert everything == expected | {"oai:test:new"}


def test_upsert_changes_a_record_and_its_datestamp():
    with OAIEndpoint() as endpoint:
        record = next(r for r in endpoint.records() if r.identifier == "oai:zenodo.org:8435696")
        endpoint.upsert(replace(record, datestamp=NEW_DAY, metadata={"oai_dc": _dc("Changed")}))
        root = _get_record(endpoint.base_url, record.identifier)
        (header,) = headers_of(root)
        assert header.datestamp == "2024-06-01T12:00:00Z"
        assert root.findtext(".//{http://purl.org/dc/elements/1.1/}title") == "Changed"
        window = sweep(
            endpoint.base_url, "ListIdentifiers", metadataPrefix="oai_dc", until="2023-12-31"
        )
        assert record.identifier not in window.identifiers
        assert len(endpoint.records()) == len(load_sample_records())


def test_mark_deleted_turns_a_record_into_a_deleted_header_with_a_new_datestamp():
    with OAIEndpoint() as endpoint:
        before = datetime.now(UTC).replace(microsecond=0)
        endpoint.mark_deleted("oai:sample.oai-pipeline:video")
        (header,) = headers_of(
            _get_record(endpoint.base_url, "oai:sample.oai-pipeline:video", "oai_datacite")
        )
        assert header.deleted and not header.has_metadata
        stamp = datetime.strptime(header.datestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        assert before <= stamp <= datetime.now(UTC)
        endpoint.mark_deleted("oai:zenodo.org:8435696", at=NEW_DAY)
        recent = sweep(endpoint.base_url, metadataPrefix="oai_dc", **{"from": "2024-06-01"})
        assert [(h.identifier, h.deleted) for h in recent.headers] == [
            ("oai:zenodo.org:8435696", True)
        ]


def test_remove_makes_a_record_vanish():
    with OAIEndpoint() as endpoint:
        endpoint.remove("oai:sample.oai-pipeline:video")
        root = _get_record(endpoint.base_url, "oai:sample.oai-pipeline:video", "oai_datacite")
        assert error_codes(root) == ["idDoesNotExist"]
        listed = sweep(endpoint.base_url, "ListIdentifiers", metadataPrefix="oai_datacite")
        assert "oai:sample.oai-pipeline:video" not in listed.identifiers
        with pytest.raises(KeyError):
            endpoint.remove("oai:sample.oai-pipeline:video")
        with pytest.raises(KeyError):
            endpoint.mark_deleted("oai:sample.oai-pipeline:video")


def test_mutations_between_pages_do_not_break_the_running_list():
    """Tokens hold a position, not an offset: records after it are still served once."""
    with OAIEndpoint() as endpoint, httpx.Client() as client:
        url = endpoint.base_url
        first = etree.fromstring(
            client.get(
                url, params={"verb": "ListIdentifiers", "metadataPrefix": "oai_datacite"}
            ).content
        )
        seen = [h.identifier for h in headers_of(first)]
        endpoint.remove(seen[0])  # a record already sent vanishes
        token = first.find(".//oai:resumptionToken", NS).text
        rest = []
        while token:
            page = etree.fromstring(
                client.get(
                    url, params={"verb": "ListIdentifiers", "resumptionToken": token}
                ).content
            )
            rest += [h.identifier for h in headers_of(page)]
            token = page.find(".//oai:resumptionToken", NS).text
    expected = {r.identifier for r in records_for_prefix(load_sample_records(), "oai_datacite")}
    assert set(seen) | set(rest) == expected
    assert len(seen) + len(rest) == len(expected)


def test_records_are_validated_on_the_way_in():
    with pytest.raises(ValueError, match="timezone-aware"):
        OAIEndpoint([EndpointRecord("oai:x:1", datetime(2024, 1, 1), metadata={"oai_dc": b"<a/>"})])
    with pytest.raises(ValueError, match="unknown metadata prefix"):
        OAIEndpoint([EndpointRecord("oai:x:1", NEW_DAY, metadata={"marcxml": b"<a/>"})])
    record = EndpointRecord("oai:x:1", NEW_DAY, metadata={"oai_dc": b"<a/>"})
    with pytest.raises(ValueError, match="duplicate"):
        OAIEndpoint([record, record])
    endpoint = OAIEndpoint([record])
    with pytest.raises(ValueError):
        endpoint.upsert(replace(record, datestamp=datetime(2024, 1, 1)))


def test_a_deleted_record_without_metadata_is_listed_for_every_prefix():
    gone = EndpointRecord("oai:x:gone", NEW_DAY, deleted=True)
    live = EndpointRecord("oai:x:live", NEW_DAY, metadata={"oai_dc": _dc("Live")})
    with OAIEndpoint([gone, live]) as endpoint:
        assert sweep(endpoint.base_url, metadataPrefix="oai_dc").identifiers == {
            "oai:x:gone",
            "oai:x:live",
        }
        assert sweep(endpoint.base_url, metadataPrefix="datacite").identifiers == {"oai:x:gone"}


def test_concurrent_mutations_and_harvests_are_safe():
    records = [
        EndpointRecord(
            f"oai:x:{n}", NEW_DAY + timedelta(seconds=n), metadata={"oai_dc": _dc(str(n))}
        )
        for n in range(200)
    ]
    with OAIEndpoint(records, page_size=7) as endpoint:
        errors = []

        def mutate():
            try:
                for n in range(200, 400):
                    endpoint.upsert(replace(records[0], identifier=f"oai:x:{n}"))
                    endpoint.mark_deleted(f"oai:x:{n - 200}")
            except Exception as error:  # pragma: no cover - reported below
                errors.append(error)

        worker = threading.Thread(target=mutate)
        worker.start()
        for _ in range(3):
            result = sweep(endpoint.base_url, "ListIdentifiers", metadataPrefix="oai_dc")
            assert len(result.identifiers) == len(result.headers)
        worker.join()
        assert not errors
        final = sweep(endpoint.base_url, "ListIdentifiers", metadataPrefix="oai_dc")
    assert len(final.identifiers) == 400
    assert sum(h.deleted for h in final.headers) == 200
