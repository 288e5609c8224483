"""`oai-pipeline …`: the operator's command line. Every listing has `--json`.

Each command's module is imported only when that command runs (or its own `--help` is
asked): importing them all took about a second (SQLAlchemy, polars, httpx, sickle, the
pipeline) before `--help` or `status` did anything. `COMMANDS` says where each one is."""

from __future__ import annotations

import importlib
import warnings
from typing import Any, NamedTuple

import click

from oai_pipeline.cli.output import FriendlyGroup
from oai_pipeline.errors import describe_validation_error

# Dagster's beta notices (backfill_policy, pools) are for developers, not operators.
warnings.filterwarnings("ignore", message=".*currently in (beta|preview).*")


class LazyCommand(NamedTuple):
    """Where a command is defined, and the first sentence of its help (what `--help` lists
    without importing it; a test checks it is the command's own)."""

    target: str  # "module:attribute"
    summary: str


COMMANDS: dict[str, LazyCommand] = {
    "demo": LazyCommand(
        "oai_pipeline.cli.demo:demo",
        "Harvest the shipped sample endpoint into the embedded target and print what happened.",
    ),
    "harvest": LazyCommand(
        "oai_pipeline.cli.harvest:harvest",
        "Harvest HARVESTER_ID (all records, a date range, or the OAI_IDENTIFIERS given).",
    ),
    "harvesters": LazyCommand(
        "oai_pipeline.cli.harvesters:harvesters",
        "Register, change, list and remove harvesters (OAI-PMH endpoints to harvest).",
    ),
    "prune": LazyCommand(
        "oai_pipeline.cli.prune:prune",
        "Drop now, of HARVESTER_IDS (default: every registered harvester, and every deleted one "
        "whose harvest records were kept), the per-record statuses and Parquet partitions of "
        "runs that succeeded more than --keep-days ago (their counts stay); the latest success "
        "and runs that failed or still run keep theirs.",
    ),
    "reconcile": LazyCommand(
        "oai_pipeline.cli.reconcile:reconcile",
        "List every identifier the source still has; delete harvested records that vanished.",
    ),
    "records": LazyCommand(
        "oai_pipeline.cli.records:records",
        "Harvest records: what each source said, what was written, and what went wrong.",
    ),
    "sample-endpoint": LazyCommand(
        "oai_pipeline.cli.sample_endpoint:sample_endpoint",
        "The sample OAI-PMH endpoint: a real HTTP source for the demo, tests and benchmarks.",
    ),
    "status": LazyCommand(
        "oai_pipeline.cli.status:status",
        "Status of a harvest run (counters, per-record counts, failures, discovery state).",
    ),
    "target": LazyCommand(
        "oai_pipeline.cli.target:target",
        "Act as a user of the embedded target repository (deposit, edit, delete, …).",
    ),
}


class LazyGroup(FriendlyGroup):
    """A group whose subcommands are imported on first use (as in click's documentation,
    "Lazily Loading Subcommands"); its own `--help` lists them from their summaries."""

    def __init__(self, *args: Any, lazy_commands: dict[str, LazyCommand], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = lazy_commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands and cmd_name not in self.commands:
            self.add_command(self.load(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def load(self, cmd_name: str) -> click.Command:
        module_name, attribute = self.lazy_commands[cmd_name].target.split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module_name}:{attribute} is not a click command")
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click.Group's, but a typo is matched against every command for its "Did you
        mean …?", not only against those loaded (none, at that point)."""
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as error:
            raise click.exceptions.NoSuchCommand(
                error.command_name, possibilities=self.list_commands(ctx), ctx=ctx
            ) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click.Group's, but a command not imported yet is listed from its summary."""
        listed = {
            name: self.commands.get(name)
            or click.Command(name, help=self.lazy_commands[name].summary)
            for name in self.list_commands(ctx)
        }
        click.Group(self.name, commands=listed).format_commands(ctx, formatter)


# Kept for callers of this contract; the one formatter lives with the errors.
format_validation_error = describe_validation_error


@click.group(cls=LazyGroup, lazy_commands=COMMANDS)
@click.version_option(package_name="oai-pipeline")
def main() -> None:
    """Harvest OAI-PMH repositories into a target repository and keep it in sync."""
