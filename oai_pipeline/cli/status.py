"""`oai-pipeline status`: where a harvest run stands, or the recent runs."""

from __future__ import annotations

from typing import Any

import click

from oai_pipeline.cli.harvesters import open_store
from oai_pipeline.cli.output import (
    FriendlyCommand,
    InvalidInput,
    argument_or_option,
    catch_up_line,
    emit,
    json_option,
    limit_option,
    listing_text,
    note_lines,
    one_line,
    pending_rekey_line,
)
from oai_pipeline.errors import NotFound
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.identifier_prefix import jsonable_pending_rekey
from oai_pipeline.pipeline.status import harvest_status, settle_interrupted
from oai_pipeline.settings import load_settings
from oai_pipeline.state.limits import MAX_INTEGER
from oai_pipeline.state.store import DEFAULT_STALE_MINUTES, jsonable_run


def _runs_text(runs: list[dict[str, Any]]) -> str:
    return listing_text(
        (
            (
                run["id"],
                run["harvester_id"],
                run["status"],
                f"{run['window_from'] or '…'} .. {run['window_until'] or '…'}",
                f"staged {run['staged']}",
                run["created_at"],
            )
            for run in runs
        ),
    )


def _each_harvester_text(rows: list[dict[str, Any]]) -> str:
    """One row a harvester; a pending rekey, as `status` says it, in its last (8th) column."""

    def columns(row: dict[str, Any]) -> tuple[object, ...]:
        state = "enabled" if row["enabled"] else "disabled"
        run = row["run"]
        pending = row["pending_rekey"]
        rekey = pending_rekey_line(pending) if pending else ""
        if run is None:
            return (row["harvester_id"], state, "never harvested", "", "", "", "", rekey)
        return (
            row["harvester_id"],
            state,
            run["status"],
            f"run {run['id']}",
            f"{run['window_from'] or '…'} .. {run['window_until'] or '…'}",
            run["finished_at"] or run["updated_at"],
            run["error"] or "",
            rekey,
        )

    return listing_text(columns(row) for row in rows)


def _or_dash(value: object) -> str:
    """A value not known yet as `-`, as the other fields say it (not Python's `None`)."""
    return "-" if value is None else str(value)


def _status_text(status: dict[str, Any]) -> str:
    run, counters = status["run"], status["counters"]
    cap = run["max_records"] or "uncapped"
    lines = [
        f"harvest run {run['id']} of {run['harvester_id']}: {run['status']}"
        + (f" ({run['error']})" if run["error"] else ""),
        *([f"  {pending_rekey_line(status['pending_rekey'])}"] if status["pending_rekey"] else []),
        f"  window: {run['window_from'] or '…'} .. {run['window_until'] or '…'}, "
        f"scale {run['scale'] or '-'}, cap {cap}",
        f"  pages read {counters['pages_read']}, discovered {counters['discovered']}, "
        f"staged {counters['staged']}, duplicates skipped {counters['duplicates_skipped']}, "
        f"existing skipped {counters['existing_skipped']}, "
        f"cap reached {'yes' if counters['cap_reached'] else 'no'}",
        *([catch_up_line(counters)] if counters.get("catch_up_pages") else []),
        "  records: "
        + ", ".join(f"{name} {count}" for name, count in status["records"].items())
        + f" (total {status['total_records']}"
        + (", counts kept, per-record rows pruned)" if status["record_rows_pruned"] else ")"),
        f"  stale running (> {status['stale_after_minutes']} min): {status['stale_running']}",
    ]
    totals = status["harvest_records"]
    lines.append(
        f"  harvest records: {totals['total']} ({totals['live']} live, {totals['deleted']} "
        f"deleted, {totals['with_errors']} with errors)"
    )
    state = status["discovery_state"]
    if state and run["status"] == "succeeded":  # the checkpoint is the last page's, not news
        # the first page's responseDate, where the next incremental harvest starts (the
        # checkpoint of a list of one page was saved before that page came: None)
        lines.append(
            f"  discovery: complete, {counters['pages_read']} pages, "
            f"responseDate {run['response_date'] or state['response_date'] or '-'}, "
            f"last datestamp {_or_dash(state['last_datestamp'])}"
        )
    elif state:
        lines.append(
            f"  discovery: pages {state['pages_read']}, cursor {_or_dash(state['cursor'])}, "
            f"token {state['resumption_token'] or '-'}, "
            f"responseDate {_or_dash(state['response_date'])}, "
            f"last datestamp {_or_dash(state['last_datestamp'])}"
        )
    # quirks of the source its attempts met, as the harvest's report said them
    lines.extend(note_lines(status.get("notices")))
    target = status["target"]
    lines.append(
        "  target: "
        + (", ".join(f"{k} {v}" for k, v in target.items()) if target else "not available")
    )
    for failure in status["recent_failures"]:
        error = failure["error"]
        identifier = failure["identifier"] or "(no identifier)"  # MissingIdentifier, say
        lines.append(one_line(f"  failed {identifier}: {error['type']}: {error['message']}"))
    return "\n".join(lines)


@click.command(name="status", cls=FriendlyCommand)
@click.argument("harvester_argument", metavar="[HARVESTER_ID]", required=False)
@click.option("--batch-id", type=click.IntRange(max=MAX_INTEGER), help="this harvest run")
@click.option("--harvester", "harvester_id", help="this harvester's latest run")
@click.option("--list-recent", is_flag=True, help="list the recent harvest runs")
@click.option(
    "--each-harvester",
    is_flag=True,
    help="the latest run of each registered harvester, one line each",
)
@limit_option(20, "runs (--list-recent)")
@click.option(
    "--stale-minutes",
    type=click.IntRange(0, MAX_INTEGER),
    default=DEFAULT_STALE_MINUTES,
    show_default=True,
    help="records running longer count as stale",
)
@json_option
def status(
    harvester_argument: str | None,
    batch_id: int | None,
    harvester_id: str | None,
    list_recent: bool,
    each_harvester: bool,
    limit: int,
    stale_minutes: int,
    as_json: bool,
) -> None:
    """Status of a harvest run (counters, per-record counts, failures, discovery state).

    HARVESTER_ID (or --harvester ID): that harvester's latest run."""
    harvester_id = argument_or_option(harvester_argument, harvester_id, "--harvester", "harvesters")
    if batch_id is not None and harvester_id is not None:
        raise InvalidInput("give --batch-id or a harvester, not both")
    limit_given = click.get_current_context().get_parameter_source("limit")
    if not list_recent and limit_given is not click.core.ParameterSource.DEFAULT:
        raise InvalidInput("--limit counts the runs --list-recent lists: add --list-recent")
    if each_harvester and (list_recent or batch_id is not None or harvester_id is not None):
        raise InvalidInput(
            "--each-harvester shows every harvester: leave out --list-recent, --batch-id "
            "and --harvester"
        )
    with open_store(only_reads=True) as store:
        settle_interrupted(store)
        if each_harvester:
            latest = {h: jsonable_run(run) for h, run in store.latest_runs().items()}
            pending = store.pending_rekeys()
            rows = [
                {
                    "harvester_id": h.id,
                    "enabled": h.enabled,
                    "run": latest.get(h.id),
                    "pending_rekey": jsonable_pending_rekey(pending.get(h.id)),
                }
                for h in HarvesterRegistry(store).list()
            ]
            emit(
                rows,
                as_json=as_json,
                text=_each_harvester_text(rows),
                empty="no harvesters registered",
            )
            return
        if list_recent:
            if batch_id is not None:
                raise InvalidInput("--list-recent lists runs: use --harvester, not --batch-id")
            runs = store.list_runs(harvester_id=harvester_id, limit=limit)
            if harvester_id is not None and not runs and not store.knows_harvester(harvester_id):
                raise NotFound(f"unknown harvester {harvester_id!r}")
            emit(
                [jsonable_run(r) for r in runs],
                as_json=as_json,
                text=_runs_text(runs),
                empty="no harvest runs yet",
            )
            return
        result = harvest_status(
            store,
            load_settings().target_db_url,
            run_id=batch_id,
            harvester_id=harvester_id,
            stale_minutes=stale_minutes,
            only_reads=True,
        )
    emit(result, as_json=as_json, text=_status_text(result))
