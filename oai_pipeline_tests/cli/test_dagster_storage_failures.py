"""Dagster's own storage failing under a command that opens the instance: one line naming
DAGSTER_HOME and what to do, never Dagster's traceback, and nothing written before."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.defs.partitions import HARVESTER
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import PROJECT_ROOT, load_settings
from oai_pipeline_tests.cli.test_user_errors import closed_port  # noqa: F401 - a fixture
from oai_pipeline_tests.postgres import drop_connections, fresh_database


def run_cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def postgres_gone(
    closed_port: int,  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """DAGSTER_HOME with the shipped dagster-postgres.yaml, its server gone (nothing listens
    on its port); dagster-postgres's retries without their waits."""
    home = Path(os.environ["DAGSTER_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROJECT_ROOT / "dagster-postgres.yaml", home / "dagster.yaml")
    for name, value in {
        "DAGSTER_PG_HOST": "127.0.0.1",
        "DAGSTER_PG_PORT": str(closed_port),
        "DAGSTER_PG_USERNAME": "u",
        "DAGSTER_PG_PASSWORD": "secret",
        "DAGSTER_PG_DB": "dagster",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("dagster_postgres.utils.calculate_delay", lambda **_: 0)
    return home


def _harvester(harvester_id: str) -> dict:
    with Services(load_settings()) as services:
        [found] = [h for h in services.state.list_harvesters() if h.id == harvester_id]
        return found.model_dump(mode="json")


def test_a_rekey_with_the_dagster_postgresql_server_gone_is_one_line_and_rewrites_nothing(
    registered: str, postgres_gone: Path
) -> None:
    """Was dagster-postgres's 200-line traceback (`too many retries for DB connection`)."""
    before = _harvester(registered)

    result = run_cli(
        "harvesters", "rekey", registered, "--from-prefix", "oai:a", "--to-prefix", "oai:b",
        "--json",
    )  # fmt: skip

    assert result.exit_code == 1
    [line] = result.stderr.splitlines()[-1:]
    assert "Traceback" not in result.stderr
    assert line.startswith(f"Error: cannot open the Dagster instance in {postgres_gone}: ")
    assert line.endswith(
        "is the Dagster instance's PostgreSQL server running? "
        f"(the storage named in {postgres_gone}/dagster.yaml)"
    )
    assert "secret" not in result.stderr
    assert json.loads(result.stdout)["type"] == "dagster_storage_error"
    assert _harvester(registered) == before


def test_an_update_of_the_base_url_with_the_dagster_server_gone_warns(
    registered: str,
    postgres_gone: Path,
    closed_port: int,  # noqa: F811
) -> None:
    """The update is done: the instance's trouble is a warning, not a traceback and exit 1
    after the change was stored."""
    new_url = f"http://127.0.0.1:{closed_port}/oai"

    result = run_cli("harvesters", "update", registered, "--base-url", new_url, "--json")

    assert result.exit_code == 0, result.output
    [warning] = json.loads(result.stdout)["warnings"]
    assert warning.startswith(
        "could not ask the Dagster instance for runs queued for the old URL: cannot open "
        f"the Dagster instance in {postgres_gone}: "
    )
    assert _harvester(registered)["base_url"] == new_url


@pytest.fixture
def read_only_dagster_home(
    read_only_mount: Callable[[Path], Path], monkeypatch: pytest.MonkeyPatch
) -> Path:
    """DAGSTER_HOME holding an instance, mounted again read-only."""
    import dagster as dg

    home = Path(os.environ["DAGSTER_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(home)):  # its databases created
        pass
    mounted = read_only_mount(home)
    monkeypatch.setenv("DAGSTER_HOME", str(mounted))
    return mounted


def test_the_demo_on_a_read_only_dagster_home_is_one_line_and_registers_nothing(
    read_only_dagster_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo registered its harvester `sample` first, then failed opening the instance
    with `unable to open database file`, naming neither the cause nor the cure."""
    monkeypatch.setenv("OAI_PIPELINE_SAMPLE_PORT", "1")  # not served: it fails before

    result = run_cli("demo", "--json")

    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    runs_db = read_only_dagster_home / "history" / "runs.db"
    assert line == (
        f"Error: cannot open the Dagster instance in {read_only_dagster_home}: unable to open "
        f"database file: the file system holding {runs_db} is mounted read-only; mount it "
        "read-write (or move the data folder), then run again: a harvest resumes where it "
        "stopped"
    )
    assert json.loads(result.stdout)["type"] == "dagster_storage_error"
    with Services(load_settings()) as services:
        assert services.state.list_harvesters() == []


@pytest.mark.postgres
def test_a_dagster_postgresql_database_gone_after_opening_is_one_line(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The instance opened, then its database refused connections (as a server stopping
    does) when rekey asked it for the harvester's runs: dagster-postgres's traceback."""
    from oai_pipeline.defs.harvester_runs import dagster_runs_in_home
    from oai_pipeline.defs.instance_storage import DagsterStorageError

    url = sa.make_url(fresh_database(postgres_url, prefix="dagster"))
    for name, value in {
        "DAGSTER_PG_USERNAME": url.username or "postgres",
        "DAGSTER_PG_PASSWORD": url.password or "",
        "DAGSTER_PG_HOST": url.host or "127.0.0.1",
        "DAGSTER_PG_PORT": str(url.port),
        "DAGSTER_PG_DB": url.database or "",
    }.items():
        monkeypatch.setenv(name, value)
    home = Path(os.environ["DAGSTER_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROJECT_ROOT / "dagster-postgres.yaml", home / "dagster.yaml")
    monkeypatch.setattr("dagster_postgres.utils.calculate_delay", lambda **_: 0)
    admin = sa.create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")

    with dagster_runs_in_home() as runs:
        assert runs.waiting("sample") == []
        with admin.connect() as connection:
            connection.exec_driver_sql(f"ALTER DATABASE {url.database} ALLOW_CONNECTIONS false")
        drop_connections(url.render_as_string(hide_password=False))
        with pytest.raises(DagsterStorageError) as refused:
            runs.waiting("sample")
    admin.dispose()

    [line] = str(refused.value).splitlines()
    assert line.startswith(f"the Dagster instance's database failed in {home}: ")
    assert f'database "{url.database}" is not currently accepting connections' in line
    assert line.endswith(
        "is the Dagster instance's PostgreSQL server running? "
        f"(the storage named in {home}/dagster.yaml)"
    )


def test_the_demo_on_a_dagster_home_whose_index_another_process_holds_fails_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another process holding a write on the instance's index.db (a daemon's long write, an
    sqlite3 shell): the demo waited about a minute (Dagster's busy timeout, twice), printed
    SQLAlchemy's statement, and left a Dagster run NOT_STARTED for good. Now one line names
    the file and what to do, before anything is registered or launched."""
    import sqlite3

    import dagster as dg

    home = Path(os.environ["DAGSTER_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(home)) as instance:  # an earlier demo's
        instance.add_dynamic_partitions(HARVESTER, ["sample"])
    index = home / "history" / "runs" / "index.db"
    monkeypatch.setenv("OAI_PIPELINE_SAMPLE_PORT", "1")  # not served: it fails before
    holder = sqlite3.connect(index, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        result = run_cli("demo", "--json")
    finally:
        holder.close()

    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.get_runs() == []
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line == (
        f"Error: cannot launch a run on the Dagster instance in {home}: database is locked: "
        f"another process (the Dagster daemon, `./run.sh dev`, a run) holds a write on "
        f"{index}; run again once it is done"
    )
    assert json.loads(result.stdout)["type"] == "dagster_storage_error"
    with Services(load_settings()) as services:
        assert services.state.list_harvesters() == []


def _instance_home(partitions: list[str]) -> Path:
    """DAGSTER_HOME with the shipped dagster.yaml, an earlier run's instance with these
    harvester partitions."""
    import dagster as dg

    home = Path(os.environ["DAGSTER_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions(HARVESTER, partitions)
    return home


def _with_write_held(database: Path, *args: str) -> Result:
    """The CLI run while another process holds `database`'s write lock (a daemon's long
    write, a webserver's, an sqlite3 shell)."""
    import sqlite3

    holder = sqlite3.connect(database, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        return run_cli(*args)
    finally:
        holder.close()


def _refused_line(home: Path, database: Path) -> str:
    return (
        f"Error: cannot launch a run on the Dagster instance in {home}: database is locked: "
        f"another process (the Dagster daemon, `./run.sh dev`, a run) holds a write on "
        f"{database}; run again once it is done"
    )


def _dagster_runs(home: Path) -> list:
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        return instance.get_runs()


def test_the_demo_on_a_dagster_home_whose_runs_db_another_process_holds_fails_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """runs.db held (the run is stored there first): the demo registered its harvester,
    then waited Dagster's 30 s for the lock before failing. Now the probe that refuses a
    held index.db refuses it too, in one line naming the file, before anything is written."""
    home = _instance_home(["sample"])
    runs = home / "history" / "runs.db"
    monkeypatch.setenv("OAI_PIPELINE_SAMPLE_PORT", "1")  # not served: it fails before

    result = _with_write_held(runs, "demo", "--json")

    assert _dagster_runs(home) == []
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [_refused_line(home, runs)]
    assert json.loads(result.stdout)["type"] == "dagster_storage_error"
    with Services(load_settings()) as services:
        assert services.state.list_harvesters() == []


def test_harvest_use_job_on_a_dagster_home_whose_runs_db_another_process_holds_fails_at_once(
    registered: str,
    closed_port: int,  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The webserver stores the run in the same runs.db: it waited 30 s for the lock, and
    the CLI said only that the run was refused (here: that no webserver answered). Now the
    CLI refuses it at once, naming the file, and no run is stored."""
    home = _instance_home([registered])
    runs = home / "history" / "runs.db"
    monkeypatch.setenv("DAGSTER_WEBSERVER_URL", f"http://127.0.0.1:{closed_port}")

    result = _with_write_held(runs, "harvest", registered, "--use-job")

    assert _dagster_runs(home) == []
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert result.stderr.splitlines() == [_refused_line(home, runs)]
