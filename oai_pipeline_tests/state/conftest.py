"""A fresh state store per test, on SQLite and on a throwaway PostgreSQL server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from oai_pipeline.state.store import StateStore
from oai_pipeline_tests.postgres import fresh_database


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.sqlite'}"
    return fresh_database(request.getfixturevalue("postgres_url"), "state")


@pytest.fixture
def store(store_url: str) -> Iterator[StateStore]:
    store = StateStore(store_url)
    yield store
    store.close()
