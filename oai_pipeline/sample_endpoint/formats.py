"""The metadata formats the sample endpoint disseminates, and DataCite's OAI envelope.

`datacite` is a bare kernel-4 `<resource>`; `oai_datacite` wraps the same resource in the
DataCite OAI schema 1.1 envelope (`<oai_datacite><schemaVersion/><datacentreSymbol/>
<payload>…</payload></oai_datacite>`), as Zenodo and DataCite serve it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache


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


@lru_cache(maxsize=16)
def _envelope_head(datacentre_symbol: str, schema_version: str) -> bytes:
    return (
        f'<oai_datacite xmlns="{OAI_DATACITE_NAMESPACE}" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        f'xsi:schemaLocation="{OAI_DATACITE_NAMESPACE} {KNOWN_FORMATS["oai_datacite"].schema}">'
        f"<schemaVersion>{schema_version}</schemaVersion>"
        f"<datacentreSymbol>{datacentre_symbol}</datacentreSymbol><payload>"
    ).encode()


def oai_datacite_envelope(
    resource: bytes, *, datacentre_symbol: str = "OAIPIPE.SAMPLE", schema_version: str = "4.5"
) -> bytes:
    """Wrap a serialized DataCite `<resource>` (no XML declaration) for `oai_datacite`."""
    return (
        _envelope_head(datacentre_symbol, schema_version) + resource + b"</payload></oai_datacite>"
    )


class DataCiteMetadata(Mapping[str, bytes]):
    """`datacite` (the bare resource) and `oai_datacite` (it, enveloped), stored once.

    A read-only mapping like `EndpointRecord.metadata`'s dict; the envelope is built when
    asked for, which halves the memory of a generated million-record source.
    """

    __slots__ = ("resource",)
    _PREFIXES = ("oai_datacite", "datacite")

    def __init__(self, resource: bytes) -> None:
        self.resource = resource

    def __getitem__(self, prefix: str) -> bytes:
        if prefix == "datacite":
            return self.resource
        if prefix == "oai_datacite":
            return oai_datacite_envelope(self.resource)
        raise KeyError(prefix)

    def __contains__(self, prefix: object) -> bool:
        return prefix in self._PREFIXES

    def __iter__(self) -> Iterator[str]:
        return iter(self._PREFIXES)

    def __len__(self) -> int:
        return len(self._PREFIXES)

    def __repr__(self) -> str:
        return f"DataCiteMetadata(<{len(self.resource)} bytes>)"
