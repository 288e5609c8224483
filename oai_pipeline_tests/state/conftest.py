"""A fresh state store per test, on SQLite and on a throwaway PostgreSQL server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from oai_pipeline.state.store import StateStore


def _fresh_postgres_database(server_url: str) -> str:
    """A new empty database on the session's server, so tests never see each other."""
    url = make_url(server_url)
    name = f"state_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql(f"CREATE DATABASE {name}")
    finally:
        engine.dispose()
    return url.set(database=name).render_as_string(hide_password=False)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.sqlite'}"
    return _fresh_postgres_database(request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(store_url: str) -> Iterator[StateStore]:
    store = StateStore(store_url)
    yield store
    store.close()
