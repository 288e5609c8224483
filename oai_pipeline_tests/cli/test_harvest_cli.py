"""`oai-pipeline harvest` in this process, then status and records, as an operator uses them."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import datetime

import httpx
import pytest
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.cli.output import report_text
from oai_pipeline.pipeline import discover as discover_module
from oai_pipeline.pipeline import reconcile as reconcile_module
from oai_pipeline.pipeline.frames import STAGE_ASSETS
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.faults import Faults
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline.state.store import StateStore
from oai_pipeline.storage import PartitionStore
from oai_pipeline_tests.cli.conftest import RECORDS, create_args
from oai_pipeline_tests.oai.fake_source import FakeRecord, FakeSource, drop_connection
from oai_pipeline_tests.support import (
    deleted_records,
    harvest_fake_source,
    live_records,
    oai_dc,
)


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_harvest_then_status_and_records(registered: str) -> None:
    result = run("harvest", registered, "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{") :])
    live = live_records(RECORDS, "oai_datacite")
    assert report["created"] == len(live)
    assert report["harvested"] == len(live) + len(deleted_records(RECORDS, "oai_datacite"))
    assert report["errors"] == 0

    status = json.loads(run("status", "--harvester", registered, "--json").output)
    assert status["run"]["status"] == "succeeded"
    assert status["records"]["imported"] == len(live)
    assert status["target"]["records"] == len(live)
    # named as every other command names its harvester
    named = json.loads(run("status", registered, "--json").output)
    assert (named["run"]["id"], named["records"]) == (status["run"]["id"], status["records"])

    listed = json.loads(
        run("records", "list", "--harvester", registered, "--live", "--json").output
    )
    assert {r["identifier"] for r in listed} == {r.identifier for r in live}

    again = json.loads(run("harvest", registered, "--json").output)
    assert again["created"] == 0 and again["unchanged"] == again["harvested"]


def test_selected_identifiers_and_a_cap(registered: str) -> None:
    live = live_records(RECORDS, "oai_datacite")
    chosen = [live[0].identifier, live[1].identifier]

    result = run("harvest", registered, *chosen, "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["created"] == 2

    capped = json.loads(run("harvest", registered, "--max-records", "3", "--json").output)
    assert capped["harvested"] == 3 and capped["cap_reached"] is True


@pytest.mark.parametrize(
    ("args", "message", "exit_code"),
    [
        (["harvest", "nope"], "unknown harvester 'nope'", 2),
        (["harvest", "sample", "--since", "yesterday"], "--since", 2),
        (["harvest", "sample", "--scale", "small", "--max-records", "5"], "not both", 2),
        (["harvest", "sample", "--since", "2024-02-01", "--until", "2024-01-01"], "before", 2),
        (["harvest", "sample", "--resume", "999"], "no harvest run 999", 2),
        (["status", "--batch-id", "1", "--harvester", "sample"], "not both", 2),
        (["status", "sample", "--batch-id", "1"], "not both", 2),
        (["status", "nope"], "unknown harvester 'nope'", 2),
        (["status", "sample", "--harvester", "other"], "two harvesters", 2),
        (["harvesters", "create", "--metadata-prefix", "p"], "give the harvester's id", 2),
        (["harvesters", "create", "a", "http://x/oai", "--id", "b"], "two ids: 'a'", 2),
        (
            ["harvesters", "create", "a", "http://x/oai", "--base-url", "http://y/oai"],
            "two base URLs",
            2,
        ),
    ],
)
def test_user_mistakes_are_one_line_errors(
    registered: str, args: list[str], message: str, exit_code: int
) -> None:
    """A usage or validation mistake, or a named thing that does not exist, exits 2, any
    other 1 (as the README says)."""
    result = CliRunner().invoke(main, args)

    assert result.exit_code == exit_code
    assert message in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def _failed_for_a_missing_community(endpoint: OAIEndpoint) -> tuple[dict, list]:
    """A harvest whose live records all fail: the writer's community does not exist yet.
    Returns its report and the live records; the community is created after it."""
    created = run(
        "harvesters", "create", "--id", "sample", "--base-url", endpoint.base_url,
        "--metadata-prefix", "oai_datacite", "--model", "rdm", "--community", "later",
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    first = json.loads(run("harvest", "sample", "--json").output)
    live = live_records(RECORDS, "oai_datacite")
    assert first["error_types"] == {"missing_community": len(live)}
    assert run("target", "communities", "create", "later").exit_code == 0
    return first, live


def test_resume_retries_failed_records_only_when_asked(endpoint: OAIEndpoint) -> None:
    first, live = _failed_for_a_missing_community(endpoint)
    run_id = str(first["run_id"])

    # The run succeeded: without --retry-failed it has nothing left to resume. Before, it
    # was reopened and its window listed again under its number, retrying nothing.
    refused = run("harvest", "sample", "--resume", run_id)
    assert refused.exit_code == 2, refused.output
    assert f"harvest run {run_id} cannot be resumed: it succeeded" in refused.output
    assert "--retry-failed" in refused.output

    retried = json.loads(
        run("harvest", "sample", "--resume", run_id, "--retry-failed", "--json").stdout
    )
    assert retried["run_id"] == first["run_id"]
    assert retried["created"] == len(live)
    # The report says what the earlier attempt did: deleted none of the records deleted at
    # the source (they have no target record yet) without error.
    assert retried["written_earlier"] == first["harvested"] - len(live) > 0
    status = json.loads(run("status", "--batch-id", run_id, "--json").output)
    assert status["records"]["failed"] == 0
    assert status["records"]["imported"] == len(live)


def test_failed_records_are_harvested_again_by_identifier_once_fixed(
    endpoint: OAIEndpoint,
) -> None:
    """An incremental harvest does not list a record again until the source changes it:
    `--failed` gets the failed ones by identifier after the operator fixed the cause."""
    first, live = _failed_for_a_missing_community(endpoint)
    requests_before = len(endpoint.requests)

    again = json.loads(run("harvest", "sample", "--failed", "--json").output)

    assert again["run_id"] != first["run_id"]
    assert (again["created"], again["errors"]) == (len(live), 0)
    asked = [r for r in endpoint.requests[requests_before:] if r["verb"] == "GetRecord"]
    assert sorted(r["identifier"] for r in asked) == sorted(r.identifier for r in live)
    assert "has no failed records" in run("harvest", "sample", "--failed").output
    refused = run("harvest", "sample", "--failed", "--since", "2024-01-01")
    assert refused.exit_code == 2 and "--failed" in refused.output


def test_a_failed_record_without_identifier_is_not_asked_for_by_identifier(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--failed` asked GetRecord for the record listed without identifier too: a source
    answers that with badArgument, and the whole run failed. It is left out, saying so."""
    records = [
        FakeRecord("oai:fake.test:1", "2024-01-02T00:00:00Z", raw_metadata="<nodc/>"),
        FakeRecord("", "2024-01-03T00:00:00Z", raw_metadata=oai_dc("No identifier")),
    ]
    fake = harvest_fake_source(settings, monkeypatch, FakeSource(records, page_size=5))
    assert json.loads(run("harvest", "sample", "--json").output)["errors"] == 2

    again = run("harvest", "sample", "--failed", "--json")

    asked = [r.url.params.get("identifier") for r in fake.requests if "GetRecord" in str(r.url)]
    assert asked == ["oai:fake.test:1"]
    assert "1 failed record without identifier left out" in again.stderr
    assert json.loads(again.stdout)["harvested"] == 1


def test_a_harvester_replacing_a_deleted_one_takes_its_records_over(endpoint: OAIEndpoint) -> None:
    """Deleted with its harvest records, a harvester leaves its target records to the next
    harvester of the source: DOI-less records too, by the OAI identifier they keep."""
    assert run(*create_args("old", endpoint.base_url)).exit_code == 0
    assert json.loads(run("harvest", "old", "--json").output)["errors"] == 0
    before = json.loads(run("target", "list", "--json").output)

    deleted = run("harvesters", "delete", "old", "--delete-records")
    assert f"{len(before)} target records released" in deleted.output
    assert run(*create_args("new", endpoint.base_url)).exit_code == 0
    report = json.loads(run("harvest", "new", "--json").output)

    after = json.loads(run("target", "list", "--json").output)
    assert report["errors"] == 0 and report["created"] == 0
    assert sorted(r["id"] for r in after) == sorted(r["id"] for r in before)
    assert {r["source_harvester"] for r in after} == {"new"}


def test_deleting_a_harvester_with_its_records_drops_its_parquet_too(
    endpoint: OAIEndpoint, settings: Settings
) -> None:
    """Before, its Parquet partitions stayed: no run of the state store named them any more,
    so no prune ever dropped them (a harvester re-created under the id found them there)."""
    assert run(*create_args("old", endpoint.base_url)).exit_code == 0
    assert run("harvest", "old").exit_code == 0
    storage = PartitionStore(settings.storage_url)
    assert all(storage.windows(asset, "old") for asset in STAGE_ASSETS)

    deleted = run("harvesters", "delete", "old", "--delete-records")

    assert deleted.exit_code == 0, deleted.output
    assert "1 partition keys dropped" in deleted.output
    assert not any(storage.windows(asset, "old") for asset in STAGE_ASSETS)


def test_a_harvester_a_harvest_writes_for_is_not_deleted_with_its_records(
    endpoint: OAIEndpoint, settings: Settings
) -> None:
    """Before, its harvest records and runs were deleted from under the harvest."""
    assert run(*create_args("busy", endpoint.base_url)).exit_code == 0
    assert run("harvest", "busy").exit_code == 0
    with Services(settings) as services, services.harvester_lock.hold("busy"):
        deleted = run("harvesters", "delete", "busy", "--delete-records")

    assert deleted.exit_code == 1
    assert deleted.stderr.startswith("Error: another run is writing for harvester 'busy'")
    assert run("harvesters", "show", "busy").exit_code == 0
    assert json.loads(run("records", "list", "--harvester", "busy", "--json").stdout)


def test_quirks_of_a_source_are_noted_in_the_report_and_by_harvesters_show() -> None:
    """Over real HTTP, a source whose Identify declares seconds it refuses and names another
    base URL, behind a proxy labelling plain bodies gzip. Before, the harvest failed (the
    gzip label, then badArgument) and nothing mentioned the other base URL."""
    declared = "https://repository.example.org/oai/request"
    faults = Faults(
        identify_granularity="seconds", identify_base_url=declared, plain_labelled_gzip=True
    )
    with OAIEndpoint(RECORDS, page_size=3, granularity="day", faults=faults) as endpoint:
        assert run(*create_args("sample", endpoint.base_url)).exit_code == 0
        result = run("harvest", "sample", "--since", "2024-01-12T10:00:00Z")
        asked = [request.get("from") for request in endpoint.requests if "from" in request]
    on_the_day = [
        r
        for r in live_records(RECORDS, "oai_datacite") + deleted_records(RECORDS, "oai_datacite")
        if r.datestamp.date().isoformat() == "2024-01-12"
    ]
    assert result.exit_code == 0, result.output
    assert asked == ["2024-01-12T10:00:00Z", "2024-01-12"]
    assert f"  harvested: {len(on_the_day)} " in result.output  # the whole day
    notes = [line for line in result.output.splitlines() if line.startswith("  note: ")]
    assert len(notes) == 2
    assert f"Identify names another base URL, {declared}; harvesting the registered" in notes[0]
    assert "refuses from/until in seconds (badArgument: " in notes[1]
    shown = run("harvesters", "show", "sample")
    warning = f"  warning: {endpoint.base_url}: the source's Identify names another base URL"
    assert any(line.startswith(warning) for line in shown.output.splitlines())
    assert json.loads(run("harvesters", "show", "sample", "--json").output)["warnings"] == [
        notes[0].removeprefix("  note: ")
    ]


def _records_listed(*args: str) -> list[str]:
    return [r["identifier"] for r in json.loads(run("records", "list", *args, "--json").output)]


def test_an_identifier_the_source_never_had_is_an_error_and_no_harvest_record(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`harvest ID oai:typo`: the source's idDoesNotExist left a harvest record counted as
    live (status, `records list --live`, reconcile's vanished). It is a failed record of the
    run, named in the report, with no harvest record; the other identifiers go on."""
    records = [FakeRecord("oai:fake.test:1", "2024-01-02T00:00:00Z", raw_metadata=oai_dc("One"))]
    harvest_fake_source(settings, monkeypatch, FakeSource(records))

    result = run("harvest", "sample", "oai:fake.test:typo", "oai:fake.test:1", "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["created"], report["errors"]) == (1, 1)
    assert report["error_types"] == {"idDoesNotExist": 1}
    assert report["unknown_identifiers"] == ["oai:fake.test:typo"]
    assert _records_listed("--harvester", "sample", "--live") == ["oai:fake.test:1"]
    assert _records_listed("--harvester", "sample") == ["oai:fake.test:1"]
    status = json.loads(run("status", "--harvester", "sample", "--json").output)
    assert status["harvest_records"]["live"] == 1
    assert status["records"]["failed"] == 1
    assert [f["identifier"] for f in status["recent_failures"]] == ["oai:fake.test:typo"]
    text = run("harvest", "sample", "oai:fake.test:typo").output
    assert "not at the source (idDoesNotExist), no harvest record kept: oai:fake.test:typo" in text


def test_a_harvested_record_the_source_no_longer_has_is_deleted_as_at_the_source(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record harvested before, then dropped by the source without a deleted header: its
    GetRecord answer idDoesNotExist wiped the harvest record's datestamp and left it and the
    target record live. It is a deletion at the source, as a reconcile treats it, said in a
    notice; a record deleted before stays deleted."""
    records = [
        FakeRecord("oai:fake.test:1", "2024-01-02T00:00:00Z", raw_metadata=oai_dc("One")),
        FakeRecord("oai:fake.test:2", "2024-01-02T00:00:00Z", deleted=True),
    ]
    source = FakeSource(records)
    harvest_fake_source(settings, monkeypatch, source)
    assert json.loads(run("harvest", "sample", "--json").output)["created"] == 1
    source.records = []

    result = run("harvest", "sample", "oai:fake.test:1", "oai:fake.test:2", "--json")

    [target] = json.loads(run("target", "list", "--json").output)
    assert (target["source_identifier"], target["state"]) == ("oai:fake.test:1", "tombstone")
    report = json.loads(result.stdout)
    assert (report["deleted"], report["errors"], report.get("unknown_identifiers")) == (1, 0, [])
    assert report["notices"] == [
        "oai:fake.test:1: the source no longer has this record (idDoesNotExist) and sent no "
        "deleted header; deleted as at the source"
    ]
    listed = json.loads(run("records", "list", "--harvester", "sample", "--json").output)
    assert {(r["identifier"], r["datestamp"], r["deleted"]) for r in listed} == {
        ("oai:fake.test:1", "2024-01-02T00:00:00Z", True),
        ("oai:fake.test:2", "2024-01-02T00:00:00Z", True),
    }


def test_a_record_deleted_as_at_the_source_keeps_its_last_copy_as_a_reconcile_leaves_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two records the source dropped without a deleted header: one deleted by a harvest of
    it (GetRecord: idDoesNotExist), one by a reconcile (vanished from the list). Both keep
    the XML last harvested, beside the data transformed from it, for `records show` and
    the Parquet files (the source sent nothing newer). Before, the harvest dropped the XML
    and kept the data, while the reconcile kept both."""
    records = [
        FakeRecord(f"oai:fake.test:{n}", "2024-01-02T00:00:00Z", raw_metadata=oai_dc(f"R{n}"))
        for n in range(1, 5)
    ]
    source = FakeSource(records, deleted_record="no")
    harvest_fake_source(settings, monkeypatch, source)
    # the reconcile's sweep reads the same fake source
    monkeypatch.setattr(reconcile_module, "build_reader", discover_module.build_reader)
    assert json.loads(run("harvest", "sample", "--json").output)["created"] == 4
    dropped = ["oai:fake.test:1", "oai:fake.test:2"]
    before = {i: json.loads(run("records", "show", i, "--json").output) for i in dropped}
    source.records = records[2:]

    harvested = json.loads(run("harvest", "sample", dropped[0], "--json").output)
    reconciled = json.loads(run("reconcile", "sample", "--json").output)

    assert (harvested["deleted"], reconciled["vanished"]) == (1, [dropped[1]])
    for identifier in dropped:
        after = json.loads(run("records", "show", identifier, "--json").output)
        assert after["deleted"] is True and after["gone_at"] is not None
        assert (after["xml"], after["data"]) == (
            before[identifier]["xml"],
            before[identifier]["data"],
        )
        assert "<metadata>" in after["xml"]


class NoFormatSource(FakeSource):
    """Answers GetRecord of a record it has with cannotDisseminateFormat: not in this format."""

    def answer(self, request: httpx.Request) -> httpx.Response:
        params = request.url.params
        if params.get("verb") == "GetRecord" and any(
            r.identifier == params.get("identifier") for r in self.records
        ):
            return self.error("cannotDisseminateFormat", "not in this format")
        return super().answer(request)


def test_a_written_record_whose_datestamp_an_error_wiped_keeps_its_harvest_record(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record written to the target, then answered cannotDisseminateFormat (which leaves
    its harvest record without a datestamp), then idDoesNotExist: it was taken for one the
    source never had, and its harvest record, the target record's link to its source, was
    dropped: the target record was nobody's, never deleted or updated again, and a harvest
    would create it a second time. It is deleted as at the source, like a listed one."""
    records = [FakeRecord("oai:fake.test:1", "2024-01-02T00:00:00Z", raw_metadata=oai_dc("One"))]
    source = harvest_fake_source(settings, monkeypatch, NoFormatSource(records))
    assert json.loads(run("harvest", "sample", "--json").output)["created"] == 1
    run("harvest", "sample", "oai:fake.test:1", "--json")
    source.records = []

    report = json.loads(run("harvest", "sample", "oai:fake.test:1", "--json").output)

    shown = run("records", "show", "oai:fake.test:1", "--harvester", "sample", "--json")
    assert shown.exit_code == 0, shown.output
    [target] = json.loads(run("target", "list", "--json").output)
    assert json.loads(shown.output)["local_id"] == target["id"]
    # and the source's word is acted on: deleted as at the source, as a listed record is
    assert (report["deleted"], report["unknown_identifiers"]) == (1, [])
    assert target["state"] == "tombstone"


class RefusingSource(FakeSource):
    """Answers GetRecord of an identifier that is no OAI identifier with badArgument."""

    def answer(self, request: httpx.Request) -> httpx.Response:
        params = request.url.params
        if params.get("verb") == "GetRecord" and not params["identifier"].startswith("oai:"):
            return self.error("badArgument", "Illegal identifier", status=400)
        return super().answer(request)


def test_an_identifier_the_source_refuses_is_its_records_error_and_the_others_are_harvested(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, the refused one (a DOI given for an OAI identifier) failed the run of all of
    them, and `--resume` asked it first again and failed the same way."""
    records = [
        FakeRecord(f"oai:fake.test:{n}", "2024-01-02T00:00:00Z", raw_metadata=oai_dc(f"T{n}"))
        for n in range(2)
    ]
    harvest_fake_source(settings, monkeypatch, RefusingSource(records))

    result = run("harvest", "sample", "oai:fake.test:0", "10.1234/doi", "oai:fake.test:1", "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["created"], report["errors"]) == (2, 1)
    refused = json.loads(run("records", "show", "10.1234/doi", "--json").stdout)
    assert [(e["type"], e["message"]) for e in refused["errors"]] == [
        ("badArgument", "Illegal identifier")
    ]


def test_an_identifier_given_twice_is_asked_for_once(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Identifiers that need escaping reach the source as given; one given twice was asked
    for twice."""
    odd = ["oai:x:a+b", "oai:x:a/b#c", "oai:x:a&b=c", "oai:x:a%20b", "oai:x:a b", "oai:x:ü"]
    records = [FakeRecord(i, "2024-01-02T00:00:00Z", raw_metadata=oai_dc("T")) for i in odd]
    fake = harvest_fake_source(settings, monkeypatch, FakeSource(records))

    report = json.loads(run("harvest", "sample", *odd, odd[0], "--json").stdout)

    asked = [r.url.params.get("identifier") for r in fake.requests if "GetRecord" in str(r.url)]
    assert asked == odd
    assert (report["created"], report["errors"]) == (len(odd), 0)


def test_resuming_a_failed_run_of_selected_identifiers_asks_for_those_left(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--resume` of a run of selected identifiers that failed mid-list swept the whole
    source into it (every record created, not the three asked for)."""
    records = [
        FakeRecord(f"oai:fake.test:{n}", "2024-01-02T00:00:00Z", raw_metadata=oai_dc(f"T{n}"))
        for n in range(6)
    ]
    fake = harvest_fake_source(settings, monkeypatch, FakeSource(records))
    fake.faults = dict.fromkeys(range(4, 40), drop_connection)  # the third GetRecord on
    chosen = ["oai:fake.test:0", "oai:fake.test:1", "oai:fake.test:2"]
    failed = run("harvest", "sample", *chosen, "--json")
    assert failed.exit_code == 1
    fake.faults.clear()

    resumed = json.loads(run("harvest", "sample", "--resume", "1", "--json").stdout)

    assert resumed["run_id"] == 1 and resumed["created"] == len(chosen)
    assert sorted(_records_listed("--harvester", "sample")) == chosen
    assert "ListRecords" not in fake.verbs


def _unreachable(request: httpx.Request) -> httpx.Response:
    """No HTTP answer at all (the connection dropped at each try): the run fails."""
    return drop_connection(request, httpx.Response(200))


class UnavailableFor(FakeSource):
    """Answers GetRecord of the identifiers in `down` with `refusal` (by default no HTTP
    answer at all, as a source gone mid-run: the retries run out and the run fails); with
    `blocking`, every request after the first such refusal too (a firewall that began
    blocking the harvester, a backend gone down), Identify included."""

    def __init__(self, records: list[FakeRecord]) -> None:
        super().__init__(records)
        self.down: set[str] = set()
        self.refusal: Callable[[httpx.Request], httpx.Response] = _unreachable
        self.blocking = False
        self.blocked = False

    def answer(self, request: httpx.Request) -> httpx.Response:
        params = request.url.params
        if self.blocked or (
            params.get("verb") == "GetRecord" and params.get("identifier") in self.down
        ):
            self.blocked = self.blocking
            return self.refusal(request)
        return super().answer(request)

    def asked(self, since: int = 0) -> list[str]:
        """The identifiers of the GetRecord requests from request number `since` on, once
        each in the order first asked (a retried request is one)."""
        return list(
            dict.fromkeys(
                r.url.params["identifier"]
                for r in self.requests[since:]
                if r.url.params.get("verb") == "GetRecord"
            )
        )


def _numbered(count: int) -> list[FakeRecord]:
    return [
        FakeRecord(f"oai:fake.test:{n}", "2024-01-02T00:00:00Z", raw_metadata=oai_dc(f"T{n}"))
        for n in range(count)
    ]


def test_a_failed_run_keeps_the_notice_of_a_record_deleted_as_at_the_source(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record the source answered idDoesNotExist for, harvested before, is deleted as at
    the source with a notice. When a later identifier's GetRecord then failed the run, the
    notice was lost: not on the failed run's status, nor under its error."""
    source = harvest_fake_source(settings, monkeypatch, UnavailableFor(_numbered(2)))
    assert json.loads(run("harvest", "sample", "--json").output)["created"] == 2
    source.records = source.records[1:]  # the source drops oai:fake.test:0 ...
    source.down = {"oai:fake.test:1"}  # ... and cannot answer for oai:fake.test:1

    failed = run("harvest", "sample", "oai:fake.test:0", "oai:fake.test:1")

    notice = (
        "oai:fake.test:0: the source no longer has this record (idDoesNotExist) and sent no "
        "deleted header; deleted as at the source"
    )
    assert failed.exit_code == 1
    assert f"  note: {notice}" in failed.output.splitlines()
    status = json.loads(run("status", "--harvester", "sample", "--json").output)
    assert status["run"]["status"] == "failed"
    assert status["notices"] == [notice]
    source.down.clear()
    resumed = json.loads(run("harvest", "sample", "--resume", "2", "--json").stdout)
    assert (resumed["deleted"], resumed["notices"]) == (1, [notice])


def test_an_identifier_the_source_never_had_is_not_counted_as_staged(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's `staged` counter counted a typo identifier (idDoesNotExist, no harvest
    record) as staged; it is one of the run's failed records, named in the report."""
    harvest_fake_source(settings, monkeypatch, FakeSource(_numbered(1)))

    report = json.loads(
        run("harvest", "sample", "oai:fake.test:typo", "oai:fake.test:0", "--json").stdout
    )

    assert report["unknown_identifiers"] == ["oai:fake.test:typo"]
    status = json.loads(run("status", "--harvester", "sample", "--json").output)
    assert status["counters"]["staged"] == 1
    assert status["records"]["failed"] == 1
    listed = json.loads(run("status", "--list-recent", "--json").output)
    assert [r["staged"] for r in listed] == [1]


def test_resuming_selected_identifiers_asks_again_only_from_the_one_that_failed(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answers were staged 100 at a time: a run that failed at its k-th identifier had
    staged none of those before it, and `--resume` asked the source for all of them
    again. Each answer is staged as it comes: the resumed run asks from the k-th on."""
    source = harvest_fake_source(settings, monkeypatch, UnavailableFor(_numbered(6)))
    chosen = [r.identifier for r in source.records]
    source.down = {chosen[3]}
    failed = run("harvest", "sample", *chosen, "--json")
    assert failed.exit_code == 1
    assert source.asked() == chosen[:4]
    source.down.clear()
    before = len(source.requests)

    resumed = json.loads(run("harvest", "sample", "--resume", "1", "--json").stdout)

    assert source.asked(before) == chosen[3:]
    assert (resumed["run_id"], resumed["created"], resumed["written_earlier"]) == (1, 6, 0)
    status = json.loads(run("status", "--harvester", "sample", "--json").output)
    assert status["counters"]["staged"] == 6


def _the_records_error(identifier: str) -> tuple[str, str]:
    """(type, message) of the one error `records show` gives the record."""
    shown = json.loads(run("records", "show", identifier, "--json").stdout)
    [(kind, message)] = [(e["type"], e["message"]) for e in shown["errors"]]
    return kind, message


def _failed_asks_again(source: UnavailableFor, identifier: str) -> None:
    """Served again, the record is asked for by `--failed`, alone, and created."""
    source.down.clear()
    before = len(source.requests)
    again = json.loads(run("harvest", "sample", "--failed", "--json").stdout)
    assert (again["created"], again["errors"]) == (1, 0)
    assert source.asked(before) == [identifier]


def _refused_with(code: int) -> Callable[[httpx.Request], httpx.Response]:
    """HTTP `code` with a plain body and no OAI-PMH answer (a 5xx asks to retry at once)."""
    headers = {"retry-after": "0"} if code >= 500 else {}
    return lambda request: httpx.Response(code, text="No access here", headers=headers)


@pytest.mark.parametrize(
    ("code", "detail"),
    [
        (403, "HTTP 403 Forbidden for GetRecord of {i}: its body: 'No access here'"),
        (401, "HTTP 401 Unauthorized for GetRecord of {i}: its body: 'No access here'"),
        (404, "HTTP 404 Not Found for GetRecord of {i}: its body: 'No access here'"),
        (410, "HTTP 410 Gone for GetRecord of {i}: its body: 'No access here'"),
        (503, "HTTP 503 Service Unavailable for GetRecord of {i}: gave up after 31 attempts"),
        (500, "HTTP 500 Internal Server Error for GetRecord of {i}: gave up after 7 attempts"),
    ],
)
@pytest.mark.parametrize("refused", [0, 1, 2])
def test_a_getrecord_refused_with_an_http_status_is_that_records_error(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, code: int, detail: str, refused: int
) -> None:
    """One identifier's GetRecord refused (a 4xx at once, a 5xx after the retries) while the
    source answers the others, first, between or last: before, the whole run failed, and
    `--resume` asked it first again and failed the same way. It is that record's error, told
    and counted as the others are, and `--failed` asks for it again."""
    source = harvest_fake_source(settings, monkeypatch, UnavailableFor(_numbered(3)))
    chosen = [r.identifier for r in source.records]
    source.down, source.refusal = {chosen[refused]}, _refused_with(code)

    result = run("harvest", "sample", *chosen, "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["created"], report["errors"]) == (2, 1)
    assert report["error_types"] == {"HTTPError": 1}
    kind, message = _the_records_error(chosen[refused])
    assert kind == "HTTPError"
    assert message.startswith(detail.format(i=chosen[refused])), message
    assert message.endswith(
        "; the source answered other requests of the run, so the record is refused, not "
        "the harvest: `oai-pipeline harvest sample --failed` asks for it again"
    )
    status = json.loads(run("status", "--harvester", "sample", "--json").output)
    assert status["run"]["status"] == "succeeded"
    assert status["records"]["failed"] == 1
    _failed_asks_again(source, chosen[refused])


def _unreadable_answer(kind: str) -> Callable[[httpx.Request], httpx.Response]:
    """A GetRecord answer with status 200 that is no whole OAI-PMH document at any try: the
    record's XML cut short where the source's renderer fails, an error page in its place,
    or an answer over the reader's max_response_mb of 1 (a record's huge metadata)."""
    bodies = {
        "cut-short": '<?xml version="1.0"?><OAI-PMH xmlns="http://www.openarchives.org/OAI/'
        '2.0/"><responseDate>2026-01-01T00:00:00Z</responseDate><GetRecord><record><hea',
        "error-page": "<html><body><h1>Error</h1>Could not render the item</body></html>",
        "oversized": "<OAI-PMH>" + "x" * (1024 * 1024 + 1),
    }
    return lambda request: httpx.Response(200, text=bodies[kind])


@pytest.mark.parametrize(
    ("kind", "error_type", "detail", "fix"),
    [
        ("cut-short", "MalformedResponse", "not well-formed XML", "once it serves them"),
        (
            "error-page",
            "MalformedResponse",
            "not an OAI-PMH response (root element 'html') (the last of 7 attempts and",
            "once it serves them",
        ),
        (
            "oversized",
            "OversizedResponse",
            "response larger than 1 MiB (the reader option max_response_mb)",
            "'oai-pmh{max_response_mb: N}'",
        ),
    ],
)
@pytest.mark.parametrize("refused", [0, 1, 2])
def test_a_getrecord_answered_unreadably_is_that_records_error(
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    error_type: str,
    detail: str,
    fix: str,
    refused: int,
) -> None:
    """One identifier's GetRecord answered with what cannot be read, at every try, while the
    source answers the others (first, between or last): before, the whole run failed, and
    `--resume` failed on it again. It is that record's error, as a listed copy that does not
    parse is, the report names the fix, and `--failed` asks for it again."""
    source = harvest_fake_source(
        settings, monkeypatch, UnavailableFor(_numbered(3)), reader_options={"max_response_mb": 1}
    )
    chosen = [r.identifier for r in source.records]
    source.down, source.refusal = {chosen[refused]}, _unreadable_answer(kind)

    result = run("harvest", "sample", *chosen, "--json")
    text = report_text(json.loads(result.stdout))

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["created"], report["errors"]) == (2, 1)
    assert report["error_types"] == {error_type: 1}
    assert f"  {error_type}: " in text and fix in text
    kind_shown, message = _the_records_error(chosen[refused])
    assert kind_shown == error_type
    assert message.startswith(f"GetRecord of {chosen[refused]}: {detail}"), message
    assert message.endswith(
        "; the source answered other requests of the run, so this is the record's answer, "
        "not the harvest's: `oai-pipeline harvest sample --failed` asks for it again"
    )
    assert (
        json.loads(run("status", "--harvester", "sample", "--json").output)["run"]["status"]
        == "succeeded"
    )
    _failed_asks_again(source, chosen[refused])


def test_unreadable_answers_to_every_identifier_asked_fail_the_run(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every GetRecord answered unreadably, and Identify too: nothing tells a record the
    source fails to render from a source that answers nothing readable; the run fails."""
    source = harvest_fake_source(settings, monkeypatch, UnavailableFor(_numbered(2)))
    chosen = [r.identifier for r in source.records]
    source.down, source.refusal = set(chosen), _unreadable_answer("cut-short")
    source.blocking = True

    result = run("harvest", "sample", *chosen)

    assert result.exit_code == 1
    assert "and Identify too: taken as refusing the harvest" in result.output
    status = json.loads(run("status", "--harvester", "sample", "--json").output)
    assert status["run"]["status"] == "failed" and status["records"]["failed"] == 0


def test_a_refused_getrecord_is_counted_in_the_text_report_with_its_fix(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = harvest_fake_source(settings, monkeypatch, UnavailableFor(_numbered(2)))
    source.down, source.refusal = {"oai:fake.test:1"}, _refused_with(403)

    result = run("harvest", "sample", "oai:fake.test:0", "oai:fake.test:1")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "  errors:    1" in lines
    assert "  error types: HTTPError 1" in lines
    assert (
        "  HTTPError: the source refused GetRecord of these records while it answered others; "
        "once it serves them, `oai-pipeline harvest sample --failed` asks for them again"
    ) in lines


@pytest.mark.parametrize(
    "refusal",
    [
        _refused_with(403),
        lambda request: FakeSource([]).error("cannotDisseminateFormat", "not in this format"),
    ],
    ids=["http-403", "cannot-disseminate"],
)
def test_a_refused_getrecord_keeps_the_copy_last_harvested(
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    refusal: Callable[[httpx.Request], httpx.Response],
) -> None:
    """The source sent nothing of the record: its harvest record kept the error alone, and
    lost its datestamp, XML and transformed data until the source listed it again (`records
    show` had nothing of a record the target holds)."""
    source = harvest_fake_source(settings, monkeypatch, UnavailableFor(_numbered(3)))
    chosen = [r.identifier for r in source.records]
    run("harvest", "sample", "--json")
    before = json.loads(run("records", "show", chosen[1], "--json").stdout)
    source.down, source.refusal = {chosen[1]}, refusal

    report = json.loads(run("harvest", "sample", *chosen, "--json").stdout)

    assert (report["unchanged"], report["errors"]) == (2, 1)
    after = json.loads(run("records", "show", chosen[1], "--json").stdout)
    kept = ("datestamp", "deleted", "set_specs", "xml", "data", "transformed_datestamp")
    assert {k: after[k] for k in kept} == {k: before[k] for k in kept}
    assert after["datestamp"] == "2024-01-02T00:00:00Z" and "<dc:title>T1" in after["xml"]
    assert [e["location"] for e in after["errors"]] == [chosen[1]]
    source.down.clear()
    again = json.loads(run("harvest", "sample", "--failed", "--json").stdout)
    assert (again["unchanged"], again["errors"]) == (1, 0)
    assert json.loads(run("records", "show", chosen[1], "--json").stdout)["errors"] == []


def test_a_refused_getrecord_is_asked_again_by_resume_with_retry_failed(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--resume RUN --retry-failed` of the run of selected identifiers asks the source
    again for the one it refused (that one only), and writes it."""
    source = harvest_fake_source(settings, monkeypatch, UnavailableFor(_numbered(3)))
    chosen = [r.identifier for r in source.records]
    source.down, source.refusal = {chosen[1]}, _refused_with(403)
    first = json.loads(run("harvest", "sample", *chosen, "--json").stdout)
    assert (first["created"], first["errors"]) == (2, 1)
    source.down.clear()
    before = len(source.requests)

    retried = json.loads(
        run("harvest", "sample", "--resume", "1", "--retry-failed", "--json").stdout
    )

    assert source.asked(before) == [chosen[1]]
    assert (retried["run_id"], retried["created"], retried["errors"]) == (1, 3, 0)
    shown = json.loads(run("records", "show", chosen[1], "--json").stdout)
    assert shown["errors"] == []


@pytest.mark.parametrize("code", [403, 503])
def test_a_source_refusing_getrecord_after_getrecord_fails_the_run_resumably(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """A source that refuses REFUSALS_IN_A_ROW identifiers one after the other (a firewall
    blocking the harvester, a backend down) refuses the harvest, not those records: the run
    fails as a protocol failure, stores no record error, and `--resume` asks from the first
    refused on."""
    in_a_row = 3
    monkeypatch.setattr(discover_module, "REFUSALS_IN_A_ROW", in_a_row, raising=False)
    source = harvest_fake_source(settings, monkeypatch, UnavailableFor(_numbered(7)))
    chosen = [r.identifier for r in source.records]
    source.down, source.refusal = set(chosen[2:]), _refused_with(code)
    source.blocking = True

    failed = run("harvest", "sample", *chosen, "--json")

    assert failed.exit_code == 1, failed.output
    assert source.asked() == chosen[: 2 + in_a_row]
    assert (
        f"the source refused GetRecord of {in_a_row} identifiers in a row, with no answer "
        f"between ({chosen[2]} to {chosen[1 + in_a_row]}), and Identify too: taken as "
        "refusing the harvest, not single records"
    ) in failed.output
    status = json.loads(run("status", "--harvester", "sample", "--json").output)
    assert status["run"]["status"] == "failed"
    assert status["records"]["failed"] == 0
    source.down.clear()
    source.blocked = source.blocking = False
    before = len(source.requests)
    resumed = json.loads(run("harvest", "sample", "--resume", "1", "--json").stdout)
    assert source.asked(before) == chosen[2:]
    assert (resumed["created"], resumed["errors"]) == (len(chosen), 0)


def test_refusals_of_every_identifier_asked_fail_the_run(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fewer identifiers than REFUSALS_IN_A_ROW, all refused: the source answered none of
    them, so nothing tells a refused record from a refused harvester: the run fails (one
    identifier alone with the client's error as before)."""
    source = harvest_fake_source(settings, monkeypatch, UnavailableFor(_numbered(2)))
    chosen = [r.identifier for r in source.records]
    source.down, source.refusal = set(chosen), _refused_with(403)
    source.blocking = True

    both = run("harvest", "sample", *chosen)
    source.blocked = False
    one = run("harvest", "sample", chosen[0])

    assert both.exit_code == one.exit_code == 1
    assert (
        f"the source refused GetRecord of 2 identifiers and answered none of this attempt's "
        f"({chosen[0]} to {chosen[1]}), and Identify too: taken as refusing the harvest"
    ) in both.output
    assert "HTTP 403 Forbidden (its body: 'No access here'): the source refuses the harvester" in (
        one.output
    )
    assert "identifiers" not in one.output
    status = json.loads(run("status", "--harvester", "sample", "--json").output)
    assert status["records"]["failed"] == 0


def test_a_stretch_of_refused_records_is_their_errors_while_the_source_answers_identify(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """REFUSALS_IN_A_ROW refused one after the other (an embargoed collection's records, side
    by side in the list asked for) while the source answers a fresh Identify: those records
    are refused, not the harvest. Before, the run failed, and `--resume` failed on them again
    for as long as they stayed embargoed: the records after them were never harvested."""
    in_a_row = discover_module.REFUSALS_IN_A_ROW
    source = harvest_fake_source(settings, monkeypatch, UnavailableFor(_numbered(in_a_row + 2)))
    chosen = [r.identifier for r in source.records]
    source.down, source.refusal = set(chosen[1:-1]), _refused_with(403)

    result = run("harvest", "sample", *chosen, "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["created"], report["errors"]) == (2, in_a_row)
    assert source.asked() == chosen
    identifies = [r for r in source.requests if r.url.params.get("verb") == "Identify"]
    assert identifies, "the source was not asked whether it answers"


def test_failed_asks_for_records_still_refused_without_failing_the_run(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every record asked for refused while the source answers Identify (`--failed` asking
    again for records the source still withholds): their errors stay, the run succeeds."""
    source = harvest_fake_source(settings, monkeypatch, UnavailableFor(_numbered(3)))
    chosen = [r.identifier for r in source.records]
    first = json.loads(run("harvest", "sample", *chosen, "--json").stdout)
    assert (first["created"], first["errors"]) == (3, 0)
    source.down, source.refusal = set(chosen[:2]), _refused_with(404)
    assert run("harvest", "sample", "--json", *chosen).exit_code == 0
    before = len(source.requests)

    again = run("harvest", "sample", "--failed", "--json")

    assert again.exit_code == 0, again.output
    report = json.loads(again.stdout)
    assert report["errors"] == 2
    assert source.asked(before) == chosen[:2]
    status = json.loads(run("status", "--harvester", "sample", "--json").output)
    assert (status["run"]["status"], status["records"]["failed"]) == ("succeeded", 2)


class CountingStaged(FakeSource):
    """Notes, at each GetRecord, how many records of harvest run 1 are staged (durable)."""

    def __init__(self, records: list[FakeRecord], state: StateStore) -> None:
        super().__init__(records)
        self.state = state
        self.staged_when_asked: list[int] = []

    def answer(self, request: httpx.Request) -> httpx.Response:
        if request.url.params.get("verb") == "GetRecord":
            asked = [r.identifier for r in self.records]
            self.staged_when_asked.append(len(self.state.record_statuses(1, asked)))
        return super().answer(request)


@pytest.mark.parametrize(
    ("seconds_per_commit", "staged_when_asked"),
    [(3600.0, [0, 0, 2, 2, 4]), (0.0, [0, 1, 2, 3, 4])],
)
def test_answers_to_selected_identifiers_are_committed_in_bounded_batches(
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    seconds_per_commit: float,
    staged_when_asked: list[int],
) -> None:
    """What a killed process (no chance to stage on its way out) loses is bounded: answers
    are committed every ANSWERS_PER_COMMIT, or every SECONDS_PER_COMMIT of a slow source."""
    monkeypatch.setattr(discover_module, "ANSWERS_PER_COMMIT", 2)
    monkeypatch.setattr(discover_module, "SECONDS_PER_COMMIT", seconds_per_commit)
    chosen = [r.identifier for r in _numbered(5)]
    with StateStore(settings.state_db_url) as state:
        source = CountingStaged(_numbered(5), state)
        harvest_fake_source(settings, monkeypatch, source)

        report = json.loads(run("harvest", "sample", *chosen, "--json").stdout)

    assert report["created"] == 5
    assert source.staged_when_asked == staged_when_asked


def test_hours_asked_of_a_source_listing_by_day_harvest_those_hours_only() -> None:
    """`--since`/`--until` with hours at a source whose Identify declares day granularity
    (and whose datestamps are in seconds): the request asks for the whole day, as it must.
    Before, the records of the day outside the hours were harvested and used the cap; they
    are left out now, and a note says that the source lists by day."""
    live = live_records(RECORDS, "oai_datacite")[:6]
    hours = ["08:00:00", "09:59:59", "10:00:00", "11:59:59", "12:00:00", "23:00:00"]
    records = [
        dataclasses.replace(record, datestamp=datetime.fromisoformat(f"2024-03-05T{hour}Z"))
        for record, hour in zip(live, hours, strict=True)
    ]
    with OAIEndpoint(records, page_size=2, faults=Faults(identify_granularity="day")) as endpoint:
        assert run(*create_args("sample", endpoint.base_url)).exit_code == 0
        result = run(
            "harvest", "sample", "--since", "2024-03-05T10:00:00Z",
            "--until", "2024-03-05T12:00:00Z", "--max-records", "3", "--json",
        )  # fmt: skip
        asked = [(r.get("from"), r.get("until")) for r in endpoint.requests if "from" in r]

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert asked == [("2024-03-05", "2024-03-05")]
    assert (report["harvested"], report["cap_reached"]) == (2, False)
    assert sorted(_records_listed("--harvester", "sample")) == sorted(
        r.identifier for r in records[2:4]
    )
    assert any(
        "the source lists by day: 2024-03-05T10:00:00Z .. 2024-03-05T12:00:00Z" in notice
        and "4 records dated outside the hours asked were left out" in notice
        for notice in report["notices"]
    ), report["notices"]


@pytest.mark.parametrize(
    ("command", "shown"),
    [(["harvest", "--max-records", "1"], "harvested:"), (["reconcile"], "vanished")],
)
def test_a_disabled_harvester_named_runs_with_a_note(
    registered: str, command: list[str], shown: str
) -> None:
    """Before, a harvest or reconcile of it ran without a word: the operator did not learn
    that no schedule harvests or reconciles it."""
    assert run("harvest", registered).exit_code == 0  # something to reconcile
    assert run("harvesters", "update", registered, "--disabled").exit_code == 0
    name, *options = command

    text = CliRunner().invoke(main, [name, registered, *options])
    as_json = CliRunner().invoke(main, [name, registered, *options, "--json"])

    note = f"harvester {registered} is disabled: schedules and sensors skip it"
    assert text.exit_code == 0, text.output
    assert f"note: {note}" in text.stderr and note not in text.stdout
    assert shown in text.stdout
    assert as_json.exit_code == 0, as_json.output
    [warning] = json.loads(as_json.stdout)["warnings"]
    assert warning.startswith(note) and f"harvesters update {registered} --enabled" in warning
    assert run("harvesters", "update", registered, "--enabled").exit_code == 0
    assert json.loads(run(name, registered, "--json").stdout)["warnings"] == []


def test_a_missing_community_is_warned_of_at_registration_and_its_errors_name_the_fix(
    endpoint: OAIEndpoint,
) -> None:
    """Before, `harvesters create --community later` said nothing, and every record of the
    next harvest failed with `community 'later' does not exist in the target`, which did
    not say what to do about it."""
    args = ["harvesters", "create", "--id", "sample", "--base-url", endpoint.base_url]
    args += ["--metadata-prefix", "oai_datacite", "--model", "rdm", "--community", "later"]
    created = CliRunner().invoke(main, [*args, "--json"])

    fix = "`oai-pipeline target communities create later`"
    assert created.exit_code == 0, created.output  # warned, not refused: created afterwards
    [warning] = json.loads(created.stdout)["warnings"]
    assert "the target has no community 'later'" in warning and fix in warning
    assert f"warning: {warning}" in created.stderr
    report = CliRunner().invoke(main, ["harvest", "sample"])
    assert "  missing_community: create the community each names" in report.stdout
    assert "then `oai-pipeline harvest sample --failed`" in report.stdout
    status = run("status", "--harvester", "sample").stdout
    said = "missing_community: community 'later' does not exist in the target: create it with "
    assert said + fix in status
    assert "harvest the failed records again with `oai-pipeline harvest sample --failed`" in status

    assert run("target", "communities", "create", "later").exit_code == 0
    updated = CliRunner().invoke(main, ["harvesters", "update", "sample", "--comment", "x"])
    assert updated.exit_code == 0 and "warning" not in updated.stderr
    assert json.loads(run("harvest", "sample", "--failed", "--json").stdout)["errors"] == 0


def test_a_set_community_the_target_lacks_is_warned_of_too() -> None:
    transformer = 'oai-import{set_communities: {"user-x": "x-community"}}'
    args = ["harvesters", "create", "--id", "sets", "--base-url", "http://example.org/oai"]
    args += ["--metadata-prefix", "oai_dc", "--transformer", transformer, "--writer", "oai-service"]

    created = CliRunner().invoke(main, args)

    assert created.exit_code == 0, created.output
    assert "warning: the target has no community 'x-community'" in created.stderr


def test_records_fetched_by_identifier_outside_the_harvester_s_set_are_told_once(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`harvest ID OAI_ID…` of records outside the harvester's set stored them without a
    word, and the next reconcile of the set deleted them again (the target mirrors the
    set). One note for the run says how many and names one; a record in a set below the
    harvester's is in it, and one whose header carries no setSpec at all is not judged."""
    records = [
        FakeRecord(
            f"oai:fake.test:{n}", "2024-01-02T00:00:00Z", sets=sets, raw_metadata=oai_dc(f"R{n}")
        )
        for n, sets in [
            (1, ["physics"]),
            (2, ["maths"]),
            (3, ["chemistry", "physicsish"]),
            (4, ["physics:quantum"]),
            (5, []),
        ]
    ]
    harvest_fake_source(settings, monkeypatch, FakeSource(records), setspec="physics")
    asked = [record.identifier for record in records]

    result = run("harvest", "sample", *asked, "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["created"] == 5
    told = (
        "2 records fetched by identifier are outside the harvester's set 'physics' (e.g. "
        "oai:fake.test:2): harvested, but the next reconcile of the set deletes them (the "
        "target mirrors the set)"
    )
    assert report["notices"] == [told]
    text = run("harvest", "sample", *asked).stdout
    assert text.count("outside the harvester's set") == 1
    assert f"  note: {told}" in text.splitlines()


@pytest.mark.parametrize(
    "args",
    [
        ["new", "http://example.org/oai"],
        ["--id", "new", "http://example.org/oai"],
        ["new", "--base-url", "http://example.org/oai"],
        ["--id", "new", "--base-url", "http://example.org/oai"],
        ["new", "http://example.org/oai", "--id", "new"],
    ],
)
def test_harvesters_create_takes_its_id_and_base_url_as_arguments_too(args: list[str]) -> None:
    """`harvesters create ID BASE_URL`, as every other command names its harvester (it
    took `--id` and `--base-url` only: `create zenodo https://…` said `Missing option
    '--id'`)."""
    result = run("harvesters", "create", *args, "--metadata-prefix", "oai_dc", "--json")

    assert result.exit_code == 0, result.output
    created = json.loads(result.stdout)
    assert (created["id"], created["base_url"]) == ("new", "http://example.org/oai")
