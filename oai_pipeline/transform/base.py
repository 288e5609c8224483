"""The transformer interface: a harvested record becomes target record data."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel

from oai_pipeline.errors import RecordError

# The revision of what the shipped transformers make of a record: raised with every change of
# their output (the golden outputs re-recorded; oai_pipeline_tests/transform/test_golden.py
# holds the two together). A harvester's transform fingerprint holds it, so an install upgraded
# in place makes again, and writes, the transforms it stored before, as a fresh install would.
# The package version alone did so only when it was raised, and then only once reinstalled:
# the transform fixes after 0.3.1 never reached records harvested by 0.3.1.
OUTPUT_REVISION = 13


class NoOptions(BaseModel):
    model_config = {"extra": "forbid"}


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
    data: dict[str, Any] | None = None
    pid: str | None = None
    communities: list[str] = field(default_factory=list)
    error: RecordError | None = None


class Transformer(ABC):
    """A plug-in registered under the `oai_pipeline.transformers` entry point group."""

    Options: ClassVar[type[BaseModel]] = NoOptions

    def __init__(self, options: BaseModel) -> None:
        self.options = options

    @abstractmethod
    def transform(self, items: list[TransformItem]) -> None:
        """Transform a batch in place; per-record failures go to `item.error`, never raised."""
