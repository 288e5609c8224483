"""Every real record in the samples transforms without an error into a valid RDMRecord."""

from __future__ import annotations

import pytest
from lxml import etree

from oai_pipeline.transform.rdm_record import RDMRecord

from .records import (
    DATACITE_SAMPLES,
    OAI,
    SAMPLES,
    ZENODO_PAGES,
    datacite_item,
    page_items,
    transform,
)


@pytest.mark.parametrize("name", DATACITE_SAMPLES)
def test_datacite_schema_example_transforms(name: str) -> None:
    [item] = transform([datacite_item(name)])
    assert item.error is None, item.error
    record = RDMRecord.model_validate(item.data)
    assert record.metadata.title
    assert record.metadata.creators
    assert item.pid == record.pids.doi.identifier == record.pids.doi.identifier.lower()


@pytest.mark.parametrize("name", ZENODO_PAGES)
def test_zenodo_records_transform(name: str) -> None:
    items = transform(page_items(name))
    live = [item for item in items if item.xml is not None]
    assert live
    for item in live:
        assert item.error is None, (item.identifier, item.error)
        assert item.data is not None
        RDMRecord.model_validate(item.data)
        number = item.identifier.rsplit(":", 1)[-1]
        assert item.pid == f"10.5281/zenodo.{number}"


def test_deleted_record_is_left_alone_even_with_metadata() -> None:
    """The hand-made deleted header still carries <metadata>: the header is the truth."""
    items = page_items("zenodo-ListRecords-oai_dc-resumed-with-deleted.xml")
    assert items[0].identifier == "oai:zenodo.org:8433364"
    assert items[0].xml is None
    # Also when the stage hands over the XML of a deleted record, nothing is transformed.
    page = SAMPLES / "zenodo-ListRecords-oai_dc-resumed-with-deleted.xml"
    root = etree.fromstring(page.read_bytes())
    deleted = next(root.iter(f"{{{OAI}}}record"))
    items[0].xml = etree.tostring(deleted)
    transform(items)
    assert items[0].data is None
    assert items[0].error is None
    assert items[0].pid is None
    assert all(item.error is None and item.data for item in items[1:])
