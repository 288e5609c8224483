"""How long the state store's writes wait for another writer's row locks on PostgreSQL."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from oai_pipeline.errors import database_error_text
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.lock_waits import is_lock_timeout
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline.state.store import StateStore
from oai_pipeline_tests.postgres import fresh_database

pytestmark = pytest.mark.postgres


def _setting(store: StateStore, name: str) -> str:
    with store._engine.connect() as connection:
        return connection.exec_driver_sql(f"SHOW {name}").scalar()


def test_a_wait_given_limits_row_lock_waits_and_a_harvest_keeps_none(postgres_url: str) -> None:
    """A tick's wait did nothing on PostgreSQL: its writes waited for a harvest's row locks
    as long as the harvest held them. Now the wait is the connection's lock_timeout; a
    harvest (no wait given) keeps PostgreSQL's none."""
    url = fresh_database(postgres_url, "state")
    with StateStore(url, lock_wait_seconds=0.2) as tick, StateStore(url) as harvest:
        assert _setting(tick, "lock_timeout") == "200ms"
        assert _setting(harvest, "lock_timeout") == "0"


def test_a_wait_given_keeps_the_urls_own_connect_options(postgres_url: str) -> None:
    """The wait is set on each connection, not in the driver's `options`, which the URL
    may give for its own settings."""
    url = sa.make_url(fresh_database(postgres_url, "state"))
    own = url.update_query_dict({"options": "-c statement_timeout=7000"})
    with StateStore(own.render_as_string(hide_password=False), lock_wait_seconds=0.2) as tick:
        assert _setting(tick, "statement_timeout") == "7s"
        assert _setting(tick, "lock_timeout") == "200ms"


def test_postgresqls_lock_not_available_is_a_lock_timeout(postgres_url: str) -> None:
    """The driver's own error (SQLSTATE 55P03), as a harvest given a lock_timeout in its
    URL's options meets it, is the lock timeout the ticks leave to their next tick."""
    engine = sa.create_engine(fresh_database(postgres_url, "state"))
    try:
        with engine.begin() as holder:
            holder.exec_driver_sql("CREATE TABLE t (id INTEGER)")
            holder.exec_driver_sql("INSERT INTO t VALUES (1)")
        with engine.connect() as holder, holder.begin():
            holder.exec_driver_sql("UPDATE t SET id = 1")
            with pytest.raises(sa.exc.OperationalError) as failed, engine.begin() as waiter:
                waiter.exec_driver_sql("SET LOCAL lock_timeout = 50")
                waiter.exec_driver_sql("UPDATE t SET id = 2")
    finally:
        engine.dispose()
    assert is_lock_timeout(failed.value)
    assert is_lock_timeout(failed.value.orig)
    assert not is_lock_timeout(sa.exc.OperationalError("UPDATE", {}, RuntimeError("x")))


def test_a_lock_timeout_of_the_urls_own_options_is_the_projects_one_line(
    postgres_url: str,
) -> None:
    """A harvest (no wait given) whose URL sets its own lock_timeout got PostgreSQL's
    `canceling statement due to lock timeout` and its CONTEXT line: nothing said what was
    locked by whom, nor what to do. Now the line names the table and database, the other
    writer and what to do."""
    url = sa.make_url(fresh_database(postgres_url, "state", statement_timeout_seconds=15))
    own = url.update_query_dict({"options": "-c lock_timeout=100"})
    shown = own.render_as_string(hide_password=False)
    harvester = Harvester(
        id="alpha", base_url="https://alpha.example.org/oai", metadata_prefix="oai_dc"
    )
    engine = sa.create_engine(url)
    try:
        with StateStore(shown) as harvest:
            harvest.save_harvester(harvester)
            with engine.connect() as holder, holder.begin():
                holder.exec_driver_sql("UPDATE harvesters SET updated_at = updated_at")
                with pytest.raises(sa.exc.OperationalError) as failed:
                    harvest.save_harvester(harvester)
    finally:
        engine.dispose()
    assert is_lock_timeout(failed.value)
    assert database_error_text(failed.value.orig) == (
        f"lock timeout: a row of harvesters in {shown} stayed locked by another writer's "
        "transaction (a harvest running) longer than its lock_timeout; run again once that "
        "one is done: a harvest resumes where it stopped"
    )


@pytest.mark.parametrize("tick_wait", [None, 5.0], ids=["harvest", "tick"])
def test_a_lease_waits_for_another_writer_as_long_as_its_stores_writes(
    settings: Settings, tick_wait: float | None
) -> None:
    """On SQLite a harvest's lease waited the driver's 5 s behind another harvest's write
    transaction, then failed with a bare `database is locked`, while its store's writes
    wait 60 s: the lease (same file) gives up with them, and says so in the same line."""

    def busy_timeout(engine: sa.Engine) -> int:
        with engine.connect() as connection:
            return connection.exec_driver_sql("PRAGMA busy_timeout").scalar_one()

    with Services(settings, state_lock_wait=tick_wait) as services:
        store_wait = busy_timeout(services.state._engine)
        assert store_wait == (5000 if tick_wait else 60000)
        assert busy_timeout(services._lock_engine) == store_wait
