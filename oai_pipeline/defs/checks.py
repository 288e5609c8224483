"""Partitioned asset checks: the stages add up, and no record carries an error.

A range run evaluates the checks once for the run; each window of the range also gets its
own evaluation, from its own records, so the UI shows every partition's check status.
"""

import warnings
from collections.abc import Iterator

import dagster as dg
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)
from dagster._core.events import (
    DagsterEvent,
    DagsterEventBatchMetadata,
    DagsterEventType,
    generate_event_batch_id,
)

from oai_pipeline.defs.assets import written_records
from oai_pipeline.defs.partitions import harvest_partitions, split_key
from oai_pipeline.defs.resources import PipelineResource
from oai_pipeline.pipeline.reconciliation import StageCounts, count_window, sum_counts


def _metadata(counts: StageCounts) -> dict[str, int]:
    return {
        "raw": counts.raw,
        "parse_errors": int(counts.raw_parse_errors),
        "transformed": counts.transformed,
        "transform_errors": counts.transform_errors,
        "decisions": counts.decisions,
        "written_failed_skipped": counts.written,
        "write_errors": counts.write_errors,
    }


# Partitioned check specs are a Dagster preview: the checks are evaluated per partition range
# like the asset they check (known and wanted, so the notice is not repeated to every user).
with warnings.catch_warnings():
    warnings.simplefilter("ignore", dg.PreviewWarning)
    _SPECS = [
        dg.AssetCheckSpec(
            "reconciles",
            asset=written_records,
            partitions_def=harvest_partitions,
            description="raw = transformed (+ parse errors); decisions = transformed x writers; "
            "written + failed + skipped = decisions",
        ),
        dg.AssetCheckSpec(
            "no_record_errors",
            asset=written_records,
            partitions_def=harvest_partitions,
            description="no record of the partition carries a transform or write error",
        ),
    ]


def _results(counts: StageCounts, problems: list[str] | None = None) -> list[dg.AssetCheckResult]:
    """Both checks' results from `counts`; `problems`, where not the counts' own (a range's
    totals: its windows' problems)."""
    problems = counts.problems if problems is None else problems
    errors = counts.error_types.total()
    return [
        dg.AssetCheckResult(
            check_name="reconciles",
            passed=not problems,
            severity=dg.AssetCheckSeverity.ERROR,
            description="; ".join(problems) or "every stage accounts for every record",
            metadata=_metadata(counts),
        ),
        dg.AssetCheckResult(
            check_name="no_record_errors",
            passed=errors == 0,
            severity=dg.AssetCheckSeverity.WARN,
            description=f"{errors} record errors" if errors else "no record errors",
            # the count it reports, 0 included: a passed check has a number to plot too
            metadata={
                "error_count": errors,
                **{f"errors_{k}": v for k, v in sorted(counts.error_types.items())},
            },
        ),
    ]


def _latest_materializations(
    instance: dg.DagsterInstance, partitions: list[str]
) -> dict[str, AssetCheckEvaluationTargetMaterializationData]:
    """Each partition's latest materialisation of `written_records`, in one query: the run
    has just materialised every one of them, so they are the newest records."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=written_records.key, asset_partitions=partitions),
        limit=len(partitions),
    ).records
    latest: dict[str, AssetCheckEvaluationTargetMaterializationData] = {}
    for record in records:
        if record.partition_key is not None and record.partition_key not in latest:
            latest[record.partition_key] = AssetCheckEvaluationTargetMaterializationData(
                storage_id=record.storage_id, run_id=record.run_id, timestamp=record.timestamp
            )
    return latest


def _evaluation(
    result: dg.AssetCheckResult,
    partition: str,
    target: AssetCheckEvaluationTargetMaterializationData | None,
) -> dg.AssetCheckEvaluation:
    return dg.AssetCheckEvaluation(
        asset_key=written_records.key,
        check_name=str(result.check_name),
        passed=result.passed,
        metadata=result.metadata,
        severity=result.severity,
        description=result.description,
        partition=partition,
        target_materialization_data=target,
    )


def _message(evaluation: dg.AssetCheckEvaluation) -> str:
    """Dagster's own message for a check evaluation (DagsterEvent.asset_check_evaluation)."""
    outcome = "passed." if evaluation.passed else "did not pass."
    described = f" Description: '{evaluation.description}'" if evaluation.description else ""
    return (
        f"Asset check '{evaluation.check_name}' on "
        f"'{evaluation.asset_key.to_user_string()}' {outcome}{described}"
    )


def _log_evaluations(
    context: dg.AssetCheckExecutionContext, evaluations: list[dg.AssetCheckEvaluation]
) -> None:
    """`log_event` of each evaluation, handed to the event log as one batch. Dagster 1.13
    stores each logged check evaluation on its own (two transactions: the run's events and
    the instance's check table), 730 for a year of daily windows; a batch is stored in one
    transaction per database, as a range's materialisations are. Same events, same order,
    in the run's log and the step's events (logged the public way on a Dagster without
    that)."""
    op_context = context.op_execution_context
    step = getattr(op_context, "_step_execution_context", None)
    logged = getattr(op_context, "_events", None)
    if step is None or not isinstance(logged, list):
        for evaluation in evaluations:
            op_context.log_event(evaluation)
        return
    batch_id = generate_event_batch_id()
    for index, evaluation in enumerate(evaluations):
        logged.append(
            DagsterEvent.from_step(
                event_type=DagsterEventType.ASSET_CHECK_EVALUATION,
                step_context=step,
                event_specific_data=evaluation,
                message=_message(evaluation),
                batch_metadata=DagsterEventBatchMetadata(batch_id, index == len(evaluations) - 1),
            )
        )


@dg.multi_asset_check(name="stage_checks", specs=_SPECS)
def stage_checks(
    context: dg.AssetCheckExecutionContext, pipeline: PipelineResource
) -> Iterator[dg.AssetCheckResult]:
    """Both checks from one count of the four stages per window (each part is read once)."""
    keys = list(context.partition_keys)
    with pipeline.services() as services:
        per_window = {key: count_window(services.storage, *split_key(key)) for key in keys}
    if not context.has_partition_key:
        # Dagster stores a range run's results without a partition, a range of one window
        # too (an hourly run of today's window): each window gets its own evaluation.
        targets = _latest_materializations(context.instance, [str(key) for key in keys])
        _log_evaluations(
            context,
            [
                _evaluation(result, str(key), targets.get(str(key)))
                for key, counts in per_window.items()
                for result in _results(counts)
            ],
        )
    # The run's: each window's own problems, named. From the totals, a range over harvesters
    # with other numbers of writers failed though every window reconciles (the totals count
    # every record by the most writers any window has).
    problems = [
        f"{key}: {problem}" for key, counts in per_window.items() for problem in counts.problems
    ]
    yield from _results(sum_counts(per_window.values()), problems)


harvest_checks = [stage_checks]
