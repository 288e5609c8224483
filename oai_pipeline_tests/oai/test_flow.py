"""Flow control: Retry-After parsing, backoff, request spacing and rate-limit headers."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest

from oai_pipeline.errors import ConfigurationError
from oai_pipeline.oai.client import OAIClient
from oai_pipeline.oai.errors import HarvestProtocolError
from oai_pipeline.oai.flow import RateLimiter, backoff_delay, parse_retry_after
from oai_pipeline_tests.oai.fake_source import BASE_URL, FakeSource, make_records, unavailable


class FakeClock:
    """A clock that only moves when someone sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_parse_retry_after_seconds_and_http_dates() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC).timestamp()
    assert parse_retry_after("120") == 120
    assert parse_retry_after(" 5 ") == 5
    assert parse_retry_after("Thu, 01 Jan 2026 12:00:30 GMT", now=now) == 30
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=now) < 0  # past: clamp later
    assert (
        parse_retry_after(
            format_datetime(datetime(2026, 1, 1, 12, 1, tzinfo=UTC), usegmt=True), now=now
        )
        == 60
    )
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None


def test_parse_retry_after_reads_the_asctime_form_as_gmt() -> None:
    """HTTP dates come in three forms, all in GMT; the asctime one names no zone. Before,
    it was unreadable, and the client backed off for a second instead of the time asked."""
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC).timestamp()
    assert parse_retry_after("Thu Jan  1 12:02:00 2026", now=now) == 120
    assert parse_retry_after("Thursday, 01-Jan-26 12:02:00 GMT", now=now) == 120


def test_backoff_grows_exponentially_with_jitter_and_is_capped() -> None:
    rng = random.Random(7)
    for attempt, (low, high) in enumerate([(0.5, 1), (1, 2), (2, 4), (4, 8)], 1):
        assert low <= backoff_delay(attempt, 1.0, 300, rng) <= high
    assert 5 <= backoff_delay(20, 1.0, 10, rng) <= 10


def test_rate_limit_spaces_request_starts() -> None:
    clock = FakeClock()
    limiter = RateLimiter(30, max_wait=300, sleep=clock.sleep, clock=clock)
    for _ in range(3):
        with limiter:
            clock.now += 0.5  # the request itself takes half a second
    assert clock.sleeps == [1.5, 1.5]  # 2 s between starts at 30 a minute


def test_low_ratelimit_remaining_slows_down_until_the_reset() -> None:
    clock = FakeClock()
    limiter = RateLimiter(
        None, max_wait=300, sleep=clock.sleep, clock=clock, wall_clock=lambda: 5e9
    )
    with limiter:
        limiter.observe(
            {
                "x-ratelimit-limit": "133",
                "x-ratelimit-remaining": "120",
                "x-ratelimit-reset": str(5e9 + 40),
            }
        )
    with limiter:  # plenty left: no wait
        limiter.observe(
            {
                "x-ratelimit-limit": "133",
                "x-ratelimit-remaining": "3",
                "x-ratelimit-reset": str(5e9 + 40),
            }
        )
    assert clock.sleeps == []
    with limiter:  # nearly spent: the rest spread over the 40 s left
        limiter.observe({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "12"})
    with limiter:  # nothing left: wait until the reset (given as seconds)
        pass
    assert clock.sleeps == [pytest.approx(10.0), pytest.approx(12.0)]


@pytest.mark.parametrize("prefetch", [True, False], ids=["prefetch", "sequential"])
def test_client_rate_limit_and_its_override(prefetch: bool) -> None:
    """Spacing holds for the page fetched ahead too: it waits its turn like any request."""
    source = FakeSource(make_records(6), page_size=2)
    sleeps: list[float] = []
    client = OAIClient(
        BASE_URL, transport=source.transport(), sleep=sleeps.append, rate_limit_per_minute=6
    )
    list(client.sweep("ListRecords", metadata_prefix="oai_dc", prefetch=prefetch))
    assert len(sleeps) == 2 and all(9 < s <= 10 for s in sleeps)
    client.rate_limit_per_minute = None
    sleeps.clear()
    list(client.sweep("ListRecords", metadata_prefix="oai_dc", prefetch=prefetch))
    assert (
        sleeps == [] or max(sleeps) <= 10
    )  # only the wait left over from the last limited request
    with pytest.raises(ConfigurationError):
        client.rate_limit_per_minute = 0


@pytest.mark.parametrize("prefetch", [True, False], ids=["prefetch", "sequential"])
def test_client_honours_rate_limit_headers_but_not_retry_after_on_200(prefetch: bool) -> None:
    source = FakeSource(make_records(6), page_size=2)
    source.response_headers = {
        "retry-after": "60",
        "x-ratelimit-limit": "133",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": "7",
    }
    sleeps: list[float] = []
    client = OAIClient(BASE_URL, transport=source.transport(), sleep=sleeps.append)
    list(client.sweep("ListRecords", metadata_prefix="oai_dc", prefetch=prefetch))
    assert len(sleeps) == 2 and all(6.9 < s <= 7 for s in sleeps)


def test_invalid_client_settings_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="http"):
        OAIClient("ftp://example.org/oai")
    with pytest.raises(ConfigurationError):
        OAIClient(BASE_URL, timeout=0)
    with pytest.raises(ConfigurationError):
        OAIClient(BASE_URL, rate_limit_per_minute=-1)


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "-5", "1_000", "+30", "0x10", "soon"])
def test_a_retry_after_that_is_no_delay_seconds_is_unreadable(value: str) -> None:
    """RFC 9110's delay-seconds is digits. float() took "nan" (no wait at all) and "inf"."""
    assert parse_retry_after(value) is None


def test_a_503_whose_retry_after_is_nan_backs_off_instead_of_hammering() -> None:
    """A Retry-After of "nan" was a wait of nothing, and, as a polite retry, came up to five
    times max_retries times: the source saw a burst of requests it had asked to space."""
    source = FakeSource(make_records(3), page_size=3)
    source.every = (1, unavailable("nan"))
    sleeps: list[float] = []
    client = OAIClient(BASE_URL, transport=source.transport(), sleep=sleeps.append, max_retries=2)
    with pytest.raises(HarvestProtocolError, match="gave up after 3 attempts"):
        list(client.sweep("ListRecords", metadata_prefix="oai_dc"))
    assert len(source.requests) == 3
    assert 0.5 <= sleeps[0] <= 1 and 1 <= sleeps[1] <= 2  # backoff, base 1 s


WALL = 5e9  # the wall clock of the rate-limit tests, in epoch seconds


@pytest.mark.parametrize(
    "headers",
    [
        {"RateLimit-Limit": "100", "RateLimit-Remaining": "0", "RateLimit-Reset": "30"},
        {"RateLimit": "limit=100, remaining=0, reset=30"},
        {"RateLimit": '"burst";r=40;t=1, "daily";r=0;t=30', "RateLimit-Policy": '"daily";q=100'},
        {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int((WALL + 30) * 1000))},
        {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "Fri, 11 Jun 2128 08:53:50 GMT"},
        {"x-ratelimit-remaining": "0", "retry-after": "30"},
    ],
    ids=["ietf-fields", "ietf-list", "ietf-policies", "epoch-ms", "http-date", "retry-after"],
)
def test_a_spent_quota_waits_for_its_reset_however_the_source_names_it(
    headers: dict[str, str],
) -> None:
    """Sources behind API gateways report their quota as the IETF draft names it
    (`RateLimit-Remaining`, or one `RateLimit` field), give the reset as an epoch in
    milliseconds or a date, or only a Retry-After beside the count. Only `x-ratelimit-*` with
    a reset in seconds was read: the client went on until the source refused it (429)."""
    assert format_datetime(datetime.fromtimestamp(WALL + 30, UTC), usegmt=True) == (
        "Fri, 11 Jun 2128 08:53:50 GMT"
    )
    clock = FakeClock()
    limiter = RateLimiter(
        None, max_wait=300, sleep=clock.sleep, clock=clock, wall_clock=lambda: WALL
    )
    with limiter:
        limiter.observe(httpx.Headers(headers))
    with limiter:
        pass
    assert clock.sleeps == [pytest.approx(30.0)]


def test_a_quota_with_plenty_left_or_no_count_does_not_slow_down() -> None:
    clock = FakeClock()
    limiter = RateLimiter(None, max_wait=300, sleep=clock.sleep, clock=clock)
    for headers in (
        {"RateLimit": '"default";r=50;t=30'},
        {"RateLimit-Remaining": "50", "RateLimit-Reset": "30"},
        {"x-ratelimit-remaining": "nan", "x-ratelimit-reset": "30"},
        {"RateLimit": "garbage"},
        {"retry-after": "30"},  # on a 200 without a quota: a hint, not an order
    ):
        with limiter:
            limiter.observe(httpx.Headers(headers))
    with limiter:
        pass
    assert clock.sleeps == []


def test_the_client_slows_down_on_ietf_rate_limit_headers() -> None:
    source = FakeSource(make_records(6), page_size=2)
    source.response_headers = {"RateLimit-Remaining": "0", "RateLimit-Reset": "7"}
    sleeps: list[float] = []
    client = OAIClient(BASE_URL, transport=source.transport(), sleep=sleeps.append)
    list(client.sweep("ListRecords", metadata_prefix="oai_dc", prefetch=False))
    assert len(sleeps) == 2 and all(6.9 < s <= 7 for s in sleeps)
