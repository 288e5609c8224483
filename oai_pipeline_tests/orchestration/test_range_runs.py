"""Range runs: one ListRecords sweep per harvester and contiguous windows, also in 2-D."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime

import dagster as dg
import pytest

from oai_pipeline.defs.assets import harvest_assets, written_records
from oai_pipeline.defs.checks import harvest_checks
from oai_pipeline.defs.launch import (
    RANGE_END_TAG,
    RANGE_START_TAG,
    materialize_windows,
    range_tags,
)
from oai_pipeline.defs.partitions import HARVESTER, ensure_harvester_partitions, partition_key
from oai_pipeline.defs.resources import HarvestOptions, PipelineResource
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.records import (
    EndpointRecord,
    generate_datacite_records,
    records_for_prefix,
)
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline_tests.dagster_results import run_totals
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


def materialize_alpha_and_beta(
    instance: dg.DagsterInstance, *, raise_on_error: bool = True
) -> dg.ExecuteInProcessResult:
    """A 2-D range over harvesters alpha and beta as a UI backfill launches it: range tags,
    no per-harvester tag."""
    return dg.materialize(
        [*harvest_assets, *harvest_checks],
        instance=instance,
        resources={"pipeline": PipelineResource(), "harvest_options": HarvestOptions()},
        tags={
            RANGE_START_TAG: str(partition_key("alpha", "2024-01-02")),
            RANGE_END_TAG: str(partition_key("beta", "2024-01-20")),
        },
        raise_on_error=raise_on_error,
    )


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

    result = materialize_alpha_and_beta(instance)

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


def _latest(instance: dg.DagsterInstance, asset: str, key: str) -> dict:
    [record] = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=1
    ).records
    return {k: v.value for k, v in record.asset_materialization.metadata.items()}


def test_each_window_of_a_range_shows_its_own_counts_and_checks(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    records = shifted_sample_records()
    live = [r for r in records_for_prefix(records, PREFIX) if not r.deleted]
    # one record of one window has metadata no transformer can read
    broken = dataclasses.replace(live[0], metadata={PREFIX: b"<nonsense/>"})
    records = [broken if r.identifier == broken.identifier else r for r in records]
    broken_window = broken.datestamp.date().isoformat()
    per_window = Counter(
        r.datestamp.date().isoformat() for r in records_for_prefix(records, PREFIX)
    )
    with OAIEndpoint(records, page_size=PAGE_SIZE) as endpoint:
        register(settings, endpoint.base_url, harvester_id="alpha", metadata_prefix=PREFIX)
        result = materialize_windows(instance, "alpha", "2024-01-02", "2024-01-20")
    assert result.success

    days = [f"2024-01-{day:02}" for day in range(2, 21)]
    assert set(days) - set(per_window)  # some windows of the range are empty
    for day in days:
        key = str(partition_key("alpha", day))
        raw = _latest(instance, "raw_oai_xml", key)
        transformed = _latest(instance, "transformed_records", key)
        written = _latest(instance, "written_records", key)
        assert raw["window"] == transformed["window"] == written["window"] == day
        assert raw["record_count"] == per_window[day]
        assert transformed["error_count"] == (day == broken_window)
        for stage in (transformed, written):  # each stage's records in error, named
            failed = [row.data["identifier"] for row in stage["errors_preview"].records]
            assert failed == ([broken.identifier] if day == broken_window else [])
        assert written["record_count"] == per_window[day]
        # the run's totals and state are not copied onto every window
        for stage in (raw, transformed, written):
            assert not [name for name in stage if name.startswith(("run_", "status_"))]
    # they are the run's: once, on its observation of each asset
    assert run_totals(result, "raw_oai_xml")["run_record_count"].value == sum(per_window.values())
    assert run_totals(result, "transformed_records")["run_error_count"].value == 1
    written_totals = run_totals(result, "written_records")
    assert written_totals["run_windows"].value == len(days)
    assert written_totals["status_harvest_run_status"].value == "succeeded"

    checks: dict[tuple[str, str | None], bool] = {}
    for evaluation in result.get_asset_check_evaluations():
        checks[(evaluation.check_name, evaluation.partition)] = evaluation.passed
    for day in days:
        key = str(partition_key("alpha", day))
        assert checks[("reconciles", key)] is True
        assert checks[("no_record_errors", key)] is (day != broken_window)
    # what the UI shows per partition: each window's latest evaluation, none left planned
    check_key = dg.AssetCheckKey(dg.AssetKey("written_records"), "no_record_errors")
    statuses = {
        info.partition_key: info.latest_execution_status.value
        for info in instance.event_log_storage.get_asset_check_partition_info([check_key])
    }
    for day in days:
        key = str(partition_key("alpha", day))
        assert statuses[key] == ("FAILED" if day == broken_window else "SUCCEEDED")
    # the run's own result: every stage adds up, one record error in the range
    assert checks[("reconciles", None)] is True
    assert checks[("no_record_errors", None)] is False


def _check_statuses(instance: dg.DagsterInstance, check: str) -> dict[str | None, str]:
    """Each partition's latest status of a check of written_records, as the UI shows it."""
    check_key = dg.AssetCheckKey(dg.AssetKey("written_records"), check)
    return {
        info.partition_key: info.latest_execution_status.value
        for info in instance.event_log_storage.get_asset_check_partition_info([check_key])
    }


def test_a_range_of_one_window_shows_its_checks_on_its_partition(
    instance: dg.DagsterInstance, settings: Settings, sample: OAIEndpoint
) -> None:
    """The hourly run of today's window is a range run of one window: its check results were
    stored without a partition, and the window's checks stayed planned for good. A stage
    that does not add up fails `reconciles` on the window, saying why."""
    register(settings, sample.base_url, harvester_id="alpha", metadata_prefix=PREFIX)
    day = "2024-01-05"
    key = str(partition_key("alpha", day))
    assert materialize_windows(instance, "alpha", day, day).success
    assert _check_statuses(instance, "reconciles")[key] == "SUCCEEDED"
    assert _check_statuses(instance, "no_record_errors")[key] == "SUCCEEDED"

    # a record is added to the window at the source; only raw_oai_xml harvests it again
    in_window = [r for r in _records(sample) if r.datestamp.date().isoformat() == day]
    sample.provider.upsert(
        dataclasses.replace(in_window[0], identifier=f"{in_window[0].identifier}-new")
    )
    assert _materialize(instance, dg.AssetSelection.assets("raw_oai_xml"), day, day).success
    # Execute the checks alone, as the UI offers
    result = _materialize(instance, dg.AssetSelection.checks_for_assets(written_records), day, day)

    [evaluation] = [
        e
        for e in result.get_asset_check_evaluations()
        if e.check_name == "reconciles" and e.partition == key
    ]
    assert not evaluation.passed
    assert evaluation.description == (
        f"raw {len(in_window) + 1} != transformed {len(in_window)} (incl. parse errors)"
    )
    assert _check_statuses(instance, "reconciles")[key] == "FAILED"


def _materialize(
    instance: dg.DagsterInstance, selection: object, first: str, last: str, **kw: object
) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [*harvest_assets, *harvest_checks],
        selection=selection,
        instance=instance,
        resources={"pipeline": PipelineResource(), "harvest_options": HarvestOptions()},
        tags=range_tags("alpha", first, last),
        **kw,
    )


DOWNSTREAM = dg.AssetSelection.assets("transformed_records", "sync_decisions", "written_records")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # the automation follows two raw runs with one downstream range run
        (("2024-01-02", "2024-01-05"), ("2024-01-06", "2024-01-20")),
        # run 2 harvested some windows of run 1's range again: run 1's records of those
        # windows are run 2's now, not records run 1 still owes
        (("2024-01-02", "2024-01-20"), ("2024-01-06", "2024-01-10")),
    ],
    ids=["side-by-side", "inside"],
)
def test_a_downstream_range_over_windows_two_runs_harvested_writes_both(
    instance: dg.DagsterInstance,
    settings: Settings,
    sample: OAIEndpoint,
    first: tuple[str, str],
    second: tuple[str, str],
) -> None:
    register(settings, sample.base_url, harvester_id="alpha", metadata_prefix=PREFIX)
    ensure_harvester_partitions(instance, ["alpha"])
    raw = dg.AssetSelection.assets("raw_oai_xml")
    assert _materialize(instance, raw, *first).success  # harvest run 1
    assert _materialize(instance, raw, *second).success  # harvest run 2

    result = _materialize(instance, DOWNSTREAM, "2024-01-02", "2024-01-20")

    assert result.success
    assert set(target_by_source(settings, "alpha")) == _live_ids(sample)
    assert "run_action_already_written" not in run_totals(result, "written_records")


def test_a_downstream_range_with_windows_not_harvested_fails_clearly(
    instance: dg.DagsterInstance, settings: Settings, sample: OAIEndpoint
) -> None:
    register(settings, sample.base_url, harvester_id="alpha", metadata_prefix=PREFIX)
    ensure_harvester_partitions(instance, ["alpha"])
    assert _materialize(
        instance, dg.AssetSelection.assets("raw_oai_xml"), "2024-01-02", "2024-01-05"
    ).success

    result = _materialize(instance, DOWNSTREAM, "2024-01-02", "2024-01-08", raise_on_error=False)

    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    message = failure.step_failure_data.error.message
    assert "raw_oai_xml has not been materialised for alpha 2024-01-06, 2024-01-07, " in message


def test_a_range_run_of_a_job_backfill_is_refused(
    instance: dg.DagsterInstance, settings: Settings, sample: OAIEndpoint
) -> None:
    """Dagster 1.13 gives each range run of a job's backfill the first partition's tags,
    which win: the run would harvest one window of its range and succeed."""
    register(settings, sample.base_url, harvester_id="alpha", metadata_prefix=PREFIX)
    ensure_harvester_partitions(instance, ["alpha"])
    tags = {
        **range_tags("alpha", "2024-01-02", "2024-01-20"),
        "dagster/partition/harvester": "alpha",
        "dagster/partition/window": "2024-01-02",
    }
    result = dg.materialize(
        [*harvest_assets, *harvest_checks],
        selection=dg.AssetSelection.assets("raw_oai_xml"),
        instance=instance,
        resources={"pipeline": PipelineResource(), "harvest_options": HarvestOptions()},
        tags=tags,
        raise_on_error=False,
    )

    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "launch the backfill from the assets" in failure.step_failure_data.error.message
    assert _list_records(sample) == []  # nothing harvested


@pytest.mark.parametrize("job_name", ["harvest", "run_all_harvesters"])
def test_a_run_launched_without_a_partition_says_what_to_choose(
    instance: dg.DagsterInstance, settings: Settings, sample: OAIEndpoint, job_name: str
) -> None:
    """Launch Run in the launchpad with no partition chosen: a one-line refusal, not
    Dagster's "Cannot access partition_key for a non-partitioned run" and its traceback."""
    from oai_pipeline.definitions import defs

    register(settings, sample.base_url, harvester_id="alpha", metadata_prefix=PREFIX)
    ensure_harvester_partitions(instance, ["alpha"])

    result = defs.resolve_job_def(job_name).execute_in_process(
        instance=instance,
        run_config={"execution": {"config": {"in_process": {}}}},
        raise_on_error=False,
    )

    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert failure.step_key == "raw_oai_xml"
    description = failure.step_failure_data.user_failure_data.description
    assert description.startswith("this run names no partition: choose a harvester")
    assert "\n" not in description
    events = [e.event_type_value for e in result.all_events]
    assert "STEP_UP_FOR_RETRY" not in events  # a mistake: not retried for minutes
    assert _list_records(sample) == []


def test_writing_a_settled_run_again_says_what_each_record_did_before(
    instance: dg.DagsterInstance, settings: Settings, sample: OAIEndpoint
) -> None:
    """Re-materialising written_records of a run whose records all failed (a missing
    community) retries none of them (that takes --retry-failed): they are labelled as
    failed before, not as written."""
    writer = 'oai-service{model: "rdm", community: "nowhere"}'
    register(settings, sample.base_url, harvester_id="alpha", metadata_prefix=PREFIX, writer=writer)
    assert materialize_windows(instance, "alpha", "2024-01-02", "2024-01-20").success

    again = _materialize(
        instance, dg.AssetSelection.assets("written_records"), "2024-01-02", "2024-01-20"
    )

    totals = run_totals(again, "written_records")
    live = len(_live_ids(sample))
    assert int(totals["run_action_failed_before"].value) == live
    # the source's deletions were settled without error: those are written
    deleted = int(totals["run_record_count"].value) - live
    assert int(totals["run_action_already_written"].value) == deleted > 0
    # and what the harvest run did to them, all its attempts (the first: nothing to delete)
    assert int(totals["harvest_run_action_nothing"].value) == deleted
    assert "harvest_run_action_already_written" not in totals
    # the run's status says the same, with its last failures and why
    assert totals["status_records_failed"].value == live
    failures = totals["status_recent_failures"].value.records
    assert 0 < len(failures) <= live
    assert {f.data["error_type"] for f in failures} == {"missing_community"}


def _run_statuses(settings: Settings) -> list[str]:
    """The harvester's harvest runs' statuses, oldest first."""
    with Services(settings) as services:
        runs = services.state.list_runs(harvester_id="alpha")
    return [run["status"] for run in reversed(runs)]


def test_overlapping_backfills_finish_a_run_only_once_all_its_windows_are_written(
    instance: dg.DagsterInstance, settings: Settings, sample: OAIEndpoint
) -> None:
    """Two backfills of one harvester over overlapping windows, their steps interleaved (a
    harvester's lease is held per step, not per run): run 1 lists 01-02 .. 01-08, run 2
    01-06 .. 01-12, then run 1's downstream steps write 01-02 .. 01-08, partly with run 2's
    records. Run 2 is not done until its own windows 01-09 .. 01-12 are written: taken for
    succeeded, an incremental harvest would start after it and a failure of its Dagster run
    would leave it so, those records never written."""
    register(settings, sample.base_url, harvester_id="alpha", metadata_prefix=PREFIX)
    ensure_harvester_partitions(instance, ["alpha"])
    raw = dg.AssetSelection.assets("raw_oai_xml")
    assert _materialize(instance, raw, "2024-01-02", "2024-01-08").success
    assert _materialize(instance, raw, "2024-01-06", "2024-01-12").success

    assert _materialize(instance, DOWNSTREAM, "2024-01-02", "2024-01-08").success

    assert _run_statuses(settings) == ["succeeded", "running"]
    assert _materialize(instance, DOWNSTREAM, "2024-01-06", "2024-01-12").success
    assert _run_statuses(settings) == ["succeeded", "succeeded"]
    assert set(target_by_source(settings, "alpha")) == _live_ids(sample)


def test_one_harvesters_mistake_does_not_stop_the_others_of_a_backfill(
    instance: dg.DagsterInstance, settings: Settings, sample: OAIEndpoint
) -> None:
    """A backfill over two harvesters (one run, one step per asset): alpha asks for a format
    the source does not have. beta is harvested all the same, its windows are materialised
    (and automation takes them on); the step fails naming alpha's mistake."""
    register(settings, sample.base_url, harvester_id="alpha", metadata_prefix="no_such_prefix")
    register(settings, sample.base_url, harvester_id="beta", metadata_prefix=PREFIX)
    instance.add_dynamic_partitions(HARVESTER, ["alpha", "beta"])
    from oai_pipeline.definitions import defs

    def automation(cursor: object = None) -> dg.AutomationResult:
        return dg.evaluate_automation_conditions(
            defs=defs,
            instance=instance,
            asset_selection=dg.AssetSelection.assets("transformed_records"),
            cursor=cursor,
        )

    before = automation()
    result = materialize_alpha_and_beta(instance, raise_on_error=False)

    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    description = failure.step_failure_data.user_failure_data.description
    assert description.startswith("alpha: ") and "cannotDisseminateFormat" in description
    beta = {str(partition_key("beta", f"2024-01-{day:02}")) for day in range(2, 21)}
    assert set(instance.get_materialized_partitions(dg.AssetKey("raw_oai_xml"))) == beta
    # each of beta's windows shows its counts, not its window alone
    per_window = Counter(r.datestamp.date().isoformat() for r in _records(sample))
    for day, count in per_window.items():
        raw = _latest(instance, "raw_oai_xml", str(partition_key("beta", day)))
        assert (raw["window"], raw["record_count"], raw["error_count"]) == (day, count, 0)
    requested = automation(before.cursor).get_requested_partitions(
        dg.AssetKey("transformed_records")
    )
    assert requested == beta


def test_the_run_check_of_harvesters_with_other_numbers_of_writers_reconciles(
    instance: dg.DagsterInstance, settings: Settings, sample: OAIEndpoint, generated: OAIEndpoint
) -> None:
    """A backfill over alpha (one writer) and beta (two): every window reconciles, yet the
    run's own `reconciles` evaluation, the one the UI shows for the run, failed ("decisions
    N != transformed M"): it multiplied all the run's records by the most writers any window
    has. It now fails only for a window that does not reconcile, and names it."""
    register(settings, sample.base_url, harvester_id="alpha", metadata_prefix=PREFIX)
    beta = register(settings, generated.base_url, harvester_id="beta", metadata_prefix=PREFIX)
    with Services(settings) as services:
        HarvesterRegistry(services.state).upsert(
            beta.model_copy(update={"writers": [*beta.writers, *beta.writers]})
        )
    ensure_harvester_partitions(instance, ["alpha", "beta"])

    result = materialize_alpha_and_beta(instance)

    evaluations = result.get_asset_check_evaluations()
    per_window = [e for e in evaluations if e.check_name == "reconciles" and e.partition]
    assert per_window and all(e.passed for e in per_window)
    [for_the_run] = [e for e in evaluations if e.check_name == "reconciles" and not e.partition]
    assert for_the_run.passed, for_the_run.description
    assert for_the_run.description == "every stage accounts for every record"
