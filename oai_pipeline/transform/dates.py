"""EDTF-safe dates: the subset of EDTF every repository accepts (YYYY, YYYY-MM, YYYY-MM-DD, A/B)."""

from __future__ import annotations

import calendar
import re
from functools import lru_cache

_DATE = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?$")
# A full timestamp (as OAI datestamps and DSpace dc:date carry) is cut to its day.
_TIMESTAMP = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?$"
)


def _single(text: str) -> str:
    stamp = _TIMESTAMP.match(text)
    if stamp:
        text = stamp.group(1)
    match = _DATE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a date of the form YYYY, YYYY-MM or YYYY-MM-DD")
    year, month, day = match.groups()
    if month is not None and not 1 <= int(month) <= 12:
        raise ValueError(f"{text!r} has no month {month}")
    if day is not None and not 1 <= int(day) <= calendar.monthrange(int(year), int(month))[1]:
        raise ValueError(f"{text!r} has no day {day}")
    return text


@lru_cache(maxsize=4096)
def normalize_date(text: str) -> str:
    """The EDTF-safe form of `text` (a date or an A/B interval); ValueError when it has none.

    Cached, as the import and then the validation normalise the same dates (a ValueError is
    not cached: it is raised afresh each time)."""
    text = text.strip()
    if "/" not in text:
        return _single(text)
    start_text, _, end_text = text.partition("/")
    start, end = _single(start_text.strip()), _single(end_text.strip())
    common = min(len(start), len(end))
    if start[:common] > end[:common]:
        raise ValueError(f"{text!r} is an interval that ends before it starts")
    return f"{start}/{end}"
