"""The MARCXML import (`marcxml`) on real records (samples/public, see its README): legacy
Invenio (INSPIRE), InvenioRDM's serializer and Library of Congress catalogue records."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lxml import etree

from oai_pipeline.transform import imports, marc
from oai_pipeline.transform.base import TransformItem

from .records import page_items, personal, transform, transformed_metadata, wrap_metadata
from .test_public_records import PUBLIC, items, metadata, one

INSPIRE = "inspire-oai-marcxml-excerpt.xml"
INVENIORDM = "inveniordm-marcxml-full-record.xml"
SOUND = "loc-marcxml-sound-recording.xml"
COMPUTER_FILE = "loc-marcxml-computer-file.xml"
UFDC = "ufdc-marcxml-funding-note.xml"
THESIS = "invenio-demo-marcxml-thesis.xml"


def _inspire() -> TransformItem:
    [item] = transform(items(INSPIRE))
    assert item.error is None, item.error
    return item


def test_the_import_is_chosen_by_the_marc_record_root() -> None:
    root = etree.fromstring((PUBLIC / INVENIORDM).read_bytes())
    assert imports.find_import(root) is marc.import_marc
    assert "marcxml" in imports.supported_formats()


def test_a_legacy_invenio_record_harvested_from_inspire() -> None:
    item = _inspire()
    data = item.data["metadata"]
    assert item.identifier == "oai:inspirehep.net:1334431"
    assert item.pid == "10.1016/j.nima.2014.09.061"  # 024 7_ $2 DOI, given twice: once
    assert data["title"].startswith("High-precision gas gain")
    assert [
        (c["person_or_org"]["family_name"], [a["name"] for a in c["affiliations"]])
        for c in data["creators"]
    ] == [
        ("Şahin", ["Uludag U."]),
        ("Kowalski", ["AGH-UST, Cracow"]),
        ("Veenhof", ["Uludag U.", "CERN"]),
    ]
    # no 260/264 and no 008: the year of the journal (773 $y)
    assert data["publication_date"] == "2014"
    assert {"description": "Nucl.Instrum.Meth., vol. A768, 2014, pp. 104–111",
            "type": {"id": "series-information"}} in data["additional_descriptions"]  # fmt: skip
    assert data["subjects"] == [{"subject": "Instrumentation", "scheme": "INSPIRE"}]
    assert {"identifier": "978-5-94990010-9", "scheme": "isbn"} in data["identifiers"]
    assert item.data["files"]["links"] == [
        {
            "url": "http://inspirehep.net/record/1333477/files/Issue13_Paper_Veneziano.pdf",
            "key": "Issue13_Paper_Veneziano.pdf",
        }
    ]
    # the collections `Published`, `citeable`, `HEP` and Invenio's leader name no type
    assert data["resource_type"] == {"id": "other"}


def test_inveniordm_marcxml() -> None:
    item = one(INVENIORDM)
    data = item.data["metadata"]
    assert item.pid == "10.1234/12345-abcde"
    assert data["resource_type"] == {"id": "image"}  # 980 $a image $b photo
    nielsen = data["creators"][0]
    assert nielsen["person_or_org"]["identifiers"] == [
        {"identifier": "0000-0001-8135-3489", "scheme": "orcid"}
    ]
    assert nielsen["affiliations"] == [{"name": "CERN"}]
    # a 700 without a role is a creator, one with a role ($4 oth) a contributor
    assert [c["person_or_org"]["name"] for c in data["creators"]] == [
        "Nielsen, Lars Holm",
        "Tom, Blabin",
    ]
    assert [(c["person_or_org"]["name"], c["role"]) for c in data["contributors"]] == [
        ("Nielsen, Lars Holm", {"id": "other"}),
        ("Dirk, Dirkin", {"id": "other"}),
        ("Doe, John the Contributor", {"id": "other"}),
    ]
    assert {"identifier": "gnd:4079154-3", "scheme": "gnd"} in data["contributors"][2][
        "person_or_org"
    ]["identifiers"]
    # the embargo end date in 260 $c is no publication date
    assert data["publication_date"] == "2018/2020-09"
    assert data["publisher"] == "InvenioRDM"
    # escaped twice, as InvenioRDM writes it
    assert data["description"] == "<h1>A description</h1> <p>with HTML tags</p>"
    assert data["additional_descriptions"] == [
        {"description": "Bla bla bla", "type": {"id": "other"}},
        {
            "description": "Journal Title, vol. 5, no. 10, 2018/2020-09, p. 100",
            "type": {"id": "series-information"},
        },
        # 502 $c, its thesis:university: the note in the form catalogues print
        {"description": "Thesis--A university", "type": {"id": "other"}},
    ]
    # the eu-repo access right and the spdx 650 are no licence and no subject
    assert data["rights"] == [
        {
            "title": {"en": "A custom license"},
            "link": "https://customlicense.org/licenses/by/4.0/",
        },
        {
            "id": "cc-by-4.0",
            "title": {"en": "Creative Commons Attribution 4.0 International"},
            "link": "https://creativecommons.org/licenses/by/4.0/legalcode",
        },
    ]
    assert data["subjects"] == [{"subject": "Abdominal Injuries"}, {"subject": "custom"}]
    assert data["languages"] == [{"id": "dan"}, {"id": "eng"}]
    assert data["related_identifiers"] == [
        {"identifier": "10.1234/foo.bar", "scheme": "doi", "relation_type": {"id": "iscitedby"}},
        {
            "identifier": "10.1234/pgfpj-at058",
            "scheme": "doi",
            "relation_type": {"id": "isversionof"},
        },
    ]
    assert data["formats"] == ["application/pdf"]
    assert data["sizes"] == ["11 pages"]
    assert [link["key"] for link in item.data["files"]["links"]] == ["test.pdf"]


def test_a_catalogued_sound_recording() -> None:
    data = metadata(SOUND)
    assert data["resource_type"] == {"id": "audio"}
    assert data["title"] == "The Great Ray Charles"
    # no author: the performer (700 $4 prf) is the creator; `Charles, Ray,` and its dates
    assert [c["person_or_org"] for c in data["creators"]] == [
        {"type": "personal", "name": "Charles, Ray", "given_name": "Ray",
         "family_name": "Charles", "identifiers": []}
    ]  # fmt: skip
    assert data["contributors"] == []
    assert data["publication_date"] == "1957"  # `[1957?]`
    assert data["publisher"] == "Atlantic"  # `Atlantic,`
    assert data["subjects"] == [
        {"subject": "Jazz -- 1951-1960", "scheme": "LCSH"},
        {"subject": "Piano with jazz ensemble", "scheme": "LCSH"},
    ]
    assert data["description"].startswith("The Ray -- My melancholy baby")  # 505 contents
    assert data["languages"] == [{"id": "eng"}]  # from 008
    assert data["sizes"] == ["1 sound disc"]


def test_a_catalogued_computer_file() -> None:
    data = metadata(COMPUTER_FILE)
    assert data["resource_type"] == {"id": "other"}  # software or data: MARC does not say
    assert data["publication_date"] == "1994"  # `1994-` in 260 $c: the date of 008
    # in document order; subfields outside the MARC namespace are read
    assert [c["person_or_org"]["name"] for c in data["creators"]] == [
        "White House Web Team",
        "Annan, Kofi",
        "UN. Secretary-General",
        "UN. Spokesman for the Secretary-General",
    ]
    assert [c["person_or_org"]["type"] for c in data["creators"]] == [
        "organizational",
        "personal",
        "organizational",
        "organizational",
    ]
    assert data["subjects"][1] == {
        "subject": "United States -- Executive Office of the President",
        "scheme": "LCSH",
    }
    assert data["identifiers"] == [
        # 035 `(OCoLC)ocm44279786`: the OCLC number by WorldCat's permanent URL
        {"identifier": "https://www.worldcat.org/oclc/44279786", "scheme": "url"},
        {"identifier": "http://www.whitehouse.gov", "scheme": "url"},
        {"identifier": "http://lcweb.loc.gov/staff/wpp/whitehouse.html", "scheme": "url"},
    ]


def _inspire_with(fields: str, tmp_path: Path) -> dict:
    """The INSPIRE record's metadata with `fields` (MARCXML datafields) added before its 595."""
    text = (PUBLIC / INSPIRE).read_text(encoding="utf-8")
    changed = text.replace('<marc:datafield tag="595"', fields + '<marc:datafield tag="595"', 1)
    assert changed != text
    (tmp_path / INSPIRE).write_text(changed, encoding="utf-8")
    [item] = transform(page_items(INSPIRE, tmp_path))
    assert item.error is None, item.error
    return item.data["metadata"]


def test_system_control_numbers_are_identifiers() -> None:
    """035 as legacy Invenio writes it, the source in $9: INSPIRE's texkey keeps its source
    (MARC's `(source)number` form), the CDS record number is the record's CDS URL, and DESY's
    $z (a cancelled number) is none."""
    identifiers = _inspire().data["metadata"]["identifiers"]
    assert identifiers[1:3] == [
        {"identifier": "(INSPIRETeX)Sahin:2014haa", "scheme": "other"},
        {"identifier": "https://cds.cern.ch/record/1234", "scheme": "url"},
    ]
    assert not any("DA14-kp48u" in entry["identifier"] for entry in identifiers)


def test_system_control_numbers_of_catalogues_and_arxiv(tmp_path: Path) -> None:
    """A catalogue's number with its MARC organisation code, and arXiv's OAI identifier as
    CDS writes it in 035 (CERNDocumentServer/cds-migrator-kit's 035 rule)."""
    data = _inspire_with(
        '<marc:datafield tag="035" ind1=" " ind2=" ">'
        '<marc:subfield code="a">(SzGeCERN)002628325CER</marc:subfield></marc:datafield>'
        '<marc:datafield tag="035" ind1=" " ind2=" "><marc:subfield code="9">arXiv</marc:subfield>'
        '<marc:subfield code="a">oai:arXiv.org:1409.2361</marc:subfield></marc:datafield>',
        tmp_path,
    )
    assert {"identifier": "(SzGeCERN)002628325CER", "scheme": "other"} in data["identifiers"]
    assert {"identifier": "1409.2361", "scheme": "arxiv"} in data["identifiers"]


def test_a_dissertation_note_is_a_description() -> None:
    """502 $a of a thesis in Invenio's demo records (its collection, 980 THESIS, says
    thesis)."""
    data = metadata(THESIS)
    assert data["resource_type"] == {"id": "publication-dissertation"}
    assert data["additional_descriptions"][-1] == {
        "description": "Ph.D. : Syracuse Univ. : 1999",
        "type": {"id": "other"},
    }


def test_a_dissertation_note_makes_a_text_without_a_type_a_thesis(tmp_path: Path) -> None:
    """MARC gives a dissertation note only for a thesis: the same record without its
    collection (980), as a catalogue without Invenio's collections has it, is one too."""
    text = (PUBLIC / THESIS).read_text(encoding="utf-8")
    changed = re.sub(r'<datafield tag="980".*?</datafield>', "", text, flags=re.S)
    assert changed != text
    [item] = transform([TransformItem("oai:test:thesis", "2024-01-01", [], wrap_metadata(changed))])
    assert item.data["metadata"]["resource_type"] == {"id": "publication-dissertation"}
    # a sound recording with a note (a recorded thesis defence) stays a recording
    assert metadata(SOUND)["resource_type"] == {"id": "audio"}


def test_a_dissertation_note_in_parts(tmp_path: Path) -> None:
    """502 $b degree, $c institution, $d year, as INSPIRE writes it (CERNDocumentServer/
    harvesting-kit's Inspire2CDS thesis test) and ETD crosswalks do: the note in the form
    the MARC documentation gives as their equivalent."""
    data = _inspire_with(
        '<marc:datafield tag="502" ind1=" " ind2=" ">'
        '<marc:subfield code="b">Diploma</marc:subfield>'
        '<marc:subfield code="c">Freiburg U.</marc:subfield>'
        '<marc:subfield code="d">2005</marc:subfield></marc:datafield>',
        tmp_path,
    )
    assert {"description": "Thesis (Diploma)--Freiburg U., 2005", "type": {"id": "other"}} in data[
        "additional_descriptions"
    ]


def test_series_added_entries_are_series_information() -> None:
    """830 of the University of Florida's catalogue: each series (here the collections the
    item is in) a series-information description, never the record's description."""
    data = metadata(UFDC)
    assert "description" not in data
    assert data["additional_descriptions"] == [
        {"description": text, "type": {"id": "series-information"}}
        for text in (
            "University of Florida Digital Collections",
            "World Studies Collections",
            "Spanish Borderlands Collections",
            "Spanish Colonial St. Augustine",
        )
    ]


def test_a_series_statement_with_its_volume_and_issn(tmp_path: Path) -> None:
    """490 $a $v $x as CDS writes a book's series (cds-migrator-kit's test of its 490 rule):
    the series and volume as series information, its ISSN what the record is part of. A 490
    traced by an 830 (first indicator 1) is read from the 830, not twice."""
    data = _inspire_with(
        '<marc:datafield tag="490" ind1=" " ind2=" ">'
        '<marc:subfield code="a">CISM International Centre</marc:subfield>'
        '<marc:subfield code="v">490</marc:subfield>'
        '<marc:subfield code="x">0317-8471</marc:subfield></marc:datafield>',
        tmp_path,
    )
    assert data["additional_descriptions"][-1] == {
        "description": "CISM International Centre ; 490",
        "type": {"id": "series-information"},
    }
    assert data["related_identifiers"] == [
        {"identifier": "0317-8471", "scheme": "issn", "relation_type": {"id": "ispartof"}}
    ]
    traced = _inspire_with(
        '<marc:datafield tag="490" ind1="1" ind2=" ">'
        '<marc:subfield code="a">Lecture notes in physics ;</marc:subfield>'
        '<marc:subfield code="v">v. 779</marc:subfield></marc:datafield>'
        '<marc:datafield tag="830" ind1=" " ind2="0">'
        '<marc:subfield code="a">Lecture notes in physics ;</marc:subfield>'
        '<marc:subfield code="v">779.</marc:subfield></marc:datafield>',
        tmp_path,
    )
    assert [d["description"] for d in traced["additional_descriptions"]][-1:] == [
        "Lecture notes in physics ; 779"
    ]
    assert "Lecture notes in physics ; v. 779" not in str(traced["additional_descriptions"])


def test_series_entered_under_a_name(tmp_path: Path) -> None:
    """800/810/811, a series entered under a person, an organisation or a meeting: the name,
    the series' title ($t) and the volume. The 490 and 800 are the Library of Congress's
    record of Charles Taylor's Human agency and language (LCCN 84016966); the 810 and 811
    are the examples of MARC 21's documentation of those fields. A 490 traced by the 800
    (first indicator 1) is read from the 800, not twice; an 800 without $t names no series."""
    data = _inspire_with(
        '<marc:datafield tag="490" ind1="1" ind2=" ">'
        '<marc:subfield code="a">Philosophical papers ;</marc:subfield>'
        '<marc:subfield code="v">1</marc:subfield></marc:datafield>'
        '<marc:datafield tag="800" ind1="1" ind2=" ">'
        '<marc:subfield code="a">Taylor, Charles,</marc:subfield>'
        '<marc:subfield code="d">1931-</marc:subfield>'
        '<marc:subfield code="t">Philosophical papers ;</marc:subfield>'
        '<marc:subfield code="v">1.</marc:subfield></marc:datafield>'
        '<marc:datafield tag="800" ind1="1" ind2=" ">'
        '<marc:subfield code="a">Nobody, Without a title</marc:subfield></marc:datafield>'
        '<marc:datafield tag="810" ind1="2" ind2=" ">'
        '<marc:subfield code="a">United States.</marc:subfield>'
        '<marc:subfield code="b">Army Map Service.</marc:subfield>'
        '<marc:subfield code="t">Map series ;</marc:subfield>'
        '<marc:subfield code="v">1250</marc:subfield>'
        '<marc:subfield code="x">0317-8471</marc:subfield></marc:datafield>'
        '<marc:datafield tag="811" ind1="2" ind2=" ">'
        '<marc:subfield code="a">International Congress of Romance Linguistics and Philology'
        "</marc:subfield>"
        '<marc:subfield code="n">(17th :</marc:subfield>'
        '<marc:subfield code="d">1983 :</marc:subfield>'
        '<marc:subfield code="c">Aix-en-Provence, France).</marc:subfield>'
        '<marc:subfield code="t">Actes du XVIIème Congrès international de linguistique et'
        " philologie romanes ;</marc:subfield>"
        '<marc:subfield code="v">v. 4</marc:subfield></marc:datafield>',
        tmp_path,
    )
    series = [
        d["description"]
        for d in data["additional_descriptions"]
        if d["type"]["id"] == "series-information" and "Nucl.Instrum" not in d["description"]
    ]
    assert series == [
        "Taylor, Charles, 1931- Philosophical papers ; 1",
        "United States. Army Map Service. Map series ; 1250",
        "International Congress of Romance Linguistics and Philology (17th : 1983 :"
        " Aix-en-Provence, France). Actes du XVIIème Congrès international de linguistique et"
        " philologie romanes ; v. 4",
    ]
    assert {"identifier": "0317-8471", "scheme": "issn", "relation_type": {"id": "ispartof"}} in (
        data["related_identifiers"]
    )


def test_a_catalogue_funding_note_is_the_funder() -> None:
    # 536 $a, the text of the note, as the University of Florida's catalogue writes it
    assert metadata(UFDC)["funding"] == [
        {
            "funder": {
                "name": "Funded by a grant from the Florida Humanities Council",
                "identifiers": [],
            }
        }
    ]


def test_chronological_subject_headings_are_subjects() -> None:
    # 648 with no thesaurus (second indicator blank), before the topical 650s
    assert metadata(UFDC)["subjects"][:2] == [
        {"subject": "1594-1920 -- Spanish Colonial Period"},
        {"subject": "1594-1920 -- Colonial Period"},
    ]


def test_legacy_invenio_funding_agency_and_grant_number(tmp_path: Path) -> None:
    """536 as CDS writes it (CERNDocumentServer/cds-migrator-kit's test of its 536 rule:
    $a agency, $c grant number, $f project, $r access) and INSPIRE's dojson maps it. `FP7` is
    the EU's programme, its funder the European Commission (cds-migrator-kit's thesis rule
    makes it the award `00k4n6c32::654168`); the project's acronym names the award."""
    data = _inspire_with(
        '<marc:datafield tag="536" ind1=" " ind2=" ">'
        '<marc:subfield code="a">CERN Technical Student Program</marc:subfield>'
        "</marc:datafield>"
        '<marc:datafield tag="536" ind1=" " ind2=" ">'
        '<marc:subfield code="a">FP7</marc:subfield>'
        '<marc:subfield code="c">654168</marc:subfield>'
        '<marc:subfield code="f">AIDA-2020</marc:subfield>'
        '<marc:subfield code="r">openAccess</marc:subfield>'
        "</marc:datafield>",
        tmp_path,
    )
    assert data["funding"] == [
        {"funder": {"name": "CERN Technical Student Program", "identifiers": []}},
        {
            "funder": {"id": "00k4n6c32", "name": "European Commission", "identifiers": []},
            "award": {"number": "654168", "title": {"en": "AIDA-2020"}, "identifiers": []},
        },
    ]


def test_an_openaire_grant_in_a_funding_note_names_funder_and_award(tmp_path: Path) -> None:
    """DSpace MARC crosswalks write dc.relation's grant in 536 $a; this one is AMS Acta's
    (john-shepherdson/dnet-hadoop `.../oa/graph/raw/oaf-bologna.xml`), its title shortened."""
    data = _inspire_with(
        '<marc:datafield tag="536" ind1=" " ind2=" "><marc:subfield code="a">'
        "info:eu-repo/grantAgreement/EC/H2020/817949/EU/CONtract SOLutions/CONSOLE"
        "</marc:subfield></marc:datafield>",
        tmp_path,
    )
    assert data["funding"] == [
        {
            "funder": {"id": "00k4n6c32", "name": "European Commission", "identifiers": []},
            "award": {"number": "817949", "title": {"en": "CONtract SOLutions"}, "identifiers": []},
        }
    ]


def test_inveniordm_funding_notes_name_no_funder_and_are_left_out() -> None:
    """InvenioRDM's 536 $a is the award's title, not a funder (its serializer writes no
    funder): the award title must not become one, and an award without a funder is no
    funding the target holds (InvenioRDM's own DataCite export requires the funder)."""
    assert metadata(INVENIORDM)["funding"] == []


def test_an_inveniordm_funding_note_with_an_openaire_grant_is_kept() -> None:
    """An InvenioRDM award whose number is an OpenAIRE grant (a record migrated from DSpace
    keeps dc.relation's grant as its award) names its funder: it is kept."""
    text = (PUBLIC / INVENIORDM).read_text(encoding="utf-8")
    grant = "info:eu-repo/grantAgreement/EC/H2020/654168"
    changed = text.replace(
        '<subfield code="c">111023</subfield>', f'<subfield code="c">{grant}</subfield>'
    )
    assert changed != text
    [item] = transform([TransformItem("oai:test:rdm", "2024-01-01", [], wrap_metadata(changed))])
    assert item.data["metadata"]["funding"] == [
        {
            "funder": {"id": "00k4n6c32", "name": "European Commission", "identifiers": []},
            "award": {"number": "654168", "identifiers": []},
        }
    ]


@pytest.mark.parametrize(
    ("pattern", "kind", "location", "words"),
    [
        (r'<datafield tag="245".*?</datafield>', "missing_field", "metadata.title", "245"),
        (r'<datafield tag="(100|700)".*?</datafield>', "missing_field", "metadata.creators",
         "creator"),
        (r'(<subfield code="c">)2018/2020-09<', "invalid_date", "metadata.publication_date",
         "2021-13-45"),
    ],
)  # fmt: skip
def test_a_record_the_import_cannot_use_is_that_records_error(
    pattern: str, kind: str, location: str, words: str
) -> None:
    replacement = r"\g<1>2021-13-45<" if "subfield" in pattern else ""
    text = (PUBLIC / INVENIORDM).read_text(encoding="utf-8")
    changed = re.sub(pattern, replacement, text, flags=re.S)
    assert changed != text
    bad = TransformItem("oai:test:bad", "2024-01-01", [], wrap_metadata(changed))
    good = TransformItem("oai:test:good", "2024-01-01", [], wrap_metadata(text))
    good, bad = transform([good, bad])
    assert good.error is None and good.data is not None
    assert bad.data is None
    assert (bad.error.type, bad.error.location) == (kind, location)
    assert words in bad.error.message


def _marc_item(fields: str, leader: str = "00000nam a2200000 a 4500") -> TransformItem:
    """A MARCXML record of `fields` (control and data fields), with a title and an author."""
    body = (
        f'<marc:record xmlns:marc="{marc.MARC}"><marc:leader>{leader}</marc:leader>'
        '<marc:datafield tag="245" ind1="1" ind2="0"><marc:subfield code="a">A title /'
        "</marc:subfield></marc:datafield>"
        '<marc:datafield tag="100" ind1="1" ind2=" "><marc:subfield code="a">Doe, Jane,'
        f"</marc:subfield></marc:datafield>{fields}</marc:record>"
    )
    return TransformItem("oai:test:marc", "2021-06-30T08:15:00Z", [], wrap_metadata(body))


def _field(tag: str, *subfields: tuple[str, str], ind1: str = " ", ind2: str = " ") -> str:
    codes = "".join(f'<marc:subfield code="{c}">{text}</marc:subfield>' for c, text in subfields)
    return f'<marc:datafield tag="{tag}" ind1="{ind1}" ind2="{ind2}">{codes}</marc:datafield>'


def _fixed_length_data(date1: str, date2: str = "    ", kind: str = "s") -> str:
    """An 008 of date type `kind` (06) with `date1` at 07-10, `date2` at 11-14 and English as
    the language."""
    data = f"850101{kind}{date1}{date2}xx            000 0 eng d"
    return f'<marc:controlfield tag="008">{data}</marc:controlfield>'


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (_field("260", ("c", "[n.d.]")), "2021-06-30"),  # no date at all: the datestamp's day
        (_field("264", ("c", "[s.a.]"), ind2="1"), "2021-06-30"),
        (_fixed_length_data("9999"), "2021-06-30"),  # a placeholder year
        (_field("260", ("c", "0000")) + _fixed_length_data("1999"), "1999"),
        (_field("260", ("c", "[n.d.]")) + _fixed_length_data("1999"), "1999"),
    ],
)
def test_a_catalogue_saying_there_is_no_date_keeps_the_record(fields: str, expected: str) -> None:
    """260 $c `[n.d.]` (catalogues' "no date") failed the record with invalid_date, and a
    placeholder year (`0000`, `9999`) was taken as its publication date."""
    assert transformed_metadata(_marc_item(fields))["publication_date"] == expected


@pytest.mark.parametrize(
    ("fields", "date", "dates"),
    [
        # 008 dates with unknown digits (`u`) were lost: the record took the datestamp's day
        (_fixed_length_data("19uu"), "1900/1999", []),
        (_fixed_length_data("196u"), "1960/1969", []),
        # type q, "questionable": sometime between date1 and date2 (was date1 alone)
        (_fixed_length_data("1960", "1969", kind="q"), "1960/1969", []),
        # too little known to date it: the datestamp's day, no year invented
        (_fixed_length_data("1uuu"), "2021-06-30", []),
        (_fixed_length_data("uuuu", kind="n"), "2021-06-30", []),
        # transcribed approximate dates keep their words, as oai_dc's do (they were lost)
        (
            _field("260", ("c", "[19--]")),
            "1900/1999",
            [{"date": "1900/1999", "type": {"id": "issued"}, "description": "[19--]"}],
        ),
        (
            _field("264", ("c", "199-?"), ind2="1") + _fixed_length_data("199u"),
            "1990/1999",
            [{"date": "1990/1999", "type": {"id": "issued"}, "description": "199-?"}],
        ),
        (
            _field("260", ("c", "[1885?]")),
            "1885",
            [{"date": "1885", "type": {"id": "issued"}, "description": "[1885?]"}],
        ),
        (_field("260", ("c", "c1998.")), "1998", []),  # a copyright year: exact
        # a $c in words beside 008's year was dropped (oai_dc keeps both), and alone failed
        (
            _field("260", ("c", "Spring 1985.")) + _fixed_length_data("1985"),
            "1985",
            [{"date": "1985", "type": {"id": "issued"}, "description": "Spring 1985"}],
        ),
        (
            _field("264", ("c", "Winter 1986"), ind2="1"),
            "1986",
            [{"date": "1986", "type": {"id": "issued"}, "description": "Winter 1986"}],
        ),
    ],
)
def test_dates_with_unknown_digits(fields: str, date: str, dates: list[dict[str, object]]) -> None:
    metadata = transformed_metadata(_marc_item(fields))
    assert (metadata["publication_date"], metadata.get("dates", [])) == (date, dates)


@pytest.mark.parametrize(
    ("ind1", "subfields", "identifiers"),
    [
        # the first indicator names the standard; they were all dropped
        ("0", [("a", "USRC17607839")], [{"identifier": "USRC17607839", "scheme": "other"}]),
        ("1", [("a", "036000291452")], [{"identifier": "036000291452", "scheme": "upc"}]),
        ("2", [("a", "9790060115615")], [{"identifier": "9790060115615", "scheme": "other"}]),
        ("3", [("a", "4006381333931")], [{"identifier": "4006381333931", "scheme": "ean13"}]),
        ("8", [("a", "X-1")], [{"identifier": "X-1", "scheme": "other"}]),
        ("7", [("a", "11858/00-001M-0000-0013-D2E2-4"), ("2", "hdl")],
         [{"identifier": "11858/00-001M-0000-0013-D2E2-4", "scheme": "handle"}]),
        ("7", [("a", "urn:nbn:de:bvb:12-bsb0001"), ("2", "urn")],
         [{"identifier": "urn:nbn:de:bvb:12-bsb0001", "scheme": "urn"}]),
        # `$2 doi` on a value that is no DOI failed the whole record as an invalid pid
        ("7", [("a", "not a doi"), ("2", "doi")], [{"identifier": "not a doi", "scheme": "other"}]),
        # `$2 uri` was `other` whatever the URI: a URL is a link, a URN a URN
        ("7", [("a", "https://example.org/item/1"), ("2", "uri")],
         [{"identifier": "https://example.org/item/1", "scheme": "url"}]),
        ("7", [("a", "urn:nbn:de:0001-1"), ("2", "URI")],
         [{"identifier": "urn:nbn:de:0001-1", "scheme": "urn"}]),
        ("7", [("a", "info:x/1"), ("2", "uri")], [{"identifier": "info:x/1", "scheme": "other"}]),
    ],
)  # fmt: skip
def test_standard_identifiers_by_their_first_indicator(
    ind1: str, subfields: list[tuple[str, str]], identifiers: list[dict[str, str]]
) -> None:
    item = _marc_item(_field("024", *subfields, ind1=ind1))
    assert transformed_metadata(item)["identifiers"] == identifiers
    assert item.pid is None


def test_a_doi_in_024_with_its_source_is_the_pid() -> None:
    item = _marc_item(_field("024", ("a", "doi:10.1234/ABC"), ("2", "DOI"), ind1="7"))
    transformed_metadata(item)
    assert item.pid == "10.1234/abc"


@pytest.mark.parametrize(
    ("u", "identifier"),
    [
        # 856 $u holding no URL was kept as a `url` the target refuses or cannot link
        ("urn:nbn:de:bvb:12-bsb00012345-6",
         {"identifier": "urn:nbn:de:bvb:12-bsb00012345-6", "scheme": "urn"}),
        ("hdl:1234/5", {"identifier": "1234/5", "scheme": "handle"}),
        ("Available online", None),  # words: no link at all
        ("https://example.org/record/1", {"identifier": "https://example.org/record/1",
                                          "scheme": "url"}),
    ],
)  # fmt: skip
def test_an_electronic_location_that_is_no_url(u: str, identifier: dict[str, str] | None) -> None:
    own = _field("856", ("u", u), ind1="4", ind2="0")
    related = _field("856", ("u", u), ind1="4", ind2="1")
    metadata = transformed_metadata(_marc_item(own + related))
    assert metadata["identifiers"] == ([identifier] if identifier else [])
    version = [{**identifier, "relation_type": {"id": "isversionof"}}] if identifier else []
    assert [{k: v for k, v in r.items() if k != "resource_type"}
            for r in metadata["related_identifiers"]] == version  # fmt: skip


@pytest.mark.parametrize("u", ["doi:10.1234/ABC", "https://doi.org/10.1234/ABC"])
def test_the_doi_of_the_resource_itself_is_its_doi(u: str) -> None:
    """856 4 0 (the resource itself) with a DOI never gave the record its DOI (a doi.org URL
    was only a `url`), though a dc:identifier DOI does; an 856 of a version is related."""
    own = _field("856", ("u", u), ind1="4", ind2="0")
    version = _field("856", ("u", "https://doi.org/10.1234/v1"), ind1="4", ind2="1")
    item = _marc_item(own + version)
    metadata = transformed_metadata(item)
    assert item.pid == "10.1234/abc"
    assert metadata["identifiers"] == []
    assert [{k: v for k, v in r.items() if k != "resource_type"}
            for r in metadata["related_identifiers"]] == [
        {"identifier": "10.1234/v1", "scheme": "doi", "relation_type": {"id": "isversionof"}}
    ]  # fmt: skip


def test_a_doi_elsewhere_stays_the_records_doi_beside_an_856_doi() -> None:
    item = _marc_item(
        _field("024", ("a", "10.1234/own"), ("2", "doi"), ind1="7")
        + _field("856", ("u", "https://doi.org/10.1234/other"), ind1="4", ind2="0")
    )
    metadata = transformed_metadata(item)
    assert item.pid == "10.1234/own"
    assert metadata["identifiers"] == [{"identifier": "10.1234/other", "scheme": "doi"}]


def test_every_url_of_an_electronic_location_is_read() -> None:
    item = _marc_item(
        _field("856", ("u", "https://a.example/x"), ("u", "https://b.example/y.pdf"), ind1="4")
    )
    metadata = transformed_metadata(item)
    assert metadata["identifiers"] == [{"identifier": "https://a.example/x", "scheme": "url"}]
    assert item.data["files"]["links"] == [{"url": "https://b.example/y.pdf", "key": "y.pdf"}]


def test_et_al_in_an_added_entry_names_nobody() -> None:
    """700 $a `et al.` was a creator named `et al.`; `Doe, Jane et al.` a given name
    `Jane et al.`."""
    item = _marc_item(_field("700", ("a", "Roe, Richard et al.")) + _field("700", ("a", "et al.")))
    creators = transformed_metadata(item)["creators"]
    assert [c["person_or_org"]["name"] for c in creators] == ["Doe, Jane", "Roe, Richard"]


def test_languages_separated_in_one_041() -> None:
    """041 $a `eng; ger` gave no language (the 008's was not read either, 041 being there)."""
    item = _marc_item(_field("041", ("a", "eng; ger"), ind1="0"))
    assert transformed_metadata(item)["languages"] == [{"id": "eng"}, {"id": "deu"}]


def test_terms_of_use_naming_a_license_without_its_url() -> None:
    """540 $a `CC BY 4.0` or `MIT` with no $u was a free-text right, no license."""
    item = _marc_item(
        _field("540", ("a", "CC BY 4.0"))
        + _field("540", ("a", "MIT"))
        + _field("540", ("a", "Free to read"))
    )
    assert transformed_metadata(item)["rights"] == [
        {"id": "cc-by-4.0", "title": {"en": "CC BY 4.0"}},
        {"id": "mit", "title": {"en": "MIT"}},
        {"title": {"en": "Free to read"}},
    ]


def test_the_doi_of_an_856_with_no_relationship_given_is_its_doi() -> None:
    """856 with a blank second indicator (MARC: "no information provided", as older catalogues
    and DSpace write their one link) with a doi.org URL was kept as the record's own DOI
    identifier but never its DOI, the record left without one while 024 was absent; it is now
    its DOI, unless an 856 4 0 (the resource itself) names another, or the 856 says which
    part it links ($3 `Table of contents`: not the resource). That part's DOI was then kept
    among the record's own identifiers, though it identifies a part, not the record: it is a
    part the record has (`haspart`), as an 856 4 3 (component part) is."""
    blank = _field("856", ("u", "https://doi.org/10.1234/ABC"), ind1="4", ind2=" ")
    item = _marc_item(blank)
    assert transformed_metadata(item)["identifiers"] == []
    assert item.pid == "10.1234/abc"
    own = _field("856", ("u", "https://doi.org/10.1234/own"), ind1="4", ind2="0")
    item = _marc_item(blank + own)
    metadata = transformed_metadata(item)
    assert item.pid == "10.1234/own"
    assert metadata["identifiers"] == [{"identifier": "10.1234/abc", "scheme": "doi"}]
    part = _field(
        "856", ("3", "Table of contents"), ("u", "https://doi.org/10.1234/toc"), ind1="4", ind2=" "
    )
    item = _marc_item(part)
    metadata = transformed_metadata(item)
    assert metadata["identifiers"] == []
    assert [{k: v for k, v in r.items() if k != "resource_type"}
            for r in metadata["related_identifiers"]] == [
        {"identifier": "10.1234/toc", "scheme": "doi", "relation_type": {"id": "haspart"}}
    ]  # fmt: skip
    assert item.pid is None


def test_an_856_with_no_display_constant_states_no_relationship() -> None:
    """856 second indicator 8 is MARC 21's "no display constant generated": it says how the
    link is shown (by its $3, $y or $z), not what it links. It was read as a related resource
    (`references`), as 2 is; stating no relationship, as blank does not, it is the location
    of the resource itself: its DOI the record's DOI, another URI the record's identifier."""
    doi = _field("856", ("u", "https://doi.org/10.1234/ABC"), ind1="4", ind2="8")
    url = _field("856", ("u", "https://example.org/record/1"), ("z", "Online"), ind1="4", ind2="8")
    item = _marc_item(doi + url)
    metadata = transformed_metadata(item)
    assert item.pid == "10.1234/abc"
    assert metadata["identifiers"] == [
        {"identifier": "https://example.org/record/1", "scheme": "url"}
    ]
    assert metadata.get("related_identifiers", []) == []


def test_an_electronic_location_urlparse_refuses_is_no_file_and_no_failure() -> None:
    """856 $u `https://[example.org/data.pdf` (an unclosed IPv6 bracket) made urlparse raise
    and the record a `transformer_failure`; it links no file, and is kept as the URL given."""
    u = "https://[example.org/data.pdf"
    item = _marc_item(_field("856", ("u", u), ind1="4", ind2="0"))
    metadata = transformed_metadata(item)
    assert metadata["identifiers"] == [{"identifier": u, "scheme": "url"}]
    assert item.data["files"]["links"] == []


def test_a_comment_inside_a_control_field_or_the_leader_does_not_cut_it_short() -> None:
    """The leader and control fields were read by lxml's `.text`, which ends at a comment:
    `<controlfield tag="008">850101s19<!-- x -->60 …` lost the 008's date and language, and
    a leader `00000<!-- x -->nam …` its type of record (the book became `other`)."""
    fixed = _fixed_length_data("1960").replace("s1960", "s19<!-- checked -->60")
    item = _marc_item(fixed, leader="00000<!-- x -->nam a2200000 a 4500")
    metadata = transformed_metadata(item)
    assert metadata["publication_date"] == "1960"
    assert metadata["languages"] == [{"id": "eng"}]
    assert metadata["resource_type"] == {"id": "publication-book"}


@pytest.mark.parametrize("ind2", ["3", "4"])
def test_an_856_of_a_component_part_is_a_part_of_the_resource(ind2: str) -> None:
    """856 second indicators 3 and 4 are MARC 21's "component part(s) of resource" and
    "version of component part(s) of resource" (a chapter, a table of contents, of the
    resource or of its online version). They were read as a related resource the record
    `references`; the record has them as parts (`haspart`), and their DOI is not its own."""
    part = _field(
        "856", ("3", "Chapter 1"), ("u", "https://doi.org/10.1234/CH1"), ind1="4", ind2=ind2
    )
    page = _field("856", ("u", "https://example.org/toc"), ind1="4", ind2=ind2)
    item = _marc_item(part + page)
    metadata = transformed_metadata(item)
    assert item.pid is None
    assert [{k: v for k, v in r.items() if k != "resource_type"}
            for r in metadata["related_identifiers"]] == [
        {"identifier": "10.1234/ch1", "scheme": "doi", "relation_type": {"id": "haspart"}},
        {"identifier": "https://example.org/toc", "scheme": "url",
         "relation_type": {"id": "haspart"}},
    ]  # fmt: skip


@pytest.mark.parametrize(("ind2", "relation"), [("2", "references"), ("3", "haspart"),
                                                ("4", "haspart")])  # fmt: skip
def test_a_file_of_a_related_resource_or_a_part_is_no_file_of_the_record(
    ind2: str, relation: str
) -> None:
    """856 4 2 (a related resource) whose $u is a `.pdf` became a file of this record,
    attaching another resource's file; so did 3 and 4 (component parts). Only an 856 of the
    resource itself or of a version of it (blank, 0, 1, 8) links a file; the others are
    related identifiers only."""
    u = "https://other.example/paper.pdf"
    item = _marc_item(_field("856", ("u", u), ind1="4", ind2=ind2))
    metadata = transformed_metadata(item)
    assert item.data["files"]["links"] == []
    assert [{k: v for k, v in r.items() if k != "resource_type"}
            for r in metadata["related_identifiers"]] == [
        {"identifier": u, "scheme": "url", "relation_type": {"id": relation}}
    ]  # fmt: skip


@pytest.mark.parametrize("ind2", [" ", "0", "1", "8"])
def test_a_file_of_the_resource_itself_is_a_file_of_the_record(ind2: str) -> None:
    u = "https://repo.example/paper.pdf"
    item = _marc_item(_field("856", ("u", u), ind1="4", ind2=ind2))
    metadata = transformed_metadata(item)
    assert item.data["files"]["links"] == [{"url": u, "key": "paper.pdf"}]
    assert metadata.get("related_identifiers", []) == []


@pytest.mark.parametrize("ind2", [" ", "0", "8"])
@pytest.mark.parametrize(
    ("materials", "the_records"),
    [
        # $3 naming the record itself, or only its form: its DOI and its file
        ("Full text", True),
        ("Volltext", True),
        ("PDF", True),
        # $3 naming a part or an accompanying text: neither
        ("Table of contents", False),
        ("Table of contents only", False),
        ("Cover image", False),
        ("Abstract", False),
        ("Sample text", False),
        ("Publisher description.", False),
        ("Contributor biographical information", False),
        ("Inhaltsverzeichnis", False),
        ("Inhaltstext", False),  # the DNB's: the publisher's description
        # German union catalogues' review, blurb and author biography
        ("Rezension", False),
        ("Klappentext", False),
        ("Autorenbiografie", False),
        ("Autorenbiographie", False),
        # the other texts about the item German catalogues label (`_ABOUT`), their parts
        # (`_PARTS`) and LC's `Book review`, in any case and with trailing punctuation
        ("Kurzbeschreibung", False),
        ("Ausführliche Beschreibung", False),
        ("Beschreibung für den Leser", False),
        ("Verlagsinformationen", False),
        ("Rezensionen.", False),
        ("Leseprobe", False),
        ("BOOK REVIEW (H-Net)", False),
        ("Beschreibung", True),  # alone too generic: it may describe the item itself
    ],
)
def test_the_materials_an_856_specifies_decide_its_doi_and_its_file_alike(
    ind2: str, materials: str, the_records: bool
) -> None:
    """856 $3 (MARC 21: the part of the item the field applies to) had two rules: any $3 on
    an 856 stating no relationship made its DOI not the record's (`Full text` too), yet no $3
    ever kept its `.pdf` from being the record's file (a `Table of contents` PDF became one).
    One rule serves both now: a $3 naming a part or an accompanying text (LC's `Table of
    contents`, `Publisher description` …) makes the 856 neither; any other keeps both."""
    doi = _field("856", ("3", materials), ("u", "https://doi.org/10.1234/ABC"), ind1="4", ind2=ind2)
    pdf = _field("856", ("3", materials), ("u", "https://r.example/a.pdf"), ind1="4", ind2=ind2)
    item = _marc_item(doi + pdf)
    transformed_metadata(item)
    assert item.pid == ("10.1234/abc" if the_records else None)
    links = [{"url": "https://r.example/a.pdf", "key": "a.pdf"}] if the_records else []
    assert item.data["files"]["links"] == links


@pytest.mark.parametrize("ind2", [" ", "0", "8", "1"])
@pytest.mark.parametrize(
    ("materials", "relation"),
    [
        ("Table of contents", "haspart"),
        ("Table of contents only", "haspart"),
        ("Sample text", "haspart"),
        ("Cover image", "haspart"),
        ("Publisher description", "references"),
        ("Contributor biographical information", "references"),
        ("Inhaltsverzeichnis", "haspart"),
        ("Inhaltstext", "references"),  # the DNB's publisher description
        ("Rezension", "references"),  # a review
        ("Klappentext", "references"),  # the blurb
        ("Autorenbiografie", "references"),
        ("Autorenbiographie", "references"),
        # the other labels of German catalogues (DNB, K10plus, SWB, BVB) for texts about the
        # item, in any case and with trailing punctuation, and of LC's for reviews
        ("Kurzbeschreibung", "references"),
        ("Ausführliche Beschreibung", "references"),
        ("Ausfuehrliche Beschreibung", "references"),
        ("Beschreibung für den Leser", "references"),
        ("Verlagsinformation", "references"),
        ("Verlagsinformationen:", "references"),
        ("Verlagsbeschreibung", "references"),
        ("Inhaltsangabe", "references"),  # a synopsis, as the DNB's Inhaltstext is
        ("Inhaltsbeschreibung", "references"),
        ("Rezensionen", "references"),
        ("rezension.", "references"),
        ("Besprechung", "references"),
        ("Klappentexte", "references"),
        ("Book review", "references"),
        ("Book reviews (E-STREAMS)", "references"),
        ("Reviews", "references"),
        # and for its parts: the German sample text and cover
        ("Leseprobe", "haspart"),
        ("Umschlagbild", "haspart"),
        ("Cover", "haspart"),
        ("Inhaltsverzeichnis.", "haspart"),
    ],
)
def test_a_link_to_a_part_or_a_text_about_the_item_is_a_related_identifier(
    ind2: str, materials: str, relation: str
) -> None:
    """An 856 of the resource itself (or stating no relationship) whose $3 names a part of it
    (`Table of contents`) or a text about it (LC's `Publisher description`) was kept among
    the record's own identifiers, as if its URL identified the record. It is now a related
    identifier: a part the record has (`haspart`, as 856 4 3 is), a text it `references`
    (LC codes its publisher descriptions 856 4 2, a related resource; the DNB's `Inhaltstext`
    is one, which was the record's own URL, DOI and file when coded 4 0, and so are the German
    union catalogues' `Rezension`, `Klappentext` and `Autorenbiografie`). So were the other
    labels German catalogues give such texts (`Kurzbeschreibung`, `Ausführliche Beschreibung`,
    `Verlagsinformation` …), plurals (`Rezensionen`), LC's `Book review` and the German parts
    (`Leseprobe`, `Umschlagbild`): the record's own, or the work in another form (4 1).

    So is one of a version of the resource (856 4 1), which was `isversionof`, as if the
    table of contents were the work in another form: the Library of Congress coded its tables
    of contents `856 41 $3 Table of contents only` before MARC defined 3 and 4 for component
    parts, and CONSER still codes an online part of a print serial 41 with the part in $3."""
    u = "https://www.loc.gov/catdir/toc/98-123.html"
    item = _marc_item(_field("856", ("3", materials), ("u", u), ind1="4", ind2=ind2))
    metadata = transformed_metadata(item)
    assert metadata["identifiers"] == []
    assert [{k: v for k, v in r.items() if k != "resource_type"}
            for r in metadata["related_identifiers"]] == [
        {"identifier": u, "scheme": "url", "relation_type": {"id": relation}}
    ]  # fmt: skip
    assert item.data["files"]["links"] == []


def test_an_856_of_a_version_naming_the_item_stays_a_version() -> None:
    """A $3 that names the item or its form (`Full text`) leaves 856 4 1 a version of it."""
    u = "https://doi.org/10.1234/ONLINE"
    item = _marc_item(_field("856", ("3", "Full text"), ("u", u), ind1="4", ind2="1"))
    metadata = transformed_metadata(item)
    assert [{k: v for k, v in r.items() if k != "resource_type"}
            for r in metadata["related_identifiers"]] == [
        {"identifier": "10.1234/online", "scheme": "doi", "relation_type": {"id": "isversionof"}}
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("materials", "relation"),
    [
        ("Table of contents", "haspart"),
        ("Inhaltsverzeichnis", "haspart"),
        ("Sample text", "haspart"),
        ("Cover image", "haspart"),
        ("Publisher description", "references"),
        ("Inhaltstext", "references"),
        ("Rezension", "references"),
        ("Klappentext", "references"),
        ("Autorenbiografie", "references"),
        ("Ausführliche Beschreibung", "references"),
        ("Leseprobe", "haspart"),
        ("Full text", "references"),
    ],
)
def test_an_856_of_a_related_resource_naming_a_part_is_a_part(
    materials: str, relation: str
) -> None:
    """856 4 2 (a related resource) whose $3 names a part of the item stayed a reference, as
    if its table of contents were another resource; the DNB codes its scanned tables of
    contents so (`856 42 $q application/pdf $u https://d-nb.info/…/04 $3 Inhaltsverzeichnis`).
    It is a part (`haspart`), as 856 4 3 is and as 4 0 and 4 1 with such a $3 are; a text about
    the item, or any other $3, stays `references`, and neither is the record's file or DOI."""
    toc = _field(
        "856",
        ("q", "application/pdf"),
        ("u", "https://d-nb.info/1234567890/04"),
        ("3", materials),
        ind1="4",
        ind2="2",
    )
    doi = _field("856", ("3", materials), ("u", "https://doi.org/10.1234/X"), ind1="4", ind2="2")
    item = _marc_item(toc + doi)
    metadata = transformed_metadata(item)
    assert item.pid is None
    assert metadata["identifiers"] == []
    assert item.data["files"]["links"] == []
    assert [{k: v for k, v in r.items() if k != "resource_type"}
            for r in metadata["related_identifiers"]] == [
        {"identifier": "https://d-nb.info/1234567890/04", "scheme": "url",
         "relation_type": {"id": relation}},
        {"identifier": "10.1234/x", "scheme": "doi", "relation_type": {"id": relation}},
    ]  # fmt: skip


def test_padded_tags_indicators_and_subfield_codes_are_read() -> None:
    """`<subfield code=" a ">` (and a tag or indicator padded alike) was not recognised: a 245
    written so gave the record "no title", and a padded 856 indicator lost its relationship
    (` 3 `, a component part, became `references`).
    The white space around a tag, an indicator and a code is dropped; a blank indicator stays
    blank."""
    body = (
        f'<marc:record xmlns:marc="{marc.MARC}"><marc:leader>00000nam a2200000 a 4500'
        '</marc:leader><marc:datafield tag=" 245 " ind1="1" ind2="0">'
        '<marc:subfield code=" a ">A title /</marc:subfield>'
        '<marc:subfield code="b ">a subtitle</marc:subfield></marc:datafield>'
        '<marc:datafield tag="100" ind1=" 1" ind2="  "><marc:subfield code=" a">Doe, Jane,'
        "</marc:subfield></marc:datafield>"
        '<marc:datafield tag="856" ind1="4" ind2=" 3 "><marc:subfield code="u ">'
        "https://other.example/x</marc:subfield></marc:datafield></marc:record>"
    )
    item = TransformItem("oai:test:marc", "2021-06-30T08:15:00Z", [], wrap_metadata(body))
    metadata = transformed_metadata(item)
    assert metadata["title"] == "A title"
    assert metadata["additional_titles"] == [{"title": "a subtitle", "type": {"id": "subtitle"}}]
    assert metadata["creators"][0]["person_or_org"]["family_name"] == "Doe"
    assert [r["relation_type"] for r in metadata["related_identifiers"]] == [{"id": "haspart"}]


def test_an_affiliation_repeated_in_an_entry_is_listed_once() -> None:
    """A 700 with the same $u twice had the affiliation twice; it is listed once, in order."""
    item = _marc_item(
        _field("700", ("a", "Roe, Rick"), ("u", "CERN"), ("u", "DESY"), ("u", "CERN"))
    )
    roe = transformed_metadata(item)["creators"][1]
    assert roe["affiliations"] == [{"name": "CERN"}, {"name": "DESY"}]


def test_an_affiliation_repeated_in_other_case_or_spacing_is_listed_once() -> None:
    """Names of affiliations compare case- and whitespace-insensitively, as DataCite's do
    beside a ROR: `CERN` and `cern ` are one, listed as first written."""
    item = _marc_item(_field("700", ("a", "Roe, Rick"), ("u", "CERN"), ("u", " cern  ")))
    roe = transformed_metadata(item)["creators"][1]
    assert roe["affiliations"] == [{"name": "CERN"}]


def test_an_added_entry_without_its_family_part_is_one_name() -> None:
    """Found by fuzzing: a 700 $a `, John` (no surname before the comma) was a person with no
    family name, which the target refuses: the record failed. It is the one name `John`; a
    700 $a of punctuation only (`, ,`) names nobody and is left out."""
    item = _marc_item(_field("700", ("a", ", John")) + _field("700", ("a", ", ,"), ind1="1"))
    metadata = transformed_metadata(item)
    people = [c["person_or_org"] for c in metadata["creators"]]
    assert people == [personal("Doe", "Jane"), personal("John")]


def test_an_added_entry_of_digits_only_names_nobody() -> None:
    """A 700 $a of digits only (`12345`, a local number in the name's place) was a person so
    named; it names nobody and is left out, as `, ,` is."""
    item = _marc_item(_field("700", ("a", "12345"), ind1="1") + _field("700", ("a", "2019-01")))
    people = [c["person_or_org"] for c in transformed_metadata(item)["creators"]]
    assert people == [personal("Doe", "Jane")]
