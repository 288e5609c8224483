"""SQL compiled once per process, not once per engine.

SQLAlchemy keeps the compiled form of each statement in a cache of the engine's own, and
the pipeline makes a new engine each time it opens a store: a harvest opens its state
store, its lease and its target in each asset's step, a sensor's tick opens them again.
Each new engine compiled every query afresh; that was a sixth of the CPU of a harvest of
a few records (py-spy). Engines made with `new_engine` share one cache instead, each
statement compiled once for all engines whose dialects are configured alike: the same
class and driver, the same server version, the same settings (JSON codec, parameter
style, schema name). Engines that differ in any of these keep apart.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Hashable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.util import LRUCache

# A dialect's helpers made anew for each dialect from its settings, and its event listeners
# (`dispatch`: a connection's pragmas, which act when a statement runs, not when it is
# compiled): not part of what makes two dialects alike.
_PER_DIALECT_HELPERS = frozenset(
    {"_type_memos", "dispatch", "identifier_preparer", "type_compiler", "type_compiler_instance"}
)
# Kinds of alike dialects kept apart at most: past that, a dialect keeps its statements to
# itself (its own key), so a setting that varies per engine cannot grow the table for ever.
MAX_KINDS = 64
CAPACITY = 3000  # statements; SQLAlchemy's per-engine default is 500


def _setting(value: Any) -> Hashable:
    """A setting as it counts for alikeness: a plain value by value, what a memoised method
    found (SQLAlchemy keeps it as a function in the dialect, psycopg2's `_hstore_oids`) by
    that, anything else (the DBAPI module, the JSON codec's functions) by identity."""
    if callable(value) and getattr(value, "__qualname__", "").endswith(".<locals>.memo"):
        return ("memo", _setting(value()))
    if isinstance(value, str | int | float | bool | type(None)):
        return value
    if isinstance(value, tuple):
        try:
            hash(value)
        except TypeError:
            return ("id", id(value))
        return value
    return ("id", id(value))


def dialect_kind(dialect: sa.Dialect) -> tuple[Hashable, ...]:
    """What two dialects must share for a statement compiled by one to serve the other.
    Read after the first connection, which sets the server's version and what it supports."""
    settings = tuple(
        (name, _setting(value))
        for name, value in sorted(vars(dialect).items())
        if name not in _PER_DIALECT_HELPERS
    )
    return (type(dialect), settings)


class SharedStatementCache:
    """A `compiled_cache` (SQLAlchemy's execution option) for every engine of the process.

    SQLAlchemy's keys start with the engine's dialect; this cache puts the first dialect of
    the same kind in its place, so an engine finds what an alike one compiled."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._compiled: LRUCache[Any, Any] = LRUCache(capacity)
        self._first_of_kind: dict[tuple[Hashable, ...], sa.Dialect] = {}
        self._representative: weakref.WeakKeyDictionary[sa.Dialect, sa.Dialect] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def _shared_key(self, key: tuple[Any, ...]) -> tuple[Any, ...]:
        dialect = key[0]
        representative = self._representative.get(dialect)
        if representative is None:
            kind = dialect_kind(dialect)
            with self._lock:
                representative = self._first_of_kind.get(kind)
                if representative is None and len(self._first_of_kind) < MAX_KINDS:
                    representative = self._first_of_kind[kind] = dialect
                if representative is not None:  # not a dialect of its own past MAX_KINDS:
                    self._representative[dialect] = representative  # it would live for ever
        return key if representative is None else (representative, *key[1:])

    # What SQLAlchemy asks of a compiled cache (`ClauseElement._compile_w_cache`): get, set.
    def get(self, key: tuple[Any, ...], default: Any = None) -> Any:
        return self._compiled.get(self._shared_key(key), default)

    def __setitem__(self, key: tuple[Any, ...], compiled: Any) -> None:
        self._compiled[self._shared_key(key)] = compiled

    def __len__(self) -> int:
        return len(self._compiled)

    def kinds(self) -> int:
        """How many kinds of dialect share statements here."""
        return len(self._first_of_kind)


STATEMENTS = SharedStatementCache()


def new_engine(url: str | sa.URL, **options: Any) -> sa.Engine:
    """`sa.create_engine` whose compiled statements the process's alike engines share.

    On psycopg2, an UPDATE or DELETE given many rows goes in pages of statements
    (`execute_batch`), not a round trip per row (psycopg2's own executemany): the stores
    update rows by the batch, and a server across a network made a full harvest wait a
    round trip per record, twice (INSERTs already go many rows a statement)."""
    if sa.make_url(url).get_driver_name() == "psycopg2":
        options.setdefault("executemany_mode", "values_plus_batch")
    return sa.create_engine(url, execution_options={"compiled_cache": STATEMENTS}, **options)
