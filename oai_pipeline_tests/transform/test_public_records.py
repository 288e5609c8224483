"""Real records from public repositories' test data (samples/public, see its README) through the
oai-import transformer: DSpace, bepress and OJS-style Dublin Core, DataCite kernel-2.x to 4.6."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from oai_pipeline.transform.base import TransformItem
from oai_pipeline.transform.rdm_record import RDMRecord

from .records import OAI, page_items, transform, wrap_metadata

PUBLIC = Path(__file__).parent / "samples" / "public"
FILES = sorted(path.name for path in PUBLIC.glob("*.xml"))


def items(name: str) -> list[TransformItem]:
    """The records of a public sample: each <record> of a response, or the metadata alone."""
    root = etree.fromstring((PUBLIC / name).read_bytes())
    if root.tag == f"{{{OAI}}}OAI-PMH":
        return page_items(name, PUBLIC)
    xml = wrap_metadata((PUBLIC / name).read_bytes(), identifier=f"oai:public:{name}")
    return [TransformItem(f"oai:public:{name}", "2024-01-01", [], xml)]


def one(name: str) -> TransformItem:
    [item] = transform(items(name))
    assert item.error is None, item.error
    assert item.data is not None
    return item


def metadata(name: str) -> dict[str, Any]:
    return one(name).data["metadata"]  # type: ignore[index]


@pytest.mark.parametrize("name", FILES)
def test_public_record_transforms_into_a_valid_record(name: str) -> None:
    for item in transform(items(name)):
        assert item.error is None, (name, item.error)
        record = RDMRecord.model_validate(item.data)
        assert record.metadata.title and record.metadata.creators


@pytest.mark.parametrize("name", FILES)
def test_public_record_transforms_the_same_twice(name: str) -> None:
    """An unchanged record must not look changed to the sync stage."""
    first = [item.data for item in transform(items(name))]
    assert first == [item.data for item in transform(items(name))]


def test_datacite_kernel_2_1_in_the_oai_datacite_1_0_envelope() -> None:
    """DataCite's own oai_datacite example is a kernel-2.1 resource; before, unknown_root."""
    item = one("datacite-oai-1.0-sample-kernel-2.1.xml")
    data = item.data
    assert item.pid == "10.5072/wdcc/ccsrnies_sres_b2"
    assert data["metadata"]["resource_type"] == {"id": "image"}
    assert [c["person_or_org"]["family_name"] for c in data["metadata"]["creators"]] == [
        "Toru",
        "Utor",
    ]
    # kernel-2.x's <rights> is a child of the resource, not of a rightsList
    assert data["metadata"]["rights"] == [{"title": {"en": "Open Database License [ODbL]"}}]
    # its alternateIdentifier typed ISBN, `937-0-1234-56789-X`, is no ISBN (14 characters,
    # not 978/979, its check digit wrong): it was kept as one, which a target that checks
    # the scheme (InvenioRDM) refuses
    assert data["metadata"].get("identifiers", []) == []


def test_datacite_kernel_2_2_with_an_ns0_prefix() -> None:
    item = one("bolognese-ns0-kernel-2.2.xml")
    assert item.pid == "10.4231/d38g8fk8b"
    assert item.data["metadata"]["resource_type"] == {"id": "software"}
    assert len(item.data["metadata"]["creators"]) == 5


def test_several_authors_in_one_datacite_creator_are_each_a_creator() -> None:
    """DOI 10.25670/oi2018-001on lists three authors in one <creator>: before, the first was
    kept, with the affiliation of all three three times, and the others were lost."""
    creators = metadata("bolognese-creators-in-one-creator.xml")["creators"]
    assert [
        (c["person_or_org"]["family_name"], c["person_or_org"]["given_name"]) for c in creators
    ] == [
        ("Grošelj", "Blaž"),
        ("Oražem", "Miha"),
        ("Kovač", "Viljem"),
    ]
    assert all(c["affiliations"] == [{"name": "Onkološki inštitut Ljubljana"}] for c in creators)


def test_an_organisation_named_in_finnish_is_an_organisation() -> None:
    """'Helsingin yliopisto, soveltavan biologian laitos' (University of Helsinki, Department
    of Applied Biology) was a person with family name 'Helsingin yliopisto'."""
    [contributor] = metadata("helda-dspace-oai_dc.xml")["contributors"]
    assert contributor["person_or_org"] == {
        "type": "organizational",
        "name": "Helsingin yliopisto, soveltavan biologian laitos",
        "identifiers": [],
    }


def test_contributors_are_the_creators_of_a_record_without_dc_creator() -> None:
    """The HELDA report without its dc:creator (a department's series issue names only the
    department, as dc:contributor) failed with "no dc:creator"; its contributors are its
    creators now, as they are for MARC (one rule, `creators_or_contributors`)."""
    xml = (PUBLIC / "helda-dspace-oai_dc.xml").read_bytes()
    xml = xml.replace(b"<dc:creator>Tall, Anna</dc:creator>", b"")
    item = TransformItem("oai:helda:7634", "2024-01-01", [], wrap_metadata(xml))
    [item] = transform([item])
    assert item.error is None, item.error
    data = item.data["metadata"]  # type: ignore[index]
    assert [c["person_or_org"]["name"] for c in data["creators"]] == [
        "Helsingin yliopisto, soveltavan biologian laitos"
    ]
    assert "role" not in data["creators"][0]
    assert data["contributors"] == []


@pytest.mark.parametrize(
    "name",
    [
        "Universidad de Buenos Aires",
        "Universidade de São Paulo",
        "Universitetet i Oslo",
        "Karolinska Institutet",
        "Uniwersytet Warszawski",
        "Univerzita Karlova",
        "Max-Planck-Gesellschaft",
        "Deutsches Zentrum für Luft- und Raumfahrt",
        "Consejo Nacional de Investigaciones Científicas y Técnicas",
        "Bibliothèque nationale de France",
        "Politecnico di Milano",
        "北京大学",
    ],
)
def test_organisations_named_in_other_languages_are_organisations(name: str) -> None:
    item = TransformItem(
        "oai:x:1",
        "2024-01-01",
        [],
        wrap_metadata(
            '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>T</dc:title>'
            f"<dc:creator>{name}</dc:creator><dc:date>2020</dc:date></oai_dc:dc>"
        ),
    )
    [item] = transform([item])
    assert item.data["metadata"]["creators"][0]["person_or_org"]["type"] == "organizational"


def test_a_person_is_still_a_person() -> None:
    creators = metadata("conicet-dspace-GetRecord-oai_dc.xml")["creators"]
    assert [c["person_or_org"]["type"] for c in creators] == ["personal", "personal"]


def test_issn_in_dc_identifier_is_the_serial_the_record_is_published_in() -> None:
    """DSpace's dc.identifier.issn: before, dropped (no URL or URN form)."""
    data = metadata("nku-dspace-oai_dc.xml")
    assert data["related_identifiers"] == [
        {"identifier": "8755-4208", "scheme": "issn", "relation_type": {"id": "ispublishedin"}}
    ]
    assert data["identifiers"] == [
        {"identifier": "http://hdl.handle.net/11216/1280", "scheme": "url"}
    ]


def test_dspace_deposit_timestamps_are_kept_as_dates() -> None:
    """DSpace's oai_dc flattens dc.date.accessioned, .available and .issued into dc:date: the
    issued date is the publication date, and the deposit timestamps (one day, twice) were
    dropped; they are kept once as `other` dates."""
    data = metadata("nku-dspace-oai_dc.xml")
    assert data["publication_date"] == "2007-09"
    assert data["dates"] == [{"date": "2016-07-05", "type": {"id": "other"}}]


def test_isbn_of_a_book_part_and_eu_repo_alt_identifier() -> None:
    """CONICET: the ISBN of the book a chapter is in, and OpenAIRE's altIdentifier/url (another
    identifier of this record) were dropped."""
    data = metadata("conicet-dspace-GetRecord-oai_dc.xml")
    assert data["resource_type"] == {"id": "publication-section"}
    assert data["related_identifiers"] == [
        {
            "identifier": "978-987-558-611-6",
            "scheme": "isbn",
            "relation_type": {"id": "ispublishedin"},
        }
    ]
    assert data["identifiers"] == [
        {"identifier": "http://hdl.handle.net/11336/149241", "scheme": "url"},
        {"identifier": "http://www.unq.edu.ar/advf/documentos/5da9f2de18f72.pdf", "scheme": "url"},
    ]


def _dc(body: str, title: str = "T") -> dict[str, Any]:
    item = TransformItem(
        "oai:x:1",
        "2024-01-01",
        [],
        wrap_metadata(
            '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
            f'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{title}</dc:title>'
            f"<dc:creator>Doe, Jane</dc:creator><dc:date>2020</dc:date>{body}</oai_dc:dc>"
        ),
    )
    [item] = transform([item])
    assert item.error is None, item.error
    return item.data["metadata"]


def test_isbn_of_a_book_is_its_identifier_and_numbers_are_not_isbns() -> None:
    data = _dc(
        "<dc:type>Book</dc:type><dc:identifier>ISBN 978-3-16-148410-0</dc:identifier>"
        "<dc:identifier>0306406152</dc:identifier><dc:identifier>978-3-16-148410-1</dc:identifier>"
    )
    assert data["identifiers"] == [{"identifier": "978-3-16-148410-0", "scheme": "isbn"}]
    assert data["related_identifiers"] == []


def test_eu_repo_grant_agreement_is_funding() -> None:
    """OpenAIRE's dc:relation grantAgreement (Zenodo, DSpace, EPrints): before, dropped."""
    data = _dc(
        "<dc:relation>info:eu-repo/grantAgreement/EC/FP7/282896/EU/Strengthening%20X/SX"
        "</dc:relation>"
        "<dc:relation>info:eu-repo/grantAgreement/FCT/5876-PPCDTI/PTDC%2FSAU%2F1234%2F2008/PT"
        "</dc:relation>"
    )
    assert data["funding"] == [
        {
            "funder": {"id": "00k4n6c32", "name": "European Commission", "identifiers": []},
            "award": {"number": "282896", "title": {"en": "Strengthening X"}, "identifiers": []},
        },
        {
            "funder": {"name": "FCT", "identifiers": []},
            "award": {"number": "PTDC/SAU/1234/2008", "identifiers": []},
        },
    ]
    assert data["related_identifiers"] == []


def test_names_joined_by_an_escaped_br_are_two_creators() -> None:
    creators = metadata("texasstate-dspace-oai_dc-excerpt.xml")["creators"]
    assert [c["person_or_org"]["name"] for c in creators] == ["Polk, Lewis", "Mosley, Richard"]


def test_an_eu_repo_access_term_as_rights_text_is_no_right() -> None:
    """Dryad writes `<rights>info:eu-repo/semantics/openAccess</rights>`: an access right, not
    a license; before, a right titled by the URI (the rightsURI form was already skipped)."""
    assert metadata("bolognese-dryad-kernel-3-rights.xml")["rights"] == []


def test_isni_urls_are_isnis_and_three_letter_languages_are_two_letter_keys() -> None:
    data = metadata("bolognese-funderIdentifier.xml")
    assert data["funding"][0]["funder"]["identifiers"] == [
        {"identifier": "0000000119587073", "scheme": "isni"}
    ]
    # xml:lang="eng": the key InvenioRDM's multilingual strings use is `en`
    assert data["rights"][0]["title"] == {"en": "Creative Commons Attribution-NoDerivs 2.0 Generic"}


def test_a_creator_isni_or_gnd_given_as_a_url_is_the_bare_identifier() -> None:
    item = TransformItem(
        "oai:x:1",
        "2024-01-01",
        [],
        wrap_metadata(
            (PUBLIC / "bolognese-funderIdentifier.xml")
            .read_text(encoding="utf-8")
            .replace(">0000000134596520<", ">https://isni.org/isni/0000000134596520<")
            .replace(
                "</creators>",
                "<creator><creatorName>Goethe, Johann Wolfgang von</creatorName>"
                '<nameIdentifier nameIdentifierScheme="GND">https://d-nb.info/gnd/118540238'
                "</nameIdentifier></creator></creators>",
            )
        ),
    )
    [item] = transform([item])
    creators = item.data["metadata"]["creators"]
    assert creators[1]["person_or_org"]["identifiers"] == [
        {"identifier": "0000000134596520", "scheme": "isni"}
    ]
    assert creators[2]["person_or_org"]["identifiers"] == [
        {"identifier": "118540238", "scheme": "gnd"}
    ]


def test_a_contact_person_without_name_type_is_a_person() -> None:
    """CaltechDATA's ContactPerson 'Dietrich Feist' (no nameType, no comma) was an organisation;
    a ResearchGroup or HostingInstitution without nameType still is one."""
    contributors = metadata("caltechdata-tccon-excerpt.xml")["contributors"]
    assert [(c["role"]["id"], c["person_or_org"]["type"]) for c in contributors] == [
        ("hostinginstitution", "organizational"),
        ("contactperson", "personal"),
        ("researchgroup", "organizational"),
    ]


def test_a_data_manager_without_name_type_may_be_an_archive() -> None:
    """DataCite's OAI example names PANGAEA (an archive) as DataManager."""
    [manager, _] = metadata("datacite-oai-1.0-sample-kernel-2.1.xml")["contributors"]
    assert manager["person_or_org"] == {
        "type": "organizational",
        "name": "PANGAEA",
        "identifiers": [],
    }


def test_eprints_info_uris_of_pmid_are_identifiers() -> None:
    """ZORA: its own DOI is the pid, the journal's DOI (info:doi/) an identifier, and the
    PubMed id (info:pmid/) was dropped."""
    item = one("zora-eprints-oai_dc-excerpt.xml")
    assert item.pid == "10.5167/uzh-2"
    assert item.data["metadata"]["identifiers"] == [
        {"identifier": "10.1186/1478-7547-5-5", "scheme": "doi"},
        {"identifier": "17501999", "scheme": "pmid"},
    ]
    assert item.data["metadata"]["resource_type"] == {"id": "publication-article"}


def test_an_eu_repo_alt_identifier_doi_given_as_a_url() -> None:
    """oa.upm.es (EPrints) writes the published version's DOI as a doi.org URL after the
    altIdentifier prefix; before, no DOI form matched it and it was dropped."""
    data = _dc(
        "<dc:relation>info:eu-repo/semantics/altIdentifier/doi/"
        "http://dx.doi.org/10.1016/j.physb.2012.12.047</dc:relation>"
        "<dc:relation>http://www.sciencedirect.com/science/article/pii/S0921452612010988"
        "</dc:relation>"
    )
    assert data["identifiers"] == [{"identifier": "10.1016/j.physb.2012.12.047", "scheme": "doi"}]
    assert [r["identifier"] for r in data["related_identifiers"]] == [
        "http://www.sciencedirect.com/science/article/pii/S0921452612010988"
    ]


def test_ojs_issns_in_dc_source_are_the_journal() -> None:
    """OJS 3 writes the journal's ISSNs as dc:source values of their own (PKP forum 'OAI-PMH
    Dublin Core (DC) change for ISSN'; ojs.aaai.org: `<dc:source>2159-5399</dc:source>`)."""
    data = _dc(
        "<dc:type>info:eu-repo/semantics/article</dc:type>"
        '<dc:source xml:lang="en-US">Proceedings of the AAAI Conference on Artificial '
        "Intelligence; Vol. 40 No. 1: AAAI-26 Technical Tracks 1; 101-109</dc:source>"
        "<dc:source>2159-5399</dc:source>"
    )
    assert data["related_identifiers"] == [
        {"identifier": "2159-5399", "scheme": "issn", "relation_type": {"id": "ispublishedin"}}
    ]


def test_openedition_isbns_as_eu_repo_alt_identifiers_in_dc_identifier() -> None:
    """OpenEdition Books (its oai_dc documentation): `<dc:identifier>info:eu-repo/semantics/
    altIdentifier/isbn/978-2-8218-7547-0</dc:identifier>`, the book's ISBNs; before, dropped.
    `urn:issn:`/`urn:isbn:` are the ISSN/ISBN, not a URN scheme of their own."""
    data = _dc(
        "<dc:type>info:eu-repo/semantics/book</dc:type>"
        "<dc:identifier>https://hdl.handle.net/20.500.13089/31o4</dc:identifier>"
        "<dc:identifier>info:eu-repo/semantics/altIdentifier/isbn/978-2-8218-7547-0"
        "</dc:identifier>"
        "<dc:identifier>info:eu-repo/semantics/altIdentifier/isbn/978-3-86395-122-1"
        "</dc:identifier>"
        "<dc:identifier>urn:issn:0028-0836</dc:identifier>"
    )
    assert data["identifiers"] == [
        {"identifier": "https://hdl.handle.net/20.500.13089/31o4", "scheme": "url"},
        {"identifier": "978-2-8218-7547-0", "scheme": "isbn"},
        {"identifier": "978-3-86395-122-1", "scheme": "isbn"},
    ]
    assert data["related_identifiers"] == [
        {"identifier": "0028-0836", "scheme": "issn", "relation_type": {"id": "ispublishedin"}}
    ]


def test_zero_width_joiners_of_persian_words_and_emoji_are_kept() -> None:
    """ZWNJ (U+200C) is part of Persian spelling (`می‌شود`, `نامه‌ها`) and ZWJ (U+200D) joins
    emoji sequences; before, both were stripped as invisible, which changed the words."""
    title = "نامه\u200cها و آنچه می\u200cشود 👩\u200d🔬"
    data = _dc(f"<dc:description>\u200b{title}</dc:description>", title=title)
    assert data["title"] == title
    assert data["description"] == title  # the zero-width space before it is still dropped


def test_a_kernel_3_funder_contributor_is_funding() -> None:
    """Kernel-3 gave funders as contributors of type Funder (R2R, DOI 10.7284/904028): before,
    a contributor with role 'funder', which the target has not, and its Crossref Funder ID
    was dropped as no person identifier."""
    data = metadata("r2r-kernel-3-funder-contributor.xml")
    assert data["funding"] == [
        {
            "funder": {
                "name": "National Science Foundation",
                "identifiers": [{"scheme": "doi", "identifier": "10.13039/100000001"}],
            }
        }
    ]
    assert [c["role"]["id"] for c in data["contributors"]] == ["projectleader", "producer"]


def test_an_openaire_grant_as_a_funder_nameidentifier_is_the_award() -> None:
    """The OpenAIRE guidelines for data archives (and Invenio's DataCite export): a Funder
    contributor whose nameIdentifier is info:eu-repo/grantAgreement/EC/FP7/<project>."""
    resource = (PUBLIC / "r2r-kernel-3-funder-contributor.xml").read_text(encoding="utf-8")
    resource = resource.replace(
        '<contributor contributorType="Producer">',
        '<contributor contributorType="Funder"><contributorName>European Commission'
        '</contributorName><nameIdentifier nameIdentifierScheme="info">'
        "info:eu-repo/grantAgreement/EC/FP7/282896</nameIdentifier></contributor>"
        '<contributor contributorType="Producer">',
    )
    [item] = transform([TransformItem("oai:x:1", "2024-01-01", [], wrap_metadata(resource))])
    assert item.data["metadata"]["funding"][0] == {
        "funder": {"id": "00k4n6c32", "name": "European Commission", "identifiers": []},
        "award": {"number": "282896", "identifiers": []},
    }


def test_kernel_4_7_poster_presentation_and_other_relation() -> None:
    """DataCite 4.7's Poster and Presentation are the target's `poster`/`presentation` (before,
    `other`); its relationType `Other` is no relation type of the target (before, written as
    `other`, which the project itself avoids for dc:relation): it `references` the resource."""
    data = metadata("bolognese-full-v4.7-types-poster-excerpt.xml")
    assert data["resource_type"] == {"id": "poster"}
    assert [
        (r["relation_type"]["id"], r.get("resource_type")) for r in data["related_identifiers"]
    ] == [
        ("references", None),
        ("references", None),
        ("references", None),
        ("istranslationof", {"id": "poster"}),
    ]  # the same DOI in the same relation once (the Presentation one repeats it)


def test_dspace_journal_in_dc_relation_is_series_information() -> None:
    """NKU (DSpace) writes dc.relation.ispartofseries, the journal and its volume, into
    dc:relation (`Journal of Kentucky Studies;volume 24 September 2007`): it was dropped; its
    ISSN (dc:identifier) stays the serial the record is published in."""
    data = metadata("nku-dspace-oai_dc.xml")
    assert data["additional_descriptions"] == [
        {
            "description": "Journal of Kentucky Studies, vol. 24, September 2007",
            "type": {"id": "series-information"},
        }
    ]
    assert data["related_identifiers"] == [
        {"identifier": "8755-4208", "scheme": "issn", "relation_type": {"id": "ispublishedin"}}
    ]


def test_series_without_a_number_and_whole_references_are_no_citations() -> None:
    """HELDA's series name and its number in two dc:relation values, and an author-year
    reference in dc:source (ZORA's, with the authors and the article's title before the
    journal's) are not read as a journal citation: which part is the journal is not clear."""
    assert not any(
        entry["type"] == {"id": "series-information"}
        for entry in metadata("helda-dspace-oai_dc.xml")["additional_descriptions"]
    )
    zora = (PUBLIC / "zora-eprints-oai_dc-excerpt.xml").read_text()
    without_citation = re.sub(r"<dcterms:bibliographicCitation>.*?</dcterms:[^>]*>", "", zora)
    item = TransformItem("oai:x:2", "2024-01-01", [], wrap_metadata(without_citation))
    [item] = transform([item])
    assert item.error is None
    assert item.data["metadata"]["additional_descriptions"] == []


def test_eprints_bibliographic_citation_is_series_information() -> None:
    """ZORA (EPrints) writes the journal citation as a `dcterms:bibliographicCitation` inside
    oai_dc (its `dcterms` prefix bound to the elements' namespace): it was dropped."""
    assert metadata("zora-eprints-oai_dc-excerpt.xml")["additional_descriptions"] == [
        {
            "description": "Cost Effectiveness and Resource Allocation : C/E, vol. 5, p. 5",
            "type": {"id": "series-information"},
        }
    ]
    terms = _dc(
        '<dcterms:bibliographicCitation xmlns:dcterms="http://purl.org/dc/terms/">'
        "Journal of Foo, 12(3), 45-67</dcterms:bibliographicCitation>"
    )
    assert terms["additional_descriptions"] == [
        {
            "description": "Journal of Foo, vol. 12, no. 3, pp. 45–67",
            "type": {"id": "series-information"},
        }
    ]
