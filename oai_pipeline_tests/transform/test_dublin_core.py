"""Field-by-field: Zenodo's oai_dc records as RDM records."""

from __future__ import annotations

from oai_pipeline.transform.base import TransformItem

from .records import page_items, transform, transform_one, transformed_metadata, wrap_metadata

DC_HEAD = (
    '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
    'xmlns:dc="http://purl.org/dc/elements/1.1/">'
)


def dc_item(body: str) -> TransformItem:
    return TransformItem(
        "oai:x:1", "2024-01-01", [], wrap_metadata(DC_HEAD + body + "</oai_dc:dc>")
    )


def test_zenodo_dc_record() -> None:
    [item] = page_items("zenodo-GetRecord-oai_dc.xml")
    transform_one(item, set_communities={"user-rdmo": "rdmo", "software": "software"})
    assert item.error is None
    assert item.pid == "10.5281/zenodo.10357859"
    assert item.communities == ["software", "rdmo"]  # in setSpec order
    data = item.data
    assert data["pids"]["doi"] == {"identifier": "10.5281/zenodo.10357859", "provider": "external"}
    metadata = data["metadata"]
    assert metadata["title"] == "Research Data Management Organiser (RDMO)"
    assert metadata["publication_date"] == "2023-12-11"
    assert metadata["resource_type"] == {"id": "other"}  # info:eu-repo/semantics/other
    munoz = metadata["creators"][6]["person_or_org"]
    assert (munoz["type"], munoz["family_name"], munoz["given_name"]) == (
        "personal",
        "Martínez Muñoz",
        "David",
    )
    # HTML escaped twice in the feed is HTML once in the record.
    assert metadata["description"].startswith(
        '<h2><a href="https://github.com/rdmorganiser/rdmo/compare/2.0.2...2.1.0">RDMO 2.1.0</a>'
    )
    assert "&lt;" not in metadata["description"]
    assert "<code>textarea</code>" in metadata["description"]
    assert metadata["additional_descriptions"] == [
        {
            "description": "If you refer to this software in a publication, please cite it "
            "as below.",
            "type": {"id": "other"},
        }
    ]
    # name + URL become one license; openAccess is an access term, not a license
    assert metadata["rights"] == [
        {
            "id": "apache-2.0",
            "title": {"en": "Apache License 2.0"},
            "link": "http://www.apache.org/licenses/LICENSE-2.0",
        }
    ]
    assert metadata["publisher"] == "Zenodo"
    assert metadata["identifiers"] == [{"identifier": "oai:zenodo.org:10357859", "scheme": "oai"}]
    assert {
        "identifier": "10.5281/zenodo.596581",
        "scheme": "doi",
        "relation_type": {"id": "other"},
    } in metadata["related_identifiers"]


def test_zenodo_list_page() -> None:
    items = transform(page_items("zenodo-ListRecords-oai_dc-page1.xml"))
    lecture, dataset, _ = items
    metadata = lecture.data["metadata"]
    assert metadata["resource_type"] == {"id": "presentation"}  # info:eu-repo/semantics/lecture
    # No comma: the whole name is the family name, nothing is guessed.
    assert metadata["creators"][0]["person_or_org"] == {
        "type": "personal",
        "name": "Matteo Marchegiani",
        "family_name": "Matteo Marchegiani",
        "identifiers": [],
    }
    assert metadata["rights"] == [
        {
            "id": "cc-by-4.0",
            "title": {"en": "Creative Commons Attribution 4.0 International"},
            "link": "https://creativecommons.org/licenses/by/4.0/legalcode",
        }
    ]
    assert metadata["description"].startswith("<p>A configuration layer for the analysis")
    metadata = dataset.data["metadata"]
    assert metadata["languages"] == [{"id": "eng"}]
    assert metadata["subjects"] == [{"subject": "Flexibility  services"}, {"subject": "DSO"}]
    # &amp;nbsp; in the feed: one unescape gives the character, a bare & in a URL stays
    assert "\xa0" in metadata["description"]
    assert "&amp;data=04" not in metadata["description"]
    assert "&data=04" in metadata["description"]


def test_dc_types_dates_and_file_links() -> None:
    item = dc_item(
        "<dc:title>A thesis</dc:title><dc:title xml:lang='de'>Eine Arbeit</dc:title>"
        "<dc:creator>Doe, Jane</dc:creator><dc:contributor>Roe, Richard</dc:contributor>"
        "<dc:date>2019-05-02T10:11:12Z</dc:date><dc:date>2019</dc:date>"
        "<dc:type>info:eu-repo/semantics/doctoralThesis</dc:type>"
        "<dc:identifier>https://repo.example.org/bitstream/1/thesis.pdf</dc:identifier>"
        "<dc:identifier>https://hdl.example.org/1</dc:identifier>"
        "<dc:language>de</dc:language><dc:format>application/pdf</dc:format>"
        "<dc:rights>All rights reserved</dc:rights>"
    )
    metadata = transformed_metadata(item)
    assert metadata["resource_type"] == {"id": "publication-thesis"}
    assert metadata["publication_date"] == "2019-05-02"
    assert metadata["additional_titles"] == [
        {"title": "Eine Arbeit", "type": {"id": "alternative-title"}, "lang": {"id": "deu"}}
    ]
    assert metadata["contributors"][0]["role"] == {"id": "other"}
    assert metadata["contributors"][0]["person_or_org"]["given_name"] == "Richard"
    assert item.data["files"]["links"] == [
        {"url": "https://repo.example.org/bitstream/1/thesis.pdf", "key": "thesis.pdf"}
    ]
    assert metadata["identifiers"] == [{"identifier": "https://hdl.example.org/1", "scheme": "url"}]
    assert metadata["rights"] == [{"title": {"en": "All rights reserved"}}]
    assert metadata["languages"] == [{"id": "deu"}]
    assert metadata["formats"] == ["application/pdf"]
    assert item.data["pids"] == {}
    assert item.pid is None


def test_unknown_dc_type_is_other() -> None:
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>A, B</dc:creator><dc:date>2020</dc:date>"
        "<dc:type>Strange thing</dc:type>"
    )
    assert transformed_metadata(item)["resource_type"] == {"id": "other"}
