"""The target tests run on SQLite and on PostgreSQL (a throwaway server, see ../postgres.py).

`postgres_url` (session scoped) comes from the top-level conftest; each PostgreSQL test
gets empty tables again afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from oai_pipeline.settings import Settings
from oai_pipeline.targets.embedded.schema import metadata, schema_version


@pytest.fixture(params=["sqlite", "postgresql"])
def target_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'target.sqlite'}"
        return
    url = request.getfixturevalue("postgres_url")
    yield url
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            metadata.drop_all(connection)
            schema_version.drop(connection, checkfirst=True)
    finally:
        engine.dispose()


@pytest.fixture
def target_settings(target_url: str, tmp_path: Path) -> Settings:
    return Settings(
        home=tmp_path,
        state_db_url=f"sqlite:///{tmp_path / 'state.sqlite'}",
        target_db_url=target_url,
        storage_url=str(tmp_path / "storage"),
    )
