"""Harvesting the shipped sample endpoint over real loopback HTTP, with its faults switched on."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from lxml import etree

from oai_pipeline.oai.client import OAIClient
from oai_pipeline.oai.types import HarvestedRecord
from oai_pipeline.oai.windows import oai_bounds
from oai_pipeline.sample_endpoint import (
    SAMPLE_FIRST_DAY,
    SAMPLE_LAST_DAY,
    Faults,
    OAIEndpoint,
    generate_datacite_records,
    load_sample_records,
    records_for_prefix,
)


def sweep_all(
    client: OAIClient, prefix: str, **options: object
) -> tuple[dict[str, HarvestedRecord], int]:
    got: dict[str, HarvestedRecord] = {}
    yielded = 0
    for page in client.sweep("ListRecords", metadata_prefix=prefix, **options):
        for record in page.records:
            got[record.identifier] = record
            yielded += 1
    return got, yielded


def expected(endpoint: OAIEndpoint, prefix: str) -> dict[str, bool]:
    return {r.identifier: r.deleted for r in records_for_prefix(endpoint.records(), prefix)}


FAULTS = {
    "503-retry-after": Faults(unavailable_every=3, retry_after="2"),
    "503-past-http-date": Faults(unavailable_every=4, retry_after="Wed, 21 Oct 2015 07:28:00 GMT"),
    "expired-token": Faults(expire_tokens_after_pages=2),
    "illegal-characters": Faults(illegal_characters=True),
    "dropped-connection": Faults(drop_connection_on={2, 5}),
    "not-xml": Faults(not_xml_on={2}),
    "html-200": Faults(html_error_on={3}),
    "truncated": Faults(truncate_on={2, 4}),
}


@pytest.mark.parametrize("faults", FAULTS.values(), ids=FAULTS.keys())
def test_each_fault_ends_with_exactly_the_records_the_endpoint_holds(faults: Faults) -> None:
    records = generate_datacite_records(30, seed=3, deleted_fraction=0.1, prefixes=("datacite",))
    sleeps: list[float] = []
    with (
        OAIEndpoint(records, page_size=4, faults=faults) as endpoint,
        OAIClient(endpoint.base_url, sleep=sleeps.append, backoff_base=0.01) as client,
    ):
        got, _ = sweep_all(client, "datacite")
    held = expected(endpoint, "datacite")
    assert {i: r.deleted for i, r in got.items()} == held
    pages = math.ceil(len(held) / 4)
    if not faults.illegal_characters:
        assert endpoint.request_count > pages  # the fault did strike
    assert all(r.error is None for r in got.values())
    for record in got.values():
        if not record.deleted:
            payload = etree.fromstring(record.xml)  # each record parses on its own
            assert etree.QName(payload).localname == "record"


def test_all_faults_at_once_with_rate_limit_headers() -> None:
    records = generate_datacite_records(60, seed=5, prefixes=("oai_datacite",))
    faults = Faults(
        unavailable_every=5,
        retry_after="1",
        drop_connection_on={3},
        not_xml_on={7},
        html_error_on={9},
        truncate_on={11},
        expire_tokens_after_pages=6,
        illegal_characters=True,
        ratelimit_headers=True,
        ratelimit_limit=10,
    )
    sleeps: list[float] = []
    with (
        OAIEndpoint(records, page_size=5, faults=faults) as endpoint,
        OAIClient(endpoint.base_url, sleep=sleeps.append, backoff_base=0.01) as client,
    ):
        got, yielded = sweep_all(client, "oai_datacite")
    assert {i: r.deleted for i, r in got.items()} == expected(endpoint, "oai_datacite")
    assert yielded > len(got)  # the window was redone after the expired token
    assert any(s >= 1 for s in sleeps)  # 503 Retry-After and the spent rate-limit quota


def test_sample_set_identify_and_day_windows_at_the_boundaries() -> None:
    with OAIEndpoint(granularity="day") as endpoint:
        client = OAIClient(endpoint.base_url)
        info = client.identify()
        assert info.granularity == "day"
        held = expected(endpoint, "oai_dc")
        got: list[str] = []
        day = datetime.combine(SAMPLE_FIRST_DAY, datetime.min.time(), UTC)
        last = datetime.combine(SAMPLE_LAST_DAY, datetime.min.time(), UTC)
        while day <= last:
            from_, until = oai_bounds(day, day + timedelta(days=1), info.granularity)
            for page in client.sweep(
                "ListRecords", metadata_prefix="oai_dc", from_=from_, until=until
            ):
                got += [r.identifier for r in page.records]
            day += timedelta(days=1)
        client.close()
    assert sorted(got) == sorted(held)  # once each: none lost, none twice


def test_sample_set_seconds_windows_split_on_a_record_at_midnight() -> None:
    samples = load_sample_records()
    midnight = next(r.datestamp for r in samples if r.datestamp.hour == r.datestamp.minute == 0)
    with OAIEndpoint(samples) as endpoint, OAIClient(endpoint.base_url) as client:
        before = oai_bounds(midnight - timedelta(days=30), midnight, "seconds")
        after = oai_bounds(midnight, midnight + timedelta(days=30), "seconds")
        got = []
        for from_, until in (before, after):
            got += list(sweep_all(client, "oai_datacite", from_=from_, until=until)[0])
        assert sorted(got) == sorted(expected(endpoint, "oai_datacite"))
