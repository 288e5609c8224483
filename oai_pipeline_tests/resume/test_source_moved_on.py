"""A harvest killed, then rerun after the source moved on (records updated, deleted and added
since the killed attempt, dated when they changed as real sources date them), ends like a
harvest of the source as it is now into a fresh home: the rerun resumes its run, and lists
again what the source changed since that run began listing.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from oai_pipeline.sample_endpoint.records import generate_datacite_records
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline_tests.benchmark import revise
from oai_pipeline_tests.resume import crash_sweep
from oai_pipeline_tests.resume.crash_sweep import EXIT_CODE, HARVESTER, PREFIX, Backend, Home

FIRST_DAY = datetime(2024, 1, 5, tzinfo=UTC)
FULL = ["harvest", HARVESTER]


def _harvest(home: Home, crash: str = "none") -> str:
    """The harvest's progress (stderr)."""
    result = crash_sweep._cli(home, crash, FULL)
    expected = 0 if crash == "none" else EXIT_CODE
    assert result.returncode == expected, result.stdout + result.stderr[-3000:]
    return result.stderr


def _target(home: Home) -> dict[str, tuple]:
    """Each harvested record's state, DOI and data, by its OAI identifier."""
    engine = sa.create_engine(crash_sweep._settings(home).target_db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT * FROM target_records"))
            return {
                r.source_identifier: (r.state, r.doi, crash_sweep._digest(r.data)) for r in rows
            }
    finally:
        engine.dispose()


def _staged(home: Home) -> list[str]:
    engine = sa.create_engine(crash_sweep._settings(home).state_db_url)
    try:
        with engine.connect() as conn:
            return sorted(
                r[0] for r in conn.execute(sa.text("SELECT identifier FROM harvest_records"))
            )
    finally:
        engine.dispose()


def _move_on(endpoint: OAIEndpoint, staged: list[str]) -> None:
    """Update and delete records the killed attempt staged, and add new ones, all dated now
    (after the killed attempt listed)."""
    now = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    current = {record.identifier: record for record in endpoint.records()}
    live = [identifier for identifier in staged if not current[identifier].deleted]
    chosen = random.Random(1).sample(live, 6)
    for identifier in chosen[:4]:
        revise(endpoint, current[identifier], now, PREFIX)
    for identifier in chosen[4:]:
        endpoint.mark_deleted(identifier, now)
    for index, record in enumerate(
        generate_datacite_records(3, seed=99, start=now, span_days=1, prefixes=(PREFIX,))
    ):
        identifier = f"oai:generated.oai-pipeline:new-{index}"
        endpoint.upsert(dataclasses.replace(record, identifier=identifier, datestamp=now))


@pytest.mark.parametrize(
    "crash",
    [
        # discover: two pages staged, the list not finished
        "stage:2:after",
        # write: the run listed and transformed all, a batch of creations in the target
        "writer_apply:2:after",
    ],
)
def test_a_rerun_after_the_source_moved_on_ends_like_a_fresh_harvest_of_it(
    tmp_path: Path, crash: str
) -> None:
    records = generate_datacite_records(
        100, seed=5, start=FIRST_DAY, span_days=2, prefixes=(PREFIX,), deleted_fraction=0.05
    )
    backend = Backend()
    with OAIEndpoint(records, page_size=20) as endpoint:
        empty = backend.new_home(tmp_path, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=10)
        home = backend.new_home(tmp_path, "home", empty)
        _harvest(home, crash)
        _move_on(endpoint, _staged(home))
        assert "listing again what the source changed since" in _harvest(home)
        fresh = backend.new_home(tmp_path, "fresh", empty)
        _harvest(fresh)

    assert _target(home) == _target(fresh)
