"""What an operator can ask of one harvest run (CLI flags and Dagster run config alike)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from oai_pipeline.state.schema import MAX_INTEGER
from oai_pipeline.state.store import SCALES

Scale = Literal["smoke", "small", "medium", "large", "full"]


class RunOptions(BaseModel):
    model_config = {"extra": "forbid"}

    scale: Scale | None = None
    max_records: int = Field(default=0, ge=0, le=MAX_INTEGER)
    include_existing: bool = False
    rate_limit_per_minute: int | None = Field(default=None, gt=0, le=MAX_INTEGER)
    update_all: bool = False
    progress_every: int = Field(default=1000, gt=0, le=MAX_INTEGER)
    reset_stale_running_minutes: int | None = Field(default=None, ge=0, le=MAX_INTEGER)
    retry_failed: bool = False
    resume_batch_id: int | None = Field(default=None, le=MAX_INTEGER)
    identifiers: list[str] = Field(default_factory=list)

    @field_validator("identifiers")
    @classmethod
    def _identifiers(cls, value: list[str]) -> list[str]:
        # A blank one failed the whole run with the source's badArgument, or was stored as
        # a harvest record named '  '.
        if any(not identifier.strip() for identifier in value):
            raise ValueError("an OAI identifier must not be blank")
        return value

    @model_validator(mode="after")
    def _one_cap(self) -> RunOptions:
        if self.scale is not None and self.max_records:
            raise ValueError("give either a scale or max_records, not both")
        return self

    @property
    def cap(self) -> int:
        """How many records this run may stage; 0 = uncapped."""
        if self.max_records:
            return self.max_records
        return SCALES[self.scale] if self.scale else 0
