"""`oai-pipeline target …` through click's CliRunner on the `target` group itself."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from oai_pipeline.cli.target import target


@pytest.fixture
def run(target_url: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OAI_PIPELINE_TARGET_DB_URL", target_url)
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True) -> Result:
        result = runner.invoke(target, list(args))
        if ok:
            assert result.exit_code == 0, result.output
        return result

    return invoke


@pytest.fixture
def record_file(tmp_path: Path) -> Path:
    path = tmp_path / "record.json"
    record = {"metadata": {"title": "Deposited"}, "pids": {"doi": {"identifier": "10.1/cli"}}}
    path.write_text(json.dumps(record))
    return path


def test_a_users_record_from_deposit_to_hard_delete(run, record_file: Path) -> None:
    record_id = run("deposit", str(record_file)).output.strip()
    assert json.loads(run("show", record_id, "--json").output)["state"] == "draft"
    run("publish", record_id)
    run("edit", record_id, "--set", "metadata.title=Edited", "--set", 'metadata.version=["v", 2]')
    shown = json.loads(run("show", record_id, "--json").output)
    assert shown["draft"]["metadata"] == {"title": "Edited", "version": ["v", 2]}
    assert shown["doi"] == "10.1/cli"
    run("publish", record_id)
    assert (
        "deleted and marked for purge" in run("delete", record_id, "--purge", "--note", "x").output
    )
    shown = json.loads(run("show", record_id, "--json").output)
    assert (shown["state"], shown["purge"], shown["tombstone_note"]) == ("tombstone", True, "x")
    assert "marked for purge" in run("show", record_id).output
    listed = json.loads(run("list", "--state", "tombstone", "--json").output)
    assert [r["id"] for r in listed] == [record_id]
    run("restore", record_id)
    run("hard-delete", record_id)
    assert json.loads(run("list", "--state", "deleted", "--json").output)[0]["id"] == record_id
    run("restore", record_id)
    shown = json.loads(run("show", record_id, "--json").output)
    assert (shown["state"], shown["data"]["metadata"]["title"]) == ("live", "Edited")


def test_deposit_published_with_communities(run, tmp_path: Path) -> None:
    run("communities", "create", "cesnet")
    run("communities", "create", "cesnet-data", "--parent", "cesnet")
    rows = json.loads(run("communities", "list", "--json").output)
    by_slug = {row["slug"]: row for row in rows}
    assert by_slug["cesnet-data"]["parent"] == by_slug["cesnet"]["id"]
    assert "(in cesnet)" in run("communities", "list").output
    path = tmp_path / "r.json"
    path.write_text(
        json.dumps({"metadata": {}, "parent": {"communities": {"ids": ["cesnet-data"]}}})
    )
    record_id = run("deposit", str(path), "--publish").output.strip()
    shown = json.loads(run("show", record_id, "--json").output)
    assert (shown["state"], shown["communities"]) == ("live", ["cesnet-data", "cesnet"])
    assert record_id in run("list").output
    # a deposit is no harvester's record; a harvester the state store does not know is a typo
    assert [r["source_harvester"] for r in json.loads(run("list", "--json").output)] == [None]
    unknown = run("list", "--harvester", "h", "--json", ok=False)
    assert unknown.exit_code == 2 and "unknown harvester 'h'" in unknown.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("show", "nope"), "Error: no record 'nope' in the target repository"),
        (("edit", "nope", "--set", "metadata.title=x"), "Error: no record 'nope'"),
        (("publish", "nope"), "Error: no record 'nope'"),
        (("delete", "nope"), "Error: no record 'nope'"),
        (("hard-delete", "nope"), "Error: no record 'nope'"),
        (("restore", "nope"), "Error: no record 'nope'"),
        (("communities", "create", "x", "--parent", "nope"), "Error: parent community 'nope'"),
    ],
)
def test_mistakes_are_one_line_errors(run, args: tuple[str, ...], message: str) -> None:
    """A record or community named that does not exist exits 2, as other argument mistakes
    (it was 1)."""
    result = run(*args, ok=False)
    assert result.exit_code == 2
    assert result.output.startswith(message)
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("edit", "nope", "--set", "title"), "Error: --set 'title': expected FIELD=VALUE"),
        (("deposit", "/no/such/file.json"), "Error: cannot read /no/such/file.json"),
    ],
)
def test_malformed_input_is_a_one_line_validation_error(
    run, args: tuple[str, ...], message: str
) -> None:
    """Wrong in itself, whatever the target holds: exit 2, as for a bad option value."""
    result = run(*args, ok=False)
    assert result.exit_code == 2
    assert result.output.startswith(message)
    assert len(result.output.strip().splitlines()) == 1


def test_bad_json_is_a_one_line_error(run, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    result = run("deposit", str(path), ok=False)
    assert result.exit_code == 2
    assert result.output.startswith(f"Error: {path} is not valid JSON")
    path.write_text("[1, 2]")
    result = run("deposit", str(path), ok=False)
    assert (result.exit_code, result.output) == (2, "Error: a record must be a JSON object\n")


def test_an_unknown_state_is_refused_by_click(run) -> None:
    result = run("list", "--state", "gone", ok=False)
    assert result.exit_code == 2
    assert "Invalid value for '--state'" in result.output


def test_list_shows_a_page_of_the_oldest_records(run, tmp_path: Path) -> None:
    """A target of a million records is not listed whole: `--limit` (default 50)."""
    path = tmp_path / "no-doi.json"
    path.write_text(json.dumps({"metadata": {"title": "Deposited"}}))
    deposited = [run("deposit", str(path)).output.strip() for _ in range(3)]
    listed = json.loads(run("list", "--limit", "2", "--json").output)
    assert [r["id"] for r in listed] == deposited[:2]
    assert len(run("list").output.splitlines()) == 3
    assert run("list", "--limit", "0", ok=False).exit_code == 2


def test_show_json_times_are_utc_with_their_zone(run, record_file: Path) -> None:
    """A reader comparing `created` with the harvest records' times (`records show`, `…Z`)
    needs the zone: SQLite gives the stored times back without it."""
    record_id = run("deposit", str(record_file)).output.strip()
    shown = json.loads(run("show", record_id, "--json").output)
    for name in ("created", "updated"):
        assert shown[name].endswith("Z"), shown[name]
        moment = datetime.fromisoformat(shown[name])
        assert moment.utcoffset() == timedelta(0)
