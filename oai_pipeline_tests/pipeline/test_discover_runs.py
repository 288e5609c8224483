"""Which run a discovery continues, and what it keeps: the newest copy of a record listed
twice, the run's own cap across a crash, the first page's responseDate, a fresh run after
the operator changed what the harvester asks for."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest

from oai_pipeline.errors import InvalidArgument, PipelineError
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.oai.errors import HarvestProtocolError, OAIError
from oai_pipeline.oai.windows import parse_datestamp
from oai_pipeline.pipeline import runner as runner_module
from oai_pipeline.pipeline.discover import discover
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.runner import run_harvest
from oai_pipeline.pipeline.scope import HarvestScope, Window
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline_tests.oai.fake_source import (
    FakeRecord,
    FakeSource,
    Fault,
    drop_connection,
    html_page,
    make_records,
    oai_error,
    status,
    transform_body,
)
from oai_pipeline_tests.support import EVERYTHING, harvest_fake_source, raise_on_call

RESPONSE_DATE = "2026-01-01T00:00:00Z"  # what FakeSource answers


@pytest.fixture
def source(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> FakeSource:
    """A FakeSource behind the harvester `sample` (oai_dc)."""
    return harvest_fake_source(settings, monkeypatch, FakeSource(make_records(10), page_size=3))


def run_discover(services: Services, scope: HarvestScope = EVERYTHING, **options):
    return discover(services, scope, RunOptions(**options), progress=lambda _m: None)


@pytest.mark.parametrize("newer_first", [False, True])
def test_a_record_listed_twice_keeps_its_newest_copy(
    source: FakeSource, settings: Settings, newer_first: bool
) -> None:
    first = source.records[0]
    changed = FakeRecord(first.identifier, "2024-03-20T00:00:00Z", deleted=True)
    # The deleted copy a page later (the source changed it mid-sweep), or the reverse.
    if newer_first:
        source.records = [changed, *source.records[1:], first]
    else:
        source.records.append(changed)
    with Services(settings) as services:
        result = run_discover(services)
        record = services.state.get_record(first.identifier, "sample")
    assert result.counters["staged"] == 10
    assert result.counters["duplicates_skipped"] == 1
    assert (record["datestamp"], record["deleted"]) == (changed.datestamp, True)


def test_a_record_listed_twice_on_one_page_keeps_its_newest_copy(
    source: FakeSource, settings: Settings
) -> None:
    first = source.records[0]
    source.records.insert(1, FakeRecord(first.identifier, "2024-03-20T00:00:00Z", title="New"))
    with Services(settings) as services:
        run_discover(services)
        record = services.state.get_record(first.identifier, "sample")
    assert record["datestamp"] == "2024-03-20T00:00:00Z" and "New" in record["xml"]


def test_a_resumed_run_keeps_its_own_cap(
    source: FakeSource, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Services(settings) as services:
        raise_on_call(monkeypatch, services.state, "stage", 2, RuntimeError("killed"))
        with pytest.raises(RuntimeError, match="killed"):
            run_discover(services, max_records=5)
        # Run again without the cap: the run resumes, with the cap it was started with.
        result = run_discover(services)
    assert result.counters["staged"] == 5 and result.cap_reached


@pytest.mark.parametrize(
    ("first", "again", "staged"),
    [
        ({}, {"max_records": 5}, 5),  # before: the stopped uncapped run resumed, 10 staged
        ({"max_records": 5}, {"scale": "full"}, 10),
        ({}, {"update_all": True}, 10),
    ],
)
def test_a_run_asked_otherwise_than_the_stopped_one_is_not_resumed(
    source: FakeSource,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    first: dict,
    again: dict,
    staged: int,
) -> None:
    """A run stopped, then the operator asks again with a cap (or --update-all): before, the
    run resumed with its own options, silently, and the harvest was not the one asked for."""
    told: list[str] = []
    with Services(settings) as services:
        raise_on_call(monkeypatch, services.state, "stage", 2, RuntimeError("killed"))
        with pytest.raises(RuntimeError, match="killed"):
            run_discover(services, **first)
        (stopped,) = services.state.list_runs(harvester_id="sample")
        result = discover(services, EVERYTHING, RunOptions(**again), progress=told.append)
        old = services.state.get_run(stopped["id"])
        new = services.state.get_run(result.run_id)
    assert result.run_id != stopped["id"] and result.counters["staged"] == staged
    assert old["status"] == "stopped" and old["error"].startswith("superseded: it was started")
    assert (new["max_records"] or 0) == RunOptions(**again).cap
    assert any(f"harvest run {stopped['id']} of this window" in line for line in told), told


def test_resume_refuses_a_superseded_run_and_leaves_it_superseded(
    source: FakeSource, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, `--resume` of a run a later harvest superseded made it `running` again (its
    error, which said so, cleared) and resumed it from its token: a rekeyed source's old
    identifiers, or here a run the operator replaced by a capped one."""
    with Services(settings) as services:
        raise_on_call(monkeypatch, services.state, "stage", 2, RuntimeError("killed"))
        with pytest.raises(RuntimeError, match="killed"):
            run_discover(services)
        (stopped,) = services.state.list_runs(harvester_id="sample")
        run_discover(services, max_records=5)  # supersedes it
        with pytest.raises(InvalidArgument, match="cannot be resumed: it was superseded"):
            run_discover(services, resume_batch_id=stopped["id"])
        with pytest.raises(PipelineError, match="no attempt takes it up again"):
            services.state.resume_run(stopped["id"], "a-dagster-run")
        old = services.state.get_run(stopped["id"])
        resumable = services.state.find_resumable_run("sample", None, None)
    assert old["status"] == "stopped" and old["error"].startswith("superseded: it was started")
    assert old["dagster_run_id"] is None
    assert resumable is None or resumable["id"] != stopped["id"]


def test_a_run_resuming_a_token_the_source_forgot_completes(
    source: FakeSource, settings: Settings
) -> None:
    """The source failed mid-list, then restarted and answers the saved token with a bare
    404. Before, the rerun failed on it, and so would every rerun after it."""
    source.faults = {number: status(500) for number in range(3, 10)}  # page two, 7 tries
    with Services(settings) as services:
        with pytest.raises(HarvestProtocolError, match="HTTP 500"):
            run_discover(services)
        (failed,) = services.state.list_runs(harvester_id="sample")
        assert failed["checkpoint"].resumption_token
        source.faults = {len(source.requests) + 2: status(404)}  # after Identify
        result = run_discover(services)
        run = services.state.get_run(result.run_id)
    assert result.run_id == failed["id"] and result.counters["staged"] == 10
    assert (run["status"], run["error"]) == ("running", None)  # the later stages follow


def test_a_source_down_fails_the_harvest_run_with_why(
    source: FakeSource, settings: Settings
) -> None:
    """Before, Identify failed first and no harvest run saw the failure: `status` went on
    showing the last run as if nothing had happened."""
    with Services(settings) as services:
        first = run_discover(services)
        source.every = (1, status(500))  # Identify too
        with pytest.raises(HarvestProtocolError, match="HTTP 500"):
            run_discover(services)
        run = services.state.get_run(first.run_id)
    assert run["status"] == "failed" and "HTTP 500" in run["error"]


def _at_identify(fault: Fault) -> Fault:
    def only_identify(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        return fault(request, response) if "Identify" in str(request.url) else response

    return only_identify


@pytest.mark.parametrize(
    "fault",
    [
        status(500),
        # not well-formed outside its descriptions (the page is unreadable at every try)
        transform_body(lambda body: body.replace(b"</repositoryName>", b"<x></repositoryName>")),
        oai_error("badVerb"),
        oai_error(""),  # an error of the source's own: retried, then a failure
    ],
    ids=["http-500", "not-well-formed", "oai-error", "own-error"],
)
def test_a_broken_identify_alone_does_not_stop_the_harvest(
    source: FakeSource, settings: Settings, fault: Fault
) -> None:
    """A source that answers, but not Identify: a first harvest failed for ever, though its
    lists work; it needs of Identify only the granularity, and whole days stand in (every
    source takes them). Nothing is saved as its Identify, so no reconcile is scheduled on a
    guessed deletion policy; once identified, a failing Identify serves the saved one."""
    dated = HarvestScope("sample", (Window("2024", datetime(2024, 1, 1, tzinfo=UTC), None),))
    with Services(settings) as services:
        source.every = (1, _at_identify(fault))
        first = run_discover(services, dated)
        assert services.state.get_identify("sample") is None
        (notice,) = [n for n in first.notices if "Identify failed" in n]
        assert "listed by whole days" in notice and "no reconcile is scheduled" in notice
        assert first.counters["staged"] == 10
        assert source.list_dates[-1] == ("2024-01-01", None)  # in days, not seconds
        assert services.state.get_run(first.run_id)["status"] != "failed"
        services.state.finish_run(first.run_id, "succeeded")
        source.every = None
        second = run_discover(services, dated)  # identified now: in seconds, saved
        services.state.finish_run(second.run_id, "succeeded")
        assert services.state.get_identify("sample") is not None
        assert source.list_dates[-1] == ("2024-01-01T00:00:00Z", None)
        source.records.append(FakeRecord("oai:fake.test:new", "2024-03-02T00:00:00Z"))
        source.every = (1, _at_identify(fault))
        asked_before = len(source.verbs)
        third = run_discover(services, dated)
    assert third.counters["staged"] == 11
    # with the saved one standing by, asked once, not waited out at every harvest
    assert source.verbs[asked_before:].count("Identify") == 1
    assert source.list_dates[-1] == ("2024-01-01T00:00:00Z", None)  # the saved Identify's form
    assert not [n for n in third.notices if "Identify failed" in n]


def test_an_identify_found_broken_is_asked_once_at_the_next_harvest(
    source: FakeSource, settings: Settings
) -> None:
    """A never-identified source whose last harvest found its Identify broken (and listed by
    days) is asked once: each harvest of it waited out the client's retries (a minute with
    the defaults) for an answer that did not come. No answer at all is still waited out,
    and an Identify that answers again is saved."""
    dated = HarvestScope("sample", (Window("2024", datetime(2024, 1, 1, tzinfo=UTC), None),))

    def identify_tries_of(harvest: Callable[[], object]) -> int:
        before = len(source.verbs)
        harvest()
        return source.verbs[before:].count("Identify")

    with Services(settings) as services:

        def harvest_and_settle() -> None:
            result = run_discover(services, dated)
            services.state.finish_run(result.run_id, "succeeded")

        source.every = (1, _at_identify(status(500)))
        assert identify_tries_of(harvest_and_settle) > 2  # waited out: it may be passing
        assert identify_tries_of(harvest_and_settle) == 1  # found broken last time
        assert source.list_dates[-1] == ("2024-01-01", None)
        assert services.state.get_identify("sample") is None
        source.every = (1, _at_identify(drop_connection))  # no answer: a source down?
        asked_before = len(source.verbs)
        with pytest.raises(HarvestProtocolError, match="Identify"):
            run_discover(services, dated)
        assert source.verbs[asked_before:].count("Identify") > 2
        source.every = None
        # the failed run noted no broken Identify: asked as for any first contact
        assert identify_tries_of(harvest_and_settle) == 1
        assert services.state.get_identify("sample") is not None
        assert source.list_dates[-1] == ("2024-01-01T00:00:00Z", None)


@pytest.mark.parametrize(
    "fault", [drop_connection, html_page, status(404)], ids=["no-answer", "web-page", "404"]
)
def test_a_first_identify_without_an_answer_or_at_a_wrong_address_fails_the_run(
    source: FakeSource, settings: Settings, fault: Fault
) -> None:
    """No answer at all (a host down) or no endpoint there (a web page, a 404: a wrong base
    URL): asking for the list would only meet it again, so the run fails at Identify, a
    failure `status` tells."""
    with Services(settings) as services:
        source.every = (1, _at_identify(fault))
        with pytest.raises(HarvestProtocolError, match="Identify"):
            run_discover(services)
        (never,) = services.state.list_runs(harvester_id="sample")
    assert never["status"] == "failed" and "Identify" in never["error"]
    assert set(source.verbs) == {"Identify"}


@pytest.mark.parametrize(
    "scope",
    [
        EVERYTHING,  # one page
        HarvestScope(  # noRecordsMatch
            "sample", (Window("2030", datetime(2030, 1, 1, tzinfo=UTC), None),)
        ),
    ],
    ids=["one-page", "no-records-match"],
)
def test_a_sweep_of_one_page_keeps_its_response_date(
    source: FakeSource, settings: Settings, scope: HarvestScope
) -> None:
    source.page_size = 100
    with Services(settings) as services:
        result = run_discover(services, scope)
        assert services.state.get_run(result.run_id)["response_date"] == RESPONSE_DATE


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("2026-01-01T02:00:00+02:00", RESPONSE_DATE),  # an offset: in UTC with Z
        ("2026-01-01T00:00:00", RESPONSE_DATE),  # no zone: UTC, as OAI-PMH knows no other
        ("2026-01-01T00:00:00.5Z", RESPONSE_DATE),
        ("yesterday", None),  # no date: our clock before the first request
    ],
)
def test_the_response_date_is_kept_in_one_form(
    source: FakeSource, settings: Settings, sent: str, kept: str | None
) -> None:
    source.page_size = 100
    source.every = (
        1,
        transform_body(lambda body: body.replace(RESPONSE_DATE.encode(), sent.encode())),
    )
    before = datetime.now(UTC).replace(microsecond=0)
    with Services(settings) as services:
        result = run_discover(services)
        stored = services.state.get_run(result.run_id)["response_date"]
    if kept is not None:
        assert stored == kept
    else:
        assert before <= parse_datestamp(stored) <= datetime.now(UTC)


def test_after_the_operator_fixes_the_prefix_a_new_run_starts(
    source: FakeSource, settings: Settings
) -> None:
    with Services(settings) as services:
        registry = HarvesterRegistry(services.state)
        registry.update("sample", metadata_prefix="marcxml")
        with pytest.raises(OAIError, match="cannotDisseminateFormat"):
            run_discover(services)
        (failed,) = services.state.list_runs(harvester_id="sample")
        registry.update("sample", metadata_prefix="oai_dc")
        with pytest.raises(PipelineError, match="changed from 'marcxml' to 'oai_dc'"):
            run_discover(services, resume_batch_id=failed["id"])

        result = run_discover(services)
        assert result.run_id != failed["id"] and result.counters["staged"] == 10
        old = services.state.get_run(failed["id"])
    assert old["status"] == "stopped" and "superseded" in old["error"]


def test_capped_runs_get_past_records_they_already_handled(
    source: FakeSource, settings: Settings
) -> None:
    # Deleted headers (never a local record) first, then live records this model cannot
    # import (oai_dc without creators): each fails with the same datestamp every time.
    for record in source.records[:4]:
        record.deleted = True
    identifiers = [record.identifier for record in source.records]
    with Services(settings) as services:
        for _ in range(5):  # 10 records, 2 a run
            report = run_harvest(
                services, EVERYTHING, RunOptions(max_records=2), progress=lambda _m: None
            )
            assert report.harvested == 2
        assert set(services.state.get_memories("sample", identifiers)) == set(identifiers)
        assert report.error_types == {"missing_field": 2}
        # Asked to, a capped run retries the failed ones.
        again = run_harvest(
            services,
            EVERYTHING,
            RunOptions(max_records=2, retry_failed=True),
            progress=lambda _m: None,
        )
    assert again.error_types == {"missing_field": 2}


@pytest.mark.parametrize("now_deleted", [True, False])
def test_a_capped_run_takes_a_status_change_under_the_same_datestamp(
    source: FakeSource, settings: Settings, now_deleted: bool
) -> None:
    """The same datestamp with the other status is the source's later word: not a record
    the capped run already handled."""
    changing = source.records[0]
    changing.raw_metadata = (  # what the rdm model imports (the others fail: no creator)
        '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Changing</dc:title>'
        "<dc:creator>Doe, Jane</dc:creator><dc:date>2024-01-01</dc:date></oai_dc:dc>"
    )
    changing.deleted = not now_deleted
    with Services(settings) as services:
        run_harvest(services, EVERYTHING, RunOptions(), progress=lambda _m: None)
        changing.deleted = now_deleted
        report = run_harvest(
            services, EVERYTHING, RunOptions(max_records=5), progress=lambda _m: None
        )
        record = services.state.get_record(changing.identifier, "sample")
    assert report.harvested == 1
    assert record["deleted"] is now_deleted
    assert report.actions == {("delete" if now_deleted else "create"): 1}


def test_a_second_harvest_started_between_the_stages_of_the_first_waits_for_it(
    source: FakeSource, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `oai-pipeline harvest` of one harvester at once: the second does not continue the
    first one's run (its Parquet partitions and records) while the first is still at it."""
    paused, go_on = threading.Event(), threading.Event()
    real_plan = runner_module.plan

    def plan_pausing_the_first(services, scope, options):
        if threading.current_thread().name == "first":
            paused.set()
            assert go_on.wait(30)
        return real_plan(services, scope, options)

    monkeypatch.setattr(runner_module, "plan", plan_pausing_the_first)
    reports = {}

    def harvest() -> None:
        with Services(settings) as services:
            reports[threading.current_thread().name] = run_harvest(
                services, EVERYTHING, RunOptions(), progress=lambda _m: None
            )

    first = threading.Thread(target=harvest, name="first")
    first.start()
    assert paused.wait(30)
    second = threading.Thread(target=harvest, name="second")
    second.start()
    second.join(timeout=1)
    go_on.set()
    first.join(timeout=60)
    second.join(timeout=60)

    assert reports["first"].run_id != reports["second"].run_id
    assert reports["first"].harvested == reports["second"].harvested == 10


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_run_whose_export_fails_is_not_left_running(
    source: FakeSource,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    error: BaseException,
) -> None:
    """The sweep done, writing its Parquet part fails (a full disk) or is interrupted: the
    run ends failed or stopped. It stayed `running` after the process ended, for `status`
    and the next harvest, which called it killed."""
    with Services(settings) as services:
        raise_on_call(monkeypatch, services.storage, "write_part", 1, error)
        with pytest.raises(type(error)):
            run_discover(services)
        run = services.state.list_runs(harvester_id="sample", limit=1)[0]
    expected = "failed" if isinstance(error, Exception) else "stopped"
    assert run["status"] == expected and type(error).__name__ in run["error"]


def test_resume_refuses_a_run_that_succeeded(source: FakeSource, settings: Settings) -> None:
    """Before, `--resume` of a succeeded run made it `running` again and listed its window
    once more from the start (a catch-up it was not asked for, under an old run's number):
    a succeeded run has nothing left to resume."""
    with Services(settings) as services:
        result = run_harvest(services, EVERYTHING, RunOptions(), progress=lambda _m: None)
        done = services.state.get_run(result.run_id)
        assert done["status"] == "succeeded"
        with pytest.raises(InvalidArgument, match="cannot be resumed: it succeeded"):
            run_discover(services, resume_batch_id=done["id"])
        after = services.state.get_run(done["id"])
        runs = services.state.list_runs(harvester_id="sample")
    assert after["status"] == "succeeded" and after["finished_at"] == done["finished_at"]
    assert len(runs) == 1
