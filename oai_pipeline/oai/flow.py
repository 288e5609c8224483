"""Flow control towards one source: request spacing, rate-limit headers, retry waits.

Everything that waits goes through an injected ``sleep`` (and reads an injected clock),
so tests run without real waiting.
"""

from __future__ import annotations

import math
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime

# A rate-limit reset above this is an epoch timestamp, below it a number of seconds; above
# the second threshold, an epoch timestamp in milliseconds (some gateways send Date.now()).
_EPOCH_THRESHOLD = 1_000_000_000
_EPOCH_MILLISECONDS_THRESHOLD = 100_000_000_000

# Retry-After's delay-seconds is digits (RFC 9110 §10.2.3); a fraction is tolerated. float()
# alone also took "nan", "inf", "-5" and "1_000": "nan" made every retry of a 503 come at
# once (a wait of nothing, up to 5 max_retries times), where an unreadable value backs off.
_DELAY_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date, in any of its
    three forms); None if absent or unreadable. A date in the past gives a negative number:
    the caller clamps."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if _DELAY_SECONDS.fullmatch(value):
        return float(value)
    if value[:1].isdigit() or value[:1] in "+-.":
        return None  # a number, but no delay-seconds (nor a date: those start with a day)
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:  # asctime form (or a zone left out): an HTTP date is in GMT
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp() - (time.time() if now is None else now)


def clamp(seconds: float, upper: float) -> float:
    return max(0.0, min(seconds, upper))


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Exponential backoff with jitter for the ``attempt``-th retry (1-based):
    uniformly between half and all of min(cap, base * 2**(attempt-1))."""
    ceiling = min(cap, base * 2 ** max(0, attempt - 1))
    return rng.uniform(ceiling / 2, ceiling)


def jittered(seconds: float, rng: random.Random) -> float:
    """A server-given wait plus up to 10 % (at least up to 0.5 s) so clients do not stampede."""
    return seconds + rng.uniform(0, max(0.5, seconds * 0.1))


class RateLimiter:
    """One request at a time, at most ``per_minute`` request starts per minute, and slower
    still when the source's rate-limit headers say its quota is nearly spent."""

    def __init__(
        self,
        per_minute: int | None,
        *,
        max_wait: float,
        sleep: Callable[[float], None],
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.per_minute = per_minute
        self.max_wait = max_wait
        self._sleep = sleep
        self._clock = clock
        self._wall_clock = wall_clock
        self._next_allowed: float | None = None
        self._lock = threading.Lock()

    @property
    def per_minute(self) -> int | None:
        return self._per_minute

    @per_minute.setter
    def per_minute(self, value: int | None) -> None:
        if value is not None and value <= 0:
            raise ValueError(f"rate limit must be a positive number per minute, got {value}")
        self._per_minute = value

    def __enter__(self) -> RateLimiter:
        """Hold the source for one request: wait for its turn, then mark its start."""
        self._lock.acquire()
        try:
            now = self._clock()
            if self._next_allowed is not None and self._next_allowed > now:
                self._sleep(self._next_allowed - now)
                now = self._clock()
            spacing = 60.0 / self._per_minute if self._per_minute else 0.0
            self._next_allowed = now + spacing
        except BaseException:
            self._lock.release()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()

    def observe(self, headers: Mapping[str, str]) -> None:
        """Slow down when the quota the source's rate-limit headers report (see _quota) is
        low: spread what is left evenly until its reset; wait for the reset when nothing is
        left."""
        quota = _quota(headers)
        if quota is None:
            return
        remaining, reset, limit = quota
        low_mark = max(2.0, limit * 0.1) if limit else 2.0
        if remaining > low_mark:
            return
        reset_in = _seconds_until_reset(reset, self._wall_clock())
        if reset_in is None:
            # no reset told: a Retry-After beside it (a hint on a 200) says when the quota
            # comes back; without either, there is no knowing, and requests go on as spaced
            reset_in = parse_retry_after(headers.get("retry-after"), now=self._wall_clock())
            if reset_in is None:
                return
        delay = clamp(reset_in / (max(remaining, 0.0) + 1.0), self.max_wait)
        earliest = self._clock() + delay
        if self._next_allowed is None or earliest > self._next_allowed:
            self._next_allowed = earliest


def _quota(headers: Mapping[str, str]) -> tuple[float, str | None, float | None] | None:
    """(remaining, reset as sent, limit) from whichever rate-limit headers the source sends;
    None without a remaining count. Sources behind API gateways name them three ways:
    ``X-RateLimit-*`` (Zenodo, GitHub), ``RateLimit-Remaining``/``-Reset``/``-Limit`` (the
    IETF draft up to -06: Kong, Traefik), and one structured ``RateLimit`` field, as
    ``limit=100, remaining=0, reset=30`` (drafts -03 to -06) or ``"policy";r=0;t=30``
    (from -07; the most restrictive of several policies counts)."""
    for prefix in ("x-ratelimit-", "ratelimit-"):
        remaining = _number(headers.get(prefix + "remaining"))
        if remaining is not None:
            limit = _number(headers.get(prefix + "limit"))
            return remaining, headers.get(prefix + "reset"), limit
    field = headers.get("ratelimit")
    if not field:
        return None
    items = [
        {
            name.strip().lower(): value.strip().strip('"')
            for name, _, value in (part.partition("=") for part in item.split(";"))
        }
        for item in field.split(",")
    ]
    policies = [(r, item) for item in items if (r := _number(item.get("r"))) is not None]
    if policies:
        remaining, policy = min(policies, key=lambda found: found[0])
        return remaining, policy.get("t"), None
    listed = {name: value for item in items for name, value in item.items()}
    remaining = _number(listed.get("remaining"))
    if remaining is None:
        return None
    return remaining, listed.get("reset"), _number(listed.get("limit"))


def _seconds_until_reset(reset: str | None, now: float) -> float | None:
    """Seconds from ``now`` (epoch) to a rate-limit reset: a number of seconds, an epoch
    timestamp in seconds or milliseconds, or an HTTP date; None when none or unreadable."""
    number = _number(reset)
    if number is None:
        return parse_retry_after(reset, now=now) if reset else None
    if number > _EPOCH_MILLISECONDS_THRESHOLD:
        return number / 1000 - now
    if number > _EPOCH_THRESHOLD:
        return number - now
    return number


def _number(value: str | None) -> float | None:
    """A finite number, else None ("nan" and "inf" are no count)."""
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None
