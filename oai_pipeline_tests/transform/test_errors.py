"""Broken records: each failure is the record's error (type, message, location); the rest go on."""

from __future__ import annotations

import pytest

from oai_pipeline.transform import dates, imports
from oai_pipeline.transform.base import TransformItem

from .records import OAI, SAMPLES, datacite_item, transform, wrap_metadata

VIDEO = (SAMPLES / "datacite-example-video-v4.xml").read_text()


def item_from(metadata: str, identifier: str = "oai:x:broken") -> TransformItem:
    return TransformItem(
        identifier, "2024-01-01", [], wrap_metadata(metadata, identifier=identifier)
    )


def transform_with_a_good_neighbour(item: TransformItem) -> TransformItem:
    """Transform `item` in a batch with a valid record, which must still come through."""
    good = datacite_item("datacite-example-video-v4.xml")
    transform([item, good])
    assert good.error is None and good.data is not None
    assert item.data is None
    assert item.error is not None
    return item


def test_unknown_root_names_it() -> None:
    item = transform_with_a_good_neighbour(
        item_from('<mods xmlns="http://www.loc.gov/mods/v3"><titleInfo/></mods>')
    )
    assert item.error.type == "unknown_root"
    assert item.error.location == "metadata"
    assert "{http://www.loc.gov/mods/v3}mods" in item.error.message
    # F12: what the operator can harvest instead
    for name in ("oai_dc", "oai_datacite", "datacite"):
        assert name in item.error.message


def test_unknown_payload_of_the_oai_datacite_envelope() -> None:
    envelope = (
        '<oai_datacite xmlns="http://schema.datacite.org/oai/oai-1.1/"><payload>'
        '<mods xmlns="http://www.loc.gov/mods/v3"/></payload></oai_datacite>'
    )
    item = transform_with_a_good_neighbour(item_from(envelope))
    assert item.error.type == "unknown_root"
    assert item.error.location == "metadata.payload"
    assert "{http://www.loc.gov/mods/v3}mods" in item.error.message


def test_missing_title() -> None:
    resource = VIDEO.replace(
        VIDEO[VIDEO.index("<titles>") : VIDEO.index("</titles>") + len("</titles>")], ""
    )
    item = transform_with_a_good_neighbour(item_from(resource))
    assert (item.error.type, item.error.location) == ("missing_field", "metadata.title")


def test_missing_dc_title() -> None:
    item = transform_with_a_good_neighbour(
        item_from(
            '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>  </dc:title>'
            "<dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date></oai_dc:dc>"
        )
    )
    assert (item.error.type, item.error.location) == ("missing_field", "metadata.title")


def test_missing_creators() -> None:
    start, end = VIDEO.index("<creators>"), VIDEO.index("</creators>") + len("</creators>")
    item = transform_with_a_good_neighbour(item_from(VIDEO[:start] + VIDEO[end:]))
    assert (item.error.type, item.error.location) == ("missing_field", "metadata.creators")


def test_creator_without_a_name() -> None:
    resource = VIDEO.replace(
        "</creators>", "<creator><creatorName>  </creatorName></creator></creators>"
    )
    item = transform_with_a_good_neighbour(item_from(resource))
    assert item.error.type == "missing_field"
    assert item.error.location == "metadata.creators[1].person_or_org.name"
    assert item.error.message == "the record has no name for a creator"


@pytest.mark.parametrize(
    ("namespace", "shown"),
    [("http://purl.org/dc/elements/1.1", "'http://purl.org/dc/elements/1.1'"), ("", "(none)")],
)
def test_dc_elements_in_a_wrong_namespace_are_named(namespace: str, shown: str) -> None:
    """Before, the error said the record had no dc:title, though it had one: in a namespace
    one slash short of Dublin Core's."""
    item = transform_with_a_good_neighbour(
        item_from(
            '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
            f'xmlns="{namespace}"><title>T</title><creator>Doe, J</creator></oai_dc:dc>'
        )
    )
    assert (item.error.type, item.error.location) == ("missing_field", "metadata.title")
    assert f"its <title> is in the namespace {shown}" in item.error.message


def test_missing_dc_creators() -> None:
    item = transform_with_a_good_neighbour(
        item_from(
            '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>T</dc:title>'
            "<dc:date>2020</dc:date></oai_dc:dc>"
        )
    )
    assert (item.error.type, item.error.location) == ("missing_field", "metadata.creators")


@pytest.mark.parametrize(
    "year",
    [
        "twenty-thirteen",
        "2013-02-30",
        "2013/2012",
        # other digits than ASCII's: before, kept as they were, a publication date in no EDTF
        "\u0662\u0660\u0661\u0663",  # Arabic-Indic 2013
        "\uff12\uff10\uff11\uff13",  # full-width 2013
        "\uff12\uff10\uff11\uff13-\uff10\uff15",
    ],
)
def test_unparsable_publication_date(year: str) -> None:
    resource = VIDEO.replace(
        "<publicationYear>2013</publicationYear>", f"<publicationYear>{year}</publicationYear>"
    )
    item = transform_with_a_good_neighbour(item_from(resource))
    assert (item.error.type, item.error.location) == ("invalid_date", "metadata.publication_date")
    assert year in item.error.message


def test_unparsable_dc_date() -> None:
    item = transform_with_a_good_neighbour(
        item_from(
            '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>T</dc:title>'
            "<dc:creator>Doe, J</dc:creator><dc:date>last spring</dc:date></oai_dc:dc>"
        )
    )
    assert (item.error.type, item.error.location) == ("invalid_date", "metadata.publication_date")
    # F8: the message says which forms would have been read
    assert "'last spring'" in item.error.message
    assert dates.ACCEPTED_FORMS in item.error.message


@pytest.mark.parametrize("date", ["\u0661\u0669\u0669\u0660", "\uff11\uff19\uff19\uff10"])
def test_a_dc_date_in_other_digits_than_ascii_is_an_invalid_date(date: str) -> None:
    item = transform_with_a_good_neighbour(
        item_from(
            '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>T</dc:title>'
            f"<dc:creator>Doe, J</dc:creator><dc:date>{date}</dc:date></oai_dc:dc>"
        )
    )
    assert (item.error.type, item.error.location) == ("invalid_date", "metadata.publication_date")
    assert repr(date) in item.error.message


def test_unparsable_date_in_dates_is_left_out() -> None:
    """F3: an optional date that is no date does not fail the record."""
    resource = VIDEO.replace(
        "<language>", '<dates><date dateType="Created">2013-14-01</date></dates><language>'
    )
    [item] = transform([item_from(resource)])
    assert item.error is None
    assert item.data["metadata"]["dates"] == []


def test_missing_publication_date() -> None:
    resource = VIDEO.replace("<publicationYear>2013</publicationYear>", "")
    item = transform_with_a_good_neighbour(item_from(resource))
    assert (item.error.type, item.error.location) == ("missing_field", "metadata.publication_date")


def test_validation_error_names_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """The schema is the gate of every import (the built-in ones drop a malformed ORCID)."""
    namespace = "urn:test:bad-orcid"

    def bad_orcid(_element: object) -> dict:
        person = {
            "type": "personal",
            "family_name": "Doe",
            "identifiers": [{"scheme": "orcid", "identifier": "not-an-orcid"}],
        }
        return {
            "metadata": {
                "resource_type": {"id": "other"},
                "title": "T",
                "creators": [{"person_or_org": person}],
                "publication_date": "2020",
            }
        }

    monkeypatch.setattr(imports, "_IMPORTS", dict(imports._IMPORTS))
    imports.register_import(namespace, "record", bad_orcid)
    item = transform_with_a_good_neighbour(item_from(f'<record xmlns="{namespace}"/>'))
    assert item.error.type == "validation"
    assert item.error.location == "metadata.creators[0].person_or_org.identifiers[0]"
    assert item.error.message == (
        "metadata.creators[0].person_or_org.identifiers[0]: "
        "'not-an-orcid' is not a valid orcid identifier"
    )


def test_a_doi_that_is_no_doi_is_a_validation_error() -> None:
    resource = VIDEO.replace("10.5072/1153992", "urn:nbn:de:1234")
    item = transform_with_a_good_neighbour(item_from(resource))
    assert (item.error.type, item.error.location) == ("validation", "pids.doi.identifier")
    assert item.pid is None
    # F12: the message shows the rejected value, not a regex
    assert "'urn:nbn:de:1234' is not a DOI" in item.error.message
    assert "pattern" not in item.error.message and "\\d" not in item.error.message


@pytest.mark.parametrize(
    ("replace", "huge", "location"),
    [
        # a DOI may have 512 characters: longer, the message says just that
        ("10.5072/1153992", "no-doi " * 70 + "end", "pids.doi.identifier"),
        (
            "2013</publicationYear>",
            "x" * 100_000 + "</publicationYear>",
            "metadata.publication_date",
        ),
    ],
    ids=["doi", "publication-year"],
)
def test_a_long_value_is_quoted_cut_in_the_error(replace: str, huge: str, location: str) -> None:
    """Before, the message quoted the whole value: a field holding 100,000 characters made
    an error as long in `status`, `records list` and Dagster's preview of errors."""
    item = transform_with_a_good_neighbour(item_from(VIDEO.replace(replace, huge)))
    value = huge.removesuffix("</publicationYear>")
    assert item.error.location == location
    assert len(item.error.message) < 500
    assert f"{value[:100]!r}… ({len(value)} characters)" in item.error.message


def test_metadata_with_only_a_comment_is_an_error_with_a_location() -> None:
    """F12: as for an empty <metadata/>, not a `no_data` error without a location."""
    xml = (
        f'<record xmlns="{OAI}"><header><identifier>oai:x:c</identifier>'
        "<datestamp>2024-01-01</datestamp></header><metadata>\n  <!-- withheld -->\n"
        "</metadata></record>"
    ).encode()
    item = transform_with_a_good_neighbour(TransformItem("oai:x:c", "2024-01-01", [], xml))
    assert item.error.type == "MissingMetadata"
    assert item.error.location == "metadata"
    assert "comment" in item.error.message


def test_malformed_xml() -> None:
    item = TransformItem(
        "oai:x:bad", "2024-01-01", [], b'<record xmlns="http://www.openarchives.org/OAI/2.0/"><head'
    )
    item = transform_with_a_good_neighbour(item)
    assert item.error.type == "malformed_xml"
    assert item.error.location is None
    assert "does not parse" in item.error.message


def test_xml_with_entity_declarations_is_refused() -> None:
    xml = (
        b'<!DOCTYPE r [<!ENTITY e "boom">]>'
        b'<record xmlns="http://www.openarchives.org/OAI/2.0/"><header/></record>'
    )
    item = transform_with_a_good_neighbour(TransformItem("oai:x:dtd", "2024-01-01", [], xml))
    assert item.error.type == "malformed_xml"


def test_a_crashing_import_fails_its_record_only(monkeypatch: pytest.MonkeyPatch) -> None:
    namespace = "urn:test:crash"

    def crash(_element: object) -> dict:
        raise KeyError("boom")

    monkeypatch.setattr(imports, "_IMPORTS", dict(imports._IMPORTS))
    imports.register_import(namespace, "record", crash)
    item = transform_with_a_good_neighbour(item_from(f'<record xmlns="{namespace}"/>'))
    assert item.error.type == "transformer_failure"
    assert "KeyError" in item.error.message


def test_missing_resource_type() -> None:
    resource = VIDEO.replace(
        '<resourceType resourceTypeGeneral="Audiovisual">narrated video</resourceType>', ""
    )
    item = transform_with_a_good_neighbour(item_from(resource))
    assert (item.error.type, item.error.location) == ("missing_field", "metadata.resource_type")
