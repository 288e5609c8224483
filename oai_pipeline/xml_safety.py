"""One hardened lxml parser configuration for every piece of XML that came from the network."""

from __future__ import annotations

import threading

from lxml import etree

# A page larger than this is refused rather than parsed (bounded document size).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024


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
        raise ValueError("document declares entities; refused")
    return root
