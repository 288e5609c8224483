"""A partition materialised on a PostgreSQL-backed Dagster instance (the shipped
dagster-postgres.yaml, pointed at a throwaway server by the DAGSTER_PG_* variables)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa
from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage

from oai_pipeline.defs import run_history
from oai_pipeline.defs.launch import materialize_windows
from oai_pipeline.defs.partitions import partition_key
from oai_pipeline.defs.prune_runs import prune_run_history_job
from oai_pipeline.defs.resources import PipelineResource
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline_tests.support import register, shifted_sample_records, target_by_source

pytestmark = pytest.mark.postgres

PROJECT = Path(__file__).resolve().parents[2]
DATABASE = "dagster_instance_test"


@pytest.fixture
def postgres_instance(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dg.DagsterInstance]:
    url = sa.make_url(postgres_url)
    admin = sa.create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {DATABASE}")
        connection.exec_driver_sql(f"CREATE DATABASE {DATABASE}")
    admin.dispose()
    for name, value in {
        "DAGSTER_PG_USERNAME": url.username or "postgres",
        "DAGSTER_PG_PASSWORD": url.password or "",
        "DAGSTER_PG_HOST": url.host or "127.0.0.1",
        "DAGSTER_PG_PORT": str(url.port),
        "DAGSTER_PG_DB": DATABASE,
    }.items():
        monkeypatch.setenv(name, value)
    # what run.sh does when DAGSTER_PG_HOST is set
    home = Path(os.environ["DAGSTER_HOME"])  # a fresh one per test (conftest)
    shutil.copy(PROJECT / "dagster-postgres.yaml", home / "dagster.yaml")
    instance = dg.DagsterInstance.get()
    try:
        yield instance
    finally:
        instance.dispose()


def test_materialise_a_partition_on_a_postgres_instance(
    postgres_instance: dg.DagsterInstance, postgres_url: str, settings: Settings
) -> None:
    instance = postgres_instance
    assert isinstance(instance.run_storage, PostgresRunStorage)
    assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
    assert instance.get_concurrency_config().run_queue_config.tag_concurrency_limits

    records = shifted_sample_records()
    day = "2024-01-05"
    with OAIEndpoint(records, page_size=3) as endpoint:
        register(settings, endpoint.base_url, harvester_id="pg")
        result = materialize_windows(instance, "pg", day, day)

    assert result.success
    expected = {
        r.identifier
        for r in records
        if not r.deleted and "oai_datacite" in r.metadata and r.datestamp.date().isoformat() == day
    }
    assert expected and set(target_by_source(settings, "pg")) == expected
    key = str(partition_key("pg", day))
    for asset in ("raw_oai_xml", "transformed_records", "sync_decisions", "written_records"):
        assert key in instance.get_materialized_partitions(dg.AssetKey(asset))
    # the run and its events live in PostgreSQL
    engine = sa.create_engine(sa.make_url(postgres_url).set(database=DATABASE))
    try:
        with engine.connect() as connection:
            run_ids = connection.exec_driver_sql("SELECT run_id FROM runs").scalars().all()
            materialisations = connection.exec_driver_sql(
                "SELECT count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'"
            ).scalar_one()
    finally:
        engine.dispose()
    assert result.run_id in run_ids
    assert materialisations == 4


def _shown_runs(instance: dg.DagsterInstance) -> dict[str, str]:
    """What the UI shows of each partition of written_records: its latest run."""
    asset_key = dg.AssetKey("written_records")
    return {
        partition: instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=[partition]), limit=1
        )
        .records[0]
        .run_id
        for partition in instance.get_materialized_partitions(asset_key)
    }


def test_the_prune_job_on_a_postgres_instance(
    postgres_instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Superseded runs go, in one statement a batch: Dagster's own delete_events deleted a
    run's rows twice over there (its run and index connections are the same database)."""
    instance = postgres_instance
    records = shifted_sample_records()
    first, last = "2024-01-05", "2024-01-07"
    with OAIEndpoint(records, page_size=3) as endpoint:
        register(settings, endpoint.base_url, harvester_id="pg")
        runs = [materialize_windows(instance, "pg", first, last).run_id for _ in range(3)]
        register(settings, endpoint.base_url, harvester_id="pg", metadata_prefix="no_such")
        failed = materialize_windows(instance, "pg", first, first, raise_on_error=False)
    assert not failed.success
    shown = _shown_runs(instance)
    assert set(shown.values()) == {runs[2]} and len(shown) == 3
    reconcile = instance.add_run(
        dg.DagsterRun(job_name="reconcile_sources", status=dg.DagsterRunStatus.SUCCESS)
    ).run_id
    later = datetime.now(UTC) + timedelta(days=3)
    monkeypatch.setattr(
        run_history, "datetime", type("Later", (datetime,), {"now": lambda tz=None: later})
    )
    monkeypatch.setattr(run_history, "KEEP_LAST_RUNS_PER_JOB", 0)
    monkeypatch.setenv("OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS", "1")

    deletes: list[str] = []
    engine = instance.event_log_storage._engine  # noqa: SLF001
    on_statement = lambda *args: deletes.append(args[2])  # noqa: E731
    sa.event.listen(engine, "before_cursor_execute", on_statement)
    try:
        result = prune_run_history_job.execute_in_process(
            instance=instance, resources={"pipeline": PipelineResource()}
        )
    finally:
        sa.event.remove(engine, "before_cursor_execute", on_statement)
    assert result.output_for_node("delete_superseded_runs") == {"pg": 2}
    alive = {
        run: instance.get_run_by_id(run) is not None for run in [*runs, failed.run_id, reconcile]
    }
    assert alive == {
        runs[0]: False,
        runs[1]: False,
        runs[2]: True,
        failed.run_id: True,
        reconcile: False,
    }
    # Each window still shows its latest run; nothing is left of the runs deleted.
    assert _shown_runs(instance) == shown
    with instance.event_log_storage.index_connection() as connection:
        left = connection.exec_driver_sql(
            "SELECT count(*) FROM event_logs WHERE run_id IN (%(a)s, %(b)s, %(c)s)",
            {"a": runs[0], "b": runs[1], "c": reconcile},
        ).scalar_one()
        tags, orphans = connection.exec_driver_sql(
            "SELECT count(*), count(*) FILTER (WHERE NOT EXISTS "
            "(SELECT 1 FROM event_logs e WHERE e.id = t.event_id)) FROM asset_event_tags t"
        ).one()
    assert left == 0
    # The tags of their materialisations (their partition's dimensions) went with them.
    assert tags > 0 and orphans == 0
    assert len([s for s in deletes if s.startswith("DELETE FROM event_logs")]) == 1
