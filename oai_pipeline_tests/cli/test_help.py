"""Every flag says what it does, in the CLI's --help and in Dagster's launchpad alike."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator

import click
from click.testing import CliRunner

from oai_pipeline.cli import main
from oai_pipeline.defs.resources import HarvestOptions
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.settings import PROJECT_ROOT


def _commands(
    command: click.Command, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, click.Command]]:
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):  # the root's are loaded only when asked
            sub = command.get_command(context, name)
            assert sub is not None, name
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


def test_the_readme_command_table_names_every_command_and_option() -> None:
    """Before, it left out demo, serve's --host, deposit's --publish, edit's --set, delete's
    --purge and --note, a community's --parent and every flag of harvesters create."""
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("| command | what it does |")
    table = readme[start : readme.index("\n\n", start)]
    first_cells = [row.split(" | ")[0] for row in table.splitlines()[2:]]
    options = {
        option
        for _, command in _commands(main)
        for param in command.params
        if isinstance(param, click.Option)
        for option in (*param.opts, *param.secondary_opts)
    } - {"--help", "--json"}  # --json: the paragraph above the table says which have it

    for name, _ in _commands(main):
        group, leaf = name.split(" ")[0], name.split(" ")[-1]
        assert any(
            f"`{group}" in cell and re.search(rf"\b{leaf}\b", cell) for cell in first_cells
        ), name
    assert set(re.findall(r"--[a-z][a-z0-9-]*", table)) - {"--json"} == options


def test_every_flag_the_readme_gives_a_command_is_one_of_its_options() -> None:
    """The table is held to the CLI above; this holds the prose and examples too:
    `oai-pipeline harvest … --flag`, `harvesters rekey … --flag` and the like, wherever the
    README names a command (in backticks or on a command line) before its flags."""
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8").replace("\\\n", " ")
    commands = dict(_commands(main))
    spans = re.findall(r"`([^`\n]+)`", readme) + re.findall(
        r"^\s*(?:\./run\.sh cli|oai-pipeline) .*$", readme, re.MULTILINE
    )
    unknown = []
    for span in spans:
        words = re.sub(r"^.*?(?:\./run\.sh cli|oai-pipeline)\s+", "", span).split()
        # the longest command the span begins with (`target communities create`, `status`)
        name = next(
            (" ".join(words[:n]) for n in (3, 2, 1) if " ".join(words[:n]) in commands), None
        )
        if name is None:
            continue
        options = {
            option
            for param in commands[name].params
            if isinstance(param, click.Option)
            for option in (*param.opts, *param.secondary_opts)
        }
        flags = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", " ".join(words)))
        unknown += [f"{name} {flag}" for flag in sorted(flags - options - {"--help"})]

    assert unknown == []


def test_the_commands_without_json_are_those_the_readme_names() -> None:
    """The README: every listing and report has --json, all but these, which print one line."""
    without = {
        name
        for name, command in _commands(main)
        if not any(param.name == "as_json" for param in command.params)
    }
    assert without == {
        "harvesters delete",
        *(f"target {action}" for action in ("deposit", "edit", "publish", "delete")),
        "target hard-delete",
        "target restore",
        "target communities create",
        "sample-endpoint serve",
    }


def test_run_sh_without_a_command_prints_its_usage_and_no_code() -> None:
    """Before, `./run.sh` printed the line after its usage too: `set -euo pipefail`."""
    script = PROJECT_ROOT / "run.sh"
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30)

    assert result.returncode == 2
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith("#") for line in lines), result.stdout
    commands = re.findall(r"^  (\w+)\)", script.read_text(encoding="utf-8"), re.MULTILINE)
    assert commands and all(f"./run.sh {name}" in result.stdout for name in commands)
