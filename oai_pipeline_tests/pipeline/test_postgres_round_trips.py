"""A harvest on PostgreSQL sends its statements a batch at a time, not a record at a time.

In production the state store and the target are across a network: each round trip costs
about a millisecond there, where the throwaway server's loopback costs microseconds. The
count through a proxy (`network_proxy`) is what a slow network would make of it. Before,
psycopg2 sent each row of an UPDATE given many rows as a statement of its own (two round
trips per record in a full harvest: behind 0.5 ms a round trip, 5,000 records took 21 s
instead of 11 s), and the target updated or deleted each record in some eight statements
of its own (8.7 round trips per record of a harvest of changed records, 0.75 now).
"""

from __future__ import annotations

import dataclasses

import pytest

from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.runner import run_harvest
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import load_settings
from oai_pipeline_tests.network_proxy import network_proxy, proxied_databases
from oai_pipeline_tests.oai.fake_source import FakeSource, make_records
from oai_pipeline_tests.support import BASE_URL, EVERYTHING, harvest_fake_source, oai_dc, register

pytestmark = pytest.mark.postgres

# Round trips a record may add to each harvest (in pages of 500 and batches of 500, what a
# page and a batch cost shared by their records): measured 0.07-0.15; a statement sent once
# per record makes it at least 1.
MOST_PER_RECORD = 0.5
BATCH_SIZE = Harvester.model_fields["batch_size"].default


# What each of the four harvests does to every record, by the writer's `publish`.
ACTIONS = {
    True: ("create", "skip", "update", "delete"),
    False: ("create", "skip", "publish_draft", "delete_draft"),
}


def _round_trips(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, count: int, *, publish: bool
) -> list[int]:
    """Round trips of a full harvest of `count` records, of its unchanged re-harvest, of a
    harvest after the source changed every record, and of one after it deleted them."""
    with network_proxy(postgres_url) as proxy:
        for name, url in proxied_databases(proxy, postgres_url).items():
            monkeypatch.setenv(name, url)
        settings = load_settings()
        records = [
            dataclasses.replace(record, raw_metadata=oai_dc(f"Record {number}"))
            for number, record in enumerate(make_records(count))
        ]
        source = harvest_fake_source(settings, monkeypatch, FakeSource(records, page_size=500))
        # The product's batches (the tests' are smaller): a round trip per batch is no
        # record's.
        register(
            settings,
            BASE_URL,
            metadata_prefix="oai_dc",
            batch_size=BATCH_SIZE,
            writer=f'oai-service{{model:"rdm", publish:{str(publish).lower()}}}',
        )
        trips = []
        for harvest in range(4):
            for number, record in enumerate(source.records):
                if harvest == 2:
                    record.raw_metadata = oai_dc(f"Record {number}, revised")
                    record.datestamp = record.datestamp.replace("2024-03-", "2024-04-")
                if harvest == 3:
                    record.deleted = True
                    record.datestamp = record.datestamp.replace("2024-04-", "2024-05-")
            before = proxy.round_trips
            with Services(settings) as services:
                report = run_harvest(services, EVERYTHING, RunOptions(), progress=lambda _m: None)
            assert not report.errors
            assert report.actions == {ACTIONS[publish][harvest]: count}
            trips.append(proxy.round_trips - before)
        return trips


@pytest.mark.parametrize("publish", [True, False], ids=["published", "drafts"])
def test_a_harvest_on_postgresql_adds_round_trips_per_batch_not_per_record(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, publish: bool
) -> None:
    """Also with a writer that leaves drafts (`publish: false`): 7.4 round trips a record
    before its drafts were created, rewritten and discarded a batch at a time."""
    small = _round_trips(postgres_url, monkeypatch, 100, publish=publish)
    large = _round_trips(postgres_url, monkeypatch, 1100, publish=publish)

    per_record = [(more - fewer) / 1000 for fewer, more in zip(small, large, strict=True)]
    assert max(per_record) < MOST_PER_RECORD, (small, large)
