"""A cache for the readers of the short texts a harvest repeats (dates, vocabulary terms,
ROR ids, language tags): records share them, and each is read several times per record.

A value of a feed may be 10 MB (the parser's limit): a plain ``lru_cache`` of thousands of
entries would keep as many such values as a hostile or broken feed sends, and fill the
memory. Only texts up to MAX_CACHED_LENGTH are kept; a longer one is read afresh.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, wraps
from typing import Any, TypeVar

MAX_CACHED_LENGTH = 256

Result = TypeVar("Result")


def short_text_cache(maxsize: int) -> Callable[[Callable[[Any], Result]], Callable[[Any], Result]]:
    """``lru_cache(maxsize)`` for a reader of one text (or None), keeping short texts only;
    ``cache_info`` and ``cache_clear`` are the cache's."""

    def decorate(read: Callable[[Any], Result]) -> Callable[[Any], Result]:
        cached = lru_cache(maxsize=maxsize)(read)

        @wraps(read)
        def reading(text: Any) -> Result:
            if text is None or len(text) <= MAX_CACHED_LENGTH:
                return cached(text)
            return read(text)

        reading.cache_info = cached.cache_info  # type: ignore[attr-defined]
        reading.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        return reading

    return decorate
