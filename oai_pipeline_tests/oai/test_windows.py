"""[start, end) windows to inclusive OAI from/until: every record lands in exactly one window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from oai_pipeline.errors import ConfigurationError
from oai_pipeline.oai.client import OAIClient
from oai_pipeline.oai.errors import InvalidDatestamp
from oai_pipeline.oai.windows import (
    format_datestamp,
    oai_bounds,
    parse_datestamp,
    read_datestamp,
)
from oai_pipeline_tests.oai.fake_source import BASE_URL, FakeRecord, FakeSource


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_seconds_bounds_end_one_second_before_the_exclusive_end() -> None:
    assert oai_bounds(utc(2024, 1, 1), utc(2024, 1, 2), "seconds") == (
        "2024-01-01T00:00:00Z",
        "2024-01-01T23:59:59Z",
    )


def test_day_bounds_end_on_the_last_day_inside_the_window() -> None:
    assert oai_bounds(utc(2024, 1, 1), utc(2024, 1, 2), "day") == ("2024-01-01", "2024-01-01")
    assert oai_bounds(utc(2024, 1, 1), utc(2024, 2, 1), "day") == ("2024-01-01", "2024-01-31")


def test_day_granularity_refuses_a_window_not_aligned_to_days() -> None:
    with pytest.raises(ConfigurationError, match="midnight UTC"):
        oai_bounds(utc(2024, 1, 1, 6), utc(2024, 1, 2, 6), "day")


def test_empty_window_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="empty window"):
        oai_bounds(utc(2024, 1, 2), utc(2024, 1, 2), "seconds")


def test_other_time_zones_are_converted_to_utc() -> None:
    cet = timezone(timedelta(hours=1))
    start = datetime(2024, 1, 1, 1, tzinfo=cet)
    assert oai_bounds(start, start + timedelta(hours=1), "seconds") == (
        "2024-01-01T00:00:00Z",
        "2024-01-01T00:59:59Z",
    )
    assert format_datestamp(datetime(2024, 1, 1, 0, 30, tzinfo=cet), "day") == "2023-12-31"


def test_sub_second_window_edges_leave_no_gap_and_no_overlap() -> None:
    edge = utc(2024, 1, 1, 12, 0, 0) + timedelta(milliseconds=500)
    _, until = oai_bounds(utc(2024, 1, 1), edge, "seconds")
    start, _ = oai_bounds(edge, utc(2024, 1, 2), "seconds")
    assert (until, start) == ("2024-01-01T12:00:00Z", "2024-01-01T12:00:01Z")


def test_parse_and_format_datestamps() -> None:
    assert parse_datestamp("2014-02-03T14:41:33Z") == utc(2014, 2, 3, 14, 41, 33)
    assert parse_datestamp("2015-01-16") == utc(2015, 1, 16)
    assert parse_datestamp(" 2015-01-16T10:00:00+01:00 ") == utc(2015, 1, 16, 9)
    assert parse_datestamp("2015-01-16").tzinfo is UTC
    assert format_datestamp(utc(2024, 5, 6, 7, 8, 9, 999), "seconds") == "2024-05-06T07:08:09Z"
    assert format_datestamp(datetime(2024, 5, 6, 7, 8, 9), "seconds") == "2024-05-06T07:08:09Z"
    assert format_datestamp(utc(1, 1, 1), "seconds") == "0001-01-01T00:00:00Z"
    assert format_datestamp(utc(999, 12, 31), "day") == "0999-12-31"
    for bad in ("2015-13-01", "yesterday", "2015-01-16T10:00", ""):
        with pytest.raises(InvalidDatestamp):
            parse_datestamp(bad)


def test_a_records_datestamp_is_read_in_the_loose_forms_sources_send() -> None:
    """To file a record in its window: what the protocol allows, and what sources send
    beside it; the strict reading (from/until, --since) still refuses these."""
    assert read_datestamp("2014-02-03T14:41:33Z") == utc(2014, 2, 3, 14, 41, 33)
    assert read_datestamp("2014-02-03T14:41:33") == utc(2014, 2, 3, 14, 41, 33)  # UTC
    assert read_datestamp("2014-02-03 14:41:33Z") == utc(2014, 2, 3, 14, 41, 33)
    assert read_datestamp("2014-02-03 14:41:33") == utc(2014, 2, 3, 14, 41, 33)
    assert read_datestamp(" 2014-02-03T14:41Z ") == utc(2014, 2, 3, 14, 41)
    assert read_datestamp("2015-01-16") == utc(2015, 1, 16)
    assert read_datestamp("2014-02-03t14:41:33z") == utc(2014, 2, 3, 14, 41, 33)  # RFC 3339
    for bad in ("2015-13-01", "yesterday", "", None):
        assert read_datestamp(bad) is None
    with pytest.raises(InvalidDatestamp):
        parse_datestamp("2014-02-03 14:41:33Z")


@pytest.mark.parametrize("granularity", ["seconds", "day"])
def test_a_record_on_a_window_boundary_is_harvested_exactly_once(granularity: str) -> None:
    boundary = utc(2024, 3, 2)
    stamps = [boundary - timedelta(seconds=1), boundary, boundary + timedelta(seconds=1)]
    records = [
        FakeRecord(f"oai:fake.test:{n}", stamp.strftime("%Y-%m-%dT%H:%M:%SZ"))
        for n, stamp in enumerate(stamps)
    ]
    source = FakeSource(records, granularity=granularity)
    client = OAIClient(BASE_URL, transport=source.transport())
    harvested: list[str] = []
    windows = [(utc(2024, 3, 1), boundary), (boundary, utc(2024, 3, 3))]
    per_window = []
    for start, end in windows:
        from_, until = oai_bounds(start, end, granularity)
        got = [
            r.identifier
            for page in client.sweep(
                "ListRecords", metadata_prefix="oai_dc", from_=from_, until=until
            )
            for r in page.records
        ]
        per_window.append(got)
        harvested += got
    assert sorted(harvested) == sorted(r.identifier for r in records)  # none twice, none lost
    assert per_window[1][0] == "oai:fake.test:1"  # the boundary record belongs to the later window
