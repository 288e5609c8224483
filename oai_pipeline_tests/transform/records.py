"""Test helpers: sample records as the harvester stores them (one OAI <record> element each)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lxml import etree

from oai_pipeline.transform.base import TransformItem
from oai_pipeline.transform.oai_import import OAIImportTransformer

SAMPLES = Path(__file__).parent / "samples"
OAI = "http://www.openarchives.org/OAI/2.0/"
DATACITE_SAMPLES = sorted(path.name for path in SAMPLES.glob("datacite-example-*.xml"))
ZENODO_PAGES = [
    "zenodo-GetRecord-datacite.xml",
    "zenodo-GetRecord-oai_dc.xml",
    "zenodo-ListRecords-oai_dc-page1.xml",
    "zenodo-ListRecords-oai_dc-resumed-with-deleted.xml",
]


def wrap_metadata(
    metadata: bytes | str,
    *,
    identifier: str = "oai:example.org:1",
    set_specs: tuple[str, ...] = (),
    deleted: bool = False,
) -> bytes:
    """A minimal OAI <record> holding `metadata` (its XML declaration and BOM removed)."""
    if isinstance(metadata, str):
        metadata = metadata.encode()
    body = re.sub(rb"^<\?xml[^>]*\?>", b"", metadata.lstrip(b"\xef\xbb\xbf").strip())
    specs = "".join(f"<setSpec>{spec}</setSpec>" for spec in set_specs)
    status = ' status="deleted"' if deleted else ""
    return (
        (
            f'<record xmlns="{OAI}"><header{status}><identifier>{identifier}</identifier>'
            f"<datestamp>2024-01-01T00:00:00Z</datestamp>{specs}</header><metadata>"
        ).encode()
        + body
        + b"</metadata></record>"
    )


def datacite_item(name: str, **kwargs: Any) -> TransformItem:
    xml = wrap_metadata((SAMPLES / name).read_bytes(), identifier=f"oai:test:{name}", **kwargs)
    return TransformItem(
        identifier=f"oai:test:{name}", datestamp="2024-01-01", set_specs=[], xml=xml
    )


def page_items(name: str, folder: Path = SAMPLES) -> list[TransformItem]:
    """Every <record> of a recorded OAI-PMH response, serialized as the harvester stores it."""
    root = etree.fromstring((folder / name).read_bytes())
    items = []
    for record in root.iter(f"{{{OAI}}}record"):
        header = record.find(f"{{{OAI}}}header")
        items.append(
            TransformItem(
                identifier=header.findtext(f"{{{OAI}}}identifier"),
                datestamp=header.findtext(f"{{{OAI}}}datestamp"),
                set_specs=[spec.text for spec in header.iterfind(f"{{{OAI}}}setSpec")],
                xml=None if header.get("status") == "deleted" else etree.tostring(record),
            )
        )
    return items


def transform(items: list[TransformItem], **options: Any) -> list[TransformItem]:
    transformer = OAIImportTransformer(OAIImportTransformer.Options(**options))
    transformer.transform(items)
    return items


def transform_one(item: TransformItem, **options: Any) -> TransformItem:
    return transform([item], **options)[0]


def transformed_metadata(item: TransformItem) -> dict[str, Any]:
    transform_one(item)
    assert item.error is None, item.error
    assert item.data is not None
    return item.data["metadata"]


def personal(family: str, given: str | None = None) -> dict[str, Any]:
    """A person as the target stores one with no identifier: named `Family, Given`, or by the
    family name alone."""
    person: dict[str, Any] = {"type": "personal", "family_name": family, "identifiers": []}
    if given is not None:
        person["given_name"] = given
    person["name"] = f"{family}, {given}" if given else family
    return person
