"""The OpenAIRE v4 import (`oai_openaire`) on real records (samples/public, see its README)."""

from __future__ import annotations

import re

import pytest
from lxml import etree

from oai_pipeline.transform import imports, openaire
from oai_pipeline.transform import vocabularies as vocab
from oai_pipeline.transform.base import TransformItem

from .records import transform, transform_one, wrap_metadata
from .test_public_records import PUBLIC, metadata, one

IRIS = "unimi-iris-oai_openaire.xml"
IRIS_NESTED = "unimi-iris-oai_openaire-nested-creators.xml"
MINIMAL = "openaire-guidelines-sample-minimal.xml"
FIELD_EXAMPLES = "openaire-guidelines-field-examples.xml"
INSPIRE = "inspirehep-oai_openaire-thesis.xml"


def _without(name: str, pattern: str) -> TransformItem:
    """A public record with the elements `pattern` matches removed."""
    text = (PUBLIC / name).read_text(encoding="utf-8")
    changed = re.sub(pattern, "", text, flags=re.S)
    assert changed != text, pattern
    return TransformItem(f"oai:test:{name}", "2024-01-01", [], wrap_metadata(changed))


def _item(name: str) -> TransformItem:
    """A public record as the harvester stores it."""
    xml = wrap_metadata((PUBLIC / name).read_bytes(), identifier=f"oai:test:{name}")
    return TransformItem(f"oai:test:{name}", "2024-01-01", [], xml)


def test_the_import_is_chosen_by_the_oaire_resource_root() -> None:
    root = etree.fromstring((PUBLIC / MINIMAL).read_bytes())
    assert imports.find_import(root) is openaire.import_openaire
    assert "oai_openaire" in imports.supported_formats()


def test_an_iris_journal_article() -> None:
    item = one(IRIS)
    data = item.data["metadata"]
    # the DOI is an alternateIdentifier (the identifier is the Handle): it is the pid
    assert item.pid == "10.30557/mt00041"
    assert item.data["pids"]["doi"]["identifier"] == "10.30557/mt00041"
    assert all(entry["scheme"] != "doi" for entry in data["identifiers"])
    assert data["resource_type"] == {"id": "publication-article"}
    assert data["title"] == (
        "I processi incorpati di costruzione della conoscenza nelle pratiche di cura"
    )
    assert [c["person_or_org"] for c in data["creators"]] == [
        {"type": "personal", "name": "S. Visioli", "family_name": "S. Visioli", "identifiers": []},
        {
            "type": "personal",
            "name": "L. Zannini",
            "family_name": "L. Zannini",
            "identifiers": [{"identifier": "0000-0001-7287-6616", "scheme": "orcid"}],
        },
    ]
    # IRIS writes `affiliation` (and its local IRIS/UGOV `nameIdentifier`s, no scheme the
    # target has) in the OAI-PMH namespace: the affiliation is read
    assert [c["affiliations"] for c in data["creators"]] == [
        [{"id": "00wjc7c48", "name": "University of Milan"}],
        [{"id": "00wjc7c48", "name": "University of Milan"}],
    ]
    assert data["publication_date"] == "2018"
    assert [(d["type"]["id"], d["date"]) for d in data["dates"]] == [
        ("accepted", "2018"),
        ("issued", "2018"),
        ("available", "2019-05-23"),
    ]
    assert data["languages"] == [{"id": "ita"}]
    assert data["description"].startswith("In ambito educativo, il corpo")
    assert [(d["type"]["id"], d["description"][:30]) for d in data["additional_descriptions"]] == [
        ("other", "In educational contexts, the b"),
        ("series-information", "METIS, vol. 8, no. 2, pp. 487–"),
    ]
    assert data["additional_descriptions"][1]["description"] == "METIS, vol. 8, no. 2, pp. 487–506"
    assert data["subjects"] == [
        {"subject": "body; educational practices; embodied knowledge; nursing; teaching"}
    ]
    assert data["sizes"] == ["413926 bytes"]
    assert data["formats"] == ["application/pdf"]
    # the Handle is a `datacite:identifier` in the kernel-3 namespace
    assert data["identifiers"] == [
        {"identifier": "2434/636308", "scheme": "handle"},
        {"identifier": "http://hdl.handle.net/2434/636308", "scheme": "urn"},
    ]
    # the COAR access right is no licence
    assert data.get("rights", []) == []
    assert item.data["files"]["links"] == [
        {
            "url": "https://air.unimi.it/bitstream/2434/636308/2/Finale%20pubblicato.pdf",
            "key": "Finale pubblicato.pdf",
        }
    ]


def test_iris_creators_wrapped_in_a_creator_are_read() -> None:
    item = one(IRIS_NESTED)
    creators = item.data["metadata"]["creators"]
    assert len(creators) == 45
    assert [c["person_or_org"]["name"] for c in (creators[0], creators[-1])] == [
        "W.J. Sutherland",
        "C. Wordley",
    ]
    assert item.data["metadata"]["identifiers"] == [
        {"identifier": "2434/907506", "scheme": "handle"}
    ]


def test_person_parts_in_a_namespace_no_server_uses_are_not_read() -> None:
    """Only the OAI-PMH namespace IRIS writes them in is read beside DataCite's."""
    text = (PUBLIC / IRIS).read_text(encoding="utf-8")
    moved = text.replace("<affiliation ", '<affiliation xmlns="urn:example:other" ')
    assert moved != text
    item = TransformItem("oai:test:other", "2024-01-01", [], wrap_metadata(moved))
    (result,) = transform([item])
    assert [c["affiliations"] for c in result.data["metadata"]["creators"]] == [[], []]


def test_the_guidelines_minimal_record() -> None:
    item = one(MINIMAL)
    data = item.data["metadata"]
    assert item.pid is None
    assert data["resource_type"] == {"id": "publication-report"}
    assert data["creators"][0]["person_or_org"]["family_name"] == "Dieterich"
    assert data["publication_date"] == "2011"
    assert data["languages"] == [{"id": "eng"}]
    assert data["identifiers"] == [
        {"identifier": "http://urn.kb.se/resolve?urn=urn:nbn:se:uu:diva-160648", "scheme": "urn"}
    ]


def test_the_guidelines_examples_of_licence_funding_and_creator() -> None:
    data = metadata(FIELD_EXAMPLES)
    assert data["rights"] == [
        {
            "id": "cc-by-nc-4.0",
            "title": {"en": "Creative Commons Attribution-NonCommercial"},
            "link": "http://creativecommons.org/licenses/by-nc/4.0/",
        }
    ]
    assert data["funding"] == [
        {
            "funder": {
                "name": "European Commission",
                "identifiers": [{"identifier": "10.13039/100010661", "scheme": "doi"}],
            },
            "award": {
                "number": "643410",
                "title": {"en": "Open Access Infrastructure for Research in Europe 2020"},
                "identifiers": [
                    {
                        "identifier": "http://cordis.europa.eu/project/rcn/194062_en.html",
                        "scheme": "url",
                    }
                ],
            },
        }
    ]
    evans = data["creators"][1]
    # the guidelines' placeholder ORCID `1234-1234-1234-1234` has a wrong check digit: no iD
    assert evans["person_or_org"]["identifiers"] == []
    # `01ab23cd4` is no ROR id: the affiliation keeps its name, the record is kept
    assert evans["affiliations"] == [{"name": "Institute of Science and Technology"}]


def test_a_funding_reference_as_dspace_writes_it() -> None:
    """A fundingReference as DSpace 7/8's oai_openaire crosswalk builds it from a Project
    entity (DSpace/DSpace `dspace/config/crosswalks/oai/metadataFormats/oai_openaire.xsl`:
    the award title first, every funder identifier typed `Crossref Funder ID`, an awardURI
    attribute even when empty), the Project's funder identified by its ROR. The ROR is the
    funder's id (before, it was kept as a DOI `https://ror.org/00k4n6c32`). The funding
    stream has no place in the record: InvenioRDM keeps an award's programme only in its
    awards vocabulary, and stores a harvested award as number, title and identifiers."""
    text = (PUBLIC / MINIMAL).read_text(encoding="utf-8")
    reference = (
        "<oaire:fundingReferences><oaire:fundingReference>"
        "<oaire:awardTitle>Open Access Infrastructure for Research in Europe 2020"
        "</oaire:awardTitle>"
        "<oaire:funderName>European Commission</oaire:funderName>"
        '<oaire:funderIdentifier funderIdentifierType="Crossref Funder ID">'
        "https://ror.org/00k4n6c32</oaire:funderIdentifier>"
        '<oaire:funderIdentifier funderIdentifierType="Crossref Funder ID">'
        "grid.270680.b</oaire:funderIdentifier>"
        "<oaire:fundingStream>Horizon 2020 Framework Programme</oaire:fundingStream>"
        '<oaire:awardNumber awardURI="">643410</oaire:awardNumber>'
        "</oaire:fundingReference></oaire:fundingReferences>"
    )
    changed = text.replace("<dc:language>", reference + "<dc:language>", 1)
    assert changed != text
    [item] = transform([TransformItem("oai:test:dspace", "2024-01-01", [], wrap_metadata(changed))])
    assert item.error is None, item.error
    assert item.data["metadata"]["funding"] == [
        {
            "funder": {
                "id": "00k4n6c32",
                "name": "European Commission",
                # no DOI: kept, but not as a DOI
                "identifiers": [{"identifier": "grid.270680.b", "scheme": "other"}],
            },
            "award": {
                "number": "643410",
                "title": {"en": "Open Access Infrastructure for Research in Europe 2020"},
                "identifiers": [],
            },
        }
    ]
    assert "Horizon 2020" not in str(item.data)


def test_an_inspire_thesis() -> None:
    item = one(INSPIRE)
    data = item.data["metadata"]
    assert item.pid == "10.1234/example.doi"
    assert data["resource_type"] == {"id": "publication-dissertation"}
    assert data["additional_titles"] == [{"title": "An Example", "type": {"id": "subtitle"}}]
    assert [c["person_or_org"]["type"] for c in data["creators"]] == [
        "organizational",  # Sample Collaboration
        "personal",
        "personal",
    ]
    # `datacite:date` without its `datacite:dates` wrapper is read
    assert data["publication_date"] == "2020-01-01"
    assert [(e["scheme"], e["identifier"]) for e in data["identifiers"]] == [
        ("url", "http://localhost:8000/literature/123456"),
        ("isbn", "978-3-16-148410-0"),
        ("handle", "12345/6789"),
        ("urn", "urn:nbn:de:1234-5678"),
        ("arxiv", "2509.17779"),
    ]
    assert data["additional_descriptions"] == [
        {
            "description": "JHEP, vol. 06, no. 2, First Edition, pp. 060–080",
            "type": {"id": "series-information"},
        }
    ]
    assert [link["key"] for link in item.data["files"]["links"]] == ["file1.pdf", "file2.pdf"]


@pytest.mark.parametrize(
    ("pattern", "location", "words"),
    [
        (r"<datacite:titles>.*?</datacite:titles>", "metadata.title", "title"),
        (r"<datacite:creators>.*?</datacite:creators>", "metadata.creators", "creator"),
        (r"<oaire:resourceType.*?</oaire:resourceType>", "metadata.resource_type", "resourceType"),
        (r'<datacite:date dateType="Issued">[^<]*</datacite:date>', "metadata.publication_date",
         "Issued date"),
    ],
)  # fmt: skip
def test_a_record_missing_a_mandatory_element_is_that_records_error(
    pattern: str, location: str, words: str
) -> None:
    good, bad = transform([_item(INSPIRE), _without(IRIS, pattern)])
    assert good.error is None and good.data is not None
    assert bad.data is None
    assert bad.error.type == "missing_field"
    assert bad.error.location == location
    assert words in bad.error.message


@pytest.mark.parametrize(
    ("uri", "label", "general", "expected"),
    [
        # the IRIS record's type; a translated label still maps by the URI
        ("http://purl.org/coar/resource_type/c_6501", "journal article", "literature",
         "publication-article"),
        ("http://purl.org/coar/resource_type/c_6501", "Artículo de revista", "literature",
         "publication-article"),
        # a concept whose label the dc:type keys do not read
        ("http://purl.org/coar/resource_type/c_2df8fbb1", "research article", "literature",
         "publication-article"),
        # no known URI: the label, then resourceTypeGeneral
        (None, "master thesis", "literature", "publication-dissertation"),
        ("http://purl.org/coar/resource_type/unknown", "Objeto", "dataset", "dataset"),
        (None, "Objeto", "other research product", "other"),
    ],
)  # fmt: skip
def test_coar_resource_types(uri: str | None, label: str, general: str, expected: str) -> None:
    assert vocab.coar_resource_type(uri, label, general) == expected


def test_et_al_as_a_creator_names_nobody() -> None:
    """IRIS and DSpace end a long author list with a creatorName `et al.`: it was a person
    of that name, as was a trailing `u.a.`, and `Dieterich, Ernst et al.` the given name
    `Ernst et al.`."""
    text = (PUBLIC / MINIMAL).read_text(encoding="utf-8")
    changed = text.replace(
        "<datacite:creatorName>Dieterich, Ernst</datacite:creatorName>",
        "<datacite:creatorName>Dieterich, Ernst et al.</datacite:creatorName>"
        "</datacite:creator><datacite:creator><datacite:creatorName>et al."
        "</datacite:creatorName></datacite:creator><datacite:creator>"
        "<datacite:creatorName>Müller, Hans u. a.</datacite:creatorName>",
    )
    assert changed != text
    item = TransformItem("oai:test:et-al", "2024-01-01", [], wrap_metadata(changed))
    (result,) = transform([item])
    assert result.error is None, result.error
    assert [c["person_or_org"] for c in result.data["metadata"]["creators"]] == [
        {
            "type": "personal",
            "name": "Dieterich, Ernst",
            "given_name": "Ernst",
            "family_name": "Dieterich",
            "identifiers": [],
        },
        {
            "type": "personal",
            "name": "Müller, Hans",
            "given_name": "Hans",
            "family_name": "Müller",
            "identifiers": [],
        },
    ]


def test_a_comment_inside_a_value_does_not_end_it() -> None:
    """dc:publisher (and the oaire values) were read up to the first comment inside them."""
    name = "unimi-iris-oai_openaire-nested-creators.xml"
    text = (PUBLIC / name).read_text(encoding="utf-8")
    changed = text.replace("Wiley Blackwell", "Wiley <!-- imprint --> Blackwell")
    assert changed != text
    item = TransformItem(f"oai:test:{name}", "2024-01-01", [], wrap_metadata(changed))
    transform_one(item)
    assert item.error is None
    assert item.data["metadata"]["publisher"] == "Wiley Blackwell Publishing"


def test_a_size_or_format_with_a_comment_inside_is_one_value() -> None:
    """`<datacite:size>413926 <!-- c -->bytes</datacite:size>` gave the sizes `413926` and
    `bytes`, a dc:format split by a comment two formats: each element is one value."""
    text = (PUBLIC / IRIS).read_text(encoding="utf-8")
    text = text.replace("413926 bytes", "413926 <!-- c -->bytes")
    text = text.replace("<dc:format>application/pdf", "<dc:format>application/<?pi x?>pdf")
    item = TransformItem(f"oai:test:{IRIS}", "2024-01-01", [], wrap_metadata(text))
    data = transform_one(item).data["metadata"]
    assert data["sizes"] == ["413926 bytes"]
    assert data["formats"] == ["application/pdf"]


def test_an_affiliation_repeated_by_its_ror_under_another_name_is_listed_once() -> None:
    """IRIS names a creator's university twice by one ROR, in English and in Italian: one ROR
    is one organisation, listed once under its first name (it was listed twice)."""
    text = (PUBLIC / IRIS).read_text(encoding="utf-8")
    milan = (
        '<affiliation affiliationIdentifierScheme="ROR"\n'
        '                         affiliationIdentifier="https://ror.org/00wjc7c48">'
        "University of Milan</affiliation>"
    )
    assert milan in text
    italian = milan.replace("University of Milan", "Università degli Studi di Milano")
    text = text.replace(milan, milan + italian, 1)
    item = TransformItem(f"oai:test:{IRIS}", "2024-01-01", [], wrap_metadata(text))
    data = transform_one(item).data["metadata"]
    assert [c["affiliations"] for c in data["creators"]] == [
        [{"id": "00wjc7c48", "name": "University of Milan"}],
        [{"id": "00wjc7c48", "name": "University of Milan"}],
    ]


def test_an_affiliation_by_name_beside_the_same_with_its_ror_is_one() -> None:
    """IRIS's creator with its university by name as well (`<affiliation>University of
    Milan</affiliation>` beside the one with its ROR) had it twice, once without the id: one
    organisation, listed once with its ROR, whichever of them comes first."""
    text = (PUBLIC / IRIS).read_text(encoding="utf-8")
    milan = (
        '<affiliation affiliationIdentifierScheme="ROR"\n'
        '                         affiliationIdentifier="https://ror.org/00wjc7c48">'
        "University of Milan</affiliation>"
    )
    before, first, after = text.split(milan)
    by_name = "<affiliation>university of  Milan</affiliation>"
    text = before + by_name + milan + first + milan + by_name + after
    item = TransformItem(f"oai:test:{IRIS}", "2024-01-01", [], wrap_metadata(text))
    data = transform_one(item).data["metadata"]
    assert [c["affiliations"] for c in data["creators"]] == [
        [{"id": "00wjc7c48", "name": "University of Milan"}],
        [{"id": "00wjc7c48", "name": "University of Milan"}],
    ]
