"""How commands print: a table-ish text for people, JSON for machines, one line for mistakes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from pydantic import ValidationError

from oai_pipeline.errors import PipelineError
from oai_pipeline.harvesters.model import describe_validation_error


class InvalidInput(click.ClickException):
    """A ValidationError as one line naming the field; exit code 2, like click's usage errors."""

    exit_code = 2


@contextmanager
def one_line_errors() -> Iterator[None]:
    """User mistakes end the command with one `Error: …` line, never a traceback:
    ValidationError exits 2, PipelineError exits 1."""
    try:
        yield
    except ValidationError as error:
        raise InvalidInput(describe_validation_error(error)) from None
    except PipelineError as error:
        raise click.ClickException(str(error)) from None


class _OneLineErrors:
    def invoke(self, ctx: click.Context) -> Any:
        with one_line_errors():
            return super().invoke(ctx)  # type: ignore[misc]


class FriendlyCommand(_OneLineErrors, click.Command):
    """A command whose user mistakes are one line, also when it runs on its own."""


class FriendlyGroup(_OneLineErrors, click.Group):
    """A group whose subcommands' (and subgroups') user mistakes are one line."""

    group_class = type  # subgroups are FriendlyGroups too


def emit(payload: Any, *, as_json: bool, text: str | None = None) -> None:
    if as_json:
        click.echo(json.dumps(payload, indent=2, sort_keys=True, default=str))
    else:
        click.echo(text if text is not None else json.dumps(payload, indent=2, default=str))


def report_text(report: dict[str, Any]) -> str:
    lines = [
        f"harvester {report['harvester_id']}, harvest run {report['run_id']}",
        f"  harvested: {report['harvested']} (deleted at source: {report['deleted_at_source']})",
        f"  created:   {report['created']}",
        f"  updated:   {report['updated']}",
        f"  deleted:   {report['deleted']}",
        f"  unchanged: {report['unchanged']}",
        f"  errors:    {report['errors']}",
    ]
    if report.get("error_types"):
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(report["error_types"].items()))
        lines.append(f"  error types: {kinds}")
    if report.get("cap_reached"):
        lines.append("  the cap was reached; run again to harvest more")
    return "\n".join(lines)
