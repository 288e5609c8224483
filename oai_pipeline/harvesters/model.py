"""The harvester: an OAI-PMH endpoint, a format, a set, and how to transform and write.

CONTRACT: field names are fixed; the registry owner adds validators and spec parsing.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class Harvester(BaseModel):
    model_config = {"extra": "forbid"}

    id: str
    name: str = ""
    comment: str = ""
    base_url: str
    metadata_prefix: str
    setspec: str | None = None
    loader: str = "oai-pmh"
    transformers: list[str] = Field(default_factory=list)
    writers: list[str] = Field(default_factory=list)
    harvest_managers: list[str] = Field(default_factory=list)
    rate_limit_per_minute: int | None = None
    batch_size: int = 100
    enabled: bool = True
