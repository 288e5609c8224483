"""One hardened lxml parser configuration for every piece of XML that came from the network."""

from __future__ import annotations

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


def parse_untrusted(data: bytes) -> etree._Element:
    """Parse strictly; raises etree.XMLSyntaxError or ValueError on anything suspicious.

    Entities are never expanded by the parser; a document that declares any (billion laughs,
    external entities) is refused outright, wherever in its DTD the declaration hides.
    """
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ValueError(f"document of {len(data)} bytes exceeds {MAX_DOCUMENT_BYTES}")
    root = etree.fromstring(data, parser=safe_xml_parser())
    dtd = root.getroottree().docinfo.internalDTD
    if dtd is not None and next(dtd.iterentities(), None) is not None:
        raise ValueError("document declares entities; refused")
    return root
