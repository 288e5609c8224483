"""A process left running while an in-place upgrade migrates the state store under it.

A newer oai-pipeline's migration is played by raising the stored schema version, as that
migration would, from another connection.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from oai_pipeline.errors import SchemaChanged
from oai_pipeline.state.schema import SCHEMA_VERSION, harvesters, schema_version
from oai_pipeline.state.store import StateStore
from oai_pipeline_tests.state.test_store import harvester, new_run


def set_stored_version(url: str, version: int) -> None:
    """What another process's migration leaves: the store at another schema version."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(schema_version.update().values(version=version))
    finally:
        engine.dispose()


def _harvester_ids(url: str) -> list[str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return list(connection.execute(sa.select(harvesters.c.id)).scalars())
    finally:
        engine.dispose()


def test_a_store_migrated_by_a_newer_version_refuses_the_writes_of_a_running_process(
    store: StateStore, store_url: str
) -> None:
    """The old process wrote on as if nothing happened: rows without what the new schema
    keeps. Now its next write stops with one line saying to restart it, and writes nothing."""
    store.save_harvester(harvester("before"))
    set_stored_version(store_url, SCHEMA_VERSION + 1)

    with pytest.raises(SchemaChanged) as raised:
        store.save_harvester(harvester("after"))

    assert str(raised.value) == (
        f"the state database was upgraded to schema version {SCHEMA_VERSION + 1} by a newer "
        f"oai-pipeline while this process (schema version {SCHEMA_VERSION}) ran: nothing was "
        "written; restart this process with the upgraded oai-pipeline"
    )
    with pytest.raises(SchemaChanged):
        new_run(store, "before")
    assert _harvester_ids(store_url) == ["before"]
    # What it only reads it still reads (a status), and the refused write held no lock:
    # another process writes at once.
    assert [h.id for h in store.list_harvesters()] == ["before"]
    set_stored_version(store_url, SCHEMA_VERSION)
    store.save_harvester(harvester("after"))
    assert sorted(_harvester_ids(store_url)) == ["after", "before"]


def test_a_store_taken_back_to_an_older_version_refuses_writes_too(
    store: StateStore, store_url: str
) -> None:
    """A backup of the version before restored under a running process."""
    set_stored_version(store_url, SCHEMA_VERSION - 1)

    with pytest.raises(SchemaChanged, match=f"schema version {SCHEMA_VERSION - 1} now"):
        store.save_harvester(harvester("after"))
