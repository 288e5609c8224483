"""Fixtures shared by the whole suite: an isolated data folder, a Dagster instance, the endpoint."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from oai_pipeline.settings import Settings, load_settings
from oai_pipeline_tests.scratch import memory_folder


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Before pytest's own temporary-path factory reads the option; in the controller only
    (pytest-xdist gives each worker a folder of the controller's). `--basetemp` wins."""
    _home_while_collecting(config)
    if hasattr(config, "workerinput") or config.option.basetemp:
        return
    if memory_folder() is not None:
        config.option.basetemp = _temporary_folder(config, "oai-pipeline-tests-")


def _temporary_folder(config: pytest.Config, prefix: str) -> str:
    """A folder (in memory when the machine can) removed when pytest ends."""
    folder = tempfile.mkdtemp(prefix=prefix, dir=memory_folder())
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    return folder


def _home_while_collecting(config: pytest.Config) -> None:
    """Importing the definitions (test modules do, when collected) opens the data folder's
    state store: without this, every pytest process opened the checkout's own home, and the
    xdist workers of a fresh clone all created it at once. Each test gets its own home
    (`_isolated_home`); this one is each process's until then."""
    folder = Path(_temporary_folder(config, "oai-pipeline-collect-"))
    os.environ["OAI_PIPELINE_HOME"] = str(folder / "oai_home")
    (folder / "dagster_home").mkdir()
    os.environ["DAGSTER_HOME"] = str(folder / "dagster_home")


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
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    """An in-memory Dagster instance: runs, events and partitions kept as a real one keeps them
    (SQLite in memory), at a quarter of the cost per run of one on disk, which opens a
    connection and commits for every event."""
    with dg.DagsterInstance.ephemeral(tempdir=str(tmp_path / "dagster_artifacts")) as instance:
        yield instance


@pytest.fixture
def persistent_instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    """A Dagster instance on disk, for what loads it again from its folder: a schedule's
    context, a child process running a job."""
    folder = tmp_path / "dagster_instance"
    folder.mkdir()
    with dg.instance_for_test(temp_dir=str(folder)) as instance:
        yield instance


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL server for the session (started as an unprivileged user)."""
    from oai_pipeline_tests.postgres import throwaway_postgres

    with throwaway_postgres() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The state store and the target on SQLite (the default) or each on a fresh database of
    the throwaway PostgreSQL server: for what one of them refuses that the other takes."""
    if request.param == "postgresql":
        from oai_pipeline_tests.postgres import fresh_database

        server = request.getfixturevalue("postgres_url")
        monkeypatch.setenv("OAI_PIPELINE_STATE_DB_URL", fresh_database(server))
        monkeypatch.setenv("OAI_PIPELINE_TARGET_DB_URL", fresh_database(server))
    return request.param
