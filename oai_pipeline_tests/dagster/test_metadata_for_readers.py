"""What a data engineer reads in the Dagster UI: metadata typed as what it is (counts as
numbers, flags as booleans, the partition's files as a path), and checks that report the
figure they describe."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import dagster as dg
import polars as pl

from oai_pipeline.defs.launch import materialize_windows
from oai_pipeline.defs.partitions import DEFAULT_WINDOW_START, partition_key
from oai_pipeline.pipeline.frames import RAW_OAI_XML, SCHEMAS, STAGE_ASSETS
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline_tests.dagster.conftest import window_range
from oai_pipeline_tests.dagster_results import run_totals
from oai_pipeline_tests.support import register, window_keys


def _harvest(
    instance: dg.DagsterInstance, settings: Settings, endpoint: OAIEndpoint, records
) -> tuple[dg.ExecuteInProcessResult, list[str]]:
    """The grid's windows from its first (no `from`, and no record here) to the records' last."""
    register(settings, endpoint.base_url, metadata_prefix="oai_datacite")
    _, last = window_range(records)
    result = materialize_windows(instance, "sample", DEFAULT_WINDOW_START, last)
    assert result.success
    return result, window_keys(date.fromisoformat(DEFAULT_WINDOW_START), date.fromisoformat(last))


def test_raw_run_totals_keep_flags_out_of_the_counts(
    instance: dg.DagsterInstance, settings: Settings, endpoint: OAIEndpoint, records
) -> None:
    result, _ = _harvest(instance, settings, endpoint, records)
    totals = run_totals(result, RAW_OAI_XML)

    assert isinstance(totals["cap_reached"], dg.BoolMetadataValue)
    # the flag once, as a flag: not also as a count `run_cap_reached` of 0
    assert "run_cap_reached" not in totals
    assert isinstance(totals["run_staged"], dg.IntMetadataValue)
    # the grid's first window has no `from`: said so, not Python's None
    assert totals["oai_from"].value == "earliest"
    assert "None" not in totals["oai_until"].value


def test_each_window_names_where_its_parquet_is(
    instance: dg.DagsterInstance, settings: Settings, endpoint: OAIEndpoint, records
) -> None:
    _, windows = _harvest(instance, settings, endpoint, records)

    counted: dict[str, int] = {}
    for asset in STAGE_ASSETS:
        for window in windows:
            key = str(partition_key("sample", window))
            [record] = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]),
                limit=1,
            ).records
            metadata = record.asset_materialization.metadata
            path = metadata["path"]
            assert isinstance(path, dg.PathMetadataValue)
            folder = Path(path.value)
            assert folder.is_absolute() and folder.parts[-3:] == (asset, "sample", window)
            # what is there is what the materialisation counts; a window of no records
            # reads as an empty table with the asset's columns, not "no files found"
            part = pl.read_parquet(folder / "*.parquet")
            assert part.schema == SCHEMAS[asset]
            assert part.height == metadata["record_count"].value
            # and under Dagster's own key, which the UI's asset page shows as its Row count
            assert metadata["dagster/row_count"] == dg.IntMetadataValue(part.height)
            counted[window] = counted.get(window, 0) + part.height
    assert counted[DEFAULT_WINDOW_START] == 0 and sum(counted.values()) > 0


def test_no_record_errors_check_carries_its_count_also_when_it_passes(
    instance: dg.DagsterInstance, settings: Settings, endpoint: OAIEndpoint, records
) -> None:
    result, _ = _harvest(instance, settings, endpoint, records)

    checks = [c for c in result.get_asset_check_evaluations() if c.check_name == "no_record_errors"]
    assert checks and all(c.passed for c in checks)
    for check in checks:
        assert check.metadata["error_count"] == dg.IntMetadataValue(0)
