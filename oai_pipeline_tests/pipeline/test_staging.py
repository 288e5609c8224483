"""Staging and reading back a run's records: what discover exports is what was staged.

The reference is the earlier iter_staged (one join ordered by staging order, every error
looked up per record); the store must give the same records, in the same order, for any
batch size.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from oai_pipeline.errors import RecordError
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.oai.types import HarvestedRecord
from oai_pipeline.state.schema import (
    harvest_record_xml,
    harvest_records,
    record_errors,
    run_records,
)
from oai_pipeline.state.store import StateStore


def _record(n: int, rng: random.Random) -> HarvestedRecord:
    deleted = rng.random() < 0.1
    error = None
    if rng.random() < 0.2:
        error = RecordError(
            type=rng.choice(["MissingMetadata", "MalformedRecord"]), message=f"m{n}"
        )
    return HarvestedRecord(
        identifier=f"oai:x:{rng.randrange(10**6):06d}-{n}",
        datestamp=f"2024-01-{rng.randrange(1, 29):02d}T00:00:{n % 60:02d}Z",
        deleted=deleted,
        set_specs=rng.sample(["a", "b", "c:d"], rng.randrange(0, 3)),
        xml=None if deleted else f"<record n='{n}'>é</record>".encode(),
        error=error,
    )


def _reference(store: StateStore, run_id: int) -> list[HarvestedRecord]:
    with store._engine.connect() as conn:
        rows = conn.execute(
            sa.select(
                harvest_records.c.identifier,
                harvest_records.c.datestamp,
                harvest_records.c.deleted,
                harvest_records.c.set_specs,
                harvest_record_xml.c.xml,
            )
            .join(
                harvest_records,
                sa.and_(
                    harvest_records.c.harvester_id == run_records.c.harvester_id,
                    harvest_records.c.identifier == run_records.c.identifier,
                ),
            )
            .outerjoin(
                harvest_record_xml,
                sa.and_(
                    harvest_record_xml.c.harvester_id == harvest_records.c.harvester_id,
                    harvest_record_xml.c.identifier == harvest_records.c.identifier,
                ),
            )
            .where(run_records.c.run_id == run_id)
            .order_by(run_records.c.id)
        ).all()
        out = []
        for row in rows:
            error = conn.execute(
                sa.select(record_errors)
                .where(
                    record_errors.c.identifier == row.identifier,
                    record_errors.c.stage == "harvest",
                )
                .order_by(record_errors.c.id)
            ).first()
            out.append(
                HarvestedRecord(
                    row.identifier,
                    row.datestamp,
                    bool(row.deleted),
                    list(row.set_specs or []),
                    row.xml,
                    None
                    if error is None
                    else RecordError(
                        type=error.type, message=error.message, location=error.location
                    ),
                )
            )
    return out


def test_iter_staged_gives_the_staged_records_in_staging_order(tmp_path: Path) -> None:
    rng = random.Random(3)
    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    store.save_harvester(
        Harvester.from_stored(
            {"id": "h", "base_url": "https://example.org/oai", "metadata_prefix": "oai_dc"}
        )
    )
    earlier = store.create_run(
        "h", window_from=None, window_until=None, scale=None, max_records=0, options={}
    )
    records = [_record(n, rng) for n in range(300)]
    store.stage(earlier, "h", records[:50])  # another run staged some of them before
    run_id = store.create_run(
        "h", window_from=None, window_until=None, scale=None, max_records=0, options={}
    )
    pages = [records[i : i + 37] for i in range(0, 300, 37)]
    for page in pages:
        # each page with a duplicate and a record of an earlier page (a redone page)
        store.stage(run_id, "h", [*page, page[0], records[rng.randrange(300)]])
    revised = [*records[10:20]]
    for record in revised:  # harvested again by a later run: the latest version counts
        record.xml = b"<record>revised</record>"
        record.error = RecordError(type="Revised", message="again")
    store.upsert_harvested("h", revised)
    expected = _reference(store, run_id)
    assert len(expected) == 300
    for batch_size in (1, 7, 300, 5000):
        assert list(store.iter_staged(run_id, batch_size=batch_size)) == expected

    def group_of(datestamp: str) -> int:  # e.g. the window: here the day of the month
        return -int(datestamp[8:10])

    grouped = sorted(expected, key=lambda record: group_of(record.datestamp))  # stable
    assert grouped != expected
    for batch_size in (1, 7, 5000):
        got = list(store.iter_staged(run_id, batch_size=batch_size, group_of=group_of))
        assert got == grouped
    store.close()


def test_a_window_gets_one_part_per_part_size_of_its_own_records(
    settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sources list records in no datestamp order: the export still groups them by window."""
    from oai_pipeline.pipeline import discover as discover_module
    from oai_pipeline.pipeline.frames import RAW_OAI_XML
    from oai_pipeline.pipeline.options import RunOptions
    from oai_pipeline.pipeline.scope import HarvestScope, Window
    from oai_pipeline.pipeline.services import Services
    from oai_pipeline.sample_endpoint.records import GENERATED_START, generate_datacite_records
    from oai_pipeline.sample_endpoint.server import OAIEndpoint
    from oai_pipeline_tests.support import register

    monkeypatch.setattr(discover_module, "PART_SIZE", 40)
    records = generate_datacite_records(300, span_days=5, prefixes=("oai_datacite",))
    days = [GENERATED_START + timedelta(days=n) for n in range(6)]
    scope = HarvestScope(
        "sample",
        tuple(Window(f"d{n}", days[n], days[n + 1]) for n in range(5)),
    )
    with OAIEndpoint(records, page_size=50) as endpoint, Services(settings) as services:
        register(settings, endpoint.base_url, metadata_prefix="oai_datacite")
        for part_size in (40, 1000):  # the second run rewrites each window with fewer parts
            monkeypatch.setattr(discover_module, "PART_SIZE", part_size)
            result = discover_module.discover(
                services, scope, RunOptions(), progress=lambda _m: None
            )
            for window in scope.windows:
                in_window = [r for r in records if window.start <= r.datestamp < window.end]
                names = services.storage.part_names(RAW_OAI_XML, "sample", window.key)
                # ceil: full parts, then the rest; no part of the earlier run left
                assert len(names) == -(-len(in_window) // part_size)
                frame = services.storage.read_partition(RAW_OAI_XML, "sample", window.key)
                assert sorted(frame["identifier"]) == sorted(r.identifier for r in in_window)
                manifest = services.storage.read_manifest(RAW_OAI_XML, "sample", window.key)
                assert manifest is not None and manifest["run_id"] == result.run_id
