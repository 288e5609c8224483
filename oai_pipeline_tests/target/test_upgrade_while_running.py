"""A process left running while an in-place upgrade migrates the target under it.

A newer oai-pipeline's migration is played by adding the stored schema version it would.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from oai_pipeline.errors import SchemaChanged
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline.targets.embedded.schema import SCHEMA_VERSION, records, schema_version
from oai_pipeline_tests.target.test_repository import record


def _store_version(url: str, version: int) -> None:
    """What another process's migration leaves: the target at another schema version."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.delete(schema_version))
            connection.execute(sa.insert(schema_version).values(version=version))
    finally:
        engine.dispose()


def _record_count(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.execute(sa.select(sa.func.count()).select_from(records)).scalar()
    finally:
        engine.dispose()


def test_a_target_migrated_by_a_newer_version_refuses_the_writes_of_a_running_process(
    target_url: str,
) -> None:
    """It wrote on (after the upgrade to version 11, records the counts never saw); now its
    next write stops with one line saying to restart it, and writes nothing."""
    with EmbeddedRepository(target_url) as repository:
        record_id = repository.deposit(record(), publish=True)
        _store_version(target_url, SCHEMA_VERSION + 1)

        with pytest.raises(SchemaChanged) as raised:
            repository.deposit(record("another"), publish=True)

        assert str(raised.value) == (
            f"the target database was upgraded to schema version {SCHEMA_VERSION + 1} by a "
            f"newer oai-pipeline while this process (schema version {SCHEMA_VERSION}) ran: "
            "nothing was written; restart this process with the upgraded oai-pipeline"
        )
        assert _record_count(target_url) == 1
        # It still reads, and the refused write held no lock: another process writes at once.
        assert repository.show(record_id)["id"] == record_id
        _store_version(target_url, SCHEMA_VERSION)
        repository.deposit(record("another"), publish=True)
        assert _record_count(target_url) == 2
