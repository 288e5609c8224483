"""Dagster time windows ([start, end)) as OAI-PMH ``from``/``until`` (both inclusive).

A source compares datestamps at its own granularity, so the exclusive end becomes the last
granule before it: a record stamped exactly on a boundary falls in exactly one of the two
adjacent windows, never both and never neither.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from oai_pipeline.errors import ConfigurationError
from oai_pipeline.oai.errors import InvalidDatestamp
from oai_pipeline.oai.types import Granularity

# How far before the last harvest's responseDate the next one lists again: sources index
# late, so a record stamped just before that moment may have been listed only after it.
INDEXING_OVERLAP = timedelta(hours=2)

_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_SECONDS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})$")


def _as_utc(moment: datetime) -> datetime:
    """Naive datetimes are taken as UTC (OAI-PMH knows no other zone)."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def format_datestamp(moment: datetime, granularity: Granularity) -> str:
    """The datestamp at the source's granularity, in UTC; sub-second parts are cut off.
    Always four digits of year (strftime writes year 1 as `1`, which no source accepts)."""
    moment = _as_utc(moment)
    if granularity == "day":
        return moment.date().isoformat()
    if granularity == "seconds":
        return moment.replace(microsecond=0, tzinfo=None).isoformat() + "Z"
    raise ConfigurationError(f"unknown OAI granularity {granularity!r} (day or seconds)")


def parse_datestamp(text: str) -> datetime:
    """An aware UTC datetime from an OAI datestamp in day or seconds form."""
    value = text.strip()
    if _DAY.match(value):
        try:
            return datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError:
            pass
    elif _SECONDS.match(value):
        try:
            return datetime.fromisoformat(value).astimezone(UTC)
        except ValueError:
            pass
        except OverflowError:  # an offset that moves it before year 1 or after 9999 in UTC
            raise InvalidDatestamp(f"out of range in UTC: {text!r}") from None
    raise InvalidDatestamp(f"not an OAI datestamp (YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ): {text!r}")


def read_response_date(text: str | None) -> datetime | None:
    """A responseDate (or one stored from an earlier version) as an aware UTC datetime, read
    leniently: sources send it without `Z`, with an offset or fractional seconds. None when
    it is no date at all; the caller then uses its own clock."""
    value = (text or "").strip()
    if not value:
        return None
    try:  # `t` and `z` in lower case, as RFC 3339 allows and `fromisoformat` does not
        return _as_utc(datetime.fromisoformat(value.upper()))
    except (ValueError, OverflowError):  # Overflow: `0001-01-01T00:00:00+01:00`
        return None


def read_datestamp(text: str | None) -> datetime | None:
    """A record's datestamp as an aware UTC datetime, to file and compare it by: the
    protocol's two forms, and those sources send beside them (`2024-03-01T10:30:00`
    without its `Z`, UTC as OAI-PMH knows no other zone; `2024-03-01 10:30:00Z`, a
    database's datetime as printed). None when it is no date."""
    try:
        return parse_datestamp(text or "")
    except InvalidDatestamp:
        return read_response_date(text)


def normalize_response_date(text: str | None) -> str:
    """A responseDate in the one form this project stores (`YYYY-MM-DDThh:mm:ssZ`), or ''
    when the source sent none that reads as a date."""
    moment = read_response_date(text)
    return format_datestamp(moment, "seconds") if moment is not None else ""


def _ceil_second(moment: datetime) -> datetime:
    if moment.microsecond:
        return moment.replace(microsecond=0) + timedelta(seconds=1)
    return moment


def oai_bounds(
    start: datetime, end_exclusive: datetime, granularity: Granularity
) -> tuple[str, str]:
    """Inclusive (from, until) for the window [start, end_exclusive).

    Seconds: from = start, until = end - 1 s (both rounded up to whole seconds, which keeps
    adjacent windows gap-free for any start). Day: the window must be day-aligned in UTC,
    because a day-granular source cannot split a day between two windows.
    """
    start, end = _as_utc(start), _as_utc(end_exclusive)
    if granularity == "seconds":
        first, after = _ceil_second(start), _ceil_second(end)
        step = timedelta(seconds=1)
    elif granularity == "day":
        for name, moment in (("start", start), ("end", end)):
            if moment != moment.replace(hour=0, minute=0, second=0, microsecond=0):
                raise ConfigurationError(
                    f"window {name} {moment.isoformat()} is not at midnight UTC; a source with "
                    "day granularity needs day-aligned windows"
                )
        first, after = start, end
        step = timedelta(days=1)
    else:
        raise ConfigurationError(f"unknown OAI granularity {granularity!r} (day or seconds)")
    if after - first < step:
        raise ConfigurationError(
            f"empty window [{start.isoformat()}, {end.isoformat()}) at {granularity} granularity"
        )
    return format_datestamp(first, granularity), format_datestamp(after - step, granularity)


__all__ = [
    "format_datestamp",
    "normalize_response_date",
    "oai_bounds",
    "parse_datestamp",
    "read_response_date",
]
