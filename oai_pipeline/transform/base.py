"""The transformer interface: a harvested record becomes target record data."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel

from oai_pipeline import json_codec
from oai_pipeline.errors import RecordError

# The revision of what the shipped transformers make of a record: raised with every change of
# their output (the golden outputs re-recorded; oai_pipeline_tests/transform/test_golden.py
# holds the two together). A harvester's transform fingerprint holds it, so an install upgraded
# in place makes again, and writes, the transforms it stored before, as a fresh install would.
# The package version alone did so only when it was raised, and then only once reinstalled:
# the transform fixes after 0.3.1 never reached records harvested by 0.3.1.
OUTPUT_REVISION = 19


class NoOptions(BaseModel):
    model_config = {"extra": "forbid"}


class _DecodedOnRead:
    """`TransformItem.data`, which a transformer may give as JSON text (`set_data_json`):
    decoded only when something reads it. A worker whose chain ends with `oai-import` sends
    the text as it is, and the dict pydantic dumped for it (then encoded again) was ~15 % of
    a record's transform."""

    def __get__(self, item: TransformItem | None, owner: type) -> dict[str, Any] | None:
        if item is None:
            return None  # the dataclass field's default
        if item._data_json is not None:
            item._data, item._data_json = json_codec.loads(item._data_json), None
        return item._data

    def __set__(self, item: TransformItem, value: dict[str, Any] | None) -> None:
        item._data, item._data_json = value, None


@dataclass
class TransformItem:
    """One record travelling through a harvester's transformer chain.

    The first transformer reads `xml` (the whole OAI <record> element) and fills `data`;
    later ones may refine `data`, `pid` and `communities`. A transformer that fails sets
    `error` and the chain stops for this record only.
    """

    identifier: str
    datestamp: str
    set_specs: list[str]
    xml: bytes | None
    data: _DecodedOnRead = _DecodedOnRead()  # dict[str, Any] | None
    pid: str | None = None
    communities: list[str] = field(default_factory=list)
    error: RecordError | None = None
    # Behind `data`, set by its __set__ in __init__ (not fields: __init__ would reset them
    # after it): `_data`, the decoded data, or `_data_json`, the JSON text not decoded yet.

    def set_data_json(self, text: str) -> None:
        """The data as JSON text (made by `json_codec.dumps` or alike), decoded when read."""
        self._data, self._data_json = None, text

    def data_json(self) -> str | None:
        """The data as JSON text: as given, or encoded; raises TypeError if it is not JSON."""
        if self._data_json is not None:
            return self._data_json
        return None if self._data is None else json_codec.dumps(self._data)


class Transformer(ABC):
    """A plug-in registered under the `oai_pipeline.transformers` entry point group."""

    Options: ClassVar[type[BaseModel]] = NoOptions

    def __init__(self, options: BaseModel) -> None:
        self.options = options

    @abstractmethod
    def transform(self, items: list[TransformItem]) -> None:
        """Transform a batch in place; per-record failures go to `item.error`, never raised."""
