"""What every harvest asks of the harvester's runs is answered from an index, not by reading
every run the harvester ever had (an hourly schedule makes 26,000 in three years)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa

from oai_pipeline.state.schema import RUN_INDEXES, SCHEMA_VERSION, harvest_runs
from oai_pipeline.state.store import StateStore


def _runs(store: StateStore, count: int) -> None:
    for day in range(count):
        run_id = store.create_run(
            "h",
            window_from=f"2024-01-{day + 1:02d}",
            window_until=None,
            scale=None,
            max_records=0,
            options={},
            worker="host:1:nonce",
        )
        store.finish_run(run_id, "succeeded")


def _history(store: StateStore, days: int = 200) -> None:
    """Half a year of daily runs of thirty harvesters, of which "h" has failed since its first
    days: its last success is far behind the newest runs. PostgreSQL's planner, told so (ANALYZE),
    picks a plan for a table of this size and not one it would take for a handful of rows."""
    rows = [
        {
            "harvester_id": harvester,
            "window_from": f"day-{day}",
            "max_records": 0,
            "options": {},
            "status": "failed" if failed else "succeeded",
            # succeeded long ago: pruned (failed runs keep their rows)
            "record_counts": None if failed else {"statuses": {}},
            "created_at": "2024-01-01T00:00:00.000000Z",
            "updated_at": "2024-01-01T00:00:00.000000Z",
            "finished_at": "2024-01-01T00:00:00.000000Z",
        }
        for day in range(days)
        for harvester in ["h", *(f"other-{n}" for n in range(29))]
        for failed in [harvester == "h" and day > 3]
    ]
    with store._engine.begin() as conn:  # noqa: SLF001
        conn.execute(harvest_runs.insert(), rows)
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("ANALYZE harvest_runs")


def _plans(store: StateStore, call: Callable[[], object]) -> list[str]:
    """The database's plan of each statement `call` sends that reads harvest_runs."""
    sent: list[tuple[str, object]] = []

    def grab(_conn, _cursor, statement, parameters, _context, _many) -> None:  # noqa: ANN001
        if "FROM harvest_runs" in statement and not statement.startswith("EXPLAIN"):
            sent.append((statement, parameters))

    sa.event.listen(store._engine, "before_cursor_execute", grab)  # noqa: SLF001
    try:
        call()
    finally:
        sa.event.remove(store._engine, "before_cursor_execute", grab)  # noqa: SLF001
    assert sent
    with store._engine.connect() as conn:  # noqa: SLF001
        if conn.dialect.name == "postgresql":
            return [
                " ".join(row[0] for row in conn.exec_driver_sql(f"EXPLAIN {s}", p)) for s, p in sent
            ]
        return [
            " ".join(row[3] for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {s}", p))
            for s, p in sent
        ]


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda s: s.settle_interrupted_runs("h", lambda _h, _w: "held"), id="settle"),
        pytest.param(lambda s: s.settle_interrupted_runs(None, lambda _h, _w: "held"), id="all"),
        pytest.param(lambda s: s.find_resumable_run("h", "2099-01-01", None), id="resume"),
        pytest.param(lambda s: s.find_resumable_run("h", None, "2099-01-01"), id="resume-open"),
        pytest.param(lambda s: s.prune_run_records("h", keep_days=30), id="prune"),
        pytest.param(lambda s: s.last_success("h"), id="last-success"),
    ],
)
def test_a_harvests_questions_about_runs_use_an_index_of_what_they_ask(
    store_url: str, call: Callable[[StateStore], object]
) -> None:
    """Not the harvester's index alone: with it SQLite read each run of the harvester (at
    26,000 runs, ~0.4 s a question, three questions a run). Nor the primary key from the
    newest run back: PostgreSQL read so every run newer than the harvester's last success
    (at 260,000 runs, one failing harvester: ~100 ms a question)."""
    with StateStore(store_url) as store:
        _runs(store, 5)
        _history(store)
        for plan in _plans(store, lambda: call(store)):
            assert "SCAN harvest_runs" not in plan  # SQLite
            assert "Seq Scan on harvest_runs" not in plan  # PostgreSQL
            assert "harvest_runs_pkey" not in plan, plan
            assert "ix_harvest_runs_harvester_id (harvester_id=?)" not in plan, plan
            assert any(index.name in plan for index in RUN_INDEXES), plan


def test_a_harvesters_latest_run_is_read_from_its_end_of_an_index(store_url: str) -> None:
    """`status` of a harvester that has not run for a while: PostgreSQL read the primary key
    from the newest run back, through every run of the other harvesters since."""
    with StateStore(store_url) as store:
        _history(store)
        with store._engine.begin() as conn:  # noqa: SLF001
            conn.execute(harvest_runs.delete().where(harvest_runs.c.harvester_id == "other-0"))
            conn.execute(  # its runs were long ago: every other harvester's are newer
                harvest_runs.insert(),
                [{**row, "harvester_id": "other-0"} for row in _old_runs(200)],
            )
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql("ANALYZE harvest_runs")
        for plan in _plans(store, lambda: store.latest_run("other-0")):
            assert "SCAN harvest_runs" not in plan  # SQLite
            assert "Seq Scan on harvest_runs" not in plan  # PostgreSQL
            assert "harvest_runs_pkey" not in plan, plan
        assert store.latest_run("other-0")["window_from"] == "old-199"


def _old_runs(count: int) -> list[dict]:
    return [
        {
            "id": -count + n,  # before every other run
            "window_from": f"old-{n}",
            "max_records": 0,
            "options": {},
            "status": "succeeded",
            "created_at": "2023-01-01T00:00:00.000000Z",
            "updated_at": "2023-01-01T00:00:00.000000Z",
            "finished_at": "2023-01-01T00:00:00.000000Z",
        }
        for n in range(count)
    ]


def test_a_version_9_database_gains_the_run_indexes(store_url: str) -> None:
    with StateStore(store_url) as store:
        _runs(store, 2)
    engine = sa.create_engine(store_url)
    with engine.begin() as connection:
        for index in RUN_INDEXES:
            connection.execute(sa.text(f"DROP INDEX {index.name}"))
        connection.execute(sa.text("UPDATE schema_version SET version = 9"))
    with StateStore(store_url) as store:
        assert store.find_resumable_run("h", "2024-01-01", None) is None  # succeeded
    with engine.connect() as connection:
        names = {i["name"] for i in sa.inspect(connection).get_indexes("harvest_runs")}
        version = connection.execute(sa.text("SELECT version FROM schema_version")).scalar()
    engine.dispose()
    assert {index.name for index in RUN_INDEXES} <= names
    assert version == SCHEMA_VERSION


def test_a_version_10_database_gains_the_id_in_its_status_index(store_url: str) -> None:
    """Version 10 made it without: PostgreSQL found a harvester's last success by reading
    every newer run."""
    with StateStore(store_url) as store:
        _runs(store, 2)
    engine = sa.create_engine(store_url)
    with engine.begin() as connection:
        connection.execute(sa.text("DROP INDEX ix_harvest_runs_status"))
        connection.execute(
            sa.text("CREATE INDEX ix_harvest_runs_status ON harvest_runs (status, harvester_id)")
        )
        connection.execute(sa.text("UPDATE schema_version SET version = 10"))
    with StateStore(store_url) as store:
        assert store.last_success("h")["window_from"] == "2024-01-02"
    with engine.connect() as connection:
        indexes = sa.inspect(connection).get_indexes("harvest_runs")
        version = connection.execute(sa.text("SELECT version FROM schema_version")).scalar()
    engine.dispose()
    (status,) = (index for index in indexes if index["name"] == "ix_harvest_runs_status")
    assert status["column_names"] == ["status", "harvester_id", "id"]
    assert version == SCHEMA_VERSION


def test_sweep_histories_reads_each_harvesters_latest_runs_in_one_query(store_url: str) -> None:
    """The hourly schedule's question, for every harvester at once (see `sweep_histories`)."""
    with StateStore(store_url) as store:
        _history(store, days=12)
        sent: list[str] = []

        def grab(_conn, _cursor, statement, *_args) -> None:  # noqa: ANN001
            sent.append(statement)

        sa.event.listen(store._engine, "before_cursor_execute", grab)  # noqa: SLF001
        try:
            histories = store.sweep_histories(["h", "other-3", "never-ran"], limit=5)
        finally:
            sa.event.remove(store._engine, "before_cursor_execute", grab)  # noqa: SLF001

        assert len([s for s in sent if "FROM harvest_runs" in s]) == 1
        assert histories["never-ran"] == []
        newest_first = [f"day-{day}" for day in range(11, 6, -1)]
        assert [run["window_from"] for run in histories["h"]] == newest_first
        assert {run["status"] for run in histories["h"]} == {"failed"}
        assert [run["window_from"] for run in histories["other-3"]][0] == "day-11"
        assert all(run["harvester_id"] == "other-3" for run in histories["other-3"])
        assert histories["h"][0].keys() >= {"status", "cap_reached", "options", "response_date"}
