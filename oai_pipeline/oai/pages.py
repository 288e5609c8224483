"""Read one OAI-PMH response: cleaned, parsed once and strictly, split into records with lxml.

A body that is not a whole OAI-PMH document (truncated, not XML, an HTML error page sent
with status 200) raises :class:`UnusablePage`: the client retries it and never takes it for
the end of a list. When the envelope is sound but single records are broken, those records
become per-record errors and the rest of the page is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from lxml import etree
from sickle.models import ResumptionToken

from oai_pipeline.errors import RecordError
from oai_pipeline.oai.base_url import is_our_base_url
from oai_pipeline.oai.cleaning import clean_page, repair_references
from oai_pipeline.oai.types import (
    MAX_DATESTAMP_LENGTH,
    MAX_IDENTIFIER_LENGTH,
    HarvestedRecord,
    IdentifyInfo,
    OAISet,
)
from oai_pipeline.oai.windows import normalize_response_date
from oai_pipeline.xml_safety import (
    DeclaresEntities,
    over_parser_limit,
    parse_untrusted,
    safe_xml_parser,
)

OAI_NAMESPACE = "http://www.openarchives.org/OAI/2.0/"
_NS = "{" + OAI_NAMESPACE + "}"

Verb = Literal[
    "Identify", "ListRecords", "ListIdentifiers", "GetRecord", "ListSets", "ListMetadataFormats"
]
_ITEM_TAG = {
    "ListRecords": _NS + "record",
    "GetRecord": _NS + "record",
    "ListIdentifiers": _NS + "header",
}


class UnusablePage(Exception):
    """The body is not a complete OAI-PMH response; a failed request to retry.
    ``web_page``: it is an HTML page (a proxy's error page, or no OAI-PMH endpoint there).
    ``plain_text``: it is text that is no XML at all (JSON, "OK", a framework's error): a
    notice in a page's place, or, from a URL that has never answered OAI-PMH, no endpoint.
    ``whole``: it is a complete document of another kind (well-formed XML, a web page to its
    end), or one with a value beyond the parser's bounds, not one cut short: sent again
    alike, it is the source's answer, not a passing fault. ``final_if_repeated``: refused
    for what its bytes hold (entities declared, a value over the parser's bounds), which no
    wait changes: the same bytes at the next try are the source's answer, not retried on."""

    def __init__(
        self,
        message: str,
        *,
        web_page: bool = False,
        plain_text: bool = False,
        whole: bool = False,
        final_if_repeated: bool = False,
    ) -> None:
        super().__init__(message)
        self.web_page = web_page
        self.plain_text = plain_text
        self.whole = whole
        self.final_if_repeated = final_if_repeated


class ForeignNamespace(Exception):
    """A sound document whose OAI-PMH elements are in another namespace than OAI-PMH's (one
    misspelt, another protocol version's): what they hold cannot be read as OAI-PMH, and
    is not taken for nothing. The same every time it is asked for: not retried."""


# The error codes OAI-PMH 2.0 defines (section 3.6): the answers a request can get in place
# of the verb's, read in any case (`BadResumptionToken`). Any other (`serverBusy`, OpenSKOS's
# empty code for "Read timed out") is the source's own failure, not an answer.
OAI_ERROR_CODES = frozenset({
    "badArgument", "badResumptionToken", "badVerb", "cannotDisseminateFormat",
    "idDoesNotExist", "noRecordsMatch", "noMetadataFormats", "noSetHierarchy",
})  # fmt: skip
_ERROR_CODES = {code.lower(): code for code in OAI_ERROR_CODES}


@dataclass
class ParsedResponse:
    """What one response says: its errors, or its records / container and where the list goes on."""

    response_date: str
    errors: list[tuple[str, str]] = field(default_factory=list)
    records: list[HarvestedRecord] = field(default_factory=list)
    token: ResumptionToken | None = None
    container: etree._Element | None = None
    # OAI-PMH elements the source sent in no namespace, read as OAI-PMH's (see _claim)
    unqualified: list[str] = field(default_factory=list)
    # the arguments of the request the source says it answers (<request>'s attributes)
    answered: dict[str, str] = field(default_factory=dict)
    # something came before or after the XML, dropped (see _xml_amid_junk)
    junk_beside_xml: bool = False
    # an Identify read without its <description>s, which broke the page (see _without_descriptions)
    descriptions_dropped: bool = False

    @property
    def notice(self) -> str | None:
        """What to tell the operator of elements read in no namespace and of text dropped
        beside the XML (the same words for every page, to be said once); None: neither."""
        said = []
        if self.junk_beside_xml:
            said.append(
                "the source sends text before or after its XML (PHP's warnings or notices, "
                "printed in its responses): dropped, each page read from its XML alone (its "
                "responses are not well-formed XML; its operator may want to know)"
            )
        if self.descriptions_dropped:
            said.append(
                "the source's Identify holds a <description> that is not well-formed XML: "
                "read without its descriptions, which the harvest does not use (its operator "
                "may want to know)"
            )
        if self.unqualified:
            said.append(
                'the source sends OAI-PMH elements in no namespace (a <record xmlns="">, an '
                f"<OAI-PMH> without xmlns), not in OAI-PMH's ({OAI_NAMESPACE}): they are read "
                "as OAI-PMH's (its responses are not valid OAI-PMH; its operator may want to "
                "know)"
            )
        return "; ".join(said) or None

    @property
    def next_token(self) -> str | None:
        """The token naming the next page; None on the last page (empty or absent element)."""
        if self.token is None or not self.token.token:
            return None
        return self.token.token

    @property
    def cursor(self) -> int | None:
        return _int_or_none(self.token.cursor) if self.token else None

    @property
    def complete_list_size(self) -> int | None:
        return _int_or_none(self.token.complete_list_size) if self.token else None


# What the checkpoint (JSON, SQL BIGINT) holds of a count.
_MAX_COUNT = 2**63 - 1


def _int_or_none(value: str | None) -> int | None:
    """A cursor or completeListSize: a count, so one that is negative or beyond what the
    checkpoint can store (`completeListSize="1e30"` written out) is none at all."""
    try:
        number = int(value) if value not in (None, "") else None
    except ValueError:
        return None
    return number if number is not None and 0 <= number <= _MAX_COUNT else None


def parse_response(
    body: bytes,
    verb: Verb,
    charset: str | None = None,
    max_bytes: int | None = None,
    *,
    asked_at: str = "",
) -> ParsedResponse:
    """Clean, parse strictly once, and read the response to ``verb`` (``charset``: the HTTP
    Content-Type's, if any; ``max_bytes``: the largest document parsed whole; ``asked_at``:
    when the request was sent, `YYYY-MM-DDThh:mm:ssZ`, see _date_deletions)."""
    return _date_deletions(_parse(body, verb, charset, max_bytes), asked_at)


def _date_deletions(parsed: ParsedResponse, asked_at: str = "") -> ParsedResponse:
    """A deleted header without a datestamp (Zenodo's tombstones) is dated by the response's
    responseDate: a deletion needs no datestamp to be applied, and taken for an error, the
    source's deletion never was. A response without a responseDate dates it by when it was
    asked for (`asked_at`: the deletion was there by the answer); without that either, it
    stays MissingDatestamp, as a live record without one does (its datestamp decides when
    it changed)."""
    dated_by = parsed.response_date or asked_at
    for record in parsed.records:
        if not record.deleted or record.datestamp:
            continue
        if record.error is not None and record.error.type != "MissingDatestamp":
            continue
        if dated_by:
            record.datestamp, record.undated_deletion = dated_by, True
            record.error = None
        elif record.error is None:
            record.error = _missing_datestamp()
    return parsed


def _missing_datestamp() -> RecordError:
    return RecordError(
        type="MissingDatestamp",
        message="record header has no datestamp",
        location="header/datestamp",
    )


def _parse(
    body: bytes, verb: Verb, charset: str | None = None, max_bytes: int | None = None
) -> ParsedResponse:
    data = clean_page(body, charset)
    try:
        root = parse_untrusted(data, max_bytes)
    except (etree.XMLSyntaxError, ValueError) as exc:
        if isinstance(exc, DeclaresEntities) or _DECLARES_ENTITIES.match(data):
            raise UnusablePage(
                "the page declares XML entities (<!ENTITY …> in its DOCTYPE), refused unread: "
                "no document from the network may define its own (entity expansion, "
                "external files); the source's software must send its pages without them",
                whole=True,
                final_if_repeated=True,
            ) from exc
        xml = _xml_amid_junk(data)
        if xml is not None:
            parsed = _parse(data[xml], verb, charset, max_bytes)
            parsed.junk_beside_xml = True
            return parsed
        if _TEXT_START.match(data):  # a body cut short would start as XML does
            raise UnusablePage(
                f"not XML at all ({what_the_body_says(data)})", plain_text=True
            ) from exc
        repaired = repair_references(data) if isinstance(exc, etree.XMLSyntaxError) else data
        if repaired is not data:
            try:
                root = parse_untrusted(repaired, max_bytes)
            except (etree.XMLSyntaxError, ValueError):
                data = repaired  # broken records are isolated from the repaired page
            else:
                return _read_root(root, verb)
        if _HTML_START.match(data):
            raise UnusablePage(
                f"an HTML page, not OAI-PMH XML ({over_parser_limit(exc) or _one_line(exc)})",
                web_page=True,
                whole=_HTML_END.search(data) is not None,
            ) from exc
        if verb in ("ListRecords", "GetRecord"):
            return _parse_isolating_records(data, verb, exc)
        if verb == "Identify" and (parsed := _without_descriptions(data, max_bytes)) is not None:
            return parsed
        raise _unparsable_page(exc) from exc
    return _read_root(root, verb)


# From an Identify's first <description> (OAI-PMH's, unprefixed) to its </Identify>: the
# schema puts the descriptions last, and they hold what no harvest reads (oai-identifier,
# eprints, friends, branding), from schemas of their own that a source fills in by hand.
_DESCRIPTIONS = re.compile(rb"<description[\s>].*(?=</Identify\s*>)", re.DOTALL)


def _without_descriptions(data: bytes, max_bytes: int | None) -> ParsedResponse | None:
    """An Identify that parses without its descriptions (one not well-formed: HTML in an
    eprints comment, a cut `<friends>` list), which made a sound source's Identify fail at
    every try: before, never identified, it could not be harvested at all. None if it
    has none, or does not parse without them either."""
    stripped, dropped = _DESCRIPTIONS.subn(b"", data, count=1)
    if not dropped:
        return None
    try:
        root = parse_untrusted(stripped, max_bytes)
    except (etree.XMLSyntaxError, ValueError):
        return None
    parsed = _read_root(root, "Identify")
    parsed.descriptions_dropped = True
    return parsed


def _unparsable_page(exc: Exception) -> UnusablePage:
    """The page the parser refused: not well-formed, or over one of the parser's bounds,
    said in the operator's words (not libxml2's "try XML_PARSE_HUGE") and whole, as the
    source sends it so at every attempt (see UnusablePage)."""
    limit = over_parser_limit(exc)
    if limit is None:
        return UnusablePage(f"not well-formed XML: {_one_line(exc)}")
    line, column = getattr(exc, "position", (0, 0))
    return UnusablePage(
        f"{limit} in the page (line {line}, column {column})", whole=True, final_if_repeated=True
    )


def _one_line(exc: Exception) -> str:
    """The parser's complaint on one line: libxml2 ends some with a line break ("Buffer size
    limit exceeded, try XML_PARSE_HUGE\\n, line 1, ..."), which split the run's error."""
    return " ".join(str(exc).split())


# A web page: `<!DOCTYPE html>` or `<html>` first (after an XML declaration or comments).
# Said so, not as the parser's complaint about its <br> or its attributes, which hid that
# the answer was a web page (a proxy's error page, or a base URL that is no OAI-PMH
# endpoint).
_HTML_START = re.compile(
    rb"\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!DOCTYPE\s+html|html[\s>])",
    re.IGNORECASE | re.DOTALL,
)
# A web page to its end (HTML need not be well-formed XML to be whole).
_HTML_END = re.compile(rb"</html\s*>\s*\Z", re.IGNORECASE)
# A DOCTYPE declaring entities: refused whether the parser got through them (DeclaresEntities)
# or stopped inside (libxml2 measures their expansion even when it expands none).
_DECLARES_ENTITIES = re.compile(
    rb"\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<!DOCTYPE\s[^\[>]*\[[^\]]*?<!ENTITY\s",
    re.DOTALL,
)
# Where a document's XML begins: its declaration, or its root element when it has none.
_XML_BEGINS = re.compile(rb"<\?xml\s+version\s*=|<OAI-PMH[\s>]")
_XML_ENDS = b"</OAI-PMH>"
_JUNK_LOOKED_AT = 65_536  # bytes before the XML looked through for it


def _xml_amid_junk(data: bytes) -> slice | None:
    """The XML of a body that sends something else before or after it: PHP's warnings and
    notices, as text (`Deprecated: ... on line 12`) or as markup (`<br /><b>Warning</b>`),
    printed where the script met them (OJS and other PHP endpoints with display_errors on).
    None for a body of XML alone (its fault is elsewhere) or a web page."""
    start = 0
    if not (data.startswith((b"<?", b"<!--")) or _XML_BEGINS.match(data)):
        if _HTML_START.match(data):
            return None
        found = _XML_BEGINS.search(data, 1, _JUNK_LOOKED_AT)
        if found is None:
            return None
        start = found.start()
    closing = data.rfind(_XML_ENDS, start)
    end = len(data) if closing < 0 else closing + len(_XML_ENDS)
    after = data[end:].lstrip()
    if not after or after.startswith((b"<!--", b"<?")):  # XML allows these after the root
        end = len(data)
    return None if start == 0 and end == len(data) else slice(start, end)


# Text no XML parser would start on: a printable character other than `<` first (JSON, plain
# text). Bytes of another kind (a NUL of UTF-16, gzip's magic) are left to the parser.
_TEXT_START = re.compile(rb"\s*[!-;=-~]")


# What an error response that is no OAI-PMH answer says (see what_the_body_says): an OAI
# error element (of a body cut short), a web page's title or first heading.
_OAI_ERROR_START = re.compile(rb"<(?:[\w.-]+:)?error\s+code\s*=\s*[\"']([^\"']*)[\"'][^>]*>([^<]*)")
_PAGE_TITLE = re.compile(rb"<(title|h1)[^>]*>(.*?)</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(rb"<[^>]*>")
# how much of a body is looked at, and how much of its text is quoted
_SAYS_LOOKED_AT, _SAYS_QUOTED = 64 * 1024, 120


def what_the_body_says(body: bytes) -> str:
    """What an HTTP error's body that is no OAI-PMH answer says, for the run's error line:
    the code and text of an OAI-PMH error cut short, a web page's title, else the start of
    its text (plain "Bad Request", JSON, another XML's). The parser's complaint about it
    ("Start tag expected, '<' not found") told the operator nothing of what the source said."""
    head = body[:_SAYS_LOOKED_AT]
    error = _OAI_ERROR_START.search(head)
    if error is not None:
        code, text = (_quoted(part) for part in error.groups())
        return (
            f"an OAI-PMH error cut short: {code}: {text!r}"
            if text
            else f"an OAI-PMH error cut short: {code}"
        )
    title = _PAGE_TITLE.search(head) if _HTML_START.match(head) else None
    if title is not None and (text := _quoted(_TAG.sub(b" ", title.group(2)))):
        return f"a web page titled {text!r}"
    text = _quoted(_TAG.sub(b" ", head))
    return f"its body: {text!r}" if text else "an empty body"


def _quoted(raw: bytes) -> str:
    """Text of a body, on one line, cut to what an error line quotes."""
    text = " ".join(raw.decode("utf-8", "replace").split())
    return text if len(text) <= _SAYS_QUOTED else text[:_SAYS_QUOTED] + "..."


# OAI-PMH's elements by the element they belong in (the protocol's schema, OAI-PMH.xsd): in
# there, an element of one of these names in no namespace can only be the source's OAI-PMH
# element that lost its namespace (a DOM built with createElement, not createElementNS,
# serialised as `<record xmlns="">`; a template without the xmlns). What a <metadata>,
# <about> or <description> holds is another format's, in no namespace or any: not looked at.
_VERBS = (
    "Identify", "ListRecords", "ListIdentifiers", "GetRecord", "ListSets", "ListMetadataFormats"
)  # fmt: skip
_STRUCTURE: dict[str, frozenset[str]] = {
    name: frozenset(children.split())
    for name, children in {
        "OAI-PMH": "responseDate request error " + " ".join(_VERBS),
        "Identify": "repositoryName baseURL protocolVersion adminEmail earliestDatestamp "
        "deletedRecord granularity compression description",
        "ListRecords": "record resumptionToken",
        "GetRecord": "record",
        "ListIdentifiers": "header resumptionToken",
        "ListSets": "set resumptionToken",
        "ListMetadataFormats": "metadataFormat",
        "record": "header metadata about",
        "header": "identifier datestamp setSpec",
        "set": "setSpec setName setDescription",
        "metadataFormat": "metadataPrefix schema metadataNamespace",
    }.items()
}
# What a list's element lists: in a foreign namespace, what it says would be lost unseen
# (its records, or the token of the rest of the list).
_LISTED = frozenset({"record", "header", "set", "metadataFormat", "resumptionToken"})


def _claim(element: etree._Element, unqualified: list[str], *, whole: bool) -> None:
    """Put the OAI-PMH elements under ``element`` (one of OAI-PMH's) that are in no
    namespace into OAI-PMH's, noting their names in ``unqualified``; raise ForeignNamespace
    for an item or token of a list in another namespace. ``whole``: look through all of the
    structure under it (an element claimed: what is under it lost its namespace with it),
    else the root's children and the items of its list only (a page as the protocol wants
    it costs a look at each item, no more)."""
    parent = _local(element.tag)
    allowed = _STRUCTURE.get(parent)
    if allowed is None:
        return
    descend = whole or parent == "OAI-PMH"
    for child in element.iterchildren(etree.Element):
        tag: str = child.tag
        if tag.startswith(_NS):  # as it should be: the usual case, kept cheap
            if descend:
                _claim(child, unqualified, whole=whole)
            continue
        namespace, _, name = tag[1:].rpartition("}") if tag[0] == "{" else ("", "", tag)
        if name not in allowed:
            continue
        if not namespace:
            child.tag = _NS + name
            unqualified.append(name)
            _claim(child, unqualified, whole=True)
        elif parent in _VERBS and name in _LISTED:
            raise ForeignNamespace(
                f"<{parent}> holds <{name}> in the namespace {namespace!r}, not in "
                f"OAI-PMH's ({OAI_NAMESPACE}): what it says cannot be read as OAI-PMH (the "
                "source's responses are malformed)"
            )


def _read_root(root: etree._Element, verb: Verb) -> ParsedResponse:
    unqualified: list[str] = []
    root_name = etree.QName(root)
    if root_name.localname == "OAI-PMH" and root_name.namespace is None:
        root.tag = _NS + "OAI-PMH"  # a document without the xmlns: read as OAI-PMH
        unqualified.append("OAI-PMH")
    elif root_name.localname == "OAI-PMH" and root_name.namespace != OAI_NAMESPACE:
        raise ForeignNamespace(
            f"root element <OAI-PMH> in the namespace {root_name.namespace!r}, not in "
            f"OAI-PMH's ({OAI_NAMESPACE}): the response cannot be read as OAI-PMH"
        )
    if root.tag != _NS + "OAI-PMH":
        raise UnusablePage(
            f"not an OAI-PMH response (root element {_local(root.tag)!r})",
            web_page=_local(root.tag).lower() == "html",
            whole=True,
        )
    _claim(root, unqualified, whole=bool(unqualified))
    request = root.find(_NS + "request")
    parsed = ParsedResponse(
        response_date=normalize_response_date(_child_text(root, _NS + "responseDate")),
        unqualified=unqualified,
        answered={} if request is None else {str(k): str(v) for k, v in request.attrib.items()},
    )
    for error in root.iterfind(_NS + "error"):
        code = (error.get("code") or "").strip()
        text = " ".join((_text(error) or "").split())
        parsed.errors.append((_ERROR_CODES.get(code.lower(), code or "unknown"), text))
    container = root.find(_NS + verb)
    item_tag = _ITEM_TAG.get(verb)
    if parsed.errors:
        if container is not None and item_tag is not None and container.find(item_tag) is not None:
            raise _error_beside_records(parsed, verb)
        return parsed
    if container is None:
        raise UnusablePage(f"OAI-PMH response without <{verb}> or <error>", whole=True)
    parsed.container = container
    if item_tag is not None:
        with_xml = verb != "ListIdentifiers"
        parsed.records = [
            _read_item(item, with_xml, unqualified) for item in container.iterchildren(item_tag)
        ]
    parsed.token = _resumption_token(container)
    return parsed


def _error_beside_records(
    parsed: ParsedResponse, verb: Verb, *, whole: bool = True
) -> UnusablePage:
    """A response with both <error> and records contradicts itself: taken as the error,
    noRecordsMatch ended the list and its records were dropped without a word."""
    codes = ", ".join(code for code, _ in parsed.errors)
    return UnusablePage(
        f"OAI-PMH response with both <error> ({codes}) and records in <{verb}>: it "
        "contradicts itself",
        whole=whole,
    )


def _local(tag: object) -> str:
    return str(tag).rsplit("}", 1)[-1]


def _resumption_token(container: etree._Element) -> ResumptionToken | None:
    element = container.find(_NS + "resumptionToken")
    if element is None:
        return None
    return ResumptionToken(
        token=(_text(element) or "").strip(),
        cursor=element.get("cursor"),
        complete_list_size=element.get("completeListSize"),
        expiration_date=element.get("expirationDate"),
    )


_HEADER_TAG = _NS + "header"
_IDENTIFIER_TAG = _NS + "identifier"
_DATESTAMP_TAG = _NS + "datestamp"
_SET_SPEC_TAG = _NS + "setSpec"
_METADATA_TAG = _NS + "metadata"


def _text(element: etree._Element) -> str | None:
    """The element's text, all of it: ``.text`` ends at a comment or processing instruction
    inside (XML allows them anywhere), which cut `oai:x:<!-- -->1` to `oai:x:`."""
    if len(element) == 0:  # the usual case: nothing inside, kept cheap
        return element.text
    return "".join(element.itertext())


def _child_text(parent: etree._Element, tag: str) -> str | None:
    """The first ``tag`` child's text, all of it (see _text); None: there is none.
    ``findtext`` stops at a comment too: a responseDate cut so moved the next window."""
    child = parent.find(tag)
    return None if child is None else _text(child) or ""


def _header_fields(header: etree._Element) -> tuple[str | None, str | None, bool, list[str]]:
    """What sickle's ``Header`` reads from an OAI <header> (first identifier, first datestamp,
    every setSpec, status), in one pass over the children instead of three searches."""
    identifier: str | None = None
    datestamp: str | None = None
    has_identifier = has_datestamp = False
    set_specs: list[str] = []
    for child in header.iterchildren(_IDENTIFIER_TAG, _DATESTAMP_TAG, _SET_SPEC_TAG):
        tag = child.tag
        if tag == _SET_SPEC_TAG:
            spec = _text(child)
            if spec and spec.strip():
                set_specs.append(spec.strip())
        elif tag == _IDENTIFIER_TAG:
            if not has_identifier:
                identifier, has_identifier = _text(child), True
        elif not has_datestamp:
            datestamp, has_datestamp = _text(child), True
    return identifier, datestamp, is_deleted_status(header.get("status")), set_specs


def is_deleted_status(status: str | None) -> bool:
    """Whether a header's status attribute says the record is deleted: `Deleted`,
    ` deleted `, as some sources write it (taken for live, the deletion was never applied)."""
    return (status or "").strip().lower() == "deleted"


def _serialize(element: etree._Element) -> bytes:
    """The element alone as UTF-8 (not ASCII with character references), namespaces kept."""
    return etree.tostring(element, encoding="UTF-8", xml_declaration=False, with_tail=False)


def _cut_to_size(record: HarvestedRecord) -> RecordError | None:
    """The record's error for a header value longer than the state store keeps (the first
    one), every such value cut to that size: PostgreSQL refuses a longer one, and with it
    the whole page, which no retry changes."""
    errors = []
    for name, limit in (
        ("identifier", MAX_IDENTIFIER_LENGTH),
        ("datestamp", MAX_DATESTAMP_LENGTH),
    ):
        value: str = getattr(record, name)
        if len(value) > limit:
            setattr(record, name, value[:limit])
            errors.append(
                RecordError(
                    type=f"Invalid{name.capitalize()}",
                    message=f"{name} longer than {limit} characters: {value[:80]!r}",
                    location=f"header/{name}",
                )
            )
    return errors[0] if errors else None


def _harvested(item: etree._Element, with_xml: bool) -> HarvestedRecord:
    """One <record> (or a ListIdentifiers <header>) as a HarvestedRecord; problems become .error."""
    header_element = item if item.tag == _HEADER_TAG else item.find(_HEADER_TAG)
    if header_element is None:
        return HarvestedRecord(
            identifier="",
            datestamp="",
            deleted=False,
            xml=_serialize(item) if with_xml else None,
            error=RecordError(type="MissingHeader", message="record has no <header>"),
        )
    identifier, datestamp, deleted, set_specs = _header_fields(header_element)
    record = HarvestedRecord(
        identifier=(identifier or "").strip(),
        datestamp=(datestamp or "").strip(),
        deleted=deleted,
        set_specs=set_specs,
        xml=_serialize(item) if with_xml else None,
    )
    too_long = _cut_to_size(record)
    if not record.identifier:
        record.error = RecordError(
            type="MissingIdentifier",
            message="record header has no identifier",
            location="header/identifier",
        )
    elif too_long is not None:
        record.error = too_long
    elif not record.datestamp:
        record.error = _missing_datestamp()
    elif with_xml and not record.deleted:
        metadata = item.find(_METADATA_TAG)
        # Comments and processing instructions are not metadata: an element must be there.
        root = None if metadata is None else next(metadata.iterchildren(etree.Element), None)
        if root is None:
            record.error = RecordError(
                type="MissingMetadata",
                message="record is not deleted but has no metadata",
                location="metadata",
            )
        else:
            record.metadata_namespace = etree.QName(root).namespace
    return record


# The errors of a record whose header (or what is in it) or metadata may have lost its
# namespace.
_LOST_NAMESPACE_ERRORS = frozenset(
    {"MissingHeader", "MissingIdentifier", "MissingDatestamp", "MissingMetadata"}
)


def _read_item(item: etree._Element, with_xml: bool, unqualified: list[str]) -> HarvestedRecord:
    """One item of a list. Of a page in OAI-PMH's namespace only the items are looked at for
    elements in no namespace (see _claim): an item whose header or metadata lacks something
    is looked through and read again, as its header (a `<header xmlns="">`), identifier or
    <metadata> may have lost the namespace inside it. A sound record costs nothing more."""
    record = _harvested(item, with_xml)
    if record.error is None or record.error.type not in _LOST_NAMESPACE_ERRORS:
        return record
    claimed = len(unqualified)
    _claim(item, unqualified, whole=True)
    return record if len(unqualified) == claimed else _harvested(item, with_xml)


# ---- fallback for a page whose envelope is sound but some records are not ----------------

_RECORD_TAG = re.compile(r"<(/?)((?:[A-Za-z_][\w.-]*:)?)record(?=[\s/>])[^>]*?(/?)>")
_HEADER_CHUNK = re.compile(r"<((?:[A-Za-z_][\w.-]*:)?)header(?=[\s>])[^>]*>.*?</\1header>", re.S)
_IDENTIFIER = re.compile(r"<(?:[A-Za-z_][\w.-]*:)?identifier>\s*([^<]*?)\s*</", re.S)
_CONTAINER_START = re.compile(r"<(?:[A-Za-z_][\w.-]*:)?(?:ListRecords|GetRecord)(?=[\s>])[^>]*>")


def _record_spans(text: str) -> list[tuple[int, int]]:
    """Top-level <record>...</record> spans inside the list element, nesting-aware
    (MARCXML puts its own <record> inside the metadata)."""
    container = _CONTAINER_START.search(text)
    if container is None:
        return []
    spans: list[tuple[int, int]] = []
    depth, start, prefix = 0, 0, None
    for match in _RECORD_TAG.finditer(text, container.end()):
        closing, tag_prefix, self_closing = match.groups()
        if self_closing:
            continue
        if prefix is None:
            prefix = tag_prefix
        if tag_prefix != prefix:
            continue
        if not closing:
            if depth == 0:
                start = match.start()
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((start, match.end()))
    return spans if depth == 0 else []


def _namespace_wrapper(element: etree._Element, verb: Verb) -> tuple[bytes, bytes]:
    """An element to parse one record of ``element`` (the list) in: the list's namespace
    declarations, and its name in OAI-PMH's namespace (a prefix of its own)."""
    declarations = "".join(
        f' xmlns="{uri}"' if prefix is None else f' xmlns:{prefix}="{uri}"'
        for prefix, uri in element.nsmap.items()
    )
    tag = f'_wrapper_oai:{verb} xmlns:_wrapper_oai="{OAI_NAMESPACE}"'
    return f"<{tag}{declarations}>".encode(), f"</_wrapper_oai:{verb}>".encode()


def _parse_isolating_records(data: bytes, verb: Verb, page_error: Exception) -> ParsedResponse:
    text = data.decode("utf-8", "replace")
    spans = _record_spans(text)
    if not spans:
        raise _unparsable_page(page_error) from page_error
    pieces, last = [], 0
    for start, end in spans:
        pieces.append(text[last:start])
        last = end
    pieces.append(text[last:])
    try:
        root = parse_untrusted("".join(pieces).encode("utf-8"))
    except (etree.XMLSyntaxError, ValueError) as exc:
        # the page without its records over a bound of the parser: that, the same each try
        raise _unparsable_page(page_error if over_parser_limit(exc) is None else exc) from exc
    try:
        parsed = _read_root(root, verb)
    except UnusablePage as exc:
        exc.whole = False  # of the page without its records, which was not well-formed
        raise
    if parsed.errors:
        raise _error_beside_records(parsed, verb, whole=False)
    if parsed.container is None:
        return parsed
    opening, closing = _namespace_wrapper(parsed.container, verb)
    parser = safe_xml_parser()
    for number, (start, end) in enumerate(spans, 1):
        chunk = text[start:end].encode("utf-8")
        try:
            wrapper = etree.fromstring(opening + chunk + closing, parser=parser)
            # the wrapper stands for the list: its record is looked at as the list's are
            _claim(wrapper, parsed.unqualified, whole=False)
            record = _read_item(wrapper[0], True, parsed.unqualified)
        except etree.XMLSyntaxError as exc:
            record = _broken_record(text[start:end], opening, closing, number, exc)
        parsed.records.append(record)
    return parsed


def _broken_record(
    chunk: str, opening: bytes, closing: bytes, number: int, exc: etree.XMLSyntaxError
) -> HarvestedRecord:
    """A record that does not parse: its header if that survives, else its identifier."""
    identifier, datestamp, deleted, set_specs = "", "", False, []
    header_match = _HEADER_CHUNK.search(chunk)
    if header_match is not None:
        try:
            header_root = etree.fromstring(
                opening + header_match.group(0).encode("utf-8") + closing,
                parser=safe_xml_parser(),
            )
            header = header_root[0]
            if header.tag == "header":  # lost its namespace, as its page's may (see _claim)
                header.tag = _HEADER_TAG
                _claim(header, [], whole=True)
            found_identifier, found_datestamp, deleted, set_specs = _header_fields(header)
            identifier = (found_identifier or "").strip()
            datestamp = (found_datestamp or "").strip()
        except etree.XMLSyntaxError:
            pass
    if not identifier:
        found = _IDENTIFIER.search(chunk)
        identifier = found.group(1) if found else ""
    record = HarvestedRecord(identifier, datestamp, deleted, set_specs, xml=None)
    record.error = _cut_to_size(record)
    # The header is the truth: a deleted record needs no metadata, broken or not.
    if record.error is None and not deleted:
        limit = over_parser_limit(exc)
        record.error = RecordError(
            type="MalformedRecord" if limit is None else "OverParserLimit",
            message=f"record XML is not well-formed: {_one_line(exc)}"
            if limit is None
            else f"record holds {limit}",
            location=f"record {number} of the page",
        )
    return record


# ---- Identify and ListSets ----------------------------------------------------------------


def read_identify(parsed: ParsedResponse, requested_url: str) -> IdentifyInfo:
    """Identify as the pipeline needs it; a missing granularity is inferred from the earliest
    datestamp, an unknown deletedRecord is taken as "no" (the cautious reading). Of several
    baseURLs (a source behind two names lists both), the one that is ``requested_url`` if
    any: the first alone made a source listing ours second look moved elsewhere."""
    container = parsed.container
    if container is None:
        raise UnusablePage("Identify response without <Identify>")

    def text(name: str) -> str:
        return (_child_text(container, _NS + name) or "").strip()

    earliest = text("earliestDatestamp")
    granularity_text = text("granularity")
    if granularity_text:
        granularity = "seconds" if "hh" in granularity_text.lower() else "day"
    else:
        granularity = "seconds" if "T" in earliest else "day"
    deleted_record = text("deletedRecord").lower()  # some write `Persistent`
    if deleted_record not in ("no", "transient", "persistent"):
        deleted_record = "no"
    declared = [
        url
        for element in container.iterchildren(_NS + "baseURL")
        if (url := (_text(element) or "").strip())
    ]
    base_url = next(
        (url for url in declared if is_our_base_url(requested_url, url)),
        declared[0] if declared else requested_url,
    )
    admin_emails = tuple(
        email
        for element in container.iterchildren(_NS + "adminEmail")
        if (email := (_text(element) or "").strip())
    )
    return IdentifyInfo(
        admin_emails=admin_emails,
        repository_name=text("repositoryName"),
        base_url=base_url,
        granularity=granularity,
        earliest_datestamp=earliest,
        deleted_record=deleted_record,  # type: ignore[arg-type]
        response_date=parsed.response_date,
    )


def read_sets(parsed: ParsedResponse) -> list[OAISet]:
    if parsed.container is None:
        return []
    return [
        OAISet(
            spec=(_child_text(element, _NS + "setSpec") or "").strip(),
            name=(_child_text(element, _NS + "setName") or "").strip(),
        )
        for element in parsed.container.iterchildren(_NS + "set")
    ]


def read_metadata_prefixes(parsed: ParsedResponse) -> list[str]:
    if parsed.container is None:
        return []
    return [
        (_child_text(element, _NS + "metadataPrefix") or "").strip()
        for element in parsed.container.iterchildren(_NS + "metadataFormat")
    ]
