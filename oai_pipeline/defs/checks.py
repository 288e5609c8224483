"""Partitioned asset checks: the stages add up, and no record carries an error."""

import warnings
from collections.abc import Iterator

import dagster as dg

from oai_pipeline.defs.assets import written_records
from oai_pipeline.defs.partitions import harvest_partitions, scopes_for_keys
from oai_pipeline.defs.resources import PipelineResource
from oai_pipeline.pipeline.reconciliation import StageCounts, count_stages


def _counts(context: dg.AssetCheckExecutionContext, pipeline: PipelineResource) -> StageCounts:
    with pipeline.services() as services:
        return count_stages(services.storage, scopes_for_keys(list(context.partition_keys)))


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
            description="raw = transformed (+ parse errors); decisions = transformed; "
            "written + failed + skipped = decisions",
        ),
        dg.AssetCheckSpec(
            "no_record_errors",
            asset=written_records,
            partitions_def=harvest_partitions,
            description="no record of the partition carries a transform or write error",
        ),
    ]


@dg.multi_asset_check(name="stage_checks", specs=_SPECS)
def stage_checks(
    context: dg.AssetCheckExecutionContext, pipeline: PipelineResource
) -> Iterator[dg.AssetCheckResult]:
    """Both checks from one count of the four stages (each part is read once, not twice)."""
    counts = _counts(context, pipeline)
    problems = counts.problems
    yield dg.AssetCheckResult(
        check_name="reconciles",
        passed=not problems,
        severity=dg.AssetCheckSeverity.ERROR,
        description="; ".join(problems) or "every stage accounts for every record",
        metadata=_metadata(counts),
    )
    errors = sum(counts.error_types.values())
    yield dg.AssetCheckResult(
        check_name="no_record_errors",
        passed=errors == 0,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"{errors} record errors" if errors else "no record errors",
        metadata={f"errors_{k}": v for k, v in sorted(counts.error_types.items())},
    )


harvest_checks = [stage_checks]
