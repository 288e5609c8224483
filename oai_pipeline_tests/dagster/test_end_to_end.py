"""Harvest the shipped endpoint over HTTP through all four assets on a Dagster instance."""

from __future__ import annotations

import errno
from datetime import date

import dagster as dg
import pytest

from oai_pipeline.defs.assets import harvest_assets
from oai_pipeline.defs.launch import materialize_windows
from oai_pipeline.defs.partitions import partition_key
from oai_pipeline.defs.resources import HarvestOptions, PipelineResource
from oai_pipeline.pipeline.frames import RAW_OAI_XML, SYNC_DECISIONS, WRITTEN_RECORDS
from oai_pipeline.sample_endpoint.faults import Faults
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline.storage import PartitionStore
from oai_pipeline_tests.dagster.conftest import window_range
from oai_pipeline_tests.dagster.test_transient_errors import _no_such_name_for
from oai_pipeline_tests.dagster_results import run_totals
from oai_pipeline_tests.support import (
    deleted_records,
    expected_title_and_doi,
    live_records,
    register,
    target_by_source,
    window_keys,
)

PREFIX = "oai_datacite"


def _latest_metadata(instance: dg.DagsterInstance, asset: str, key: str) -> dict:
    materializations = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=1
    ).records
    assert materializations, f"{asset} {key} not materialised"
    return {k: v.value for k, v in materializations[0].asset_materialization.metadata.items()}


def test_harvest_through_all_four_assets_into_the_target(
    instance: dg.DagsterInstance, settings: Settings, endpoint: OAIEndpoint, records
) -> None:
    register(settings, endpoint.base_url, metadata_prefix=PREFIX)
    first, last = window_range(records)

    result = materialize_windows(instance, "sample", first, last)

    assert result.success
    live = live_records(records, PREFIX)
    deleted = deleted_records(records, PREFIX)
    target = target_by_source(settings, "sample")
    # every live record of the endpoint, none of its deleted ones, record by record
    assert set(target) == {r.identifier for r in live}
    for record in live:
        title, doi = expected_title_and_doi(record, PREFIX)
        local = target[record.identifier]
        assert local["state"] == "live"
        assert local["revision"] == 1
        assert local["data"]["metadata"]["title"] == title
        assert local["doi"] == doi
        assert local["source_harvester"] == "sample"
    assert not {r.identifier for r in deleted} & set(target)

    # each window's raw partition holds exactly the records of its datestamps
    storage = PartitionStore(settings.storage_url)
    keys = window_keys_from(first, last)
    seen = {}
    for key in keys:
        raw = storage.read_partition(RAW_OAI_XML, "sample", key)
        for identifier, datestamp in zip(
            [] if raw is None else raw["identifier"].to_list(),
            [] if raw is None else raw["datestamp"].to_list(),
            strict=True,
        ):
            assert datestamp.startswith(key)
            seen[identifier] = key
    assert set(seen) == {r.identifier for r in live + deleted}

    # materialisation metadata: each window counts its own records; the run's totals are
    # the run's observation's, once
    live_ids = {r.identifier for r in live}
    for key in keys:
        written = _latest_metadata(instance, "written_records", str(partition_key("sample", key)))
        created_here = sum(1 for i, k in seen.items() if k == key and i in live_ids)
        assert written["window"] == key
        assert written.get("action_create", 0) == created_here
        assert written["error_count"] == 0
        assert not [name for name in written if name.startswith(("run_", "status_"))]
    written = {name: value.value for name, value in run_totals(result, WRITTEN_RECORDS).items()}
    assert written["run_action_create"] == len(live)
    assert written["run_window"] == f"{first} .. {last}"

    # and where the harvest run stands, as `oai-pipeline status` says it
    assert written["status_harvest_run_status"] == "succeeded"
    assert written["status_records_imported"] == len(live)
    # (a record deleted at the source before it was ever written has nothing to delete)
    assert written["status_records_unchanged"] == len(deleted)
    assert written["status_records_failed"] == written["status_stale_running"] == 0
    assert written["status_target_records"] == len(live)
    assert written["status_harvest_records_deleted"] == len(deleted)
    assert written["status_discovery_state"]["metadata_prefix"] == PREFIX

    # the asset checks ran and passed for the partitions
    checks = result.get_asset_check_evaluations()
    assert {c.check_name for c in checks} == {"reconciles", "no_record_errors"}
    assert all(c.passed for c in checks)


def test_second_harvest_changes_nothing(
    instance: dg.DagsterInstance, settings: Settings, endpoint: OAIEndpoint, records
) -> None:
    register(settings, endpoint.base_url, metadata_prefix=PREFIX)
    first, last = window_range(records)
    assert materialize_windows(instance, "sample", first, last).success
    before = target_by_source(settings, "sample")

    assert materialize_windows(instance, "sample", first, last).success

    after = target_by_source(settings, "sample")
    assert after == before  # no duplicate, no new revision, nothing touched
    storage = PartitionStore(settings.storage_url)
    actions = set()
    for key in window_keys_from(first, last):
        decisions = storage.read_partition(SYNC_DECISIONS, "sample", key)
        if decisions is not None:
            actions.update(decisions["action"].to_list())
        written = storage.read_partition(WRITTEN_RECORDS, "sample", key)
        if written is not None:
            assert set(written["action"].to_list()) <= {"skip", "nothing"}
    assert actions <= {"skip", "nothing"}


def test_a_single_partition_run(
    instance: dg.DagsterInstance, settings: Settings, endpoint: OAIEndpoint, records
) -> None:
    register(settings, endpoint.base_url, metadata_prefix=PREFIX)
    day = sorted(r.datestamp.date() for r in live_records(records, PREFIX))[-1]
    instance.add_dynamic_partitions("harvester", ["sample"])

    result = dg.materialize(
        harvest_assets,
        instance=instance,
        partition_key=str(partition_key("sample", day.isoformat())),
        resources={"pipeline": PipelineResource(), "harvest_options": HarvestOptions()},
    )

    assert result.success
    expected = {r.identifier for r in live_records(records, PREFIX) if r.datestamp.date() == day}
    assert set(target_by_source(settings, "sample")) == expected


def test_quirks_of_the_source_are_in_the_raw_metadata(
    instance: dg.DagsterInstance, settings: Settings, endpoint: OAIEndpoint, records
) -> None:
    """Where the operator of a scheduled harvest sees its outcome: the Dagster UI."""
    endpoint.faults = Faults(identify_base_url="https://repository.example.org/oai")
    register(settings, endpoint.base_url, metadata_prefix=PREFIX)
    day = sorted(r.datestamp.date() for r in live_records(records, PREFIX))[-1]
    key = str(partition_key("sample", day.isoformat()))
    instance.add_dynamic_partitions("harvester", ["sample"])

    result = dg.materialize(
        harvest_assets,
        instance=instance,
        partition_key=key,
        resources={"pipeline": PipelineResource(), "harvest_options": HarvestOptions()},
    )

    assert result.success
    notices = run_totals(result, RAW_OAI_XML)["source_notices"].value
    assert notices.startswith(
        f"- {endpoint.base_url}: the source's Identify names another base URL, "
        "https://repository.example.org/oai; harvesting the registered one"
    )
    # and where the run's status is, kept on the run
    assert run_totals(result, WRITTEN_RECORDS)["status_source_notices"].value == notices


def window_keys_from(first: str, last: str) -> list[str]:
    return window_keys(date.fromisoformat(first), date.fromisoformat(last))


def failure_without_retries(instance: dg.DagsterInstance) -> dg.DagsterEvent:
    """The step failure of a harvest of two windows that must fail at once, never retried."""
    result = materialize_windows(
        instance, "sample", "2024-01-03", "2024-01-04", raise_on_error=False
    )
    assert not result.success
    events = [e.event_type_value for e in result.all_events]
    assert "STEP_UP_FOR_RETRY" not in events
    return next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")


def test_a_config_mistake_fails_at_once_without_retries(
    instance: dg.DagsterInstance, settings: Settings, endpoint: OAIEndpoint
) -> None:
    register(settings, endpoint.base_url, metadata_prefix="no_such_prefix")

    failure = failure_without_retries(instance)

    assert "cannotDisseminateFormat" in str(failure.event_specific_data.error.to_string())
    # named by its harvester, as a failure of one of several is: the base URL alone does
    # not say which of hundreds of harvesters (before, it did not lead with it)
    description = failure.step_failure_data.user_failure_data.description
    assert description.startswith("sample: ") and not description.startswith("sample: sample:")


def test_a_wrong_state_database_url_fails_at_once_without_retries(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mistake in the settings is the operator's to fix: one line, not three retries
    spread over minutes and a traceback."""
    monkeypatch.setenv("OAI_PIPELINE_STATE_DB_URL", "mysql://harvest@localhost/state")

    failure = failure_without_retries(instance)

    description = failure.step_failure_data.user_failure_data.description
    assert description.startswith(
        "cannot open the state database mysql://harvest@localhost/state: "
    )
    assert "\n" not in description


def test_a_full_disk_fails_at_once_naming_the_cure(
    instance: dg.DagsterInstance,
    settings: Settings,
    endpoint: OAIEndpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full disk is not freed by waiting: three retries spread over minutes only delayed
    the failure the operator must act on."""
    register(settings, endpoint.base_url, metadata_prefix=PREFIX)

    def full_disk(_store: PartitionStore, folder: str, name: str, _data: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", f"{folder}/{name}")

    monkeypatch.setattr(PartitionStore, "_write_local", full_disk)

    failure = failure_without_retries(instance)

    description = failure.step_failure_data.user_failure_data.description
    assert "No space left on device" in description
    assert "free space on that file system" in description


def test_a_maintenance_page_the_same_at_every_try_is_retried_by_dagster(
    instance: dg.DagsterInstance,
    settings: Settings,
    endpoint: OAIEndpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After its Identify, the source answers the list with one and the same HTML page
    (status 200, a proxy's maintenance page) at each of the client's tries, then comes back:
    Dagster's retry of the step harvests it. Before, the page was taken for the source's
    answer (NotOAIResponse) and the run failed for good, never retried."""
    register(
        settings,
        endpoint.base_url,
        metadata_prefix=PREFIX,
        loader="oai-pmh{max_retries: 1, backoff_base: 0}",
    )
    endpoint.faults = Faults(html_error_on={2, 3})
    monkeypatch.setattr(dg.RetryPolicy, "calculate_delay", lambda policy, attempt: 0)

    result = materialize_windows(
        instance, "sample", "2024-01-03", "2024-01-04", raise_on_error=False
    )

    events = [e.event_type_value for e in result.all_events]
    assert "STEP_UP_FOR_RETRY" in events
    assert result.success


def test_a_base_url_whose_host_does_not_exist_fails_its_step_once(
    instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A harvester registered with a host name that does not exist (a typo) and never
    harvested: its step fails once, naming the base URL, not retried three times over
    minutes each meeting the same typo."""
    _no_such_name_for(monkeypatch)
    register(settings, "http://oai.repository.invalid/oai", metadata_prefix=PREFIX)
    # were the step retried, the retry would not wait (the test fails, fast, instead)
    monkeypatch.setattr(dg.RetryPolicy, "calculate_delay", lambda policy, attempt: 0)

    failure = failure_without_retries(instance)

    description = failure.step_failure_data.user_failure_data.description
    assert description.startswith("sample: http://oai.repository.invalid/oai (Identify): ")
    assert "no host is named 'oai.repository.invalid'" in description
    assert "never answered OAI-PMH" in description and "\n" not in description
