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
    """Parse strictly; raises etree.XMLSyntaxError or ValueError on anything suspicious."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ValueError(f"document of {len(data)} bytes exceeds {MAX_DOCUMENT_BYTES}")
    root = etree.fromstring(data, parser=safe_xml_parser())
    if root.getroottree().docinfo.internalDTD is not None and b"<!ENTITY" in data[:65536]:
        raise ValueError("document declares entities; refused")
    return root
