from __future__ import annotations

from datetime import UTC, datetime, timedelta

from oai_pipeline.defs.schedules import incremental_window_range


def test_never_harvested_means_the_whole_grid() -> None:
    now = datetime(2024, 3, 10, 12, tzinfo=UTC)
    assert incremental_window_range(None, now) == ("2024-01-01", "2024-03-10")


def test_starts_at_last_response_date_minus_overlap() -> None:
    now = datetime(2024, 3, 10, 12, tzinfo=UTC)
    assert incremental_window_range("2024-03-10T08:00:00Z", now) == ("2024-03-10", "2024-03-10")
    # the overlap reaches into the previous day: sources index late
    assert incremental_window_range("2024-03-10T01:00:00Z", now) == ("2024-03-09", "2024-03-10")


def test_catch_up_after_downtime() -> None:
    now = datetime(2024, 3, 10, 12, tzinfo=UTC)
    first, last = incremental_window_range("2024-03-01T12:00:00Z", now, overlap=timedelta(hours=1))
    assert (first, last) == ("2024-03-01", "2024-03-10")
