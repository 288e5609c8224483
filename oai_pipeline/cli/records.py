"""`oai-pipeline records …`: the harvest records, filtered by harvester, state and error."""

from __future__ import annotations

import json

import click

from oai_pipeline.cli.harvesters import open_store, require_known_harvester
from oai_pipeline.cli.output import FriendlyGroup, emit, json_option, limit_option, listing_text
from oai_pipeline.errors import NotFound
from oai_pipeline.state.store import LISTED_RECORD_FIELDS


def _first_error(record: dict) -> str:
    if not record["errors"]:
        return ""
    error = record["errors"][0]
    where = f" at {error['location']}" if error["location"] else ""
    more = f" (+{len(record['errors']) - 1})" if len(record["errors"]) > 1 else ""
    return f"{error['stage']} {error['type']}: {error['message']}{where}{more}"


@click.group(name="records", cls=FriendlyGroup)
def records() -> None:
    """Harvest records: what each source said, what was written, and what went wrong."""


@records.command(name="list")
@click.option("--harvester", "harvester_id", help="only this harvester's records")
@click.option("--deleted", "only_deleted", is_flag=True, help="only records deleted at source")
@click.option("--live", "only_live", is_flag=True, help="only records live at the source")
@click.option("--error-type", help="records with an error of this type")
@click.option("--message", help="… whose message contains this text")
@click.option("--location", help="… whose location contains this text")
@limit_option(50, "records")
@json_option
def list_(
    harvester_id: str | None,
    only_deleted: bool,
    only_live: bool,
    error_type: str | None,
    message: str | None,
    location: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """List harvest records (error filters all apply to the same error)."""
    if only_deleted and only_live:  # separate flags, so the conflict is seen, not last-wins
        raise click.UsageError("give --live or --deleted, not both")
    with open_store(only_reads=True) as store:
        found = store.list_records(
            harvester_id=harvester_id,
            deleted=True if only_deleted else False if only_live else None,
            error_type=error_type,
            message=message,
            location=location,
            limit=limit,
        )
    require_known_harvester(harvester_id, found)
    text = listing_text(
        (
            (
                r["harvester_id"],
                r["identifier"],
                r["datestamp"] or "-",
                "deleted" if r["deleted"] else "live",
                r["local_id"] or "-",
                _first_error(r),
            )
            for r in found
        ),
    )
    emit(found, as_json=as_json, text=text, empty="no matching harvest records")


@records.command(name="show")
@click.argument("oai_identifier")
@click.option("--harvester", "harvester_id", help="needed if several harvesters hold it")
@json_option
def show(oai_identifier: str, harvester_id: str | None, as_json: bool) -> None:
    """One harvest record: its state, errors, original XML and transformed data."""
    with open_store(only_reads=True) as store:
        record = store.get_record(oai_identifier, harvester_id)
    if record is None:
        of = f" of harvester {harvester_id!r}" if harvester_id else ""
        raise NotFound(f"no harvest record {oai_identifier!r}{of}")
    lines = [f"{record['identifier']} (harvester {record['harvester_id']})"]
    for field in LISTED_RECORD_FIELDS:
        if field in ("harvester_id", "identifier"):  # in the heading line
            continue
        lines.append(f"  {field.replace('_', '-')}: {record[field]}")
    for error in record["errors"]:
        where = f" at {error['location']}" if error["location"] else ""
        lines.append(f"  error ({error['stage']}) {error['type']}: {error['message']}{where}")
    if record["data"] is not None:
        lines.append("  data: " + json.dumps(record["data"], indent=2, ensure_ascii=False))
    if record["xml"] is not None:
        lines.append("  xml:\n" + record["xml"])
    emit(record, as_json=as_json, text="\n".join(lines))
