"""Import of arXiv's own OAI-PMH formats: `arXiv` (authors in parts, with affiliations) and
`arXivRaw` (close to arXiv's internal record: the authors as one string, the version history).

Both describe one e-print. Its persistent identifier is the DataCite DOI arXiv registers for
every paper, `10.48550/arXiv.<id>`; the `doi` element holds the DOIs of the published version
(a journal article, several separated by spaces), which become related identifiers, never the
record's own DOI.

arXiv text is plain text with TeX in it. One-line values have their whitespace runs collapsed
and TeX kept as written (`\\nu` is TeX, not a line break). The abstract is escaped into HTML,
not read as HTML: `$a<b$` is mathematics, not a tag, and `description_html` would drop it.
"""

from __future__ import annotations

import html
import re
import unicodedata
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any

from lxml import etree

from oai_pipeline.doi import normalize_doi
from oai_pipeline.transform import vocabularies as vocab
from oai_pipeline.transform.dates import normalize_date
from oai_pipeline.transform.failure import VALIDATION, TransformFailure, missing_field, shown
from oai_pipeline.transform.normalize import (
    block_text_or_none,
    name_identifier,
    name_or_none,
    orcid_in_note,
    person_or_org,
    text_or_none,
    unique_affiliations,
    without_et_al,
)

ARXIV = "http://arxiv.org/OAI/arXiv/"
ARXIV_RAW = "http://arxiv.org/OAI/arXivRaw/"
DOI_PREFIX = "10.48550"
"""arXiv's DataCite DOI prefix: the DOI of e-print `<id>` is 10.48550/arXiv.<id>."""

# The subject schemes of the classifications an e-print carries.
CATEGORY_SCHEME = "arXiv"
MSC_SCHEME = "MSC"
ACM_SCHEME = "ACM CCS"

# A new-style id (`0704.0001`, `1501.02894`) or an old-style one (`math/0211159`, also written
# with the subject class `math.GT/0309136`); a version (`v2`) or an `arXiv:` prefix are dropped.
_ID = re.compile(
    r"(?:arxiv:)?(?:(?P<new>(?P<new_yymm>\d{4})\.\d{4,5})"
    r"|(?P<archive>[a-z]+(?:-[a-z]+)*)(?:\.[a-z]{2})?/(?P<number>(?P<old_yymm>\d{4})\d{3}))"
    r"(?:v\d+)?",
    re.I,
)
# In the abstract a line break followed by indentation starts a new line (arXiv's rule: other
# line breaks are the submitter's wrapping and are stripped).
_LINE_BREAK = re.compile(r"\n[ \t]+")
_SEPARATORS = re.compile(r"[;,]")
# An MSC 2000-2020 code: 14J60, 14Jxx, 14-XX, 68-01.
_MSC_CODE = re.compile(r"\b\d{2}(?:[A-Z](?:\d{2}|xx|XX)|-(?:\d{2}|XX|xx))\b")
# A name without forenames that names a group of people, not a person.
_ORGANISATION = re.compile(r"\b(?:collaboration|consortium|team|group|project)\b", re.I)
# The licenses arXiv itself defines (Creative Commons licenses are known by id instead).
_ARXIV_LICENSE = re.compile(r"arxiv\.org/licenses/([A-Za-z0-9.-]+(?:/[0-9.]+)?)/?$", re.I)
_ARXIV_LICENSES = {
    "nonexclusive-distrib/1.0": "arXiv.org perpetual, non-exclusive license to distribute",
    "assumed-1991-2003": "arXiv.org assumed non-exclusive license to distribute (1991-2003)",
}


class _Paths:
    """The precompiled XPaths of one of the two formats (same element names, two namespaces)."""

    def __init__(self, namespace: str) -> None:
        def path(expression: str) -> etree.XPath:
            return etree.XPath(expression, namespaces={"a": namespace})

        self.id = path("a:id")
        self.title = path("a:title")
        self.categories = path("a:categories")
        self.comments = path("a:comments")
        self.journal_ref = path("a:journal-ref")
        self.report_no = path("a:report-no")
        self.msc_class = path("a:msc-class")
        self.acm_class = path("a:acm-class")
        self.doi = path("a:doi")
        self.license = path("a:license")
        self.abstract = path("a:abstract")
        # arXiv
        self.created = path("a:created")
        self.updated = path("a:updated")
        self.author = path("a:authors/a:author")
        self.keyname = path("a:keyname")
        self.forenames = path("a:forenames")
        self.suffix = path("a:suffix")
        self.affiliation = path("a:affiliation")
        # arXivRaw
        self.authors = path("a:authors")
        self.version = path("a:version")
        self.date = path("a:date")


_ARXIV = _Paths(ARXIV)
_RAW = _Paths(ARXIV_RAW)


def _texts(path: etree.XPath, element: etree._Element) -> list[str]:
    """The one-line values of an element (whitespace runs collapsed), empty ones left out."""
    return [text for found in path(element) if (text := text_or_none("".join(found.itertext())))]


def _text(path: etree.XPath, element: etree._Element) -> str | None:
    texts = _texts(path, element)
    return texts[0] if texts else None


def import_arxiv(root: etree._Element) -> dict[str, Any]:
    """An `arXiv` metadata element (metadataPrefix=arXiv) as RDMRecord-shaped data."""
    paths = _ARXIV
    arxiv_id = _arxiv_id(paths, root)
    title = _title(paths, root)
    creators = [creator for author in paths.author(root) if (creator := _author(author))]
    if not creators:
        raise missing_field("metadata.creators", "author")
    # `created` is the date of the first version; the id names its month when it is unreadable.
    publication_date = _date(_text(paths.created, root)) or _id_month(arxiv_id)
    updated = _date(_text(paths.updated, root))  # a malformed date is left out
    dates = [{"date": updated, "type": {"id": "updated"}}] if updated else []
    return _record(paths, root, arxiv_id, title, creators, publication_date, dates, None)


def import_arxiv_raw(root: etree._Element) -> dict[str, Any]:
    """An `arXivRaw` metadata element (metadataPrefix=arXivRaw) as RDMRecord-shaped data."""
    paths = _RAW
    arxiv_id = _arxiv_id(paths, root)
    title = _title(paths, root)
    creators = _raw_authors(_text(paths.authors, root) or "")
    if not creators:
        raise missing_field("metadata.creators", "author")
    versions = _versions(root)
    first_date = versions[0][1] if versions else None
    dates = [
        {"date": date, "type": {"id": "updated"}, "description": label}
        for label, date in versions[1:]
        if date is not None  # a malformed date is left out
    ]
    version = versions[-1][0] if versions else None
    publication_date = first_date or _id_month(arxiv_id)
    return _record(paths, root, arxiv_id, title, creators, publication_date, dates, version)


def _record(
    paths: _Paths,
    root: etree._Element,
    arxiv_id: str,
    title: str,
    creators: list[dict[str, Any]],
    publication_date: str,
    dates: list[dict[str, Any]],
    version: str | None,
) -> dict[str, Any]:
    """What both formats share, around what they write differently."""
    doi = normalize_doi(f"{DOI_PREFIX}/arXiv.{arxiv_id}")
    abstract = _text_block(paths.abstract, root)
    metadata: dict[str, Any] = {
        "resource_type": {"id": "publication-preprint"},
        "title": title,
        "creators": creators,
        "publication_date": publication_date,
        "description": _html(abstract) if abstract else None,
        "additional_descriptions": _notes(paths, root),
        "subjects": _subjects(paths, root),
        "rights": [_right(text) for text in _texts(paths.license, root)],
        "publisher": "arXiv",
        "dates": dates,
        "identifiers": [{"identifier": f"arXiv:{arxiv_id}", "scheme": "arxiv"}],
        "related_identifiers": _published_versions(paths, root, doi),
        "version": version,
    }
    return {
        "metadata": metadata,
        "pids": {"doi": {"identifier": doi, "provider": "external"}},
        "files": {"enabled": False, "links": []},
    }


def _arxiv_id(paths: _Paths, root: etree._Element) -> str:
    """The canonical id (`1507.03011`, `math/0211159`): no version, no subject class."""
    text = _text(paths.id, root)
    if text is None:
        raise missing_field("pids.doi", "arXiv identifier (<id>)")
    match = _ID.fullmatch(text)
    if match is None:
        raise TransformFailure(
            VALIDATION,
            f"{shown(text)} is not an arXiv identifier (like 2301.00001 or math/0211159)",
            "pids.doi",
        )
    if match["new"]:
        return match["new"]
    return f"{match['archive'].lower()}/{match['number']}"


def _id_month(arxiv_id: str) -> str:
    """The month of the first submission, which every arXiv id starts with (YYMM)."""
    match = _ID.fullmatch(arxiv_id)
    assert match is not None  # the id was read by _arxiv_id
    yymm = match["new_yymm"] or match["old_yymm"]
    year, month = int(yymm[:2]), int(yymm[2:])
    # old-style ids ran from 1991 to March 2007, new-style ones from April 2007
    year += 1900 if match["old_yymm"] and year >= 91 else 2000
    if not 1 <= month <= 12:
        raise missing_field("metadata.publication_date", "date of the first version")
    return f"{year}-{month:02d}"


def _title(paths: _Paths, root: etree._Element) -> str:
    title = _text(paths.title, root)
    if title is None:
        raise missing_field("metadata.title", "title")
    return title


def _date(text: str | None) -> str | None:
    """A date of the record (`2015-07-10`), or None when there is none or it is no date."""
    if text is None:
        return None
    try:
        return normalize_date(text)
    except ValueError:
        return None


def _text_block(path: etree.XPath, root: etree._Element) -> str | None:
    for found in path(root):
        if text := block_text_or_none("".join(found.itertext())):
            return text
    return None


def _html(text: str) -> str | None:
    """Plain text as the target's HTML: escaped (TeX's `<` and `&` stay characters), each
    line arXiv breaks (an indented line) after a `<br>`, the wrapping of the rest undone."""
    lines = [
        html.escape(line, quote=False)
        for part in _LINE_BREAK.split(text)
        if (line := text_or_none(part))
    ]
    return "<br>".join(lines) or None


def _notes(paths: _Paths, root: etree._Element) -> list[dict[str, Any]]:
    """Comments, journal reference and report number, as arXiv's abstract page labels them:
    InvenioRDM has no field for them, and three `other` descriptions without a label would
    not say which is which."""
    notes = []
    for label, path in (
        ("Comments", paths.comments),
        ("Journal reference", paths.journal_ref),
        ("Report number", paths.report_no),
    ):
        for text in _texts(path, root):
            description = f"{label}: {html.escape(text, quote=False)}"
            notes.append({"description": description, "type": {"id": "other"}})
    return notes


def _subjects(paths: _Paths, root: etree._Element) -> list[dict[str, str]]:
    """The arXiv categories (the primary one first), then the MSC and ACM classes."""
    terms: list[tuple[str, str]] = []
    for text in _texts(paths.categories, root):
        terms.extend((category, CATEGORY_SCHEME) for category in text.split())
    for text in _texts(paths.msc_class, root):
        # `14J60 (Primary) 14F05, 14J26 (Secondary)`: the codes; free text as it is split
        codes = _MSC_CODE.findall(text) or _split(text)
        terms.extend((code, MSC_SCHEME) for code in codes)
    for text in _texts(paths.acm_class, root):
        terms.extend((code, ACM_SCHEME) for code in _split(text))  # `F.2.2; I.2.7`
    return [{"subject": term, "scheme": scheme} for term, scheme in dict.fromkeys(terms)]


def _split(text: str) -> list[str]:
    return [part for piece in _SEPARATORS.split(text) if (part := piece.strip())]


def _right(text: str) -> dict[str, Any]:
    """A license URL: by id when the vocabulary knows it (Creative Commons), else by name."""
    if not text.startswith(("http://", "https://")):
        return {"title": {"en": text}}
    license_id = vocab.license_id_from_url(text)
    if license_id is not None:
        return {"id": license_id, "link": text}
    match = _ARXIV_LICENSE.search(text)
    name = _ARXIV_LICENSES.get(match.group(1).lower()) if match else None
    return {"title": {"en": name or text}, "link": text}


def _published_versions(
    paths: _Paths, root: etree._Element, own: str | None
) -> list[dict[str, Any]]:
    """The DOIs of the published versions (separated by spaces). DataCite's guidance for a
    preprint and its journal article is `IsVersionOf`; `IsPublishedIn` would say the preprint
    appeared inside the journal, which it did not. A malformed DOI is left out."""
    related: list[dict[str, Any]] = []
    seen = {own}
    for text in _texts(paths.doi, root):
        for value in text.split():
            doi = normalize_doi(value.strip(",;"))
            if doi is None or doi in seen:
                continue
            seen.add(doi)
            related.append(
                {"identifier": doi, "scheme": "doi", "relation_type": {"id": "isversionof"}}
            )
    return related


def _author(author: etree._Element) -> dict[str, Any] | None:
    """An `author` as a creator; one without a name is left out."""
    paths = _ARXIV
    keyname, forenames = _name_parts(_text(paths.keyname, author), _text(paths.forenames, author))
    if keyname is None:
        return None
    suffix = _text(paths.suffix, author)
    if forenames is None and suffix is None and _ORGANISATION.search(keyname):
        person = person_or_org(keyname, kind="organizational")  # `ATLAS Collaboration`
    else:
        family = _with_suffix(keyname, suffix)
        person = person_or_org(None, kind="personal", given=forenames, family=family)
    affiliations = [{"name": name} for name in _texts(paths.affiliation, author)]
    return {"person_or_org": person, "affiliations": unique_affiliations(affiliations)}


def _name_parts(keyname: str | None, forenames: str | None) -> tuple[str | None, str | None]:
    """An author's family and given names from its keyname and forenames, each None when it
    names nobody (`name_or_none`: `12345`, as a DataCite familyName or givenName); forenames
    alone are the one name, the family name the target requires."""
    keyname, forenames = name_or_none(keyname), name_or_none(forenames)
    return (forenames, None) if keyname is None else (keyname, forenames)


def _with_suffix(family: str, suffix: str | None) -> str:
    """A family name with the suffix after it (`Hopper Jr.`), as arXiv shows an author's name:
    the target's person has no field for a suffix. Both formats write names so."""
    return f"{family} {suffix}" if suffix else family


# arXivRaw

_NOTE_LIST = re.compile(r"\s*\(\d+\)")  # `(1) MIT, (2) CERN`
_NOTE_NUMBER = re.compile(r"\((\d+)\)")
_NOTE_REFERENCES = re.compile(r"\s*\d+(?:\s*(?:,|and|&)\s*\d+)*\s*")  # `1`, `1 and 2`, `1,2`
# A sign marking a note, as a character or as TeX writes it (`\dagger`, `\ast`, `\S`): one
# or more, `$^{\dagger\ddagger}$`.
_NOTE_SIGNS = (
    r"(?:[*†‡§¶⋆]|\\(?:dagger|ddagger|dag|ddag|ast|star|S|P|sharp|natural|flat|bullet|diamond"
    r"|clubsuit|heartsuit|spadesuit)(?![A-Za-z]))+"
)
# A mark after an author's name that points to a note: an affiliation's number (`A. Smith 1`,
# `A. Smith1`, TeX's superscript `A. Smith$^{1}$`, `^a`) or a sign (`A. Smith*`, `†`,
# `A. Smith$^\dagger$`).
_NOTE_MARK = re.compile(
    rf"(?:\$?\s*\^\s*(?:(?P<superscript>\d+)|[^\W\d_]|{_NOTE_SIGNS})|(?P<number>\d+)|\$?{_NOTE_SIGNS})"
    r"\s*\$?$"
)
_AND = re.compile(r"\sand\s")  # ` and ` between two authors
_SUFFIXES = {"jr", "jr.", "sr", "sr.", "ii", "iii", "iv"}
# Lower-case name particles belong to the family name: `Rachel Kuzio de Naray`.
_PARTICLES = {
    "af", "da", "das", "de", "del", "della", "den", "der", "des", "di", "do", "dos", "du",
    "el", "la", "le", "ten", "ter", "van", "von", "y", "zu",
}  # fmt: skip


def _versions(root: etree._Element) -> list[tuple[str | None, str | None]]:
    """(label, date) of each version, the first first; a date that does not parse is None."""
    found = []
    for index, element in enumerate(_RAW.version(root)):
        label = text_or_none(element.get("version"))
        number = label[1:] if label and label[:1] in "vV" and label[1:].isdigit() else None
        key = (0, int(number)) if number is not None else (1, index)
        found.append((key, label, _raw_date(_text(_RAW.date, element))))
    return [(label, date) for _, label, date in sorted(found, key=lambda entry: entry[0])]


def _raw_date(text: str | None) -> str | None:
    """`Mon, 2 Apr 2007 19:18:42 GMT` -> `2007-04-02` (the UTC day)."""
    if text is None:
        return None
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return _date(text)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.date().isoformat()


def _raw_authors(text: str) -> list[dict[str, Any]]:
    """The authors string as creators: `A. Smith, B. Jones and C. Brown`, with affiliations in
    parentheses (`A. Smith (MIT)`) or as numbered notes (`A (1), B (1 and 2) ((1) MIT, (2)
    CERN)`), a collaboration before a colon (`ABCD Collaboration: A, B`) or as `for the ABCD
    Collaboration`. TeX accents (`Bal\\'azs`) become the letters they stand for."""
    # (name, affiliations, note numbers, ORCIDs)
    names: list[tuple[str, list[str], list[str], list[dict[str, str]]]] = []
    notes: dict[str, str] = {}
    for part in _split_authors(_tex_to_unicode(text)):
        name, groups = _parenthesised(part)
        affiliations: list[str] = []
        numbers: list[str] = []
        orcids: list[dict[str, str]] = []
        for group in groups:
            if (written := orcid_in_note(group)) is not None:
                # `A. Smith (0000-0002-1825-0097)`: the person's, not an affiliation
                if (orcid := name_identifier("orcid", written)) is not None:
                    orcids.append(orcid)
            elif _NOTE_LIST.match(group):
                pieces = _NOTE_NUMBER.split(group)
                for number, affiliation in zip(pieces[1::2], pieces[2::2], strict=True):
                    if affiliation := affiliation.strip(" ,;"):
                        notes[number] = affiliation
            elif _NOTE_REFERENCES.fullmatch(group):
                numbers.extend(re.findall(r"\d+", group))
            elif affiliation := text_or_none(group):
                affiliations.append(affiliation)
        name = text_or_none(name) or ""
        if ":" in name:  # `ABCD Collaboration: Author One`
            group_name, _, name = (piece.strip() for piece in name.partition(":"))
            if group_name:
                names.append((group_name, [], [], []))
        if name.lower().startswith("for the "):
            name = name[len("for the ") :]
        name = without_et_al(name)  # `A. Smith et al.`: the others are not named
        name, marks = _without_note_marks(name)
        if not name:  # `A. Smith1,2` split at its comma: `2` is a mark of the name before
            if marks and names:
                names[-1][2].extend(marks)
            continue
        numbers = marks + numbers
        if name.lower() in _SUFFIXES and names:  # `A. Smith, Jr.`: the suffix of the name before
            previous, previous_affiliations, previous_numbers, previous_orcids = names.pop()
            name = f"{previous} {name}"
            affiliations = previous_affiliations + affiliations
            numbers = previous_numbers + numbers
            orcids = previous_orcids + orcids
        names.append((name, affiliations, numbers, orcids))
    creators = []
    for name, affiliations, numbers, orcids in names:
        if (person := _raw_person(name, orcids)) is None:
            continue  # `12345`, or a note's number outside its parentheses: no one's name
        affiliations += [notes[number] for number in numbers if number in notes]
        creators.append(
            {
                "person_or_org": person,
                "affiliations": unique_affiliations([{"name": each} for each in affiliations]),
            }
        )
    return creators


def _without_note_marks(name: str) -> tuple[str, list[str]]:
    """`name` without the marks after it (`_NOTE_MARK`), and the note numbers they are. A
    number glued to a capital letter is the name's, not a mark: `NA62`, `H1` (an experiment
    named as an author) would be `NA`, `H`; not to a suffix (`Bob Roe III2`)."""
    numbers: list[str] = []
    while match := _NOTE_MARK.search(name):
        before = name[: match.start()]
        if (
            match["number"]
            and before[-1:].isupper()
            and before.rsplit(maxsplit=1)[-1].lower() not in _SUFFIXES
        ):
            break
        if number := match["superscript"] or match["number"]:
            numbers.insert(0, number)
        name = before.rstrip()
    return name, numbers


def _split_authors(text: str) -> list[str]:
    """`text` split at the commas, semicolons and ` and `s outside parentheses."""
    parts: list[str] = []
    depth = start = index = 0
    while index < len(text):
        character = text[index]
        if character == "(":
            depth += 1
        elif character == ")":
            depth = max(depth - 1, 0)
        elif depth == 0:
            if character in ",;":
                parts.append(text[start:index])
                start = index + 1
            elif character.isspace() and _AND.match(text, index):
                parts.append(text[start:index])
                start = index + 4
                index += 3
        index += 1
    parts.append(text[start:])
    return parts


def _parenthesised(part: str) -> tuple[str, list[str]]:
    """The text outside parentheses, and the content of each outermost parenthesised group."""
    outside: list[str] = []
    groups: list[str] = []
    current: list[str] = []
    depth = 0
    for character in part:
        if character == "(":
            if depth:
                current.append(character)
            depth += 1
        elif character == ")" and depth:
            depth -= 1
            if depth:
                current.append(character)
            else:
                groups.append("".join(current))
                current = []
        elif depth:
            current.append(character)
        else:
            outside.append(character)
    if current:
        groups.append("".join(current))  # an unclosed group
    return "".join(outside), groups


def _raw_person(name: str, orcids: list[dict[str, str]]) -> dict[str, Any] | None:
    """`Given Names Family` as a person with its ORCID (`Bill Gates Jr`: the suffix after the
    family name, as the arXiv format writes it); a collaboration as an organisation. Its
    parts are read as the arXiv format's keyname and forenames are (`_name_parts`): None when
    neither names anyone."""
    tokens = name.split()
    if _ORGANISATION.search(name) and len(tokens) > 1:
        return person_or_org(name, kind="organizational")
    suffix = tokens.pop() if len(tokens) > 1 and tokens[-1].lower() in _SUFFIXES else None
    start = len(tokens) - 1
    while start > 1 and tokens[start - 1] in _PARTICLES:
        start -= 1
    family, given = _name_parts(" ".join(tokens[start:]), " ".join(tokens[:start]) or None)
    if family is None:
        return None
    family = _with_suffix(family, suffix)
    return person_or_org(None, kind="personal", given=given, family=family, identifiers=orcids)


# TeX accents as arXivRaw writes names: \'a, \"{o}, {\"u}, \c{c}, \v s, \'\i.
_TEX_MARKS = {
    '"': "\u0308", "'": "\u0301", "`": "\u0300", "^": "\u0302", "~": "\u0303", "=": "\u0304",
    ".": "\u0307", "H": "\u030b", "c": "\u0327", "k": "\u0328", "r": "\u030a", "u": "\u0306",
    "v": "\u030c",
}  # fmt: skip
_TEX_ACCENT = re.compile(
    r"""\\(?:(?P<symbol>["'`^~=.])\s*|(?P<letter>[Hckruv])(?:\s+|(?=\{)))"""
    r"(?:\{\s*(?P<braced>\\[ij]|[A-Za-z])\s*\}|(?P<base>\\[ij](?![A-Za-z])\s*|[A-Za-z]))"
)
_TEX_LETTERS = {
    "ss": "ß", "aa": "å", "AA": "Å", "ae": "æ", "AE": "Æ", "oe": "œ", "OE": "Œ", "o": "ø",
    "O": "Ø", "l": "ł", "L": "Ł", "i": "ı", "j": "ȷ",
}  # fmt: skip
_TEX_LETTER = re.compile(r"\\(ss|aa|AA|ae|AE|oe|OE|o|O|l|L|i|j)(?![A-Za-z])(?:\{\}|\s)?")


def _tex_to_unicode(text: str) -> str:
    if "\\" not in text:
        return text.replace("{", "").replace("}", "")

    def accent(match: re.Match[str]) -> str:
        base = match["braced"] or match["base"]
        base = base.strip().removeprefix("\\")  # `\'\i`: the accent of a dotless i is on i
        mark = _TEX_MARKS[match["symbol"] or match["letter"]]
        return unicodedata.normalize("NFC", base + mark)

    text = _TEX_ACCENT.sub(accent, text)
    text = _TEX_LETTER.sub(lambda match: _TEX_LETTERS[match.group(1)], text)
    return text.replace("{", "").replace("}", "")
