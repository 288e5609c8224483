"""The writer interface: apply sync decisions to a target repository."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from pydantic import BaseModel, field_validator, model_validator

from oai_pipeline.doi import normal_doi
from oai_pipeline.errors import RecordError
from oai_pipeline.harvesters.model import check_slug
from oai_pipeline.identifier_prefix import RekeyPlan, RekeyRefused
from oai_pipeline.settings import Settings
from oai_pipeline.sync.rules import Action, LocalRecord

DEFAULT_PID_FIELD = "pids.doi"
# The error type of a record refused a pid another record holds.
DUPLICATE = "duplicate_pid"


def pid_of(data: dict[str, Any] | None, field: str = DEFAULT_PID_FIELD) -> str | None:
    """The pid at a dotted path of the data (a string, or an object's `identifier`), in the
    form pids are compared in (a DOI bare and in lower case)."""
    value: Any = data
    for part in field.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    if isinstance(value, dict):
        value = value.get("identifier")
    if not isinstance(value, str):
        return None
    return normal_doi(value)


class WriterOptions(BaseModel):
    """Options every writer understands (DESIGN.md: writer options)."""

    model_config = {"extra": "forbid"}

    # The options that change what the writer writes (not how, or when: `publish` reaches
    # the records through the target's state). A plug-in's own such options extend it.
    CONTENT_OPTIONS: ClassVar[tuple[str, ...]] = ("community", "pid_field")

    publish: bool = True
    direct_update: bool = False
    """Replace a published record in place instead of writing an edit draft and publishing
    it. Needs publish. The embedded target publishes a harvested update in the transaction
    that writes it, so there the two end the same; a target whose publishing is a step of
    its own (a remote repository's API) leaves no draft behind a failed publish with it."""
    update_all: bool = False
    pid_field: str = DEFAULT_PID_FIELD
    community: str | None = None

    @field_validator("pid_field")
    @classmethod
    def _pid_field(cls, value: str) -> str:
        # `""` or `pids..doi` found no pid in any record: takeovers silently stopped and the
        # same record could be created twice.
        if not all(part and part == part.strip() for part in value.split(".")):
            raise ValueError(f"{value!r} is not a field path like {DEFAULT_PID_FIELD}")
        return value

    @field_validator("community")
    @classmethod
    def _community(cls, value: str | None) -> str | None:
        # The rule `--community` and `target communities create` follow.
        return None if value is None else check_slug(value, "community slug", max_length=None)

    def content_options(self) -> dict[str, Any]:
        """Those of `CONTENT_OPTIONS` not at their default: what the writer's written
        fingerprint holds besides the transform's (see `written_fingerprint`)."""
        fields = type(self).model_fields
        return {
            name: getattr(self, name)
            for name in self.CONTENT_OPTIONS
            if getattr(self, name) != fields[name].get_default(call_default_factory=True)
        }

    def pid_in(self, data: dict[str, Any] | None, transform_pid: str | None) -> str | None:
        """The pid this writer finds a record by: the DOI the transform named, or, for
        another `pid_field`, what the data holds there (none when it holds nothing)."""
        if self.pid_field == DEFAULT_PID_FIELD:
            return transform_pid
        return pid_of(data, self.pid_field)

    @model_validator(mode="after")
    def _direct_update_publishes(self) -> WriterOptions:
        if self.direct_update and not self.publish:
            raise ValueError(
                "direct_update replaces the published record, publish: false leaves drafts "
                "for review: give one of them"
            )
        return self


@dataclass
class SourceKey:
    """How the target finds the local record of a harvested one: by source id, then by pid."""

    identifier: str
    pid: str | None = None


@dataclass
class PlannedWrite:
    identifier: str
    action: Action
    reason: str
    datestamp: str
    data: dict[str, Any] | None = None
    # `data` as the transform encoded it (None: not at hand): a writer that stores JSON text
    # stores this one rather than encode the data again.
    data_json: str | None = None
    # The pid the record is looked up by, read at the writer's `pid_field` (the transform's
    # DOI for the default one): the writer falls back to it where the data names none.
    pid: str | None = None
    communities: list[str] = field(default_factory=list)
    local_id: str | None = None
    # When the harvest run started: a revision made since then that holds exactly this data
    # is the run's own, written by an attempt that crashed before saving the outcome. A
    # reconcile gives when the state store last saved the record's write: a deletion at the
    # source made since is one of a reconcile killed before saving it.
    run_started: datetime | None = None
    # Brings back a record a user changed (`Writer.changed_locally`): the writer leaves it
    # marked changed locally until `settle_local_changes`, which follows the state store's
    # record of the write. Settled in the write, a crash before that record lost the write:
    # the rerun found the record no more, and its harvest record kept the revision before.
    undoes_local_change: bool = False


@dataclass
class WriteOutcome:
    identifier: str
    action: Action  # what was actually done (may differ from the plan after the re-check)
    local_id: str | None
    revision: int | None
    error: RecordError | None = None
    # Refused a pid that another record of this harvester holds and may give up later in
    # the write (a swap across batches): the write stage offers it to the writer once more.
    again: bool = False


class Writer(ABC):
    """A plug-in registered under the `oai_pipeline.writers` entry point group."""

    Options: ClassVar[type[WriterOptions]] = WriterOptions

    def __init__(self, options: WriterOptions, settings: Settings) -> None:
        self.options = options
        self.settings = settings

    @abstractmethod
    def lookup(self, harvester_id: str, keys: list[SourceKey]) -> dict[str, LocalRecord]:
        """The target's current state of each record, keyed by OAI identifier."""

    @abstractmethod
    def apply(self, harvester_id: str, writes: list[PlannedWrite]) -> list[WriteOutcome]:
        """Apply one batch, re-checking the target's state; per-record failures are outcomes."""

    def changed_locally(self, harvester_id: str) -> list[str]:
        """OAI identifiers of harvested records a user changed since the harvest wrote them:
        the harvest brings them back even when the source does not list them again. A target
        that cannot tell returns none (they come back when the source lists them)."""
        return []

    def settle_local_changes(self, harvester_id: str, local_ids: list[str]) -> None:  # noqa: B027
        """These records, written by writes that `undoes_local_change` and remembered by the
        state store, are no longer changed locally (see `changed_locally`)."""

    def missing_communities(self, references: list[str]) -> list[str]:
        """Those of the communities (slugs or ids) a record may be added to that the target
        does not have: each record sent to one fails with `missing_community`. Asked when a
        harvester is registered or changed; a target that cannot tell returns none."""
        return []

    def release(self, harvester_id: str) -> int:
        """The harvester is deleted with its harvest records: its records in the target
        become ordinary records, for a later harvester of the source to take over. Returns
        how many; a target that keeps no owner of a record has none to release."""
        return 0

    def plan_rekey(self, harvester_id: str, old: str, new: str) -> RekeyPlan:
        """What `rekey` would rewrite (`harvesters rekey`): the harvester's records whose
        source identifier begins with `old`. A target that keeps no source identifier
        returns an empty plan; one that keeps them but cannot rewrite them must refuse
        (RekeyRefused), as this default does: the next harvest would duplicate its records."""
        raise RekeyRefused(
            f"writer {type(self).__name__} cannot rewrite the source identifiers of its "
            "records; nothing was changed"
        )

    def rekey(self, harvester_id: str, old: str, new: str) -> int:
        """The harvester's records whose source identifier begins with `old` begin with
        `new` instead, in one transaction; returns how many. Run after `plan_rekey`."""
        raise RekeyRefused(
            f"writer {type(self).__name__} cannot rewrite the source identifiers of its "
            "records; nothing was changed"
        )

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
