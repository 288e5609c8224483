"""Every flag says what it does, in the CLI's --help and in Dagster's launchpad alike."""

from __future__ import annotations

from collections.abc import Iterator

import click
from click.testing import CliRunner

from oai_pipeline.cli import main
from oai_pipeline.defs.resources import HarvestOptions
from oai_pipeline.pipeline.options import RunOptions


def _commands(
    command: click.Command, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, click.Command]]:
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), command


def test_every_option_of_every_command_has_help() -> None:
    silent = [
        f"{name} {param.opts[0]}"
        for name, command in _commands(main)
        for param in command.params
        if isinstance(param, click.Option) and not param.help
    ]
    assert silent == []


def test_launchpad_describes_run_options_as_the_cli_does() -> None:
    for name, field in HarvestOptions.model_fields.items():
        assert field.description, name
        assert field.description == RunOptions.describe(name)
    help_text = CliRunner().invoke(main, ["harvest", "--help"], terminal_width=1000).output
    assert RunOptions.describe("retry_failed") in help_text
