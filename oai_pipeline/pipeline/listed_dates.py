"""Whether a source's list keeps to the dates it was asked for.

A source that ignores `from`/`until` (or selects by another date than the datestamps it
sends) lists records dated days outside them. The harvest stays right (records unchanged
since their last harvest are skipped), but every incremental harvest lists the whole source
again, and an operator wondering why a daily run takes hours is told why, once a run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from oai_pipeline.oai.types import HarvestedRecord
from oai_pipeline.oai.windows import format_datestamp, read_datestamp

# Days outside the days asked for that time zones do not explain: a source writing its local
# time with `Z` is off by 14 hours at most, so a record a day beyond is listed all the same.
_SLACK = timedelta(days=1)
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _day_beside(moment: datetime | None, step: timedelta) -> str | None:
    """The day `step` from `moment`; None for no moment, or none beyond the calendar's ends
    (`--since 0001-01-01`): no record is dated there."""
    if moment is None:
        return None
    try:
        return format_datestamp(moment + step, "day")
    except OverflowError:
        return None


@dataclass
class ListedDates:
    """The records of a run's lists dated more than a day outside the days it asked for,
    counted page by page by the day each datestamp names (a string comparison: nothing
    parsed per record)."""

    first_day: str | None  # the earliest day a record may name unremarked, or None (no from)
    last_day: str | None  # the latest, or None (no until)
    asked: str  # the dates asked for, as the notice says them
    listed: int = 0
    outside: int = 0
    example: str = field(default="")

    @classmethod
    def asked_for(cls, from_: str | None, until: str | None) -> ListedDates:
        """For a list asked `from_` .. `until` (OAI bounds, both inclusive)."""
        start = read_datestamp(from_) if from_ else None
        end = read_datestamp(until) if until else None
        return cls(
            first_day=_day_beside(start, -_SLACK),
            last_day=_day_beside(end, _SLACK),
            asked=f"{from_ or '…'} .. {until or '…'}",
        )

    def look_at(self, records: list[HarvestedRecord]) -> None:
        """Count a page's records: those dated by the source (a deletion the run dated by the
        response is not), by the day they name."""
        if self.first_day is None and self.last_day is None:
            return
        for record in records:
            day = record.datestamp.lstrip()[:10]
            if record.undated_deletion or not _DAY.fullmatch(day):
                continue
            self.listed += 1
            if (self.first_day is not None and day < self.first_day) or (
                self.last_day is not None and day > self.last_day
            ):
                self.outside += 1
                if not self.example:
                    self.example = f"{record.identifier} dated {record.datestamp}"

    def notice(self) -> str | None:
        """The run's one line when any record was dated outside, else None."""
        if not self.outside:
            return None
        return (
            f"{self.outside} of the {self.listed} records the source listed "
            f"{'is' if self.outside == 1 else 'are'} dated more than a day outside the dates "
            f"asked for ({self.asked}), e.g. {self.example}: the source ignores from/until, or "
            "selects by another date than its datestamps; such records are harvested "
            "(unchanged ones skipped), and listed again by each incremental harvest"
        )
