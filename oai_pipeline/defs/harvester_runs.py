"""What the Dagster instance knows of a harvester's runs, for the commands that change what
those runs would harvest: `harvesters rekey` (the identifiers) and `harvesters update
--base-url` (the source).

The state store knows a Dagster run only once its first step has begun a harvest run: one
queued or starting is not there yet, and reads the harvester as it is when it starts. And a
harvest run says `running` until the failure or dead-run sensor records its Dagster run's
end: only the instance tells whether that run is over.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import dagster as dg

from oai_pipeline.defs.dead_runs import is_dead
from oai_pipeline.defs.instance_storage import STORAGE_FAILED, dagster_storage_errors
from oai_pipeline.defs.partitions import HARVESTER, harvesters_of
from oai_pipeline.defs.schedules import STUCK_AFTER

# A run in these statuses may still harvest or write (CANCELING: until its process stops).
UNFINISHED = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
# A run over, whatever its harvest run says (the sensors record that at their next tick).
ENDED = (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


class DagsterRuns:
    """The harvesters' runs on one instance (`pipeline.rekey.OrchestratorRuns`)."""

    def __init__(self, instance: dg.DagsterInstance, now: datetime | None = None) -> None:
        self.instance = instance
        self.now = now
        self._registered: list[str] | None = None

    def _harvesters(self) -> list[str]:
        if self._registered is None:
            self._registered = list(self.instance.get_dynamic_partitions(HARVESTER))
        return self._registered

    def unfinished(self, harvester_id: str) -> list[dg.DagsterRun]:
        """The harvester's runs that may still harvest or write: not those the dead-run
        sensor would fail, nor one stuck NOT_STARTED (as `busy_harvesters` counts them)."""
        with dagster_storage_errors(STORAGE_FAILED):
            return self._unfinished(harvester_id)

    def _unfinished(self, harvester_id: str) -> list[dg.DagsterRun]:
        now = self.now or datetime.now(UTC)
        found = []
        for record in self.instance.get_run_records(filters=dg.RunsFilter(statuses=UNFINISHED)):
            run = record.dagster_run
            if harvester_id not in harvesters_of(run.tags, self._harvesters):
                continue
            stuck = run.status is dg.DagsterRunStatus.NOT_STARTED and (
                record.create_timestamp < now - STUCK_AFTER
            )
            if not stuck and not is_dead(self.instance, run, now):
                found.append(run)
        return found

    def waiting(self, harvester_id: str) -> list[str]:
        return [f"{run.run_id} ({run.status.value})" for run in self.unfinished(harvester_id)]

    def ended(self, run_id: str) -> bool:
        """Failed, canceled, or found dead; a run the instance does not know is not taken
        for ended (DAGSTER_HOME may not be the daemon's)."""
        with dagster_storage_errors(STORAGE_FAILED):
            run = self.instance.get_run_by_id(run_id)
            if run is None:
                return False
            return run.status in ENDED or is_dead(self.instance, run, self.now)

    def succeeded(self, run_id: str) -> bool:
        with dagster_storage_errors(STORAGE_FAILED):
            run = self.instance.get_run_by_id(run_id)
        return run is not None and run.status is dg.DagsterRunStatus.SUCCESS


@contextmanager
def dagster_runs_in_home() -> Iterator[DagsterRuns]:
    """The runs of the instance under DAGSTER_HOME (by default the project's folder), where
    `harvest --use-job` queues them."""
    from oai_pipeline.defs.launch import dagster_instance
    from oai_pipeline.settings import ensure_dagster_home

    ensure_dagster_home()  # DagsterInstance.get() reads DAGSTER_HOME
    with dagster_instance() as instance:
        yield DagsterRuns(instance)


def waiting_in_home(harvester_id: str) -> list[str]:
    """`DagsterRuns.waiting` of the instance under DAGSTER_HOME; none without an instance
    there (one is not created for asking)."""
    from oai_pipeline.settings import holds_dagster_instance

    if not holds_dagster_instance():
        return []
    with dagster_runs_in_home() as runs:
        return runs.waiting(harvester_id)
