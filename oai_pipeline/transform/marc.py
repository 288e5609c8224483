"""Import of MARC21 bibliographic records in MARCXML (`marcxml`, root `marc:record`): the
format of library catalogues, of InvenioRDM's and legacy Invenio's (CDS, INSPIRE) feeds and
of DSpace's `marc` crosswalk.

MARC names each value by a field tag and a subfield code, and much of it is transcribed as
printed: ISBD punctuation ends values (`Atlantic,`, `Charles, Ray,`), dates carry brackets
and question marks (`[1957?]`). The import reads the fields repositories fill and strips that
punctuation; the conventions of Invenio (affiliations in $u, ORCIDs as `(orcid)…` in $0,
the collection in 980, the host journal in 773) are read beside the standard's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lxml import etree

from oai_pipeline.doi import normalize_doi
from oai_pipeline.transform import vocabularies as vocab
from oai_pipeline.transform.dates import ChosenDate, first_date, read_date, says_no_date
from oai_pipeline.transform.failure import missing_field
from oai_pipeline.transform.normalize import (
    EUROPEAN_COMMISSION,
    block_text_or_none,
    citation,
    creators_or_contributors,
    description_html,
    element_text,
    eu_repo_grant,
    file_link,
    isbn,
    issn,
    looks_like_organisation,
    name_identifier,
    names_nobody,
    person_or_org,
    split_dc_name,
    text_or_none,
    unique_affiliations,
    unique_identifiers,
)

MARC = "http://www.loc.gov/MARC21/slim"
_LEADER = f"{{{MARC}}}leader"
_CONTROLFIELD = f"{{{MARC}}}controlfield"
_DATAFIELD = f"{{{MARC}}}datafield"


def _is_subfield(tag: object) -> bool:
    """A subfield in any namespace: some producers write `<subfield>` inside
    `<marc:datafield>`, which puts it in the default namespace (in an OAI-PMH response, the
    protocol's), not MARC's."""
    return isinstance(tag, str) and (tag == "subfield" or tag.endswith("}subfield"))


@dataclass(frozen=True)
class Field:
    """A datafield: its place in the record, its indicators and its subfields (code,
    one-line text) in order."""

    position: int
    ind1: str
    ind2: str
    subfields: tuple[tuple[str, str], ...]

    def all(self, code: str) -> list[str]:
        return [text for sub, text in self.subfields if sub == code]

    def first(self, code: str) -> str | None:
        return next((text for sub, text in self.subfields if sub == code), None)


Fields = dict[str, list[Field]]


def _read(record: etree._Element) -> tuple[str, dict[str, str], Fields]:
    """The leader, the control fields by tag and the datafields by tag, in document order.
    Fixed-length data is read whole (`element_text`): a comment inside must not cut it
    short, its values being known by their positions."""
    leader = ""
    controls: dict[str, str] = {}
    fields: Fields = {}
    for position, element in enumerate(record):
        tag = element.tag
        if tag == _DATAFIELD:
            subfields = tuple(
                (_code(child.get("code"), 1), text)
                for child in element
                if _is_subfield(child.tag) and (text := text_or_none("".join(child.itertext())))
            )
            ind1 = _code(element.get("ind1"), 1) or " "
            ind2 = _code(element.get("ind2"), 1) or " "
            field = Field(position, ind1, ind2, subfields)
            fields.setdefault(_code(element.get("tag"), 3), []).append(field)
        elif tag == _CONTROLFIELD:
            controls.setdefault(_code(element.get("tag"), 3), element_text(element))
        elif tag == _LEADER:
            leader = element_text(element)
    return leader, controls, fields


def _code(value: str | None, length: int) -> str:
    """A tag (`length` 3), indicator or subfield code (1) as given, or without the white space
    some producers pad it with (`code=" a "`, MARCXML allows none): padded, `245 $a` was no
    title. The value of the common length is taken as it is (a blank indicator is `" "`)."""
    if value is None:
        return ""
    return value if len(value) == length else value.strip()


# ISBD punctuation that ends a transcribed value: ` /`, ` :`, ` ;`, `,`, `.` (not the period
# of an initial or abbreviation, `Tadeusz Z.`, `N.Y.`: only after a lower-case word of 3+ or
# a digit, `ensemble.`, `1951-1960.`).
_TRAILING = re.compile(r"(?:\s*[/:;,=]|(?:(?<=[a-z]{3})|(?<=\d))\.|\s+\.)+$")


def _clean(text: str | None) -> str | None:
    """A transcribed value without the ISBD punctuation that ends it."""
    return text_or_none(_TRAILING.sub("", text)) if text else None


def import_marc(record: etree._Element) -> dict[str, Any]:
    """A `marc:record` (MARC21 bibliographic) as RDMRecord-shaped data."""
    leader, controls, fields = _read(record)
    title, additional_titles = _titles(fields)
    creators, contributors = _creatibutors(fields)
    series = [] if _SERIES_TAGS.isdisjoint(fields) else _series_fields(fields)
    pids, identifiers, links, related = _identifiers(fields, series)
    description, additional_descriptions = _descriptions(fields, series)
    publication_date, dates = _publication_date(controls, fields)
    metadata: dict[str, Any] = {
        "resource_type": {"id": _resource_type(leader, fields)},
        "title": title,
        "additional_titles": additional_titles,
        "creators": creators,
        "contributors": contributors,
        "publication_date": publication_date,
        "dates": dates,
        "description": description,
        "additional_descriptions": additional_descriptions,
        "subjects": _subjects(fields),
        "rights": _rights(fields),
        "languages": _languages(controls, fields),
        "publisher": _publisher(fields),
        "identifiers": identifiers,
        "related_identifiers": related,
        "sizes": _texts(fields, "300", "sizes"),
        "formats": _texts(fields, None, "formats"),
        "funding": _funding(fields),
    }
    return {"metadata": metadata, "pids": pids, "files": {"enabled": False, "links": links}}


def _texts(fields: Fields, tag: str | None, invenio: str) -> list[str]:
    """The $a of `tag` (300, the extent: `1 sound disc`) and of InvenioRDM's 520 for
    `invenio` (sizes or formats)."""
    chosen = [f for f in fields.get("520", ()) if _INVENIO_520.get(f.ind2) == invenio]
    chosen.extend(fields.get(tag, ()) if tag else ())
    return [text for field in chosen if (text := _clean(field.first("a")))]


def _titles(fields: Fields) -> tuple[str, list[dict[str, Any]]]:
    """245 $a (with the part's number and name, $n $p) is the title, $b the subtitle; 246
    are alternative titles, 242 translated ones."""
    main = next(iter(fields.get("245", ())), None)
    parts = [_clean(text) for code, text in main.subfields if code in "anp"] if main else []
    title = " ".join(part for part in parts if part)
    if not title:
        raise missing_field("metadata.title", "title (MARC 245 $a)")
    additional = []
    if main is not None and (subtitle := _clean(main.first("b"))):
        additional.append({"title": subtitle, "type": {"id": "subtitle"}})
    for tag, kind in (("246", "alternative-title"), ("242", "translated-title")):
        additional.extend(
            {"title": text, "type": {"id": kind}}
            for field in fields.get(tag, ())
            if (text := _clean(field.first("a")))
        )
    return title, additional


# MARC relator codes ($4) of authors, and of roles the target has (InvenioRDM's roles).
_AUTHOR_RELATORS = frozenset({"aut", "cre", "author"})
_ROLES = {
    "edt": "editor", "ths": "supervisor", "dgs": "supervisor", "res": "researcher",
    "spn": "sponsor", "cph": "rightsholder", "pro": "producer", "dst": "distributor",
    "his": "hostinginstitution", "dtm": "datamanager", "col": "datacollector",
    "editor": "editor",  # $e spells the role out
}  # fmt: skip
_ORCID_IN = re.compile(r"(?:\(orcid\)|orcid\.org/)\s*(\S+)", re.I)
_GND_IN = re.compile(r"(?:\(gnd\)|\(DE-588\)|d-nb\.info/gnd/)\s*(\S+)", re.I)


def _creatibutors(fields: Fields) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The main entry (100/110/111) and the added entries (700/710/711) that are authors (no
    relator, or `aut`) are the creators; the other added entries contributors. A record with
    no author at all (a recording catalogued under its title) has its added entries as its
    creators: the target needs one."""
    creators: list[dict[str, Any]] = []
    contributors: list[dict[str, Any]] = []
    entries = sorted(
        ((field, tag) for tag in ("100", "110", "111", "700", "710", "711")
         for field in fields.get(tag, ())),
        key=lambda pair: (pair[1][0], pair[0].position),  # main entries first, then in order
    )  # fmt: skip
    for field, tag in entries:
        entry = _creatibutor(tag, field)
        if entry is None:
            continue
        relators = {r.lower().rstrip(".") for r in field.all("4") + field.all("e")}
        if tag[0] == "1" or not relators or relators & _AUTHOR_RELATORS:
            creators.append(entry)
        else:
            role = next((_ROLES[r] for r in sorted(relators) if r in _ROLES), "other")
            contributors.append({**entry, "role": {"id": role}})
    creators, contributors = creators_or_contributors(creators, contributors)
    if not creators:
        raise missing_field("metadata.creators", "creator (MARC 100/110/111 or 700/710/711 $a)")
    return creators, contributors


def _creatibutor(tag: str, field: Field) -> dict[str, Any] | None:
    """A person (X00, unless ind1 3: a family) or an organisation or meeting (X10, X11)."""
    text = _clean(field.first("a"))
    if text is None:
        return None
    name, affiliation, orcid = split_dc_name(text)
    name = _clean(name) or name
    if names_nobody(name):
        return None  # `et al.` alone, or dates or punctuation only, names nobody
    personal = tag.endswith("00") and field.ind1 != "3" and not looks_like_organisation(name)
    identifiers = []
    for value in field.all("0") + field.all("1"):
        for scheme, pattern in (("orcid", _ORCID_IN), ("gnd", _GND_IN)):
            if (match := pattern.search(value)) and (
                checked := name_identifier(scheme, match.group(1))
            ):
                identifiers.append(checked)
    if orcid is not None:
        identifiers.append(orcid)  # after $0/$1: one ORCID per person, theirs first
    affiliations = unique_affiliations([{"name": text} for text in field.all("u")])
    if affiliation and not affiliations:
        affiliations = [{"name": affiliation}]
    kind = "personal" if personal else "organizational"
    return {
        "person_or_org": person_or_org(name, kind=kind, identifiers=identifiers),
        "affiliations": affiliations,
    }


# Leader/06 (type of record) -> resource type; language material by leader/07 (level).
# `m` (computer file) is software or data alike: `other` (InvenioRDM's 980 tells which).
_RECORD_TYPES = {
    "c": "publication", "d": "publication", "e": "image", "f": "image", "g": "video",
    "i": "audio", "j": "audio", "k": "image", "r": "physicalobject", "t": "publication",
}  # fmt: skip
_LEVELS = {"a": "publication-section", "b": "publication-article", "m": "publication-book",
           "s": "publication-journal"}  # fmt: skip


def _resource_type(leader: str, fields: Fields) -> str:
    """Invenio's collection (980: `ARTICLE`, `THESIS`; InvenioRDM's eu-repo type and its
    `publication`/`article` pair, subtype first) when one names a type, else the leader. A
    text (or a record with no leader) with a dissertation note (502) is a thesis: the note is
    given only for one, and catalogues code a thesis as a book (leader `am`)."""
    values = [
        text
        for field in fields.get("980", ())
        for text in field.all("b") + field.all("a")
        if not text.startswith("user-")  # InvenioRDM's communities
    ]
    mapped = vocab.dc_resource_type(values)
    if mapped != "other":
        return mapped
    kind = leader[6] if len(leader) >= 8 else None
    if kind in (None, "a", "t") and "502" in fields and any(f.subfields for f in fields["502"]):
        return "publication-dissertation"
    if kind == "a":
        return _LEVELS.get(leader[7], "publication")
    return _RECORD_TYPES.get(kind, "other") if kind else "other"


_DATE_NOISE = re.compile(r"^[©℗cp]\s*(?=\d)|[.,;:]+$")
# 008's year with its unknown digits as `u` (`19uu`, `196u`): at least the century known.
_CODED_YEAR = re.compile(r"^[0-9]{2}(?:[0-9]{2}|[0-9]u|uu)$")


def _coded_date(fixed_length_data: str) -> str | None:
    """The date of 008: date1 (07-10), its unknown digits an interval (`19uu`: 1900/1999);
    for the type `q` (06, "questionable") the interval date1/date2 it lies in. None when too
    little of it is known (`uuuu`, `1uuu`) or it is blank."""
    kind, date1, date2 = fixed_length_data[6:7], fixed_length_data[7:11], fixed_length_data[11:15]
    if _CODED_YEAR.match(date1) is None:
        return None
    if kind == "q" and date1.isdigit() and date2.isdigit() and date1 < date2:
        return f"{date1}/{date2}"
    return date1


def _publication_date(
    controls: dict[str, str], fields: Fields
) -> tuple[str | None, list[dict[str, Any]]]:
    """The date of publication: 264 (second indicator 1) or 260 $c, else the date of 008,
    else the host item's year (773 $y) or Invenio's preprint date (269 $c), else the year of a
    $c in words (`Spring 1985`). None when the record has none, or only says it has none
    (`[n.d.]`, `0000`): the oai-import transformer then takes the OAI datestamp's. A
    transcribed date read only approximately (`[19--]`, `[1885?]`) or only as its year keeps
    its words as an `issued` date's description, as oai_dc's do."""
    transcribed = [
        text
        for tag in ("264", "260")
        for field in fields.get(tag, ())
        if tag == "260" or field.ind2 == "1"
        for text in field.all("c")
        if not text.startswith("info:")  # InvenioRDM's embargo end date
    ]
    candidates = list(transcribed)
    coded = _coded_date(controls.get("008", ""))
    if coded is not None:
        candidates.append(coded)
    candidates.extend(text for field in fields.get("773", ()) for text in field.all("y"))
    candidates.extend(text for field in fields.get("269", ()) for text in field.all("c"))
    # `[n.d.]`, `[s.a.]`, `0000`: the catalogue says there is no date; none is a date to read
    dated = [
        text
        for candidate in candidates
        if not says_no_date(text := _DATE_NOISE.sub("", candidate).strip())
    ]
    if not dated:
        return None, []
    chosen = first_date(dated)
    issued = [] if chosen.text == coded or chosen.words is None else [chosen]
    # A $c that only its words date (`Spring 1985`), beside the date chosen (008's `1985`),
    # keeps them as oai_dc does: it was dropped.
    for text in transcribed:
        cleaned = _DATE_NOISE.sub("", text).strip()
        if cleaned != chosen.text and (found := read_date(cleaned)) and not found.exact:
            entry = ChosenDate(found.date, cleaned, found.words)
            if entry not in issued:
                issued.append(entry)
    return chosen.date, [
        {"date": date.date, "type": {"id": "issued"}, "description": date.words} for date in issued
    ]


def _publisher(fields: Fields) -> str | None:
    for tag in ("264", "260"):
        for field in fields.get(tag, ()):
            if (tag == "260" or field.ind2 == "1") and (name := _clean(field.first("b"))):
                return name
    return None


# InvenioRDM writes the formats as 520 with second indicator 1, the sizes with 2 (the
# indicator is undefined in MARC, so no other producer sets it).
_INVENIO_520 = {"1": "formats", "2": "sizes"}


def _descriptions(fields: Fields, series: list[Field]) -> tuple[str | None, list[dict[str, Any]]]:
    """The first summary (520) is the description; further summaries, the contents (505),
    the general notes (500, where InvenioRDM writes its additional descriptions) and the host
    item's citation (773) follow, then the dissertation note (502) and the series (490, 800-830),
    which are never the description: a record without a summary is not described by them."""
    found: list[tuple[str, str]] = []
    for tag, kind in (("520", "abstract"), ("505", "table-of-contents"), ("500", "other")):
        for field in fields.get(tag, ()):
            if tag == "520" and field.ind2 in _INVENIO_520:
                continue
            text = block_text_or_none(" ".join(field.all("a")))
            if text and (html := description_html(text)):
                found.append((html, kind))
    journals = fields.get("773", []) + [f for f in fields.get("909", ()) if f.ind1 + f.ind2 == "C4"]
    found.extend(
        (described["description"], "series-information")
        for field in journals
        if (described := _host_citation(field))
    )
    notes: list[dict[str, Any]] = []
    if "502" in fields:
        notes.extend(
            {"description": note, "type": {"id": "other"}}
            for field in fields["502"]
            if (note := _thesis_note(field))
        )
    if series:
        notes.extend(
            {"description": text, "type": {"id": "series-information"}} for text in _series(series)
        )
    if not found:
        return None, notes
    additional = [{"description": text, "type": {"id": kind}} for text, kind in found[1:]]
    return found[0][0], additional + notes


def _thesis_note(field: Field) -> str | None:
    """A dissertation note (502) as catalogues print it: $a is the whole note (`Thesis (Ph.
    D.)--Johns Hopkins, 1928.`); the parts ($b degree, $c granting institution, $d year, as
    ETD crosswalks, INSPIRE and InvenioRDM write them) are put in that form, which the MARC
    documentation gives as their equivalent."""
    if text := _clean(" ".join(field.all("a"))):
        return text
    degree, institution, year = (_clean(field.first(code)) for code in "bcd")
    if not (degree or institution or year):
        return None
    note = f"Thesis ({degree})" if degree else "Thesis"
    if institution:
        note += f"--{institution}"
    return f"{note}, {year}" if year else note


# The series fields: the statement (490; 440 before 2008) and the added entries, the
# series' controlled form: under a person (800), an organisation (810), a meeting (811) or
# its title alone (830).
_SERIES_TAGS = frozenset({"490", "440", "800", "810", "811", "830"})


def _series_fields(fields: Fields) -> list[Field]:
    """The series statements: 490 (as transcribed; first indicator 1 when an added entry,
    800-830, gives the series' controlled form: then that one is read), the added entries
    (800/810/811 only with the series' title, $t: without it they name no series) and 440."""
    added = [f for tag in ("800", "810", "811") for f in fields.get(tag, ()) if f.first("t")]
    added += fields.get("830", ())
    chosen = [f for f in fields.get("490", ()) if not (added and f.ind1 == "1")]
    return chosen + added + fields.get("440", [])


def _series(series_fields: list[Field]) -> list[str]:
    """The series the item is part of, `title ; volume` (the ISBD form, as DataCite's
    SeriesInformation gives it). A series entered under a name (800/810/811) is
    `name. title ; volume` (`Taylor, Charles, 1931- Philosophical papers ; 1`), as catalogues
    display it: its title alone is often only `Proceedings` or `Map series`."""
    series: list[str] = []
    for field in series_fields:
        codes = field.subfields
        at = next((i for i, (code, _) in enumerate(codes) if code == "t"), None)
        heading = None
        if at is not None:  # the name ($a and its parts: numbers, dates, places) before $t
            heading = _clean(" ".join(text for code, text in codes[:at] if code in "abcdnq"))
            codes = codes[at:]
        title = " ".join(part for code, text in codes if code in "tanp" and (part := _clean(text)))
        if heading and title:
            title = f"{heading} {title}" if heading[-1] in ".-" else f"{heading}. {title}"
        volume = _clean(field.first("v"))
        text = f"{title} ; {volume}" if title and volume else title
        if text and text not in series:
            series.append(text)
    return series


def _host_citation(field: Field) -> dict[str, Any] | None:
    """The journal or book of a 773 (legacy Invenio: $p journal, $v volume, $n issue,
    $c pages, $y year; the standard: $t title, $g the part, `Vol. 5, no. 2 (2010)`) or of
    Zenodo's and InvenioRDM's 909 C4, with the codes of Invenio's 773.
    InvenioRDM's 773 with $i holds a related identifier, no citation."""
    if field.first("i"):
        return None
    start, _, end = (field.first("c") or "").partition("-")
    return citation(
        field.first("p") or _clean(field.first("t")),  # Invenio's $p: `Nucl.Instrum.Meth.`
        field.first("v"),
        field.first("n"),
        start or None,
        end or None,
        field.first("g"),
        field.first("y"),
    )


# The second indicator of a subject field: its thesaurus (7: named in $2).
_THESAURI = {"0": "LCSH", "1": "LCSH", "2": "MeSH", "3": "NAL", "5": "CSH", "6": "RVM"}


def _subjects(fields: Fields) -> list[dict[str, Any]]:
    """Subject headings (600-655, their subdivisions joined by ` -- `) and keywords (653).
    The chronological ones (648, `1594-1920 -- Spanish Colonial Period`) are headings too:
    catalogues give a collection's period there. InvenioRDM writes its licence ids as 650 17
    with $2 `spdx`: those are no subjects."""
    subjects: list[dict[str, Any]] = []
    for tag in ("600", "610", "611", "630", "648", "650", "651", "653", "655"):
        for field in fields.get(tag, ()):
            scheme = field.first("2") if field.ind2 == "7" else _THESAURI.get(field.ind2)
            if scheme and scheme.lower() == "spdx":
                continue
            parts = [_clean(text) for code, text in field.subfields if code in "abvxyz"]
            text = " -- ".join(part for part in parts if part)
            if text and not any(s["subject"] == text for s in subjects):
                subjects.append({"subject": text, "scheme": scheme if tag != "653" else None})
    return subjects


def _rights(fields: Fields) -> list[dict[str, Any]]:
    """Terms of use (540): a licence by its URL ($u), named by $a (which names the licence
    itself when there is no URL: `CC BY 4.0`, `MIT`). eu-repo access terms
    (InvenioRDM writes its access right there) are no licence."""
    rights = []
    for field in fields.get("540", ()):
        title, url = field.first("a"), field.first("u")
        if (title or "").startswith("info:eu-repo/") or not (title or url):
            continue
        license_id = vocab.license_id_from_url(url) if url else None
        if license_id is None and title:  # `CC BY 4.0`, `MIT` without a URL
            license_id = vocab.license_id_from_name(title)
        right: dict[str, Any] = {"id": license_id, "link": url}
        right["title"] = {"en": title} if title else (None if license_id else {"en": url})
        rights.append(right)
    return rights


# InvenioRDM's access statuses, which it writes in 542 $l (MARC's copyright status).
_INVENIORDM_ACCESS = frozenset({"open", "restricted", "embargoed", "metadata-only"})


# The European Union's framework programmes, which CDS writes as a 536's agency ($a `FP7`):
# their funder is the European Commission (CDS's migration to InvenioRDM reads them so).
_EU_PROGRAMMES = re.compile(r"^(?:FP ?[1-7]|H2020|Horizon 2020|Horizon Europe)$", re.I)


def _funding(fields: Fields) -> list[dict[str, Any]]:
    """Funding information notes (536) as the funder ($a: legacy Invenio's funding agency at
    CDS and INSPIRE, an EU framework programme being the European Commission; the text of
    the note in a catalogue) and the award: its number ($c grant, else $b contract, $f
    project, $d other number) and, beside a grant or contract number, the project's acronym
    CDS and INSPIRE write in $f (`AIDA-2020`) as its title, the only name the note gives it.
    An OpenAIRE grant (`info:eu-repo/grantAgreement/EC/FP7/282896`, DSpace's dc.relation)
    names both. InvenioRDM writes an award's title in $a and its number in $c but no funder,
    which the target requires (as InvenioRDM's own DataCite export and DataCite do): its 536
    (told by an access status in 542 $l) are left out unless one is an OpenAIRE grant, and
    its DataCite format is the one that carries its funding whole."""
    inveniordm = any(t in _INVENIORDM_ACCESS for f in fields.get("542", ()) for t in f.all("l"))
    funding: list[dict[str, Any]] = []
    for field in fields.get("536", ()):
        entry = next((grant for _, text in field.subfields if (grant := eu_repo_grant(text))), None)
        if entry is None:
            name = _clean(field.first("a"))
            if inveniordm or name is None:
                continue  # an award without a funder is no funding the target can hold
            number = next((text for code in "cbfd" if (text := field.first(code))), None)
            award: dict[str, Any] | None = None
            if number:
                award = {"number": number, "identifiers": []}
                acronym = field.first("f")
                if acronym and acronym != number:
                    award["title"] = {"en": acronym}
            funder = EUROPEAN_COMMISSION if _EU_PROGRAMMES.match(name) else {"name": name}
            entry = {"funder": {**funder, "identifiers": []}, "award": award}
        if entry not in funding:
            funding.append(entry)
    return funding


def _languages(controls: dict[str, str], fields: Fields) -> list[dict[str, str]]:
    """041 $a (codes, some run together: `engfre`), else the language of 008."""
    codes = [code for field in fields.get("041", ()) for text in field.all("a") for code in
             _language_codes(text)]  # fmt: skip
    if not codes and len(controls.get("008", "")) >= 38:
        codes = [controls["008"][35:38]]
    languages: list[dict[str, str]] = []
    for code in codes:
        for language in vocab.language_ids(code) if code.strip() else ():  # `eng; ger`
            if {"id": language} not in languages:
                languages.append({"id": language})
    return languages


def _language_codes(text: str) -> list[str]:
    """`engfre` is `eng` and `fre` (041 $a of older records); anything else one code."""
    if len(text) > 3 and len(text) % 3 == 0 and text.isalpha():
        return [text[i : i + 3] for i in range(0, len(text), 3)]
    return [text]


def _identifiers(
    fields: Fields, series: list[Field]
) -> tuple[dict[str, Any], list[dict[str, str]], list[dict[str, str]], list[dict[str, Any]]]:
    """The pids (the first DOI of 024, else that of an 856 of the resource itself, second
    indicator 0 or blank (`_own_electronic_doi`), when the record names no other DOI), the
    record's other identifiers (ISBN 020, ISSN 022, 024, arXiv 037, system control numbers
    035, its URL 856), the file links (856 of the resource or of a version naming a file,
    `_FILE_LOCATIONS`) and the related identifiers (the host item of 773, the series of 490,
    800-830; 856 of a version, a part or a related resource, or whose $3 names a part or a
    text about the item, `_materials_relation`)."""
    pids: dict[str, Any] = {}
    identifiers: list[dict[str, str]] = []
    related: list[dict[str, Any]] = []
    links: list[dict[str, str]] = []
    for field in fields.get("024", ()):
        value = field.first("a") or field.first("o")  # InvenioRDM: $o, a DOI not the pid
        if not value:
            continue
        scheme = _standard_identifier_scheme(field, value)
        doi = normalize_doi(value) if scheme == "doi" else None
        if doi is None:
            identifiers.append(
                {"identifier": value, "scheme": scheme if scheme != "doi" else "other"}
            )
        elif "doi" not in pids and field.first("a"):
            pids["doi"] = {"identifier": doi, "provider": "external"}
        else:
            identifiers.append({"identifier": doi, "scheme": "doi"})
    for tag, scheme, check in (("020", "isbn", isbn), ("022", "issn", issn)):
        for field in fields.get(tag, ()):
            value = (field.first("a") or "").split(" ")[0]
            if number := check(value):
                identifiers.append({"identifier": number, "scheme": scheme})
    for field in fields.get("037", ()):
        if (field.first("9") or "").lower() == "arxiv" and (value := field.first("a")):
            identifiers.append({"identifier": value.removeprefix("arXiv:"), "scheme": "arxiv"})
    for field in fields.get("035", ()):
        if entry := _control_number(field):
            identifiers.append(entry)
    any_doi = "doi" in pids or any(entry["scheme"] == "doi" for entry in identifiers)
    own_doi = None if any_doi else _own_electronic_doi(fields.get("856", ()))
    for field in fields.get("856", ()):
        materials = _materials_relation(field)
        for url in field.all("u"):
            if (location := _electronic_location(url)) is None:
                continue
            if (
                field.ind2 in _FILE_LOCATIONS
                and location["scheme"] == "url"
                and materials is None
                and (link := file_link(url)) is not None
            ):
                links.append(link)
            elif location["identifier"] == own_doi and "doi" not in pids:
                # the resource's own DOI, and the record names no other: its DOI, as a
                # dc:identifier DOI is (it was only an identifier, the record left without)
                pids["doi"] = {"identifier": own_doi, "provider": "external"}
            elif materials is not None and field.ind2 in _MATERIALS_DECIDE:
                # a link to a part of the item (or of its version) or a text about it: not the
                # record's own, nor the work in another form
                related.append({**location, "relation_type": {"id": materials}})
            elif field.ind2 in _OWN_LOCATIONS:
                identifiers.append(location)
            else:
                relation = _RELATIONSHIPS.get(field.ind2, "references")
                related.append({**location, "relation_type": {"id": relation}})
    own = pids.get("doi")
    return (
        pids,
        unique_identifiers(identifiers, own["identifier"] if own else None),
        links,
        related + _host(fields, series),
    )


# 856's second indicators that state no relationship: blank, "no information provided" (the
# one link older catalogues and DSpace write), and 8, "no display constant generated" (the
# link's text is in $3, $y or $z). MARC 21 gives 8 no relationship: it was read as a related
# resource (`references`), as 2 is; like blank, it is a location of the resource itself.
_NO_RELATIONSHIP = frozenset(" 8")
# The relationships 856's second indicator states, as the target's relation types: 1 a version
# of the resource; 3 and 4 component parts (a chapter, a table of contents) of the resource or
# of its online version, which the record has as parts. 2, a related resource, and any
# undefined value stay `references` (2 a `haspart` when its $3 names a part,
# `_MATERIALS_DECIDE`).
_RELATIONSHIPS = {"1": "isversionof", "3": "haspart", "4": "haspart"}
# The 856s whose file is the record's own: those of the resource itself (0, or no relationship
# stated) and of a version of it (1). A file of a related resource (2) or of a component part
# (3, 4) is another resource's: it stays a related identifier, not a file of this record.
_FILE_LOCATIONS = _NO_RELATIONSHIP | frozenset("01")


# 856 $3, "materials specified": the part of the item the link applies to. Some name a part of
# it (`Table of contents`, the DNB's `Inhaltsverzeichnis`, `Sample text` and its German
# `Leseprobe`, `Cover image`, `Umschlagbild`: what 856 4 3 links), which the record has
# (`haspart`); others a text about it (the Library of Congress's enrichment links: `Publisher
# description`, `Contributor biographical information`, `Book review`, which LC codes 856 4 2,
# a related resource; the DNB's `Inhaltstext`, its publisher's description, which it codes
# 856 4 2 too, and the labels the German union catalogues (K10plus, SWB, BVB) give such texts:
# `Rezension`, `Klappentext` (the blurb), `Autorenbiografie`, `Kurzbeschreibung`, `Ausführliche
# Beschreibung`, `Beschreibung für den Leser`, `Verlagsinformation`, `Inhaltsangabe` (a
# synopsis, as `Inhaltstext` is, not a part of the book as a paper's abstract is) …), which it
# `references`. Neither is the item: such an 856 gives the record neither its DOI, nor a file,
# nor an identifier of its own. A label is matched in any case, in the plural too
# (`Rezensionen`), whatever follows it (`Rezension.`, `Book review (H-Net)`). Any other $3
# (`Full text`, `Volltext`, `PDF`) names the item or its form; so does `Beschreibung` alone,
# too generic to say it is a text about the item (it may be the item's own description page).
_PARTS = re.compile(
    r"^(?:table of contents|contents|toc|inhaltsverzeichnis(?:se)?|cover(?: image)?|umschlagbild"
    r"|abstract|summary|sample text|leseprobe)\b",
    re.I,
)
_ABOUT = re.compile(
    r"^(?:publisher(?:'s)? description|contributor biographical information|(?:book )?reviews?"
    r"|inhaltstext|inhaltsangabe|inhaltsbeschreibung|kurzbeschreibung"
    r"|ausf(?:ü|ue)hrliche beschreibung|beschreibung f(?:ü|ue)r den leser"
    r"|verlagsinformation(?:en)?|verlagsbeschreibung|rezension(?:en)?|besprechung(?:en)?"
    r"|klappentexte?|autorenbiogra(?:f|ph)ien?)\b",
    re.I,
)
# The 856s of the resource itself: 0, or no relationship stated.
_OWN_LOCATIONS = _NO_RELATIONSHIP | frozenset("0")
# The 856s whose $3 decides their relation when it names a part or a text about the item: those
# of the resource itself, of a version of it (1) and of a related resource (2). Before MARC
# defined 3 and 4 (component parts), LC coded its tables of contents `856 41 $3 Table of
# contents only`, and CONSER still codes a print serial's online part 41 with the part in $3:
# such a link is a part of the version (what 4 says now), not the work in another form
# (`isversionof`). Catalogues code their scanned tables of contents 2, a related resource,
# too (the DNB and the German union catalogues: `856 42 $3 Inhaltsverzeichnis`): a table of
# contents is no other resource the record `references` but a part it has, as 3 says; a text
# about the item stays `references`, what 2 gives anyway.
_MATERIALS_DECIDE = _OWN_LOCATIONS | frozenset("12")


def _materials_relation(field: Field) -> str | None:
    """The record's relation to what the 856's $3 names: `haspart` for a part of the item
    (`_PARTS`), `references` for a text about it (`_ABOUT`), None for the item itself."""
    for materials in field.all("3"):
        if _PARTS.match(text := materials.strip()):
            return "haspart"
        if _ABOUT.match(text):
            return "references"
    return None


def _own_electronic_doi(fields: list[Field]) -> str | None:
    """The DOI of the first 856 of the resource itself (second indicator 0), else of the
    first whose relationship is not given (`_NO_RELATIONSHIP`); neither when its $3 names a
    part or a text about it (`_materials_relation`). Any $3 made a blank one's DOI not the
    record's (`Full text` too), while its file was the record's whatever the $3: one rule
    serves both now."""
    for relationships in (frozenset("0"), _NO_RELATIONSHIP):
        for field in fields:
            if field.ind2 not in relationships or _materials_relation(field):
                continue
            for url in field.all("u"):
                location = _electronic_location(url)
                if location is not None and location["scheme"] == "doi":
                    return location["identifier"]
    return None


# 024's first indicator names the standard: 0 ISRC, 1 UPC, 2 ISMN, 3 EAN, 4 SICI; 7 the one its $2
# names (`doi`, `hdl`, `urn`); 8 an unspecified one. The target has no scheme for ISRC, ISMN and
# SICI: they are `other`, as is an 024 7 without $2 unless its value is a DOI.
_STANDARD_IDENTIFIERS = {"1": "upc", "3": "ean13"}


def _standard_identifier_scheme(field: Field, value: str) -> str:
    """The target's scheme of an 024 (a `doi` one may still be no DOI)."""
    if source := field.first("2"):
        if source.strip().lower() == "uri":  # a URL, URN or doi.org URL is of its scheme
            location = _electronic_location(value)
            scheme = location["scheme"] if location else "other"
            return scheme if scheme in ("url", "urn", "doi") else "other"
        return vocab.identifier_scheme(source)
    if field.ind1 in "78 " and normalize_doi(value):
        return "doi"
    return _STANDARD_IDENTIFIERS.get(field.ind1, "other")


# 856 $u is a URI, as catalogues write it: a URL, else a URN (`urn:nbn:…`), `doi:…` or `hdl:…`.
_URL = re.compile(r"^(?:https?|ftp)://\S+$", re.I)
_HANDLE = re.compile(r"^hdl:\s*(\S+/\S+)$", re.I)


def _electronic_location(uri: str) -> dict[str, str] | None:
    """An 856 $u as an identifier of its scheme; None for words (`Available online`): they
    were kept as a `url` nothing can open."""
    if _URL.match(uri):
        if doi := normalize_doi(uri):  # a doi.org URL: the DOI, as in every other format
            return {"identifier": doi, "scheme": "doi"}
        return {"identifier": uri, "scheme": "url"}
    if uri[:4].lower() == "urn:":
        return {"identifier": uri, "scheme": "urn"}
    if uri[:4].lower() == "doi:" and (doi := normalize_doi(uri)):
        return {"identifier": doi, "scheme": "doi"}
    if match := _HANDLE.match(uri):
        return {"identifier": match.group(1), "scheme": "handle"}
    return None


# 035, a system control number: `(OCoLC)ocm44279786` (the catalogue that numbered it, by its
# MARC organisation code, then the number), or legacy Invenio's source in $9 and the number in
# $a (CDS, INSPIRE: `$9 arXiv $a oai:arXiv.org:1409.2361`, `$9 CDS $a 1234`). A number of a
# catalogue that has a permanent URL for it is that URL, the scheme the target can link;
# arXiv's is an arXiv id; any other keeps its source as `(source)number`, MARC's own form,
# with the scheme `other`.
_CONTROL_NUMBER = re.compile(r"^\(([^()]+)\)\s*(.+)$")
_OCLC_NUMBER = re.compile(r"^(?:ocm|ocn|on)?0*(\d+)$")
_ARXIV_PREFIX = re.compile(r"^(?:oai:arXiv\.org:|arXiv:)", re.I)
_RECORD_URLS = {
    "cds": "https://cds.cern.ch/record/{}",
    "inspire": "https://inspirehep.net/literature/{}",
}


def _control_number(field: Field) -> dict[str, str] | None:
    """An 035 as an identifier ($z, a cancelled number, is none)."""
    value = field.first("a")
    if value is None:
        return None
    source = field.first("9")
    if source is None and (match := _CONTROL_NUMBER.match(value)):
        source, value = match.group(1), match.group(2).strip()
    key = (source or "").strip().lower()
    if key == "ocolc" and (number := _OCLC_NUMBER.match(value)):
        return {"identifier": f"https://www.worldcat.org/oclc/{number.group(1)}", "scheme": "url"}
    if key == "arxiv":
        return {"identifier": _ARXIV_PREFIX.sub("", value), "scheme": "arxiv"}
    if key in _RECORD_URLS and value.isdigit():
        return {"identifier": _RECORD_URLS[key].format(value), "scheme": "url"}
    return {"identifier": f"({source}){value}" if source else value, "scheme": "other"}


def _host(fields: Fields, series: list[Field]) -> list[dict[str, Any]]:
    """773, the host item: its ISSN ($x) or ISBN ($z) is what the record is published in;
    InvenioRDM writes its related identifiers there ($a identifier, $n scheme, $i relation).
    A series' ISSN (490, 800-830 $x) is what the record is part of."""
    related: list[dict[str, Any]] = []
    for field in fields.get("773", ()):
        for code, scheme, check in (("x", "issn", issn), ("z", "isbn", isbn)):
            for value in field.all(code):
                if number := check(value):
                    related.append(
                        {
                            "identifier": number,
                            "scheme": scheme,
                            "relation_type": {"id": "ispublishedin"},
                        }
                    )
        value, scheme, relation = field.first("a"), field.first("n"), field.first("i")
        if value and scheme and relation:
            kind = vocab.identifier_scheme(scheme)
            related.append(
                {
                    "identifier": normalize_doi(value) or value if kind == "doi" else value,
                    "scheme": kind,
                    "relation_type": {"id": vocab.relation_type(relation)},
                }
            )
    for field in series:
        for value in field.all("x"):
            part_of = {
                "identifier": issn(value),
                "scheme": "issn",
                "relation_type": {"id": "ispartof"},
            }
            if part_of["identifier"] and part_of not in related:
                related.append(part_of)
    return related
