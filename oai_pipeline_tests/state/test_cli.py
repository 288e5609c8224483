"""`oai-pipeline records …` and `oai-pipeline status` through click's CliRunner."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from oai_pipeline.cli.records import records
from oai_pipeline.cli.status import status
from oai_pipeline.errors import RecordError
from oai_pipeline.oai.types import HarvestedRecord, SweepCheckpoint
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.runner import run_harvest
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings, load_settings
from oai_pipeline.state.schema import CATCH_UP_COUNTERS
from oai_pipeline.state.store import StateStore
from oai_pipeline.sync.rules import Action
from oai_pipeline.targets.base import WriteOutcome
from oai_pipeline.transform.base import TransformItem
from oai_pipeline_tests.oai.fake_source import FakeRecord, FakeSource
from oai_pipeline_tests.support import EVERYTHING, harvest_fake_source, oai_dc


def run(command, *args: str, ok: bool = True):
    result = CliRunner().invoke(command, list(args))
    if ok:
        assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def filled() -> dict[str, int]:
    """Two harvesters' records and runs in the state store of the current settings."""
    store = StateStore(load_settings().state_db_url)
    try:
        first = store.create_run(
            "zenodo",
            window_from="2024-01-01",
            window_until="2024-01-31",
            scale="small",
            max_records=100,
            options={},
        )
        store.save_checkpoint(
            first,
            SweepCheckpoint(
                "2024-01-01", "2024-01-31", None, "oai_dc", "tok-1", 1, 2, "2026-05-01T10:00:00Z"
            ),
        )
        store.stage(
            first,
            "zenodo",
            [
                HarvestedRecord("oai:zenodo.org:1", "2024-01-02", False, [], b"<record>1</record>"),
                HarvestedRecord("oai:zenodo.org:2", "2024-01-03", False, [], b"<record>2</record>"),
                HarvestedRecord("oai:zenodo.org:3", "2024-01-04", True),
            ],
        )
        store.update_counters(first, pages_read=1, discovered=3)
        store.save_transformed(
            "zenodo",
            [
                TransformItem("oai:zenodo.org:1", "2024-01-02", [], b"<r/>", data={"title": "One"}),
                TransformItem(
                    "oai:zenodo.org:2",
                    "2024-01-03",
                    [],
                    b"<r/>",
                    error=RecordError(type="transform", message="No title", location="titles"),
                ),
            ],
        )
        store.claim(first)
        store.save_write_outcomes(
            "zenodo",
            [
                WriteOutcome("oai:zenodo.org:1", Action.CREATE, "rec-1", 1),
                WriteOutcome(
                    "oai:zenodo.org:2",
                    Action.ERROR,
                    None,
                    None,
                    RecordError(type="transform", message="No title", location="titles"),
                ),
            ],
            {"oai:zenodo.org:1": "2024-01-02", "oai:zenodo.org:2": "2024-01-03"},
        )
        store.set_record_status(
            first,
            {
                "oai:zenodo.org:1": "imported",
                "oai:zenodo.org:2": "failed",
                "oai:zenodo.org:3": "gone",
            },
            {"oai:zenodo.org:2": RecordError(type="transform", message="No title")},
        )
        store.finish_run(first, "succeeded")
        second = store.create_run(
            "arxiv", window_from=None, window_until=None, scale=None, max_records=0, options={}
        )
        store.stage(second, "arxiv", [HarvestedRecord("oai:arXiv.org:1", "2015-01-16", False)])
        return {"zenodo": first, "arxiv": second}
    finally:
        store.close()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], ["oai:arXiv.org:1", "oai:zenodo.org:1", "oai:zenodo.org:2", "oai:zenodo.org:3"]),
        (["--harvester", "zenodo"], ["oai:zenodo.org:1", "oai:zenodo.org:2", "oai:zenodo.org:3"]),
        (["--deleted"], ["oai:zenodo.org:3"]),
        (["--live", "--harvester", "zenodo"], ["oai:zenodo.org:1", "oai:zenodo.org:2"]),
        (["--error-type", "transform"], ["oai:zenodo.org:2"]),
        (["--error-type", "writer"], []),
        (["--message", "NO TITLE"], ["oai:zenodo.org:2"]),
        (["--location", "title"], ["oai:zenodo.org:2"]),
        (["--location", "dates"], []),
        (["--limit", "1"], ["oai:arXiv.org:1"]),
    ],
)
def test_records_list_filters(filled, args, expected):
    found = json.loads(run(records, "list", *args, "--json").output)
    assert [r["identifier"] for r in found] == expected


def test_records_list_text_and_show(filled):
    text = run(records, "list", "--harvester", "zenodo").output
    assert "oai:zenodo.org:2" in text and "transform transform: No title at titles" in text
    shown = json.loads(run(records, "show", "oai:zenodo.org:1", "--json").output)
    assert shown["data"] == {"title": "One"} and shown["local_id"] == "rec-1"
    assert shown["xml"] == "<record>1</record>"
    text = run(records, "show", "oai:zenodo.org:2", "--harvester", "zenodo").output
    assert "error (transform) transform: No title at titles" in text
    missing = run(records, "show", "oai:nowhere:1", ok=False)
    assert missing.exit_code == 2
    assert missing.output.strip() == "Error: no harvest record 'oai:nowhere:1'"
    assert run(records, "list", "--limit", "0", ok=False).exit_code == 2


def test_status_of_a_run_in_json(filled, monkeypatch):
    monkeypatch.setattr(
        "oai_pipeline.pipeline.status.target_stats",
        lambda url, harvester_id, **_options: {"records": 1},
    )
    report = json.loads(run(status, "--batch-id", str(filled["zenodo"]), "--json").output)
    assert report["run"]["status"] == "succeeded" and report["run"]["scale"] == "small"
    assert report["counters"] == {
        "pages_read": 1,
        "discovered": 3,
        "staged": 3,
        "duplicates_skipped": 0,
        "existing_skipped": 0,
        "cap_reached": False,
        **dict.fromkeys(CATCH_UP_COUNTERS, 0),  # not resumed: no catch-up list
    }
    assert report["records"]["imported"] == 1 and report["records"]["failed"] == 1
    assert report["records"]["gone"] == 1 and report["stale_running"] == 0
    assert report["recent_failures"][0]["identifier"] == "oai:zenodo.org:2"
    assert report["discovery_state"]["resumption_token"] == "tok-1"
    assert report["discovery_state"]["complete"] is True  # succeeded: nothing to resume
    assert report["harvest_records"]["deleted"] == 1
    assert report["target"] == {"records": 1}
    by_harvester = json.loads(run(status, "--harvester", "arxiv", "--json").output)
    assert by_harvester["run"]["id"] == filled["arxiv"]
    assert by_harvester["records"]["pending"] == 1
    text = run(status, "--harvester", "zenodo").output
    assert f"harvest run {filled['zenodo']} of zenodo: succeeded" in text
    assert "failed oai:zenodo.org:2: transform: No title" in text
    # a finished sweep is complete: its last checkpoint (a token) is no state to resume from
    assert "discovery: complete, 1 pages" in text and "tok-1" not in text
    unfinished = run(status, "--harvester", "arxiv").output
    assert "discovery: complete" not in unfinished


def test_status_text_shows_the_runs_last_datestamp(filled):
    """The run's newest datestamp (where `discovery_state.last_datestamp` says it in JSON)
    is in the text's discovery line too, finished or not; before, only --json had it."""
    done = run(status, "--harvester", "zenodo").output
    assert "discovery: complete, 1 pages, responseDate 2026-05-01T10:00:00Z, " in done
    assert "last datestamp 2024-01-04" in done
    with StateStore(load_settings().state_db_url) as store:
        store.save_checkpoint(
            filled["arxiv"],
            SweepCheckpoint(None, None, None, "oai_dc", "tok-9", 1, 0, "2026-05-02T10:00:00Z"),
        )
    running = run(status, "--harvester", "arxiv").output
    assert "discovery: pages 1, cursor 0, token tok-9, " in running
    assert "last datestamp 2015-01-16" in running


def test_status_list_recent(filled):
    runs = json.loads(run(status, "--list-recent", "--json").output)
    assert [r["id"] for r in runs] == [filled["arxiv"], filled["zenodo"]]
    assert runs[1]["checkpoint"]["resumption_token"] == "tok-1"
    limited = json.loads(run(status, "--list-recent", "--limit", "1", "--json").output)
    assert [r["id"] for r in limited] == [filled["arxiv"]]
    mine = json.loads(run(status, "--list-recent", "--harvester", "zenodo", "--json").output)
    assert [r["id"] for r in mine] == [filled["zenodo"]]
    assert "zenodo\tsucceeded" in run(status, "--list-recent").output


def test_status_mistakes_are_one_line(filled):
    for args, message, exit_code in [
        (["--batch-id", "999"], "Error: no harvest run 999", 2),
        (["--harvester", "nobody"], "Error: unknown harvester 'nobody'", 2),
        (
            ["--batch-id", "1", "--harvester", "zenodo"],
            "Error: give --batch-id or a harvester, not both",
            2,  # a usage mistake
        ),
    ]:
        result = run(status, *args, ok=False)
        assert result.exit_code == exit_code
        assert result.output.strip() == message


def test_status_without_any_run():
    result = run(status, ok=False)
    assert result.output.strip() == "Error: no harvest runs yet"


def test_status_reads_the_embedded_targets_stats(filled):
    """The target's counts come from the embedded repository of the same settings."""
    report = json.loads(run(status, "--harvester", "zenodo", "--json").output)
    assert report["target"] == {"records": 0, "source_identifiers": 0}


def test_status_of_a_harvest_of_one_page_and_an_error_with_a_line_break(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list of one page: its checkpoint was saved before that page came, so `status` said
    `responseDate None`; the run keeps the page's. A line break in a failed record's
    identifier or error split its `failed` line in two."""
    records = [
        FakeRecord("oai:fake.test:1", "2024-01-02T00:00:00Z", raw_metadata=oai_dc("One")),
        FakeRecord("oai:fake.test:\nsecond", "2024-01-03T00:00:00Z", raw_metadata="<nodc/>"),
    ]
    harvest_fake_source(settings, monkeypatch, FakeSource(records, page_size=5))
    with Services(settings) as services:
        run_harvest(services, EVERYTHING, RunOptions(), progress=lambda _line: None)

    text = run(status, "--harvester", "sample").output

    assert "discovery: complete, 1 pages, responseDate 2026-01-01T00:00:00Z" in text
    (failed,) = [line for line in text.splitlines() if line.startswith("  failed ")]
    assert failed.startswith("  failed oai:fake.test: second: unknown_root: ")
