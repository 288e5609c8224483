"""The long-lived things a run needs, opened once from the settings."""

from __future__ import annotations

import logging
from collections.abc import Callable

import sqlalchemy as sa

from oai_pipeline.compiled_statements import new_engine
from oai_pipeline.errors import (
    NotFound,
    SchemaChanged,
    database_error_text,
    log_unsaved,
    name_database_in_errors,
    refused_write_line,
)
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.lock_waits import wait_for_writers
from oai_pipeline.settings import Settings
from oai_pipeline.sqlite_tuning import explain_refused_writes
from oai_pipeline.state.harvester_lock import HarvesterLock
from oai_pipeline.state.store import StateStore, writers_wait
from oai_pipeline.storage import PartitionStore

logger = logging.getLogger(__name__)


class Services:
    def __init__(self, settings: Settings, *, state_lock_wait: float | None = None) -> None:
        """`state_lock_wait`: how long a write to the state store waits for another writer
        (`StateStore`; None: a harvest's wait): a sensor's tick waits less than a harvest."""
        settings.home.mkdir(parents=True, exist_ok=True)
        self.settings = settings
        self.state = StateStore(settings.state_db_url, lock_wait_seconds=state_lock_wait)
        self.storage = PartitionStore(settings.storage_url)
        # Pinged at checkout, as the state store's: a restarted PostgreSQL leaves the pooled
        # connections dead, and a lease released or taken on one failed the stage.
        self._lock_engine = new_engine(settings.state_db_url, pool_pre_ping=True)
        explain_refused_writes(self._lock_engine)  # a lease on a full disk names the file too
        name_database_in_errors(self._lock_engine, "state")  # a read-only one names it too
        # The lease waits as its store's writes do, and says so in the same line: on SQLite a
        # harvest's lease waited the driver's 5 s behind another harvest's write, then failed
        # with a bare `database is locked`, while the store's writes wait 60 s.
        wait_for_writers(self._lock_engine, writers_wait(settings.state_db_url, state_lock_wait))
        self.harvester_lock = HarvesterLock(self._lock_engine)
        # Whether the caller tries again after this error, and how it says so (None: no
        # retry comes): a Dagster step its retry policy retries (defs.assets).
        self.retry_coming: Callable[[BaseException], str | None] = lambda error: None
        # What a harvest run's error says of the exception that ended it: the Dagster layer
        # names its own interrupt (a run terminated in the UI) instead of its class name.
        self.error_text: Callable[[BaseException], str] = run_error_text

    def harvester(self, harvester_id: str) -> Harvester:
        harvester = self.state.get_harvester(harvester_id)
        if harvester is None:
            raise NotFound(f"unknown harvester {harvester_id!r}")
        return harvester

    def record_failure(self, run_id: int, error: BaseException) -> None:
        """An exception ends the harvest run as failed; an interrupt (Ctrl-C, a terminated
        Dagster run) as stopped. Either way the next attempt resumes it. A run something
        ended already (it succeeded before the error) keeps that end.

        A state database that is itself the failure (its server gone, restarting) cannot
        take the record: the error that ended the run is what the caller raises, not a
        second one about recording it. The run then stays `running` until the next harvest
        or `status` finds its process gone and ends it as interrupted. A store a newer
        version migrated meanwhile refuses it too: its error, which the caller gets, says
        so and what ends the run.

        An error its caller retries (`retry_coming`) leaves the run `running`, its error
        saying so: a retry resumes it, and `status` showing it failed in between told the
        operator to resume it themselves."""
        status = "failed" if isinstance(error, Exception) else "stopped"
        retry = self.retry_coming(error) if status == "failed" else None
        try:
            if retry is not None:
                self.state.note_failed_attempt(run_id, f"{retry}: {self.error_text(error)}")
                return
            self.state.finish_run(run_id, status, error=self.error_text(error), if_running=True)
        except sa.exc.DBAPIError as unrecorded:
            log_unsaved(logger, f"record harvest run {run_id} as {status}", unrecorded)
        except SchemaChanged as refused:
            raise SchemaChanged(f"{refused}; {self._left_running(run_id)}") from error

    def _left_running(self, run_id: int) -> str:
        """What ends a run this process could not end (its writes refused), for its error."""
        run = self.state.get_run(run_id) or {}
        if run.get("dagster_run_id"):
            by = "the harvest_failure_sensor marks it failed as this Dagster run fails"
        else:
            by = (
                f"`oai-pipeline status` or the next harvest of {run.get('harvester_id')} "
                "marks it failed"
            )
        return f"harvest run {run_id} stays `running` until {by} (resumable)"

    def close(self) -> None:
        self.state.close()
        self._lock_engine.dispose()

    def __enter__(self) -> Services:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def run_error_text(error: BaseException) -> str:
    """What a run's `error` says of the exception that ended it. Ctrl-C carries no message:
    `status` read `stopped (KeyboardInterrupt: )`. A database's error is the driver's, in
    one line: SQLAlchemy's text added the statement and its parameters (a batch's records'
    data), which `status` printed after the cure the error names. A write the database
    refused (read-only, a role lacking a privilege) is the command line's line."""
    if (refused := refused_write_line(error)) is not None:
        return refused
    if isinstance(error, sa.exc.DBAPIError) and error.orig is not None:
        return f"{type(error.orig).__name__}: {database_error_text(error.orig)}"
    if not str(error):
        return (
            "KeyboardInterrupt (Ctrl-C)"
            if type(error) is KeyboardInterrupt
            else type(error).__name__
        )
    return f"{type(error).__name__}: {error}"
