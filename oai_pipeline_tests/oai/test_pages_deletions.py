"""A deleted header without a datestamp (Zenodo's tombstones) is a deletion to apply."""

from __future__ import annotations

from oai_pipeline.oai.pages import parse_response

HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">'
    "{response_date}"
    '<request verb="ListRecords">http://x/oai</request><ListRecords>'
)
TAIL = "</ListRecords></OAI-PMH>"
RECORDS = (
    '<record><header status="deleted"><identifier>oai:x:gone</identifier></header></record>'
    "<record><header><identifier>oai:x:live</identifier></header>"
    "<metadata><a xmlns='urn:a'>x</a></metadata></record>"
)


def _page(response_date: str, records: str = RECORDS) -> bytes:
    return (HEAD.format(response_date=response_date) + records + TAIL).encode()


def test_an_undated_deletion_takes_the_response_date_and_a_live_record_stays_an_error() -> None:
    page = _page("<responseDate>2024-03-01T10:00:00Z</responseDate>")
    gone, live = parse_response(page, "ListRecords").records

    assert (gone.identifier, gone.deleted, gone.error) == ("oai:x:gone", True, None)
    assert gone.datestamp == "2024-03-01T10:00:00Z" and gone.undated_deletion
    assert live.error is not None and live.error.type == "MissingDatestamp"
    assert not live.undated_deletion


def test_an_undated_deletion_of_a_broken_record_is_dated_too() -> None:
    # the page does not parse whole (an unclosed element in a metadata): records isolated
    broken = (
        '<record><header status="deleted"><identifier>oai:x:gone</identifier></header>'
        "<metadata><a xmlns='urn:a'><b></a></metadata></record>"
    )
    page = _page("<responseDate>2024-03-01T10:00:00Z</responseDate>", broken)
    [gone] = parse_response(page, "ListRecords").records
    assert (gone.datestamp, gone.error) == ("2024-03-01T10:00:00Z", None)


def test_without_a_response_date_an_undated_deletion_stays_an_error() -> None:
    gone, live = parse_response(_page(""), "ListRecords").records
    assert gone.error is not None and gone.error.type == "MissingDatestamp"
    assert gone.datestamp == ""
    assert live.error is not None and live.error.type == "MissingDatestamp"
