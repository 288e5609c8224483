"""A deleted header without a datestamp (Zenodo's tombstones) is a deletion to apply."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx

from oai_pipeline.oai.client import OAIClient
from oai_pipeline.oai.pages import parse_response
from oai_pipeline.oai.windows import parse_datestamp

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


def test_without_a_response_date_nor_when_asked_an_undated_deletion_stays_an_error() -> None:
    gone, live = parse_response(_page(""), "ListRecords").records
    assert gone.error is not None and gone.error.type == "MissingDatestamp"
    assert gone.datestamp == ""
    assert live.error is not None and live.error.type == "MissingDatestamp"


def test_without_a_response_date_an_undated_deletion_takes_the_time_it_was_asked_for() -> None:
    asked = "2024-03-01T09:59:58Z"
    gone, live = parse_response(_page(""), "ListRecords", asked_at=asked).records
    assert (gone.datestamp, gone.error, gone.undated_deletion) == (asked, None, True)
    assert live.error is not None and live.error.type == "MissingDatestamp"
    # a responseDate, when there is one, is the source's clock: it goes first
    dated = _page("<responseDate>2024-03-01T10:00:00Z</responseDate>")
    [gone, _] = parse_response(dated, "ListRecords", asked_at=asked).records
    assert gone.datestamp == "2024-03-01T10:00:00Z"


def test_the_client_dates_an_undated_deletion_without_a_response_date_when_it_asked() -> None:
    """A source sending no responseDate: the deletion is dated by the request's own time,
    told in the same notice, and applied (before: a MissingDatestamp record error)."""
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=_page("")))
    before = datetime.now(UTC).replace(microsecond=0)
    with OAIClient("http://x/oai", transport=transport, sleep=lambda s: None) as client:
        gone, live = client.list_page("ListRecords", metadata_prefix="oai_dc").records
        notice = client.undated_deletions_notice
    after = datetime.now(UTC)
    assert gone.error is None and gone.undated_deletion
    assert before <= parse_datestamp(gone.datestamp) <= after
    assert live.error is not None and live.error.type == "MissingDatestamp"
    assert notice is not None and "1 deleted record(s) without a datestamp" in notice


def test_a_deleted_status_in_another_case_or_padded_is_a_deletion() -> None:
    """`status="Deleted"` or `" deleted "` was read as a live record: one with its metadata
    still there was staged as live, one without it a MissingMetadata error, and the source's
    deletion was never applied. Another status is no deletion."""
    records = "".join(
        f'<record><header status="{status}"><identifier>oai:x:{number}</identifier>'
        "<datestamp>2024-03-01</datestamp></header>"
        "<metadata><a xmlns='urn:a'>x</a></metadata></record>"
        for number, status in enumerate(("Deleted", "DELETED", " deleted ", "other"))
    )
    page = _page("<responseDate>2024-03-01T10:00:00Z</responseDate>", records)
    parsed = parse_response(page, "ListRecords")
    assert [r.deleted for r in parsed.records] == [True, True, True, False]
    assert all(r.error is None for r in parsed.records)
