"""Listings of a store of a million harvest records read what they list, not every record:
checked by SQLite's query plan, not by timing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from oai_pipeline.state.schema import harvest_records, record_errors
from oai_pipeline.state.store import StateStore


def _statement_plans(engine: sa.Engine, call: Callable[[], object], reading: str) -> list[str]:
    """SQLite's plan of each statement `call` sends that reads the table `reading`."""
    sent: list[tuple[str, object]] = []

    def grab(_conn, _cursor, statement, parameters, _context, _many) -> None:  # noqa: ANN001
        if f"FROM {reading}" in statement and not statement.startswith("EXPLAIN"):
            sent.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", grab)
    try:
        call()
    finally:
        sa.event.remove(engine, "before_cursor_execute", grab)
    assert sent
    with engine.connect() as conn:
        return [
            " | ".join(row[3] for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {s}", p))
            for s, p in sent
        ]


@pytest.fixture
def store(tmp_path: Path):
    with StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}") as store:
        with store._engine.begin() as conn:  # noqa: SLF001
            conn.execute(
                harvest_records.insert(),
                [
                    {"harvester_id": "h", "identifier": f"oai:x:{n}", "deleted": False}
                    for n in range(20)
                ],
            )
            conn.execute(
                record_errors.insert(),
                [
                    {
                        "harvester_id": "h",
                        "identifier": f"oai:x:{n}",
                        "stage": "transform",
                        "type": "common" if n % 2 else "rare",
                        "message": "bad date",
                        "created_at": "2024-01-01T00:00:00Z",
                    }
                    for n in range(0, 20, 5)
                ],
            )
        yield store


@pytest.mark.parametrize(
    "filters",
    [
        pytest.param({"error_type": "rare"}, id="type"),
        pytest.param({"harvester_id": "h", "error_type": "rare"}, id="harvester-type"),
        pytest.param({"message": "date"}, id="message"),
        pytest.param({"error_type": "rare", "location": "x"}, id="type-location"),
    ],
)
def test_records_listed_by_error_are_found_from_their_errors(
    store: StateStore, filters: dict
) -> None:
    """`records list --error-type T`: a correlated EXISTS per record made SQLite read, for
    every record until the listing was full, all errors of that type (by the type index): a
    million records, 24 s for a rare type, and no match read them all."""
    plans = _statement_plans(
        store._engine,  # noqa: SLF001
        lambda: store.list_records(**filters),
        "harvest_records",
    )
    listing = plans[0]
    assert "CORRELATED" not in listing, listing
    assert "SCAN harvest_records" not in listing and "SCAN r " not in listing, listing
    assert "LIST SUBQUERY" in listing, listing


def test_a_reconcile_reads_the_gone_records_from_their_own_index(store: StateStore) -> None:
    """Each reconcile reads back the records it marked gone (a few, if any) to see which the
    source lists again: it read every record of the harvester for them (PostgreSQL: a
    sequential scan of every harvester's). A partial index holds just them (version 14)."""
    store.mark_gone("h", {"oai:x:3"})
    chunks: list[list[str]] = []
    plans = _statement_plans(
        store._engine,  # noqa: SLF001
        lambda: chunks.extend(store.gone_identifier_chunks("h")),
        "harvest_records",
    )
    assert chunks == [["oai:x:3"]]
    for plan in plans:
        assert "ix_harvest_records_gone" in plan, plan
        assert "TEMP B-TREE" not in plan, plan
