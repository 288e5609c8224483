"""A harvest run's status as an operator reads it, in the CLI (`oai-pipeline status`) and on
`written_records` in the Dagster UI: the state store's view and what the target holds."""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa

from oai_pipeline.compiled_statements import new_engine
from oai_pipeline.errors import (
    PipelineError,
    database_error_text,
    name_database_in_errors,
    refused_as_full,
    refused_as_read_only,
    refused_by_disk,
    refused_write_line,
)
from oai_pipeline.state.harvester_lock import HarvesterLock
from oai_pipeline.state.store import DEFAULT_STALE_MINUTES, StateStore

logger = logging.getLogger(__name__)


def settle_interrupted(state: StateStore) -> list[dict[str, Any]]:
    """Fail the runs a killed CLI harvest left `running` (see `settle_interrupted_runs`), so
    that status shows them as what they are, not running for ever. On a database status may
    only read (a replica, a read-only role) they are shown as stored, and it says so; on a
    home this process cannot write (`StateStore.read_only`), opening the store said so."""
    if state.read_only:
        return []
    engine = new_engine(state.url)
    name_database_in_errors(engine, "state")  # its lock tables, created on a first use
    try:
        return state.settle_interrupted_runs(None, HarvesterLock(engine).lease_of)
    except sa.exc.DBAPIError as error:
        # PostgreSQL's refusal (read-only, a role lacking a privilege) in the harvest's words
        refused = refused_write_line(error)
        if refused is not None:
            why = refused
        elif refused_as_read_only(error):  # SQLite's read-only file
            why = "the state database is read-only"
        elif refused_as_full(error):  # status must still show where a harvest stopped
            why = f"the state database cannot be written ({database_error_text(error.orig)})"
        else:
            raise
        logger.warning(
            "%s; runs whose process is gone are shown as stored (running); a status that "
            "can write marks them failed",
            why,
        )
        return []
    finally:
        engine.dispose()


def target_stats(
    target_db_url: str, harvester_id: str, *, only_reads: bool = False
) -> dict[str, Any]:
    """What the embedded target holds of this harvester: its records and how many distinct
    source identifiers they carry. `only_reads`: for a command that only reads (see
    `EmbeddedRepository`), never for a harvest."""
    from oai_pipeline.targets.embedded.engine import sqlite_file_missing
    from oai_pipeline.targets.embedded.repository import EmbeddedRepository

    if sqlite_file_missing(target_db_url):
        # Nothing written yet (a first harvest that stopped while staging): creating the
        # file here failed on the full or read-only disk status is asked about then.
        return {"records": 0, "source_identifiers": 0}
    repository = EmbeddedRepository(target_db_url, only_reads=only_reads)
    try:
        return repository.stats(harvester_id)
    finally:
        repository.close()


def harvest_status(
    state: StateStore,
    target_db_url: str,
    *,
    run_id: int | None = None,
    harvester_id: str | None = None,
    stale_minutes: int = DEFAULT_STALE_MINUTES,
    only_reads: bool = False,
) -> dict[str, Any]:
    """The given run, else the harvester's latest, else the latest of all (`run_status`),
    with the target's totals of its harvester (`only_reads`: see `target_stats`)."""
    status = state.run_status(run_id=run_id, harvester_id=harvester_id, stale_minutes=stale_minutes)
    try:
        harvester = status["run"]["harvester_id"]
        status["target"] = target_stats(target_db_url, harvester, only_reads=only_reads)
    except (PipelineError, sa.exc.DBAPIError) as error:
        # SQLite grows the target's -shm file even to read: on a full disk the run's status,
        # what the operator asks for then, is still shown
        if not refused_by_disk(error):
            raise
        logger.warning("the target's record counts are not shown: %s", error)
        status["target"] = None
    return status
