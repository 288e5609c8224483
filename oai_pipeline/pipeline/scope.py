"""What one run covers: a harvester and a contiguous range of time windows."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property

from oai_pipeline.oai.types import Granularity
from oai_pipeline.oai.windows import format_datestamp, oai_bounds, read_datestamp

# The storage key of a run outside the grid: `adhoc-` and the moment it started.
ADHOC_PREFIX = "adhoc-"
_ADHOC_STAMP = "%Y%m%dT%H%M%S%fZ"


def adhoc_started(key: str) -> datetime | None:
    """When the ad-hoc run of this storage key started; None for a key of the grid."""
    if not key.startswith(ADHOC_PREFIX):
        return None
    try:
        return datetime.strptime(key.removeprefix(ADHOC_PREFIX), _ADHOC_STAMP).replace(tzinfo=UTC)
    except ValueError:
        return None


@dataclass(frozen=True)
class Window:
    """A storage key and the time range [start, end) it covers (None: open)."""

    key: str
    start: datetime | None
    end: datetime | None


@dataclass(frozen=True)
class HarvestScope:
    harvester_id: str
    windows: tuple[Window, ...]

    def __post_init__(self) -> None:
        if not self.windows:
            raise ValueError("a harvest scope needs at least one window")

    @classmethod
    def adhoc(
        cls, harvester_id: str, since: datetime | None = None, until: datetime | None = None
    ) -> HarvestScope:
        """A run outside the partition grid (CLI `harvest --since/--until`, selected ids)."""
        stamp = datetime.now(UTC).strftime(_ADHOC_STAMP)
        return cls(harvester_id, (Window(f"{ADHOC_PREFIX}{stamp}", since, until),))

    @property
    def keys(self) -> list[str]:
        return [window.key for window in self.windows]

    @property
    def start(self) -> datetime | None:
        return self.windows[0].start

    @property
    def end(self) -> datetime | None:
        return self.windows[-1].end

    def oai_range(self, granularity: Granularity) -> tuple[str | None, str | None]:
        """Inclusive OAI from/until for the whole range, at the source's granularity.

        A day-granular source cannot split a day: a range of `--since`/`--until` moments
        within days grows to the whole days (harvesting a record again is idempotent)."""
        start, end = self.start, self.end
        if granularity == "day":
            start = _day_start(start) if start is not None else None
            if end is not None and end != _day_start(end):
                end = _day_start(end) + timedelta(days=1)
        if end is None:
            return (format_datestamp(start, granularity) if start else None), None
        # An open start still needs a day-aligned start to compute `until` from.
        from_, until = oai_bounds(start or end - timedelta(days=1), end, granularity)
        return (from_ if start else None), until

    def holds(self, datestamp: str) -> bool:
        """Whether the datestamp lies within the range (one that is no date: taken as so)."""
        moment = read_datestamp(datestamp)
        if moment is None:
            return True
        return (self.start is None or self.start <= moment) and (
            self.end is None or moment < self.end
        )

    @property
    def within_days(self) -> bool:
        """Whether the range starts or ends within a day (`--since`/`--until` with hours),
        which a source listing by day widens to whole days."""
        return any(
            moment is not None and moment != _day_start(moment) for moment in (self.start, self.end)
        )

    @property
    def hours_asked(self) -> list[str | None] | None:
        """The range's moments if it starts or ends within a day, as its run keeps them
        (None otherwise): every attempt of the run leaves out the records a source listing
        by day lists outside them, the attempt `--resume` starts too (its scope is open)."""
        if not self.within_days:
            return None
        return [moment.isoformat() if moment else None for moment in (self.start, self.end)]

    def with_hours_asked(self, hours: list[str | None] | None) -> HarvestScope:
        """This open scope (`--resume` of a run) over the range the run was asked for."""
        if not hours:
            return self
        start, end = (datetime.fromisoformat(moment) if moment else None for moment in hours)
        return HarvestScope(self.harvester_id, (Window(self.keys[0], start, end),))

    def listed_for_whole_day(self, datestamp: str) -> bool:
        """Whether a record lies outside the range, on one of the days it starts or ends in:
        listed only because the source was asked for whole days. Such a record was not asked
        for: it is not harvested, nor does it use the cap. A datestamp of a day only (or no
        date) may be any moment of that day: it is kept."""
        text = datestamp.strip()
        if len(text) <= len("YYYY-MM-DD"):
            return False
        moment = read_datestamp(text)
        if moment is None:
            return False
        start, end = self.start, self.end
        if start is not None and _day_start(start) <= moment < start:
            return True
        return end is not None and end <= moment < _day_start(end - _TICK) + timedelta(days=1)

    def window_key_for(self, datestamp: str) -> str:
        """The window a record belongs to; records outside the range go to the nearest end."""
        if len(self.windows) == 1:
            return self.windows[0].key
        moment = read_datestamp(datestamp)
        if moment is None:
            return self.windows[0].key
        return self.windows[bisect.bisect_right(self._ends, moment)].key

    @cached_property
    def _ends(self) -> list[datetime]:
        """Window ends (exclusive) but the last, which may be open: computed once per scope."""
        return [w.end for w in self.windows[:-1]]  # type: ignore[misc]


# Less than any datestamp's precision: the day of an end is that of its last moment.
_TICK = timedelta(microseconds=1)


def _day_start(moment: datetime) -> datetime:
    """Midnight UTC of the moment's day."""
    return moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
