"""What an operator can ask of one harvest run (CLI flags and Dagster run config alike)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from oai_pipeline.oai.types import MAX_IDENTIFIER_LENGTH
from oai_pipeline.state.limits import MAX_COUNT, MAX_INTEGER
from oai_pipeline.state.store import SCALES

Scale = Literal["smoke", "small", "medium", "large", "full"]


class RunOptions(BaseModel):
    model_config = {"extra": "forbid"}

    scale: Scale | None = Field(
        default=None,
        description="cap: smoke 10, small 100, medium 1000, large 10000, full uncapped",
    )
    max_records: int = Field(default=0, ge=0, le=MAX_COUNT, description="exact cap; 0 = uncapped")
    include_existing: bool = Field(
        default=False,
        description="capped runs: count records the target already holds towards the cap",
    )
    rate_limit_per_minute: int | None = Field(
        default=None,
        gt=0,
        le=MAX_INTEGER,
        description="at most this many requests a minute to the source (overrides the harvester's)",
    )
    update_all: bool = Field(default=False, description="rewrite records even if unchanged")
    progress_every: int = Field(
        default=1000, gt=0, le=MAX_INTEGER, description="log progress every this many records"
    )
    reset_stale_running_minutes: int | None = Field(
        default=None,
        ge=0,
        le=MAX_INTEGER,
        description="resumed runs: write records an earlier attempt left running this many "
        "minutes ago (default: at once, as the lease proves that attempt is gone)",
    )
    retry_failed: bool = Field(
        default=False,
        description="write again the records that failed in an earlier attempt of a resumed "
        "run; a capped run takes unchanged failed records again",
    )
    resume_batch_id: int | None = Field(
        default=None, le=MAX_INTEGER, description="resume this harvest run"
    )
    identifiers: list[str] = Field(default_factory=list)
    reconcile: bool = Field(
        default=False,
        description="set by a reconcile on the run that harvests again the records the source "
        "lists again: the next reconcile resumes the run if it did not succeed",
    )

    @field_validator("identifiers")
    @classmethod
    def _identifiers(cls, value: list[str]) -> list[str]:
        # A blank one failed the whole run with the source's badArgument, or was stored as
        # a harvest record named '  '.
        if any(not identifier.strip() for identifier in value):
            raise ValueError("an OAI identifier must not be blank")
        # One the state store cannot keep failed the run at the database (PostgreSQL refuses
        # it with the whole page; SQLite kept it): the source's own are cut, see oai.pages.
        for identifier in value:
            if len(identifier) > MAX_IDENTIFIER_LENGTH:
                raise ValueError(
                    f"an OAI identifier has at most {MAX_IDENTIFIER_LENGTH} characters, "
                    f"not {len(identifier)}"
                )
        # The same one given twice was asked of the source twice (a request for nothing).
        return list(dict.fromkeys(value))

    @model_validator(mode="after")
    def _one_cap(self) -> RunOptions:
        if self.scale is not None and self.max_records:
            raise ValueError("give either a scale or max_records, not both")
        return self

    @classmethod
    def describe(cls, name: str) -> str:
        """One wording of an option for the CLI's --help and Dagster's launchpad."""
        return cls.model_fields[name].description or ""

    @property
    def cap_given(self) -> bool:
        """Whether a cap was asked for (`full` too), not left out."""
        return self.scale is not None or self.max_records > 0

    @property
    def cap(self) -> int:
        """How many records this run may stage; 0 = uncapped."""
        if self.max_records:
            return self.max_records
        return SCALES[self.scale] if self.scale else 0
