"""The four partitioned assets: thin wiring of the pipeline stages into Dagster.

Every asset handles a range of partitions in one run (single-run backfills): the keys are
grouped into one scope per harvester and contiguous windows, one ListRecords sweep each.
"""

import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import dagster as dg
import httpx
from pydantic import ValidationError
from sqlalchemy.exc import OperationalError

from oai_pipeline.defs.dead_runs import tag_worker
from oai_pipeline.defs.partitions import (
    HARVESTER,
    RANGE_END_TAG,
    RANGE_START_TAG,
    SEVERAL,
    SOURCE_TAG,
    WINDOW,
    harvest_partitions,
    partition_key,
    scopes_for_keys,
    source_tag,
)
from oai_pipeline.defs.resources import HarvestOptions, PipelineResource
from oai_pipeline.defs.run_coordinator import older_queue_limits
from oai_pipeline.defs.sensors import (
    ERRORS_BY_HARVESTER,
    RUN_CANCELED,
    fail_orphaned_harvest_runs,
)
from oai_pipeline.errors import ConfigurationError, PipelineError, disk_advice, refused_by_disk
from oai_pipeline.harvesters.model import describe_validation_error
from oai_pipeline.oai.base_url import shown
from oai_pipeline.oai.errors import HarvestProtocolError, PersistentProtocolError
from oai_pipeline.pipeline.discover import DiscoveryResult, discover
from oai_pipeline.pipeline.frames import (
    RAW_OAI_XML,
    SCHEMAS,
    SYNC_DECISIONS,
    TRANSFORMED_RECORDS,
    WRITTEN_RECORDS,
)
from oai_pipeline.pipeline.local_changes import brought_back
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.partition_summary import (
    ERROR_PREVIEW,
    PartitionSummary,
    summarise_partition,
)
from oai_pipeline.pipeline.partitions import (
    refuse_partitions_of_old_identifiers,
    refuse_partitions_of_superseded_runs,
    split_by_upstream_run,
)
from oai_pipeline.pipeline.plan import plan
from oai_pipeline.pipeline.scope import HarvestScope
from oai_pipeline.pipeline.services import Services, run_error_text
from oai_pipeline.pipeline.status import harvest_status
from oai_pipeline.pipeline.transform_stage import transform
from oai_pipeline.pipeline.write import all_attempts, write
from oai_pipeline.storage import PartitionStore

GROUP = "oai_harvest"
# The description of the observation carrying a run's totals (`_run_result`).
RUN_TOTALS = "this run's totals"

T = TypeVar("T")

# A network hiccup, a busy source or a locked database: retry the step (it resumes from its
# checkpoint). Anything else fails the step at once.
TRANSIENT_ERRORS = (HarvestProtocolError, httpx.TransportError, OSError, OperationalError)
TRANSIENT_RETRY = dg.RetryPolicy(max_retries=3, delay=30, backoff=dg.Backoff.EXPONENTIAL)

# Downstream assets follow an upstream materialisation of any window, not only the latest.
# Labelled so: with `.without()` the UI still showed plain "eager", which on a time-partitioned
# asset reads as "the latest window only".
FOLLOW_UPSTREAM = (
    dg.AutomationCondition.eager()
    .without(dg.AutomationCondition.in_latest_time_window())
    .with_label("eager, any window")
)

# A global cap on concurrent source requests: the pool's limit is set in dagster.yaml.
SOURCE_POOL = "oai_source_requests"

_ASSET_ARGS = dict(
    partitions_def=harvest_partitions,
    group_name=GROUP,
    backfill_policy=dg.BackfillPolicy.single_run(),
    retry_policy=TRANSIENT_RETRY,
)
_DOWNSTREAM_ARGS = dict(_ASSET_ARGS, automation_condition=FOLLOW_UPSTREAM)

# What a column of the Parquet parts holds, where its name does not say it.
_COLUMN_DESCRIPTIONS = {
    "identifier": "the record's OAI identifier",
    "datestamp": "the record's OAI datestamp, as the source sent it",
    "deleted": "the source's header says the record is deleted",
    "set_specs": "the record's OAI sets",
    "xml": "the record's XML (bytes)",
    "data": "the transformed record data, as JSON",
    "pid": "the persistent identifier (e.g. DOI) the data carries",
    "communities": "the target communities the transformer lists",
    "writer": "index of the harvester's writer the row is for",
    "local_id": "the record's id in the target",
    "local_state": "the target record's state before the write",
    "action": "what is (or was) done to the target record",
    "reason": "why that action",
    "planned_action": "the plan's action (sync_decisions)",
    "revision": "the target record's revision after the write",
    "error_type": "the kind of the record's error (empty: none)",
    "error_message": "what the record's error says",
    "error_location": "where in the record the error is (e.g. the field; may be empty)",
}


def _column_schema(asset: str) -> dict[str, dg.TableSchema]:
    """The asset's Parquet columns as Dagster's `dagster/column_schema`: the UI's asset page
    lists them under Columns, so a data engineer sees what a partition holds without opening
    one."""
    columns = [
        dg.TableColumn(name, str(dtype), description=_COLUMN_DESCRIPTIONS.get(name))
        for name, dtype in SCHEMAS[asset].items()
    ]
    return {"dagster/column_schema": dg.TableSchema(columns=columns)}


def _transient(error: BaseException) -> bool:
    """Whether the retry policy takes the error (`_retry_only_transient`): not a disk full
    or not writable, the operator's to free or make writable, nor a fault the source shows
    at every attempt (a list that goes round, a response too large, a page that is not
    OAI-PMH: each retry would fail the same way)."""
    return (
        isinstance(error, TRANSIENT_ERRORS)
        and not isinstance(error, PersistentProtocolError)
        and not refused_by_disk(error)
    )


def _retry_coming(context: dg.AssetExecutionContext) -> Callable[[BaseException], str | None]:
    """What a failed attempt of this step says on its harvest run when Dagster retries the
    step (None: this was the last attempt, the error is not transient, or retries are
    disabled for the run): `Services.retry_coming`."""
    step = context.op_execution_context.get_step_execution_context()
    policy = step.op_retry_policy
    attempt = context.retry_number + 1
    # `deferred`, not `enabled`, in a step's own process (the multiprocess executor of the
    # daemon's and the UI's runs): the parent process retries it. Only `disabled` is none.
    retries = not step.retry_mode.disabled

    def retry(error: BaseException) -> str | None:
        if policy is None or not retries or attempt > policy.max_retries:
            return None
        if not _transient(error):
            return None
        return f"attempt {attempt} of {policy.max_retries + 1} failed; Dagster retries the step"

    return retry


@contextmanager
def _retry_only_transient(
    retry_coming: Callable[[BaseException], str | None] | None = None,
) -> Iterator[None]:
    """Transient errors go to the retry policy (the step resumes from its checkpoint);
    anything else (a wrong prefix, option or argument, an OAI error, a bug) fails at once.
    With `retry_coming` (`_retry_coming`), a transient error no retry follows (the last
    attempt's) fails as the others do: in one line, its harvester named (`_each_scope`),
    where Dagster's own failure read "Exceeded max_retries of 3", the error in its cause."""
    try:
        yield
    except TRANSIENT_ERRORS as error:
        if not _transient(error):
            advice = disk_advice(error.errno) if isinstance(error, OSError) else None
            description = f"{error}; {advice}" if advice else str(error)
            raise dg.Failure(description=description, allow_retries=False) from error
        if retry_coming is not None and retry_coming(error) is None:
            # as the other failures read: a PipelineError's own text, another's with its kind
            # (a database's in one line, without SQLAlchemy's statement)
            description = str(error) if isinstance(error, PipelineError) else run_error_text(error)
            raise dg.Failure(description=description, allow_retries=False) from error
        raise
    except PipelineError as error:
        raise dg.Failure(description=str(error), allow_retries=False) from error
    except ValidationError as error:
        raise dg.Failure(
            description=describe_validation_error(error), allow_retries=False
        ) from error
    except Exception as error:
        # as its harvest run's error says it: a refused write in the command line's line
        raise dg.Failure(description=run_error_text(error), allow_retries=False) from error


def _options(harvest_options: HarvestOptions) -> RunOptions:
    with _retry_only_transient():
        return harvest_options.run_options()


def step_error_text(error: BaseException) -> str:
    """A step's interrupt is its run being terminated (the UI's Terminate): its harvest run
    says so, as the canceled sensor would, not `DagsterExecutionInterruptedError`."""
    if isinstance(error, dg.DagsterExecutionInterruptedError):
        return RUN_CANCELED
    return run_error_text(error)


def _each_scope(
    context: dg.AssetExecutionContext,
    pipeline: PipelineResource,
    stage: Callable[[Services, HarvestScope], T],
    upstream: str | None = None,
) -> list[tuple[HarvestScope, T]]:
    """`stage` for each scope of the run's partition keys. A downstream stage (reading
    `upstream`) first names this Dagster run on the harvest run it continues, so that the
    failure sensor records this run's failure there."""
    tag_worker(context)
    _refuse_a_run_without_partitions(context)
    _refuse_a_job_backfill_run(context)
    results: list[tuple[HarvestScope, T]] = []
    failures: dict[str, list[str]] = {}  # harvester id -> its scopes' errors
    scopes = scopes_for_keys(list(context.partition_keys))
    with _retry_only_transient():  # a wrong database URL or setting: no retries either
        services = pipeline.services()
    services.retry_coming = _retry_coming(context)
    services.error_text = step_error_text
    with services:
        for scope in scopes:
            context.log.info(
                f"{scope.harvester_id}: windows {scope.keys[0]} .. {scope.keys[-1]} "
                f"({len(scope.keys)})"
            )
            try:
                with _retry_only_transient(services.retry_coming):
                    if upstream is None:
                        results.append((scope, stage(services, scope)))
                        continue
                    parts = split_by_upstream_run(services.storage, upstream, scope)
                    refuse_partitions_of_old_identifiers(
                        services.state, services.storage, upstream, parts
                    )
                    refuse_partitions_of_superseded_runs(services.state, upstream, parts)
                    for run_id, part in parts:
                        services.state.resume_run(run_id, context.run_id)
                        try:
                            results.append((part, stage(services, part)))
                        except BaseException as error:
                            # The run ends failed (or stopped) with this step's error, as
                            # the CLI's does: `running` until the failure sensor ran, which
                            # a stopped daemon never does. A retry resumes it again.
                            services.record_failure(run_id, error)
                            raise
            except dg.Failure as failure:
                described = _naming(scope.harvester_id, failure.description)
                if len({s.harvester_id for s in scopes}) == 1:
                    raise dg.Failure(
                        description=described,
                        metadata=failure.metadata,
                        allow_retries=failure.allow_retries,
                    ) from failure
                # One harvester's mistake (a wrong prefix, a deleted harvester) must not stop
                # the others of a backfill over several harvesters.
                context.log.error(described)
                failures.setdefault(scope.harvester_id, []).append(described)
    if failures:
        _materialised_before_failing(context, pipeline, _scopes(results))
        # each harvest run the failure sensor ends gets its own harvester's errors
        own = {
            harvester_id: "; ".join(error.removeprefix(f"{harvester_id}: ") for error in errors)
            for harvester_id, errors in failures.items()
        }
        raise dg.Failure(
            description="; ".join(error for errors in failures.values() for error in errors),
            metadata={ERRORS_BY_HARVESTER: dg.MetadataValue.json(own)},
            allow_retries=False,
        )
    return results


def _naming(harvester_id: str, description: str | None) -> str:
    """A step's failure as the UI and alerts show it, led by the harvester it is of: the
    errors name the base URL, which at hundreds of harvesters does not say which one (several
    may share a source). Not twice, for a message that names it first already."""
    description = description or "failed"
    if description.startswith(f"{harvester_id}: "):
        return description
    return f"{harvester_id}: {description}"


def _materialised_before_failing(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, scopes: list[HarvestScope]
) -> None:
    """The windows of the harvesters that went through, materialised although the step fails
    for another harvester's: the UI shows them done, with their counts (not the window
    alone), and automation takes them on."""
    asset = context.asset_key.to_user_string()
    storage = PartitionStore(pipeline.settings().storage_url)
    for scope in scopes:
        for window in scope.keys:
            summary = summarise_partition(
                storage, asset, scope.harvester_id, window, preview=ERROR_PREVIEW
            )
            context.log_event(
                dg.AssetMaterialization(
                    asset_key=context.asset_key,
                    partition=str(partition_key(scope.harvester_id, window)),
                    metadata=_window_entries(storage, asset, scope.harvester_id, window, summary),
                )
            )


def _refuse_a_run_without_partitions(context: dg.AssetExecutionContext) -> None:
    """A run launched with no partition (the launchpad's Launch Run of `harvest` or
    `run_all_harvesters` without choosing one) failed with Dagster's invariant violation and
    its traceback. Refused in one line, with what to do instead."""
    if context.has_partition_key or context.has_partition_key_range:
        return
    raise dg.Failure(
        description=(
            f"this run names no partition: choose a harvester and its windows "
            f"({HARVESTER}|{WINDOW} keys) in the launchpad, or Materialize them from the "
            "assets; for a full harvest of every harvester, start (or test) the "
            "run_all_harvesters_schedule"
        ),
        allow_retries=False,
    )


def _refuse_a_job_backfill_run(context: dg.AssetExecutionContext) -> None:
    """A range run of a job's backfill carries the first partition's tags too (Dagster 1.13
    copies them onto every run), and the partition tags win: the run would materialise one
    window of its range and succeed. Refused, with what to do instead."""
    tags = context.run.tags
    start, end = tags.get(RANGE_START_TAG), tags.get(RANGE_END_TAG)
    single = [
        key for key in tags if key == "dagster/partition" or key.startswith("dagster/partition/")
    ]
    if start and end and start != end and single:
        raise dg.Failure(
            description=(
                f"this run asks for the range {start} .. {end} and also for the single "
                f"partition of its tags ({', '.join(f'{k}={tags[k]}' for k in sorted(single))}), "
                "as the runs of a job's backfill do: launch the backfill from the assets "
                "(Materialize, choose the partitions) instead"
            ),
            allow_retries=False,
        )


def _counts(prefix: str, counter: Counter[str]) -> dict[str, int]:
    return {f"{prefix}{name}": int(count) for name, count in sorted(counter.items())}


def _error_table(rows: list[dict]) -> dg.TableMetadataValue:
    columns = ["identifier", "error_type", "error_message", "error_location"]
    return dg.MetadataValue.table(
        records=[dg.TableRecord({c: str(row.get(c) or "") for c in columns}) for row in rows],
        schema=dg.TableSchema(columns=[dg.TableColumn(c, "string") for c in columns]),
    )


def _status_metadata(pipeline: PipelineResource, run_ids: list[int]) -> dict[str, object]:
    """Where each harvest run stands once written, as `oai-pipeline status` tells it: its
    status, its records per status, stale running ones, the harvester's harvest records and
    target records, its last failures and its discovery state. One harvest run's entries
    are `status_…`; a run that wrote several names each (`status_run_<id>_…`)."""
    metadata: dict[str, object] = {}
    with pipeline.services() as services:
        for run_id in run_ids:
            status = harvest_status(services.state, services.settings.target_db_url, run_id=run_id)
            prefix = "status_" if len(run_ids) == 1 else f"status_run_{run_id}_"
            run = status["run"]
            failures = [
                {
                    "identifier": failure["identifier"],
                    **{f"error_{name}": value for name, value in failure["error"].items()},
                }
                for failure in status["recent_failures"]
            ]
            metadata.update(
                {
                    f"{prefix}harvest_run": run_id,
                    f"{prefix}harvest_run_status": run["status"],
                    **{f"{prefix}records_{k}": v for k, v in status["records"].items()},
                    f"{prefix}stale_running": status["stale_running"],
                    **{
                        f"{prefix}harvest_records_{k}": v
                        for k, v in status["harvest_records"].items()
                    },
                    **{f"{prefix}target_{k}": v for k, v in (status["target"] or {}).items()},
                    f"{prefix}recent_failures": _error_table(failures),
                    f"{prefix}discovery_state": dg.MetadataValue.json(
                        status["discovery_state"] or {}
                    ),
                    # the run's notices, kept across its attempts (as on raw_oai_xml)
                    **{
                        f"{prefix}{name}": value
                        for name, value in _notices([status["notices"]]).items()
                    },
                }
            )
    return metadata


def _errors(summary: PartitionSummary) -> dict[str, object]:
    """Per error type, and the first failed records: a transformer's failures show where
    they happen, not only once the writer stage copies them."""
    return {
        "error_count": summary.errors.total(),
        **_counts("errors_", summary.errors),
        "errors_preview": _error_table(summary.error_rows),
    }


def _records_and_errors(summary: PartitionSummary) -> dict[str, object]:
    return {
        "record_count": summary.records,
        "deleted_at_source": summary.deleted,
        **_errors(summary),
    }


def _actions(summary: PartitionSummary) -> dict[str, object]:
    return {"record_count": summary.records, **_counts("action_", summary.actions)}


def _outcomes(summary: PartitionSummary) -> dict[str, object]:
    return {**_actions(summary), **_errors(summary)}


# What each asset's partition metadata tells of its records.
_DESCRIBE: dict[str, Callable[[PartitionSummary], dict[str, object]]] = {
    RAW_OAI_XML: _records_and_errors,
    TRANSFORMED_RECORDS: _records_and_errors,
    SYNC_DECISIONS: _actions,
    WRITTEN_RECORDS: _outcomes,
}


def _add_partition_metadata(
    context: dg.AssetExecutionContext, by_partition: dict[str, dict[str, object]]
) -> None:
    """`context.add_asset_metadata` for each partition of the run's range. Dagster 1.13
    checks every call's key against the range's keys, listed again per call: quadratic, ~7 ms
    a call for a year of daily windows. These keys come from the run's own range, so they go
    to the step's metadata directly (checked the public way on a Dagster without that)."""
    step = getattr(context.op_execution_context, "_step_execution_context", None)
    accumulator = getattr(step, "_metadata_accumulator", None)
    if accumulator is None or not hasattr(accumulator, "with_additional_asset_metadata"):
        for key, metadata in by_partition.items():
            context.add_asset_metadata(metadata, partition_key=key)
        return
    for key, metadata in by_partition.items():
        accumulator = accumulator.with_additional_asset_metadata(
            asset_key=context.asset_key, metadata=metadata, partition_key=key
        )
    step._metadata_accumulator = accumulator  # noqa: SLF001 - see the docstring


def _window_entries(
    storage: PartitionStore, asset: str, harvester_id: str, window: str, summary: PartitionSummary
) -> dict[str, object]:
    """A window's materialisation metadata: its key, where its Parquet parts are (a path a
    data engineer opens or hands to polars/duckdb; a URL on an object store) and its counts."""
    location = storage.location(asset, harvester_id, window)
    return {
        "window": window,
        # Dagster's own key: the UI's asset page shows it as the Row count (record_count
        # stays for those who plot it)
        "dagster/row_count": summary.records,
        "path": dg.MetadataValue.path(location)
        if storage.is_local
        else dg.MetadataValue.url(location),
        **_DESCRIBE[asset](summary),
    }


def _window_metadata(
    context: dg.AssetExecutionContext,
    pipeline: PipelineResource,
    asset: str,
    scopes: list[HarvestScope],
) -> dict[str, object]:
    """Each window's partition gets the counts of its own records (Dagster would otherwise
    copy the run's onto every window of a range); the run's totals come back as `run_…`."""
    describe = _DESCRIBE[asset]
    storage = PartitionStore(pipeline.settings().storage_url)
    total = PartitionSummary()
    by_partition: dict[str, dict[str, object]] = {}
    for scope in scopes:
        for window in scope.keys:
            summary = summarise_partition(
                storage, asset, scope.harvester_id, window, preview=ERROR_PREVIEW
            )
            key = partition_key(scope.harvester_id, window)
            by_partition[key] = _window_entries(storage, asset, scope.harvester_id, window, summary)
            total.add(summary, preview=ERROR_PREVIEW)
    _add_partition_metadata(context, by_partition)
    return {
        "harvesters": ", ".join(sorted({s.harvester_id for s in scopes})),
        "run_window": f"{scopes[0].keys[0]} .. {scopes[-1].keys[-1]}" if scopes else "",
        "run_windows": sum(len(s.keys) for s in scopes),
        **{f"run_{name}": value for name, value in describe(total).items()},
    }


def _run_result(
    context: dg.AssetExecutionContext, run_metadata: dict[str, object]
) -> dg.MaterializeResult:
    """The run's totals and state, once for the run: an observation of the asset (in the
    run's log and the asset's events). As the materialisation's metadata, Dagster copied
    them onto each window's materialisation of a range (365 copies for a year of daily
    windows, most of the bytes Dagster stored and read back per window); each window's
    materialisation now carries its own counts only."""
    context.log_event(
        dg.AssetObservation(
            asset_key=context.asset_key,
            description=RUN_TOTALS,
            metadata=run_metadata,
        )
    )
    return dg.MaterializeResult()


def _notices(each: Iterable[list[str]]) -> dict[str, object]:
    """The quirks of the sources met (Reader.notices), one line each; none: no entry."""
    notices = list(dict.fromkeys(notice for notices in each for notice in notices))
    if not notices:
        return {}
    return {"source_notices": dg.MetadataValue.md("\n".join(f"- {n}" for n in notices))}


def _scopes(results: list[tuple[HarvestScope, T]]) -> list[HarvestScope]:
    return [scope for scope, _ in results]


def _tell_moved_source(
    context: dg.AssetExecutionContext, services: Services, harvester_id: str
) -> None:
    """A run reads the harvester as it starts: one queued before `harvesters update
    --base-url` harvests the new URL, while its server tag (set when it was queued, what the
    run queue held it back by) names the old one's server. Said in the run's log, where the
    operator looks for what it harvested."""
    queued_for = context.run.tags.get(SOURCE_TAG)
    base_url = services.harvester(harvester_id).base_url
    if queued_for and SEVERAL not in queued_for and queued_for != source_tag(base_url):
        context.log.warning(
            f"{harvester_id}: this run was queued for server {queued_for}; the harvester's "
            f"base URL has changed since, and the run lists from {shown(base_url)}"
        )


@dg.asset(
    kinds={"oai-pmh", "parquet"},
    pool=SOURCE_POOL,
    **_ASSET_ARGS,
    metadata=_column_schema(RAW_OAI_XML),
)
def raw_oai_xml(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, harvest_options: HarvestOptions
) -> dg.MaterializeResult:
    """ListRecords of the window(s), following resumption tokens, checkpointed page by page."""
    if problem := older_queue_limits(context.instance):  # in the run's log, seen in the UI
        context.log.warning(problem)
    options = _options(harvest_options)

    def list_records(services: Services, scope: HarvestScope) -> DiscoveryResult:
        _tell_moved_source(context, services, scope.harvester_id)
        return discover(
            services, scope, options, dagster_run_id=context.run_id, progress=context.log.info
        )

    results = _each_scope(context, pipeline, list_records)
    counters: Counter[str] = Counter()
    for _, result in results:
        # Counts only: `cap_reached` is a flag (below, as a bool), not a count to add up.
        counters.update(
            {
                k: v
                for k, v in result.counters.items()
                if isinstance(v, int) and not isinstance(v, bool)
            }
        )
    return _run_result(
        context,
        {
            **_window_metadata(context, pipeline, RAW_OAI_XML, _scopes(results)),
            # no `from` (the grid's first window holds everything older): "earliest", not
            # Python's "None"
            "oai_from": ", ".join(r.from_ or "earliest" for _, r in results),
            "oai_until": ", ".join(r.until or "latest" for _, r in results),
            "harvest_runs": ", ".join(str(r.run_id) for _, r in results),
            "cap_reached": any(r.cap_reached for _, r in results),
            **_counts("run_", counters),
            **_notices(r.notices for _, r in results),
        },
    )


@dg.asset(
    deps=[raw_oai_xml],
    kinds={"python", "parquet"},
    **_DOWNSTREAM_ARGS,
    metadata=_column_schema(TRANSFORMED_RECORDS),
)
def transformed_records(
    context: dg.AssetExecutionContext, pipeline: PipelineResource
) -> dg.MaterializeResult:
    """Each record through the harvester's transformers; failures are per-record errors."""
    results = _each_scope(context, pipeline, transform, RAW_OAI_XML)
    return _run_result(
        context,
        {
            **_window_metadata(context, pipeline, TRANSFORMED_RECORDS, _scopes(results)),
            "run_transformed": sum(r.transformed for _, r in results),
            "run_reused": sum(r.reused for _, r in results),
            "transform_workers": max((r.workers for _, r in results), default=1),
        },
    )


@dg.asset(
    deps=[transformed_records],
    kinds={"python", "parquet"},
    **_DOWNSTREAM_ARGS,
    metadata=_column_schema(SYNC_DECISIONS),
)
def sync_decisions(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, harvest_options: HarvestOptions
) -> dg.MaterializeResult:
    """The plan: per record, what must happen to the target and why. written_records
    follows it in the same run or through the harvest_automation sensor: stop that sensor
    and materialise up to this asset to look at a plan before it is written."""
    options = _options(harvest_options)
    results = _each_scope(
        context, pipeline, lambda s, scope: plan(s, scope, options), TRANSFORMED_RECORDS
    )
    return _run_result(
        context, _window_metadata(context, pipeline, SYNC_DECISIONS, _scopes(results))
    )


@dg.asset(
    deps=[sync_decisions],
    kinds={"python", "parquet", "sql"},
    **_DOWNSTREAM_ARGS,
    metadata=_column_schema(WRITTEN_RECORDS),
)
def written_records(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, harvest_options: HarvestOptions
) -> dg.MaterializeResult:
    """The plan applied through the harvester's writers; each outcome on its harvest record."""
    options = _options(harvest_options)
    results = _each_scope(
        context,
        pipeline,
        lambda s, scope: write(s, scope, options, progress=context.log.info),
        SYNC_DECISIONS,
    )
    harvest_runs = list(dict.fromkeys(r.run_id for _, r in results))
    # A harvest run this run wrote part of, whose other windows' records the Dagster run
    # that harvested it will not write (it failed or was killed): not running.
    for run_id in fail_orphaned_harvest_runs(
        pipeline, context.instance, harvest_runs, context.run_id
    ):
        context.log.warning(f"harvest run {run_id}: records of its other windows not written")
    return _run_result(
        context,
        {
            **_window_metadata(context, pipeline, WRITTEN_RECORDS, _scopes(results)),
            "harvest_runs": ", ".join(map(str, harvest_runs)),
            # what the harvest runs did to these records, all their attempts: `run_action_…`
            # counts those an earlier attempt wrote `already_written`, as this one found them
            **_counts(
                "harvest_run_action_",
                sum((all_attempts(r.actions, r.earlier) for _, r in results), Counter()),
            ),
            # each write of a harvest run reports the run's undo (all its attempts): once
            "run_local_changes_undone": sum(
                brought_back(undone) for undone in {r.run_id: r.undone for _, r in results}.values()
            ),
            # records refused a DOI their former identifier held, written once it gave it up;
            # each write of a harvest run reports the run's (all its attempts): once
            "reidentified": sum(
                n
                for taken in {r.run_id: r.reidentified for _, r in results}.values()
                for a, n in taken.items()
                if a != "error"
            ),
            **_status_metadata(pipeline, harvest_runs),
        },
    )


harvest_assets = [raw_oai_xml, transformed_records, sync_decisions, written_records]

OWNERS_VARIABLE = "OAI_PIPELINE_ASSET_OWNERS"


def with_owners(assets: list[dg.AssetsDefinition]) -> list[dg.AssetsDefinition]:
    """The assets owned by whom OAI_PIPELINE_ASSET_OWNERS names (comma-separated e-mail
    addresses or `team:NAME`; unset: no one), for the UI's Owner column and filter. Read as
    the definitions load, as the window grid is: a value Dagster refuses fails the code
    location in one line naming the variable, not Dagster's error naming an asset."""
    owners = [o.strip() for o in os.environ.get(OWNERS_VARIABLE, "").split(",") if o.strip()]
    if not owners:
        return assets
    for owner in owners:
        try:
            dg.AssetSpec("owner_check", owners=[owner])  # Dagster's own rule
        except dg.DagsterInvalidDefinitionError:
            raise ConfigurationError(
                f"{OWNERS_VARIABLE}: {owner!r} is no owner Dagster takes: an e-mail address or "
                "team:NAME, comma-separated"
            ) from None
    return dg.map_asset_specs(lambda spec: spec.replace_attributes(owners=owners), assets)
