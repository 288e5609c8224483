"""`oai-pipeline harvest ID …`: one harvest run, in this process or handed to Dagster."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click
from pydantic import ValidationError

from oai_pipeline.cli.harvesters import disabled_warning
from oai_pipeline.cli.output import (
    FriendlyCommand,
    InvalidInput,
    emit,
    json_option,
    progress_line,
    report_text,
    setup_cli_logging,
)
from oai_pipeline.harvesters.model import describe_validation_error
from oai_pipeline.oai.windows import parse_datestamp
from oai_pipeline.pipeline.options import SCALES, RunOptions
from oai_pipeline.pipeline.runner import run_harvest
from oai_pipeline.pipeline.scope import HarvestScope
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import load_settings

# A range is computed in whole days (an open start is the day before the end, a day-granular
# end goes up to the next midnight): an --until on the calendar's first or last day
# overflowed with a traceback.
EARLIEST = datetime.min.replace(tzinfo=UTC)
EARLIEST_END = EARLIEST + timedelta(days=1)
LATEST_MOMENT = datetime.max.replace(tzinfo=UTC) - timedelta(days=1)


def parse_moment(value: str | None, flag: str, *, earliest: datetime = EARLIEST) -> datetime | None:
    if value is None:
        return None
    try:
        moment = parse_datestamp(value)
    except ValueError as error:
        raise InvalidInput(f"{flag}: {error}") from error
    if not earliest <= moment <= LATEST_MOMENT:
        raise InvalidInput(
            f"{flag}: {value.strip()} is out of range ({earliest.date().isoformat()} "
            f"to {LATEST_MOMENT.date().isoformat()})"
        )
    return moment


@click.command(name="harvest", cls=FriendlyCommand)
@click.argument("harvester_id")
@click.argument("oai_identifiers", nargs=-1)
@click.option("--since", help="harvest records changed since (YYYY-MM-DD or seconds, UTC)")
@click.option("--until", "until_", help="… and before this moment (exclusive)")
@click.option("--scale", type=click.Choice(list(SCALES)), help=RunOptions.describe("scale"))
@click.option("--max-records", type=int, default=0, help=RunOptions.describe("max_records"))
@click.option("--include-existing", is_flag=True, help=RunOptions.describe("include_existing"))
@click.option(
    "--rate-limit-per-minute", type=int, help=RunOptions.describe("rate_limit_per_minute")
)
@click.option("--update-all", is_flag=True, help=RunOptions.describe("update_all"))
@click.option(
    "--progress-every", type=int, default=1000, help=RunOptions.describe("progress_every")
)
@click.option(
    "--reset-stale-running-minutes",
    type=int,
    help=RunOptions.describe("reset_stale_running_minutes"),
)
@click.option("--retry-failed", is_flag=True, help=RunOptions.describe("retry_failed"))
@click.option("--resume", "resume_batch_id", type=int, help=RunOptions.describe("resume_batch_id"))
@click.option(
    "--failed",
    "failed_again",
    is_flag=True,
    help="harvest again, one by one, the records whose last harvest failed (once the cause "
    "is fixed: a community created, a transformer option changed)",
)
@click.option("--use-job", is_flag=True, help="hand the run to the running Dagster instance")
@click.option(
    "--wait",
    is_flag=True,
    help="with --use-job: follow the Dagster run to its end and exit 1 if it failed or was "
    "canceled (Ctrl-C stops the wait, not the run)",
)
@json_option
def harvest(
    harvester_id: str,
    oai_identifiers: tuple[str, ...],
    since: str | None,
    until_: str | None,
    scale: str | None,
    max_records: int,
    include_existing: bool,
    rate_limit_per_minute: int | None,
    update_all: bool,
    progress_every: int,
    reset_stale_running_minutes: int | None,
    retry_failed: bool,
    resume_batch_id: int | None,
    failed_again: bool,
    use_job: bool,
    wait: bool,
    as_json: bool,
) -> None:
    """Harvest HARVESTER_ID (all records, a date range, or the OAI_IDENTIFIERS given)."""
    if resume_batch_id is not None and (since is not None or until_ is not None or oai_identifiers):
        # A resumed run keeps its own window and records; silently ignoring these would
        # harvest something else than the operator asked for.
        raise click.UsageError(
            "--resume continues a run with its own range and records; "
            "give --since/--until or OAI identifiers to a new run instead"
        )
    if resume_batch_id is not None and (scale is not None or max_records):
        # The run keeps the cap it was started with, so that a cap holds across attempts.
        raise click.UsageError(
            "--resume continues a run with its own cap; "
            "give --scale or --max-records to a new run instead"
        )
    if failed_again and (
        oai_identifiers or since or until_ or resume_batch_id is not None or use_job
    ):
        raise click.UsageError(
            "--failed harvests the failed records by identifier, in this process: leave out "
            "OAI identifiers, --since/--until, --resume and --use-job"
        )
    if wait and not use_job:
        raise click.UsageError(
            "--wait follows a Dagster run: add --use-job (a harvest in this process ends "
            "when the command does)"
        )
    if use_job and oai_identifiers:
        raise click.UsageError(
            "a harvest of selected OAI identifiers runs in this process (the records belong "
            "to no window of the Dagster partitions): leave out --use-job"
        )
    if scale is not None and max_records:  # RunOptions says it of its fields, not the flags
        raise InvalidInput("give either --scale or --max-records, not both", as_json=as_json)
    try:
        options = RunOptions(
            scale=scale,
            max_records=max_records,
            include_existing=include_existing,
            rate_limit_per_minute=rate_limit_per_minute,
            update_all=update_all,
            progress_every=progress_every,
            reset_stale_running_minutes=reset_stale_running_minutes,
            retry_failed=retry_failed,
            resume_batch_id=resume_batch_id,
            identifiers=list(oai_identifiers),
        )
    except ValidationError as error:  # named as the options the user gave, not as fields
        raise InvalidInput(
            describe_validation_error(error, lambda field: f"--{field.replace('_', '-')}"),
            as_json=as_json,
        ) from None
    start = parse_moment(since, "--since")
    end = parse_moment(until_, "--until", earliest=EARLIEST_END)
    if start and end and start >= end:
        raise InvalidInput("--since must be before --until")
    if use_job:
        from oai_pipeline.cli.submit import submit_harvest_job, wait_for_run

        payload = submit_harvest_job(harvester_id, start, end, options)
        if not as_json:
            for note in [*payload["warnings"], *([payload["note"]] if "note" in payload else [])]:
                progress_line(f"note: {note}")
        text = f"submitted Dagster run {payload['run_id']}"
        if wait:
            progress_line(text)
            payload |= wait_for_run(payload["run_id"], progress=progress_line)
            runs = ", ".join(f"harvest run {run['id']}" for run in payload["harvest_runs"])
            text = f"Dagster run {payload['run_id']} succeeded ({runs or 'no harvest run'})"
        emit(payload, as_json=as_json, text=text)
        return
    setup_cli_logging()
    with Services(load_settings()) as services:
        # Run: the operator named it. But they hear why no schedule harvests it.
        warning = disabled_warning(services.harvester(harvester_id))
        warnings = [warning] if warning else []
        for line in warnings:
            progress_line(f"note: {line}")
        if failed_again:
            failed = services.state.failed_identifiers(harvester_id)
            # A record listed without identifier cannot be asked for (GetRecord of "" is a
            # badArgument, which failed the run): its window's next harvest lists it again.
            askable = [identifier for identifier in failed if identifier.strip()]
            if len(askable) < len(failed):
                progress_line(
                    f"harvester {harvester_id}: {len(failed) - len(askable)} failed record "
                    "without identifier left out (harvest its window again to get it)"
                )
            if not askable:
                emit(
                    {"harvester_id": harvester_id, "failed": len(failed), "warnings": warnings},
                    as_json=as_json,
                    text=f"harvester {harvester_id} has no failed records to ask for again",
                )
                return
            options = RunOptions.model_validate({**options.model_dump(), "identifiers": askable})
        scope = HarvestScope.adhoc(harvester_id, start, end)
        report = run_harvest(services, scope, options, progress=progress_line).to_dict()
    emit({**report, "warnings": warnings}, as_json=as_json, text=report_text(report))
