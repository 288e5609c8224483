"""The command line imports only what the command given uses: before, every command (even
`--help`) first imported SQLAlchemy, polars, httpx, sickle and the whole pipeline, about a
second before it did anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import oai_pipeline.cli

# What no command's start needs: Dagster, the data frames, the HTTP client and OAI-PMH
# harvesting, XML, the database toolkit, and the layers that run a harvest.
HEAVY = (
    "dagster",
    "polars",
    "httpx",
    "sickle",
    "lxml",
    "sqlalchemy",
    "yaml",
    "oai_pipeline.pipeline",
    "oai_pipeline.transform",
    "oai_pipeline.oai.client",
    "oai_pipeline.state.store",
    "oai_pipeline.harvesters.model",
    "oai_pipeline.sample_endpoint",
    "oai_pipeline.targets",
)

# Runs `oai-pipeline ARGS` in a fresh interpreter, then prints what it imported and said.
_RUN = """
import contextlib, io, json, sys
from oai_pipeline.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main(sys.argv[1:], prog_name="oai-pipeline")
    except SystemExit as stop:
        code = stop.code
print(json.dumps({"exit_code": code, "output": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def _run(args: list[str], home: Path) -> dict:
    env = {**os.environ, "OAI_PIPELINE_HOME": str(home), "COLUMNS": "200"}
    result = subprocess.run(
        [sys.executable, "-c", _RUN, *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == n or m.startswith(f"{n}.") for n in names)]


def test_help_imports_no_command(tmp_path: Path) -> None:
    run = _run(["--help"], tmp_path)

    assert run["exit_code"] == 0
    assert _loaded(run["modules"], HEAVY) == []
    assert [m for m in run["modules"] if m.startswith("oai_pipeline.cli.")] == [
        "oai_pipeline.cli.output"
    ]


def test_help_lists_every_command_with_its_summary(tmp_path: Path) -> None:
    lines = _run(["--help"], tmp_path)["output"].split("Commands:\n")[1].splitlines()

    listed = {line.split()[0]: line.split(maxsplit=1)[1] for line in lines}
    assert sorted(listed) == sorted(oai_pipeline.cli.COMMANDS)
    for name, shown in listed.items():  # shortened to the terminal's width
        assert oai_pipeline.cli.COMMANDS[name].summary.startswith(shown.removesuffix("...")), name


@pytest.mark.parametrize(
    "args, needed",
    [
        (["harvesters", "list", "--json"], ("sqlalchemy", "oai_pipeline.harvesters.model")),
        (["status", "--json"], ("sqlalchemy", "oai_pipeline.state.store")),
        (["records", "list", "--json"], ("sqlalchemy", "oai_pipeline.state.store")),
    ],
)
def test_a_listing_imports_what_it_uses_only(
    tmp_path: Path, args: list[str], needed: tuple[str, ...]
) -> None:
    """The database toolkit and the store, not Dagster, polars, sickle, lxml or the
    transform layer (nor the command's neighbours)."""
    run = _run(args, tmp_path)

    assert set(_loaded(run["modules"], needed)) >= set(needed)
    unused = ("dagster", "polars", "sickle", "lxml", "oai_pipeline.transform.oai_import")
    assert _loaded(run["modules"], unused) == []
    commands = {m for m in run["modules"] if m.startswith("oai_pipeline.cli.")}
    assert commands <= {"oai_pipeline.cli.output", f"oai_pipeline.cli.{args[0]}"} | (
        {"oai_pipeline.cli.harvesters"} if args[0] in ("status", "records") else set()
    )


def test_every_command_module_is_in_the_mapping() -> None:
    """A command module left out of COMMANDS would never be reachable."""
    package = Path(oai_pipeline.cli.__file__).parent
    helpers = {"__init__", "output", "submit"}  # shared by commands, no command of their own
    modules = {path.stem for path in package.glob("*.py")} - helpers
    targets = {lazy.target.split(":")[0] for lazy in oai_pipeline.cli.COMMANDS.values()}

    assert targets == {f"oai_pipeline.cli.{name}" for name in modules}


@pytest.mark.parametrize("name", sorted(oai_pipeline.cli.COMMANDS))
def test_the_summary_is_the_commands_own_short_help(name: str) -> None:
    main = oai_pipeline.cli.main
    command = main.load(name)
    stand_in = click.Command(name, help=oai_pipeline.cli.COMMANDS[name].summary)

    assert command.name == name
    for limit in (20, 45, 70, 200, 10_000):
        assert stand_in.get_short_help_str(limit) == command.get_short_help_str(limit)


@pytest.mark.parametrize("width", [50, 80, 200])
def test_help_is_the_same_once_every_command_is_loaded(width: int) -> None:
    """Listed from the summaries or from the commands themselves, `--help` reads the same."""
    lazy = oai_pipeline.cli.LazyGroup(
        "oai-pipeline", help=oai_pipeline.cli.main.help, lazy_commands=oai_pipeline.cli.COMMANDS
    )
    eager = click.Group(
        "oai-pipeline",
        help=oai_pipeline.cli.main.help,
        commands=[lazy.load(name) for name in oai_pipeline.cli.COMMANDS],
    )

    lazy_help = CliRunner().invoke(lazy, ["--help"], terminal_width=width).output
    assert lazy_help == CliRunner().invoke(eager, ["--help"], terminal_width=width).output
    assert lazy.commands == {}  # listed without loading


def test_a_mistyped_command_is_matched_against_every_command() -> None:
    """Before the lazy group's own resolve_command, click suggested from the commands loaded
    so far (none), and `oai-pipeline recor` lost its "Did you mean 'records'?"."""
    result = CliRunner().invoke(oai_pipeline.cli.main, ["recor"])

    assert result.exit_code == 2
    assert "No such command 'recor'. Did you mean 'records'?" in result.output
