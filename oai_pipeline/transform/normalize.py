"""Value clean-up shared by the imports: text, identifiers, person names, description HTML."""

from __future__ import annotations

import html
import re
import unicodedata
from html.entities import html5
from typing import Any, NamedTuple
from urllib.parse import unquote, urlparse

import nh3

from oai_pipeline.doi import normalize_doi
from oai_pipeline.transform.text_cache import short_text_cache

_ORCID_PREFIX = re.compile(r"^(?:https?://)?(?:www\.)?orcid\.org/", re.I)
_ROR_PREFIX = re.compile(r"^(?:https?://)?(?:www\.)?ror\.org/", re.I)
# The forms the target accepts; rdm_record validates with the same patterns (and DOI).
ORCID = re.compile(r"^\d{4}-\d{4}-\d{4}-\d{3}[\dX]$")
ROR = re.compile(r"^0[a-z0-9]{6}\d{2}$")
# A well-formed character reference only: a bare `&` in text or URLs is left alone.
_ENTITY = re.compile(r"&(?:#\d+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")
_ORCID_DIGITS = re.compile(r"\d{15}[\dX]")
# An ORCID as sources write it (bare, URL, with or without hyphens), read in one match.
_ORCID_FORMS = re.compile(
    r"(?:(?:https?://)?(?:www\.)?orcid\.org/)?(\d{4})-?(\d{4})-?(\d{4})-?(\d{3}[\dXx])/?", re.I
)
_ROR_ID = re.compile(r"0[a-z0-9]{6}\d{2}")
# An identifier's resolver URL up to the identifier itself (ISNI and GND are given so).
_URL_PATH = re.compile(r"^\s*https?://[^\s]*/(?=[^/\s]+/?\s*$)|/\s*$", re.I)
_SPACES = re.compile(r"\s+")
# A line break, a tab or a run of spaces: what pretty-printing leaves inside a one-line value.
_SPACE_RUN = re.compile(r"[ \t\n\r]{2,}|[\t\n\r]")
_EXTENSION = re.compile(r"\.([A-Za-z0-9]{1,8})$")
# Extensions of files a source hosts for download. A dot alone does not make a file:
# arXiv ids (`abs/1101.4388`), handles (`epic.10033`) and versions (`v1.2`) are pages.
# fmt: off
_FILE_EXTENSIONS = frozenset({
    "pdf", "ps", "eps", "djvu", "epub", "txt", "md", "rst", "tex", "bib", "ris", "rtf",
    "doc", "docx", "odt", "xls", "xlsx", "ods", "csv", "tsv", "ppt", "pptx", "odp",
    "json", "jsonld", "xml", "yaml", "yml", "zip", "gz", "tgz", "tar", "bz2", "xz", "7z", "rar",
    "zst", "png", "jpg", "jpeg", "gif", "tif", "tiff", "bmp", "svg", "webp", "mp3", "wav",
    "flac", "ogg", "mp4", "mov", "avi", "mkv", "webm", "h5", "hdf5", "hdf", "he5", "nc", "nc4",
    "fits", "fit", "grib", "grb", "ipynb", "py", "r", "rmd", "rdata", "rds", "m", "mat", "sav",
    "dta", "parquet", "feather", "npy", "npz", "sqlite", "db", "sql", "dat", "log", "shp",
    "geojson", "kml", "kmz", "gpx", "las", "laz", "fasta", "fa", "fastq", "bam", "sam", "vcf",
    "pdb", "cif", "mol", "sdf", "c", "cpp", "h", "java", "js", "sh", "jar", "whl",
})
# fmt: on

# Descriptions are HTML in the target: the rich-text tags InvenioRDM itself allows.
# fmt: off
_ALLOWED_TAGS = frozenset({
    "p", "br", "div", "span", "strong", "em", "b", "i", "u", "s", "sub", "sup", "ul", "ol", "li",
    "dl", "dt", "dd", "a", "blockquote", "code", "pre", "hr", "abbr",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tfoot", "tr", "th", "td",
    "caption",
})
# fmt: on
_CLEANER = nh3.Cleaner(
    tags=set(_ALLOWED_TAGS),
    attributes={"a": {"href"}, "td": {"colspan", "rowspan"}, "th": {"colspan", "rowspan"}},
    url_schemes={"http", "https", "mailto", "ftp"},
    link_rel=None,  # no target attribute is allowed, so there is no opener to protect
)
# Block elements the sanitiser drops: a space before each keeps `<section>a</section>b` two words.
_DROPPED_BLOCK = re.compile(
    r"(?=</?(?:address|article|aside|center|details|dialog|fieldset|figcaption|figure|footer"
    r"|form|header|hgroup|main|nav|section|summary)\b)",
    re.I,
)
# `&lt;p&gt;`: a tag escaped once more than HTML needs (Zenodo's oai_dc descriptions).
_ESCAPED_TAG = re.compile(r"&lt;/?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*?)?/?&gt;")
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>")


# A byte order mark, the zero-width space and the word joiner: invisible, they only make equal
# texts differ. Not the zero-width (non-)joiner (U+200C, U+200D): Persian, Hindi, Malayalam …
# spell words with them ("می‌شود") and emoji sequences are joined by them.
_INVISIBLE = re.compile("[\u200b\u2060\ufeff]")


# C1 control characters (U+0080-U+009F) in metadata are Windows-1252 text read as Latin-1
# upstream (a DSpace or EPrints fed from a Windows form: `Smith\x92s`, `1990\x962000`); no one
# writes these controls on purpose. Each is read as the character Windows-1252 has at that
# byte, as browsers read `&#150;` (WHATWG); the five it leaves undefined are dropped.
_C1_CONTROL = re.compile("[\x80-\x9f]")
_WINDOWS_1252_OF_C1 = {code: bytes([code]).decode("cp1252", "ignore") for code in range(0x80, 0xA0)}


def clean_unicode(value: str) -> str:
    """`value` without BOM/zero-width characters, its C1 controls read as Windows-1252, in
    NFC (a composed `é`, as most sources write it). ASCII text, most values, is returned at
    once."""
    if value.isascii():
        return value
    value = _INVISIBLE.sub("", value)
    if _C1_CONTROL.search(value):
        value = value.translate(_WINDOWS_1252_OF_C1)
    return value if unicodedata.is_normalized("NFC", value) else unicodedata.normalize("NFC", value)


def element_text(element: Any) -> str:
    """All the text of an lxml element, the XPath `string(.)`: a comment, processing
    instruction or child element inside a value (`Foo <!-- x --> bar`, `Study of <i>E.
    coli</i>`) does not end it, as its `.text` does."""
    if len(element) == 0:  # no child, not even a comment: the text is the element's own
        return element.text or ""
    return "".join(element.itertext())


def text_or_none(value: str | None) -> str | None:
    """A one-line value (title, name, subject …): a source's line breaks and indentation are
    layout, not content, so each run of whitespace becomes one space. (The XML parser has
    turned every CR into LF already, so three cheap tests find the values to collapse.)
    Invisible characters are dropped and the text is NFC (`clean_unicode`)."""
    if value is None:
        return None
    value = clean_unicode(value)
    if "&" in value:
        value = _unescape_plain(value)
    value = value.strip()
    if "\n" in value or "  " in value or "\t" in value:
        value = _SPACE_RUN.sub(" ", value)
    return value or None


def _unescape_plain(value: str) -> str:
    """A plain-text value with the HTML references the XML parser left (`Caf&eacute;`,
    `A &amp; B`, `1990&#8211;2000`) read as their characters: a source that escaped its text
    as HTML once more than XML needs sends `&amp;eacute;`. A `&` that starts no reference HTML
    has (`R&D`, `a=1&b=2`) stays."""
    unescaped = _ENTITY.sub(_referenced, value)
    return clean_unicode(unescaped) if unescaped != value else value


def _referenced(match: re.Match[str]) -> str:
    """What a reference stands for in HTML; a name HTML does not have stays as written
    (`html.unescape` reads `&ampx;` as `&x;`, HTML's way with a name missing its `;`)."""
    reference = match.group(0)
    if reference.startswith("&#"):
        return html.unescape(reference)
    return html5.get(reference[1:], reference)


def collapse_whitespace(value: str) -> str:
    """`value` with each run of whitespace as one space (the caller strips); see
    `text_or_none`."""
    return _SPACE_RUN.sub(" ", value)


def block_text_or_none(value: str | None) -> str | None:
    """A multi-line value (a description): only the ends are stripped, its lines stay."""
    if value is None:
        return None
    value = clean_unicode(value).strip()
    return value or None


def normalize_orcid(value: str) -> str:
    """`https://orcid.org/0000-0002-1825-009x` -> `0000-0002-1825-009X`."""
    bare = _ORCID_PREFIX.sub("", value.strip()).strip("/").upper()
    if _ORCID_DIGITS.fullmatch(bare):
        bare = "-".join(bare[i : i + 4] for i in range(0, 16, 4))
    return bare


@short_text_cache(maxsize=4096)
def normalize_ror(value: str) -> str:
    """`https://ror.org/04wxnsj81` -> `04wxnsj81`. Cached, as `is_ror`: a harvest's records
    name the same organisations over and over, each checked, then normalised."""
    return _ROR_PREFIX.sub("", value.strip()).strip("/").lower()


@short_text_cache(maxsize=4096)
def is_ror(value: str | None) -> bool:
    return bool(value) and bool(_ROR_ID.fullmatch(normalize_ror(value or "")))


def has_orcid_check_digit(orcid: str) -> bool:
    """True when the last character of `orcid` (`0000-0002-1825-0097`) is the ISO 7064 MOD 11-2
    check digit of the others, as every ORCID iD's is: a mistyped digit makes it another
    researcher's iD, or none at all."""
    digits = orcid.replace("-", "")
    body = digits[:-1]
    total = 0
    if body.isascii() and body.isdigit():
        # ASCII digits, nearly always: a byte less 48 (`0`) is `int(digit)`, in half the time
        for code in body.encode():
            total = (total + code - 48) * 2
    else:  # other digits (the patterns' `\d` finds `١`), or not digits (int raises, as it did)
        for digit in body:
            total = (total + int(digit)) * 2
    check = (12 - total % 11) % 11
    return digits[-1] == ("X" if check == 10 else str(check))


def name_identifier(scheme: str, value: str) -> dict[str, str] | None:
    """A person/org identifier with the scheme's canonical spelling of the value; None when
    the value is malformed for a scheme the target checks (ORCID, ROR; an ORCID with a wrong
    check digit too) or the scheme is none the target knows for people, so that one
    identifier is dropped instead of failing the whole record."""
    scheme = scheme.strip().lower()
    if scheme == "orcid":
        value = value.strip()
        if ORCID.match(value) is None:  # not already in the canonical form
            match = _ORCID_FORMS.fullmatch(value)
            if match is None:
                return None
            value = "-".join(match.groups()).upper()
        if not has_orcid_check_digit(value):
            return None
        return {"scheme": "orcid", "identifier": value}
    if scheme == "ror":
        ror = normalize_ror(value)
        return {"scheme": "ror", "identifier": ror} if ROR.match(ror) else None
    if scheme == "isni":
        # `0000 0001 2146 438X`, or the URL `http://www.isni.org/isni/000000012146438X`
        return {"scheme": "isni", "identifier": _SPACES.sub("", _URL_PATH.sub("", value))}
    if scheme == "gnd":
        # `118540238`, or the URL `https://d-nb.info/gnd/118540238`
        return {"scheme": "gnd", "identifier": _URL_PATH.sub("", value.strip())}
    # InvenioRDM's RDM_RECORDS_PERSONORG_SCHEMES are ORCID, ISNI, GND and ROR only: another
    # scheme (ResearcherID, Scopus Author ID …) would fail the record, so it is left out.
    return None


# Words that make a name an organisation's (dc:creator "World Health Organization", a DataCite
# creatorName "University of California, Berkeley" without nameType); whole words only. Not
# only English: repositories name their own institution in their language ("Helsingin
# yliopisto, soveltavan biologian laitos", "Universidad de Chile", "Karolinska Institutet",
# "Max-Planck-Gesellschaft"), which read as a person's "Family, Given" made them people.
_ORGANISATION_WORDS = re.compile(
    r"\b(?:universit(?:y|ies|ät|é|à|at|eit|et|etet)|universidad|universidade"
    r"|uniwersytet|univerzit[ae]|univerza|yliopisto|egyetem|(?:fach)?hochschule|h[øö]gskol(?:e|en|a|an)"
    r"|institut(?:e|o|ion|et|ul)?|istituto|instituut|instytut|inštitut|ústav"
    r"|organi[sz]ation|organi[sz]ación|organização|organizzazione"
    r"|association|asociación|associação|associazione|verband|verein"
    r"|society|soci[eé]t[eé]|sociedad|sociedade|società|gesellschaft"
    r"|council|consejo|conselho|consiglio|conseil"
    r"|cent(?:re|er|ro|rum)|zentrum"
    r"|department|departamento|d[eé]partement|dipartimento|abteilung|laitos"
    r"|ministry|ministerio|minist[eè]re|ministero|ministerium"
    r"|laborator(?:y|ies|io|ium)|laboratório|laboratoire"
    r"|foundation|fundación|fundação|fondazione|fondation|stiftung|stichting"
    r"|consortium|committee|agency|agencia|agência|agenzia|agence|office|library|biblioteca"
    r"|biblioth[eè]que|bibliothek|bibliotheek|museum|museo|musée|museu"
    r"|group|team|project|network|collaboration"
    r"|academy|academia|acad[eé]mie|akademie|akademia|akademi"
    r"|observatory|observatorio|observatoire|corporation|inc|ltd|llc|gmbh|e\.v"
    r"|college|hospital|hôpital|ospedale|klinikum|commission|comisión|comissão|commissione"
    r"|politecnico|polit[eé]cnica|polytechnic|polytechnique|facultad|faculdade|fakultät"
    r"|faculté|facoltà|faculty|escuela|école"
    r"|университет|институт|академия)\b"
    # Chinese, Japanese and Korean names run their words together: no word boundary to find.
    r"|大学|大學|研究所|研究院|研究中心|学院|學院|대학교|연구소|연구원",
    re.I,
)
# An acronym alone (CERN, NASA, UNESCO): no person is named so.
_ACRONYM = re.compile(r"^[A-Z][A-Z0-9&]{1,9}$")
# Authority-file dates after a name: "Twain, Mark, 1835-1910", "Doe, Jane, b. 1950".
_NAME_DATES = re.compile(
    r",?\s*\(?(?:(?:b|d|fl|ca|born|died)\.?\s*)?\d{3,4}\??\s*-\s*(?:\d{3,4}\??)?\)?\.?$"
    r"|,?\s*\(?(?:b|d|fl|born|died)\.?\s*\d{3,4}\??\)?\.?$",
    re.I,
)
# A trailing parenthesis: "Smith, John (Univ X)" names the affiliation; a role is dropped.
_PARENTHESIS = re.compile(r"\s*\(([^()]+)\)$")
_ROLE = re.compile(
    r"^(?:eds?|editors?|hrsg|hg|coord|comp|trans|tr|ill|dir|ed\.? lit|orgs?)\.?$", re.I
)


def looks_like_organisation(name: str) -> bool:
    """A conservative guess that a name without a stated type is an organisation's."""
    return bool(_ACRONYM.match(name) or _ORGANISATION_WORDS.search(name))


def creators_or_contributors(
    creators: list[dict[str, Any]], contributors: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The creators and contributors of a record, with the contributors (without their role)
    as its creators when it names no creator: a recording catalogued under its title, a
    DSpace thesis with only its advisor in dc.contributor. The target needs a creator, and
    the people the source names are the nearest it gives. Both MARC and Dublin Core use it."""
    if creators:
        return creators, contributors
    return [{k: v for k, v in entry.items() if k != "role"} for entry in contributors], []


# An ORCID in a name's parenthesis: `Doe, Jane (https://orcid.org/0000-0002-1825-0097)`,
# `(ORCID: 0000-0002-1825-0097)`.
_ORCID_LABEL = re.compile(r"^orcid(?:\s*id)?(?:\s*:\s*|\s+)", re.I)


# `Doe, Jane et al.`, `Doe, J., [et al.]`, `Doe, Jane and others`, German catalogues' `u.a.`
# (und andere; lower case only: `Smith, U. A.` are initials): a citation's shorthand for the
# authors it does not name, not part of the name (it became the given name `Jane et al.`).
_ET_AL = re.compile(
    r"(?:^|,?\s+)\[?\s*(?:et\.?\s*al(?:ii)?\.?|and\s+others|(?-i:u\.\s?a\.))\s*\]?$", re.I
)
# What the shorthands end with: a name that ends otherwise (most) skips the expression.
_ET_AL_ENDINGS = ("al", "al.", "alii", "alii.", "others", "a.", "]")


def without_et_al(text: str) -> str:
    """`text` without a trailing `et al.` (empty when that is all it is). dc, MARC, DataCite,
    OpenAIRE and arXivRaw names all go through it."""
    if not text.lower().endswith(_ET_AL_ENDINGS):
        return text
    return _ET_AL.sub("", text).rstrip(" ,")


def names_nobody(name: str) -> bool:
    """True when `name` holds no letter: `,`, `, ,`, or what is left of a dc:creator or MARC
    100 of authority dates only (`1950-2000`) once they are dropped. Such a name, as `et al.`
    alone, is left out: it became a person with no family name, which the target refuses,
    failing the whole record. Digits are no name either (`12345`, `2019-01`: a number or a
    date in the name's field): they were a person so named, with no given name."""
    return not any(character.isalpha() for character in name)


def name_or_none(name: str | None) -> str | None:
    """A name, or a part of one (a given or family name), as its one-line value; None when
    there is none or it names nobody (`names_nobody`: `12345` in a givenName is no given
    name, as in a creatorName it is no person)."""
    return None if name is None or names_nobody(name) else name


def orcid_in_note(note: str) -> str | None:
    """The ORCID a name's parenthesised note is (`0000-0002-1825-0097`, `ORCID: …`, its URL),
    without its label; None when the note is something else (an affiliation, a role)."""
    bare = _ORCID_LABEL.sub("", note.strip())
    return bare if _ORCID_FORMS.fullmatch(bare) else None


class DCName(NamedTuple):
    """A name as a dc:creator (or a MARC 100 $a) writes it, taken apart."""

    name: str
    affiliation: str | None
    orcid: dict[str, str] | None
    """The person's ORCID identifier (`name_identifier`), None if none or not a valid one."""


def split_dc_name(text: str) -> DCName:
    """A dc:creator/dc:contributor name without the authority dates after it, and what a
    trailing parenthesis holds: the person's ORCID (`(https://orcid.org/…)`), else the
    affiliation (`(Univ X)`); a role such as `(ed.)` and a trailing `et al.` are dropped."""
    affiliation = orcid = None
    text = without_et_al(text)
    if text.endswith(")") and (match := _PARENTHESIS.search(text)):
        inner = match.group(1).strip()
        text = text[: match.start()]
        if (written := orcid_in_note(inner)) is not None:
            orcid = name_identifier("orcid", written)  # a wrong check digit: no iD, no affiliation
        elif not _ROLE.match(inner) and not _NAME_DATES.fullmatch(inner):
            affiliation = inner
        text = without_et_al(text)  # `Doe, Jane et al. (Univ X)`
    if text[-1:].isdigit() or text.endswith(("-", ".", "?")):
        text = _NAME_DATES.sub("", text).rstrip(" ,")
    return DCName(text, affiliation, orcid)


# An ISBN or ISSN as repositories write them in dc:identifier: bare, or after `ISBN`/`ISSN`
# (`ISBN 978-3-16-148410-0`, `ISSN: 0028-0836`), with hyphens or spaces between the groups.
_ISBN = re.compile(r"^(?:isbn(?:-1[03])?:?\s*)?((?:\d[\s-]?){9}[\dX]|(?:\d[\s-]?){12}\d)$", re.I)
_ISSN = re.compile(r"^(?:e?issn:?\s*)?(\d{4})-?(\d{3}[\dX])$", re.I)


def isbn(value: str) -> str | None:
    """The ISBN of `value` (as written, without an `ISBN` label), or None when `value` is none
    or its check digit is wrong (an order number, a phone number …). Ten bare digits are an
    ISBN only with a label; thirteen must begin with 978 or 979, as every ISBN-13 does."""
    text = value.strip()
    match = _ISBN.match(text)
    if match is None:
        return None
    digits = re.sub(r"[\s-]", "", match.group(1)).upper()
    if digits == text.upper() and not digits.startswith(("978", "979")):
        return None  # ten bare digits, unlabelled: as likely a local number as an ISBN
    if len(digits) == 10:
        total = sum((10 - i) * (10 if c == "X" else int(c)) for i, c in enumerate(digits))
        valid = total % 11 == 0
    else:
        valid = (
            digits.isdigit()
            and sum(int(c) * (3 if i % 2 else 1) for i, c in enumerate(digits)) % 10 == 0
        )
    return match.group(1).strip() if valid else None


def issn(value: str) -> str | None:
    """The ISSN of `value` as `NNNN-NNNC`, or None when `value` is none or its check digit is
    wrong; eight bare digits without the hyphen or a label are none."""
    text = value.strip()
    match = _ISSN.match(text)
    if match is None or (text.isdigit()):
        return None  # eight bare digits: as likely a local number as an ISSN
    digits = (match.group(1) + match.group(2)).upper()
    total = sum((8 - i) * int(c) for i, c in enumerate(digits[:7]))
    check = (11 - total % 11) % 11
    expected = "X" if check == 10 else str(check)
    return f"{digits[:4]}-{digits[4:]}" if digits[7] == expected else None


def unique_identifiers(
    identifiers: list[dict[str, str]], own_doi: str | None = None
) -> list[dict[str, str]]:
    """`identifiers` without repeats and without the record's own DOI (the target rejects a
    duplicated identifier). Values are compared as the imports normalised them; DOIs
    case-insensitively, as DOIs are."""
    if not identifiers:
        return identifiers
    seen: set[tuple[str, str]] = set()
    if own_doi:
        seen.add(("doi", own_doi.lower()))
    result = []
    for entry in identifiers:
        value = entry["identifier"]
        key = (entry["scheme"], value.lower() if entry["scheme"] == "doi" else value)
        if key not in seen:
            seen.add(key)
            result.append(entry)
    return result


# The `info:` URIs (RFC 4452) of identifiers the target has a scheme for, besides `info:doi/`
# (a DOI, read as one): EPrints writes `info:pmid/17501999` into dc:identifier.
_INFO_URI = re.compile(r"^info:(pmid|hdl|bibcode|arxiv)/(\S+)$", re.I)
_INFO_SCHEMES = {"pmid": "pmid", "hdl": "handle", "bibcode": "ads", "arxiv": "arxiv"}


def info_uri(text: str) -> dict[str, str] | None:
    """An `info:pmid/…`, `info:hdl/…`, `info:bibcode/…` or `info:arxiv/…` URI as an identifier
    of its scheme (the bare value); None for anything else. Before, they were dropped."""
    match = _INFO_URI.match(text)
    if match is None:
        return None
    return {"identifier": match.group(2), "scheme": _INFO_SCHEMES[match.group(1).lower()]}


def urn_identifier(text: str) -> dict[str, str] | None:
    """A URN (`text` begins with `urn:`) as an identifier. `urn:isbn:` and `urn:issn:`, the
    form PKP and OpenAIRE advise for a book's or serial's number, are that ISBN or ISSN when
    its check digit is right (`typed_identifier`), else None: kept unchecked, or as a `urn`,
    it linked to another book, or to none, and an empty `urn:isbn:` failed the record. Any
    other URN is a `urn`."""
    scheme = text[4:9].lower()
    if scheme in ("isbn:", "issn:"):
        return typed_identifier(text[9:], scheme[:4])
    return {"identifier": text, "scheme": "urn"}


def typed_identifier(value: str, scheme: str) -> dict[str, str] | None:
    """`value` as an identifier of the ``scheme`` a source typed it as. An ISBN or ISSN is
    checked (the type is its label, so ten or eight bare digits are one): a wrong check digit
    gives None, as in MARC's 020 and 022 and an untyped value (kept, a DataCite
    `relatedIdentifierType="ISSN"` `1234-5678` named another journal, or none, and a target
    that checks the scheme, as InvenioRDM does, refused the record). A URN is read as
    `urn_identifier` reads it; any other value is as given."""
    if scheme in ("isbn", "issn"):
        read = isbn if scheme == "isbn" else issn
        number = read(value) or read(f"{scheme}:{value.strip()}")
        return {"identifier": number, "scheme": scheme} if number else None
    if scheme == "urn" and value[:4].lower() == "urn:":
        return urn_identifier(value)
    return {"identifier": value, "scheme": scheme}


def untyped_identifier(text: str) -> dict[str, str] | None:
    """An identifier given without its scheme (a dc:relation, a DataCite related identifier
    with no type) as one of the scheme its form shows: a DOI (bare, `doi:`, a doi.org URL), a
    web URL, a URN (`urn_identifier`: `urn:isbn:` is an ISBN), an `info:` URI (`info_uri`), or
    an ISBN or ISSN whose check digit is right (`isbn`, `issn`: ten or eight bare digits only
    with their label); None for any other value, which nothing says how to read."""
    if (doi := normalize_doi(text)) is not None:
        return {"identifier": doi, "scheme": "doi"}
    if text.startswith(("http://", "https://")):
        return {"identifier": text, "scheme": "url"}
    if text.lower().startswith("urn:"):
        return urn_identifier(text)
    if (number := isbn(text)) is not None:
        return {"identifier": number, "scheme": "isbn"}
    if (number := issn(text)) is not None:
        return {"identifier": number, "scheme": "issn"}
    return info_uri(text)


def unique_affiliations(affiliations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A person's or organisation's affiliations, each once and in order: a source repeating
    one (a MARC $u given twice, a ROR under two names: `University of Milan` and `Università
    degli Studi di Milano`) listed it twice in the target. One ROR is one organisation, kept
    under its first name; an affiliation without one is compared by its name (`_name_key`),
    and one named as an affiliation with a ROR is that one, kept with its ROR where the first
    of them stands: DataCite creators written by hand beside those a tool enriched with ROR
    (`<affiliation>Brown University</affiliation>` and the same with its
    affiliationIdentifier) had the organisation twice, once without its id."""
    if len(affiliations) < 2:
        return affiliations
    # the ROR'd affiliation of each name (the first to have it), for those without an id
    by_name: dict[str, dict[str, Any]] = {}
    for affiliation in affiliations:
        if affiliation.get("id") and (name := affiliation.get("name")):
            by_name.setdefault(_name_key(name), affiliation)
    unique: list[dict[str, Any]] = []
    seen: set[tuple[str, Any]] = set()
    for affiliation in affiliations:
        key: tuple[str, Any]
        if ror := affiliation.get("id"):
            key = ("ror", ror)
        elif (named := by_name.get(name := _name_key(affiliation.get("name") or ""))) is not None:
            affiliation, key = named, ("ror", named["id"])
        else:
            key = ("name", name)
        if key not in seen:
            seen.add(key)
            unique.append(affiliation)
    return unique


def _name_key(name: str) -> str:
    """An organisation's name as compared: `Brown  university` is `Brown University`."""
    return " ".join(name.split()).casefold()


def one_per_scheme(identifiers: list[dict[str, str]]) -> list[dict[str, str]]:
    """A person's or organisation's identifiers, the first of each scheme: the target allows
    one per scheme (an ORCID given twice, as a URL and bare, is one ORCID)."""
    if len(identifiers) < 2:
        return identifiers
    seen: set[str] = set()
    result = []
    for entry in identifiers:
        if entry["scheme"] not in seen:
            seen.add(entry["scheme"])
            result.append(entry)
    return result


def person_or_org(
    name: str | None,
    *,
    kind: str | None,
    given: str | None = None,
    family: str | None = None,
    identifiers: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A person or an organisation; a person's name is split from `Family, Given` when the
    source gives no given/family parts. Without a stated kind, given/family parts or an ORCID
    make a person, and so does a name with a comma unless it has an organisation's word
    (`University of California, Berkeley`); anything else is an organisation.

    The parts are one-line values as the imports read them (`text_or_none`), so they are only
    stripped here: this runs for every creator and contributor."""
    identifiers = one_per_scheme(identifiers) if identifiers else []
    name, given, family = (
        block_text_or_none(name),
        block_text_or_none(given),
        block_text_or_none(family),
    )
    if kind is None:
        personal = bool(
            given
            or family
            or any(i["scheme"] == "orcid" for i in identifiers)
            or (name and "," in name and not looks_like_organisation(name))
        )
        kind = "personal" if personal else "organizational"
    result: dict[str, Any] = {"type": kind, "identifiers": identifiers}
    if kind == "personal":
        if family is None and name is not None:
            if "," in name:
                family_part, _, given_part = name.partition(",")
                # a part of digits only (`Doe, 12345`, `Doe, 2019`) names nobody (name_or_none)
                family, given = (
                    name_or_none(block_text_or_none(family_part)),
                    given or name_or_none(block_text_or_none(given_part)),
                )
                if family is None:  # `, John`: no family part, so the one name (the target
                    family, given = given, None  # needs a family name), as `Madonna` is
            elif given and name == given:
                family, given = name, None  # givenName only ("Madonna"): one name
            else:
                # `John Smith`, `Smith John`, `J. Smith` with givenName `John`: the rest
                rest = given and (_rest_beside(name, given) or _after_initials(name, given))
                family = rest or name
        elif given is None and name is not None and name != family:
            given = _given_beside_family(name, family)
        result.update(given_name=given, family_name=family)
        if family is not None:
            result["name"] = f"{family}, {given}" if given else family
    else:
        result["name"] = name
    return result


def _rest_beside(name: str, part: str) -> str | None:
    """The rest of a name that begins or ends with `part`'s whole words: the family name of
    `John Smith` or `Smith John` with the given name `John`, the given name with the family
    name `Smith`; else None."""
    if name.startswith(part + " "):
        return name[len(part) + 1 :]
    if name.endswith(" " + part):
        return name[: -len(part) - 1]
    return None


def _given_beside_family(name: str, family: str) -> str | None:
    """The given name of a name a source gives with its familyName but no givenName: after the
    comma of `Smith, John`, beside the family name in `John Smith` or `Smith John`. None when
    the family name is not where the name has it (`Smith-Jones, John` with `Smith`): nothing
    says which of the other words are given names. (The given name was lost: the person was
    `Smith`.)"""
    if "," in name:
        family_part, _, given_part = name.partition(",")
        return block_text_or_none(given_part) if family_part.strip() == family else None
    return _rest_beside(name, family)


_INITIAL = re.compile(r"^\w\.?$")


def _after_initials(name: str, given: str) -> str | None:
    """The family name of `J. R. Smith` with the given name `John Ronald`: the words after
    the given names' initials, when none of them is an initial too (`J. K. Smith` with
    `John` could be `K. Smith` or `Smith`); else None."""
    words, given_words = name.split(), given.split()
    if len(words) <= len(given_words):
        return None
    for word, given_word in zip(words, given_words, strict=False):
        if not _INITIAL.match(word) or word[0].casefold() != given_word[0].casefold():
            return None
    rest = words[len(given_words) :]
    if any(_INITIAL.match(word) for word in rest):
        return None
    return " ".join(rest)


def unescape_html_once(text: str) -> str:
    """Undo one level of escaping: Zenodo sends `&amp;lt;p&amp;gt;` in dc:description, which the
    XML parser turns into `&lt;p&gt;`; this makes it `<p>`. Bare `&` are left as they are."""
    if "&" not in text:
        return text
    return _ENTITY.sub(lambda match: html.unescape(match.group(0)), text)


def is_double_escaped(text: str) -> bool:
    """True when `text` is HTML escaped once more than HTML needs: it holds escaped tags
    (`&lt;p&gt;`) and no real one. Correctly escaped text (`<p>p &lt; 0.05</p>`, or a plain
    text that mentions `&lt;b&gt;` next to real markup) is left as it is."""
    return "&lt;" in text and bool(_ESCAPED_TAG.search(text)) and not _TAG.search(text)


# An opening or closing tag of HTML (with a name HTML has), or a comment: a description that
# holds one is HTML; one that holds only other `<` is plain text.
_HTML_TAG = re.compile(
    r"<(?:!--|/?(?:a|abbr|address|article|aside|b|big|blockquote|body|br|button|caption|center"
    r"|cite|code|col|colgroup|dd|del|details|div|dl|dt|em|embed|figcaption|figure|font|footer"
    r"|form|h[1-6]|head|header|hr|html|i|iframe|img|input|ins|kbd|li|link|main|mark|math|meta"
    r"|nav|noscript|object|ol|option|p|pre|q|s|samp|script|section|select|small|span|strike"
    r"|strong|style|sub|summary|sup|svg|table|tbody|td|textarea|tfoot|th|thead|time|title|tr"
    r"|tt|u|ul|var|wbr)(?=[\s/>]))",
    re.I,
)


def sanitize_html(text: str) -> str:
    """`text` as safe HTML: allow-listed rich-text tags, `a[href]` with web/mail schemes; no
    script, style, event handler or `javascript:` URL. A dropped block element leaves a space."""
    if _DROPPED_BLOCK.search(text):
        text = _DROPPED_BLOCK.sub(" ", text)
    return _CLEANER.clean(text).strip()


def description_html(text: str, *more_lines: str) -> str | None:
    """A description as the target stores it (HTML): Zenodo's double escaping undone only where
    the text is double-escaped, then sanitised. `more_lines` follow `text` after a line break
    (`<br>`), as a DataCite description's `<br/>` elements separate them. None when empty.

    Plain text (no `<` and no `&`) is already safe HTML and is returned as it is: the sanitiser
    only runs on the descriptions that need it."""
    if not more_lines and "<" not in text and "&" not in text:
        return text.strip() or None
    if more_lines:
        lines = [line.strip() for line in (text, *more_lines)]
        while lines and not lines[-1]:
            lines.pop()
        while lines and not lines[0]:
            lines.pop(0)
        if is_double_escaped("\n".join(lines)):
            lines = [unescape_html_once(line) for line in lines]
        joined = "<br>".join(lines)
    else:
        joined = text.strip()
        if is_double_escaped(joined):
            joined = unescape_html_once(joined)
    if "<" in joined and not _HTML_TAG.search(joined):
        # A `<` that opens no HTML tag is text (mathematics: `$x<y$ and $z>w$`), which the
        # sanitiser would take for a tag and drop.
        joined = joined.replace("<", "&lt;").replace(">", "&gt;")
    if "<" in joined or "&" in joined:
        joined = sanitize_html(joined)
    return joined or None


def file_link(url: str) -> dict[str, str] | None:
    """A link to a file at the source, or None: its URL path must end in a file name with a
    known file extension (`data.csv`), not just a dot (`abs/1101.4388` is a landing page).
    A URL whose host urlparse refuses (an unclosed `[`: `http://[x/a.pdf`) links no file."""
    try:
        parsed = urlparse(url.strip())
    except ValueError:
        return None
    if parsed.scheme not in {"http", "https"}:
        return None
    name = unquote(parsed.path.rstrip("/").rsplit("/", 1)[-1])
    extension = _EXTENSION.search(name)
    if extension is None or extension.group(1).lower() not in _FILE_EXTENSIONS:
        return None
    return {"url": url.strip(), "key": name}


_GRANT = re.compile(
    r"^info:eu-repo/grantAgreement/([^/]+)/([^/]*)/([^/]+)(?:/([^/]*))?(?:/([^/]*))?"
)
# Funders by their eu-repo code, as the target names them (ROR id).
EUROPEAN_COMMISSION = {"id": "00k4n6c32", "name": "European Commission"}
_FUNDERS = {"EC": EUROPEAN_COMMISSION}


def eu_repo_grant(text: str) -> dict[str, Any] | None:
    """An OpenAIRE `info:eu-repo/grantAgreement/<funder>/<programme>/<project id>/
    [jurisdiction]/[name]/[acronym]` (percent-encoded: `PTDC%2FSAU%2F1234%2F2008`) as a funding
    entry (funder, award number and title); None when `text` is none or names no project.
    Dublin Core gives it as a dc:relation, DataCite kernel-3 as a Funder's nameIdentifier."""
    match = _GRANT.match(text)
    if match is None:
        return None
    code, _, number, _, name = (unquote(part or "").strip() for part in match.groups())
    if not number:
        return None
    funder = _FUNDERS.get(code.upper(), {"name": code})
    award: dict[str, Any] = {"number": number}
    if name:
        award["title"] = {"en": name}
    return {"funder": dict(funder), "award": award}


def citation(
    title: str | None,
    volume: str | None = None,
    issue: str | None = None,
    start_page: str | None = None,
    end_page: str | None = None,
    *more: str | None,
) -> dict[str, Any] | None:
    """Where the work appeared (journal or book, volume, issue, pages, then `more`: edition,
    conference, year) as a series-information description, the one place the target has for
    them (OpenAIRE's oaire:citation*, MARC's 773 host item); None when nothing is given."""
    parts = [title, volume and f"vol. {volume}", issue and f"no. {issue}"]
    parts.extend(more)
    if start_page or end_page:
        pages = f"pp. {start_page}–{end_page}" if start_page and end_page else None
        parts.append(pages or f"p. {start_page or end_page}")
    text = ", ".join(part for part in parts if part)
    return {"description": text, "type": {"id": "series-information"}} if text else None
