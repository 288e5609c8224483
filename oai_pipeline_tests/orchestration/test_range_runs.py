"""Range runs: one ListRecords sweep per harvester and contiguous windows, also in 2-D."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime

import dagster as dg
import pytest

from oai_pipeline.defs.assets import harvest_assets
from oai_pipeline.defs.checks import harvest_checks
from oai_pipeline.defs.launch import RANGE_END_TAG, RANGE_START_TAG, materialize_windows
from oai_pipeline.defs.partitions import HARVESTER, partition_key
from oai_pipeline.defs.resources import HarvestOptions, PipelineResource
from oai_pipeline.sample_endpoint.records import (
    EndpointRecord,
    generate_datacite_records,
    records_for_prefix,
)
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline_tests.support import register, shifted_sample_records, target_by_source

PREFIX = "oai_datacite"
PAGE_SIZE = 3


@pytest.fixture
def sample() -> Iterator[OAIEndpoint]:
    """The shipped sample, moved to 2024-01-03 .. 2024-01-12."""
    with OAIEndpoint(shifted_sample_records(), page_size=PAGE_SIZE) as endpoint:
        yield endpoint


@pytest.fixture
def generated() -> Iterator[OAIEndpoint]:
    """Other records (other identifiers and DOIs) over the same days."""
    records = generate_datacite_records(
        10, start=datetime(2024, 1, 3, tzinfo=UTC), span_days=10, prefixes=(PREFIX,), seed=3
    )
    with OAIEndpoint(records, page_size=PAGE_SIZE) as endpoint:
        yield endpoint


def _records(endpoint: OAIEndpoint) -> list[EndpointRecord]:
    return records_for_prefix(endpoint.provider.records(), PREFIX)


def _list_records(endpoint: OAIEndpoint) -> list[dict[str, str]]:
    return [r for r in endpoint.requests if r.get("verb") == "ListRecords"]


def _assert_one_sweep(endpoint: OAIEndpoint, from_: str, until: str) -> None:
    requests = _list_records(endpoint)
    starts = [r for r in requests if "resumptionToken" not in r]
    assert len(starts) == 1, requests  # one sweep over all windows, not one per day
    assert starts[0].get("from") == from_ and starts[0]["until"] == until
    assert len(requests) == math.ceil(len(_records(endpoint)) / PAGE_SIZE)


def _live_ids(endpoint: OAIEndpoint) -> set[str]:
    return {r.identifier for r in _records(endpoint) if not r.deleted}


def test_a_range_of_windows_is_one_sweep(
    instance: dg.DagsterInstance, settings: Settings, sample: OAIEndpoint
) -> None:
    register(settings, sample.base_url, harvester_id="alpha", metadata_prefix=PREFIX)

    result = materialize_windows(instance, "alpha", "2024-01-02", "2024-01-20")

    assert result.success
    _assert_one_sweep(sample, "2024-01-02T00:00:00Z", "2024-01-20T23:59:59Z")
    assert set(target_by_source(settings, "alpha")) == _live_ids(sample)
    # every window of the range is materialised, also the empty ones
    materialised = instance.get_materialized_partitions(dg.AssetKey("written_records"))
    assert {str(partition_key("alpha", f"2024-01-{day:02}")) for day in range(2, 21)} <= set(
        materialised
    )


def test_a_range_over_two_harvesters_and_windows(
    instance: dg.DagsterInstance,
    settings: Settings,
    sample: OAIEndpoint,
    generated: OAIEndpoint,
) -> None:
    register(settings, sample.base_url, harvester_id="alpha", metadata_prefix=PREFIX)
    register(settings, generated.base_url, harvester_id="beta", metadata_prefix=PREFIX)
    instance.add_dynamic_partitions(HARVESTER, ["alpha", "beta"])

    # a 2-D range as a UI backfill launches it: no per-harvester tag
    result = dg.materialize(
        [*harvest_assets, *harvest_checks],
        instance=instance,
        resources={"pipeline": PipelineResource(), "harvest_options": HarvestOptions()},
        tags={
            RANGE_START_TAG: str(partition_key("alpha", "2024-01-02")),
            RANGE_END_TAG: str(partition_key("beta", "2024-01-20")),
        },
    )

    assert result.success
    for endpoint in (sample, generated):
        _assert_one_sweep(endpoint, "2024-01-02T00:00:00Z", "2024-01-20T23:59:59Z")
    assert set(target_by_source(settings, "alpha")) == _live_ids(sample)
    assert set(target_by_source(settings, "beta")) == _live_ids(generated)
    materialised = set(instance.get_materialized_partitions(dg.AssetKey("written_records")))
    for harvester in ("alpha", "beta"):
        assert str(partition_key(harvester, "2024-01-02")) in materialised
        assert str(partition_key(harvester, "2024-01-20")) in materialised
    assert all(check.passed for check in result.get_asset_check_evaluations())
