"""Import of arXiv's own OAI-PMH format `arXiv` (metadataPrefix=arXiv): the authors in parts,
with affiliations, the categories, the license and the published version's references.

A record describes one e-print. Its persistent identifier is the DataCite DOI arXiv registers for
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
from typing import Any

from lxml import etree

from oai_pipeline.transform import vocabularies as vocab
from oai_pipeline.transform.dates import normalize_date
from oai_pipeline.transform.failure import VALIDATION, TransformFailure, missing_field
from oai_pipeline.transform.normalize import (
    block_text_or_none,
    normalize_doi,
    person_or_org,
    text_or_none,
)

ARXIV = "http://arxiv.org/OAI/arXiv/"
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
    """The precompiled XPaths of a format."""

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
        self.created = path("a:created")
        self.updated = path("a:updated")
        self.author = path("a:authors/a:author")
        self.keyname = path("a:keyname")
        self.forenames = path("a:forenames")
        self.suffix = path("a:suffix")
        self.affiliation = path("a:affiliation")


_ARXIV = _Paths(ARXIV)


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
    return _record(paths, root, arxiv_id, title, creators, publication_date, dates)


def _record(
    paths: _Paths,
    root: etree._Element,
    arxiv_id: str,
    title: str,
    creators: list[dict[str, Any]],
    publication_date: str,
    dates: list[dict[str, Any]],
) -> dict[str, Any]:
    """The record around what the format's authors and dates became."""
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
            f"{text!r} is not an arXiv identifier (like 2301.00001 or math/0211159)",
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
    keyname = _text(paths.keyname, author)
    forenames = _text(paths.forenames, author)
    suffix = _text(paths.suffix, author)
    if keyname is None:
        if forenames is None:
            return None
        keyname, forenames = forenames, None  # one name: the family name
    if forenames is None and suffix is None and _ORGANISATION.search(keyname):
        person = person_or_org(keyname, kind="organizational")  # `ATLAS Collaboration`
    else:
        family = f"{keyname} {suffix}" if suffix else keyname  # `Hopper Jr.`, as arXiv shows it
        person = person_or_org(None, kind="personal", given=forenames, family=family)
    affiliations = dict.fromkeys(_texts(paths.affiliation, author))
    return {"person_or_org": person, "affiliations": [{"name": name} for name in affiliations]}
