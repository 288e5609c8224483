"""Field-by-field: Zenodo's oai_dc records as RDM records."""

from __future__ import annotations

import pytest

from oai_pipeline.transform.base import TransformItem

from .records import (
    page_items,
    personal,
    transform,
    transform_one,
    transformed_metadata,
    wrap_metadata,
)

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
    assert metadata["identifiers"] == [{"identifier": "oai:zenodo.org:10357859", "scheme": "other"}]
    assert {
        "identifier": "10.5281/zenodo.596581",
        "scheme": "doi",
        "relation_type": {"id": "references"},  # InvenioRDM has no untyped relation
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
    # a one-line value: the run of spaces is layout (F5)
    assert metadata["subjects"] == [{"subject": "Flexibility services"}, {"subject": "DSO"}]
    # &amp;nbsp; in the feed: one unescape gives the character (which the sanitised HTML
    # writes as &nbsp;), and the & in a URL is one & (written &amp; in an HTML attribute)
    assert "&nbsp;" in metadata["description"]
    assert "&amp;amp;" not in metadata["description"]
    assert "&amp;data=04" in metadata["description"]


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
    assert metadata["resource_type"] == {"id": "publication-dissertation"}
    assert metadata["publication_date"] == "2019"  # the earliest: a deposit comes after it
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


def test_dspace_publication_date_is_the_issued_date() -> None:
    """F2: DSpace lists dc.date.accessioned and .available before dc.date.issued."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator>"
        "<dc:date>2015-03-02T10:11:12Z</dc:date><dc:date>2015-03-02T10:11:12Z</dc:date>"
        "<dc:date>not a date</dc:date><dc:date>1998</dc:date>"
    )
    assert transformed_metadata(item)["publication_date"] == "1998"
    same_year = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator>"
        "<dc:date>2015-03-02T10:11:12Z</dc:date><dc:date>2015-03</dc:date>"
    )
    assert transformed_metadata(same_year)["publication_date"] == "2015-03"


@pytest.mark.parametrize(
    ("date", "expected"),
    [
        ("2020/05/01", "2020-05-01"),
        ("May 2020", "2020-05"),
        ("1 May 2020", "2020-05-01"),
        ("May 1, 2020", "2020-05-01"),
        ("2019-2020", "2019/2020"),
        ("12.05.2020", "2020-05-12"),  # OPUS and other German repositories: day first
        ("12. Mai 2020", "2020-05-12"),
    ],
)
def test_dc_dates_in_common_forms(date: str, expected: str) -> None:
    """F8: these forms no longer reject the record."""
    item = dc_item(
        f"<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>{date}</dc:date>"
    )
    assert transformed_metadata(item)["publication_date"] == expected


@pytest.mark.parametrize(
    ("dates", "expected"),
    [
        (["Spring 2020"], "2020"),
        (["WS 2019/20"], "2019"),  # a German winter semester
        (["Published 2004", "2020-03-01T10:00:00Z"], "2004"),  # before a deposit timestamp
        (["Spring 2020", "2019-10"], "2019-10"),  # a date is preferred to a year in text
        (["n.d."], "2021-06-30"),  # "no date": the day of the OAI datestamp
        (["[s.a.]", "o.J."], "2021-06-30"),
        (["0000"], "2021-06-30"),  # a placeholder year is no date either
        (["9999", "2019"], "2019"),
    ],
)
def test_dc_date_that_is_no_date_keeps_the_record(dates: list[str], expected: str) -> None:
    """A dc:date that is no date failed the record with invalid_date, although its year (or
    another dc:date) was there; a catalogue's "no date" is taken as no dc:date at all."""
    body = "".join(f"<dc:date>{date}</dc:date>" for date in dates)
    item = TransformItem(
        "oai:x:1",
        "2021-06-30T08:15:00Z",
        [],
        wrap_metadata(
            DC_HEAD + f"<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator>{body}</oai_dc:dc>"
        ),
    )
    assert transformed_metadata(item)["publication_date"] == expected


def test_percent_encoded_doi_url_is_the_records_doi() -> None:
    """DSpace's dc.identifier.uri as a percent-encoded doi.org URL was a plain URL identifier,
    and the record had no DOI."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        "<dc:identifier>https://doi.org/10.1234%2FABC</dc:identifier>"
    )
    transform_one(item)
    assert item.pid == "10.1234/abc"
    assert item.data["metadata"]["identifiers"] == []


@pytest.mark.parametrize(
    ("types", "expected"),
    [
        # DINI (German repositories): the DCMI type, then the doc-type term
        (["Text", "doc-type:doctoralThesis"], "publication-dissertation"),
        (["doc-type:article"], "publication-article"),
        (["doc-type:StudyThesis"], "publication-dissertation"),
        (["doc-type:Periodical"], "publication-journal"),
        # OPUS 4: its own type, then the doc-type term
        (["coursematerial", "doc-type:coursematerial"], "lesson"),
        # OpenAIRE v4's COAR URI written into dc:type
        (["http://purl.org/coar/resource_type/c_6501"], "publication-article"),
        (["Text"], "publication"),
    ],
)
def test_dini_and_coar_types(types: list[str], expected: str) -> None:
    """DINI's `doc-type:` terms and COAR type URIs were `other`, and `Text` listed first hid
    the specific type after it."""
    body = "".join(f"<dc:type>{value}</dc:type>" for value in types)
    item = dc_item(
        f"<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>{body}"
    )
    assert transformed_metadata(item)["resource_type"] == {"id": expected}


def test_openaire_embargo_end_is_an_available_date() -> None:
    """OPUS and DSpace in OpenAIRE's set write the embargo's end as a dc:date
    (`info:eu-repo/date/embargoEnd/…`); it was dropped, and it is never the publication date."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020-05-12</dc:date>"
        "<dc:date>info:eu-repo/date/embargoEnd/2022-05-12</dc:date>"
        "<dc:rights>info:eu-repo/semantics/embargoedAccess</dc:rights>"
    )
    metadata = transformed_metadata(item)
    assert metadata["publication_date"] == "2020-05-12"
    assert metadata["dates"] == [
        {"date": "2022-05-12", "type": {"id": "available"}, "description": "embargo end"}
    ]


def test_ddc_codes_and_keywords_joined_by_semicolons_are_subjects_of_their_own() -> None:
    """OPUS writes its DDC classes as `ddc:610`, OpenAIRE as an eu-repo classification URI,
    OJS an article's keywords as one dc:subject joined by `;`: each was one free-text
    subject (`ddc:610`, `Medizin; Chirurgie; Anästhesie`)."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        '<dc:subject xml:lang="de">Medizin; Chirurgie; Anästhesie;</dc:subject>'
        "<dc:subject>Chirurgie</dc:subject>"
        "<dc:subject>ddc:610</dc:subject>"
        "<dc:subject>info:eu-repo/classification/ddc/617</dc:subject>"
        "<dc:subject>610 Medicine &amp; health</dc:subject>"
    )
    assert transformed_metadata(item)["subjects"] == [
        {"subject": "Medizin"},
        {"subject": "Chirurgie"},
        {"subject": "Anästhesie"},
        {"subject": "610", "scheme": "DDC"},
        {"subject": "617", "scheme": "DDC"},
        {"subject": "610 Medicine & health"},
    ]


def test_dc_dois_in_every_form() -> None:
    """F4: info:doi/, www.doi.org and OpenAIRE's altIdentifier are DOIs, lower-cased. An
    altIdentifier is another identifier of this very resource (OpenAIRE guidelines), so it is
    one of the record's identifiers, not a resource the record references."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        "<dc:identifier>info:doi/10.1234/InfoDOI</dc:identifier>"
        "<dc:identifier>https://www.doi.org/10.1234/WWW</dc:identifier>"
        "<dc:relation>info:eu-repo/semantics/altIdentifier/doi/10.1234/EUREPO</dc:relation>"
        "<dc:relation>http://dx.doi.org/10.1234/DX</dc:relation>"
    )
    metadata = transformed_metadata(item)
    assert item.pid == "10.1234/infodoi"
    assert item.data["pids"]["doi"]["identifier"] == "10.1234/infodoi"
    assert metadata["identifiers"] == [
        {"identifier": "10.1234/www", "scheme": "doi"},
        {"identifier": "10.1234/eurepo", "scheme": "doi"},
    ]
    assert metadata["related_identifiers"] == [
        {"identifier": "10.1234/dx", "scheme": "doi", "relation_type": {"id": "references"}},
    ]


def test_dc_one_line_fields_collapse_whitespace() -> None:
    """F5: arXiv's oai_dc breaks long titles over lines; descriptions keep their lines."""
    item = dc_item(
        "<dc:title>The Distribution of Star Formation in the Low Surface\n"
        "  Brightness Galaxy UGC 628</dc:title>"
        "<dc:creator>Young,\n    J. E.</dc:creator><dc:date>2020</dc:date>"
        "<dc:subject>Astrophysics -\n  Galaxies</dc:subject>"
        "<dc:publisher>  Cornell\tUniversity </dc:publisher>"
        "<dc:description>  We introduce the MUSCEL Program (MUltiwavelength observations of the\n"
        "Structure).  </dc:description>"
    )
    metadata = transformed_metadata(item)
    assert metadata["title"] == (
        "The Distribution of Star Formation in the Low Surface Brightness Galaxy UGC 628"
    )
    assert metadata["creators"][0]["person_or_org"]["name"] == "Young, J. E."
    assert metadata["subjects"] == [{"subject": "Astrophysics - Galaxies"}]
    assert metadata["publisher"] == "Cornell University"
    assert metadata["description"] == (
        "We introduce the MUSCEL Program (MUltiwavelength observations of the\nStructure)."
    )


def test_landing_pages_and_handles_are_identifiers_not_files() -> None:
    """F6: a dot in the last path segment does not make a file."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        "<dc:identifier>http://arxiv.org/abs/1101.4388</dc:identifier>"
        "<dc:identifier>https://hdl.handle.net/10013/epic.10033</dc:identifier>"
        "<dc:identifier>https://repo.example.org/bitstream/1/paper.pdf</dc:identifier>"
    )
    metadata = transformed_metadata(item)
    assert metadata["identifiers"] == [
        {"identifier": "http://arxiv.org/abs/1101.4388", "scheme": "url"},
        {"identifier": "https://hdl.handle.net/10013/epic.10033", "scheme": "url"},
    ]
    assert item.data["files"]["links"] == [
        {"url": "https://repo.example.org/bitstream/1/paper.pdf", "key": "paper.pdf"}
    ]


def test_dc_description_html_is_sanitised() -> None:
    """F7: the double-escaped abstract is unescaped once, then sanitised."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        "<dc:description>&amp;lt;p&amp;gt;Effect is small (p &amp;lt; 0.05) &amp;amp; robust."
        "&amp;lt;/p&amp;gt;&amp;lt;script&amp;gt;alert(1)&amp;lt;/script&amp;gt;"
        "</dc:description>"
        "<dc:description>&lt;p onclick='x()'&gt;Real &amp;lt;b&amp;gt; as text&lt;/p&gt;"
        "</dc:description>"
    )
    metadata = transformed_metadata(item)
    assert metadata["description"] == "<p>Effect is small (p &lt; 0.05) &amp; robust.</p>"
    assert metadata["additional_descriptions"][0]["description"] == (
        "<p>Real &lt;b&gt; as text</p>"
    )


def test_a_doi_given_in_several_forms_is_the_pid_once() -> None:
    """DSpace lists the DOI as dc.identifier.doi and as its URL: it is the pid, not also an
    identifier (the target rejects duplicated identifiers); repeats of others are dropped."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        "<dc:identifier>https://doi.org/10.1234/ABC</dc:identifier>"
        "<dc:identifier>10.1234/abc</dc:identifier><dc:identifier>doi:10.1234/Abc</dc:identifier>"
        "<dc:identifier>urn:nbn:de:1</dc:identifier><dc:identifier>urn:nbn:de:1</dc:identifier>"
        "<dc:relation>10.1234/rel</dc:relation><dc:relation>doi:10.1234/REL</dc:relation>"
    )
    metadata = transformed_metadata(item)
    assert item.pid == "10.1234/abc"
    assert metadata["identifiers"] == [{"identifier": "urn:nbn:de:1", "scheme": "urn"}]
    assert [r["identifier"] for r in metadata["related_identifiers"]] == ["10.1234/rel"]


def test_ojs_authors_listed_once_per_locale_are_one_creator_each() -> None:
    """OJS lists each author once per locale of a bilingual journal; the same name in one
    language twice is two people and stays."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:date>2020</dc:date>"
        '<dc:creator xml:lang="en-US">Tremblay, Marie</dc:creator>'
        '<dc:creator xml:lang="fr-CA">Tremblay, Marie</dc:creator>'
        '<dc:creator xml:lang="en-US">Wang, Wei</dc:creator>'
        '<dc:creator xml:lang="en-US">Wang, Wei</dc:creator>'
        '<dc:creator xml:lang="fr-CA">Wang, Wei</dc:creator>'
        '<dc:creator xml:lang="fr-CA">Wang, Wei</dc:creator>'
        '<dc:contributor xml:lang="en-US">Roe, Richard</dc:contributor>'
        '<dc:contributor xml:lang="fr-CA">Roe, Richard</dc:contributor>'
    )
    metadata = transformed_metadata(item)
    names = [creator["person_or_org"]["name"] for creator in metadata["creators"]]
    assert names == ["Tremblay, Marie", "Wang, Wei", "Wang, Wei"]
    assert [c["person_or_org"]["name"] for c in metadata["contributors"]] == ["Roe, Richard"]


@pytest.mark.parametrize(
    ("dc_type", "expected"),
    [
        ("Thesis", "publication-dissertation"),
        ("Dissertation", "publication-dissertation"),
        ("Journal Article", "publication-article"),
        ("Book chapter", "publication-section"),
        ("Book Section", "publication-section"),
        ("Presentation", "presentation"),
        ("Video", "video"),
        ("Poster", "poster"),
        ("Technical Report", "publication-report"),
        ("Conference or Workshop Item", "publication-conferencepaper"),
        ("Monograph", "publication-book"),
        ("Audio/Sound", "audio"),
        ("info:eu-repo/semantics/article", "publication-article"),
        ("http://purl.org/dc/dcmitype/MovingImage", "video"),
    ],
)
def test_dspace_and_eprints_dc_types(dc_type: str, expected: str) -> None:
    """The free-text types of DSpace and EPrints, compared without case or punctuation
    (before, all of them were `other`)."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>A, B</dc:creator><dc:date>2020</dc:date>"
        f"<dc:type>{dc_type}</dc:type>"
    )
    assert transformed_metadata(item)["resource_type"] == {"id": expected}


def test_dspace_issued_date_beats_earlier_deposit_timestamps() -> None:
    """An accepted manuscript is deposited (dc.date.accessioned/.available, timestamps)
    before it is issued (dc.date.issued, a date): the date without a time of day wins."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator>"
        "<dc:date>2019-05-03T10:22:31Z</dc:date><dc:date>2019-05-03T10:22:31Z</dc:date>"
        "<dc:date>2020-01-15</dc:date>"
    )
    assert transformed_metadata(item)["publication_date"] == "2020-01-15"
    only_stamps = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator>"
        "<dc:date>2019-05-04T10:22:31Z</dc:date><dc:date>2019-05-03T10:22:31Z</dc:date>"
    )
    assert transformed_metadata(only_stamps)["publication_date"] == "2019-05-03"


def test_language_names_are_languages() -> None:
    """dc:language as a name, in English or the language's own (before, dropped)."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        "<dc:language>English</dc:language><dc:language>French</dc:language>"
        "<dc:language>Deutsch</dc:language><dc:language>Español</dc:language>"
        "<dc:language>german</dc:language><dc:language>Klingonish</dc:language>"
    )
    assert transformed_metadata(item)["languages"] == [
        {"id": "eng"},
        {"id": "fra"},
        {"id": "deu"},
        {"id": "spa"},
    ]


def test_dc_names_of_library_catalogues_and_organisations() -> None:
    """Authority dates are no given name, a trailing parenthesis is the affiliation (a role
    is dropped), `;` separates two people, and an organisation's name is an organisation."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:date>2020</dc:date>"
        "<dc:creator>Twain, Mark, 1835-1910</dc:creator>"
        "<dc:creator>Smith, John (Univ X)</dc:creator>"
        "<dc:creator>Roe, Richard; Doe, Jane</dc:creator>"
        "<dc:creator>World Health Organization</dc:creator><dc:creator>CERN</dc:creator>"
        "<dc:contributor>Poe, Edgar (ed.)</dc:contributor>"
    )
    metadata = transformed_metadata(item)
    people = [
        (
            c["person_or_org"]["type"],
            c["person_or_org"].get("given_name"),
            c["person_or_org"]["name"],
        )
        for c in metadata["creators"]
    ]
    assert people == [
        ("personal", "Mark", "Twain, Mark"),
        ("personal", "John", "Smith, John"),
        ("personal", "Richard", "Roe, Richard"),
        ("personal", "Jane", "Doe, Jane"),
        ("organizational", None, "World Health Organization"),
        ("organizational", None, "CERN"),
    ]
    assert metadata["creators"][1]["affiliations"] == [{"name": "Univ X"}]
    assert metadata["creators"][0]["affiliations"] == []
    [editor] = metadata["contributors"]
    assert (editor["person_or_org"]["name"], editor["affiliations"]) == ("Poe, Edgar", [])


@pytest.mark.parametrize(
    "written",
    [
        "https://orcid.org/0000-0002-1825-0097",
        "http://orcid.org/0000-0002-1825-0097",
        "0000-0002-1825-0097",
        "ORCID: 0000-0002-1825-0097",
        "orcid.org/0000000218250097",
    ],
)
def test_an_orcid_in_a_dc_creators_parenthesis_is_the_persons_orcid(written: str) -> None:
    """Before, `Carberry, Josiah (https://orcid.org/…)` gave Josiah an affiliation named by
    the URL of his ORCID, and no identifier."""
    item = dc_item(
        f"<dc:title>T</dc:title><dc:date>2020</dc:date><dc:creator>Carberry, Josiah ({written})"
        "</dc:creator>"
    )
    [creator] = transformed_metadata(item)["creators"]
    assert creator["affiliations"] == []
    assert creator["person_or_org"]["name"] == "Carberry, Josiah"
    assert creator["person_or_org"]["identifiers"] == [
        {"identifier": "0000-0002-1825-0097", "scheme": "orcid"}
    ]


def test_a_mistyped_orcid_in_a_dc_creators_parenthesis_is_neither_id_nor_affiliation() -> None:
    item = dc_item(
        "<dc:title>T</dc:title><dc:date>2020</dc:date>"
        "<dc:creator>Carberry, Josiah (0000-0002-1825-0098)</dc:creator>"
    )
    [creator] = transformed_metadata(item)["creators"]
    assert (creator["affiliations"], creator["person_or_org"]["identifiers"]) == ([], [])


def test_record_without_dc_date_is_dated_by_its_oai_datestamp() -> None:
    """No dc:date at all: the day of the OAI datestamp is the publication date (before, the
    record was rejected); an unreadable dc:date without a year still is an invalid_date
    (`test_errors.test_unparsable_dc_date`)."""
    item = TransformItem(
        "oai:x:1",
        "2021-06-30T08:15:00Z",
        [],
        wrap_metadata(
            DC_HEAD + "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator></oai_dc:dc>"
        ),
    )
    assert transformed_metadata(item)["publication_date"] == "2021-06-30"
    no_stamp = TransformItem(
        "oai:x:1",
        "",
        [],
        wrap_metadata(
            DC_HEAD + "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator></oai_dc:dc>"
        ),
    )
    transform_one(no_stamp)
    assert (no_stamp.error.type, no_stamp.error.location) == (
        "missing_field",
        "metadata.publication_date",
    )


def test_ojs_copyright_statement_is_not_the_license_title() -> None:
    """OJS writes the copyright line, then the license URL: the line is a right of its own,
    not the title of the CC license (before, the two were paired)."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        '<dc:rights xml:lang="en-US">Copyright (c) 2020 Marie Tremblay, John Smith</dc:rights>'
        '<dc:rights xml:lang="en-US">https://creativecommons.org/licenses/by/4.0</dc:rights>'
    )
    assert transformed_metadata(item)["rights"] == [
        {"id": "cc-by-4.0", "link": "https://creativecommons.org/licenses/by/4.0"},
        {"title": {"en": "Copyright (c) 2020 Marie Tremblay, John Smith"}},
    ]


def test_a_license_named_without_its_url_is_that_license() -> None:
    """dc:rights `CC BY 4.0` with no license URL (OPUS, DSpace, many OJS journals) was a
    free-text right: the record had no license the target could search or show."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        "<dc:rights>CC BY-NC 4.0</dc:rights><dc:rights>Open Access</dc:rights>"
        '<dc:rights xml:lang="de">Creative Commons - CC BY-NC - Namensnennung - Nicht '
        "kommerziell 4.0 International</dc:rights>"
    )
    assert transformed_metadata(item)["rights"] == [
        {
            "id": "cc-by-nc-4.0",
            "title": {
                "en": "CC BY-NC 4.0",
                "de": "Creative Commons - CC BY-NC - Namensnennung - Nicht kommerziell 4.0 "
                "International",
            },
        },
        {"title": {"en": "Open Access"}},
    ]


def test_invisible_characters_are_dropped_and_text_is_nfc() -> None:
    """A title of only a zero-width space is no title (the next one is the title); text is
    NFC, so a decomposed `é` equals the composed one."""
    item = dc_item(
        "<dc:title>\u200b</dc:title><dc:title>\ufeffCafe\u0301 study</dc:title>"
        "<dc:creator>Mu\u0308ller, J</dc:creator><dc:date>2020</dc:date>"
    )
    metadata = transformed_metadata(item)
    assert metadata["title"] == "Caf\u00e9 study"
    assert metadata["additional_titles"] == []
    assert metadata["creators"][0]["person_or_org"]["family_name"] == "M\u00fcller"


def _series_information(metadata: dict) -> list[str]:
    return [
        entry["description"]
        for entry in metadata["additional_descriptions"]
        if entry["type"] == {"id": "series-information"}
    ]


@pytest.mark.parametrize("element", ["relation", "source"])
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # APA: journal, volume(issue), pages or article number
        (
            "Journal of Physics: Conference Series, 1234(5), 012345",
            "Journal of Physics: Conference Series, vol. 1234, no. 5, p. 012345",
        ),
        ("Cell Reports, 42(10), (2023-10-12)", "Cell Reports, vol. 42, no. 10, 2023-10-12"),
        ("Journal of Foo, 12(3), 45-67.", "Journal of Foo, vol. 12, no. 3, pp. 45–67"),
        # Nature's and the physics journals' style: journal volume, pages (year)
        ("Nature 580, 123–127 (2020)", "Nature, vol. 580, 2020, pp. 123–127"),
        ("Phys. Rev. Lett. 116, 061102 (2016)", "Phys. Rev. Lett., vol. 116, 2016, p. 061102"),
        # EPrints' citation: publication, volume(number):pagerange
        (
            "Cost Effectiveness and Resource Allocation : C/E, 5:5.",
            "Cost Effectiveness and Resource Allocation : C/E, vol. 5, p. 5",
        ),
        ("Journal of Foo, 12(3):45-67.", "Journal of Foo, vol. 12, no. 3, pp. 45–67"),
        # OJS: journal; issue identification; pages
        (
            "Zeitschrift für X; Vol. 12, No. 3 (2019): 45-67",
            "Zeitschrift für X, vol. 12, no. 3, 2019, pp. 45–67",
        ),
        (
            "Proceedings of the AAAI Conference on Artificial Intelligence; Vol. 40 No. 1: "
            "AAAI-26 Technical Tracks 1; 101-109",
            "Proceedings of the AAAI Conference on Artificial Intelligence, vol. 40, no. 1, "
            "AAAI-26 Technical Tracks 1, pp. 101–109",
        ),
        ("Revista X; v. 7 n. 2 (2018)", "Revista X, vol. 7, no. 2, 2018"),
        # labelled parts
        (
            "Journal of Foo, Vol. 12, No. 3, pp. 45-67",
            "Journal of Foo, vol. 12, no. 3, pp. 45–67",
        ),
    ],
)
def test_a_journal_citation_in_dc_relation_or_source_is_series_information(
    element: str, text: str, expected: str
) -> None:
    """DSpace, EPrints, OJS and Zenodo give the journal an article appeared in as free text in
    dc:relation or dc:source; it was dropped. It is read into the citation DataCite's
    relatedItem IsPublishedIn and MARC's 773 give: a series-information description."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        "<dc:description>Abstract</dc:description>"
        f"<dc:{element}>{text}</dc:{element}>"
    )
    metadata = transformed_metadata(item)
    assert metadata["description"] == "Abstract"
    assert _series_information(metadata) == [expected]
    assert metadata["related_identifiers"] == []


@pytest.mark.parametrize("element", ["relation", "source"])
@pytest.mark.parametrize(
    "text",
    [
        "ISSN: 0028-0836",
        "ISSN 0028-0836",
        "eISSN: 0028-0836",
        "0028-0836",
    ],
)
def test_an_issn_in_dc_relation_or_source_is_the_journal(element: str, text: str) -> None:
    """DSpace's dc.relation.ispartof and EPrints write the journal's ISSN with its label; it was
    dropped (dc:relation) or read only without one (dc:source)."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        f"<dc:{element}>{text}</dc:{element}>"
    )
    metadata = transformed_metadata(item)
    assert metadata["related_identifiers"] == [
        {"identifier": "0028-0836", "scheme": "issn", "relation_type": {"id": "ispublishedin"}}
    ]
    assert _series_information(metadata) == []


def test_a_citation_with_its_issn_is_both() -> None:
    """EPrints' citation ends with the journal's ISSN: the citation and the ISSN, once each."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        "<dc:source>Nature, 580 (7801). pp. 123-127. ISSN 0028-0836</dc:source>"
        "<dc:identifier>0028-0836</dc:identifier>"
    )
    metadata = transformed_metadata(item)
    assert _series_information(metadata) == ["Nature, vol. 580, no. 7801, pp. 123–127"]
    assert metadata["related_identifiers"] == [
        {"identifier": "0028-0836", "scheme": "issn", "relation_type": {"id": "ispublishedin"}}
    ]


@pytest.mark.parametrize(
    "text",
    [
        "PyHEP 2023 Workshop, 9-12 October 2023",  # Zenodo: a meeting, no journal
        "Julkaisuja / Helsingin yliopisto, soveltavan biologian laitos",  # a series, no number
        "34",
        "Part of the Smith collection",
        "Journal of Foo",  # a title alone
        "Smith, J; Doe, A (2007). A review. Journal of Foo, 5:5.",  # a whole reference
        "Has version: Doe, J (2019) Preprint, arXiv, 12(3)",
        "https://example.org/journal/12/3",
        "10.1234/abc",
    ],
)
def test_dc_relation_that_is_no_citation_is_not_read_as_one(text: str) -> None:
    """Only text that clearly is a citation becomes one: a journal title and its volume,
    issue or pages. URLs and DOIs stay related identifiers."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        f"<dc:relation>{text}</dc:relation><dc:source>{text}</dc:source>"
    )
    metadata = transformed_metadata(item)
    assert _series_information(metadata) == []
    assert all(r["relation_type"]["id"] == "references" for r in metadata["related_identifiers"])


def test_zenodo_journal_in_dc_source_is_series_information() -> None:
    """Zenodo's recorded page: `Cell Reports, 42(10), (2023-10-12)` was dropped; a meeting in
    dc:source (`PyHEP 2023 Workshop, 9-12 October 2023`) is no journal."""
    by_id = {
        item.identifier: item
        for item in transform(
            page_items("zenodo-ListRecords-oai_dc-resumed-with-deleted.xml")
            + page_items("zenodo-ListRecords-oai_dc-page1.xml")
        )
        if item.data is not None
    }
    cell = by_id["oai:zenodo.org:8333281"].data["metadata"]
    assert _series_information(cell) == ["Cell Reports, vol. 42, no. 10, 2023-10-12"]
    assert all(
        not _series_information(item.data["metadata"])
        for key, item in by_id.items()
        if key != "oai:zenodo.org:8333281"
    )


@pytest.mark.parametrize(
    ("dates", "publication_date", "expected"),
    [
        (
            ["Spring 2020"],
            "2020",
            [{"date": "2020", "type": {"id": "issued"}, "description": "Spring 2020"}],
        ),
        (
            ["ca. 1890"],
            "1890",
            [{"date": "1890", "type": {"id": "issued"}, "description": "ca. 1890"}],
        ),
        (
            ["[1885?]"],
            "1885",
            [{"date": "1885", "type": {"id": "issued"}, "description": "[1885?]"}],
        ),
        (
            ["19--"],
            "1900/1999",
            [{"date": "1900/1999", "type": {"id": "issued"}, "description": "19--"}],
        ),
        # a date is the publication date; the text beside it is kept as another date
        (
            ["Spring 2020", "2019-10"],
            "2019-10",
            [{"date": "2020", "type": {"id": "other"}, "description": "Spring 2020"}],
        ),
        (
            ["2019-10", "ca. 1890"],
            "1890",
            [
                {"date": "2019-10", "type": {"id": "other"}},
                {"date": "1890", "type": {"id": "issued"}, "description": "ca. 1890"},
            ],
        ),
        # the same year written exactly and approximately: both said, both kept
        (
            ["1890", "ca. 1890"],
            "1890",
            [{"date": "1890", "type": {"id": "other"}, "description": "ca. 1890"}],
        ),
        # dates the target's form says all of are kept as they were
        (["May 2020"], "2020-05", []),
        (["1885."], "1885", []),
        (
            ["2020", "2020-03-01T10:00:00Z"],
            "2020",
            [{"date": "2020-03-01", "type": {"id": "other"}}],
        ),
    ],
)
def test_dc_date_text_read_as_a_year_is_kept(
    dates: list[str], publication_date: str, expected: list[dict]
) -> None:
    """A dc:date that is no date (`Spring 2020`) or an approximate one (`ca. 1890`) became its
    year, and its text was lost (beside another date, the whole value was): the year is now a
    date described by the source's text, `issued` when it is the publication date."""
    body = "".join(f"<dc:date>{date}</dc:date>" for date in dates)
    item = dc_item(f"<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator>{body}")
    metadata = transformed_metadata(item)
    assert metadata["publication_date"] == publication_date
    assert metadata["dates"] == expected


@pytest.mark.parametrize(
    "creators",
    [
        ["Doe, Jane et al."],
        ["Doe, Jane, et al"],
        ["Doe, Jane [et al.]"],
        ["Doe, Jane and others"],
        ["Doe, Jane et al. (Univ X)"],
        ["Doe, Jane; et al."],
        ["Doe, Jane", "et al."],
    ],
)
def test_et_al_after_a_creator_is_no_part_of_a_name(creators: list[str]) -> None:
    """`Doe, Jane et al.` became a person whose given name was `Jane et al.`, and `et al.` in
    a dc:creator of its own a person named `et al.`."""
    body = "".join(f"<dc:creator>{name}</dc:creator>" for name in creators)
    item = dc_item(f"<dc:title>T</dc:title>{body}<dc:date>2020</dc:date>")
    [creator] = transformed_metadata(item)["creators"]
    person = creator["person_or_org"]
    assert (person["family_name"], person["given_name"]) == ("Doe", "Jane")


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("english; german", ["eng", "deu"]),
        ("en, de", ["eng", "deu"]),
        ("eng/ger", ["eng", "deu"]),
        ("English and French", ["eng", "fra"]),
        ("Greek, Modern (1453-)", ["ell"]),  # one language's name with a comma
    ],
)
def test_several_languages_in_one_dc_language(written: str, expected: list[str]) -> None:
    """`english; german` in one dc:language was no language at all: the record had none."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        f"<dc:language>{written}</dc:language>"
    )
    assert transformed_metadata(item)["languages"] == [{"id": code} for code in expected]


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("MIT", "mit"),
        ("The MIT License", "mit"),
        ("Apache-2.0", "apache-2.0"),
        ("Apache License, Version 2.0", "apache-2.0"),
        ("CC-BY-4.0", "cc-by-4.0"),
        ("BSD-3-Clause", "bsd-3-clause"),
        ("GPL-3.0+", "gpl-3.0-or-later"),
        ("GPL-2.0", "gpl-2.0-only"),
    ],
)
def test_a_license_given_by_its_spdx_id_is_that_license(written: str, expected: str) -> None:
    """dc:rights `MIT` or `Apache-2.0` (software deposits) was a free-text right, so the
    record had no license the target could search or show; a word that is no SPDX id
    (`Open`) stays free text."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        f"<dc:rights>{written}</dc:rights><dc:rights>Open</dc:rights>"
    )
    assert transformed_metadata(item)["rights"] == [
        {"id": expected, "title": {"en": written}},
        {"title": {"en": "Open"}},
    ]


@pytest.mark.parametrize(
    ("dates", "publication_date", "expected_dates"),
    [
        # beside a deposit timestamp: the timestamp's day, the impossible date left out
        (["2021-13-45", "2019-05-03T10:22:31Z"], "2019-05-03", []),
        # beside a date: that date; `12/05/2020` (day or month first?) is left out too
        (["12/05/2020", "2019"], "2019", []),
    ],
)
def test_a_dc_date_of_digits_that_is_no_date_gives_no_year(
    dates: list[str], publication_date: str, expected_dates: list[dict]
) -> None:
    """`2021-13-45` (a typo: no month 13) gave the year 2021 as the publication date, where
    DataCite, OpenAIRE and MARC take a year only from words (`Spring 2021`); now it gives none,
    as there, and the record takes its other dc:date."""
    body = "".join(f"<dc:date>{date}</dc:date>" for date in dates)
    metadata = transformed_metadata(
        dc_item(f"<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator>{body}")
    )
    assert (metadata["publication_date"], metadata["dates"]) == (publication_date, expected_dates)


def test_a_dc_date_of_digits_that_is_no_date_alone_is_the_records_invalid_date() -> None:
    """A record whose only dc:date is `2021-13-45` was dated 2021 silently; it now fails as
    DataCite's and MARC's do, its error saying why (the harvest goes on)."""
    item = transform_one(
        dc_item(
            "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2021-13-45</dc:date>"
        )
    )
    assert item.error is not None and item.error.type == "invalid_date"
    assert "'2021-13-45' has no month 13" in item.error.message
    assert item.error.location == "metadata.publication_date"


@pytest.mark.parametrize("inside", ["<!-- a note -->", "<?page 2?>", "<i>,</i>"])
def test_a_comment_or_element_inside_a_value_does_not_end_it(inside: str) -> None:
    """A value was read up to the first comment, processing instruction or element inside it
    (lxml's `.text`): `Foo <!-- x --> bar` was the title `Foo`, the rest lost without a word.
    DataCite read the whole text; Dublin Core (and OpenAIRE) now do too."""
    item = dc_item(
        f"<dc:title>Stomach {inside} encyclopedia</dc:title>"
        f"<dc:creator>Tsubosaka{inside} Ayumu</dc:creator>"
        f"<dc:description>One{inside} two</dc:description>"
    )
    metadata = transformed_metadata(item)
    text = "" if inside.startswith("<!--") or inside.startswith("<?") else ","
    assert metadata["title"] == f"Stomach {text} encyclopedia".replace("  ", " ")
    assert metadata["creators"][0]["person_or_org"]["name"] == f"Tsubosaka{text} Ayumu"
    assert metadata["description"] == f"One{text} two"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("978-3-16-148410-0", [("978-3-16-148410-0", "isbn", "references")]),
        ("ISBN 0-306-40615-2", [("0-306-40615-2", "isbn", "references")]),
        ("978-3-16-148410-1", []),  # a wrong check digit: no ISBN
        # an ISSN is the journal's, as before: once, `ispublishedin`
        ("ISSN 0028-0836", [("0028-0836", "issn", "ispublishedin")]),
        ("0028-0836", [("0028-0836", "issn", "ispublishedin")]),
    ],
)
def test_a_dc_relation_that_is_an_isbn_is_a_related_identifier(
    text: str, expected: list[tuple[str, str, str]]
) -> None:
    """An untyped dc:relation that is an ISBN by its form and check digit (`978-3-16-148410-0`,
    a chapter's book, a book's other edition) was dropped, as any value but a DOI, URL, URN or
    `info:` URI was; it `references` that ISBN now. An ISSN there stays the journal the record
    is published in, not also a reference to it."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        f"<dc:relation>{text}</dc:relation>"
    )
    related = transformed_metadata(item)["related_identifiers"]
    assert [(r["identifier"], r["scheme"], r["relation_type"]["id"]) for r in related] == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("urn:isbn:9780306406157", [("9780306406157", "isbn", "references")]),
        ("URN:ISBN:0-306-40615-2", [("0-306-40615-2", "isbn", "references")]),
        ("urn:isbn:9780306406158", []),  # a wrong check digit: no identifier
        ("urn:isbn:", []),
        # the journal's ISSN, once (it was also a `urn` the record references)
        ("urn:issn:0028-0836", [("0028-0836", "issn", "ispublishedin")]),
        ("urn:nbn:de:101:1-2020", [("urn:nbn:de:101:1-2020", "urn", "references")]),
    ],
)
def test_a_dc_relation_that_is_an_isbn_urn_is_its_isbn(
    text: str, expected: list[tuple[str, str, str]]
) -> None:
    """A dc:relation `urn:isbn:9780306406157` was a `urn` the record references, where the
    same dc:identifier is the ISBN whose check digit is right, and none with a wrong one. It
    is read as that dc:identifier is now; other URNs stay URNs."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        f"<dc:relation>{text}</dc:relation>"
    )
    related = transformed_metadata(item).get("related_identifiers", [])
    assert [(r["identifier"], r["scheme"], r["relation_type"]["id"]) for r in related] == expected


def test_a_name_that_names_nobody_is_left_out_and_one_without_its_family_part_is_one_name() -> None:
    """Found by fuzzing: a dc:creator of authority dates only (`1950-2000`: the dates were
    dropped, leaving no name) or of punctuation only (`,`, `, ,`) became a person with no
    family name, which the target refuses: the record failed with a validation error. It
    names nobody and is left out, as `et al.` is. `, John` (no family part before its comma)
    is the one name `John`, as a givenName alone is."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:date>2020</dc:date>"
        "<dc:creator>1950-2000</dc:creator><dc:creator>,</dc:creator>"
        "<dc:creator>Doe, Jane</dc:creator><dc:creator>, ,</dc:creator>"
        "<dc:creator>, John</dc:creator><dc:contributor>(ed.)</dc:contributor>"
    )
    metadata = transformed_metadata(item)
    people = [c["person_or_org"] for c in metadata["creators"]]
    assert people == [personal("Doe", "Jane"), personal("John")]
    assert metadata.get("contributors", []) == []


def test_a_name_of_digits_only_names_nobody() -> None:
    """A dc:creator of digits and punctuation only (`12345`, a number in the name's field;
    `2019-01`, a date that is no authority dates' range) was a person so named. It names
    nobody and is left out, as a name of punctuation only is; a name with letters and digits
    (`3M`) is kept."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:date>2020</dc:date>"
        "<dc:creator>12345</dc:creator><dc:creator>Doe, Jane</dc:creator>"
        "<dc:creator>2019-01</dc:creator><dc:contributor>0815/4711</dc:contributor>"
        "<dc:contributor>3M</dc:contributor>"
    )
    metadata = transformed_metadata(item)
    assert [c["person_or_org"] for c in metadata["creators"]] == [personal("Doe", "Jane")]
    assert [c["person_or_org"]["name"] for c in metadata["contributors"]] == ["3M"]


@pytest.mark.parametrize("name", ["12345", "2019-01"])
def test_a_record_whose_only_creator_is_digits_has_no_creator(name: str) -> None:
    item = transform_one(dc_item(f"<dc:title>T</dc:title><dc:creator>{name}</dc:creator>"))
    assert (item.error.type, item.error.location) == ("missing_field", "metadata.creators")


def test_a_record_whose_only_creator_names_nobody_has_no_creator() -> None:
    """Its error says what is missing (it was a validation error about a family name)."""
    item = transform_one(dc_item("<dc:title>T</dc:title><dc:creator>, ,</dc:creator>"))
    assert (item.error.type, item.error.location) == ("missing_field", "metadata.creators")


@pytest.mark.parametrize("text", ["urn:isbn:", "urn:issn:", "urn:ISBN: "])
def test_an_isbn_or_issn_urn_without_its_number_is_no_identifier(text: str) -> None:
    """Found by fuzzing: `urn:isbn:` with nothing after it was an ISBN `` (an empty one), the
    book the record is published in, which the target refuses: the record failed."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>"
        f"<dc:identifier>{text}</dc:identifier><dc:type>info:eu-repo/semantics/article</dc:type>"
    )
    metadata = transformed_metadata(item)
    assert metadata.get("identifiers", []) == []
    assert metadata.get("related_identifiers", []) == []


@pytest.mark.parametrize(
    ("text", "identifiers", "related"),
    [
        # a check digit that is wrong: no identifier (it was an ISBN or ISSN all the same)
        ("urn:isbn:978-3-16-148410-1", [], []),
        ("urn:isbn:0-306-40615-3", [], []),
        ("urn:ISBN:0306406153", [], []),
        ("urn:issn:0028-0837", [], []),
        # a right one: the number, ten bare digits too (`isbn:` labels them)
        ("urn:isbn:978-3-16-148410-0", [{"identifier": "978-3-16-148410-0", "scheme": "isbn"}],
         []),
        ("urn:ISBN:0306406152", [{"identifier": "0306406152", "scheme": "isbn"}], []),
        ("urn:issn:00280836", [],
         [{"identifier": "0028-0836", "scheme": "issn", "relation_type": {"id": "ispublishedin"}}]),
    ],
)  # fmt: skip
def test_an_isbn_or_issn_urn_with_a_wrong_check_digit_is_no_identifier(
    text: str, identifiers: list[dict[str, str]], related: list[dict[str, object]]
) -> None:
    """`urn:isbn:` and `urn:issn:` kept any number after them unchecked, where a bare or
    `ISBN`-labelled dc:identifier, MARC's 020 and 022 and a related identifier are checked and
    dropped when the check digit is wrong. They are checked alike now."""
    element = f"<dc:identifier>{text}</dc:identifier><dc:type>info:eu-repo/semantics/book</dc:type>"
    assert _identifiers_and_related(element) == (identifiers, related)


def _identifiers_and_related(element: str) -> tuple[list[dict], list[dict]]:
    """The identifiers and related identifiers of a record of a title, creator, date and
    ``element``."""
    item = dc_item(
        "<dc:title>T</dc:title><dc:creator>Doe, J</dc:creator><dc:date>2020</dc:date>" + element
    )
    metadata = transformed_metadata(item)
    return metadata.get("identifiers", []), metadata.get("related_identifiers", [])


PUBLISHED_IN = {"scheme": "issn", "relation_type": {"id": "ispublishedin"}}


@pytest.mark.parametrize(
    ("number", "identifiers", "related"),
    [
        ("isbn/978-3-16-148410-1", [], []),  # wrong check digits: no identifier
        ("isbn/0306406153", [], []),
        ("issn/0028-0837", [], []),
        ("eissn/0028-0837", [], []),
        ("isbn/978-3-16-148410-0", [{"identifier": "978-3-16-148410-0", "scheme": "isbn"}], []),
        ("isbn/0306406152", [{"identifier": "0306406152", "scheme": "isbn"}], []),
        ("issn/00280836", [], [{"identifier": "0028-0836", **PUBLISHED_IN}]),  # the serial's
        # an ISBN or ISSN as its URN, as a dc:identifier's (they were `urn`s, unchecked)
        ("urn/urn:isbn:9780306406157", [{"identifier": "9780306406157", "scheme": "isbn"}], []),
        ("urn/URN:ISBN:0-306-40615-2", [{"identifier": "0-306-40615-2", "scheme": "isbn"}], []),
        ("urn/urn:isbn:9780306406158", [], []),
        ("urn/urn:issn:0028-0836", [], [{"identifier": "0028-0836", **PUBLISHED_IN}]),
        (
            "urn/urn:nbn:de:101:1-2020",
            [{"identifier": "urn:nbn:de:101:1-2020", "scheme": "urn"}],
            [],
        ),
    ],
)
def test_an_alt_identifiers_isbn_or_issn_is_checked_as_any_other(
    number: str, identifiers: list[dict[str, str]], related: list[dict[str, object]]
) -> None:
    """OpenAIRE's `info:eu-repo/semantics/altIdentifier/isbn/…` kept the number unchecked,
    where `urn:isbn:` and a bare ISBN drop one whose check digit is wrong; its `urn/urn:isbn:…`
    was a `urn`, where that dc:identifier is the ISBN, checked."""
    element = f"<dc:relation>info:eu-repo/semantics/altIdentifier/{number}</dc:relation>"
    assert _identifiers_and_related(element) == (identifiers, related)


@pytest.mark.parametrize(
    ("title", "creator", "expected_title", "expected_name"),
    [
        # U+0092 for `’`, U+0096 for `–`: text a source stored from a Windows form
        (
            "Smith\x92s survey, 1990\x962000",
            "O\x92Brien, Pat",
            "Smith’s survey, 1990–2000",
            ("O’Brien", "Pat"),
        ),
        # `Caf&amp;eacute;`: a DSpace whose database holds HTML-escaped text
        (
            "Caf&amp;eacute; culture &amp;amp; society, 1990&amp;#8211;2000",
            "M&amp;uuml;ller, J&amp;ouml;rg",
            "Café culture & society, 1990–2000",
            ("Müller", "Jörg"),
        ),
    ],
    ids=["windows-1252-as-latin-1", "escaped-once-more"],
)
def test_text_a_source_stored_mangled_is_read_as_meant(
    title: str, creator: str, expected_title: str, expected_name: tuple[str, str]
) -> None:
    item = dc_item(
        f"<dc:title>{title}</dc:title><dc:creator>{creator}</dc:creator><dc:date>2020</dc:date>"
        "<dc:description>\x93Quoted\x94 text</dc:description><dc:subject>R&amp;D</dc:subject>"
    )
    metadata = transformed_metadata(item)
    assert metadata["title"] == expected_title
    assert metadata["creators"] == [{"person_or_org": personal(*expected_name), "affiliations": []}]
    assert metadata["description"] == "“Quoted” text"
    assert [subject["subject"] for subject in metadata["subjects"]] == ["R&D"]
