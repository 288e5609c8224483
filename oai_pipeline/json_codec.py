"""JSON for record data on the hot path: orjson, several times faster than the json module.

Record data is JSON-safe by construction (pydantic `model_dump(mode="json")`), so orjson's
stricter rules (string keys, 64-bit integers) cost nothing; a value it refuses is refused
as the json module would refuse a set: with a TypeError.
"""

from __future__ import annotations

from typing import Any

import orjson


def dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def loads(text: str | bytes) -> Any:
    return orjson.loads(text)


class Encoded(str):
    """JSON text `dumps` already made, to store in a JSON column as it is: the transform
    workers send a record's data as this text, and decoding it only for the column to encode
    it again was about a fifth of the transform stage's own time (its workers waiting)."""


def _column_dumps(value: Any) -> str:
    # a plain str for the driver (a database driver may adapt parameters by exact type)
    return str(value) if isinstance(value, Encoded) else dumps(value)


# SQLAlchemy engine arguments: JSON columns encoded and decoded with the same codec.
ENGINE_JSON: dict[str, Any] = {"json_serializer": _column_dumps, "json_deserializer": loads}
