"""The shipped sample set and the generated DataCite records."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta

import pytest
from lxml import etree

from oai_pipeline.sample_endpoint import records as records_module
from oai_pipeline.sample_endpoint.datacite_generator import orcid_checksum
from oai_pipeline.sample_endpoint.formats import DATACITE_NAMESPACE, OAI_DATACITE_NAMESPACE
from oai_pipeline.sample_endpoint.records import (
    SAMPLE_FIRST_DAY,
    SAMPLE_LAST_DAY,
    generate_datacite_records,
    load_sample_records,
    records_for_prefix,
)

DATACITE = {"d": DATACITE_NAMESPACE}


def _doi(resource: bytes) -> str:
    root = etree.fromstring(resource)
    return root.findtext("d:identifier", namespaces=DATACITE)


def test_sample_identifiers_are_unique_and_named_as_documented():
    records = load_sample_records()
    identifiers = [record.identifier for record in records]
    assert len(identifiers) == len(set(identifiers))
    datacite_examples = [i for i in identifiers if i.startswith("oai:sample.oai-pipeline:")]
    assert len(datacite_examples) == 8
    assert "oai:zenodo.org:10357859" in identifiers


def test_sample_datestamps_lie_in_the_documented_days_with_boundary_cases():
    records = load_sample_records()
    for record in records:
        assert record.datestamp.tzinfo is not None
        assert record.datestamp.utcoffset() == timedelta(0)
        assert SAMPLE_FIRST_DAY <= record.datestamp.date() <= SAMPLE_LAST_DAY
    times = {record.datestamp.time() for record in records}
    assert time(0, 0, 0) in times
    assert time(23, 59, 59) in times
    assert (SAMPLE_LAST_DAY - SAMPLE_FIRST_DAY).days + 1 == 10


def test_sample_deleted_records_include_the_zenodo_one_marked_by_hand():
    deleted = {record.identifier for record in load_sample_records() if record.deleted}
    assert len(deleted) >= 2
    assert "oai:zenodo.org:8433364" in deleted


def test_docstring_table_matches_the_sample_set():
    """The module docstring documents the counts; keep it true."""
    records = load_sample_records()
    rows = re.findall(r"^\| (\w+) \| (\d+) \| (\d+) \| (\d+) \|$", records_module.__doc__, re.M)
    assert {row[0] for row in rows} == {"oai_dc", "oai_datacite", "datacite"}
    for prefix, total, live, deleted in rows:
        served = records_for_prefix(records, prefix)
        assert len(served) == int(total)
        assert sum(not r.deleted for r in served) == int(live)
        assert sum(r.deleted for r in served) == int(deleted)


def test_sample_oai_datacite_spans_several_default_pages():
    assert len(records_for_prefix(load_sample_records(), "oai_datacite")) > 2 * 4


def test_sample_metadata_parses_and_envelope_wraps_the_bare_resource():
    for record in load_sample_records():
        for prefix, metadata in record.metadata.items():
            assert not metadata.startswith(b"<?xml"), (record.identifier, prefix)
            etree.fromstring(metadata)
        if "oai_datacite" in record.metadata:
            envelope = etree.fromstring(record.metadata["oai_datacite"])
            assert envelope.tag == f"{{{OAI_DATACITE_NAMESPACE}}}oai_datacite"
            payload = envelope.find(f"{{{OAI_DATACITE_NAMESPACE}}}payload")
            (resource,) = list(payload)
            assert resource.tag == f"{{{DATACITE_NAMESPACE}}}resource"
            assert etree.tostring(resource) == etree.tostring(
                etree.fromstring(record.metadata["datacite"])
            )


def test_sample_zenodo_records_keep_zenodo_identifiers_and_sets():
    by_id = {record.identifier: record for record in load_sample_records()}
    rdmo = by_id["oai:zenodo.org:10357859"]
    assert set(rdmo.metadata) == {"oai_dc", "oai_datacite", "datacite"}
    assert {"zenodo", "software", "user-rdmo"} <= set(rdmo.set_specs)
    assert _doi(rdmo.metadata["datacite"]) == "10.5281/zenodo.10357859"
    pyhep = by_id["oai:zenodo.org:8435696"]
    assert pyhep.datestamp == datetime(2023, 10, 12, 14, 26, 7, tzinfo=UTC)
    assert {"zenodo", "user-pyhep2023", "openaire"} == set(pyhep.set_specs)
    assert b"PocketCoffea" in pyhep.metadata["oai_dc"]


def test_load_sample_records_returns_fresh_objects():
    first, second = load_sample_records(), load_sample_records()
    first[0].set_specs.append("changed")
    assert "changed" not in second[0].set_specs


# ---------------------------------------------------------------- generated


@pytest.fixture(scope="module")
def generated():
    return generate_datacite_records(2000, seed=7)


def test_generated_count_and_deleted_fraction(generated):
    assert len(generated) == 2000
    assert sum(record.deleted for record in generated) == 40
    assert len({record.identifier for record in generated}) == 2000
    assert sum(r.deleted for r in generate_datacite_records(300, deleted_fraction=0.1)) == 30


def test_generated_sizes_are_between_1_and_5_kb(generated):
    for record in generated:
        for prefix in ("oai_datacite", "datacite"):
            assert 1024 <= len(record.metadata[prefix]) <= 5120, (record.identifier, prefix)


def test_generated_xml_is_valid_datacite_with_realistic_fields(generated):
    dois = set()
    for record in generated:
        envelope = etree.fromstring(record.metadata["oai_datacite"])
        resource = envelope.find(f"{{{OAI_DATACITE_NAMESPACE}}}payload/d:resource", DATACITE)
        assert resource is not None
        bare = etree.fromstring(record.metadata["datacite"])
        assert etree.tostring(bare) == etree.tostring(resource)
        doi = resource.findtext("d:identifier", namespaces=DATACITE)
        assert re.fullmatch(r"10\.\d{4,5}/\S+", doi)
        dois.add(doi.lower())
        for field in ("creators/d:creator", "titles/d:title", "publisher", "publicationYear",
                      "subjects/d:subject", "dates/d:date", "rightsList/d:rights",
                      "descriptions/d:description", "resourceType"):  # fmt: skip
            assert resource.find(f"d:{field}", DATACITE) is not None, field
        for orcid in resource.iterfind(
            ".//d:nameIdentifier[@nameIdentifierScheme='ORCID']", DATACITE
        ):
            digits = orcid.text.replace("-", "")
            assert orcid_checksum(digits[:15]) == digits[15]
        assert (
            resource.find(".//d:affiliation[@affiliationIdentifierScheme='ROR']", DATACITE)
            is not None
        )
    assert len(dois) == len(generated)


def test_generated_datestamps_spread_over_the_span():
    start = datetime(2022, 5, 1, tzinfo=UTC)
    records = generate_datacite_records(500, start=start, span_days=30, seed=3)
    stamps = [record.datestamp for record in records]
    assert min(stamps) >= start
    assert max(stamps) < start + timedelta(days=30)
    assert len({stamp.date() for stamp in stamps}) >= 25
    assert all(stamp.microsecond == 0 and stamp.tzinfo is not None for stamp in stamps)


def test_generated_records_are_reproducible_from_the_seed():
    first = generate_datacite_records(50, seed=11)
    again = generate_datacite_records(50, seed=11)
    other = generate_datacite_records(50, seed=12)
    assert first == again
    assert [r.metadata for r in first] != [r.metadata for r in other]


def test_generated_can_store_one_prefix_only():
    records = generate_datacite_records(5, prefixes=("oai_datacite",))
    assert all(set(record.metadata) == {"oai_datacite"} for record in records)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"count": -1},
        {"count": 3, "deleted_fraction": 1.5},
        {"count": 3, "prefixes": ("oai_dc",)},
        {"count": 3, "start": datetime(2024, 1, 1)},
    ],
)
def test_generated_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        generate_datacite_records(**kwargs)


def test_generated_metadata_stores_the_resource_once_and_wraps_on_demand():
    (record,) = generate_datacite_records(1)
    assert set(record.metadata) == {"oai_datacite", "datacite"} and len(record.metadata) == 2
    assert "oai_dc" not in record.metadata
    with pytest.raises(KeyError):
        record.metadata["oai_dc"]
    envelope = etree.fromstring(record.metadata["oai_datacite"])
    assert envelope.tag == f"{{{OAI_DATACITE_NAMESPACE}}}oai_datacite"
    assert dict(record.metadata) == {k: record.metadata[k] for k in ("oai_datacite", "datacite")}
