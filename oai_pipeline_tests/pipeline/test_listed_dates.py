"""ListedDates: which records a list holds dated more than a day outside the dates asked."""

from __future__ import annotations

import pytest

from oai_pipeline.oai.types import HarvestedRecord
from oai_pipeline.pipeline.listed_dates import ListedDates


def listed(*datestamps: str, undated_deletion: bool = False) -> list[HarvestedRecord]:
    return [
        HarvestedRecord(f"oai:x:{n}", stamp, False, undated_deletion=undated_deletion)
        for n, stamp in enumerate(datestamps)
    ]


@pytest.mark.parametrize(
    ("from_", "until", "datestamps", "outside"),
    [
        # a day's window: the day before and after are time zones' doing
        ("2024-03-05", "2024-03-05", ["2024-03-04", "2024-03-06T23:59:59Z"], 0),
        ("2024-03-05", "2024-03-05", ["2024-03-03T23:59:59Z", "2024-03-07"], 2),
        # seconds bounds, by the day they fall on; datestamps as sources send them
        ("2024-03-05T12:00:00Z", None, [" 2024-03-04T00:00:00Z", "2024-03-01 10:30:00"], 1),
        (None, "2024-03-05T12:00:00Z", ["2024-03-06T23:00:00+02:00", "2030-01-01"], 1),
        # no date to go by: not counted
        ("2024-03-05", "2024-03-05", ["", "yesterday", "2024/03/01"], 0),
        # the ends of the calendar: nothing lies beyond them
        ("0001-01-01", "9999-12-31", ["0001-01-01", "9999-12-31T23:59:59Z"], 0),
        ("0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", ["1970-01-01"], 0),
    ],
)
def test_records_dated_more_than_a_day_outside(
    from_: str | None, until: str | None, datestamps: list[str], outside: int
) -> None:
    dates = ListedDates.asked_for(from_, until)
    dates.look_at(listed(*datestamps))
    assert dates.outside == outside
    assert (dates.notice() is None) == (outside == 0)


def test_a_list_asked_for_no_dates_counts_nothing() -> None:
    dates = ListedDates.asked_for(None, None)
    dates.look_at(listed("1970-01-01", "2024-03-05"))
    assert (dates.listed, dates.outside, dates.notice()) == (0, 0, None)


def test_a_deletion_dated_by_the_response_is_not_the_source_s_date() -> None:
    """Its datestamp is the responseDate (the source sent none): today, in a backfill of an
    old window; not what the source dates it by."""
    dates = ListedDates.asked_for("2020-01-01", "2020-01-01")
    dates.look_at(listed("2026-12-04T09:00:00Z", undated_deletion=True))
    assert (dates.listed, dates.outside) == (0, 0)


def test_the_notice_names_the_count_the_dates_asked_and_the_first_record() -> None:
    dates = ListedDates.asked_for("2024-03-05", None)
    dates.look_at(listed("2024-03-05", "2020-01-01T00:00:00Z"))
    dates.look_at(listed("2019-01-01"))
    assert dates.notice() == (
        "2 of the 3 records the source listed are dated more than a day outside the dates "
        "asked for (2024-03-05 .. …), e.g. oai:x:1 dated 2020-01-01T00:00:00Z: the source "
        "ignores from/until, or selects by another date than its datestamps; such records are "
        "harvested (unchanged ones skipped), and listed again by each incremental harvest"
    )
