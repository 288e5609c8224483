from __future__ import annotations

from datetime import UTC, datetime
from functools import partial

import dagster as dg
import pytest

from oai_pipeline.defs.partitions import (
    HARVESTER,
    RANGE_END_TAG,
    RANGE_START_TAG,
    build_window_partitions,
    harvest_partitions,
    harvesters_of,
    partition_key,
    scopes_for_keys,
    split_key,
)
from oai_pipeline.errors import ConfigurationError
from oai_pipeline.pipeline.scope import HarvestScope


def test_keys_join_dimensions_alphabetically() -> None:
    assert str(partition_key("zenodo", "2024-03-05")) == "zenodo|2024-03-05"


def test_contiguous_windows_become_one_scope_per_harvester() -> None:
    keys = [
        "zen|2024-01-03",
        "zen|2024-01-02",
        "zen|2024-01-05",
        "arx|2024-01-02",
        "zen|2024-01-04",
    ]
    scopes = scopes_for_keys(keys)
    assert [(s.harvester_id, s.keys) for s in scopes] == [
        ("arx", ["2024-01-02"]),
        ("zen", ["2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]),
    ]
    zen = scopes[1]
    assert zen.start == datetime(2024, 1, 2, tzinfo=UTC)
    assert zen.end == datetime(2024, 1, 6, tzinfo=UTC)


def test_a_gap_splits_the_sweep() -> None:
    scopes = scopes_for_keys(["h|2024-02-01", "h|2024-02-02", "h|2024-02-05"])
    assert [s.keys for s in scopes] == [["2024-02-01", "2024-02-02"], ["2024-02-05"]]


def test_first_window_of_the_grid_is_open_to_the_past() -> None:
    (scope,) = scopes_for_keys(["h|2024-01-01", "h|2024-01-02"])
    assert scope.start is None
    assert scope.oai_range("day") == (None, "2024-01-02")
    assert scope.oai_range("seconds") == (None, "2024-01-02T23:59:59Z")


@pytest.mark.parametrize(
    ("since", "until", "day_range"),
    [
        ("2024-01-01T05:00:00", "2024-07-01T00:00:00", ("2024-01-01", "2024-06-30")),
        ("2024-01-01T05:00:00", "2024-07-01T12:30:00", ("2024-01-01", "2024-07-01")),
        ("2024-01-01T00:00:00", "2024-01-01T00:00:01", ("2024-01-01", "2024-01-01")),
    ],
)
def test_moments_within_days_widen_to_whole_days_at_day_granularity(
    since: str, until: str, day_range: tuple[str, str]
) -> None:
    start, end = (datetime.fromisoformat(f"{moment}+00:00") for moment in (since, until))
    scope = HarvestScope.adhoc("h", start, end)
    assert scope.oai_range("day") == day_range
    assert scope.oai_range("seconds")[0] == f"{since}Z"  # seconds: the moments themselves


def test_only_records_dated_outside_hours_asked_on_their_days_are_left_out() -> None:
    """What a source listing by day sends for the whole days of `--since`/`--until` with
    hours: a datestamp in seconds outside the hours is left out; one of a day only may be
    any moment of it, and one outside those days (a source's own quirk) is kept, as the
    grid keeps it (see window_key_for)."""
    start, end = datetime(2024, 3, 5, 10, tzinfo=UTC), datetime(2024, 3, 6, 12, tzinfo=UTC)
    scope = HarvestScope.adhoc("h", start, end)
    assert scope.within_days
    left_out = [
        "2024-03-05T00:00:00Z", "2024-03-05T09:59:59Z", "2024-03-06T12:00:00Z",
        "2024-03-06T23:59:59Z", "2024-03-05 09:00:00",
    ]  # fmt: skip
    kept = [
        "2024-03-05T10:00:00Z", "2024-03-06T11:59:59Z", "2024-03-05", "2024-03-06",
        "2024-03-04T23:59:59Z", "2024-03-07T00:00:00Z", "not a date", "",
    ]  # fmt: skip
    assert [d for d in left_out + kept if scope.listed_for_whole_day(d)] == left_out
    midnights = HarvestScope.adhoc("h", datetime(2024, 3, 5, tzinfo=UTC), None)
    assert not midnights.within_days
    assert not midnights.listed_for_whole_day("2024-03-04T23:59:59Z")


def test_record_lands_in_the_window_of_its_datestamp() -> None:
    (scope,) = scopes_for_keys(["h|2024-02-01", "h|2024-02-02", "h|2024-02-03"])
    assert scope.window_key_for("2024-02-02T00:00:00Z") == "2024-02-02"
    assert scope.window_key_for("2024-02-01T23:59:59Z") == "2024-02-01"
    assert scope.window_key_for("2024-02-03") == "2024-02-03"
    assert scope.window_key_for("2023-05-01") == "2024-02-01"  # late-indexed, outside
    assert scope.window_key_for("2030-01-01") == "2024-02-03"


def test_window_granularity_is_configurable() -> None:
    weekly = build_window_partitions("weekly", "2024-01-07")
    monthly = build_window_partitions("monthly", "2024-01-01")
    assert isinstance(weekly, dg.WeeklyPartitionsDefinition)
    assert isinstance(monthly, dg.MonthlyPartitionsDefinition)
    with pytest.raises(ConfigurationError, match="GRANULARITY"):
        build_window_partitions("hourly", "2024-01-01")
    with pytest.raises(ConfigurationError, match="YYYY-MM-DD"):
        build_window_partitions("daily", "01/01/2024")


def test_a_window_start_after_today_is_refused() -> None:
    """A grid without a window: before, `harvest --use-job` and `demo` failed with a
    TypeError traceback (its first window key is None)."""
    with pytest.raises(ConfigurationError, match="is after today: the grid would have no"):
        build_window_partitions("daily", "2099-01-01")


def test_a_range_over_harvesters_spans_them_in_the_order_dagster_keeps(
    instance: dg.DagsterInstance,
) -> None:
    """Dagster orders the harvester dimension as the partitions were added (the registry
    sensor adds each tick's new ones): a UI backfill of one window over all harvesters runs
    zeta..mid, which holds alpha too, though alpha is not between them by name."""
    instance.add_dynamic_partitions(HARVESTER, ["zeta"])
    instance.add_dynamic_partitions(HARVESTER, ["alpha", "mid"])  # a later sensor tick
    added = partial(instance.get_dynamic_partitions, HARVESTER)
    backfill = {RANGE_START_TAG: "zeta|2024-01-05", RANGE_END_TAG: "mid|2024-01-05"}
    run_keys = harvest_partitions.get_partition_keys_in_range(
        dg.PartitionKeyRange(backfill[RANGE_START_TAG], backfill[RANGE_END_TAG]),
        dynamic_partitions_store=instance,
    )
    assert {split_key(key)[0] for key in run_keys} == {"zeta", "alpha", "mid"}  # what it harvests
    assert harvesters_of(backfill, added) == {"zeta", "alpha", "mid"}
    later = {RANGE_START_TAG: "alpha|2024-01-05", RANGE_END_TAG: "mid|2024-01-05"}
    assert harvesters_of(later, added) == {"alpha", "mid"}
    instance.delete_dynamic_partition(HARVESTER, "zeta")  # a corner gone: only corners known
    assert harvesters_of(backfill, added) == {"zeta", "mid"}


@pytest.mark.parametrize(
    "tags",
    [
        # typed in the launchpad with the window first; Dagster tags its dimensions by position
        {
            "dagster/partition": "2024-01-01|sample",
            "dagster/partition/harvester": "2024-01-01",
            "dagster/partition/window": "sample",
        },
        {"dagster/partition": "2024-01-01|sample"},
        {"dagster/partition/harvester": "2024-01-01", "dagster/partition/window": "sample"},
        {RANGE_START_TAG: "2024-01-01|sample", RANGE_END_TAG: "2024-01-31|sample"},
        {RANGE_START_TAG: "sample|2024-01-01", RANGE_END_TAG: "2024-01-31|sample"},
    ],
)
def test_a_key_with_its_dimensions_swapped_names_no_harvester(tags: dict[str, str]) -> None:
    """The key is harvester|window (`sample|2024-01-01`). Read by position, a key typed the
    other way round named the window `2024-01-01` as its harvester."""
    assert harvesters_of(tags, lambda: ["sample"]) == set()
    assert harvesters_of({"dagster/partition": "sample|2024-01-01"}, list) == {"sample"}
