"""The one exception an import raises: a per-record failure with a stable type and a field path."""

from __future__ import annotations

from oai_pipeline.errors import RecordError

# The stable error types of this package; the sync/status code and the tests rely on the strings.
UNKNOWN_ROOT = "unknown_root"
MISSING_FIELD = "missing_field"
INVALID_DATE = "invalid_date"
VALIDATION = "validation"
MALFORMED_XML = "malformed_xml"
# The type the OAI page reader gives an empty <metadata/>: one problem, one type.
MISSING_METADATA = "MissingMetadata"


# The longest value an error message quotes whole: a field holding a whole abstract (or a
# page of garbage) would make its record's error as long, in `status`, `records list` and
# the materialisation's preview of errors.
SHOWN_VALUE_LENGTH = 100


def shown(value: object) -> str:
    """`value` as an error message quotes it (its repr), a long text cut, saying its length."""
    if not isinstance(value, str) or len(value) <= SHOWN_VALUE_LENGTH:
        return repr(value)
    return f"{value[:SHOWN_VALUE_LENGTH]!r}… ({len(value)} characters)"


class TransformFailure(Exception):
    """Raised inside an import for one record; the transformer turns it into `item.error`."""

    def __init__(self, type: str, message: str, location: str | None = None) -> None:
        super().__init__(message)
        self.type = type
        self.message = message
        self.location = location

    def to_record_error(self) -> RecordError:
        return RecordError(type=self.type, message=self.message, location=self.location)


def missing_field(location: str, what: str) -> TransformFailure:
    return TransformFailure(MISSING_FIELD, f"the record has no {what}", location)
