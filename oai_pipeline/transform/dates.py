"""EDTF-safe dates: the subset of EDTF every repository accepts (YYYY, YYYY-MM, YYYY-MM-DD, A/B).

Sources write dates in more forms than that; the unambiguous ones (a timestamp, `2020/05/01`,
`2020.05.01`, `20200501`, `May 2020`, `1 May 2020`, `May 1, 2020`, German and French month
names, a year range `2019-2020`, and the German/European `01.05.2020`, which is always day
first) are read into that subset. Library catalogues' approximate years (`ca. 1900`,
`[1885?]`, `1885.`, `19--`, `1950s`) are read as the year or the interval of years. Numeric
forms with slashes and the year last (`12/05/2020`) are day first in Europe and month first
in the US: ambiguous, and refused.
"""

from __future__ import annotations

import calendar
import re
from typing import NamedTuple

from oai_pipeline.transform.failure import INVALID_DATE, TransformFailure, shown
from oai_pipeline.transform.text_cache import short_text_cache

ACCEPTED_FORMS = (
    "YYYY, YYYY-MM, YYYY-MM-DD (or a timestamp), YYYYMMDD, YYYY/MM/DD, YYYY/MM, YYYY.MM.DD, "
    "DD.MM.YYYY, "
    "MM.YYYY, 'May 2020', '1 May 2020', 'May 1, 2020', '12. Mai 2020', a year range "
    "YYYY-YYYY or an interval A/B of these, "
    "or an approximate year ('ca. 1900', '[1885?]', '19--', '1950s')"
)
"""The forms `normalize_date` reads, for the error messages of the imports."""

# Digits are ASCII digits (`[0-9]`, not `\d`, which also matches `٢٠٢٠` and `２０２０`):
# EDTF is written in them, and a date in other digits kept as it is would be no EDTF date.
_DATE = re.compile(r"^([0-9]{4})(?:-([0-9]{2})(?:-([0-9]{2}))?)?$")
# A full timestamp (as OAI datestamps and DSpace dc:date carry) is cut to its day, once its
# time of day (and offset) is checked: `T25:99:99Z` is a corrupt value, not that day.
_TIMESTAMP = re.compile(
    r"^([0-9]{4}-[0-9]{2}-[0-9]{2})[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.[0-9]+)?)?"
    r"(?:Z|[+-]([0-9]{2}):?([0-9]{2}))?$"
)
# Years that stand for no date at all: `0000` (an empty date field exported as digits) and
# `9999` ("until further notice"). As a publication date they would be kept as the year 0 or
# a year eight millennia away.
PLACEHOLDER_YEARS = frozenset({"0000", "9999"})
# Year first with slashes is unambiguous: 2020/05/01, 2020/5. (2020/2021 is an interval.)
_SLASHED = re.compile(r"^([0-9]{4})/([0-9]{1,2})(?:/([0-9]{1,2}))?$")
# Year first, unpadded (`2020-5-1`), or with dots as Hungarian, Chinese and Korean sources
# write it (`2020.05.01`, `2020. 05. 01.`), and ISO 8601's basic form (`20200501`).
_UNPADDED = re.compile(r"^([0-9]{4})(?:-|\.\s?)([0-9]{1,2})(?:-|\.\s?)([0-9]{1,2})\.?$")
_BASIC = re.compile(r"^([0-9]{4})([0-9]{2})([0-9]{2})$")
# Dots are the German/European numeric form, always day first: 12.05.2020, 1.5.2020, 05.2020.
# A two-digit year (12.05.20) names no century and is refused.
_DOTTED = re.compile(r"^(?:([0-9]{1,2})\.\s?)?([0-9]{1,2})\.\s?([0-9]{4})$")
_YEAR_RANGE = re.compile(r"^([0-9]{4})\s*[-\u2013]\s*([0-9]{4})$")
_MONTHS = {
    name: number
    for number in range(1, 13)
    for name in (calendar.month_name[number].lower(), calendar.month_abbr[number].lower())
}
_MONTHS["sept"] = 9
# German and French month names, as German and European repositories write them
# (`12. Mai 2020`, `März 2020`, `1 juin 2020`); none is another month's English name.
_FOREIGN_MONTHS = (
    ("januar", "jänner", "janvier", "janv"),
    ("februar", "feber", "février", "fevrier", "févr", "fevr"),
    ("märz", "maerz", "mrz", "mär", "mars"),
    ("avril", "avr"),
    ("mai",),
    ("juni", "juin"),
    ("juli", "juillet", "juil"),
    ("août", "aout"),
    ("septembre",),
    ("oktober", "okt", "octobre"),
    ("novembre",),
    ("dezember", "dez", "décembre", "decembre", "déc"),
)
_MONTHS.update({name: number for number, names in enumerate(_FOREIGN_MONTHS, 1) for name in names})
_MONTH = r"([^\W\d_]{3,9})\.?"
_MONTH_YEAR = re.compile(rf"^{_MONTH}\s+([0-9]{{4}})$")  # May 2020
_DAY_MONTH_YEAR = re.compile(rf"^([0-9]{{1,2}})\.?\s+{_MONTH},?\s+([0-9]{{4}})$")  # 1 May 2020
_MONTH_DAY_YEAR = re.compile(rf"^{_MONTH}\s+([0-9]{{1,2}}),?\s+([0-9]{{4}})$")  # May 1, 2020


# Library catalogues' approximate years (AACR2/RDA): "ca. 1900", "circa 1900", "c1900",
# "[1885?]", "1885?", "[1920]", "1885." (ISBD's closing period): the year. "19--" (century
# unknown digits, also "19uu") and "1950s" (a decade): the interval of years they cover.
_APPROXIMATE_YEAR = re.compile(
    r"^\[?\s*(?:(?:ca|c|circa|approx|approximately|around|about)\.?\s*)?([0-9]{4})\s*\??\s*\]?\??\.?$",
    re.I,
)
_UNKNOWN_DIGITS = re.compile(r"^\[?([0-9]{2,3})(-{1,2}|[ux]{1,2}|\?{1,2})\??\]?$", re.I)
_DECADE = re.compile(r"^([0-9]{3})0'?s$")


def _approximate(text: str) -> str | None:
    """The EDTF year or interval of an approximate year, or None when `text` is none."""
    if match := _APPROXIMATE_YEAR.match(text):
        return match.group(1) if match.group(1) not in PLACEHOLDER_YEARS else None
    if (match := _UNKNOWN_DIGITS.match(text)) and len(match.group(1) + match.group(2)) == 4:
        known = match.group(1)
        return f"{known.ljust(4, '0')}/{known.ljust(4, '9')}"
    if match := _DECADE.match(text):
        return f"{match.group(1)}0/{match.group(1)}9"
    return None


class _UnknownForm(ValueError):
    """A text that is no date form at all (not a date with a bad month or day)."""


def _invalid(text: str) -> _UnknownForm:
    return _UnknownForm(f"{shown(text)} is not a date of a known form ({ACCEPTED_FORMS})")


def _spelled(text: str) -> str | None:
    """`YYYY-MM[-DD]` of the other unambiguous forms, or None when `text` is none of them."""
    if match := _SLASHED.match(text) or _UNPADDED.match(text) or _BASIC.match(text):
        year, month, day = match.groups()
    elif match := _DOTTED.match(text):
        day, month, year = match.groups()
    elif text[:1].isalpha() or (text[:1].isdigit() and not text[:4].isdigit()):
        if match := _MONTH_YEAR.match(text):
            month_name, year = match.groups()
            day = None
        elif match := _DAY_MONTH_YEAR.match(text):
            day, month_name, year = match.groups()
        elif match := _MONTH_DAY_YEAR.match(text):
            month_name, day, year = match.groups()
        else:
            return None
        number = _MONTHS.get(month_name.lower())
        if number is None:
            return None
        month = str(number)
    else:
        return None
    return f"{year}-{int(month):02d}" + (f"-{int(day):02d}" if day is not None else "")


def is_timestamp(text: str) -> bool:
    """True when `text` is a date with a time of day (`2019-05-03T10:22:31Z`)."""
    return _TIMESTAMP.match(text.strip()) is not None


def _check_time(text: str, stamp: re.Match[str]) -> None:
    """ValueError when the time of day or the offset of a timestamp is none (`T25:99:99Z`);
    a leap second (`23:59:60`) is a time of day."""
    hour, minute, second, offset_hour, offset_minute = stamp.groups()[1:]
    if int(hour) > 23 or int(minute) > 59 or (second is not None and int(second) > 60):
        raise ValueError(f"{shown(text)} has no time of day {hour}:{minute}:{second or '00'}")
    if offset_hour is not None and (int(offset_hour) > 14 or int(offset_minute) > 59):
        raise ValueError(f"{shown(text)} has no UTC offset {offset_hour}:{offset_minute}")


def _single(text: str) -> str:
    stamp = _TIMESTAMP.match(text)
    if stamp is not None:
        _check_time(text, stamp)
    date = stamp.group(1) if stamp else text
    match = _DATE.match(date)
    if not match:
        spelled = _spelled(date)
        match = _DATE.match(spelled) if spelled is not None else None
        if match is None:
            raise _invalid(text)
        date = match.group(0)
    year, month, day = match.groups()
    if year in PLACEHOLDER_YEARS:
        raise ValueError(f"{shown(text)} is a placeholder for no date, not the year {year}")
    if month is not None and not 1 <= int(month) <= 12:
        raise ValueError(f"{shown(text)} has no month {int(month)}")
    if day is not None and not 1 <= int(day) <= calendar.monthrange(int(year), int(month))[1]:
        raise ValueError(f"{shown(text)} has no day {int(day)}")
    return date


def _interval(text: str, start_text: str, end_text: str) -> str:
    try:
        start, end = _single(start_text.strip()), _single(end_text.strip())
    except _UnknownForm:
        raise _invalid(text) from None
    common = min(len(start), len(end))
    if start[:common] > end[:common]:
        raise ValueError(f"{shown(text)} is an interval that ends before it starts")
    return f"{start}/{end}"


@short_text_cache(maxsize=4096)
def normalize_date(text: str) -> str:
    """The EDTF-safe form of `text` (a date or an A/B interval); ValueError when it has none.

    Cached, as the import and then the validation normalise the same dates (a ValueError is
    not cached: it is raised afresh each time)."""
    text = text.strip()
    if "/" not in text:
        if (years := _YEAR_RANGE.match(text)) is not None:
            return _interval(text, *years.groups())
        try:
            return _single(text)
        except _UnknownForm:
            if (approximate := _approximate(text)) is not None:
                return approximate
            raise
    if _SLASHED.match(text):
        return _single(text)
    start_text, _, end_text = text.partition("/")
    return _interval(text, start_text, end_text)


# A year in free text (`Spring 2020`, `WS 2019/20`, `Published 2004`): four digits standing
# alone, from 1000 to 2999.
_YEAR_IN_TEXT = re.compile(r"(?<![0-9])([12][0-9]{3})(?![0-9])")
# What catalogues write for "no date": n.d., s.d., s.a. (sine anno), o.J. (ohne Jahr), undated.
_NO_DATE = re.compile(
    r"^\[?\s*(?:n\.\s?d|s\.\s?d|s\.\s?a|o\.\s?j|sine anno|ohne jahr|sans date|undated|"
    r"no date|unknown|unbekannt|0000|9999)\.?\s*\]?$",
    re.I,
)


def year_in_text(text: str) -> str | None:
    """The earliest year written in a text that is no date (`Spring 2020`: 2020), or None."""
    years = _YEAR_IN_TEXT.findall(text)
    return min(years) if years else None


def is_approximate(text: str) -> bool:
    """True when `normalize_date` reads `text` only as an approximate year, a year of unknown
    digits or a decade (`ca. 1900`, `[1885?]`, `19--`, `1950s`): its EDTF form says less than
    the text, so an import keeps the text beside it. ISBD's closing period (`1885.`) is none."""
    text = text.strip()
    if "/" in text or _YEAR_RANGE.match(text):
        return False
    try:
        _single(text)
        return False
    except ValueError:
        approximate = _approximate(text)
    return approximate is not None and approximate != text.rstrip(".")


def says_no_date(text: str) -> bool:
    """True for the catalogue terms that say a work is undated (`n.d.`, `[s.a.]`, `o.J.`) and
    for a placeholder year alone (`0000`, `9999`)."""
    return _NO_DATE.match(text.strip()) is not None


class ReadDate(NamedTuple):
    """A date as an import keeps it: EDTF, and the source's words when the date says less."""

    date: str
    words: str | None
    """The text, when it was read only approximately (`[1885?]`) or only as the year in its
    words (`Spring 1985`); None when the date says all it does."""
    exact: bool
    """True when `normalize_date` read the text (approximately or not), False when only the
    year in its words was taken."""


# A letter: `Spring 1985` and `Summer 2019` are words with a year, `2021-13-45` no date at all.
_LETTER = re.compile(r"[^\W\d_]")


@short_text_cache(maxsize=4096)
def read_date(text: str) -> ReadDate | None:
    """`text` as a date with its words (`[1885?]`: 1885 and the words; `Spring 1985`, a
    season or other words with a year: that year and the words), None when it is no date.
    Every import keeps dates so (one dropped the words, another the date, and oai_dc took
    the year of any text). A text of digits that is no date (`2021-13-45`) is none.

    Cached (a ReadDate is immutable): a harvest's records share their dates, and each was
    read twice (`is_approximate` reads it again)."""
    try:
        date = normalize_date(text)
    except ValueError:
        year = year_in_text(text) if _LETTER.search(text) else None
        return ReadDate(year, text.strip(), exact=False) if year is not None else None
    return ReadDate(date, text.strip() if is_approximate(text) else None, exact=True)


class ChosenDate(NamedTuple):
    """A publication date, the text it was read from and its words (`ReadDate.words`)."""

    date: str
    text: str
    words: str | None


def first_date(candidates: list[str]) -> ChosenDate:
    """The first of `candidates` (in the order of preference) that is a date of an accepted
    form, normalized; else the first that is words with a year (`Spring 1985`: 1985); when
    none is either, the record's invalid_date failure naming them all."""
    fallback: ChosenDate | None = None
    for candidate in candidates:
        found = read_date(candidate)
        if found is None:
            continue
        if found.exact:
            return ChosenDate(found.date, candidate, found.words)
        fallback = fallback or ChosenDate(found.date, candidate, found.words)
    if fallback is not None:
        return fallback
    raise unreadable_publication_date(candidates)


def _why_no_date(text: str) -> str:
    """Why `normalize_date` refuses `text`, its form's list left to the caller."""
    try:
        normalize_date(text)
    except _UnknownForm:
        return f"{shown(text)} is no date of a known form"
    except ValueError as error:
        return str(error)
    return f"{shown(text)} is a date"  # not reached by the callers, which pass refused texts


def unreadable_publication_date(texts: list[str], what: str = "") -> TransformFailure:
    """The record's invalid_date failure: why each of `texts` (` from dc:date`: `what` they
    are) is no date (`'2021-13-45' has no month 13`), then the accepted forms. The
    reasons were dropped, so a date with an impossible month read as one of an unknown form."""
    reasons = "; ".join(_why_no_date(text) for text in texts)
    return TransformFailure(
        INVALID_DATE,
        f"cannot read a publication date{what}: {reasons}; the accepted forms are {ACCEPTED_FORMS}",
        "metadata.publication_date",
    )
