"""Both SQLite files a harvest writes (state store, embedded target) get the WAL tuning."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from oai_pipeline.sqlite_tuning import CACHE_KIB, WAL_AUTOCHECKPOINT_PAGES
from oai_pipeline.state.store import StateStore
from oai_pipeline.targets.embedded.repository import EmbeddedRepository

NORMAL = 1  # PRAGMA synchronous


def _pragmas(engine: sa.Engine) -> tuple[str, int, int, int]:
    with engine.connect() as connection:
        return tuple(  # type: ignore[return-value]
            connection.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "synchronous", "wal_autocheckpoint", "cache_size")
        )


def test_state_store_and_target_get_the_wal_and_cache_settings(tmp_path: Path) -> None:
    expected = ("wal", NORMAL, WAL_AUTOCHECKPOINT_PAGES, -CACHE_KIB)
    with StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}") as store:
        assert _pragmas(store._engine) == expected
    repository = EmbeddedRepository(f"sqlite:///{tmp_path / 'target.sqlite'}")
    try:
        assert _pragmas(repository.engine) == expected
    finally:
        repository.close()
