"""Sensor ticks while the state store or Dagster's own storage fails: one line in the tick,
and the next tick, the store back, does what this one could not."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as sa

from oai_pipeline.definitions import defs
from oai_pipeline.defs.partitions import HARVESTER
from oai_pipeline.defs.resources import PipelineResource
from oai_pipeline.defs.sensors import RecordedNextTick, recorded_next_tick
from oai_pipeline.errors import database_error_text
from oai_pipeline.lock_waits import is_lock_timeout
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline.state.harvester_lock import new_owner
from oai_pipeline.state.schema import _LOCK_KEY, SCHEMA_VERSION
from oai_pipeline_tests.orchestration.state_setup import add_finished_run, add_harvester
from oai_pipeline_tests.orchestration.test_sensors import _failed_dagster_run
from oai_pipeline_tests.postgres import BOUNDED_SECONDS, fresh_database


@contextmanager
def unwritable(database: Path) -> Iterator[None]:
    """SQLite refuses every write to `database` (as on a read-only file): each new
    connection to it is made query-only."""

    def query_only(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        if cursor.execute("PRAGMA database_list").fetchone()[2] == str(database):
            cursor.execute("PRAGMA query_only = 1")
        cursor.close()

    sa.event.listen(sa.Engine, "connect", query_only)
    try:
        yield
    finally:
        sa.event.remove(sa.Engine, "connect", query_only)


def _tick(
    name: str,
    instance: dg.DagsterInstance,
    cursor: str | None = None,
    resources: dict[str, Any] | None = None,
):
    sensor = defs.resolve_sensor_def(name)
    context = dg.build_sensor_context(
        instance=instance, resources=resources or defs.resources, cursor=cursor
    )
    return sensor.evaluate_tick(context)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def state_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The state store on SQLite (the default) or on a fresh database of the throwaway
    PostgreSQL server; requested before `settings`, which reads the URL."""
    if request.param == "postgresql":
        server = request.getfixturevalue("postgres_url")
        url = fresh_database(server, statement_timeout_seconds=BOUNDED_SECONDS)
        monkeypatch.setenv("OAI_PIPELINE_STATE_DB_URL", url)
    return request.param


@contextmanager
def held_by_a_harvest(settings: Settings, harvester_id: str) -> Iterator[None]:
    """Another connection holds what a harvest's long transaction holds until the block ends:
    SQLite's write lock on the whole file; on PostgreSQL the shared lock of the schema and
    the row locks of the harvester, of its harvest runs and of its lease, which it updates."""
    url = settings.state_db_url
    if sa.make_url(url).get_backend_name() == "sqlite":
        connection = sqlite3.connect(sa.make_url(url).database, isolation_level=None)
        try:
            connection.execute("BEGIN IMMEDIATE")
            yield
        finally:
            connection.execute("ROLLBACK")
            connection.close()
        return
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection, connection.begin() as transaction:
            # What each of a harvest's write transactions takes (`schema.refuse_if_changed`):
            # no migration comes between its check of the schema and its writes.
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock_shared({_LOCK_KEY})")
            for table, column, touched in (
                ("harvesters", "id", "updated_at"),
                ("harvest_runs", "harvester_id", "updated_at"),
                ("harvester_locks", "harvester_id", "renewed_at"),
            ):
                connection.exec_driver_sql(
                    f"UPDATE {table} SET {touched} = {touched} WHERE {column} = %(id)s",
                    {"id": harvester_id},
                )
            yield
            transaction.rollback()
    finally:
        engine.dispose()


def _held_for(settings: Settings, table: str) -> str:
    """How the state store says a tick's write gave up waiting 0.2 s for the harvest."""
    url = settings.state_db_url
    if sa.make_url(url).get_backend_name() == "sqlite":
        return (
            f"database is locked: {sa.make_url(url).database} stayed locked by another "
            "writer's transaction (a harvest running) for 0.2 s"
        )
    return (
        f"lock timeout: a row of {table} in {url} stayed locked by another writer's "
        "transaction (a harvest running) for 0.2 s"
    )


# A tick's writes wait this long for the harvest: a short wait, so the test is quick.
_IMPATIENT = {**defs.resources, "pipeline": PipelineResource(tick_lock_wait_seconds=0.2)}

# What the data folder's file changes: alpha's name (a row a harvest of alpha holds), beta.
_FIXTURE = (
    "- id: alpha\n  name: Alpha\n  base-url: https://alpha.example.org/oai\n"
    "  metadata-prefix: oai_dc\n  model: rdm\n"
    "- id: beta\n  base-url: https://beta.example.org/oai\n"
    "  metadata-prefix: oai_dc\n  model: rdm\n"
)


def test_a_failed_run_met_by_a_state_store_held_by_a_harvest_is_recorded_on_the_next_tick(
    state_backend: str, instance: dg.DagsterInstance, settings: Settings
) -> None:
    """A write of the failure sensor waited the minute a harvest's writes wait for the
    harvest's transaction (on PostgreSQL, as long as the harvest held the run's row),
    holding Dagster's daemon thread, which could time the tick out. Now it waits the
    resource's few seconds, and the tick fails in one line naming the state database, busy,
    its cursor kept: the next tick records the failure."""
    add_harvester(settings, "alpha")
    cursor = _tick("harvest_failure_sensor", instance, resources=_IMPATIENT).cursor
    dagster_run, _failure = _failed_dagster_run(instance)
    harvest_run = add_finished_run(
        settings, "alpha", "2024-03-01T00:00:00Z", "running", dagster_run.run_id
    )

    with held_by_a_harvest(settings, "alpha"), pytest.raises(RecordedNextTick) as failed:
        _tick("harvest_failure_sensor", instance, cursor, _IMPATIENT)
    [line] = str(failed.value).splitlines()
    assert line == (
        f"the state database is busy: {_held_for(settings, 'harvest_runs')}; the end of "
        f"Dagster run {dagster_run.run_id} is recorded on its harvest runs by the next tick"
    )
    with Services(settings) as services:
        assert services.state.get_run(harvest_run)["status"] == "running"

    _tick("harvest_failure_sensor", instance, cursor, _IMPATIENT)  # the same cursor again
    with Services(settings) as services:
        assert services.state.get_run(harvest_run)["status"] == "failed"


def test_the_registry_sensor_leaves_the_fixture_file_to_the_next_tick_while_a_harvest_writes(
    state_backend: str, instance: dg.DagsterInstance, settings: Settings
) -> None:
    """Applying a changed oai_harvesters.yaml waited a minute for a harvest's transaction
    (on PostgreSQL, as long as the harvest held the harvester's row), then failed the tick
    with SQLAlchemy's error. Now the tick keeps the partitions of the registry as it is and
    says the file waits for the next tick, which applies it."""
    add_harvester(settings, "alpha")
    settings.fixture_file.write_text(_FIXTURE)

    with held_by_a_harvest(settings, "alpha"):
        held = _tick("harvester_registry_sensor", instance, resources=_IMPATIENT)
    [request] = held.dynamic_partitions_requests
    assert request.partition_keys == ["alpha"]  # the registry as it is
    instance.add_dynamic_partitions(HARVESTER, request.partition_keys)
    with Services(settings) as services:
        assert services.state.get_harvester("beta") is None

    waited = _tick("harvester_registry_sensor", instance, resources=_IMPATIENT)
    [request] = waited.dynamic_partitions_requests
    assert request.partition_keys == ["beta"]
    with Services(settings) as services:
        assert services.state.get_harvester("alpha").name == "Alpha"


def test_the_registry_sensor_says_why_the_fixture_file_waits(
    state_backend: str, instance: dg.DagsterInstance, settings: Settings
) -> None:
    """With the partitions matching, the tick's skip reason says the file waits, and why."""
    add_harvester(settings, "alpha")
    instance.add_dynamic_partitions(HARVESTER, ["alpha"])
    settings.fixture_file.write_text(_FIXTURE)
    with held_by_a_harvest(settings, "alpha"):
        held = _tick("harvester_registry_sensor", instance, resources=_IMPATIENT)
    assert held.skip_message == (
        "harvester partitions already match the registry; oai_harvesters.yaml not applied "
        f"this tick: the state database is busy: {_held_for(settings, 'harvesters')}; the "
        "next tick applies it"
    )


def test_a_ticks_lease_meeting_a_held_lease_gives_the_one_line_instead_of_waiting(
    state_backend: str, settings: Settings
) -> None:
    """A tick's services gave their state store the tick's wait, not their lease's engine:
    on PostgreSQL its writes waited as long as a harvest held the lease's row, on SQLite
    the driver's 5 s, ending in SQLite's bare `database is locked`. Now the lease waits the
    tick's few seconds and says so in the store's one line."""
    add_harvester(settings, "alpha")
    owner = new_owner()
    with _IMPATIENT["pipeline"].tick_services() as tick:
        assert tick.harvester_lock.try_acquire("alpha", owner)
        with held_by_a_harvest(settings, "alpha"), pytest.raises(sa.exc.OperationalError) as held:
            tick.harvester_lock.renew("alpha", owner)
        assert is_lock_timeout(held.value)
        [line] = database_error_text(held.value.orig).splitlines()
        assert line == _held_for(settings, "harvester_locks")
        tick.harvester_lock.release("alpha", owner)


@contextmanager
def one_version_behind(settings: Settings) -> Iterator[Callable[[], int]]:
    """The state store as the release before left it (to be migrated by whoever opens it
    next); yields what reads its schema version."""
    engine = sa.create_engine(settings.state_db_url)
    try:
        with engine.begin() as connection:  # as release 22 left it
            connection.exec_driver_sql("DROP TABLE pending_rekeys")
            connection.exec_driver_sql(f"UPDATE schema_version SET version = {SCHEMA_VERSION - 1}")

        def version() -> int:
            with engine.connect() as connection:
                return connection.exec_driver_sql("SELECT version FROM schema_version").scalar()

        yield version
    finally:
        engine.dispose()


def _migration_held(settings: Settings) -> str:
    """How the state store says its migration gave up waiting 0.2 s for a harvest (on
    PostgreSQL for the lock of the whole store, not a row's)."""
    if sa.make_url(settings.state_db_url).get_backend_name() == "sqlite":
        return _held_for(settings, "")
    return (
        f"lock timeout: {settings.state_db_url} stayed locked by another writer's transaction "
        "(a harvest running) for 0.2 s"
    )


def test_a_tick_that_must_migrate_a_store_a_harvest_holds_skips_and_the_next_migrates(
    state_backend: str, instance: dg.DagsterInstance, settings: Settings
) -> None:
    """A new release's first tick, meeting the store of the older one while a harvest of
    that one writes, waited the tick's wait to migrate it, then failed: `cannot open the
    state database`. Now it skips with the line of any other held lock, and the next tick
    migrates the store."""
    add_harvester(settings, "alpha")
    instance.add_dynamic_partitions(HARVESTER, ["alpha"])
    with one_version_behind(settings) as version:
        with held_by_a_harvest(settings, "alpha"):
            held = _tick("harvester_registry_sensor", instance, resources=_IMPATIENT)
        assert held.skip_message == (
            f"registry not read this tick: the state database is busy: "
            f"{_migration_held(settings)}; the next tick reads it"
        )
        assert version() == SCHEMA_VERSION - 1

        migrated = _tick("harvester_registry_sensor", instance, resources=_IMPATIENT)
        assert migrated.skip_message == "harvester partitions already match the registry"
        assert version() == SCHEMA_VERSION


def _ended_dagster_run(instance: dg.DagsterInstance, sensor: str) -> dg.DagsterRun:
    """A Dagster run that ended as the run status sensor `sensor` watches for."""
    if sensor == "harvest_failure_sensor":
        return _failed_dagster_run(instance)[0]
    run = instance.create_run_for_job(_ended, run_id=None)
    instance.report_run_canceled(run, "canceled by the operator")
    return run


@dg.job
def _ended() -> None:
    pass


@pytest.mark.parametrize("sensor", ["harvest_failure_sensor", "harvest_canceled_sensor"])
def test_a_run_status_tick_that_must_migrate_a_store_a_harvest_holds_records_on_the_next_tick(
    state_backend: str, instance: dg.DagsterInstance, settings: Settings, sensor: str
) -> None:
    """The run status sensors' ticks meeting a store to migrate while a harvest of the
    release before writes (`StoreBusy`): the tick fails in the busy store's one line, its
    cursor kept, and the next tick migrates the store and records the Dagster run's end."""
    add_harvester(settings, "alpha")
    cursor = _tick(sensor, instance, resources=_IMPATIENT).cursor  # the daemon's first tick
    dagster_run = _ended_dagster_run(instance, sensor)
    harvest_run = add_finished_run(
        settings, "alpha", "2024-03-01T00:00:00Z", "running", dagster_run.run_id
    )
    with one_version_behind(settings) as version:
        with held_by_a_harvest(settings, "alpha"), pytest.raises(RecordedNextTick) as failed:
            _tick(sensor, instance, cursor, _IMPATIENT)
        [line] = str(failed.value).splitlines()
        assert line == (
            f"the state database is busy: {_migration_held(settings)}; the end of Dagster "
            f"run {dagster_run.run_id} is recorded on its harvest runs by the next tick"
        )
        assert version() == SCHEMA_VERSION - 1

        _tick(sensor, instance, cursor, _IMPATIENT)  # the daemon retries the same cursor

        assert version() == SCHEMA_VERSION
    with Services(settings) as services:
        ended = services.state.get_run(harvest_run)["status"]
    assert ended == ("failed" if sensor == "harvest_failure_sensor" else "stopped")


def test_a_failed_run_met_by_an_unwritable_state_store_is_recorded_on_the_next_tick(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    """Dagster moves a run status sensor's cursor past a run whose evaluation raised: the
    failure sensor's tick said the store failed, and the harvest run stayed `running` for
    good. Now the tick fails, its cursor kept, and the next one records the failure."""
    add_harvester(settings, "alpha")
    cursor = _tick("harvest_failure_sensor", instance).cursor  # the daemon's first tick
    dagster_run, _failure = _failed_dagster_run(instance)
    harvest_run = add_finished_run(
        settings, "alpha", "2024-03-01T00:00:00Z", "running", dagster_run.run_id
    )

    with unwritable(settings.home / "state.sqlite"), pytest.raises(dg.DagsterError) as failed:
        _tick("harvest_failure_sensor", instance, cursor)
    [line] = str(failed.value).splitlines()
    assert "state.sqlite or its folder is not writable" in line
    assert dagster_run.run_id in line
    with Services(settings) as services:
        assert services.state.get_run(harvest_run)["status"] == "running"

    _tick("harvest_failure_sensor", instance, cursor)  # the daemon retries the same cursor
    with Services(settings) as services:
        assert services.state.get_run(harvest_run)["status"] == "failed"
        assert "the worker died" in services.state.get_run(harvest_run)["error"]


def test_a_state_store_failing_mid_tick_is_one_line_naming_it(tmp_path: Path) -> None:
    """A write refused once the store is open came out as SQLAlchemy's error with its
    statement and parameters, and the run was passed over as above."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'state.sqlite'}")
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql("CREATE TABLE runs (id INTEGER)")
        with (
            pytest.raises(RecordedNextTick) as failed,
            engine.begin() as connection,
            recorded_next_tick("run-1"),
        ):
            connection.exec_driver_sql("PRAGMA query_only = 1")
            connection.exec_driver_sql("INSERT INTO runs VALUES (1)")
    finally:
        engine.dispose()
    assert str(failed.value) == (
        "the state database failed: attempt to write a readonly database; the end of "
        "Dagster run run-1 is recorded on its harvest runs by the next tick"
    )


def _damage_run_storage(instance_folder: Path) -> None:
    """Dagster's runs.db no more a database (a disk fault, a copy cut short)."""
    [runs] = instance_folder.rglob("runs.db")
    for part in runs.parent.glob("runs.db*"):
        part.unlink()
    runs.write_bytes(b"not a database" * 1000)


@pytest.mark.parametrize(
    "name",
    [
        "dead_run_sensor",
        "incremental_harvest_schedule",
        "run_all_harvesters_schedule",
        "reconcile_schedule",
        "prune_run_history_schedule",
    ],
)
def test_a_tick_meeting_dagsters_storage_failing_says_so_in_one_line(
    name: str,
    persistent_instance: dg.DagsterInstance,
    settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Was SQLAlchemy's error with its statement, and its traceback under it."""
    home = tmp_path / "dagster_instance"  # the daemon's instance is DAGSTER_HOME's
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    add_harvester(settings, "alpha")
    if name.endswith("_schedule"):
        evaluate = defs.resolve_schedule_def(name).evaluate_tick
        context = dg.build_schedule_context(instance=persistent_instance, resources=defs.resources)
    else:
        evaluate = defs.resolve_sensor_def(name).evaluate_tick
        context = dg.build_sensor_context(instance=persistent_instance, resources=defs.resources)
    assert context.instance  # opened before its storage fails, as the daemon's is
    _damage_run_storage(home)

    with pytest.raises(Exception) as failed:
        evaluate(context)

    error = failed.value  # a schedule's wrapped by Dagster (the daemon wraps a sensor's too)
    if isinstance(error, dg.DagsterUserCodeExecutionError):
        error = error.__cause__
    assert error.__cause__ is None and error.__suppress_context__  # no SQLAlchemy chain
    [line] = str(error).splitlines()
    assert line == (
        f"the Dagster instance's database failed in {home}: file is not a database: a "
        f"database in {home} is damaged; restore the folder from a backup, or move it aside "
        "for a new, empty instance (its run history is then lost)"
    )
