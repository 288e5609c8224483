"""`oai-pipeline harvesters …`: register, change, list and remove harvesters."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import ValidationError

from oai_pipeline.cli.output import (
    CommandError,
    FriendlyGroup,
    InvalidInput,
    argument_or_option,
    emit,
    json_option,
    listing_text,
    pending_rekey_line,
)
from oai_pipeline.errors import ConfigurationError, NotFound, PipelineError, database_error_text
from oai_pipeline.harvesters.changes import change_warnings, queued_runs_warnings
from oai_pipeline.harvesters.fixtures import read_fixture_file
from oai_pipeline.harvesters.model import Harvester, describe_validation_error
from oai_pipeline.harvesters.plugins import missing_communities, release_target_records
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.identifier_prefix import jsonable_pending_rekey
from oai_pipeline.oai.base_url import another_base_url, pasted_arguments_note
from oai_pipeline.settings import holds_dagster_instance, load_settings
from oai_pipeline.state.store import StateStore

F = TypeVar("F", bound=Callable[..., Any])


def require_known_harvester(harvester_id: str | None, found: list[Any]) -> None:
    """A listing filtered by harvester that found nothing: a typo in the id is an unknown
    harvester (exit 2), as everywhere else, not an empty listing that reads "all is quiet"."""
    if harvester_id is None or found:
        return
    with open_store(only_reads=True) as store:
        if not store.knows_harvester(harvester_id):
            raise NotFound(f"unknown harvester {harvester_id!r}")


@contextmanager
def open_store(*, only_reads: bool = False) -> Iterator[StateStore]:
    """The state store of the current settings (OAI_PIPELINE_HOME, …); `only_reads` for a
    command that only reads: it then works on a home this user cannot write (`StateStore`)."""
    store = StateStore(load_settings().state_db_url, only_reads=only_reads)
    try:
        yield store
    finally:
        store.close()


def _harvester_options(command: F) -> F:
    """The flags `create` and `update` share, as operators know them from Invenio."""
    options = [
        click.option("--name", help="a human name"),
        click.option("--comment", help="a note for operators"),
        click.option("--base-url", help="the OAI-PMH endpoint, http(s)://…"),
        click.option("--metadata-prefix", help="e.g. oai_dc, oai_datacite, arXiv"),
        click.option("--setspec", help="harvest only this set"),
        click.option("--loader", help="reader spec, default oai-pmh"),
        click.option(
            "--transformer", "transformers", multiple=True, help="name{json5 options}; repeatable"
        ),
        click.option("--writer", "writers", multiple=True, help="name{json5 options}; repeatable"),
        click.option("--model", help="fills in the default transformer and writer, e.g. rdm"),
        click.option("--community", help="added to every writer's options"),
        click.option(
            "--harvest-manager", "harvest_managers", multiple=True, help="e-mail; repeatable"
        ),
        click.option(
            "--rate-limit-per-minute", type=int, help="at most this many requests a minute"
        ),
        click.option("--batch-size", type=int, help="records per writer transaction (500)"),
        click.option("--enabled/--disabled", default=None, help="harvested by schedules?"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


_MULTIPLE = ("transformers", "writers", "harvest_managers")
# The repeatable flags are named for one value each (`--writer`, not `--writers`).
_OPTION_OF_FIELD = {
    "transformers": "--transformer",
    "writers": "--writer",
    "harvest_managers": "--harvest-manager",
    "enabled": "--enabled/--disabled",
}


def _option_name(field: str) -> str:
    """What the user typed for the field an error names (`writers.0` -> `--writer`)."""
    name = field.split(".")[0]
    return _OPTION_OF_FIELD.get(name, f"--{name.replace('_', '-')}")


@contextmanager
def _errors_named_as_options(as_json: bool) -> Iterator[None]:
    """A harvester's validation error names the flags given, as `harvest`'s does: before,
    `create` without --base-url said `invalid base_url: Field required`."""
    try:
        yield
    except ValidationError as error:
        raise InvalidInput(
            describe_validation_error(error, _option_name), as_json=as_json
        ) from None


def _given(flags: dict[str, Any]) -> dict[str, Any]:
    """Only the fields whose flag was given (repeatable flags: given at least once)."""
    changes: dict[str, Any] = {}
    for name, value in flags.items():
        if name in _MULTIPLE:
            if value:
                changes[name] = list(value)
        elif value is not None:
            changes[name] = value
    return changes


def community_warnings(harvester: Harvester) -> list[str]:
    """The communities the harvester names that the target lacks, as warnings: not refused,
    since the operator may create them afterwards, but without a word every record of the
    next harvest failed with `missing_community`. A target that cannot be asked is a warning
    too: registering does not need it."""
    import sqlalchemy as sa

    try:
        missing = missing_communities(harvester, load_settings())
    except (PipelineError, OSError, sa.exc.SQLAlchemyError) as error:
        return [f"could not check the target's communities: {database_error_text(error)}"]
    return [
        f"the target has no community {slug!r}: every record of {harvester.id} sent to it will "
        f"fail (missing_community) until `oai-pipeline target communities create {slug}`"
        for slug in missing
    ]


def _registered_as(given_base_url: str | None) -> list[str]:
    """What registering changed of the base URL given, as a warning (pasted_arguments_note)."""
    note = pasted_arguments_note(given_base_url)
    return [note] if note else []


def _warn(warnings: list[str]) -> None:
    """On stderr, whatever the output: stdout holds the result (JSON with --json)."""
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


def disabled_warning(harvester: Harvester) -> str | None:
    """What a harvest the operator asks for by name says of a disabled harvester: it runs
    (they named it), but they may not know that no schedule or sensor harvests it."""
    if harvester.enabled:
        return None
    return (
        f"harvester {harvester.id} is disabled: schedules and sensors skip it "
        f"(`oai-pipeline harvesters update {harvester.id} --enabled` enables it)"
    )


def _describe(harvester: Harvester) -> str:
    lines = [f"{harvester.id}"]
    for field, value in harvester.shown().items():
        if field == "id":
            continue
        if isinstance(value, list):
            value = ", ".join(value) if value else "-"
        lines.append(f"  {field.replace('_', '-')}: {'-' if value in (None, '') else value}")
    return "\n".join(lines)


@click.group(name="harvesters", cls=FriendlyGroup)
def harvesters() -> None:
    """Register, change, list and remove harvesters (OAI-PMH endpoints to harvest)."""


@harvesters.command(name="create")
@click.argument("id_argument", metavar="[HARVESTER_ID]", required=False)
@click.argument("url_argument", metavar="[BASE_URL]", required=False)
@click.option("--id", "harvester_id", help="^[a-z0-9][a-z0-9_-]*$ (or HARVESTER_ID)")
@_harvester_options
@json_option
def create(
    id_argument: str | None,
    url_argument: str | None,
    harvester_id: str | None,
    model: str | None,
    community: str | None,
    as_json: bool,
    **flags: Any,
) -> None:
    """Register a new harvester: HARVESTER_ID (or --id) harvesting BASE_URL (or --base-url),
    named as every other command names it."""
    if harvester_id is not None and url_argument is None:  # `create --id ID BASE_URL`
        id_argument, url_argument = None, id_argument
    harvester_id = argument_or_option(id_argument, harvester_id, "--id", "ids", as_json=as_json)
    if harvester_id is None:
        raise InvalidInput(
            "give the harvester's id: `oai-pipeline harvesters create ID BASE_URL "
            "--metadata-prefix PREFIX` (or --id ID)",
            as_json=as_json,
        )
    flags["base_url"] = argument_or_option(
        url_argument, flags["base_url"], "--base-url", "base URLs", as_json=as_json
    )
    data = {"id": harvester_id, **_given(flags)}
    with _errors_named_as_options(as_json):
        harvester = Harvester.from_input(data, model=model, community=community)
    created_again: list[str] = []  # over the records it kept when deleted
    with open_store() as store:
        HarvesterRegistry(store).create(harvester, warnings=created_again)
    warnings = _registered_as(flags.get("base_url")) + community_warnings(harvester)
    warnings += created_again
    _warn(warnings)
    payload = {**harvester.shown(), "warnings": warnings}
    emit(payload, as_json=as_json, text=f"created {_describe(harvester)}")


@harvesters.command(name="update")
@click.argument("harvester_id")
@_harvester_options
@json_option
def update(harvester_id: str, model: str | None, community: str | None, as_json: bool, **flags):
    """Change the given fields of a harvester; the others stay as they are."""
    changes = _given(flags)
    if not changes and model is None and community is None:
        raise InvalidInput(
            "nothing to update: give the fields to change (see harvesters update --help)",
            as_json=as_json,
        )
    with open_store() as store, _errors_named_as_options(as_json):
        registry = HarvesterRegistry(store)
        before = registry.get(harvester_id)
        # a URL stored with OAI-PMH arguments before they were left out loses them now too
        given_url = changes.get("base_url") or before.base_url
        harvester = registry.update(harvester_id, model=model, community=community, **changes)
    warnings = _registered_as(given_url) + community_warnings(harvester)
    if harvester.base_url != before.base_url:
        warnings += queued_runs_warnings(before.id, _queued_runs)
    warnings += change_warnings(before, harvester)
    _warn(warnings)
    payload = {**harvester.shown(), "warnings": warnings}
    emit(payload, as_json=as_json, text=f"updated {_describe(harvester)}")


def _queued_runs(harvester_id: str) -> list[str]:
    """The harvester's Dagster runs queued or running (`queued_runs_warnings`)."""
    with _dagster_runs() as dagster_runs:
        return [] if dagster_runs is None else dagster_runs.waiting(harvester_id)


@harvesters.command(name="list")
@json_option
def list_(as_json: bool) -> None:
    """The registered harvesters: id, base URL, metadata prefix, set, name, and whether the
    schedules harvest it (`enabled` or `disabled`; last, so the columns before keep their place)."""
    with open_store(only_reads=True) as store:
        found = HarvesterRegistry(store).list()
    rows = [h.shown() for h in found]
    text = listing_text(
        (
            (
                row["id"],
                row["base_url"],
                row["metadata_prefix"],
                row["setspec"] or "-",
                row["name"],
                "enabled" if row["enabled"] else "disabled",
            )
            for row in rows
        ),
    )
    emit(rows, as_json=as_json, text=text, empty="no harvesters registered")


@harvesters.command(name="show")
@click.argument("harvester_id")
@json_option
def show(harvester_id: str, as_json: bool) -> None:
    """One harvester, with what the source's Identify said, if harvested before."""
    with open_store(only_reads=True) as store:
        harvester = HarvesterRegistry(store).get(harvester_id)
        identify = store.get_identify(harvester_id)
        pending = store.pending_rekey(harvester_id)
    payload = harvester.shown()
    payload["identify"] = None if identify is None else identify.__dict__.copy()
    payload["pending_rekey"] = jsonable_pending_rekey(pending)
    warning = None if identify is None else another_base_url(harvester.base_url, identify.base_url)
    payload["warnings"] = [warning] if warning else []
    text = _describe(harvester)
    if identify is not None:
        text += (
            f"\n  identify: {identify.repository_name}, granularity {identify.granularity}, "
            f"earliest {identify.earliest_datestamp}, deletedRecord {identify.deleted_record}"
        )
        if identify.admin_emails:
            text += f"\n  admin: {', '.join(identify.admin_emails)}"
    if pending is not None:
        text += f"\n  {pending_rekey_line(payload['pending_rekey'])}"
    if warning:
        text += f"\n  warning: {warning}"
    emit(payload, as_json=as_json, text=text)


@harvesters.command(name="delete")
@click.argument("harvester_id")
@click.option("--delete-records", is_flag=True, help="also delete its harvest records and runs")
def delete(harvester_id: str, delete_records: bool) -> None:
    """Unregister a harvester; its harvest records are kept unless --delete-records (then
    its records in the target become ordinary ones, which a later harvester of the source
    takes over instead of duplicating them)."""
    if not delete_records:
        with open_store() as store:
            HarvesterRegistry(store).delete(harvester_id)
        click.echo(f"deleted harvester {harvester_id} (harvest records kept)")
        return
    # Here, not at the top: a listing of this module must not load polars with them.
    from oai_pipeline.pipeline.retention import drop_partitions
    from oai_pipeline.pipeline.services import Services

    with Services(load_settings()) as services:
        registry = HarvesterRegistry(services.state)
        harvester = registry.get(harvester_id)
        # Not while a harvest writes for it (as prune): its rows would go from under it.
        with services.harvester_lock.hold(harvester_id, wait_seconds=0):
            released = release_target_records(harvester, services.settings)
            registry.delete(harvester_id, delete_records=True)
            # Its Parquet partitions too: no run of the state store names them any more,
            # so no prune would ever drop them.
            partitions = drop_partitions(services, harvester_id)
    click.echo(
        f"deleted harvester {harvester_id} (harvest records deleted, {released} target "
        f"records released, {partitions} partition keys dropped)"
    )


@harvesters.command(name="load")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@json_option
def load(file: Path, as_json: bool) -> None:
    """Create or update the harvesters of a fixture file (oai_harvesters.yaml)."""
    given_urls: dict[str, str] = {}
    try:
        entries = read_fixture_file(file, given_urls=given_urls)
    except ConfigurationError as error:  # the file is the user's input, as create's options are
        raise InvalidInput(str(error), as_json=as_json) from None
    changes: dict[str, list[str]] = {}
    with open_store() as store:
        results = HarvesterRegistry(store).upsert_many(
            entries, warnings=changes, queued_runs=_queued_runs
        )
    changed = {h.id: h for h in entries}
    payload = []
    for harvester_id, result in results:
        unchanged = result == "unchanged"
        # the file's URL is told each time until it is changed, even if stored so already
        warnings = _registered_as(given_urls.get(harvester_id))
        warnings += [] if unchanged else community_warnings(changed[harvester_id])
        warnings += changes.get(harvester_id, [])
        _warn(warnings)
        payload.append({"id": harvester_id, "result": result, "warnings": warnings})
    text = "\n".join(f"{harvester_id}: {result}" for harvester_id, result in results)
    emit(payload, as_json=as_json, text=text or f"{file} lists no harvesters")


@harvesters.command(name="rekey")
@click.argument("harvester_id")
@click.option("--from-prefix", "old", required=True, help="the identifiers' prefix until now")
@click.option("--to-prefix", "new", required=True, help="the prefix the source uses now")
@click.option("--dry-run", is_flag=True, help="say what would be rewritten; change nothing")
@click.option(
    "--supersede-runs",
    is_flag=True,
    help="mark unfinished harvest runs superseded instead of refusing (their token is stale)",
)
@json_option
def rekey(
    harvester_id: str, old: str, new: str, dry_run: bool, supersede_runs: bool, as_json: bool
) -> None:
    """Rewrite the harvester's OAI identifiers beginning with --from-prefix to begin with
    --to-prefix, in the state store and the target: a source that changed its identifier
    namespace keeps its target records. Run it before the first harvest after the change."""
    # Here, not at the top: a listing of this module must not load the pipeline with it.
    from oai_pipeline.identifier_prefix import RekeyRefused
    from oai_pipeline.pipeline.rekey import rekey as rekey_identifiers
    from oai_pipeline.pipeline.services import Services

    try:
        # The Dagster runs too: one queued has no harvest run yet (see defs/harvester_runs).
        with Services(load_settings()) as services, _dagster_runs() as dagster_runs:
            report = rekey_identifiers(
                services,
                harvester_id,
                old,
                new,
                dry_run=dry_run,
                supersede_runs=supersede_runs,
                orchestrator=dagster_runs,
            ).to_dict()
    except RekeyRefused as refused:
        raise CommandError(str(refused), kind="refused", exit_code=2, as_json=as_json) from None
    emit(report, as_json=as_json, text=_rekey_text(report))


@contextmanager
def _dagster_runs() -> Iterator[Any]:
    """The runs of the Dagster instance under DAGSTER_HOME (None without one). Dagster is
    loaded only when there is an instance to ask."""
    if not holds_dagster_instance():
        yield None
        return
    from oai_pipeline.defs.harvester_runs import dagster_runs_in_home

    with dagster_runs_in_home() as runs:
        yield runs


def _stale_windows_text(windows: list[str], shown: int = 10) -> str:
    """The Dagster windows whose Parquet a rekey leaves stale, and what refreshes them."""
    if not windows:
        return "no Dagster window's Parquet holds the old identifiers"
    more = f" and {len(windows) - shown} more" if len(windows) > shown else ""
    return (
        f"Dagster windows whose Parquet holds the old identifiers: {', '.join(windows[:shown])}"
        f"{more}; their steps after raw_oai_xml are refused until raw_oai_xml of them is "
        "materialised again (then the assets after it)"
    )


def _rekey_text(report: dict[str, Any]) -> str:
    verb = "would rewrite" if report["dry_run"] else "rewrote"
    lines = [
        f"harvester {report['harvester']}: {verb} {report['from_prefix']}… to "
        f"{report['to_prefix']}… in {report['state_records']} harvest records and "
        f"{report['target_records']} target records"
    ]
    lines += [f"  {example['from']} -> {example['to']}" for example in report["examples"]]
    if report["superseded_runs"]:
        runs = ", ".join(str(run) for run in report["superseded_runs"])
        what = "to supersede" if report["dry_run"] else "superseded"
        lines.append(f"harvest runs {what}: {runs}")
    lines.append(_stale_windows_text(report["stale_windows"]))
    if report["dry_run"]:
        lines.append("dry run: nothing was changed")
    return "\n".join(lines)
