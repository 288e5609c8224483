"""One hardened lxml parser configuration for every piece of XML that came from the network."""

from __future__ import annotations

import re
import threading

from lxml import etree

# A page larger than this is refused rather than parsed (bounded document size).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024

# libxml2's bounds without XML_PARSE_HUGE (huge_tree=False below): the longest text,
# attribute value, CDATA section, comment or processing instruction, and the deepest nesting.
MAX_VALUE_BYTES = 10_000_000
MAX_DEPTH = 256

# How libxml2 says it met one of those bounds, from 2.9 (`xmlSAX2Characters: huge text
# node`, `AttValue length too long`) to 2.14 (`Resource limit exceeded: ...`).
_OVER_VALUE_LIMIT = re.compile(
    r"XML_PARSE_HUGE|huge text node|Text node too long|AttValue length too long"
    r"|too big found|Resource limit exceeded",
    re.IGNORECASE,
)
_OVER_DEPTH_LIMIT = re.compile(r"Excessive depth|Maximum depth", re.IGNORECASE)


def safe_xml_parser(*, recover: bool = False) -> etree.XMLParser:
    """No entity expansion, no DTD loading, no network, no huge trees."""
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_blank_text=False,
        recover=recover,
    )


_LOCAL = threading.local()


def _strict_parser() -> etree.XMLParser:
    """This thread's strict parser, made once: building a parser costs about as much as parsing
    a small record, and an lxml parser must not be used by two threads at once."""
    parser = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = _LOCAL.parser = safe_xml_parser()
    return parser


class DeclaresEntities(ValueError):
    """A document that declares entities (`<!ENTITY …>` in its DOCTYPE), refused unread, as
    defusedxml does: no XML from the network defines its own (billion laughs, external
    files). Its source sends it so at every request."""


def parse_untrusted(data: bytes, max_bytes: int | None = None) -> etree._Element:
    """Parse strictly; raises etree.XMLSyntaxError or ValueError on anything suspicious.

    Entities are never expanded by the parser; a document that declares any (billion laughs,
    external entities) is refused outright, wherever in its DTD the declaration hides.
    """
    limit = MAX_DOCUMENT_BYTES if max_bytes is None else max_bytes
    if len(data) > limit:
        raise ValueError(f"document of {len(data)} bytes exceeds {limit}")
    root = etree.fromstring(data, parser=_strict_parser())
    dtd = root.getroottree().docinfo.internalDTD
    if dtd is not None and next(dtd.iterentities(), None) is not None:
        raise DeclaresEntities("document declares entities; refused")
    return root


def over_parser_limit(error: BaseException) -> str | None:
    """What the parser refused, in the operator's words, when it was one of its bounds (a
    value over 10 MB, elements nested over 256 deep), not broken XML; None otherwise.
    libxml2 says "Buffer size limit exceeded, try XML_PARSE_HUGE": a hint to a programmer,
    meaningless to an operator, and the same at every attempt."""
    if not isinstance(error, etree.XMLSyntaxError):
        return None
    message = str(error)
    if _OVER_DEPTH_LIMIT.search(message):
        return f"elements nested deeper than the parser's limit of {MAX_DEPTH} levels"
    if _OVER_VALUE_LIMIT.search(message):
        return (
            "a value (text or attribute) larger than the parser's limit of "
            f"{MAX_VALUE_BYTES // 1_000_000} MB"
        )
    return None
