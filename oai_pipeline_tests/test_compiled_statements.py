"""Statements compiled once per process: shared by alike engines, kept apart otherwise."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine.default import DefaultDialect

from oai_pipeline.compiled_statements import MAX_KINDS, SharedStatementCache, new_engine
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.json_codec import ENGINE_JSON
from oai_pipeline.state.store import StateStore
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.support import listening

METADATA = sa.MetaData()
NOTES = sa.Table(
    "notes",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("body", sa.JSON),
)


@contextmanager
def cache_outcomes() -> Iterator[list[object]]:
    """Whether each query (SELECT, INSERT, UPDATE, DELETE) any engine runs meanwhile was
    compiled or found compiled."""
    outcomes: list[object] = []

    def seen(_conn, clause, _multiparams, _params, _options, result) -> None:
        if isinstance(clause, sa.Select | sa.Insert | sa.Update | sa.Delete):
            outcomes.append(result.context.cache_hit)

    with listening(sa.Engine, "after_execute", seen):
        yield outcomes


def _store_work(home: Path) -> None:
    """What a harvest asks of its stores first: its harvester, and records in the target."""
    with StateStore(f"sqlite:///{home / 'state.sqlite'}") as state:
        state.save_harvester(
            Harvester.from_stored(
                {"id": "h", "base_url": "https://example.org/oai", "metadata_prefix": "oai_dc"}
            )
        )
        assert state.get_harvester("h") is not None
        assert [h.id for h in state.list_harvesters()] == ["h"]
    with EmbeddedRepository(f"sqlite:///{home / 'target.sqlite'}") as target:
        record_id = target.deposit({"metadata": {"title": str(home)}}, publish=True)
        assert target.show(record_id)["data"]["metadata"]["title"] == str(home)


def test_stores_opened_again_on_other_files_compile_nothing_again(tmp_path: Path) -> None:
    _store_work(tmp_path / "first")
    with cache_outcomes() as outcomes:
        _store_work(tmp_path / "second")
    compiled = [o for o in outcomes if o == DefaultDialect.CACHE_MISS]
    found = [o for o in outcomes if o == DefaultDialect.CACHE_HIT]
    assert found and not compiled, f"{len(compiled)} of {len(outcomes)} statements compiled again"


def _insert_and_read(engine: sa.Engine, note_id: int) -> tuple[object, object]:
    """The note's body as stored (its JSON text on SQLite) and as read through the engine."""
    METADATA.create_all(engine)
    with engine.begin() as connection:
        connection.execute(sa.insert(NOTES).values(id=note_id, body={"n": note_id}))
        body = connection.execute(sa.select(NOTES.c.body).where(NOTES.c.id == note_id)).scalar()
        stored = connection.exec_driver_sql("SELECT body FROM notes").scalar()
    return stored, body


def test_engines_of_other_settings_keep_their_own_statements(tmp_path: Path) -> None:
    """A statement compiled for an engine with the pipeline's JSON codec would write and
    read JSON with that codec on an engine of another codec: they must not share it."""
    cache = SharedStatementCache()

    def marked(value: object) -> str:
        return json.dumps({"marked": value})

    plain = sa.create_engine(
        f"sqlite:///{tmp_path / 'plain.sqlite'}", execution_options={"compiled_cache": cache}
    )
    codec = sa.create_engine(
        f"sqlite:///{tmp_path / 'codec.sqlite'}",
        execution_options={"compiled_cache": cache},
        json_serializer=marked,
    )
    alike = sa.create_engine(
        f"sqlite:///{tmp_path / 'alike.sqlite'}",
        execution_options={"compiled_cache": cache},
        json_serializer=marked,
    )
    with cache_outcomes() as outcomes:
        assert _insert_and_read(plain, 1) == ('{"n": 1}', {"n": 1})
        assert _insert_and_read(codec, 2) == ('{"marked": {"n": 2}}', {"marked": {"n": 2}})
        codec_outcomes = outcomes[-2:]
        assert _insert_and_read(alike, 3) == ('{"marked": {"n": 3}}', {"marked": {"n": 3}})
        alike_outcomes = outcomes[-2:]
    assert codec_outcomes == [DefaultDialect.CACHE_MISS] * 2  # not the plain engine's
    assert alike_outcomes == [DefaultDialect.CACHE_HIT] * 2  # the codec engine's
    assert cache.kinds() == 2


def test_a_setting_that_differs_for_every_engine_cannot_grow_the_cache_for_ever(
    tmp_path: Path,
) -> None:
    cache = SharedStatementCache(capacity=50)
    for number in range(MAX_KINDS + 5):
        engine = sa.create_engine(
            f"sqlite:///{tmp_path / f'{number}.sqlite'}",
            execution_options={"compiled_cache": cache},
            json_serializer=lambda value: json.dumps(value),  # a new function each time
        )
        assert _insert_and_read(engine, number)[1] == {"n": number}
        engine.dispose()
    assert cache.kinds() == MAX_KINDS
    assert len(cache) <= 50 * 1.5  # SQLAlchemy's LRU trims past half its capacity again


@pytest.mark.postgres
def test_engines_on_two_postgresql_databases_share_their_statements(postgres_url: str) -> None:
    from oai_pipeline_tests.postgres import fresh_database

    first, second = (
        new_engine(fresh_database(postgres_url, "cache"), **ENGINE_JSON) for _ in range(2)
    )
    try:
        assert _insert_and_read(first, 1)[1] == {"n": 1}
        with cache_outcomes() as outcomes:
            assert _insert_and_read(second, 2)[1] == {"n": 2}
        # the INSERT, the SELECT, and the catalog's query of create_all
        assert len(outcomes) >= 2 and set(outcomes) == {DefaultDialect.CACHE_HIT}
    finally:
        first.dispose()
        second.dispose()
