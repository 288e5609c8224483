"""The metadata formats the sample endpoint disseminates, and DataCite's OAI envelope.

`datacite` is a bare kernel-4 `<resource>`; `oai_datacite` wraps the same resource in the
DataCite OAI schema 1.1 envelope (`<oai_datacite><schemaVersion/><datacentreSymbol/>
<payload>…</payload></oai_datacite>`), as Zenodo and DataCite serve it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetadataFormat:
    """One row of ListMetadataFormats."""

    prefix: str
    schema: str
    namespace: str


KNOWN_FORMATS: dict[str, MetadataFormat] = {
    fmt.prefix: fmt
    for fmt in (
        MetadataFormat(
            "oai_dc",
            "http://www.openarchives.org/OAI/2.0/oai_dc.xsd",
            "http://www.openarchives.org/OAI/2.0/oai_dc/",
        ),
        MetadataFormat(
            "oai_datacite",
            "http://schema.datacite.org/oai/oai-1.1/oai.xsd",
            "http://schema.datacite.org/oai/oai-1.1/",
        ),
        MetadataFormat(
            "datacite",
            "http://schema.datacite.org/meta/kernel-4.5/metadata.xsd",
            "http://datacite.org/schema/kernel-4",
        ),
    )
}

DATACITE_NAMESPACE = KNOWN_FORMATS["datacite"].namespace
OAI_DATACITE_NAMESPACE = KNOWN_FORMATS["oai_datacite"].namespace


def oai_datacite_envelope(
    resource: bytes, *, datacentre_symbol: str = "OAIPIPE.SAMPLE", schema_version: str = "4.5"
) -> bytes:
    """Wrap a serialized DataCite `<resource>` (no XML declaration) for `oai_datacite`."""
    head = (
        f'<oai_datacite xmlns="{OAI_DATACITE_NAMESPACE}" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        f'xsi:schemaLocation="{OAI_DATACITE_NAMESPACE} {KNOWN_FORMATS["oai_datacite"].schema}">'
        f"<schemaVersion>{schema_version}</schemaVersion>"
        f"<datacentreSymbol>{datacentre_symbol}</datacentreSymbol><payload>"
    ).encode()
    return head + resource + b"</payload></oai_datacite>"
