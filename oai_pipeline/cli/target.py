"""`oai-pipeline target …`: act as a user of the embedded target repository.

Operators and tests deposit, edit, delete … records here and then watch the next harvest
bring harvested records back to the state the source reports.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from oai_pipeline import json_codec
from oai_pipeline.cli.harvesters import require_known_harvester
from oai_pipeline.cli.output import (
    FriendlyGroup,
    InvalidInput,
    emit,
    json_option,
    limit_option,
    listing_text,
)
from oai_pipeline.settings import load_settings
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline.targets.embedded.transaction import STATES


@contextmanager
def _repository(*, only_reads: bool = False) -> Iterator[EmbeddedRepository]:
    """The target of the current settings; `only_reads` for a command that only reads: it
    then works on a home this user cannot write (`EmbeddedRepository`)."""
    repository = EmbeddedRepository(load_settings().target_db_url, only_reads=only_reads)
    try:
        yield repository
    finally:
        repository.close()


def _parse_assignment(text: str) -> tuple[str, Any]:
    """`FIELD=VALUE`; VALUE is JSON when it parses as JSON, else a plain string."""
    field, equals, raw = text.partition("=")
    field = field.strip()
    if not equals or not field:
        raise InvalidInput(f"--set {text!r}: expected FIELD=VALUE, e.g. metadata.title=New")
    try:
        return field, json_codec.loads(raw)
    except (json.JSONDecodeError, RecursionError):  # RecursionError: nested too deeply
        return field, raw


@click.group(name="target", cls=FriendlyGroup)
def target() -> None:
    """Act as a user of the embedded target repository (deposit, edit, delete, …)."""


@target.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--publish", is_flag=True, help="Publish at once instead of leaving a draft.")
def deposit(file: Path, publish: bool) -> None:
    """Deposit a new record from FILE.json; prints the new id."""
    # The file is the user's input, as harvesters load's is: a mistake in it exits 2.
    try:
        # Read as the target stores JSON: what it cannot write back (a lone surrogate, a
        # number beyond a double) is refused here, not met as a traceback in the database.
        data = json_codec.loads(file.read_text(encoding="utf-8"))
    except OSError as error:
        raise InvalidInput(f"cannot read {file}: {error.strerror or error}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise InvalidInput(f"{file} is not valid JSON: {error}") from None
    with _repository() as repository:
        click.echo(repository.deposit(data, publish=publish))


@target.command()
@click.argument("record_id")
@click.option(
    "--set",
    "assignments",
    multiple=True,
    required=True,
    metavar="FIELD=VALUE",
    help="e.g. metadata.title=New; repeatable",
)
def edit(record_id: str, assignments: tuple[str, ...]) -> None:
    """Change fields in the record's (edit) draft; VALUE is JSON or a plain string."""
    changes = dict(_parse_assignment(text) for text in assignments)
    with _repository() as repository:
        repository.edit(record_id, changes)
    click.echo(f"record {record_id}: draft updated")


@target.command()
@click.argument("record_id")
def publish(record_id: str) -> None:
    """Publish the record's draft."""
    with _repository() as repository:
        repository.publish(record_id)
    click.echo(f"record {record_id}: published")


@target.command()
@click.argument("record_id")
@click.option("--purge", is_flag=True, help="Also mark the record for purge.")
@click.option("--note", default=None, help="The tombstone's note.")
def delete(record_id: str, purge: bool, note: str | None) -> None:
    """Delete the record (a tombstone; a never-published draft is discarded)."""
    with _repository() as repository:
        repository.delete(record_id, purge=purge, note=note)
    click.echo(f"record {record_id}: deleted" + (" and marked for purge" if purge else ""))


@target.command(name="hard-delete")
@click.argument("record_id")
def hard_delete(record_id: str) -> None:
    """Remove the record; its revisions are kept."""
    with _repository() as repository:
        repository.hard_delete(record_id)
    click.echo(f"record {record_id}: hard deleted")


@target.command()
@click.argument("record_id")
def restore(record_id: str) -> None:
    """Bring back a deleted (or hard-deleted) record."""
    with _repository() as repository:
        repository.restore(record_id)
    click.echo(f"record {record_id}: restored")


@target.command()
@click.argument("record_id")
@json_option
def show(record_id: str, as_json: bool) -> None:
    """The record: state, published data, draft, revision, DOI, communities, tombstone."""
    with _repository(only_reads=True) as repository:
        record = repository.show(record_id)
    lines = [
        f"{record['id']}  {record['state']}  revision {record['revision']}",
        f"  doi: {record['doi'] or '-'}",
        f"  source: {record['source_harvester'] or '-'} {record['source_identifier'] or ''}",
        f"  communities: {', '.join(record['communities']) or '-'}"
        + (f" (default {record['default_community']})" if record["default_community"] else ""),
    ]
    if record["draft"] is not None:
        lines.append(f"  draft: {record['draft_kind']}")
    if record["state"] == "tombstone":
        purge = " (marked for purge)" if record["purge"] else ""
        lines.append(f"  tombstone: {record['tombstone_note'] or '-'}{purge}")
    emit(record, as_json=as_json, text="\n".join(lines))


@target.command(name="list")
@click.option("--harvester", default=None, help="Only records of this harvester.")
@click.option(
    "--state", type=click.Choice(STATES), default=None, help="Only records in this state."
)
@limit_option(50, "records")
@json_option
def list_records(harvester: str | None, state: str | None, limit: int, as_json: bool) -> None:
    """Records of the target repository, oldest first."""
    with _repository(only_reads=True) as repository:
        rows = repository.list(harvester=harvester, state=state, limit=limit)
    require_known_harvester(harvester, rows)
    text = listing_text(
        (
            (
                row["id"],
                row["state"],
                f"r{row['revision']}",
                row["source_identifier"] or "-",
                row["title"] or "",
            )
            for row in rows
        ),
    )
    emit(rows, as_json=as_json, text=text, empty="no records")


@target.group(name="communities")
def communities_group() -> None:
    """Communities of the target repository."""


@communities_group.command(name="create")
@click.argument("slug")
@click.option("--parent", default=None, help="The parent community (slug or id).")
def create_community(slug: str, parent: str | None) -> None:
    """Create a community (a subcommunity with --parent)."""
    with _repository() as repository:
        community = repository.create_community(slug, parent=parent)
    click.echo(community["id"])


@communities_group.command(name="list")
@json_option
def list_communities(as_json: bool) -> None:
    """Every community with its parent."""
    with _repository(only_reads=True) as repository:
        rows = repository.list_communities()
    by_id = {row["id"]: row["slug"] for row in rows}
    text = listing_text(
        (
            (row["slug"], row["id"], f"(in {by_id.get(row['parent'])})" if row["parent"] else "")
            for row in rows
        ),
    )
    emit(rows, as_json=as_json, text=text, empty="no communities")
