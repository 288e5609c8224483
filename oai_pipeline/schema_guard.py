"""Writes of a process left running while an upgrade migrated its database under it.

The state store and the target each check, at the start of every write transaction, that
their schema is still the version this code knows: a process left running while a newer
oai-pipeline migrated it stops with one line instead of writing rows that miss what the new
schema keeps (e.g. an old reconcile saving no `deleting`, an old writer's records left out of
the target's counts).
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

from oai_pipeline.errors import SchemaChanged


def refuse_writes_after_a_migration(
    engine: sa.Engine,
    refuse_if_changed: Callable[[sa.Connection], None],
    read_only_option: str,
) -> None:
    """Run `refuse_if_changed` as each of the engine's transactions begins, except those
    run with the execution option `read_only_option` (reads need no check)."""

    @sa.event.listens_for(engine, "begin")  # after the SQLite engines' BEGIN IMMEDIATE
    def _still_known(connection: sa.Connection) -> None:
        if connection.get_execution_options().get(read_only_option):
            return
        try:
            refuse_if_changed(connection)
        except (SchemaChanged, sa.exc.DBAPIError):
            # The begin failed: no transaction is left open to hold the write lock.
            connection.connection.rollback()
            raise
