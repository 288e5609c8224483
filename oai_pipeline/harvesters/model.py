"""The harvester: an OAI-PMH endpoint, a format, a set, and how to transform and write.

CONTRACT: field names are fixed; the registry owner adds validators and spec parsing.

Plug-in specs are checked against the installed plug-ins when a harvester is built from
operator input. Reading a stored harvester back skips that check (validation context
`{"check_plugins": False}`), so an uninstalled plug-in never hides the registry. Checks
added later (base URL port, id length) skip stored harvesters too (`{"stored": True}`), so
one registered before them can still be listed, shown, fixed with `update` or deleted.
"""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import urlsplit

import httpx
from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from oai_pipeline.errors import ConfigurationError, has_lone_surrogate
from oai_pipeline.errors import describe_validation_error as describe_validation_error
from oai_pipeline.harvesters.plugins import (
    RDM_MODEL,
    PluginGroup,
    load_model,
    parse_spec,
    validate_spec,
    with_option,
)
from oai_pipeline.oai.base_url import shown, without_oai_arguments
from oai_pipeline.state.limits import MAX_INTEGER
from oai_pipeline.state.schema import harvesters as harvesters_table

# Harvester ids and community slugs: they end up in Dagster partition keys (`id|window`),
# file paths and comma-separated lists, so no spaces, '/', '|' or ','.
SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
HARVESTER_ID = SLUG
# What the windows of the partitions look like (YYYY-MM-DD, whatever their granularity).
_LOOKS_LIKE_A_WINDOW = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# Longer ids would not fit the state store's columns (PostgreSQL refuses, SQLite would not).
MAX_HARVESTER_ID_LENGTH: int = harvesters_table.c.id.type.length  # type: ignore[attr-defined]
_EMAIL = re.compile(r"^[^@\s,;]+@[^@\s,;]+\.[^@\s,;.]+$")
MAX_BATCH_SIZE = 10_000
# What a harvester given neither a model nor a transformer nor a writer gets.
DEFAULT_MODEL = RDM_MODEL.name


def check_slug(value: str, what: str, *, max_length: int | None) -> str:
    """The one naming rule for harvester ids and community slugs (ValueError naming `what`)."""
    # Length first, so that the message does not repeat a huge value.
    if max_length is not None and len(value) > max_length:
        raise ValueError(f"a {what} has at most {max_length} characters, not {len(value)}")
    if not SLUG.match(value):
        raise ValueError(
            f"{value!r} is not a {what}: lowercase letters, digits, '-' and '_', "
            "starting with a letter or digit"
        )
    return value


def _stored(info: ValidationInfo) -> bool:
    return bool((info.context or {}).get("stored"))


def _check_spec(group: PluginGroup, text: str, info: ValidationInfo) -> str:
    check_plugins = (info.context or {}).get("check_plugins", True)
    try:
        if check_plugins:
            validate_spec(group, text)
        else:
            parse_spec(text)
    except ConfigurationError as error:
        raise ValueError(str(error)) from None
    return text.strip()


def _transformer_spec(text: str, info: ValidationInfo) -> str:
    return _check_spec("transformers", text, info)


def _writer_spec(text: str, info: ValidationInfo) -> str:
    return _check_spec("writers", text, info)


# Checked one by one, so an error names the item: `writers.1`.
TransformerSpec = Annotated[str, AfterValidator(_transformer_spec)]
WriterSpec = Annotated[str, AfterValidator(_writer_spec)]


class Harvester(BaseModel):
    model_config = {"extra": "forbid"}

    id: str
    name: str = ""
    comment: str = ""
    base_url: str
    metadata_prefix: str
    setspec: str | None = None
    loader: str = "oai-pmh"
    transformers: list[TransformerSpec] = Field(default_factory=list)
    writers: list[WriterSpec] = Field(default_factory=list)
    harvest_managers: list[str] = Field(default_factory=list)
    rate_limit_per_minute: int | None = Field(default=None, le=MAX_INTEGER)
    batch_size: int = 500  # records per writer transaction
    enabled: bool = True

    @field_validator("*", mode="before")
    @classmethod
    def _storable_text(cls, value: Any) -> Any:
        """Text the state store keeps: a fixture's `"\\ud800"` (a lone surrogate) or `"\\0"`
        (PostgreSQL refuses NUL) was a traceback at the database."""
        for text in value if isinstance(value, list) else (value,):
            if isinstance(text, str) and "\0" in text:
                raise ValueError(f"{text!r} holds a NUL character")
            if isinstance(text, str) and has_lone_surrogate(text):
                raise ValueError(f"{text!r} holds a lone surrogate, not text")
        return value

    @field_validator("id")
    @classmethod
    def _id(cls, value: str, info: ValidationInfo) -> str:
        if _stored(info):  # registered before these rules: it keeps its id
            return check_slug(value, "harvester id", max_length=None)
        if _LOOKS_LIKE_A_WINDOW.match(value):
            # A partition key is `harvester|window`: a key typed the other way round would
            # name an existing harvester and a window, and be taken for one.
            raise ValueError(
                f"{value!r} is not a harvester id: it reads as a date, as the windows of the "
                "Dagster partitions do; name the source (e.g. 'zenodo-2024')"
            )
        return check_slug(value, "harvester id", max_length=MAX_HARVESTER_ID_LENGTH)

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str, info: ValidationInfo) -> str:
        value = value.strip()
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or " " in value:
            raise ValueError(f"{shown(value)!r} is not an http(s) URL")
        if _stored(info):
            return value
        try:
            port = parts.port  # ValueError if not a number or above 65535
        except ValueError:
            port = 0
        if port == 0:  # caught here, not as an httpx traceback at the first harvest
            raise ValueError(f"{shown(value)!r}: the port must be a number from 1 to 65535")
        try:  # control characters, a host that is no IDNA name: refused by every request
            httpx.URL(value)
        except httpx.InvalidURL as error:
            message = f"{shown(value)!r} is not a URL a request can go to: {error}"
            raise ValueError(message) from None
        # A request URL pasted as the base URL names the endpoint by what it leaves out (see
        # pasted_arguments_note); one stored so before is harvested as is (the client leaves
        # the arguments out) until it is updated.
        return without_oai_arguments(value)[0]

    @field_validator("metadata_prefix")
    @classmethod
    def _metadata_prefix(cls, value: str) -> str:
        value = value.strip()
        if not value or any(c.isspace() for c in value):
            raise ValueError("a metadata prefix is one word, e.g. oai_dc")
        return value

    @field_validator("setspec")
    @classmethod
    def _setspec(cls, value: str | None) -> str | None:
        value = (value or "").strip()
        if any(c.isspace() for c in value):
            raise ValueError(f"{value!r} is not a setSpec (no spaces)")
        return value or None

    @field_validator("loader")
    @classmethod
    def _loader(cls, value: str, info: ValidationInfo) -> str:
        return _check_spec("readers", value, info)

    @field_validator("harvest_managers")
    @classmethod
    def _harvest_managers(cls, value: list[str]) -> list[str]:
        cleaned = [address.strip() for address in value]
        for address in cleaned:
            if not _EMAIL.match(address):
                raise ValueError(f"{address!r} is not an e-mail address")
        return cleaned

    @field_validator("rate_limit_per_minute")
    @classmethod
    def _rate_limit(cls, value: int | None) -> int | None:
        if value is not None and value <= 0:
            raise ValueError("must be greater than 0 (leave it out for no limit)")
        return value

    @field_validator("batch_size")
    @classmethod
    def _batch_size(cls, value: int) -> int:
        if not 1 <= value <= MAX_BATCH_SIZE:
            raise ValueError(f"must be between 1 and {MAX_BATCH_SIZE}")
        return value

    @classmethod
    def from_input(
        cls,
        data: dict[str, Any],
        *,
        model: str | None = None,
        community: str | None = None,
    ) -> Harvester:
        """Build from CLI or fixture input: `model` fills in the transformer and writer
        not given explicitly (given none of the three, the default model does), `community`
        is added to every writer's options."""
        harvester = cls.model_validate(apply_model_and_community(data, model, community))
        for field in ("transformers", "writers"):
            # Without either, no record is ever written and no run can succeed.
            if not getattr(harvester, field):
                raise _field_error(
                    field,
                    f"a harvester needs {field}: give a model (`--model {DEFAULT_MODEL}`) "
                    "or both a transformer and a writer",
                    [],
                )
        names = [parse_spec(text).name for text in harvester.writers]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            # Both would write the same records (one record per source identifier) and
            # share one memory of what was written: give one writer several communities.
            raise _field_error(
                "writers",
                f"writer {repeated[0]!r} is given more than once; one writer writes each "
                "record (a record's communities: the writer's `community` and the "
                "transformer's `set_communities`)",
                harvester.writers,
            )
        return harvester

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> Harvester:
        """A harvester read back from the store: shape checked, plug-ins not loaded."""
        return cls.model_validate(data, context={"check_plugins": False, "stored": True})

    def shown(self) -> dict[str, Any]:
        """The harvester as it is printed (command line, Dagster metadata), JSON-safe: its base
        URL's password, if it names one, as `***`."""
        return {**self.model_dump(mode="json"), "base_url": shown(self.base_url)}


def apply_model_and_community(
    data: dict[str, Any], model: str | None, community: str | None
) -> dict[str, Any]:
    """`--model` and `--community` expanded into `transformers` and `writers`."""
    data = dict(data)
    if model is None and not data.get("transformers") and not data.get("writers"):
        model = DEFAULT_MODEL
    if model is not None:
        try:
            spec = load_model(model)
        except ConfigurationError as error:
            raise _field_error("model", str(error), model) from None
        if not data.get("transformers"):
            data["transformers"] = [spec.transformer]
        if not data.get("writers"):
            data["writers"] = [spec.writer]
    if community is not None:
        if not community.strip():
            raise _field_error("community", "must not be empty", community)
        if not data.get("writers"):
            raise _field_error(
                "community", "needs a writer to add it to (give a model or a writer)", community
            )
        try:
            data["writers"] = [with_option(w, "community", community) for w in data["writers"]]
        except ConfigurationError as error:
            raise _field_error("writers", str(error), data["writers"]) from None
    return data


def _field_error(field: str, message: str, value: Any) -> ValidationError:
    """A ValidationError naming `field`, as pydantic would raise it for a bad field."""
    from pydantic_core import InitErrorDetails, PydanticCustomError

    return ValidationError.from_exception_data(
        "Harvester",
        [
            InitErrorDetails(
                type=PydanticCustomError(
                    "value_error", "Value error, {reason}", {"reason": message}
                ),
                loc=(field,),
                input=value,
            )
        ],
    )
