"""The harvester registry: create, update, list and delete harvesters in the state store."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from oai_pipeline.errors import AlreadyExists, NotFound, PipelineError
from oai_pipeline.harvesters.changes import change_warnings, queued_runs_warnings
from oai_pipeline.harvesters.model import Harvester

if TYPE_CHECKING:
    from oai_pipeline.state.store import StateStore

UpsertResult = Literal["created", "updated", "unchanged"]


class HarvesterRegistry:
    """What an operator does with harvesters; every change is validated before it is stored."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    def create(self, harvester: Harvester, *, warnings: list[str] | None = None) -> Harvester:
        """Register a new harvester; `warnings`, if given, gets `_created_again_warnings`."""
        if self.store.get_harvester(harvester.id) is not None:
            raise AlreadyExists(f"harvester {harvester.id!r} already exists (use update)")
        if warnings is not None:
            warnings += self._created_again_warnings(harvester)
        self.store.save_harvester(harvester)
        return harvester

    def _created_again_warnings(self, harvester: Harvester) -> list[str]:
        """A harvester created again over the records it kept when deleted, in another
        prefix, is told what an update of its prefix is told (`change_warnings`)."""
        kept = self.store.deleted_harvester_prefix(harvester.id)
        if kept is None:
            return []
        return change_warnings(harvester.model_copy(update={"metadata_prefix": kept}), harvester)

    def get(self, harvester_id: str) -> Harvester:
        harvester = self.store.get_harvester(harvester_id)
        if harvester is None:
            raise NotFound(f"unknown harvester {harvester_id!r}")
        return harvester

    def list(self) -> list[Harvester]:
        return self.store.list_harvesters()

    def update(
        self,
        harvester_id: str,
        *,
        model: str | None = None,
        community: str | None = None,
        **changes: Any,
    ) -> Harvester:
        """Change some fields; `model` replaces the transformers and writers not given,
        `community` is set on every writer. The result is validated like a new harvester."""
        current = self.get(harvester_id)
        if "id" in changes and changes["id"] != harvester_id:
            raise PipelineError("a harvester's id cannot be changed (create a new one)")
        data = current.model_dump()
        if model is not None:
            for field in ("transformers", "writers"):
                if field not in changes:
                    data[field] = []
        data.update(changes)
        updated = Harvester.from_input(data, model=model, community=community)
        self.store.save_harvester(updated)
        return updated

    def delete(self, harvester_id: str, *, delete_records: bool = False) -> None:
        """Unregister; its harvest records stay unless `delete_records`."""
        if not self.store.delete_harvester(harvester_id, delete_records=delete_records):
            raise NotFound(f"unknown harvester {harvester_id!r}")

    def upsert(
        self,
        harvester: Harvester,
        *,
        warnings: dict[str, list[str]] | None = None,
        queued_runs: Callable[[str], list[str]] | None = None,
    ) -> UpsertResult:
        """Create or update to exactly this harvester (what loading a fixture does)."""
        return self.upsert_many([harvester], warnings=warnings, queued_runs=queued_runs)[0][1]

    def upsert_many(
        self,
        many: list[Harvester],
        *,
        warnings: dict[str, list[str]] | None = None,
        queued_runs: Callable[[str], list[str]] | None = None,
    ) -> list[tuple[str, UpsertResult]]:
        """`upsert` for several harvesters, stored in one transaction (all or none).
        `warnings`, if given, is filled with what each change means for the next runs
        (`change_warnings`), as `harvesters update` tells it; with `queued_runs` (the
        Dagster runs of a harvester, DagsterRuns.waiting), those a new base URL reaches."""
        results: list[tuple[str, UpsertResult]] = []
        changed: list[Harvester] = []
        for harvester in many:
            current = self.store.get_harvester(harvester.id)
            if current is None:
                results.append((harvester.id, "created"))
            elif current.model_dump() == harvester.model_dump():
                results.append((harvester.id, "unchanged"))
                continue
            else:
                results.append((harvester.id, "updated"))
            if warnings is not None:
                warnings[harvester.id] = (
                    self._created_again_warnings(harvester)
                    if current is None
                    else change_warnings(current, harvester)
                )
                if queued_runs and current and current.base_url != harvester.base_url:
                    warnings[harvester.id] += queued_runs_warnings(harvester.id, queued_runs)
            changed.append(harvester)
        self.store.save_harvesters(changed)
        return results
