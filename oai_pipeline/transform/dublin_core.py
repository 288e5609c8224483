"""Import of simple Dublin Core (`oai_dc:dc`), the format every OAI-PMH source must offer.

Dublin Core says little about structure, so the import reads conventions of real feeds:
`Family, Given` creators, DOIs as doi.org URLs in dc:identifier, eu-repo terms in dc:type and
dc:rights, and (Zenodo) HTML escaped twice in dc:description.
"""

from __future__ import annotations

import re
from typing import Any

from lxml import etree

from oai_pipeline.doi import normalize_doi
from oai_pipeline.transform import vocabularies as vocab
from oai_pipeline.transform.datacite import XML_LANG
from oai_pipeline.transform.dates import (
    is_timestamp,
    normalize_date,
    read_date,
    says_no_date,
    unreadable_publication_date,
)
from oai_pipeline.transform.failure import (
    MISSING_FIELD,
    TransformFailure,
    missing_field,
)
from oai_pipeline.transform.normalize import (
    block_text_or_none,
    citation,
    creators_or_contributors,
    description_html,
    element_text,
    eu_repo_grant,
    file_link,
    info_uri,
    isbn,
    issn,
    looks_like_organisation,
    names_nobody,
    person_or_org,
    split_dc_name,
    text_or_none,
    typed_identifier,
    unique_identifiers,
    untyped_identifier,
    urn_identifier,
    without_et_al,
)

OAI_DC = "http://www.openarchives.org/OAI/2.0/oai_dc/"
DC = "http://purl.org/dc/elements/1.1/"


def _elements(name: str) -> etree.XPath:
    return etree.XPath(f"dc:{name}", namespaces={"dc": DC})


_TITLE = _elements("title")
_CREATOR = _elements("creator")
_CONTRIBUTOR = _elements("contributor")
_DATE = _elements("date")
_DESCRIPTION = _elements("description")
_SUBJECT = _elements("subject")
_RIGHTS = _elements("rights")
_LANGUAGE = _elements("language")
_PUBLISHER = _elements("publisher")
_IDENTIFIER = _elements("identifier")
_RELATION = _elements("relation")
_TYPE = _elements("type")
_FORMAT = _elements("format")
_SOURCE = _elements("source")
# DCMI Terms' citation of where the work appeared, which EPrints (ZORA) writes into oai_dc,
# in the terms' namespace or (its `dcterms` prefix bound to the wrong URI) the elements'.
_BIBLIOGRAPHIC_CITATION = etree.XPath(
    "dc:bibliographicCitation | terms:bibliographicCitation",
    namespaces={"dc": DC, "terms": "http://purl.org/dc/terms/"},
)


def _texts(path: etree.XPath, dc: etree._Element) -> list[tuple[etree._Element, str]]:
    """The one-line values of an element (whitespace runs collapsed), empty ones left out."""
    return [
        (element, text) for element in path(dc) if (text := text_or_none(element_text(element)))
    ]


# Between two names in one dc:creator: `;`, or a line break tag (CONTENTdm and DSpace
# collections join the names of a field with `<br>`, escaped: `Polk, Lewis&lt;br&gt;Mosley, R.`).
_NAME_SEPARATOR = re.compile(r";|<br\s*/?>", re.I)


def _names(path: etree.XPath, dc: etree._Element) -> list[str]:
    """dc:creator or dc:contributor names, each person once. OJS lists every author once per
    locale of a multilingual journal (the same name with another xml:lang): a name repeated
    in another language is the same person. The same name twice in one language (or without
    one) is kept: two people can share a name. `Smith, John; Doe, Jane` and
    `Smith, John<br>Doe, Jane` are two names."""
    names = []
    counts: dict[str, dict[str | None, int]] = {}
    for element, value in _texts(path, dc):
        lang = element.get(XML_LANG)
        parts = _NAME_SEPARATOR.split(value) if ";" in value or "<" in value else (value,)
        for part in parts:
            text = without_et_al(part.strip())  # `et al.` alone names nobody
            if not text:
                continue
            by_lang = counts.setdefault(text, {})
            seen = by_lang[lang] = by_lang.get(lang, 0) + 1
            if len(by_lang) == 1 or seen > max(n for key, n in by_lang.items() if key != lang):
                names.append(text)
    return names


def _creatibutor(text: str) -> dict[str, Any] | None:
    """A dc:creator/dc:contributor: a person (Dublin Core's creators are people in practice)
    unless the name looks like an organisation's (`World Health Organization`, `CERN`);
    authority dates after a name are dropped, a trailing `(Univ X)` is the affiliation, a
    trailing `(https://orcid.org/…)` the person's ORCID. None when what is left names nobody
    (`names_nobody`: dates or punctuation only)."""
    name, affiliation, orcid = split_dc_name(text)
    if names_nobody(name):
        return None
    kind = "organizational" if looks_like_organisation(name) and not orcid else "personal"
    return {
        "person_or_org": person_or_org(name, kind=kind, identifiers=[orcid] if orcid else None),
        "affiliations": [{"name": affiliation}] if affiliation else [],
    }


def _descriptions(dc: etree._Element) -> list[tuple[etree._Element, str]]:
    """dc:description values as the target's HTML; their line breaks are kept."""
    return [
        (element, html)
        for element in _DESCRIPTION(dc)
        if (text := block_text_or_none(element_text(element))) and (html := description_html(text))
    ]


def _language(element: etree._Element) -> dict[str, str] | None:
    code = element.get(XML_LANG)
    language = vocab.language_id(code) if code else None
    return {"id": language} if language else None


def import_dc(dc: etree._Element) -> dict[str, Any]:
    """An `oai_dc:dc` element as RDMRecord-shaped data."""
    titles = _texts(_TITLE, dc)
    if not titles:
        _refuse_foreign_elements(dc)
        raise missing_field("metadata.title", "dc:title")
    creators, contributors = creators_or_contributors(
        [entry for text in _names(_CREATOR, dc) if (entry := _creatibutor(text))],
        [
            {**entry, "role": {"id": "other"}}
            for text in _names(_CONTRIBUTOR, dc)
            if (entry := _creatibutor(text))
        ],
    )
    if not creators:
        raise missing_field("metadata.creators", "dc:creator or dc:contributor")
    descriptions = _descriptions(dc)
    pids, identifiers, links = _identifiers(dc)
    resource_type = vocab.dc_resource_type([text for _, text in _texts(_TYPE, dc)])
    alternates, related, funding = _relations(dc)
    journal_issns, journals = _journals(dc)
    identifiers, containers = _containers(
        dc, identifiers + alternates + journal_issns, resource_type
    )
    own = pids.get("doi")
    publishers = _texts(_PUBLISHER, dc)
    publication_date, other_dates = _dates(dc)
    metadata: dict[str, Any] = {
        "resource_type": {"id": resource_type},
        "title": titles[0][1],
        "additional_titles": [
            {"title": text, "type": {"id": "alternative-title"}, "lang": _language(element)}
            for element, text in titles[1:]
        ],
        "creators": creators,
        "contributors": contributors,
        "publication_date": publication_date,
        "description": descriptions[0][1] if descriptions else None,
        "additional_descriptions": [
            {"description": text, "type": {"id": "other"}, "lang": _language(element)}
            for element, text in descriptions[1:]
        ]
        + journals,
        "subjects": _subjects(dc),
        "rights": _rights(dc),
        "languages": languages(dc),
        "publisher": publishers[0][1] if publishers else None,
        "dates": other_dates,
        "identifiers": unique_identifiers(identifiers, own["identifier"] if own else None),
        "related_identifiers": related + containers,
        "formats": [text for _, text in _texts(_FORMAT, dc)],
        "funding": funding,
    }
    return {"metadata": metadata, "pids": pids, "files": {"enabled": False, "links": links}}


def _refuse_foreign_elements(dc: etree._Element) -> None:
    """The record's error when its Dublin Core elements are in another namespace than DC's
    (`http://purl.org/dc/elements/1.1`, without the slash): each would be left out, and the
    record's error would say it has no title, though the source sent one."""
    for element in dc.iterchildren(etree.Element):
        name = etree.QName(element)
        if name.localname == "title" and name.namespace != DC:
            namespace = repr(name.namespace) if name.namespace else "(none)"
            raise TransformFailure(
                MISSING_FIELD,
                f"the record has no dc:title: its <title> is in the namespace {namespace}, "
                f"not Dublin Core's {DC!r}",
                "metadata.title",
            )


def _dates(dc: etree._Element) -> tuple[str | None, list[dict[str, Any]]]:
    """The publication date among the dc:dates, and the others as dates of the record.

    Repositories list several, and not the issued date first: DSpace flattens
    dc.date.accessioned and .available, deposit timestamps with a time of day, and then
    dc.date.issued, a date without one, into dc:date. So the publication date is, in order:
    the earliest date without a time of day (an accepted manuscript is deposited before it is
    issued; of equal dates the less precise, `2015` before `2015-03-02`); else the earliest
    year written in words that are no date (`Spring 2020`, `WS 2019/20`); else the earliest
    timestamp. None when there is no dc:date, or only ones that say "no date" (`n.d.`,
    `o.J.`): the oai-import transformer then takes the day of the record's OAI datestamp (see
    `oai_import._default_publication_date`). A dc:date of digits that is no date
    (`2021-13-45`, a typo; `12/05/2020`, day or month first?) gives no year, as in DataCite
    and MARC (`dates.read_date`; it gave 2021 and 2020), and is left out. When no dc:date
    gives a date the record fails, its error saying why each is none: the source says when,
    and we cannot read it.

    The other dates (DSpace's deposit timestamps, cut to their day) are kept once each as
    `other` dates: Dublin Core does not say what they are. A text read only as its year
    (`Spring 2020`, `ca. 1890`) keeps its words as the date's description, and when it is
    the publication date it is also an `issued` date, so that what the source said is not lost.
    OpenAIRE's embargo end is an `available` date."""
    texts = [text for _, text in _texts(_DATE, dc)]
    if not texts:
        return None, []
    embargo_ends: list[dict[str, Any]] = []
    if any(text.startswith(_EU_REPO_DATE) for text in texts):
        embargo_ends = [
            {"date": date, "type": {"id": "available"}, "description": "embargo end"}
            for text in texts
            if text.startswith(_EU_REPO_EMBARGO_END)
            and (date := _date_or_none(text[len(_EU_REPO_EMBARGO_END) :]))
        ]
        texts = [text for text in texts if not text.startswith(_EU_REPO_DATE)]
        if not texts:
            return None, embargo_ends
    # (date, the source's words when the date says less than they do), in the source's order
    read: list[tuple[str, str | None]] = []
    earliest: tuple[str, str | None] | None = None
    earliest_stamp: tuple[str, str | None] | None = None
    earliest_year: tuple[str, str | None] | None = None
    unreadable: list[str] = []
    for text in texts:
        found = read_date(text)
        if found is None:
            unreadable.append(text)
            continue
        read.append((found.date, found.words))
        if not found.exact:
            if earliest_year is None or found.date < earliest_year[0]:
                earliest_year = read[-1]
            continue
        date = found.date
        # EDTF dates (and an interval's start) compare as strings, a prefix first.
        if is_timestamp(text):
            if earliest_stamp is None or date < earliest_stamp[0]:
                earliest_stamp = read[-1]
        elif earliest is None or date.partition("/")[0] < earliest[0].partition("/")[0]:
            earliest = read[-1]
    chosen = earliest or earliest_year or earliest_stamp
    if chosen is None and not all(map(says_no_date, unreadable)):
        raise unreadable_publication_date(texts, " from dc:date")
    dates: list[dict[str, Any]] = []
    for entry in dict.fromkeys(read):
        date, words = entry
        if entry == chosen:
            if words is not None:
                dates.append({"date": date, "type": {"id": "issued"}, "description": words})
        elif words is not None:
            dates.append({"date": date, "type": {"id": "other"}, "description": words})
        elif chosen is None or date != chosen[0]:
            dates.append({"date": date, "type": {"id": "other"}})
    return (chosen[0] if chosen else None), dates + embargo_ends


# OpenAIRE's dc:date for the end of an embargo (`info:eu-repo/date/embargoEnd/2025-06-30`):
# when the files become available, never the publication date.
_EU_REPO_DATE = "info:eu-repo/date/"
_EU_REPO_EMBARGO_END = "info:eu-repo/date/embargoEnd/"


def _date_or_none(text: str) -> str | None:
    try:
        return normalize_date(text)
    except ValueError:
        return None


# A classification in dc:subject: DINI's `ddc:610` (German repositories) and OpenAIRE's
# `info:eu-repo/classification/ddc/610`.
_CLASSIFICATION = re.compile(r"^(?:(ddc):\s*|info:eu-repo/classification/([A-Za-z]+)/)(.+)$", re.I)


def _subjects(dc: etree._Element) -> list[dict[str, Any]]:
    """dc:subject values, each once: a classification code with its scheme (`ddc:610` is
    `610` of DDC), and keywords a value lists with `;` between them (OJS writes an
    article's keywords as one dc:subject, `Medizin; Chirurgie; Anästhesie`) one by one."""
    subjects: dict[tuple[str, str | None], None] = {}
    for _, text in _texts(_SUBJECT, dc):
        if ":" in text and (match := _CLASSIFICATION.match(text)):
            scheme = (match.group(1) or match.group(2)).upper()
            subjects[(match.group(3).strip(), scheme)] = None
            continue
        for part in text.split(";") if ";" in text else (text,):
            if keyword := part.strip():
                subjects[(keyword, None)] = None
    return [
        {"subject": subject, "scheme": scheme} if scheme else {"subject": subject}
        for subject, scheme in subjects
    ]


def _identifiers(
    dc: etree._Element,
) -> tuple[dict[str, Any], list[dict[str, str]], list[dict[str, str]]]:
    pids: dict[str, Any] = {}
    identifiers: list[dict[str, str]] = []
    links: list[dict[str, str]] = []
    for _, text in _texts(_IDENTIFIER, dc):
        doi = normalize_doi(text)
        if doi is not None:
            if "doi" not in pids:
                pids["doi"] = {"identifier": doi, "provider": "external"}
            else:
                identifiers.append({"identifier": doi, "scheme": "doi"})
        elif text.startswith("oai:"):
            # the source's OAI identifier: the target has no `oai` scheme (its pids.oai is
            # its own OAI identifier), so it is kept as `other`
            identifiers.append({"identifier": text, "scheme": "other"})
        elif text.startswith(("http://", "https://")):
            link = file_link(text)
            if link is not None:
                links.append(link)
            else:
                identifiers.append({"identifier": text, "scheme": "url"})
        elif text.lower().startswith("urn:"):
            # `urn:isbn:…` is its ISBN, checked as a bare one is (as in MARC's 020 and 022)
            if (entry := urn_identifier(text)) is not None:
                identifiers.append(entry)
        elif (info := info_uri(text)) is not None:
            identifiers.append(info)
        elif (alternate := _alternate(text)) is not None:
            # OpenEdition writes its books' ISBNs as eu-repo altIdentifiers in dc:identifier
            identifiers.append(alternate)
        elif (number := isbn(text)) is not None:
            identifiers.append({"identifier": number, "scheme": "isbn"})
        elif (number := issn(text)) is not None:
            identifiers.append({"identifier": number, "scheme": "issn"})
    # DSpace lists a DOI as dc.identifier.doi and again as its URL: one is the pid, once
    # (`import_dc` drops the repeats and the pid from the identifiers).
    return pids, identifiers, links


# Resource types published inside another work: an ISBN given for one is its book's.
_CONTAINED = frozenset(
    {"publication-section", "publication-article", "publication-conferencepaper"}
)


def _containers(
    dc: etree._Element, identifiers: list[dict[str, str]], resource_type: str
) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    """`identifiers` without those of the work the record is published in, and those as
    related identifiers (`ispublishedin`). DSpace writes dc.identifier.issn and .isbn into
    dc:identifier: an ISSN names a serial, never an article or book of it; an ISBN is a
    book's own identifier, but the book's, not the chapter's, in a chapter or article."""
    own: list[dict[str, str]] = []
    related: list[dict[str, Any]] = []
    for entry in identifiers:
        scheme = entry["scheme"]
        if scheme == "issn" or (scheme == "isbn" and resource_type in _CONTAINED):
            if all(r["identifier"] != entry["identifier"] for r in related):
                related.append({**entry, "relation_type": {"id": "ispublishedin"}})
        else:
            own.append(entry)
    return own, related


# A journal's ISSN written with its label inside a citation or alone (`ISSN: 1234-5679`,
# `eISSN 1234-5679`, `ISSN (online) 1234-5679`), as DSpace's dc.relation.ispartof and
# EPrints' citations (`…, 12 (3). pp. 45-67. ISSN 1234-5679`) give it.
_LABELLED_ISSN = re.compile(
    r"[\s.,;]*\b(?:[ep]-?|print\s+|online\s+)?issn(?:\s*\([^()]{0,20}\))?\s*:?\s*"
    r"(\d{4}-?\d{3}[\dX])\b",
    re.I,
)
# The parts of a citation: volume, issue, pages (`123-127`, `e1234`, `S12-S15`, an article
# number `012345`) and a date in brackets (`(2020)`, `(2023-10-12)`, `(September 2007)`).
_VOLUME = r"(?P<volume>\d+)"
_ISSUE = r"\(\s*(?P<issue>[\w./ -]{1,20}?)\s*\)"
_PAGE = r"[A-Za-z]{0,4}\d+[A-Za-z]?"
_PAGES = rf"(?:pp?\.?\s*)?(?P<start>{_PAGE})(?:\s*-\s*(?P<end>{_PAGE}))?"
_YEAR = r"\(\s*(?P<year>[^()]*\d{4}[^()]*?)\s*\)"
# APA and EPrints: `Journal, 12(3), 45-67`, `Journal, 12 (3). pp. 45-67`, `Journal, 5:5`,
# `Cell Reports, 42(10), (2023-10-12)`: an issue or pages, or both, after the volume.
_NUMBERED = re.compile(
    rf"^(?P<title>[^;]*?[^\d\s;]),\s*{_VOLUME}(?:\s*{_ISSUE})?"
    rf"(?:\s*(?::|,|\.)\s*{_PAGES})?(?:,?\s*{_YEAR})?$"
)
# Nature and the physics journals: `Nature 580, 123-127 (2020)`, `Phys. Rev. Lett. 116, 061102
# (2016)`; the year is required (`Figure 3, 12-14` is no citation).
_JOURNAL_VOLUME_PAGES = re.compile(
    rf"^(?P<title>[^,;]*[^\W\d_].?)\s+{_VOLUME},\s*{_PAGES}\s*{_YEAR}$"
)
# Labelled: OJS's `Journal; Vol. 12, No. 3 (2019): Issue title; 45-67`, DSpace's series
# `Journal;volume 24 September 2007`, `Journal, Vol. 12, No. 3, pp. 45-67`, `Revista; v. 7 n. 2`.
_LABELLED = re.compile(
    r"^(?P<title>.+?)\s*[;,]\s*(?:vol(?:ume)?\.?|v\.|bd\.|band|jg\.|jahrgang|tome|tomo|t\.)"
    rf"\s*{_VOLUME}\b"
    r"(?:\s*,?\s*(?:no\.?|nr\.?|núm\.?|num\.?|n\.|n[°º]|issue|iss\.|heft|h\.)\s*"
    r"(?P<issue>[\w/-]+))?"
    rf"(?:\s*{_YEAR})?(?P<tail>.*)$",
    re.I,
)
_TAIL_PAGES = re.compile(rf"(?:^|[;:,.])\s*{_PAGES}\s*$")
# An author-year reference (`Doe, J (2007). Title. Journal, 5:5.`) holds the work's own title
# before the journal's: which words are the journal cannot be told, so it is no citation here.
_REFERENCE_YEAR = re.compile(r"\(\d{4}[a-z]?\)")
# A journal citation is one short line; a longer text (an abstract in dc:source) is none, and
# is not searched: the patterns' backtracking grows with the square of the length.
_CITATION_LENGTH = 400


def _journal_citation(text: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The journal a dc:relation or dc:source names, as a series-information description,
    and the ISSNs it gives. Conservative: a text is a citation only when a journal title is
    followed by its volume and issue or pages, or by a labelled volume (`Vol. 12`); anything
    else (a meeting `PyHEP 2023 Workshop, 9-12 October 2023`, a series name alone, a whole
    reference with its authors) is none."""
    if len(text) > _CITATION_LENGTH:
        return None, []
    numbers = [n for m in _LABELLED_ISSN.finditer(text) if (n := issn(m.group(1)))]
    rest = _LABELLED_ISSN.sub("", text) if numbers else text
    rest = re.sub(r"(?<=\d)\s*[\u2013\u2014]\s*(?=[A-Za-z]?\d)", "-", rest).strip(" .,;")
    if not rest:
        return None, numbers
    if (bare := issn(rest)) is not None:
        return None, [*numbers, bare]
    described = None
    if (match := _LABELLED.match(rest)) is not None:
        tail = match.group("tail")
        start = end = None
        if pages := _TAIL_PAGES.search(tail):
            start, end = pages.group("start"), pages.group("end")
            tail = tail[: pages.start()]
        more = text_or_none(tail.strip(" .,;:"))
        described = _cited(match, start, end, match.group("year"), more)
    elif (match := _JOURNAL_VOLUME_PAGES.match(rest) or _NUMBERED.match(rest)) is not None:
        issue, volume = match.groupdict().get("issue"), match.group("volume")
        # without an issue, a year is no volume: `Springer, Berlin, 2019, 45-67`
        if issue or (match.group("start") and not 1800 <= int(volume) <= 2100):
            described = _cited(match, match.group("start"), match.group("end"), match["year"])
    return described, numbers


def _cited(
    match: re.Match[str], start: str | None, end: str | None, *more: str | None
) -> dict[str, Any] | None:
    """The citation of a matched text; None when its title is not a journal's: no words, a
    URL, or the start of an author-year reference."""
    title = match.group("title").strip(" ,;:")
    if sum(c.isalpha() for c in title) < 2 or "://" in title or _REFERENCE_YEAR.search(title):
        return None
    issue = match.groupdict().get("issue")
    return citation(title, match.group("volume"), issue, start, end, *more)


def _journals(dc: etree._Element) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    """The journal the record appeared in, as DSpace (dc.relation.ispartof, .ispartofseries),
    EPrints, OJS and Zenodo write it in free text in dc:relation or dc:source (EPrints also in
    a dcterms:bibliographicCitation): its ISSNs (OJS writes them as dc:source values of their
    own, `<dc:source>2159-5399`) as identifiers, and its citation as a series-information
    description, the shape DataCite's relatedItem IsPublishedIn and MARC's 773 take. URLs,
    DOIs and other identifiers are `_relations`'."""
    issns: list[dict[str, str]] = []
    described: list[dict[str, Any]] = []
    for path in (_RELATION, _SOURCE, _BIBLIOGRAPHIC_CITATION):
        for _, text in _texts(path, dc):
            if "://" in text or text.startswith("info:") or normalize_doi(text) is not None:
                continue
            found, numbers = _journal_citation(text)
            if found is not None and found not in described:
                described.append(found)
            issns.extend({"identifier": number, "scheme": "issn"} for number in numbers)
    return issns, described


# InvenioRDM's relation types are DataCite's relationType list, which has no untyped
# relation (there is no `other`). `references`, "this record refers to that resource", is the
# weakest claim it offers, so it is what an untyped dc:relation says.
UNTYPED_RELATION = "references"


# OpenAIRE's dc:relation forms: `info:eu-repo/semantics/altIdentifier/<scheme>/<value>` is
# another identifier of this very resource (e.g. the published version's URL or DOI);
# `info:eu-repo/grantAgreement/<funder>/<programme>/<project id>/[jurisdiction]/[name]/[acronym]`
# is the grant that funded it (percent-encoded: `PTDC%2FSAU%2F1234%2F2008`).
_ALT_IDENTIFIER = re.compile(r"^info:eu-repo/semantics/altIdentifier/([A-Za-z]+)/(.+)$")
_ALT_SCHEMES = {
    "url": "url", "handle": "handle", "hdl": "handle", "isbn": "isbn", "issn": "issn",
    "eissn": "issn", "pissn": "issn", "pmid": "pmid", "urn": "urn", "ark": "ark",
    "arxiv": "arxiv", "purl": "purl", "doi": "doi",
}  # fmt: skip


def _relations(
    dc: etree._Element,
) -> tuple[list[dict[str, str]], list[dict[str, Any]], list[dict[str, Any]]]:
    """dc:relation values: OpenAIRE's alternative identifiers of the record and its grants,
    then the values that are identifiers of another resource. Dublin Core does not say how
    those relate, so each `references` the related resource (see UNTYPED_RELATION)."""
    alternates: list[dict[str, str]] = []
    related = []
    funding: list[dict[str, Any]] = []
    seen: list[dict[str, str]] = []
    for _, text in _texts(_RELATION, dc):
        if text.startswith("info:eu-repo/"):
            if (alternate := _alternate(text)) is not None:
                alternates.append(alternate)
                continue
            if (grant := eu_repo_grant(text)) is not None:
                if grant not in funding:
                    funding.append(grant)
                continue
        entry = untyped_identifier(text)
        if entry is None or entry["scheme"] == "issn":
            continue  # an ISSN names the journal the record is in: `_journals` reads it
        if entry not in seen:
            seen.append(entry)
            related.append({**entry, "relation_type": {"id": UNTYPED_RELATION}})
    return alternates, related, funding


def _alternate(text: str) -> dict[str, str] | None:
    """An eu-repo altIdentifier as an identifier of the record (`other` for a scheme the
    target does not have, such as `wos`); None when `text` is none, or an ISBN or ISSN
    whose check digit is wrong (as `urn:isbn:` and a bare one: it was kept unchecked, an
    ISBN the target links to another book, or to none). `urn/urn:isbn:…` is that ISBN, as
    the same dc:identifier is (it was a `urn`)."""
    match = _ALT_IDENTIFIER.match(text)
    if match is None:
        return None
    scheme = _ALT_SCHEMES.get(match.group(1).lower(), "other")
    value = match.group(2).strip()
    if scheme == "doi":
        value = normalize_doi(value) or value
    return typed_identifier(value, scheme)  # an ISBN or ISSN checked, a `urn:isbn:` one


# A copyright statement, not a license's name: "Copyright (c) 2020 …", "© 2020 …",
# "All rights reserved".
_COPYRIGHT = re.compile(r"^\s*(?:copyright\b|©|\(c\))|all rights reserved", re.I)


def _rights(dc: etree._Element) -> list[dict[str, Any]]:
    """Licenses from dc:rights URLs, named by the free-text statements beside them.

    Feeds list a license as a name and a URL (Zenodo: `Creative Commons Attribution 4.0
    International` then its legalcode URL): when there are as many names as license URLs they
    are paired in order; other statements become free-text rights. A copyright statement
    (OJS: `Copyright (c) 2020 A, B` before the license URL) names no license: it is always a
    right of its own. eu-repo access terms are access rights, not licenses, and are skipped.
    """
    urls: list[str] = []
    statements: list[tuple[etree._Element, str]] = []
    copyrights: list[tuple[etree._Element, str]] = []
    for element, text in _texts(_RIGHTS, dc):
        if text.startswith("info:eu-repo/semantics/"):
            continue
        if text.startswith(("http://", "https://")):
            urls.append(text)
        elif _COPYRIGHT.search(text):
            copyrights.append((element, text))
        else:
            statements.append((element, text))
    rights: list[dict[str, Any]] = []
    for url in urls:
        license_id = vocab.license_id_from_url(url)
        rights.append({"id": license_id, "link": url, "title": None if license_id else {"en": url}})
    if statements and len(statements) == len(rights):
        for right, (element, text) in zip(rights, statements, strict=True):
            right["title"] = {vocab.i18n_key(element.get(XML_LANG)): text}
        statements = []
    # A statement that names a license with its version (`CC BY 4.0`: repositories that give
    # no license URL) is that license, once, titled in each language; others are free text.
    named = {right["id"]: right for right in rights if right["id"]}
    for element, text in statements:
        language = vocab.i18n_key(element.get(XML_LANG))
        license_id = vocab.license_id_from_name(text)
        if license_id is None:
            rights.append({"title": {language: text}})
        elif (right := named.get(license_id)) is None:
            named[license_id] = {"id": license_id, "title": {language: text}}
            rights.append(named[license_id])
        else:
            right["title"] = {language: text, **(right["title"] or {})}
    rights.extend(
        {"title": {vocab.i18n_key(element.get(XML_LANG)): text}} for element, text in copyrights
    )
    return rights


def languages(dc: etree._Element) -> list[dict[str, str]]:
    languages: list[dict[str, str]] = []
    for _, text in _texts(_LANGUAGE, dc):
        for language in vocab.language_ids(text):  # `english; german` is two languages
            if {"id": language} not in languages:
                languages.append({"id": language})
    return languages
