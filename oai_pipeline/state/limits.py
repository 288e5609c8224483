"""The bounds of numbers the state store keeps, apart from its tables: the command line
checks its options against them without loading SQLAlchemy."""

from __future__ import annotations

# The largest whole number SQLite's INTEGER holds, a PostgreSQL query compares with (as a
# bigint) and orjson writes: an id or limit given from outside is checked against it, not
# met as an OverflowError.
MAX_INTEGER = 2**63 - 1
# The largest count an `sa.Integer` column keeps on PostgreSQL (32 bits; SQLite's are 64): a
# count given from outside and stored (a run's record cap) is checked against it, not
# refused by the database ("integer out of range") with the harvest run it belongs to.
MAX_COUNT = 2**31 - 1
