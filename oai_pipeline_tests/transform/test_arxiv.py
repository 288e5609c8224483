"""arXiv's own formats (`arXiv`, `arXivRaw`) as RDM records: the recorded responses, then each
mapping decision on records written like arXiv's."""

from __future__ import annotations

from pathlib import Path

import pytest
from lxml import etree

from oai_pipeline.transform import arxiv, imports
from oai_pipeline.transform.base import TransformItem
from oai_pipeline.transform.rdm_record import RDMRecord

from .records import (
    page_items,
    personal,
    transform,
    transform_one,
    transformed_metadata,
    wrap_metadata,
)

OAI_SAMPLES = Path(__file__).parent.parent / "oai" / "samples"  # copies of /work/shared/samples
ARXIV_HEAD = f'<arXiv xmlns="{arxiv.ARXIV}">'
RAW_HEAD = f'<arXivRaw xmlns="{arxiv.ARXIV_RAW}">'


def recorded_items(name: str) -> list[TransformItem]:
    """Every <record> of a recorded arXiv response, as the harvester stores it."""
    return page_items(name, OAI_SAMPLES)


def arxiv_item(body: str, identifier: str = "oai:arXiv.org:x") -> TransformItem:
    xml = wrap_metadata(ARXIV_HEAD + body + "</arXiv>", identifier=identifier)
    return TransformItem(identifier, "2024-01-01", [], xml)


def raw_item(body: str, identifier: str = "oai:arXiv.org:x") -> TransformItem:
    xml = wrap_metadata(RAW_HEAD + body + "</arXivRaw>", identifier=identifier)
    return TransformItem(identifier, "2024-01-01", [], xml)


AUTHOR = "<authors><author><keyname>Doe</keyname><forenames>Jane</forenames></author></authors>"
MINIMAL = f"<id>2301.00001</id><created>2023-01-01</created>{AUTHOR}<title>T</title>"


# The recorded responses


def test_recorded_get_record() -> None:
    [item] = recorded_items("arxiv-GetRecord-arXiv-2015.xml")
    transform_one(item, set_communities={"physics:astro-ph": "astro"})
    assert item.error is None, item.error
    assert item.pid == "10.48550/arxiv.1507.03011"
    assert item.communities == ["astro"]
    data = item.data
    assert data["pids"] == {
        "doi": {"identifier": "10.48550/arxiv.1507.03011", "provider": "external"}
    }
    metadata = data["metadata"]
    assert metadata["resource_type"] == {"id": "publication-preprint"}
    # the recording's literal `\n` stays (it could be TeX); real whitespace runs are collapsed
    assert metadata["title"] == (
        "The Distribution of Star Formation and Metals in the Low Surface\\n"
        " Brightness Galaxy UGC 628"
    )
    assert [c["person_or_org"] for c in metadata["creators"]] == [
        {
            "type": "personal",
            "name": "Young, J. E.",
            "given_name": "J. E.",
            "family_name": "Young",
            "identifiers": [],
        },
        {
            "type": "personal",
            "name": "de Naray, Rachel Kuzio",
            "given_name": "Rachel Kuzio",
            "family_name": "de Naray",
            "identifiers": [],
        },
        {
            "type": "personal",
            "name": "Wang, Sharon X.",
            "given_name": "Sharon X.",
            "family_name": "Wang",
            "identifiers": [],
        },
    ]
    assert all(c["affiliations"] == [] for c in metadata["creators"])
    assert metadata["publication_date"] == "2015-07-10"
    assert metadata["dates"] == []  # one version: no `updated`
    assert metadata["description"].startswith(
        "We introduce the MUSCEL Program (MUltiwavelength observations of the\\nStructure,"
    )
    assert metadata["description"].endswith("in a more standard inside-out\\nfashion.\\n")
    assert metadata["additional_descriptions"] == [
        {"description": "Comments: 13 pages, 7 figures", "type": {"id": "other"}}
    ]
    assert metadata["subjects"] == [{"subject": "astro-ph.GA", "scheme": "arXiv"}]
    assert metadata["rights"] == [
        {
            "title": {"en": "arXiv.org perpetual, non-exclusive license to distribute"},
            "link": "http://arxiv.org/licenses/nonexclusive-distrib/1.0/",
        }
    ]
    assert metadata["publisher"] == "arXiv"
    assert metadata["identifiers"] == [{"identifier": "arXiv:1507.03011", "scheme": "arxiv"}]
    assert metadata["related_identifiers"] == []
    assert data["files"] == {"enabled": False, "links": []}
    RDMRecord.model_validate(data)


def test_recorded_list_records_page() -> None:
    """All 46 records of the recorded `cs` page: affiliations, MSC and ACM classes, a CC
    license, `updated` dates and journal DOIs, each record's DOI derived from its id."""
    items = transform(recorded_items("arxiv-ListRecords-cs-2015-01-16_2015-01-18.xml"))
    assert len(items) == 46
    for item in items:
        assert item.error is None, (item.identifier, item.error)
        number = item.identifier.removeprefix("oai:arXiv.org:")
        assert item.pid == f"10.48550/arxiv.{number}"
    by_id = {
        item.identifier.removeprefix("oai:arXiv.org:"): item.data["metadata"] for item in items
    }

    first = by_id["1101.4388"]
    assert first["publication_date"] == "2011-01-23"
    assert first["dates"] == [{"date": "2012-03-28", "type": {"id": "updated"}}]
    assert first["related_identifiers"] == [
        {
            "identifier": "10.1016/j.acha.2012.03.009",
            "scheme": "doi",
            "relation_type": {"id": "isversionof"},
        }
    ]
    assert first["additional_descriptions"][1] == {
        "description": "Journal reference: Appl. Comput. Harmon. Anal., 34:96-116, 2013",
        "type": {"id": "other"},
    }
    assert [s["subject"] for s in first["subjects"]] == ["stat.ML", "cs.LG", "math.FA"]

    morvant = by_id["1207.1019"]["creators"]
    assert [(c["person_or_org"]["name"], c["affiliations"]) for c in morvant] == [
        ("Morvant, Emilie", [{"name": "LIF"}]),
        ("Habrard, Amaury", [{"name": "LAHC"}]),
        ("Ayache, Stéphane", [{"name": "LIF"}]),
    ]
    assert by_id["1501.03549"]["subjects"] == [
        {"subject": "math.MG", "scheme": "arXiv"},
        {"subject": "cs.CG", "scheme": "arXiv"},
        {"subject": "52C25", "scheme": "MSC"},
        {"subject": "74N10", "scheme": "MSC"},
        {"subject": "I.3.5", "scheme": "ACM CCS"},
    ]
    assert by_id["1501.03617"]["rights"] == [
        {"id": "cc-by-3.0", "link": "http://creativecommons.org/licenses/by/3.0/"}
    ]
    # an indented line starts a new line of the abstract; the wrapping of the rest is undone
    stretching = by_id["1404.5569"]["description"]
    assert "overpacking, i.e., the maximum size packed into any bin.<br>We give an algorithm" in (
        stretching
    )
    assert all("\n" not in m["description"] for m in by_id.values())


# The arXiv format, field by field


def test_authors_with_affiliations_and_a_suffix() -> None:
    metadata = transformed_metadata(
        arxiv_item(
            "<id>2401.00001</id><created>2024-01-01</created><authors>"
            "<author><keyname>Lovelace</keyname><forenames>Ada</forenames>"
            "<affiliation>University of London</affiliation>"
            "<affiliation>Analytical Society</affiliation>"
            "<affiliation>University of London</affiliation></author>"
            "<author><keyname>Hopper</keyname><forenames>Grace\n  Brewster</forenames>"
            "<suffix>Jr.</suffix><affiliation>Yale</affiliation></author>"
            "<author><keyname>Euler</keyname></author>"
            "<author><keyname>ATLAS Collaboration</keyname></author>"
            "<author><keyname> </keyname><forenames/></author>"  # an empty author
            "</authors><title>T</title>"
        )
    )
    assert metadata["creators"] == [
        {
            "person_or_org": {
                "type": "personal",
                "name": "Lovelace, Ada",
                "given_name": "Ada",
                "family_name": "Lovelace",
                "identifiers": [],
            },
            "affiliations": [{"name": "University of London"}, {"name": "Analytical Society"}],
        },
        {
            "person_or_org": {
                "type": "personal",
                "name": "Hopper Jr., Grace Brewster",
                "given_name": "Grace Brewster",
                "family_name": "Hopper Jr.",
                "identifiers": [],
            },
            "affiliations": [{"name": "Yale"}],
        },
        {
            "person_or_org": {
                "type": "personal",
                "name": "Euler",
                "family_name": "Euler",
                "identifiers": [],
            },
            "affiliations": [],
        },
        {
            "person_or_org": {
                "type": "organizational",
                "name": "ATLAS Collaboration",
                "identifiers": [],
            },
            "affiliations": [],
        },
    ]


def test_a_keyname_or_forenames_of_digits_only_names_nobody() -> None:
    """A keyname or forenames of digits and punctuation only (`12345`, `0000-0002`: a number
    in the name's field) was the author's family or given name, and `12345` alone a person so
    named. Such a part names nobody, as a DataCite familyName or givenName does: an author
    with no other name is left out, forenames alone are the one name, as without a keyname."""
    metadata = transformed_metadata(
        arxiv_item(
            "<id>2401.00001</id><created>2024-01-01</created><authors>"
            "<author><keyname>12345</keyname></author>"
            "<author><keyname>12345</keyname><forenames>2019-01</forenames>"
            "<suffix>Jr.</suffix></author>"
            "<author><keyname>Doe</keyname><forenames>0000-0002</forenames></author>"
            "<author><keyname>12345</keyname><forenames>Jane</forenames></author>"
            "</authors><title>T</title>"
        )
    )
    assert [c["person_or_org"] for c in metadata["creators"]] == [
        personal("Doe"),
        personal("Jane"),
    ]


def test_a_record_whose_only_author_is_digits_has_no_creator() -> None:
    """Its error says the author is missing, in both formats."""
    item = arxiv_item(
        "<id>2301.00001</id><created>2023-01-01</created>"
        "<authors><author><keyname>12345</keyname></author></authors><title>T</title>"
    )
    assert _error(item) == ("missing_field", "metadata.creators")
    item = raw_item("<id>0704.0002</id><title>T</title><authors>12345, 2019-01</authors>")
    assert _error(item) == ("missing_field", "metadata.creators")


def test_categories_and_classes_are_subjects() -> None:
    metadata = transformed_metadata(
        arxiv_item(
            MINIMAL + "<categories>math.AG  hep-th\nmath.AG</categories>"
            "<msc-class>14J60 (Primary) 14F05, 14J26 (Secondary)</msc-class>"
            "<acm-class>F.2.2; I.2.7</acm-class>"
        )
    )
    assert metadata["subjects"] == [
        {"subject": "math.AG", "scheme": "arXiv"},  # the primary category first
        {"subject": "hep-th", "scheme": "arXiv"},
        {"subject": "14J60", "scheme": "MSC"},
        {"subject": "14F05", "scheme": "MSC"},
        {"subject": "14J26", "scheme": "MSC"},
        {"subject": "F.2.2", "scheme": "ACM CCS"},
        {"subject": "I.2.7", "scheme": "ACM CCS"},
    ]


def test_an_msc_class_without_codes_is_kept_as_written() -> None:
    metadata = transformed_metadata(arxiv_item(MINIMAL + "<msc-class>Primary: none</msc-class>"))
    assert metadata["subjects"] == [{"subject": "Primary: none", "scheme": "MSC"}]


def test_the_derived_doi_is_the_pid_and_journal_dois_are_related() -> None:
    item = arxiv_item(
        "<id>0704.0001</id><created>2007-04-02</created><updated>2007-07-24</updated>"
        + AUTHOR
        + "<title>Calculation of prompt diphoton production cross sections at Tevatron and\n"
        "  LHC energies</title>"
        "<comments>37 pages, 15 figures; published version</comments>"
        "<report-no>ANL-HEP-PR-07-12</report-no>"
        "<journal-ref>Phys.Rev.D76:013009,2007</journal-ref>"
        "<doi>10.1103/PhysRevD.76.013009  https://doi.org/10.1103/PhysRevD.76.019901 not-a-doi "
        "10.48550/arXiv.0704.0001 10.1103/physrevd.76.013009</doi>"
    )
    transform_one(item)
    assert item.error is None, item.error
    assert item.pid == "10.48550/arxiv.0704.0001"
    assert item.data["pids"]["doi"]["identifier"] == "10.48550/arxiv.0704.0001"
    metadata = item.data["metadata"]
    assert metadata["title"] == (
        "Calculation of prompt diphoton production cross sections at Tevatron and LHC energies"
    )
    # each published DOI once, lower-cased; arXiv's own DOI and the malformed one left out
    assert metadata["related_identifiers"] == [
        {
            "identifier": "10.1103/physrevd.76.013009",
            "scheme": "doi",
            "relation_type": {"id": "isversionof"},
        },
        {
            "identifier": "10.1103/physrevd.76.019901",
            "scheme": "doi",
            "relation_type": {"id": "isversionof"},
        },
    ]
    assert metadata["identifiers"] == [{"identifier": "arXiv:0704.0001", "scheme": "arxiv"}]
    assert metadata["additional_descriptions"] == [
        {
            "description": "Comments: 37 pages, 15 figures; published version",
            "type": {"id": "other"},
        },
        {"description": "Journal reference: Phys.Rev.D76:013009,2007", "type": {"id": "other"}},
        {"description": "Report number: ANL-HEP-PR-07-12", "type": {"id": "other"}},
    ]
    assert metadata["dates"] == [{"date": "2007-07-24", "type": {"id": "updated"}}]


def test_own_doi_prefixes_keep_arxivs_doi() -> None:
    """The option for arXiv's oai_dc (README) does not disturb the arXiv format."""
    body = MINIMAL + "<doi>10.1103/PhysRevD.76.013009</doi>"
    item = transform_one(arxiv_item(body), own_doi_prefixes=["10.48550"])
    assert item.error is None, item.error
    assert item.pid == "10.48550/arxiv.2301.00001"
    assert [r["identifier"] for r in item.data["metadata"]["related_identifiers"]] == [
        "10.1103/physrevd.76.013009"
    ]


@pytest.mark.parametrize(
    ("written", "canonical", "month"),
    [
        ("math/0211159", "math/0211159", "2002-11"),
        ("hep-th/9901001", "hep-th/9901001", "1999-01"),
        ("math.GT/0309136", "math/0309136", "2003-09"),  # with the subject class
        ("1507.03011", "1507.03011", "2015-07"),
        ("2301.00001v2", "2301.00001", "2023-01"),  # with a version
        ("arXiv:0704.0001", "0704.0001", "2007-04"),
    ],
)
def test_old_and_new_ids(written: str, canonical: str, month: str) -> None:
    # no `created`: the id says the month of the first version
    item = arxiv_item(f"<id>{written}</id>{AUTHOR}<title>T</title>")
    metadata = transformed_metadata(item)
    assert item.pid == f"10.48550/arxiv.{canonical}".lower()
    assert metadata["identifiers"] == [{"identifier": f"arXiv:{canonical}", "scheme": "arxiv"}]
    assert metadata["publication_date"] == month


def test_an_unreadable_created_date_falls_back_to_the_ids_month() -> None:
    item = arxiv_item(f"<id>math/0211159</id><created>2002-13-45</created>{AUTHOR}<title>T</title>")
    assert transformed_metadata(item)["publication_date"] == "2002-11"


@pytest.mark.parametrize("updated", ["2015-02-30", "last week", "  "])
def test_a_bad_updated_date_is_left_out(updated: str) -> None:
    item = arxiv_item(MINIMAL + f"<updated>{updated}</updated>")
    metadata = transformed_metadata(item)
    assert metadata["dates"] == []
    assert metadata["publication_date"] == "2023-01-01"


def test_the_abstract_is_escaped_text_not_html() -> None:
    """TeX's `<` and `&` are characters of the abstract: `$a<b$` read as HTML would lose
    `<b$ … >` as a tag. An indented line starts a new line (arXiv's rule)."""
    metadata = transformed_metadata(
        arxiv_item(
            MINIMAL
            + "<abstract>  We show $x&lt;y$ and $z>w$ for all\n$\\nu$ &amp; &lt;i&gt;T&lt;/i&gt;.\n"
            "  A second paragraph\nwrapped.\n</abstract>"
        )
    )
    assert metadata["description"] == (
        "We show $x&lt;y$ and $z&gt;w$ for all $\\nu$ &amp; &lt;i&gt;T&lt;/i&gt;."
        "<br>A second paragraph wrapped."
    )


def test_licenses() -> None:
    def rights(url: str) -> list[dict]:
        return transformed_metadata(arxiv_item(MINIMAL + f"<license>{url}</license>"))["rights"]

    assert rights("http://creativecommons.org/licenses/by-nc-sa/4.0/") == [
        {"id": "cc-by-nc-sa-4.0", "link": "http://creativecommons.org/licenses/by-nc-sa/4.0/"}
    ]
    assert rights("http://creativecommons.org/publicdomain/zero/1.0/")[0]["id"] == "cc0-1.0"
    assert rights("http://arxiv.org/licenses/assumed-1991-2003/") == [
        {
            "title": {"en": "arXiv.org assumed non-exclusive license to distribute (1991-2003)"},
            "link": "http://arxiv.org/licenses/assumed-1991-2003/",
        }
    ]
    assert rights("https://example.org/my-license") == [
        {
            "title": {"en": "https://example.org/my-license"},
            "link": "https://example.org/my-license",
        }
    ]
    assert transformed_metadata(arxiv_item(MINIMAL))["rights"] == []


# Errors: the record's own, with a location; the batch goes on


def _error(item: TransformItem) -> tuple[str, str]:
    good = arxiv_item(MINIMAL, identifier="oai:arXiv.org:good")
    transform([item, good])
    assert good.error is None and good.data is not None
    assert item.data is None and item.pid is None
    assert item.error is not None
    return item.error.type, item.error.location


def test_missing_title_is_the_records_error() -> None:
    item = arxiv_item(f"<id>2301.00001</id><created>2023-01-01</created>{AUTHOR}<title> </title>")
    assert _error(item) == ("missing_field", "metadata.title")
    assert item.error.message == "the record has no title"


def test_missing_id_is_the_records_error() -> None:
    item = arxiv_item(f"<created>2023-01-01</created>{AUTHOR}<title>T</title>")
    assert _error(item) == ("missing_field", "pids.doi")
    assert "arXiv identifier" in item.error.message


def test_a_malformed_id_is_the_records_error() -> None:
    item = arxiv_item(f"<id>no such id</id>{AUTHOR}<title>T</title>")
    assert _error(item) == ("validation", "pids.doi")
    assert "'no such id' is not an arXiv identifier" in item.error.message


def test_no_named_author_is_the_records_error() -> None:
    item = arxiv_item(
        "<id>2301.00001</id><created>2023-01-01</created>"
        "<authors><author><keyname/></author></authors><title>T</title>"
    )
    assert _error(item) == ("missing_field", "metadata.creators")


# arXivRaw

# 0704.0001 as arXivRaw writes it (its values as in arXiv's metadata snapshot, the abstract
# shortened): TeX accents in the authors, two versions, report-no.
RAW_0704_0001 = (
    "<id>0704.0001</id><submitter>Pavel Nadolsky</submitter>"
    '<version version="v1"><date>Mon, 2 Apr 2007 19:18:42 GMT</date><size>810kb</size>'
    "<source_type>D</source_type></version>"
    '<version version="v2"><date>Tue, 24 Jul 2007 20:10:27 GMT</date><size>810kb</size>'
    "<source_type>D</source_type></version>"
    "<title>Calculation of prompt diphoton production cross sections at Tevatron and\n"
    "  LHC energies</title>"
    "<authors>C. Bal\\'azs, E. L. Berger, P. M. Nadolsky, C.-P. Yuan</authors>"
    "<categories>hep-ph</categories>"
    "<comments>37 pages, 15 figures; published version</comments>"
    "<report-no>ANL-HEP-PR-07-12</report-no>"
    "<journal-ref>Phys.Rev.D76:013009,2007</journal-ref>"
    "<doi>10.1103/PhysRevD.76.013009</doi>"
    "<abstract>  A fully differential calculation in perturbative quantum chromodynamics is\n"
    "presented for the production of massive photon pairs at hadron colliders.\n</abstract>"
)


def test_raw_record() -> None:
    item = raw_item(RAW_0704_0001, identifier="oai:arXiv.org:0704.0001")
    metadata = transformed_metadata(item)
    assert item.pid == "10.48550/arxiv.0704.0001"
    assert metadata["title"] == (
        "Calculation of prompt diphoton production cross sections at Tevatron and LHC energies"
    )
    assert [
        (c["person_or_org"]["family_name"], c["person_or_org"]["given_name"])
        for c in metadata["creators"]
    ] == [("Balázs", "C."), ("Berger", "E. L."), ("Nadolsky", "P. M."), ("Yuan", "C.-P.")]
    # the first version is the publication, each later one an update
    assert metadata["publication_date"] == "2007-04-02"
    assert metadata["dates"] == [
        {"date": "2007-07-24", "type": {"id": "updated"}, "description": "v2"}
    ]
    assert metadata["version"] == "v2"
    assert metadata["description"] == (
        "A fully differential calculation in perturbative quantum chromodynamics is presented "
        "for the production of massive photon pairs at hadron colliders."
    )
    assert metadata["related_identifiers"] == [
        {
            "identifier": "10.1103/physrevd.76.013009",
            "scheme": "doi",
            "relation_type": {"id": "isversionof"},
        }
    ]
    assert metadata["subjects"] == [{"subject": "hep-ph", "scheme": "arXiv"}]
    assert [d["description"] for d in metadata["additional_descriptions"]] == [
        "Comments: 37 pages, 15 figures; published version",
        "Journal reference: Phys.Rev.D76:013009,2007",
        "Report number: ANL-HEP-PR-07-12",
    ]


def test_an_authors_affiliations_are_compared_as_other_formats_compare_them() -> None:
    """An affiliation given twice in other case or spacing (`CERN` and `Cern`, `University of
    London` and the same with a no-break space) was listed twice: arXiv's were compared by
    their exact text. They are compared as DataCite's, OpenAIRE's and MARC's are
    (`unique_affiliations`), the first kept."""
    metadata = transformed_metadata(
        arxiv_item(
            "<id>2401.00001</id><created>2024-01-01</created><authors>"
            "<author><keyname>Lovelace</keyname><forenames>Ada</forenames>"
            "<affiliation>CERN</affiliation><affiliation>University of London</affiliation>"
            "<affiliation>Cern</affiliation><affiliation>University\u00a0of London</affiliation>"
            "</author></authors><title>T</title>"
        )
    )
    assert [c["affiliations"] for c in metadata["creators"]] == [
        [{"name": "CERN"}, {"name": "University of London"}]
    ]


def test_a_raw_authors_affiliations_are_compared_as_other_formats_compare_them() -> None:
    """arXivRaw's affiliations, in parentheses and as numbered notes, likewise."""
    body = (
        "<id>0704.0002</id><title>T</title>"
        "<authors>Author One (CERN) (1), Author Two (1) ((1) cern)</authors>"
    )
    creators = transformed_metadata(raw_item(body))["creators"]
    assert [c["affiliations"] for c in creators] == [[{"name": "CERN"}], [{"name": "cern"}]]


@pytest.mark.parametrize(
    ("authors", "expected"),
    [
        (
            "Ileana Streinu and Louis Theran",
            [("Streinu, Ileana", []), ("Theran, Louis", [])],
        ),
        (
            "A. Smith, B. Jones and C. Brown",
            [("Smith, A.", []), ("Jones, B.", []), ("Brown, C.", [])],
        ),
        (
            "Sandro Wimberger, Alexander Wimberger, and Dan Anderson",
            [("Wimberger, Sandro", []), ("Wimberger, Alexander", []), ("Anderson, Dan", [])],
        ),
        (  # affiliations in parentheses, a particle, a suffix
            "John von Neumann (IAS, Princeton), Rachel Kuzio de Naray, Bill Gates Jr",
            [
                ("von Neumann, John", ["IAS, Princeton"]),
                ("de Naray, Rachel Kuzio", []),
                ("Gates Jr, Bill", []),
            ],
        ),
        (  # a suffix after a comma is the name's, not a person named `Jr.`
            "R. Bruce Smith, Jr. (Yale), Jane Doe and Bob Roe, III",
            [("Smith Jr., R. Bruce", ["Yale"]), ("Doe, Jane", []), ("Roe III, Bob", [])],
        ),
        (  # numbered affiliations, as arXiv's help asks for them
            "Author One (1), Author Two (1 and 2), Author Three (2) "
            "((1) Institution One, (2) Institution Two)",
            [
                ("One, Author", ["Institution One"]),
                ("Two, Author", ["Institution One", "Institution Two"]),
                ("Three, Author", ["Institution Two"]),
            ],
        ),
        (
            "ABCD Collaboration: Author One, Author Two",
            [("ABCD Collaboration", []), ("One, Author", []), ("Two, Author", [])],
        ),
        (
            "Author One, Author Two, for the ABCD Collaboration",
            [("One, Author", []), ("Two, Author", []), ("ABCD Collaboration", [])],
        ),
        (  # digits name nobody (`12345`, a note number outside parentheses), as the
            # arXiv format's keyname and forenames: `Jane 2019` is the one name `Jane`
            "12345, A. Smith, 2, Jane 2019 and 0000-0002 Doe",
            [("Smith, A.", []), ("Jane", []), ("Doe", [])],
        ),
        (  # TeX accents
            "Heiko R\\\"oglin, S{\\o}ren Kierkegaard, J. \\v{S}im\\'a\\v{c}ek, \\'{I}\\~nigo "
            "Arregui, Ferm\\'\\i n Huerta and Paul Erd{\\H{o}}s et al.",
            [
                ("Röglin, Heiko", []),
                ("Kierkegaard, Søren", []),
                ("Šimáček, J.", []),
                ("Arregui, Íñigo", []),
                ("Huerta, Fermín", []),
                ("Erdős, Paul", []),
            ],
        ),
    ],
)
def test_raw_authors_string_is_split_into_persons(
    authors: str, expected: list[tuple[str, list[str]]]
) -> None:
    body = f"<id>0704.0002</id><title>T</title><authors>{authors}</authors>"
    creators = transformed_metadata(raw_item(body))["creators"]
    assert [
        (c["person_or_org"]["name"], [a["name"] for a in c["affiliations"]]) for c in creators
    ] == expected
    organisations = {c["person_or_org"]["name"] for c in creators} & {"ABCD Collaboration"}
    for creator in creators:
        kind = "organizational" if creator["person_or_org"]["name"] in organisations else "personal"
        assert creator["person_or_org"]["type"] == kind


@pytest.mark.parametrize(
    ("authors", "expected"),
    [
        ("A. Smith 1", [("Smith, A.", [])]),  # was the one name `A. Smith`
        ("A. Smith1 and Jürgen Müller2", [("Smith, A.", []), ("Müller, Jürgen", [])]),
        ("A. Smith*, B. Jones †", [("Smith, A.", []), ("Jones, B.", [])]),
        (  # the marks are note numbers, as `(1)` is: the notes are their affiliations
            "A. Smith 1, B. Jones2, C. Brown 1 (2) ((1) MIT, (2) CERN)",
            [("Smith, A.", ["MIT"]), ("Jones, B.", ["CERN"]), ("Brown, C.", ["MIT", "CERN"])],
        ),
        (  # a list of marks is split at its comma, as the authors are: `2` is the name before's
            "A. Smith1,2, B. Jones 2 ((1) MIT, (2) CERN)",
            [("Smith, A.", ["MIT", "CERN"]), ("Jones, B.", ["CERN"])],
        ),
        (  # TeX superscripts, a number or a letter
            "A. Smith$^{1,2}$, B. Jones$^2$ and C. Brown$^{a}$ ((1) MIT, (2) CERN)",
            [("Smith, A.", ["MIT", "CERN"]), ("Jones, B.", ["CERN"]), ("Brown, C.", [])],
        ),
        (  # TeX's signs, as superscripts or bare, one or more
            "A. Smith$^\\dagger$, B. Jones$^{\\ddagger\\ast}$, C. Brown$\\star$, "
            "D. Green\\S and E. White$^{\\dagger,\\ddagger}$",
            [
                ("Smith, A.", []),
                ("Jones, B.", []),
                ("Brown, C.", []),
                ("Green, D.", []),
                ("White, E.", []),
            ],
        ),
        (  # a name's own TeX command is no sign: `\Sigma` is not `\S`
            "A. Smith\\Sigma",
            [("Smith\\Sigma, A.", [])],
        ),
        (  # a mark after the suffix or before it
            "R. Bruce Smith Jr. 1, Bob Roe1, III and Carl Cole III1 ((1) Yale)",
            [
                ("Smith Jr., R. Bruce", ["Yale"]),
                ("Roe III, Bob", ["Yale"]),
                ("Cole III, Carl", ["Yale"]),
            ],
        ),
        (  # a number glued to a capital is a name's (an experiment's: `NA62`, `H1`)
            "A. Smith, NA62, H1 Collaboration",
            [("Smith, A.", []), ("NA62", []), ("H1 Collaboration", [])],
        ),
    ],
)
def test_a_mark_after_a_raw_authors_name_is_no_part_of_it(
    authors: str, expected: list[tuple[str, list[str]]]
) -> None:
    """An affiliation's number after an author's name (`A. Smith 1`, `A. Smith1`, TeX's
    `A. Smith$^{1}$`) or a sign (`A. Smith*`, for the corresponding author) was part of the
    name: `Smith1`, or, a part of digits naming nobody, the one name `A. Smith` with no given
    name. It is a mark, no part of the name; a number points to the numbered notes, as `(1)`
    does. A number glued to a capital letter stays the name's (`H1`, `NA62`), as do the digits
    of names the recent rules read (`Jane 2019`: the one name `Jane`)."""
    body = f"<id>0704.0002</id><title>T</title><authors>{authors}</authors>"
    creators = transformed_metadata(raw_item(body))["creators"]
    assert [
        (c["person_or_org"]["name"], [a["name"] for a in c["affiliations"]]) for c in creators
    ] == expected


def test_raw_bad_version_dates() -> None:
    """A version date that does not parse is left out; without the first version's date the
    id says the month."""
    item = raw_item(
        "<id>0704.0002</id><title>T</title><authors>A. Smith</authors>"
        '<version version="v1"><date>sometime</date></version>'
        '<version version="v3"><date>Wed, 3 Oct 2007 00:00:00 GMT</date></version>'
        '<version version="v2"><date>Thu, 99 Jul 2007 00:00:00 GMT</date></version>'
    )
    metadata = transformed_metadata(item)
    assert metadata["publication_date"] == "2007-04"
    assert metadata["dates"] == [
        {"date": "2007-10-03", "type": {"id": "updated"}, "description": "v3"}
    ]
    assert metadata["version"] == "v3"


def test_raw_missing_title_and_authors() -> None:
    item = raw_item("<id>0704.0002</id><authors>A. Smith</authors>")
    transform_one(item)
    assert (item.error.type, item.error.location) == ("missing_field", "metadata.title")
    item = raw_item("<id>0704.0002</id><title>T</title><authors> ; et al.</authors>")
    transform_one(item)
    assert (item.error.type, item.error.location) == ("missing_field", "metadata.creators")


# The registry and the transformer


def test_the_transformer_picks_the_import_by_root_element() -> None:
    def root(xml: str) -> etree._Element:
        return etree.fromstring(xml)

    assert imports.find_import(root(ARXIV_HEAD + "</arXiv>")) is arxiv.import_arxiv
    assert imports.find_import(root(RAW_HEAD + "</arXivRaw>")) is arxiv.import_arxiv_raw
    # arXiv's namespace with another root, or the root in another namespace: no import
    assert imports.find_import(root(f'<arXivRaw xmlns="{arxiv.ARXIV}"/>')) is None
    assert imports.find_import(root('<arXiv xmlns="http://arxiv.org/OAI/arXiv"/>')) is None

    arxiv_record, raw_record = arxiv_item(MINIMAL), raw_item(RAW_0704_0001)
    transform([arxiv_record, raw_record])
    assert arxiv_record.error is None and raw_record.error is None
    assert arxiv_record.pid == "10.48550/arxiv.2301.00001"
    assert raw_record.pid == "10.48550/arxiv.0704.0001"
    assert "version" not in arxiv_record.data["metadata"]  # the arXiv format has no versions
    assert raw_record.data["metadata"]["version"] == "v2"


def test_the_unknown_root_error_lists_the_arxiv_formats() -> None:
    item = TransformItem(
        "oai:x:1", "2024-01-01", [], wrap_metadata('<mods xmlns="http://www.loc.gov/mods/v3"/>')
    )
    transform_one(item)
    assert item.error.type == "unknown_root"
    assert item.error.message.endswith(
        "the supported metadata formats are oai_dc, oai_datacite, datacite (a DataCite "
        "kernel-2/3/4 resource), oai_openaire, marcxml, arXiv, arXivRaw: harvest with the "
        "metadata prefix of one of them"
    )
    assert imports.supported_formats()[-2:] == ["arXiv", "arXivRaw"]


@pytest.mark.parametrize(
    "note",
    [
        "0000-0002-1825-0097",
        "ORCID: 0000-0002-1825-0097",
        "https://orcid.org/0000-0002-1825-0097",
    ],
)
def test_an_orcid_in_a_raw_authors_parenthesis_is_the_authors_orcid(note: str) -> None:
    """`A. Smith (0000-0002-1825-0097)` made the ORCID the author's affiliation; it is the
    person's ORCID, as in a dc:creator. `(MIT)` stays an affiliation, a wrong check digit
    names neither, and `, and` before the last author parts no names."""
    body = (
        f"<id>2301.00001</id><title>T</title><authors>A. Smith ({note}), B. Jones (MIT),"
        " and C. Lee (0000-0002-1825-0098)</authors>"
    )
    creators = transformed_metadata(raw_item(body))["creators"]
    assert [
        (c["person_or_org"]["name"], c["person_or_org"]["identifiers"], c["affiliations"])
        for c in creators
    ] == [
        ("Smith, A.", [{"scheme": "orcid", "identifier": "0000-0002-1825-0097"}], []),
        ("Jones, B.", [], [{"name": "MIT"}]),
        ("Lee, C.", [], []),
    ]
