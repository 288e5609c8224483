"""Field-by-field: DataCite kernel-4 records (the schema's examples and Zenodo's) as RDM records."""

from __future__ import annotations

import re
from typing import Any

import pytest

from oai_pipeline.transform.base import TransformItem

from .records import (
    SAMPLES,
    datacite_item,
    page_items,
    personal,
    transform_one,
    transformed_metadata,
    wrap_metadata,
)


def test_names_split_orcid_and_ror_kept() -> None:
    metadata = transformed_metadata(datacite_item("datacite-example-affiliation-v4.xml"))
    miller, carberry, group = metadata["creators"]
    assert miller["person_or_org"] == {
        "type": "personal",
        "name": "Miller, Elizabeth",
        "given_name": "Elizabeth",
        "family_name": "Miller",
        "identifiers": [{"scheme": "orcid", "identifier": "0000-0001-5000-0007"}],
    }
    assert miller["affiliations"] == [{"id": "04wxnsj81", "name": "DataCite"}]
    # A GRID affiliation keeps its name but is no ROR id.
    assert carberry["affiliations"] == [
        {"id": "05gq02987", "name": "Brown University"},
        {"name": "Wesleyan University"},
    ]
    assert group["person_or_org"]["type"] == "organizational"
    assert group["person_or_org"]["name"] == "The Psychoceramics Study Group"
    [starr] = metadata["contributors"]
    assert starr["role"] == {"id": "projectleader"}
    assert starr["person_or_org"]["identifiers"] == [
        {"scheme": "orcid", "identifier": "0000-0002-7285-027X"}
    ]
    assert metadata["resource_type"] == {"id": "software"}
    assert metadata["publication_date"] == "2014"
    assert metadata["languages"] == [{"id": "eng"}]
    assert metadata["rights"] == [
        {"id": "cc0-1.0", "link": "http://creativecommons.org/publicdomain/zero/1.0/"}
    ]
    assert metadata["version"] == "4.3"
    assert metadata["subjects"] == [{"subject": "computer science", "scheme": "dewey"}]


def test_orcid_urls_with_spaces_are_normalised_and_ror_name_identifiers_kept() -> None:
    metadata = transformed_metadata(datacite_item("datacite-example-full-v4.xml"))
    person, organisation = metadata["creators"]
    assert person["person_or_org"]["identifiers"] == [
        {"scheme": "orcid", "identifier": "0000-0001-5727-2427"}
    ]
    assert organisation["person_or_org"] == {
        "type": "organizational",
        "name": "ExampleOrganization",
        "identifiers": [{"scheme": "ror", "identifier": "04wxnsj81"}],
    }
    # " https://orcid.org/..." with a leading space, as the example has it
    assert metadata["contributors"][0]["person_or_org"]["identifiers"][0]["identifier"] == (
        "0000-0001-5727-2427"
    )
    roles = [contributor["role"]["id"] for contributor in metadata["contributors"]]
    assert roles[:3] == ["contactperson", "datacollector", "datacurator"]
    assert metadata["publication_date"] == "2024-01-01"  # the Issued date beats publicationYear
    dates = {date["type"]["id"]: date["date"] for date in metadata["dates"]}
    assert dates["collected"] == "2024-01-01/2024-12-31"
    assert len(metadata["dates"]) == 12
    titles = {title["type"]["id"]: title for title in metadata["additional_titles"]}
    assert titles["translated-title"]["lang"] == {"id": "fra"}
    assert set(titles) == {"subtitle", "translated-title", "alternative-title"}
    related = metadata["related_identifiers"]
    assert related[0] == {
        "identifier": "ark:/13030/tqb3kh97gh8w",
        "scheme": "ark",
        "relation_type": {"id": "iscitedby"},
        "resource_type": {"id": "video"},
    }
    assert metadata["identifiers"] == [{"identifier": "12345", "scheme": "other"}]
    types = [d["type"]["id"] for d in metadata["additional_descriptions"]]
    assert metadata["description"] == "Example Abstract"
    assert types == [
        "methods",
        "series-information",
        "table-of-contents",
        "technical-info",
        "other",
    ]
    assert metadata["sizes"] == ["1 MB", "90 pages"]
    assert metadata["formats"] == ["application/xml", "text/plain"]
    place = metadata["locations"]["features"][0]
    assert place["place"] == "Vancouver, British Columbia, Canada"
    assert place["geometry"] == {"type": "Point", "coordinates": [-123.1207, 49.2827]}


def test_multilingual_titles_descriptions_and_rights() -> None:
    metadata = transformed_metadata(datacite_item("datacite-example-multilingual-v4.xml"))
    assert metadata["title"] == "Advances in Chemistry"
    assert metadata["additional_titles"] == [
        {"title": "Avances en Química", "type": {"id": "translated-title"}, "lang": {"id": "spa"}},
        {"title": "化学进展", "type": {"id": "translated-title"}, "lang": {"id": "zho"}},
    ]
    assert [d["lang"]["id"] for d in metadata["additional_descriptions"]] == ["spa", "zho"]
    # One license given in three languages is one right with a multilingual title.
    assert metadata["rights"] == [
        {
            "id": "cc-by-4.0",
            "title": {
                "en": "Creative Commons Attribution 4.0 International",
                "es": "Atribución 4.0 Internacional",
                "zh": "署名 4.0 国际",
            },
            "link": "https://creativecommons.org/licenses/by/4.0/",
        }
    ]
    zou, datacite = metadata["creators"]
    # No givenName/familyName in the source: the name is split at its comma.
    assert zou["person_or_org"]["given_name"] == "Jing"
    assert zou["person_or_org"]["family_name"] == "Zou"
    assert datacite["person_or_org"]["identifiers"] == [
        {"scheme": "ror", "identifier": "04wxnsj81"}
    ]
    assert metadata["resource_type"] == {"id": "publication-section"}


def test_funding_with_crossref_funder_id_award_and_file_links() -> None:
    item = datacite_item("datacite-example-fundingReference-v4.xml")
    metadata = transformed_metadata(item)
    assert metadata["funding"][0] == {
        "funder": {
            "name": "European Commission",
            "identifiers": [{"scheme": "doi", "identifier": "10.13039/501100000780"}],
        },
        "award": {
            "number": "282625",
            "title": {
                "en": "MOTivational strength of ecosystem services and alternative ways to "
                "express the value of BIOdiversity"
            },
            "identifiers": [
                {
                    "scheme": "url",
                    "identifier": "https://cordis.europa.eu/project/rcn/100180_en.html",
                }
            ],
        },
    }
    assert len(metadata["funding"]) == 2
    # openAccess is an access right, not a license
    assert metadata["rights"] == [
        {
            "id": "cc0-1.0",
            "title": {"en": "Creative Commons Zero 1.0 Universal"},
            "link": "https://creativecommons.org/publicdomain/zero/1.0/",
        }
    ]
    assert item.data["files"] == {
        "enabled": False,
        "links": [
            {
                "url": "https://zenodo.org/record/47394/files/Data_All_Internal_motivations.pdf",
                "key": "Data_All_Internal_motivations.pdf",
            },
            {
                "url": "https://zenodo.org/record/47394/files/"
                "survey_questionnaire_internal_motivations.pdf",
                "key": "survey_questionnaire_internal_motivations.pdf",
            },
        ],
    }
    assert metadata["publication_date"] == "2016-03-11"
    assert metadata["resource_type"] == {"id": "dataset"}
    # The double-escaped quotes of the example come out as the characters.
    assert "“peers”" in metadata["description"]


def test_funder_ror_becomes_the_funder_id() -> None:
    resource = (SAMPLES / "datacite-example-video-v4.xml").read_text()
    resource = resource.replace(
        "</descriptions>",
        "</descriptions><fundingReferences><fundingReference>"
        "<funderName>Brown University</funderName>"
        '<funderIdentifier funderIdentifierType="ROR">https://ror.org/05gq02987</funderIdentifier>'
        "</fundingReference></fundingReferences>",
    )
    item = TransformItem("oai:x:1", "2024-01-01", [], wrap_metadata(resource))
    metadata = transformed_metadata(item)
    assert metadata["funding"] == [
        {"funder": {"id": "05gq02987", "name": "Brown University", "identifiers": []}}
    ]


def test_doi_in_pids_and_names_from_family_comma_given() -> None:
    metadata = transformed_metadata(datacite_item("datacite-example-complicated-v4.xml"))
    smith, japanese = metadata["creators"]
    assert smith["person_or_org"]["name"] == "Smith, John"
    # No nameType, no comma, no ORCID: an organisation, its ISNI kept without spaces.
    assert japanese["person_or_org"] == {
        "type": "organizational",
        "name": "つまらないものですが",
        "identifiers": [{"scheme": "isni", "identifier": "0000000134596520"}],
    }
    assert metadata["languages"] == [{"id": "deu"}]
    assert metadata["rights"][0]["id"] == "cc-by-nd-2.0"
    assert metadata["related_identifiers"] == [
        {
            "identifier": "10.5272/oldertestpub",
            "scheme": "doi",
            "relation_type": {"id": "ispartof"},
        }
    ]


def test_zenodo_datacite_record() -> None:
    [item] = page_items("zenodo-GetRecord-datacite.xml")
    transform_one(item, set_communities={"user-rdmo": "rdmo"})
    assert item.error is None
    data = item.data
    assert data["pids"] == {
        "doi": {"identifier": "10.5281/zenodo.10357859", "provider": "external"}
    }
    assert item.pid == "10.5281/zenodo.10357859"
    assert item.communities == ["rdmo"]
    assert data["parent"] == {"communities": {"ids": ["rdmo"]}}
    metadata = data["metadata"]
    assert metadata["title"] == "Research Data Management Organiser (RDMO)"
    assert metadata["resource_type"] == {"id": "software"}
    assert metadata["publication_date"] == "2023-12-11"
    assert len(metadata["creators"]) == 9
    munoz = metadata["creators"][6]["person_or_org"]
    assert munoz["family_name"] == "Martínez Muñoz"
    assert munoz["given_name"] == "David"
    assert munoz["identifiers"] == []
    assert metadata["creators"][0]["person_or_org"]["identifiers"] == [
        {"scheme": "orcid", "identifier": "0000-0002-5883-4273"}
    ]
    assert metadata["rights"] == [
        {
            "id": "apache-2.0",
            "title": {"en": "Apache License 2.0"},
            "link": "http://www.apache.org/licenses/LICENSE-2.0",
        }
    ]
    assert metadata["version"] == "2.1.0"
    assert metadata["identifiers"] == [{"identifier": "oai:zenodo.org:10357859", "scheme": "other"}]
    assert {
        "identifier": "10.5281/zenodo.596581",
        "scheme": "doi",
        "relation_type": {"id": "isversionof"},
    } in metadata["related_identifiers"]


def test_doi_provider_option() -> None:
    item = transform_one(datacite_item("datacite-example-video-v4.xml"), doi_provider="datacite")
    assert item.data["pids"]["doi"] == {"identifier": "10.5072/1153992", "provider": "datacite"}


VIDEO = (SAMPLES / "datacite-example-video-v4.xml").read_text()


def video_with(**parts: str) -> TransformItem:
    """The video example with XML inserted: `creator` into its creator, `before_language`
    before <language>, `descriptions` replacing its descriptions, `title` as its title."""
    resource = VIDEO
    if creator := parts.get("creator"):
        resource = resource.replace(
            "<familyName>Lynn</familyName>", f"<familyName>Lynn</familyName>{creator}"
        )
    if before := parts.get("before_language"):
        resource = resource.replace("<language>", f"{before}<language>")
    if descriptions := parts.get("descriptions"):
        start, end = resource.index("<descriptions>"), resource.index("</descriptions>")
        resource = resource[:start] + descriptions + resource[end + len("</descriptions>") :]
    if title := parts.get("title"):
        resource = resource.replace("Walking Your Space, Evaluating Your Home", title)
    return TransformItem("oai:x:1", "2024-01-01", [], wrap_metadata(resource))


def test_unreadable_secondary_dates_are_dropped_not_the_record() -> None:
    """F3: the open interval `2019-01-01/..` is left out, not the record; `Summer 2019`, which
    was dropped too, is its year with its words, as in oai_dc."""
    item = video_with(
        before_language='<dates><date dateType="Collected">Summer 2019</date>'
        '<date dateType="Valid">2019-01-01/..</date>'
        '<date dateType="Created">2012/05/01</date></dates>'
    )
    metadata = transformed_metadata(item)
    assert metadata["dates"] == [
        {"date": "2019", "type": {"id": "collected"}, "description": "Summer 2019"},
        {"date": "2012-05-01", "type": {"id": "created"}},
    ]
    assert metadata["publication_date"] == "2013"


@pytest.mark.parametrize("text", ["[1985?]", "ca. 1985", "1985?", "circa 1985"])
def test_an_approximate_issued_date_keeps_its_words(text: str) -> None:
    """`[1985?]` became 1985 with its words dropped; MARC and oai_dc keep them."""
    item = video_with(
        before_language=f'<dates><date dateType="Issued" dateInformation="print">{text}</date>'
        "</dates>"
    )
    metadata = transformed_metadata(item)
    assert metadata["publication_date"] == "1985"
    assert metadata["dates"] == [
        {"date": "1985", "type": {"id": "issued"}, "description": f"{text}; print"}
    ]


def test_an_issued_date_in_words_is_its_year_with_the_words() -> None:
    """Issued `Summer 2019` was dropped (and without publicationYear failed the record); its
    year is the publication date and its words the issued date's description."""
    item = video_with(before_language='<dates><date dateType="Issued">Summer 2019</date></dates>')
    item.xml = item.xml.replace(b"<publicationYear>2013</publicationYear>", b"")
    metadata = transformed_metadata(item)
    assert metadata["publication_date"] == "2019"
    assert metadata["dates"] == [
        {"date": "2019", "type": {"id": "issued"}, "description": "Summer 2019"}
    ]


def test_invalid_issued_date_falls_back_to_the_publication_year() -> None:
    """F3: the fallback to publicationYear now works: `_dates` no longer fails the record."""
    item = video_with(before_language='<dates><date dateType="Issued">2021-13-45</date></dates>')
    metadata = transformed_metadata(item)
    assert metadata["publication_date"] == "2013"
    assert metadata["dates"] == []


def test_malformed_name_identifier_drops_the_identifier_only() -> None:
    """F3: a short ORCID or a bad ROR on a creator is dropped; the creator and the record stay."""
    item = video_with(
        creator='<nameIdentifier nameIdentifierScheme="ORCID">0000-0002-1825-009</nameIdentifier>'
        '<nameIdentifier nameIdentifierScheme="ROR">not-a-ror</nameIdentifier>'
        '<nameIdentifier nameIdentifierScheme="ORCID">https://orcid.org/0000-0002-1825-0097'
        "</nameIdentifier>"
    )
    [creator] = transformed_metadata(item)["creators"]
    assert creator["person_or_org"]["family_name"] == "Lynn"
    assert creator["person_or_org"]["identifiers"] == [
        {"scheme": "orcid", "identifier": "0000-0002-1825-0097"}
    ]


def test_contributor_without_a_name_is_dropped() -> None:
    """F3: an optional contributor with an empty name is left out, not the record."""
    item = video_with(
        before_language='<contributors><contributor contributorType="Editor"><contributorName/>'
        '</contributor><contributor contributorType="Editor">'
        "<contributorName>Roe, Richard</contributorName></contributor></contributors>"
    )
    metadata = transformed_metadata(item)
    assert [c["person_or_org"]["name"] for c in metadata["contributors"]] == ["Roe, Richard"]


def test_alternate_and_related_dois_are_normalised() -> None:
    """F4: every DOI of a DataCite record in its bare lower-case form."""
    item = video_with(
        before_language="<alternateIdentifiers>"
        '<alternateIdentifier alternateIdentifierType="DOI">https://doi.org/10.5281/ZENODO.999'
        "</alternateIdentifier></alternateIdentifiers><relatedIdentifiers>"
        '<relatedIdentifier relatedIdentifierType="DOI" relationType="IsVersionOf">'
        "info:doi/10.5281/ZENODO.998</relatedIdentifier>"
        '<relatedIdentifier relatedIdentifierType="DOI" relationType="Cites">'
        "https://www.doi.org/10.5281/ZENODO.997</relatedIdentifier></relatedIdentifiers>"
    )
    metadata = transformed_metadata(item)
    assert metadata["identifiers"] == [{"identifier": "10.5281/zenodo.999", "scheme": "doi"}]
    assert [r["identifier"] for r in metadata["related_identifiers"]] == [
        "10.5281/zenodo.998",
        "10.5281/zenodo.997",
    ]


def test_br_in_a_description_keeps_the_lines_apart() -> None:
    """F5: kernel-4 allows <br/> in a description; it is a line break, not nothing."""
    item = video_with(
        descriptions='<descriptions><description descriptionType="Abstract">'
        "First paragraph.<br/>Second paragraph.<br/>\n  Third &amp; last</description>"
        "</descriptions>"
    )
    assert transformed_metadata(item)["description"] == (
        "First paragraph.<br>Second paragraph.<br>Third &amp; last"
    )


def test_pretty_printed_title_and_names_are_one_line() -> None:
    """F5: a title the source pretty-printed over lines, and a name with indentation."""
    item = video_with(
        title="A long title that the source\n      pretty-printed over lines",
        before_language='<contributors><contributor contributorType="Editor">'
        "<contributorName>\n   Roe,\n     Richard   </contributorName></contributor>"
        "</contributors>",
    )
    metadata = transformed_metadata(item)
    assert metadata["title"] == "A long title that the source pretty-printed over lines"
    assert metadata["contributors"][0]["person_or_org"]["name"] == "Roe, Richard"


def test_single_escaped_html_is_not_unescaped_again() -> None:
    """F7: DataCite HTML escaped once (as XML needs) is HTML; `&amp;lt;` in it is text."""
    item = video_with(
        descriptions='<descriptions><description descriptionType="Abstract">'
        "&lt;p&gt;Escaped &lt;b&gt;HTML&lt;/b&gt; p &amp;lt; 0.05&lt;/p&gt;"
        '&lt;img src="x" onerror="alert(1)"&gt;</description></descriptions>'
    )
    assert transformed_metadata(item)["description"] == ("<p>Escaped <b>HTML</b> p &lt; 0.05</p>")


def test_rights_uri_that_is_no_web_link_names_the_right() -> None:
    """A rightsURI that is no http(s) URL and has no text (`urn:…`) is the right's title,
    not a link; before, the title was empty and the record failed."""
    item = video_with(
        before_language='<rightsList><rights rightsURI="urn:example:license:internal"/>'
        '<rights rightsURI="www.example.org/terms"/></rightsList>'
    )
    assert transformed_metadata(item)["rights"] == [
        {"title": {"en": "urn:example:license:internal"}},
        {"title": {"en": "www.example.org/terms"}},
    ]


def test_a_license_named_only_in_the_rights_text_is_that_license() -> None:
    """A <rights> with neither rightsIdentifier nor a known rightsURI, only the name."""
    item = video_with(
        before_language="<rightsList><rights>Creative Commons Attribution 4.0 International"
        "</rights></rightsList>"
    )
    assert transformed_metadata(item)["rights"] == [
        {"id": "cc-by-4.0", "title": {"en": "Creative Commons Attribution 4.0 International"}}
    ]


def test_repeated_identifiers_are_kept_once() -> None:
    """An ORCID given twice (bare and as a URL) is one ORCID (the target allows one per
    scheme); an alternateIdentifier that is the record's own DOI is not copied."""
    item = video_with(
        creator='<nameIdentifier nameIdentifierScheme="ORCID">0000-0001-5109-3700'
        '</nameIdentifier><nameIdentifier nameIdentifierScheme="ORCID">'
        "https://orcid.org/0000-0001-5109-3700</nameIdentifier>",
        before_language="<alternateIdentifiers>"
        '<alternateIdentifier alternateIdentifierType="DOI">10.5072/1153992</alternateIdentifier>'
        '<alternateIdentifier alternateIdentifierType="URL">https://example.org/a'
        "</alternateIdentifier>"
        '<alternateIdentifier alternateIdentifierType="URL">https://example.org/a'
        "</alternateIdentifier></alternateIdentifiers>",
    )
    metadata = transformed_metadata(item)
    assert item.data["pids"]["doi"]["identifier"] == "10.5072/1153992"
    assert metadata["creators"][0]["person_or_org"]["identifiers"] == [
        {"scheme": "orcid", "identifier": "0000-0001-5109-3700"}
    ]
    assert metadata["identifiers"] == [{"identifier": "https://example.org/a", "scheme": "url"}]


def test_person_identifiers_of_schemes_the_target_does_not_know_are_left_out() -> None:
    """InvenioRDM knows ORCID, ISNI, GND and ROR for people; a ResearcherID would fail the
    record, so it is dropped (the person stays)."""
    item = video_with(
        creator='<nameIdentifier nameIdentifierScheme="ResearcherID">A-1234-2010'
        '</nameIdentifier><nameIdentifier nameIdentifierScheme="GND">118540238'
        "</nameIdentifier>"
    )
    [creator] = transformed_metadata(item)["creators"]
    assert creator["person_or_org"]["identifiers"] == [{"scheme": "gnd", "identifier": "118540238"}]


def test_creator_names_without_name_type_and_given_name_only() -> None:
    """Without nameType, an organisation's words make `University of California, Berkeley`
    an organisation despite its comma; a givenName alone is the one name, not doubled."""
    item = video_with(
        before_language="<contributors>"
        '<contributor contributorType="HostingInstitution">'
        "<contributorName>University of California, Berkeley</contributorName></contributor>"
        '<contributor contributorType="Other"><contributorName nameType="Personal">Madonna'
        "</contributorName><givenName>Madonna</givenName></contributor></contributors>"
    )
    berkeley, madonna = transformed_metadata(item)["contributors"]
    assert berkeley["person_or_org"] == {
        "type": "organizational",
        "name": "University of California, Berkeley",
        "identifiers": [],
    }
    assert madonna["person_or_org"] == {
        "type": "personal",
        "name": "Madonna",
        "family_name": "Madonna",
        "identifiers": [],
    }


def _polygon(*corners: tuple[float, float]) -> str:
    points = "".join(
        f"<polygonPoint><pointLongitude>{lon}</pointLongitude>"
        f"<pointLatitude>{lat}</pointLatitude></polygonPoint>"
        for lon, lat in corners
    )
    return f"<geoLocationPolygon>{points}</geoLocationPolygon>"


def test_each_geolocation_polygon_is_a_polygon() -> None:
    """Two geoLocationPolygons in one geoLocation are two polygons (before, one ring of
    both); a NaN or out-of-range coordinate drops the location's geometry, not the record."""
    square = ((0, 0), (1, 0), (1, 1), (0, 1), (0, 0))
    other = ((10, 10), (11, 10), (11, 11), (10, 11), (10, 10))
    item = video_with(
        before_language="<geoLocations><geoLocation>"
        + _polygon(*square)
        + _polygon(*other)
        + "</geoLocation><geoLocation><geoLocationPlace>Nowhere</geoLocationPlace>"
        "<geoLocationPoint><pointLongitude>NaN</pointLongitude><pointLatitude>200"
        "</pointLatitude></geoLocationPoint></geoLocation></geoLocations>"
    )
    features = transformed_metadata(item)["locations"]["features"]
    assert [feature.get("geometry") for feature in features] == [
        {"type": "Polygon", "coordinates": [[[float(x), float(y)] for x, y in square]]},
        {"type": "Polygon", "coordinates": [[[float(x), float(y)] for x, y in other]]},
        None,
    ]
    assert features[2] == {"place": "Nowhere"}


def test_malformed_funder_ror_is_dropped_not_the_funder() -> None:
    """A funder ROR id is checked as affiliation RORs are (before, `not-a-ror` was the
    funder's id)."""
    item = video_with(
        before_language="<fundingReferences><fundingReference><funderName>F</funderName>"
        '<funderIdentifier funderIdentifierType="ROR">not-a-ror</funderIdentifier>'
        "</fundingReference></fundingReferences>"
    )
    assert transformed_metadata(item)["funding"] == [{"funder": {"name": "F", "identifiers": []}}]


def test_datacite_text_is_nfc_without_invisible_characters() -> None:
    item = video_with(title="Cafe\u0301\u200b tales")
    assert transformed_metadata(item)["title"] == "Caf\u00e9 tales"


def test_the_journal_a_related_item_is_published_in_is_series_information() -> None:
    """DataCite's relatedItem example (a journal article, `IsPublishedIn` a journal): the
    journal's title, volume, issue, year and pages were dropped, only its ISSN kept. They are
    the citation a series-information description gives, as OpenAIRE's and MARC's are, also
    for an item with no identifier at all."""
    name = "datacite-example-relateditem1-v4.xml"
    metadata = transformed_metadata(datacite_item(name))
    assert metadata["additional_descriptions"] == [
        {
            "description": "Journal of Metadata Examples, vol. 3, no. 4, 2022, pp. 20–35",
            "type": {"id": "series-information"},
        }
    ]
    # its ISSN, the placeholder `1234-5678`, has a wrong check digit: no identifier
    assert metadata.get("related_identifiers", []) == []
    text = (SAMPLES / name).read_text(encoding="utf-8")
    start = text.index("<relatedItemIdentifier")
    end = text.index("</relatedItemIdentifier>") + len("</relatedItemIdentifier>")
    xml = wrap_metadata(text[:start] + text[end:])
    bare = transformed_metadata(
        TransformItem(identifier="oai:example.org:1", datestamp="2024-01-01", set_specs=[], xml=xml)
    )
    assert bare["additional_descriptions"] == metadata["additional_descriptions"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("10.1234/JOURNAL", {"identifier": "10.1234/journal", "scheme": "doi"}),
        ("https://doi.org/10.1234/journal", {"identifier": "10.1234/journal", "scheme": "doi"}),
        ("https://journal.example/", {"identifier": "https://journal.example/", "scheme": "url"}),
        ("1234-5678", None),  # no type, and no form that shows one: still dropped
    ],
)
def test_a_related_item_identifier_without_a_type_is_read_by_its_form(
    value: str, expected: dict[str, str] | None
) -> None:
    """DataCite's relatedItem example with its relatedItemIdentifier given no
    relatedItemIdentifierType: the identifier was dropped even when a DOI (`10.1234/…`, a
    doi.org URL). A value whose form shows its scheme (a DOI, a URL) is read as one, as an
    untyped dc:relation is; any other is still dropped."""
    text = (SAMPLES / "datacite-example-relateditem1-v4.xml").read_text(encoding="utf-8")
    old = '<relatedItemIdentifier relatedItemIdentifierType="ISSN">1234-5678'
    assert old in text
    xml = wrap_metadata(text.replace(old, f"<relatedItemIdentifier>{value}"))
    item = TransformItem(
        identifier="oai:example.org:1", datestamp="2024-01-01", set_specs=[], xml=xml
    )
    related = transformed_metadata(item)["related_identifiers"]
    relation = {"relation_type": {"id": "ispublishedin"}}
    # (its relatedIdentifier, the placeholder ISSN `1234-5678`, has a wrong check digit: none)
    journal = {**relation, "resource_type": {"id": "publication-journal"}}
    assert related == ([{**expected, **journal}] if expected else [])


def test_a_date_of_a_type_the_target_lacks_names_its_type() -> None:
    """DataCite's full example: kernel-4.6's Coverage date (the period the data covers) was an
    `other` date that no longer said so; an Other date keeps its dateInformation as it was."""
    dates = transformed_metadata(datacite_item("datacite-example-full-v4.xml"))["dates"]
    assert {
        "date": "2024-01-01/2024-12-31",
        "type": {"id": "other"},
        "description": "Coverage",
    } in dates
    assert {
        "date": "2024-01-01",
        "type": {"id": "other"},
        "description": "ExampleDateInformation",
    } in dates


def _funding_example_with(old: str, new: str) -> TransformItem:
    """DataCite's fundingReference example (Zenodo's, two EC grants) with `old` replaced."""
    text = (SAMPLES / "datacite-example-fundingReference-v4.xml").read_text(encoding="utf-8")
    assert old in text
    xml = wrap_metadata(text.replace(old, new, 1))
    return TransformItem(
        identifier="oai:example.org:1", datestamp="2024-01-01", set_specs=[], xml=xml
    )


def test_a_crossref_funder_id_given_as_its_number_is_the_funder_doi() -> None:
    """Producers write a Crossref Funder ID as its number alone (`501100001659`); it was kept
    as an `other` identifier nothing can resolve. It is the 10.13039 DOI it stands for."""
    item = _funding_example_with("https://doi.org/10.13039/501100000780", "501100000780")
    funder = transformed_metadata(item)["funding"][0]["funder"]
    assert funder["identifiers"] == [{"scheme": "doi", "identifier": "10.13039/501100000780"}]


def test_a_funding_reference_without_a_funder_name_leaves_the_record_whole() -> None:
    """An empty funderName (the schema requires one; producers leave it empty) failed the whole
    record's validation (a funder needs an id or a name); that reference alone is left out."""
    item = _funding_example_with(
        "<funderName>European Commission</funderName>", "<funderName> </funderName>"
    )
    funding = transformed_metadata(item)["funding"]
    assert [entry["award"]["number"] for entry in funding] == ["284382"]


def test_et_al_as_a_creator_or_contributor_names_nobody() -> None:
    """A creatorName or contributorName `et al.`, `and others` or `u.a.` (German `und andere`)
    was a person or organisation of that name, and `Roe, Richard et al.` the given name
    `Richard et al.`; dc and MARC already dropped them."""
    item = video_with(
        creator="<creatorName>et al.</creatorName>",
        before_language="<contributors>"
        '<contributor contributorType="Other"><contributorName>and others</contributorName>'
        '</contributor><contributor contributorType="Other"><contributorName>[u.a.]'
        '</contributorName></contributor><contributor contributorType="Editor">'
        "<contributorName>Roe, Richard et al.</contributorName></contributor></contributors>",
    )
    metadata = transformed_metadata(item)
    assert [c["person_or_org"]["name"] for c in metadata["creators"]] == ["Lynn, Briscoe"]
    assert [c["person_or_org"] for c in metadata["contributors"]] == [
        {
            "type": "personal",
            "name": "Roe, Richard",
            "given_name": "Richard",
            "family_name": "Roe",
            "identifiers": [],
        }
    ]


def test_an_unreadable_publication_date_says_why_each_candidate_is_none() -> None:
    """The invalid_date error named the Issued date and publicationYear it could not read
    but dropped why: `2021-13-45` (no month 13) read as a text of an unknown form, and the
    placeholder year `9999` as well."""
    item = video_with(before_language='<dates><date dateType="Issued">2021-13-45</date></dates>')
    item.xml = item.xml.replace(b">2013</publicationYear>", b">9999</publicationYear>")
    transform_one(item)
    assert item.error is not None and item.error.type == "invalid_date"
    assert "'2021-13-45' has no month 13; '9999' is a placeholder" in item.error.message


@pytest.mark.parametrize(
    "name_identifier",
    [
        # the registry named by its URL in nameIdentifierScheme, or only by schemeURI
        '<nameIdentifier nameIdentifierScheme="https://orcid.org">'
        "https://orcid.org/0000-0002-1825-0097</nameIdentifier>",
        '<nameIdentifier schemeURI="https://orcid.org/">0000-0002-1825-0097</nameIdentifier>',
        '<nameIdentifier schemeURI="https://orcid.org/">'
        "https://orcid.org/0000-0002-1825-0097</nameIdentifier>",
    ],
)
def test_an_orcid_its_scheme_names_by_url_is_kept(name_identifier: str) -> None:
    """An ORCID whose registry only schemeURI (or a URL as nameIdentifierScheme) names was
    dropped; the person now has it."""
    creator = transformed_metadata(video_with(creator=name_identifier))["creators"][0]
    assert creator["person_or_org"]["identifiers"] == [
        {"identifier": "0000-0002-1825-0097", "scheme": "orcid"}
    ]


def test_a_rights_identifier_that_is_no_spdx_id_is_no_licence_id() -> None:
    """`LicenseRef-Proprietary` (SPDX's form for a licence of the source's own) became the
    licence id `licenseref-proprietary`, and an SPDX URL given as the identifier the id
    `https://spdx.org/licenses/mit.html`: no licence the target has."""
    item = video_with(
        before_language="<rightsList>"
        '<rights rightsIdentifierScheme="SPDX" rightsIdentifier="LicenseRef-Proprietary">'
        "All rights reserved</rights>"
        '<rights rightsIdentifier="https://spdx.org/licenses/MIT.html"/></rightsList>'
    )
    assert transformed_metadata(item)["rights"] == [
        {"title": {"en": "All rights reserved"}},
        {"id": "mit"},
    ]


def test_a_rights_uri_naming_another_licence_than_the_identifier_is_noted() -> None:
    """rightsIdentifier `CC-BY-4.0` with a rightsURI of CC BY-NC 4.0 was read as CC BY 4.0
    silently, the BY-NC URL its link; the id is kept, and the right's description says which
    licence the URI names (its link is none: it opens another licence)."""
    item = video_with(
        before_language="<rightsList>"
        '<rights rightsIdentifierScheme="SPDX" rightsIdentifier="CC-BY-4.0" '
        'rightsURI="https://creativecommons.org/licenses/by-nc/4.0/legalcode">'
        "Creative Commons Attribution 4.0</rights>"
        '<rights rightsIdentifier="MIT" rightsURI="https://spdx.org/licenses/MIT.html"/>'
        "</rightsList>"
    )
    assert transformed_metadata(item)["rights"] == [
        {
            "id": "cc-by-4.0",
            "title": {"en": "Creative Commons Attribution 4.0"},
            "description": {
                "en": "The source's rightsURI "
                "'https://creativecommons.org/licenses/by-nc/4.0/legalcode' names another "
                "licence (cc-by-nc-4.0) than its rightsIdentifier 'CC-BY-4.0'"
            },
        },
        {"id": "mit", "link": "https://spdx.org/licenses/MIT.html"},
    ]


@pytest.mark.parametrize(
    ("rights", "expected"),
    [
        # an access right, with its words: free text, no licence id
        ('<rights rightsIdentifier="restricted">Restricted access</rights>',
         [{"title": {"en": "Restricted access"}}]),
        # an eu-repo access term as the identifier: skipped, as in the URI or the text
        ('<rights rightsIdentifier="info:eu-repo/semantics/openAccess"/>', []),
        # a scheme that is not SPDX's: the licence is read from the URI
        ('<rights rightsIdentifierScheme="local" rightsIdentifier="open" '
         'rightsURI="https://creativecommons.org/licenses/by/4.0/"/>',
         [{"id": "cc-by-4.0", "link": "https://creativecommons.org/licenses/by/4.0/"}]),
        # a licence id without a scheme is still one
        ('<rights rightsIdentifier="cc-by-sa-4.0"/>', [{"id": "cc-by-sa-4.0"}]),
        ('<rights rightsIdentifier="Apache-2.0"/>', [{"id": "apache-2.0"}]),
    ],
)  # fmt: skip
def test_a_rights_identifier_that_is_no_licence_is_no_licence_id(
    rights: str, expected: list[dict]
) -> None:
    """A rightsIdentifier that is an access right (`restricted`, eu-repo's `openAccess`), not
    an SPDX licence id, became the licence ids `restricted` and
    `info:eu-repo/semantics/openaccess`; the target's records have no access right, so it is
    no licence: its words stay free text, and a rightsURI naming a licence gives the id."""
    item = video_with(before_language=f"<rightsList>{rights}</rightsList>")
    assert transformed_metadata(item)["rights"] == expected


@pytest.mark.parametrize(
    "affiliation",
    [
        # DataCite's full example: the ROR URL as the attribute and as the text
        '<affiliation affiliationIdentifier="https://ror.org/03yrm5c26" '
        'affiliationIdentifierScheme="ROR"> https://ror.org/03yrm5c26</affiliation>',
        # the ROR URL only as the text
        "<affiliation>https://ror.org/03yrm5c26</affiliation>",
    ],
)
def test_an_affiliation_written_as_its_ror_url_has_no_url_as_its_name(affiliation: str) -> None:
    """An affiliation whose text is its ROR URL was named `https://ror.org/03yrm5c26` (and,
    with no affiliationIdentifier, had no id): the URL is its id, and it has no name."""
    creator = transformed_metadata(video_with(creator=affiliation))["creators"][0]
    assert creator["affiliations"] == [{"id": "03yrm5c26"}]


def test_a_size_or_format_with_a_comment_or_element_inside_is_one_value() -> None:
    """Sizes and formats were read as their text nodes (XPath `text()`), each its own value:
    `<size>1 <!-- c -->MB</size>` gave the sizes `1` and `MB`, and `<format>text/<i>plain</i>
    </format>` the format `text/`. Each element is one value, all its text."""
    text = (SAMPLES / "datacite-example-full-v4.xml").read_text(encoding="utf-8")
    text = text.replace("<size>1 MB</size>", "<size>1 <!-- c -->MB</size>")
    text = text.replace("<format>text/plain</format>", "<format>text/<i>plain</i></format>")
    item = TransformItem("oai:example.org:1", "2024-01-01", [], wrap_metadata(text))
    metadata = transformed_metadata(item)
    assert metadata["sizes"] == ["1 MB", "90 pages"]
    assert metadata["formats"] == ["application/xml", "text/plain"]


def _personal_contributors(*contents: str) -> list[dict[str, Any]]:
    """The people the video example's contributors are when each (a Researcher) holds
    `<contributorName nameType="Personal">` followed by one of `contents`."""
    contributors = "".join(
        '<contributor contributorType="Researcher"><contributorName nameType="Personal">'
        f"{content}</contributor>"
        for content in contents
    )
    item = video_with(before_language=f"<contributors>{contributors}</contributors>")
    return [c["person_or_org"] for c in transformed_metadata(item)["contributors"]]


@pytest.mark.parametrize(
    ("name", "given", "family"),
    [
        ("J. Smith", "John", "Smith"),  # the given name as its initial: the rest is the family
        ("J R Smith", "John Ronald", "Smith"),
        ("J. K. Smith", "John", "J. K. Smith"),  # `K.` of no given part: not split
        ("Jean-Paul Sartre", "John", "Jean-Paul Sartre"),  # no initial of John: not split
    ],
)
def test_a_name_starting_with_the_initials_of_its_given_name(
    name: str, given: str, family: str
) -> None:
    """creatorName `J. Smith` with givenName `John` (no familyName) kept the whole name as
    the family name (`J. Smith, John`). Its first words are the given name's initials, so
    the rest is the family name; when that is not sure, the whole name stays the family."""
    item = video_with(
        before_language="<contributors>"
        f'<contributor contributorType="Other"><contributorName nameType="Personal">{name}'
        f"</contributorName><givenName>{given}</givenName></contributor></contributors>"
    )
    [person] = transformed_metadata(item)["contributors"]
    assert (person["person_or_org"]["family_name"], person["person_or_org"]["given_name"]) == (
        family,
        given,
    )


@pytest.mark.parametrize(
    ("name", "given", "family"),
    [
        ("Smith John", "John", "Smith"),  # family first, the given name last: the rest
        ("Smith John Ronald", "John Ronald", "Smith"),
        ("van der Berg Anna", "Anna", "van der Berg"),
        ("John Smith", "John", "Smith"),  # given first, as before
        ("Smith Johnson", "John", "Smith Johnson"),  # `John` is no whole word of it
        ("Smith J.", "John", "Smith J."),  # an initial last: unclear, the whole name stays
        ("Smith JOHN", "John", "Smith JOHN"),  # another spelling: unclear, as the given-first
    ],
)
def test_a_family_first_name_ending_with_its_given_name(name: str, given: str, family: str) -> None:
    """creatorName `Smith John` with givenName `John` (no familyName, no comma) kept the whole
    name as the family name (`Smith John, John`), where `John Smith` gave `Smith`. A name
    that ends with the given name's whole words has the rest before them as the family name;
    one that does not stays whole, as before."""
    resource = re.sub(
        r"<creator>.*?</creator>",
        f'<creator><creatorName nameType="Personal">{name}</creatorName>'
        f"<givenName>{given}</givenName></creator>",
        VIDEO,
        count=1,
        flags=re.S,
    )
    item = TransformItem("oai:x:1", "2024-01-01", [], wrap_metadata(resource))
    [person] = transformed_metadata(item)["creators"]
    assert person["person_or_org"]["family_name"] == family
    assert person["person_or_org"]["given_name"] == given
    assert person["person_or_org"]["name"] == f"{family}, {given}"


def test_a_comment_inside_a_geolocation_point_or_box_keeps_the_location() -> None:
    """A kernel-3 text point or box was read only when it had no child, and a comment is one:
    `<geoLocationPoint>31.2 <!-- c --> 67.1</geoLocationPoint>` was taken for kernel-4's
    child form, found no pointLongitude and silently dropped the location. Its text is read
    whole; kernel-4's child form, with a comment inside too, is still read."""
    item = video_with(
        before_language="<geoLocations><geoLocation>"
        "<geoLocationPoint>31.2 <!-- c --> 67.1</geoLocationPoint>"
        "<geoLocationBox>41.0 <!-- c -->-71.0 42.5 -68.0</geoLocationBox>"
        "</geoLocation><geoLocation><geoLocationPoint><!-- c --><pointLongitude>10.5"
        "</pointLongitude><pointLatitude>2<!-- c -->0.25</pointLatitude></geoLocationPoint>"
        "</geoLocation></geoLocations>"
    )
    features = transformed_metadata(item)["locations"]["features"]
    assert [feature["geometry"] for feature in features] == [
        {"type": "Point", "coordinates": [67.1, 31.2]},
        {"type": "Polygon", "coordinates": [
            [[-71.0, 41.0], [-68.0, 41.0], [-68.0, 42.5], [-71.0, 42.5], [-71.0, 41.0]]
        ]},
        {"type": "Point", "coordinates": [10.5, 20.25]},
    ]  # fmt: skip


@pytest.mark.parametrize("name_type", ['nameType="Personal"', ""])
def test_a_family_first_name_without_a_comma_is_split_by_its_given_parts(name_type: str) -> None:
    """`<creatorName>Smith John</creatorName>` (family first, no comma) with givenName `John`
    and familyName `Smith`: the parts DataCite gives are the names, not a split of the whole
    (which would make `John` the family name, or `Smith John` all of it)."""
    creator = (
        f"<creator><creatorName {name_type}>Smith John</creatorName>"
        "<givenName>John</givenName><familyName>Smith</familyName></creator>"
    )
    start, end = VIDEO.index("<creator>"), VIDEO.index("</creators>")
    resource = VIDEO[:start] + creator + VIDEO[end:]
    item = TransformItem("oai:x:1", "2024-01-01", [], wrap_metadata(resource))
    [smith] = transformed_metadata(item)["creators"]
    assert smith["person_or_org"] == {
        "type": "personal",
        "name": "Smith, John",
        "given_name": "John",
        "family_name": "Smith",
        "identifiers": [],
    }


@pytest.mark.parametrize("date_type", ["", " ", "\t"])
def test_a_date_with_a_blank_date_type_is_an_other_date(date_type: str) -> None:
    """`<date dateType=" ">` named its blank type as the date's description: an empty one,
    which the target refuses, so one optional date failed the whole record (validation).
    It is an `other` date with no type to name."""
    item = _full_example_with(('dateType="Coverage"', f'dateType="{date_type}"'))
    dates = transformed_metadata(item)["dates"]
    assert {"date": "2024-01-01/2024-12-31", "type": {"id": "other"}} in dates


def _full_example_with(*replacements: tuple[str, str]) -> TransformItem:
    """DataCite's full example with each (old, new) replaced once."""
    text = (SAMPLES / "datacite-example-full-v4.xml").read_text(encoding="utf-8")
    for old, new in replacements:
        assert old in text
        text = text.replace(old, new, 1)
    xml = wrap_metadata(text)
    return TransformItem(
        identifier="oai:example.org:1", datestamp="2024-01-01", set_specs=[], xml=xml
    )


def test_a_relation_or_role_the_target_lacks_is_its_most_general_one() -> None:
    """A relationType or contributorType outside DataCite's lists (`IsRelatedTo`, `Author`,
    as repositories write them unvalidated) was kept as the id `isrelatedto` or `author`,
    which no vocabulary of the target has: InvenioRDM refuses the whole record. They are
    `references` (the weakest claim) and `other`; DataCite's own values, kernel-4.6's
    `HasTranslation` and `Translator` among them, stay as they are."""
    item = _full_example_with(
        ('relationType="Cites"', 'relationType="IsRelatedTo"'),
        ('contributorType="DataCollector"', 'contributorType="Author"'),
        ('relationType="IsSupplementTo"', 'relationType="HasTranslation"'),
        ('contributorType="DataCurator"', 'contributorType="Translator"'),
    )
    metadata = transformed_metadata(item)
    relations = {r["identifier"]: r["relation_type"]["id"] for r in metadata["related_identifiers"]}
    assert relations["arXiv:0706.0001"] == "references"
    assert relations["2018AGUFM.A24K..07S"] == "hastranslation"
    roles = [contributor["role"]["id"] for contributor in metadata["contributors"]]
    assert roles[:3] == ["contactperson", "other", "translator"]


def test_an_affiliation_repeated_for_one_creator_is_listed_once() -> None:
    """A creator given the same affiliation twice (the same ROR and name) had it twice in the
    target; it is listed once, the others kept in their order."""
    brown = (
        '<affiliation affiliationIdentifier="https://ror.org/05gq02987" '
        'affiliationIdentifierScheme="ROR">Brown University</affiliation>'
    )
    other = "<affiliation>Wesleyan University</affiliation>"
    item = video_with(creator=brown + other + brown)
    [creator] = transformed_metadata(item)["creators"]
    assert creator["affiliations"] == [
        {"id": "05gq02987", "name": "Brown University"},
        {"name": "Wesleyan University"},
    ]


def test_an_affiliation_repeated_by_its_ror_under_another_name_is_listed_once() -> None:
    """A creator given one organisation twice by its ROR, under two names (`Brown University`
    and `Brown Univ.`, or in two languages), had it twice in the target: the names differed,
    and one ROR is one organisation. It is listed once, under the first name; an affiliation
    without a ROR is still compared by its name."""
    brown = (
        '<affiliation affiliationIdentifier="https://ror.org/05gq02987" '
        'affiliationIdentifierScheme="ROR">{}</affiliation>'
    )
    other = "<affiliation>Wesleyan University</affiliation>"
    item = video_with(
        creator=brown.format("Brown University") + other + brown.format("Brown Univ.") + other
    )
    [creator] = transformed_metadata(item)["creators"]
    assert creator["affiliations"] == [
        {"id": "05gq02987", "name": "Brown University"},
        {"name": "Wesleyan University"},
    ]


@pytest.mark.parametrize(
    "written",
    [
        # the name alone first, as a person wrote it, then as a tool enriched it with its ROR
        ["<affiliation>Brown University</affiliation>", "{brown}"],
        ["{brown}", "<affiliation>Brown University</affiliation>"],
        # the name in other case and spacing is the same organisation's
        ["<affiliation> brown  UNIVERSITY </affiliation>", "{brown}"],
        ["{brown}", "<affiliation>BROWN university</affiliation>", "{brown}"],
    ],
)
def test_an_affiliation_by_name_beside_the_same_with_its_ror_is_one(written: list[str]) -> None:
    """A creator with `<affiliation>Brown University</affiliation>` and the same affiliation
    with its ROR had two affiliations, one without the id; it has one, with its ROR, where the
    first of them stood. Other affiliations keep their order, and a name-only one is compared
    case- and whitespace-insensitively too."""
    brown = (
        '<affiliation affiliationIdentifier="https://ror.org/05gq02987" '
        'affiliationIdentifierScheme="ROR">Brown University</affiliation>'
    )
    wesleyan = "<affiliation>Wesleyan University</affiliation>"
    affiliations = [text.format(brown=brown) for text in written]
    item = video_with(creator=wesleyan + "".join(affiliations) + wesleyan.upper())
    [creator] = transformed_metadata(item)["creators"]
    assert creator["affiliations"] == [
        {"name": "Wesleyan University"},
        {"id": "05gq02987", "name": "Brown University"},
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0028-0836", {"identifier": "0028-0836", "scheme": "issn"}),
        ("ISSN 0028-0836", {"identifier": "0028-0836", "scheme": "issn"}),
        ("978-3-16-148410-0", {"identifier": "978-3-16-148410-0", "scheme": "isbn"}),
        ("ISBN 0-306-40615-2", {"identifier": "0-306-40615-2", "scheme": "isbn"}),
        # the form of one, with a wrong check digit: nothing says it is one
        ("0028-0837", None),
        ("978-3-16-148410-1", None),
        ("0306406152", None),  # ten bare digits: as likely a local number
        # as a URN: checked as a dc:identifier's `urn:isbn:` is (it was a `urn` unchecked)
        ("urn:isbn:9780306406157", {"identifier": "9780306406157", "scheme": "isbn"}),
        ("urn:isbn:9780306406158", None),
        ("urn:issn:0028-0836", {"identifier": "0028-0836", "scheme": "issn"}),
        ("urn:nbn:de:101:1-2020", {"identifier": "urn:nbn:de:101:1-2020", "scheme": "urn"}),
    ],
)
def test_a_related_identifier_without_a_type_that_is_an_issn_or_isbn_is_one(
    value: str, expected: dict[str, str] | None
) -> None:
    """A relatedIdentifier (or relatedItemIdentifier) with no type that is an ISSN or an ISBN
    by its form and check digit (`0028-0836`, `978-3-16-148410-0`) was dropped, as any value
    but a DOI, URL, URN or `info:` URI was. It is read as one, as a dc:identifier is; with a
    wrong check digit it is still none."""
    assert _cited_by("", value) == ([expected] if expected else [])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("urn:isbn:9780306406157", {"identifier": "9780306406157", "scheme": "isbn"}),
        ("URN:ISBN:0-306-40615-2", {"identifier": "0-306-40615-2", "scheme": "isbn"}),
        ("urn:isbn:9780306406158", None),  # a wrong check digit: no identifier
        ("urn:isbn:", None),
        ("urn:issn:0028-0836", {"identifier": "0028-0836", "scheme": "issn"}),
        ("urn:nbn:de:101:1-2020", {"identifier": "urn:nbn:de:101:1-2020", "scheme": "urn"}),
    ],
)
def test_a_related_identifier_typed_urn_that_is_an_isbn_urn_is_its_isbn(
    value: str, expected: dict[str, str] | None
) -> None:
    """A relatedIdentifier of type URN `urn:isbn:9780306406157` stayed a `urn`, unchecked,
    where the same value with no type is the ISBN whose check digit is right, and none with a
    wrong one. The type says what its form does: it is read as the untyped one is."""
    assert _cited_by('relatedIdentifierType="URN" ', value) == ([expected] if expected else [])


@pytest.mark.parametrize(
    ("kind", "value", "expected"),
    [
        ("ISBN", "978-0-306-40615-7", {"identifier": "978-0-306-40615-7", "scheme": "isbn"}),
        ("ISBN", "0306406152", {"identifier": "0306406152", "scheme": "isbn"}),  # typed: labelled
        ("ISBN", "978-0-306-40615-8", None),  # a wrong check digit: no identifier
        ("ISBN", "937-0-4523-12357-6", None),  # the complicated example's: no ISBN at all
        ("ISSN", "0028-0836", {"identifier": "0028-0836", "scheme": "issn"}),
        ("ISSN", "00280836", {"identifier": "0028-0836", "scheme": "issn"}),
        ("ISSN", "1234-5678", None),  # the examples' placeholder: a wrong check digit
    ],
)
def test_a_related_identifier_typed_isbn_or_issn_is_checked_as_an_untyped_one(
    kind: str, value: str, expected: dict[str, str] | None
) -> None:
    """Typed ISBN or ISSN, a number with a wrong check digit was kept as one (it named another
    book or journal, or none, and a target that checks the scheme, as InvenioRDM does, refused
    the record), where an untyped one or `urn:isbn:` is checked. The type is its label."""
    attributes = f'relatedIdentifierType="{kind}" '
    assert _cited_by(attributes, value) == ([expected] if expected else [])


def _cited_by(attributes: str, value: str) -> list[dict[str, str]]:
    """The identifiers and schemes of the full example's `IsCitedBy` related identifiers, its
    ARK replaced by a relatedIdentifier with `attributes` (its type) and `value`."""
    old = (
        '<relatedIdentifier relatedIdentifierType="ARK" relationType="IsCitedBy" '
        'resourceTypeGeneral="Audiovisual">ark:/13030/tqb3kh97gh8w'
    )
    new = f'<relatedIdentifier {attributes}relationType="IsCitedBy" resourceTypeGeneral="Book">'
    related = transformed_metadata(_full_example_with((old, new + value)))["related_identifiers"]
    return [
        {k: v for k, v in r.items() if k in ("identifier", "scheme")}
        for r in related
        if r["relation_type"]["id"] == "iscitedby"
    ]


@pytest.mark.parametrize(
    ("name", "given", "family"),
    [
        ("Smith, John", "John", "Smith"),
        ("John Smith", "John", "Smith"),
        ("Smith John", "John", "Smith"),
        ("John Ronald Smith", "John Ronald", "Smith"),
        ("van der Berg, Jan", "Jan", "van der Berg"),
        # the familyName is not where the name has it: nothing says which words are given
        ("Smith-Jones, John", None, "Smith"),
        ("Jo Smithson", None, "Smith"),
    ],
)
def test_a_familyname_alone_leaves_the_rest_of_the_name_as_the_given_name(
    name: str, given: str | None, family: str
) -> None:
    """A personal creatorName with a familyName and no givenName (`Smith, John` and `Smith`)
    lost the given name: the person was `Smith`. The source says which words are the family
    name, so the rest of the name (after its comma, or beside the family name) is the given
    name, as a givenName alone leaves the rest as the family name."""
    people = _personal_contributors(f"{name}</contributorName><familyName>{family}</familyName>")
    assert people == [personal(family, given)]


def test_a_personal_name_without_a_comma_or_parts_is_the_family_name() -> None:
    """`Josiah Carberry` with nameType Personal and no givenName/familyName: the target needs a
    family name (the given name is optional) and nothing says which words are which (`Zhang
    Wei` is family first; DataCite and OpenAIRE ask for `Family, Given` and, in doubt, the
    name as it appears), so the whole name stays the family name, not a guess."""
    people = _personal_contributors("Josiah Carberry</contributorName>")
    assert people == [personal("Josiah Carberry")]


def test_a_name_of_punctuation_names_nobody_and_one_without_its_family_part_is_one_name() -> None:
    """Found by fuzzing: a contributorName `,` (or `, ,`) was a person with no family name,
    and `, John` too: the target refused the record. The first names nobody (the contributor
    is left out, as one without a name is); `, John` is the one name `John`."""
    people = _personal_contributors(",</contributorName>", ", John</contributorName>")
    assert people == [personal("John")]


def test_a_name_of_digits_only_names_nobody() -> None:
    """A personal contributorName `12345` or `2019-01` (no letter: a number, a date) was a
    person so named; it names nobody and is left out, as `,` is."""
    people = _personal_contributors(
        "12345</contributorName>", "2019-01</contributorName>", "Doe, Jane</contributorName>"
    )
    assert people == [personal("Doe", "Jane")]


def test_a_family_name_of_digits_only_names_nobody() -> None:
    """A familyName of digits and punctuation only (`12345`, `0000-0002`: a number in the
    family name's field) was the person's family name, beside a contributorName of digits
    too and beside `Doe, Jane`. It names nobody, as such a contributorName does: the first is
    left out, the second is the person its contributorName is."""
    people = _personal_contributors(
        "12345</contributorName><familyName>12345</familyName>",
        "Doe, Jane</contributorName><familyName>0000-0002</familyName>",
    )
    assert people == [personal("Doe", "Jane")]


def test_a_given_name_of_digits_only_names_nobody() -> None:
    """A givenName of digits and punctuation only (`12345`, `0000-0002`: a number in the given
    name's field) was the person's given name (`Doe, 12345`). It names nobody, as such a
    familyName does: the person is the one their other names are, the rest of `Doe, Jane`
    beside its familyName the given name, `Jane Doe` without one wholly the family name."""
    people = _personal_contributors(
        "Doe, Jane</contributorName><givenName>12345</givenName><familyName>Doe</familyName>",
        "Doe</contributorName><givenName>0000-0002</givenName><familyName>Doe</familyName>",
        "Jane Doe</contributorName><givenName>1</givenName>",
    )
    assert people == [personal("Doe", "Jane"), personal("Doe"), personal("Jane Doe")]


def test_a_record_whose_only_creator_has_names_of_digits_has_no_creator() -> None:
    """creatorName and familyName `12345`: its error says the creator is missing."""
    resource = (
        VIDEO.replace('"Personal">Lynn, Briscoe</creatorName>', '"Personal">12345</creatorName>')
        .replace("<givenName>Briscoe</givenName>", "")
        .replace(">Lynn</familyName>", ">12345</familyName>")
    )
    item = transform_one(TransformItem("oai:x:1", "2024-01-01", [], wrap_metadata(resource)))
    assert (item.error.type, item.error.location) == ("missing_field", "metadata.creators")


@pytest.mark.parametrize("name", [",", ", ,", " ; ", "12345", "2019-01"])
def test_a_record_whose_only_creator_is_punctuation_has_no_creator(name: str) -> None:
    """Its error says the creator is missing (it was a validation error about a family name)."""
    resource = re.sub(
        r'<creatorName nameType="Personal">Lynn, Briscoe</creatorName>.*?</familyName>',
        f'<creatorName nameType="Personal">{name}</creatorName>',
        VIDEO,
        flags=re.S,
    )
    assert resource != VIDEO
    item = transform_one(TransformItem("oai:x:1", "2024-01-01", [], wrap_metadata(resource)))
    assert (item.error.type, item.error.location) == ("missing_field", "metadata.creators")


def test_windows_1252_punctuation_read_as_latin_1_is_read_as_meant() -> None:
    """U+0092 and U+0096 (as characters or references) in a title and an abstract: the text
    a source stored from a Windows form, read as `’` and `–`."""
    xml = (SAMPLES / "datacite-example-dataset-v4.xml").read_text()
    xml = xml.replace("Data, 2010-2020,", "Data&#150;2010\x962020\x92s,").replace(
        "greatest ‒ and", "greatest \x96 and"
    )
    item = TransformItem("oai:x:1", "2024-01-01", [], wrap_metadata(xml))
    metadata = transformed_metadata(item)
    assert metadata["title"] == "External Environmental Data–2010–2020’s, National Gallery"
    assert "one of the greatest – and most visited" in metadata["description"]
