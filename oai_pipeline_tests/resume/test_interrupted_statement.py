"""Ctrl-C or SIGTERM landing in a state-store statement leaves no write lock behind: the
interrupted harvest's own cleanup (the run marked stopped, the lease released) writes at
once. Found by SIGTERMs at random moments of a CLI harvest: the process hung for minutes
on "database is locked" after it was told to stop."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from oai_pipeline.cli.output import Terminated
from oai_pipeline.state.store import StateStore
from oai_pipeline_tests.state.test_store import record


def _interrupt_first_rows(store: StateStore) -> None:
    """Terminated (what SIGTERM raises) right after the first statement that returns rows in
    a write transaction: its cursor open, as when the signal lands between two bytecodes."""

    def after(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        if cursor.description is not None and conn.in_transaction():
            sa.event.remove(store._engine, "after_cursor_execute", after)
            raise Terminated("SIGTERM")

    sa.event.listen(store._engine, "after_cursor_execute", after)


def test_a_statement_interrupted_in_a_write_transaction_leaves_no_lock(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    with StateStore(f"sqlite:///{path}") as store:
        run_id = store.create_run(
            "h", window_from=None, window_until=None, scale=None, max_records=0, options={}
        )
        store.stage(run_id, "h", [record(n) for n in range(5)])
        _interrupt_first_rows(store)  # in its lookup of the records staged before
        with pytest.raises(Terminated):
            store.stage(run_id, "h", [record(n) for n in range(10)])

        other = sqlite3.connect(path, isolation_level=None, timeout=0.5)
        try:
            other.execute("BEGIN IMMEDIATE")  # "database is locked" while the lock is left
            other.execute("ROLLBACK")
        finally:
            other.close()
        store.finish_run(run_id, "stopped", error="Terminated: SIGTERM")
        assert store.get_run(run_id)["status"] == "stopped"
        assert store.reconcile_counters(run_id)["staged"] == 5  # the interrupted stage undone
