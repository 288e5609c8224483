"""Fixtures shared by the whole suite: an isolated data folder, a Dagster instance, the endpoint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from oai_pipeline.settings import Settings, load_settings


@pytest.fixture(autouse=True, scope="session")
def _no_definitions_state() -> Iterator[None]:
    """Each `materialize` makes Dagster look up the defs-state storage (for state-backed
    components; the project has none) of whichever instance a context variable last named.
    Across a long suite that lookup now and then meets a storage whose instance is gone
    ("Attempted to resolve undefined DagsterInstance weakref"). No test needs that state."""
    from dagster._core.storage.defs_state.base import DefsStateStorage

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DefsStateStorage, "get", classmethod(lambda cls: None))
        yield


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test touches the project's own data folder or Dagster home."""
    monkeypatch.setenv("OAI_PIPELINE_HOME", str(tmp_path / "oai_home"))
    for name in (
        "OAI_PIPELINE_STATE_DB_URL",
        "OAI_PIPELINE_TARGET_DB_URL",
        "OAI_PIPELINE_STORAGE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "dagster_home").mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))


@pytest.fixture
def settings() -> Settings:
    settings = load_settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    return settings


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as instance:
        yield instance


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL server for the session (started as an unprivileged user)."""
    from oai_pipeline_tests.postgres import throwaway_postgres

    with throwaway_postgres() as url:
        yield url
