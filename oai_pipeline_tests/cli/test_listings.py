"""Listings for people and for `cut -f`: one row a line, columns separated by tabs."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.settings import Settings
from oai_pipeline.state.store import StateStore
from oai_pipeline_tests.cli.conftest import create_args


def run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result


def _deposit(tmp_path: Path, title: str) -> str:
    path = tmp_path / "record.json"
    path.write_text(json.dumps({"metadata": {"title": title}}), encoding="utf-8")
    return run("target", "deposit", str(path), "--publish").stdout.strip()


def test_target_list_separates_columns_with_tabs(tmp_path: Path) -> None:
    """Before, two spaces (and the state padded): `cut -f` read the whole line as one column,
    unlike `harvesters list`, `records list` and `status --list-recent`."""
    record_id = _deposit(tmp_path, "A title with  two spaces")

    lines = run("target", "list").stdout.splitlines()

    assert lines == [f"{record_id}\tlive\tr1\t-\tA title with  two spaces"]


def test_target_communities_list_separates_columns_with_tabs() -> None:
    parent = run("target", "communities", "create", "cesnet").stdout.strip()
    child = run("target", "communities", "create", "data", "--parent", "cesnet").stdout.strip()

    lines = run("target", "communities", "list").stdout.splitlines()

    assert lines == [f"cesnet\t{parent}", f"data\t{child}\t(in cesnet)"]


def test_a_line_break_or_tab_in_a_value_keeps_the_row_on_one_line(tmp_path: Path) -> None:
    """Before, a title or name holding one split its row in two or shifted its columns."""
    record_id = _deposit(tmp_path, "First line\nsecond\tline")
    run(*create_args("h", "http://example.org/oai"), "--name", "Two\r\nlines")

    assert run("target", "list").stdout == f"{record_id}\tlive\tr1\t-\tFirst line second line\n"
    harvester = "h\thttp://example.org/oai\toai_datacite\t-\tTwo lines\tenabled\n"
    assert run("harvesters", "list").stdout == harvester
    shown = json.loads(run("target", "list", "--json").stdout)  # JSON keeps the value as it is
    assert shown[0]["title"] == "First line\nsecond\tline"


def test_status_each_harvester_shows_every_harvesters_latest_run(settings: Settings) -> None:
    """An aggregator of hundreds of harvesters asks which ones failed: `--list-recent` shows
    the last runs of all, a handful of harvesters after one hourly tick."""
    run(*create_args("a", "http://a.example.org/oai"))
    run(*create_args("b", "http://b.example.org/oai"), "--disabled")
    run(*create_args("c", "http://c.example.org/oai"))
    with StateStore(settings.state_db_url) as store:
        for harvester_id, status, error in (
            ("a", "succeeded", None),
            ("b", "succeeded", None),
            ("a", "failed", "OAIError: the source\nfell over"),
        ):
            run_id = store.create_run(
                harvester_id,
                window_from="2024-01-01",
                window_until=None,
                scale=None,
                max_records=0,
                options={},
            )
            store.finish_run(run_id, status, error=error)  # type: ignore[arg-type]

    lines = [line.split("\t") for line in run("status", "--each-harvester").stdout.splitlines()]
    shown = json.loads(run("status", "--each-harvester", "--json").stdout)

    assert [line[:5] for line in lines] == [
        ["a", "enabled", "failed", "run 3", "2024-01-01 .. …"],
        ["b", "disabled", "succeeded", "run 2", "2024-01-01 .. …"],
        ["c", "enabled", "never harvested"],
    ]
    assert lines[0][6] == "OAIError: the source fell over"  # on its line
    assert [(row["harvester_id"], row["run"] and row["run"]["id"]) for row in shown] == [
        ("a", 3),
        ("b", 2),
        ("c", None),
    ]
    refused = CliRunner().invoke(main, ["status", "--each-harvester", "--harvester", "a"])
    assert refused.exit_code == 2
    assert "--each-harvester shows every harvester" in refused.output
