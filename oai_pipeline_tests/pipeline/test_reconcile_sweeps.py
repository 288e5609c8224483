"""Reconcile against a source that pages by offset and drops a record while it is listed."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from oai_pipeline.cli import main
from oai_pipeline.errors import PipelineError
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.oai.errors import UnknownSet
from oai_pipeline.oai.reader import OAIPMHReader
from oai_pipeline.oai.types import HarvestedRecord
from oai_pipeline.pipeline import discover as discover_module
from oai_pipeline.pipeline import reconcile as reconcile_module
from oai_pipeline.pipeline.discover import discover
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.reconcile import ReconcileReport, reconcile
from oai_pipeline.pipeline.runner import run_harvest
from oai_pipeline.pipeline.scope import HarvestScope, Window
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline.state.harvester_lock import HarvesterLock, new_owner
from oai_pipeline.sync.reconcile import spread_sample
from oai_pipeline_tests.oai.fake_source import (
    BASE_URL,
    FakeRecord,
    FakeSource,
    Fault,
    SetBlindSizeSource,
    ShortCountSource,
    expire_tokens,
    html_page,
    make_records,
    no_records_match,
    transform_body,
)
from oai_pipeline_tests.support import oai_dc, register, target_by_source


@pytest.fixture
def source(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> FakeSource:
    """A FakeSource (offset tokens, deletedRecord=no) behind the harvester `sample`, its
    ten records harvested."""
    return _harvested(settings, monkeypatch, 10)


def _harvested(
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    count: int,
    *,
    fake: FakeSource | None = None,
    setspec: str | None = None,
) -> FakeSource:
    fake = fake or FakeSource(make_records(count), page_size=3, deleted_record="no")
    register(settings, BASE_URL, metadata_prefix="oai_dc", setspec=setspec)

    def reader(harvester):
        return OAIPMHReader(None, harvester, transport=fake.transport(), sleep=lambda _s: None)

    monkeypatch.setattr(discover_module, "build_reader", reader)
    monkeypatch.setattr(reconcile_module, "build_reader", reader)
    with Services(settings) as services:
        scope = HarvestScope("sample", (Window("all", None, None),))
        discover(services, scope, RunOptions(), progress=lambda _m: None)
    return fake


def test_a_record_shifted_past_a_page_by_a_deletion_is_not_taken_for_deleted(
    source: FakeSource, settings: Settings
) -> None:
    """Before, the record the deletion shifted onto the first page was listed by no page,
    and reconcile deleted it in the target although the source still has it."""
    dropped = source.records[0]
    shifted = source.records[3]  # first on page two, on page one once the list shrank

    def drop_after_page_one(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        source.records.remove(dropped)
        return source.answer(request)

    source.faults[len(source.requests) + 3] = drop_after_page_one  # Identify, page one, here
    with Services(settings) as services:
        report = reconcile(services, "sample")
        assert services.state.get_record(shifted.identifier, "sample")["deleted"] is False
        # Listed again until a sweep saw one list; what any sweep listed is kept, so the
        # record dropped meanwhile goes with the next reconcile.
        assert source.verbs.count("ListIdentifiers") == 3 + 3
        assert report.vanished == []
        # Before, only logged: the report (text and --json) now says the list changed.
        assert report.notices == [
            "the source's list changed while it was listed (completeListSize 9, 10 in "
            "sweep 1); listed again"
        ]
        assert reconcile(services, "sample").vanished == [dropped.identifier]
        assert services.state.get_record(shifted.identifier, "sample")["deleted"] is False


def test_a_stable_list_is_swept_once(source: FakeSource, settings: Settings) -> None:
    source.records.pop()
    with Services(settings) as services:
        report = reconcile(services, "sample")
    assert len(report.vanished) == 1 and source.verbs.count("ListIdentifiers") == 3


def test_many_vanished_records_cost_at_most_the_budget_in_get_records(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before deleting, a reconcile asks GetRecord for each vanished record, up to its
    budget (here 10), spread over them: 12 vanished cost 10 more requests, not 12; all 10
    confirmed gone, the other 2 are deleted too, and the report says so."""
    fake = _harvested(settings, monkeypatch, 30)
    monkeypatch.setattr(reconcile_module, "CONFIRM_BUDGET", 10)
    gone = [record.identifier for record in fake.records[5:17]]
    del fake.records[5:17]
    sent = len(fake.requests)
    with Services(settings) as services:
        report = reconcile(services, "sample")
        assert report.vanished == sorted(gone)
        assert all(services.state.get_record(i, "sample")["deleted"] for i in gone)
    asked = [r.url.params.get("identifier") for r in fake.requests[sent:]]
    asked = [identifier for identifier in asked if identifier]
    assert asked == spread_sample(gone, 10) and len(asked) == 10
    assert report.notices == [
        "GetRecord confirmed gone all 10 records asked for (a reconcile asks GetRecord for 10 "
        "at most): the other 2 records the source's list no longer holds were deleted without "
        "asking"
    ]


def test_a_get_record_timing_out_is_retried_and_one_that_keeps_timing_out_deletes_nothing(
    source: FakeSource, settings: Settings
) -> None:
    """The client's retry policy gets past a passing timeout; a GetRecord that times out at
    every try proves nothing, so the reconcile deletes nothing and says why."""
    gone = source.records.pop(4).identifier
    answer = source.answer
    timeouts = {"left": 1_000}

    def timing_out(request: httpx.Request) -> httpx.Response:
        if request.url.params["verb"] == "GetRecord" and timeouts["left"]:
            timeouts["left"] -= 1
            raise httpx.ReadTimeout("timed out", request=request)
        return answer(request)

    source.answer = timing_out  # type: ignore[method-assign]
    with Services(settings) as services:
        with pytest.raises(PipelineError) as refused:
            reconcile(services, "sample")
        assert f"GetRecord of {gone} failed (http://fake.test/oai (GetRecord): gave up" in str(
            refused.value
        )
        assert "ReadTimeout: timed out): whether they are gone is not confirmed" in str(
            refused.value
        )
        assert services.state.get_record(gone, "sample")["deleted"] is False
        # the client's 6 retries of the first try, then no other record asked
        assert source.verbs.count("GetRecord") == 7

        timeouts["left"] = 2
        assert reconcile(services, "sample").vanished == [gone]
        assert services.state.get_record(gone, "sample")["deleted"] is True
    assert source.verbs.count("GetRecord") == 7 + 3


def _get_record_answering(
    source: FakeSource, answers: dict[str, str], saying: str = "not here"
) -> None:
    """GetRecord of each identifier in `answers` gets that OAI-PMH error code, naming it."""
    answer = source.answer

    def answering(request: httpx.Request) -> httpx.Response:
        identifier = request.url.params.get("identifier")
        if request.url.params["verb"] == "GetRecord" and identifier in answers:
            return source.error(answers[identifier], f"{identifier}: {saying}", status=422)
        return answer(request)

    source.answer = answering  # type: ignore[method-assign]


def test_get_records_saying_the_source_does_not_serve_a_vanished_record_confirm_it_gone(
    source: FakeSource, settings: Settings
) -> None:
    """A source that can no longer disseminate the record in the harvester's prefix, or
    refuses its identifier as one it does not have, says as its list does that it does not
    serve it: the vanished records are deleted, as with idDoesNotExist."""
    gone = [source.records.pop(i).identifier for i in (6, 4, 2)]
    _get_record_answering(
        source,
        {gone[0]: "cannotDisseminateFormat", gone[1]: "badArgument"},
        saying="no such record",
    )  # the third: the source's own idDoesNotExist
    with Services(settings) as services:
        assert reconcile(services, "sample").vanished == sorted(gone)
        assert all(services.state.get_record(i, "sample")["deleted"] for i in gone)


def test_a_get_record_refusing_a_vanished_records_identifier_keeps_it(
    source: FakeSource, settings: Settings
) -> None:
    """badArgument to an identifier the source issued itself says it cannot read it (a `/`
    or `+` decoded wrongly), not that the record is gone: kept, not deleted, even after
    GetRecords in the prefix answered (which makes it an error of that record)."""
    gone, unreadable = (source.records.pop(i).identifier for i in (6, 2))
    _get_record_answering(source, {unreadable: "badArgument"}, saying="illegal identifier")
    with Services(settings) as services:
        report = reconcile(services, "sample")
        assert report.vanished == [gone]
        assert report.kept.to_dict() == {"served": [], "unconfirmed": [unreadable], "unasked": 0}
        assert services.state.get_record(unreadable, "sample")["deleted"] is False
        assert services.state.get_record(gone, "sample")["deleted"] is True
    assert any(
        f"(e.g. {unreadable}: {unreadable}: illegal identifier)" in notice
        for notice in report.notices
    )


def test_what_the_get_record_check_noted_of_the_source_is_in_the_reconciles_report(
    source: FakeSource, settings: Settings
) -> None:
    """The GetRecord check's quirks of the source (a <request> echoing another identifier
    with the record asked for) are told in the report, as its sweeps' are."""
    gone = source.records[4]
    gone.deleted = True  # listed as deleted (not live), GetRecord's header deleted too
    answer = source.answer

    def echoing_another(request: httpx.Request) -> httpx.Response:
        response = answer(request)
        if request.url.params["verb"] != "GetRecord":
            return response
        echo = b'<request identifier="oai:fake.test:another" '
        return httpx.Response(
            response.status_code,
            content=response.content.replace(b"<request ", echo),
            headers=response.headers,
        )

    source.answer = echoing_another  # type: ignore[method-assign]
    with Services(settings) as services:
        report = reconcile(services, "sample")
        assert report.vanished == [gone.identifier]
    assert [n for n in report.notices if "GetRecord" in n] == [
        f"{BASE_URL} (GetRecord): the source answered GetRecord for identifier "
        f"'oai:fake.test:another', not {gone.identifier!r} on every try, with the record "
        "asked for; the source's <request> no longer judged"
    ]


def test_a_get_record_answering_with_another_record_deletes_nothing(
    source: FakeSource, settings: Settings
) -> None:
    """GetRecord of the vanished record answered by another record at every try (a proxy
    mixing answers up) says nothing of it: nothing is deleted, and the error says why."""
    gone = source.records.pop(4).identifier
    other = source.records[0]
    answer = source.answer

    def mixed_up(request: httpx.Request) -> httpx.Response:
        if request.url.params["verb"] == "GetRecord":
            request = httpx.Request(
                "GET", request.url.copy_set_param("identifier", other.identifier)
            )
        return answer(request)

    source.answer = mixed_up  # type: ignore[method-assign]
    with Services(settings) as services:
        with pytest.raises(PipelineError) as refused:
            reconcile(services, "sample")
        assert f"GetRecord of {gone} failed (the source answered with record " in str(refused.value)
        assert services.state.get_record(gone, "sample")["deleted"] is False


MOVED = (
    "http://fake.test/oai: the source's Identify names another base URL, "
    "https://fake.test/oai; harvesting the registered one (if the source lives there, "
    "set the harvester's base URL to it)"
)


def test_the_notices_of_a_reconcile_are_in_its_report(source: FakeSource) -> None:
    """Before, what the reader noted of the source during a reconcile was only logged: its
    report (text and --json) said nothing of it."""
    source.identify_base_url = "https://fake.test/oai"
    text = CliRunner().invoke(main, ["reconcile", "sample"])
    data = CliRunner().invoke(main, ["reconcile", "sample", "--json"])
    assert text.exit_code == 0 and data.exit_code == 0
    assert f"  note: {MOVED}" in text.stdout.splitlines()
    assert json.loads(data.stdout)["notices"] == [MOVED]


def test_a_failed_sweep_says_what_the_source_did_before_it_failed(source: FakeSource) -> None:
    """Before, a reconcile whose sweep failed printed the error alone: the notices its
    reader met (here, a source that moved) were lost with the report it never made."""
    source.identify_base_url = "https://fake.test/oai"
    refuse = source.error("badArgument", "no such set")

    def reconcile_failing(*args: str):  # its second request, the first page, is refused
        source.faults[len(source.requests) + 2] = lambda request, response: refuse
        return CliRunner().invoke(main, ["reconcile", "sample", *args])

    text, data = reconcile_failing(), reconcile_failing("--json")
    assert text.exit_code == 1 and "badArgument" in text.stderr
    assert f"  note: {MOVED}" in text.stderr.splitlines()
    assert f"  note: {MOVED}" in json.loads(data.stdout)["error"]


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda body: body[: len(body) // 2], "not well-formed XML"),  # cut at one byte
        (lambda body: b"Error: the index is being rebuilt", "not XML at all (its body: 'Error"),
        (lambda body: b"<?xml version='1.0'?><status>broken</status>", "not an OAI-PMH"),
    ],
    ids=["cut-short", "not-xml", "other-xml"],
)
def test_a_list_page_the_same_unreadable_bytes_twice_is_not_retried_further(
    source: FakeSource, settings: Settings, change: Callable[[bytes], bytes], error: str
) -> None:
    """A ListIdentifiers page the source sends unreadable, byte for byte the same at each
    try (a page it cuts at the same byte, a notice in its place): before, the reconcile
    asked for it at each of the client's 7 tries, a minute of backoff, and failed the same
    way. The second copy ends it, the error saying so; nothing is deleted."""
    gone = source.records.pop().identifier
    on_page_two = transform_body(change)
    sent = len(source.requests)
    source.faults.update(dict.fromkeys(range(sent + 3, sent + 20), on_page_two))

    with Services(settings) as services, pytest.raises(PipelineError) as refused:
        reconcile(services, "sample")

    assert len(source.requests) - sent == 1 + 1 + 2  # Identify, page one, page two twice
    assert error in str(refused.value)
    assert "the same bytes at 2 tries in a row: the source's answer, not retried further" in (
        str(refused.value)
    )
    with Services(settings) as services:
        assert services.state.get_record(gone, "sample")["deleted"] is False


def test_a_list_page_unreadable_in_other_ways_at_each_try_is_still_retried(
    source: FakeSource, settings: Settings
) -> None:
    """Bodies cut short at another byte each time (connections dropped), or a web page (a
    proxy's maintenance page, waited out): retried as before."""
    tries = iter(range(1, 100))
    cut_elsewhere = transform_body(lambda body: body[: len(body) // 2 - next(tries)])
    sent = len(source.requests)
    source.faults.update(dict.fromkeys(range(sent + 3, sent + 6), cut_elsewhere))
    source.faults.update(dict.fromkeys(range(sent + 6, sent + 9), html_page))

    with Services(settings) as services:
        report = reconcile(services, "sample")

    assert report.vanished == []
    assert len(source.requests) - sent == 1 + 4 + 6  # Identify, 4 pages, page two retried 6 times


def test_a_reconcile_refused_for_a_list_ended_early_says_so(
    source: FakeSource, settings: Settings
) -> None:
    """The source answered the second page with an empty list and no token: 7 of its 10
    records look vanished. The refusal names the list size the source announced."""

    def empty(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        return source.xml("ListIdentifiers", "<ListIdentifiers/>")

    source.faults[len(source.requests) + 3] = empty  # Identify, page one, here
    with Services(settings) as services, pytest.raises(PipelineError) as refused:
        reconcile(services, "sample")
    assert (
        "deletes nothing: the source's list ended after 3 of the 10 records it announced "
        "(completeListSize): 7 harvested records"
    ) in str(refused.value)
    assert (
        "  note: http://fake.test/oai (ListIdentifiers): the list ended after 3 records, "
        "7 fewer than the 10 the source announced (completeListSize)"
    ) in str(refused.value)


@pytest.mark.parametrize(
    ("count", "listed"),
    [(30, 18), (10, 6)],
    ids=["12 of 30 short", "4 of 10 short"],
)
def test_a_list_ended_short_of_its_size_deletes_nothing_even_when_few_vanished(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, count: int, listed: int
) -> None:
    """The list ended after `listed` records (pages of 3): those it never sent are no proof
    of deletions (only a complete sweep is). Before, 12 of 30 is not most, so all 12 were
    deleted; and 4 of 10 was within the slack of a large list (5) too."""
    fake = _harvested(settings, monkeypatch, count)

    def empty(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        return fake.xml("ListIdentifiers", "<ListIdentifiers/>")

    fake.faults[len(fake.requests) + 2 + listed // 3] = empty  # Identify, the pages, here
    with Services(settings) as services:
        refusal = _refusal(services)
        assert f"ended after {listed} of the {count} records it announced" in refusal
        assert f"  note: {BASE_URL} (ListIdentifiers): the list ended after {listed}" in refusal
        assert services.state.live_identifiers("sample") == {r.identifier for r in fake.records}
        fake.faults.clear()
        assert reconcile(services, "sample").vanished == []  # the whole list: nothing gone


def test_a_list_short_of_its_size_at_the_same_point_twice_deletes_nothing(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source now sends 7 of its 10 records and announces 10, its last page naming a
    token it answers with noRecordsMatch, the same in the redone window: taken as the end
    of the list, which ended short. Before, the reconcile failed on the restarts; now it
    deletes nothing by it, saying why."""
    fake = ShortCountSource(make_records(10), page_size=5, extra=0, deleted_record="no")
    _harvested(settings, monkeypatch, 10, fake=fake)
    fake.records, fake.extra = fake.records[:7], 3
    with Services(settings) as services:
        refusal = _refusal(services)
        assert "ended after 7 of the 10 records it announced" in refusal
        assert (
            f"  note: {BASE_URL} (ListIdentifiers): the source answered noRecordsMatch to its "
            "resumption token after 7 of the 10 records its completeListSize announced, twice "
            "at the same point; taken as the end of the list"
        ) in refusal
        assert len(services.state.live_identifiers("sample")) == 10


def _again_with_a_fresh_token(source: FakeSource) -> Fault:
    """The list's first page sent again, with a token never issued before that names the
    same place (as sources keying tokens to server state do)."""

    def fault(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        lists = [r for r in source.requests if r.url.params.get("verb") == "ListIdentifiers"]
        first = next(r for r in reversed(lists) if "resumptionToken" not in r.url.params)
        answer = source.answer(first)
        token = re.search(rb">([^<]+)</resumptionToken>", answer.content)[1]
        state = {**json.loads(base64.urlsafe_b64decode(token)), "again": True}
        fresh = base64.urlsafe_b64encode(json.dumps(state).encode())
        body = answer.content.replace(token, fresh)
        return httpx.Response(answer.status_code, content=body, headers=answer.headers)

    return fault


@pytest.mark.parametrize("fault", ["token expired", "page sent again"])
def test_a_list_counted_twice_that_ended_short_deletes_nothing(
    source: FakeSource, settings: Settings, fault: str
) -> None:
    """10 records, the list ended after 6 (an empty page, no token), after its page one was
    read twice: the source expired the token and the list was redone from its start, or
    sent page one again with a fresh token. The sweep counted that page twice, 9 listed of
    10 looked whole, and reconcile deleted the 4 records never sent. The client's count
    (each record once) is the one that says whether the list ended short."""
    start = len(source.requests)
    if fault == "token expired":
        source.faults[start + 3] = expire_tokens(source)  # Identify, page one, here
        empty_at = start + 6  # page one and two again, here
    else:
        source.faults[start + 3] = _again_with_a_fresh_token(source)  # page one again
        empty_at = start + 5  # page two, here

    def empty(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        return source.xml("ListIdentifiers", "<ListIdentifiers/>")

    source.faults[empty_at] = empty
    with Services(settings) as services:
        assert "ended after 6 of the 10 records it announced" in _refusal(services)
        assert services.state.live_identifiers("sample") == {r.identifier for r in source.records}


def _refusal(services: Services) -> str:
    """The error of a reconcile of `sample` that refuses to delete (it must)."""
    with pytest.raises(PipelineError) as refused:
        reconcile(services, "sample")
    return str(refused.value)


@pytest.mark.parametrize("identifier", ["", "  "], ids=["empty", "blank"])
def test_a_header_without_identifier_deletes_nothing_without_force(
    source: FakeSource, settings: Settings, identifier: str
) -> None:
    """The source now sends one record's header without its identifier: that record looks
    vanished, though the header may well be its own. Before, 1 of 10 looked like a deletion
    and reconcile deleted it from the target; a sweep with such a header is not complete."""
    broken = source.records[4]
    kept = broken.identifier
    broken.identifier = identifier
    with Services(settings) as services:
        assert (
            "deletes nothing: the source listed 1 record without an identifier (it may be "
            "any of the vanished ones): 1 harvested records would be deleted"
        ) in _refusal(services)
        assert services.state.get_record(kept, "sample")["deleted"] is False
        assert reconcile(services, "sample", force=True).vanished == [kept]
        assert services.state.get_record(kept, "sample")["deleted"] is True


def _in_set(records: list, count: int) -> list:
    """The first `count` records in the set `s1`, the others in none."""
    for record in records[:count]:
        record.sets = ["s1"]
    return records


SET_BLIND = (
    "http://fake.test/oai: the source's completeListSize counts the whole source, not the "
    "set (a set's list announces the size of the list without the set): a set's list that "
    "ends normally is taken as whole"
)


def test_a_set_whose_list_size_counts_the_whole_source_is_reconciled_without_force(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The set's 9 records are listed whole, but the source announces its 30 as the set's
    completeListSize. Before, every reconcile of that set called its list cut short and
    refused to delete the record that left the set without --force."""
    records = _in_set(make_records(30), 9)
    fake = SetBlindSizeSource(records, page_size=3, deleted_record="no")
    _harvested(settings, monkeypatch, 0, fake=fake, setspec="s1")
    records[4].sets = []  # left the set: the target mirrors the set
    sent = len(fake.requests)
    with Services(settings) as services:
        report = reconcile(services, "sample")
        assert services.state.get_record(records[4].identifier, "sample")["deleted"] is True
    assert report.vanished == [records[4].identifier] and report.notices[0] == SET_BLIND
    # one sweep of the set (3 pages), and the first page of the list without the set; then
    # GetRecord of the vanished record, whose header names no set, and of a record the set's
    # list holds, whose header names the set: the vanished one is in no set
    pages = [dict(r.url.params) for r in fake.requests[sent:]][1:]  # after Identify
    assert len(pages) == 6 and pages[3] == {"verb": "ListIdentifiers", "metadataPrefix": "oai_dc"}
    assert [(p["verb"], p["identifier"]) for p in pages[4:]] == [
        ("GetRecord", records[4].identifier),
        ("GetRecord", records[0].identifier),
    ]
    assert report.notices[1].endswith("taken as gone from the set s1")


def test_a_set_whose_list_ends_short_of_the_sets_size_still_deletes_nothing(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The size the source announces is the set's (the list without the set is larger): a
    set's list that ends early is still no proof that the records it never sent are gone."""
    fake = FakeSource(_in_set(make_records(30), 12), page_size=3, deleted_record="no")
    _harvested(settings, monkeypatch, 0, fake=fake, setspec="s1")

    def empty(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        return fake.xml("ListIdentifiers", "<ListIdentifiers/>")

    fake.faults[len(fake.requests) + 3] = empty  # Identify, page one, here
    with Services(settings) as services, pytest.raises(PipelineError) as refused:
        reconcile(services, "sample")
    assert "the source's list ended after 3 of the 12 records it announced" in str(refused.value)


def _generated_source(count: int) -> httpx.MockTransport:
    """A source of `count` identifiers (deletedRecord=no), its pages made when asked for:
    nothing of it is held, so what a reconcile holds is its own."""
    fake, page_size = FakeSource([], deleted_record="no"), 1000

    def answer(request: httpx.Request) -> httpx.Response:
        params = request.url.params
        if params["verb"] == "Identify":
            return fake.answer(request)
        start = int(params.get("resumptionToken", 0))
        headers = "".join(
            f"<header><identifier>oai:big:{n:09d}</identifier>"
            "<datestamp>2024-01-01T00:00:00Z</datestamp></header>"
            for n in range(start, min(count, start + page_size))
        )
        after = start + page_size
        token = after if after < count else ""
        return fake.xml(
            "ListIdentifiers",
            f"<ListIdentifiers>{headers}<resumptionToken cursor='{start}' "
            f"completeListSize='{count}'>{token}</resumptionToken></ListIdentifiers>",
        )

    return httpx.MockTransport(answer)


def _reconcile_memory(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, count: int
) -> tuple[int, ReconcileReport]:
    """The most memory (bytes, as tracemalloc counts) a reconcile of `count` harvested records
    against a source of the same records takes."""
    harvester_id = f"big-{count}"
    register(settings, BASE_URL, harvester_id=harvester_id, metadata_prefix="oai_dc")
    transport = _generated_source(count)
    monkeypatch.setattr(
        reconcile_module,
        "build_reader",
        lambda harvester: OAIPMHReader(None, harvester, transport=transport),
    )
    with Services(settings) as services:
        services.state.upsert_harvested(
            harvester_id,
            [
                HarvestedRecord(f"oai:big:{n:09d}", "2024-01-01T00:00:00Z", False)
                for n in range(count)
            ],
        )
        tracemalloc.start()
        try:
            report = reconcile(services, harvester_id)
            return tracemalloc.get_traced_memory()[1], report
        finally:
            tracemalloc.stop()


def test_a_reconcile_holds_no_more_for_a_larger_source(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, every identifier listed and every one harvested was held as a string for the
    whole reconcile (some 300 MB for a source of a million): its memory grew with the
    source. What was listed now waits in a scratch file, the harvested ones are read a chunk
    at a time."""
    small, _ = _reconcile_memory(settings, monkeypatch, 5_000)
    large, report = _reconcile_memory(settings, monkeypatch, 20_000)
    assert report.source_identifiers == report.harvested_live == 20_000
    assert large - small < 2_000_000


def test_a_set_the_source_does_not_have_deletes_nothing_even_with_force(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The harvester's setspec was changed to a set the source does not have (a typo): its
    list answers noRecordsMatch. Before, the reconcile took that for a source emptied of the
    set and, with --force, deleted every record harvested from it."""
    fake = FakeSource(_in_set(make_records(6), 6), page_size=3, deleted_record="no")
    _harvested(settings, monkeypatch, 0, fake=fake, setspec="s1")
    with Services(settings) as services:
        HarvesterRegistry(services.state).upsert(
            services.harvester("sample").model_copy(update={"setspec": "s-1"})
        )
        with pytest.raises(UnknownSet, match="the source has no set 's-1'"):
            reconcile(services, "sample", force=True)
        assert len(services.state.live_identifiers("sample")) == 6


def _written_set(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[FakeRecord], FakeSource]:
    """Six records of the set `s1`, harvested and written to the target."""
    records = [
        FakeRecord(f"oai:fake.test:{n}", f"2024-03-01T00:00:0{n}Z", raw_metadata=oai_dc(f"R{n}"))
        for n in range(6)
    ]
    fake = FakeSource(_in_set(records, 6), page_size=3, deleted_record="no")
    _harvested(settings, monkeypatch, 0, fake=fake, setspec="s1")
    with Services(settings) as services:
        everything = HarvestScope("sample", (Window("all", None, None),))
        run_harvest(services, everything, RunOptions(), progress=lambda _m: None)
    return records, fake


def test_a_record_back_in_the_set_with_its_old_datestamp_comes_back_at_the_next_reconcile(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record left the set (a tombstone in the target) and came back without a new
    datestamp, as set changes often leave it: no incremental harvest lists it again. Before,
    the next reconcile listed it and left it deleted until a full harvest; it is now harvested
    again by identifier and restored."""
    records, fake = _written_set(settings, monkeypatch)
    back = records[2].identifier
    with Services(settings) as services:
        records[2].sets = []
        assert reconcile(services, "sample").vanished == [back]
        assert target_by_source(settings, "sample")[back]["state"] == "tombstone"
        records[2].sets = ["s1"]
        report = reconcile(services, "sample")
        assert report.returned == [back] and report.returned_actions == {"restore": 1}
        assert services.state.get_record(back, "sample")["deleted"] is False
        assert target_by_source(settings, "sample")[back]["state"] == "live"
        assert reconcile(services, "sample").returned == []  # back for good


def test_a_failed_harvest_of_the_records_back_leaves_the_reconcile_standing(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source fails every GetRecord of the record listed again: the reconcile's report
    says so (the next one tries again) instead of failing after its deletions were made.
    (The vanished record's GetRecord answers idDoesNotExist, which confirms its deletion.)"""
    records, fake = _written_set(settings, monkeypatch)
    records[2].sets = []
    records[4].sets = []
    with Services(settings) as services:
        assert len(reconcile(services, "sample").vanished) == 2
    records[2].sets = ["s1"]
    records.pop(5)  # deleted meanwhile
    answer = fake.answer
    fake.answer = lambda request: (  # type: ignore[method-assign]
        httpx.Response(500)
        if request.url.params.get("identifier") == "oai:fake.test:2"
        else answer(request)
    )
    with Services(settings) as services:
        report = reconcile(services, "sample")
        assert report.vanished == ["oai:fake.test:5"] and report.returned == ["oai:fake.test:2"]
        assert report.notices[-1].startswith("harvesting again the 1 records listed again failed")
        assert services.state.get_record("oai:fake.test:5", "sample")["deleted"] is True


def test_the_scratch_folder_a_killed_reconcile_left_is_removed_by_the_next(
    tmp_path: Path,
) -> None:
    """A reconcile killed with `kill -9` left its scratch folder (a copy of the source's
    identifiers, tens of MB for a large source) for good. The next one removes it; the folder
    of a reconcile still running (this process), or of another machine, stays."""
    child = subprocess.Popen(["sleep", "0"])
    child.wait()  # a pid that has ended
    folders = {
        "killed": f"{socket.gethostname()}:{child.pid}:{'0' * 32}",
        "running": new_owner(),
        "elsewhere": f"another-host.example:{os.getpid()}:{'1' * 32}",
    }
    for name, owner in folders.items():
        (tmp_path / f"reconcile-{name}").mkdir()
        (tmp_path / f"reconcile-{name}" / "owner").write_text(owner)
        (tmp_path / f"reconcile-{name}" / "listed.sqlite").write_bytes(b"x" * 100)

    with reconcile_module.ListedIdentifiers(tmp_path) as listed:
        listed.add(["oai:x:1"])
        left = {p.name for p in tmp_path.glob("reconcile-*")}
        assert left == {"reconcile-running", "reconcile-elsewhere", Path(listed._folder.name).name}
    assert {p.name for p in tmp_path.glob("reconcile-*")} == {
        "reconcile-running",
        "reconcile-elsewhere",
    }


def test_a_reconcile_started_while_another_harvests_records_back_reports_none_of_its_deletions(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second reconcile (another shell, the weekly schedule) started while the first
    harvests again the records listed again. Before, the first had released its leases for
    that harvest and closed its reconcile run only after: the second found the run
    unfinished, resumed it and reported the first's deletions and records back as its own,
    so each was reported twice. Now it waits for the first to finish and finds nothing."""
    records, _fake = _written_set(settings, monkeypatch)
    records[2].sets = []
    with Services(settings) as services:
        assert reconcile(services, "sample").vanished == [records[2].identifier]
    records[2].sets = ["s1"]  # back: harvested again by the next reconcile
    records[4].sets = []  # gone: deleted by it
    second: dict[str, ReconcileReport] = {}
    second_waits_or_ended = threading.Event()
    try_acquire = HarvesterLock.try_acquire

    def noting_a_wait(self: HarvesterLock, harvester_id: str, owner: str) -> bool:
        taken = try_acquire(self, harvester_id, owner)
        if not taken and threading.current_thread().name == "second-reconcile":
            second_waits_or_ended.set()
        return taken

    def second_reconcile() -> None:
        try:
            with Services(settings) as services:
                second["report"] = reconcile(services, "sample")
        finally:
            second_waits_or_ended.set()

    harvest = reconcile_module.run_harvest

    def harvest_then_start_another(*args, **kwargs):  # type: ignore[no-untyped-def]
        harvested = harvest(*args, **kwargs)
        thread = threading.Thread(target=second_reconcile, name="second-reconcile")
        thread.start()
        second_waits_or_ended.wait()  # the second ran in the gap, or waits for the leases
        threads.append(thread)
        return harvested

    threads: list[threading.Thread] = []
    monkeypatch.setattr(HarvesterLock, "try_acquire", noting_a_wait)
    monkeypatch.setattr(reconcile_module, "run_harvest", harvest_then_start_another)
    with Services(settings) as services:
        first = reconcile(services, "sample")
    for thread in threads:
        thread.join()

    assert len(threads) == 1
    assert first.vanished == [records[4].identifier] and first.actions == {"delete": 1}
    assert first.returned == [records[2].identifier]
    assert first.returned_actions == {"restore": 1}
    got = second["report"]
    assert (got.vanished, dict(got.actions), got.returned) == ([], {}, [])
    assert dict(got.returned_actions) == {}


def test_a_token_answered_no_records_match_of_a_list_without_size_deletes_nothing(
    source: FakeSource, settings: Settings
) -> None:
    """10 records, the source announces no completeListSize, and answers the token of page
    three with noRecordsMatch (it lost the list). Taken as the end of the list, the 4
    records never sent looked vanished, not most, and were deleted: a list whose last page
    named a token the source then refused is no proof of absence."""
    source.every = (1, transform_body(lambda body: re.sub(rb' completeListSize="\d+"', b"", body)))
    source.faults[len(source.requests) + 4] = no_records_match  # Identify, two pages, here
    with Services(settings) as services:
        assert (
            "deletes nothing: the source answered the list's last resumption token with "
            "noRecordsMatch, and announced no completeListSize to tell a whole list: 4 "
            "harvested records would be deleted"
        ) in _refusal(services)
        assert services.state.live_identifiers("sample") == {r.identifier for r in source.records}
        source.faults.clear()
        assert reconcile(services, "sample").vanished == []  # the whole list: nothing gone


class SetlessGetRecordSource(FakeSource):
    """Its GetRecord headers name no set (its lists' headers do), as some sources' GetRecord
    leaves setSpec out; its set's list hides the records in `hidden` (a stale set index)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.hidden: set[str] = set()
        self.sets_in_get_record = False

    def selected(self, record: FakeRecord, state: dict) -> bool:
        return record.identifier not in self.hidden and super().selected(record, state)

    def answer(self, request: httpx.Request) -> httpx.Response:
        response = super().answer(request)
        if request.url.params.get("verb") != "GetRecord" or self.sets_in_get_record:
            return response
        body = re.sub(rb"<setSpec>[^<]*</setSpec>", b"", response.content)
        return httpx.Response(response.status_code, content=body, headers=response.headers)


def test_a_source_whose_get_record_names_no_set_deletes_nothing_its_set_list_hides(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The set's list hides a record still in the set, and the source's GetRecord names no
    set for any record. Before, its answer read "outside the set" and confirmed the deletion
    of a record the source still has in the set."""
    fake = SetlessGetRecordSource(_in_set(make_records(6), 6), page_size=3, deleted_record="no")
    _harvested(settings, monkeypatch, 0, fake=fake, setspec="s1")
    hidden = fake.records[2].identifier
    fake.hidden.add(hidden)
    with Services(settings) as services:
        refusal = _refusal(services)
        assert services.state.get_record(hidden, "sample")["deleted"] is False
    assert f"GetRecord names no set of {hidden}, nor of" in refusal
    assert "whether they left the set s1 is not known" in refusal


def test_a_record_whose_get_record_names_no_set_is_gone_from_the_set_when_others_name_theirs(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record in no set any more, at a source whose GetRecord names the sets of a record
    its set's list holds: the record left the set, deleted, and the reconcile says why."""
    fake = SetlessGetRecordSource(_in_set(make_records(6), 6), page_size=3, deleted_record="no")
    fake.sets_in_get_record = True
    _harvested(settings, monkeypatch, 0, fake=fake, setspec="s1")
    left = fake.records[2]
    left.sets = []
    with Services(settings) as services:
        report = reconcile(services, "sample")
        assert services.state.get_record(left.identifier, "sample")["deleted"] is True
    assert report.vanished == [left.identifier]
    [said] = [n for n in report.notices if "names no set" in n]
    assert said.startswith(f"GetRecord names no set of {left.identifier}, and the sets of ")
    assert said.endswith("taken as gone from the set s1")


class ListHidingSource(FakeSource):
    """Its lists leave out the records in `hidden`, which its GetRecord still serves (a stale
    identifier index)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.hidden: set[str] = set()

    def selected(self, record: FakeRecord, state: dict) -> bool:
        return record.identifier not in self.hidden and super().selected(record, state)


def _hiding(settings: Settings, monkeypatch: pytest.MonkeyPatch, count: int) -> ListHidingSource:
    fake = ListHidingSource(make_records(count), page_size=3, deleted_record="no")
    return _harvested(settings, monkeypatch, 0, fake=fake)


def _asked(fake: FakeSource, since: int) -> list[str]:
    """The identifiers GetRecord was asked for since request `since`, in order."""
    return [
        r.url.params["identifier"]
        for r in fake.requests[since:]
        if r.url.params.get("verb") == "GetRecord"
    ]


def test_a_record_the_list_hides_no_longer_holds_back_the_deletions_of_the_others(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list hides one record GetRecord still serves, and the source deleted two others.
    Before, the one served refused every deletion of the harvester, every reconcile, until
    `--force` deleted it too. The two confirmed gone are deleted; the served one is kept,
    counted with its identifier, and the report says why."""
    fake = _hiding(settings, monkeypatch, 10)
    hidden = fake.records[1].identifier
    fake.hidden.add(hidden)
    gone = [fake.records.pop(6).identifier, fake.records.pop(3).identifier]
    with Services(settings) as services:
        report = reconcile(services, "sample")
        assert report.vanished == sorted(gone)
        assert report.kept.to_dict() == {"served": [hidden], "unconfirmed": [], "unasked": 0}
        assert report.notices == [
            f"GetRecord still serves 1 record the source's list no longer holds (e.g. {hidden}): "
            "the list hides records the source has; kept, not deleted (reconcile --force "
            "deletes them all the same)"
        ]
        assert all(services.state.get_record(i, "sample")["deleted"] for i in gone)
        assert services.state.get_record(hidden, "sample")["deleted"] is False
        sent = len(fake.requests)
        again = reconcile(services, "sample")  # asked for again, kept again
        assert again.vanished == [] and again.kept.served == [hidden]
        assert _asked(fake, sent) == [hidden]
        assert services.state.get_record(hidden, "sample")["deleted"] is False


def test_each_reconcile_asks_for_vanished_records_not_asked_for_yet(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nine records vanished, GetRecord asked for three a reconcile (the budget, here), the
    first of them served. Before, the same sample was asked for each time and every deletion
    refused for good. The first reconcile deletes the two confirmed gone and keeps the six
    not asked for; the next asks for three of those (the served one last: not reached),
    all gone, so it deletes the six; the third asks for the served one again."""
    fake = _hiding(settings, monkeypatch, 30)
    monkeypatch.setattr(reconcile_module, "CONFIRM_BUDGET", 3, raising=False)
    vanished = sorted(r.identifier for r in fake.records)[::3][:9]
    hidden = vanished[0]
    fake.hidden.add(hidden)
    fake.records = [r for r in fake.records if r.identifier not in vanished[1:]]
    with Services(settings) as services:
        sent = len(fake.requests)
        first = reconcile(services, "sample")
        asked = _asked(fake, sent)
        assert asked == [vanished[0], vanished[3], vanished[6]]
        assert first.vanished == [vanished[3], vanished[6]]
        assert first.kept.to_dict() == {"served": [hidden], "unconfirmed": [], "unasked": 6}
        assert first.notices[1] == (
            "6 more records the source's list no longer holds not asked for (a reconcile asks "
            "GetRecord for 3 at most): kept, not deleted, since not all those asked for were "
            "confirmed gone; the next reconcile asks for them first"
        )

        sent = len(fake.requests)
        second = reconcile(services, "sample")
        rest = [i for i in vanished if i not in asked]
        assert _asked(fake, sent) == [rest[0], rest[2], rest[4]]
        assert second.vanished == rest
        assert second.kept.to_dict() == {"served": [], "unconfirmed": [], "unasked": 1}
        assert second.notices == [
            "GetRecord confirmed gone all 3 records asked for (a reconcile asks GetRecord for 3 "
            "at most): the other 3 records the source's list no longer holds were deleted "
            "without asking",
            "1 record an earlier reconcile kept (GetRecord served them, or did not tell) not "
            "asked for again (a reconcile asks GetRecord for 3 at most): kept, not deleted; a "
            "later reconcile asks for them again",
        ]

        sent = len(fake.requests)
        third = reconcile(services, "sample")
        assert _asked(fake, sent) == [hidden]
        assert third.vanished == [] and third.kept.served == [hidden]
        assert all(services.state.get_record(i, "sample")["deleted"] for i in vanished[1:])
        assert services.state.get_record(hidden, "sample")["deleted"] is False


def _answering_another_record(source: FakeSource, identifier: str) -> None:
    """GetRecord of `identifier` answered at every try with the source's first record."""
    answer = source.answer
    other = source.records[0].identifier

    def mixed_up(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("identifier") == identifier:
            request = httpx.Request("GET", request.url.copy_set_param("identifier", other))
        return answer(request)

    source.answer = mixed_up  # type: ignore[method-assign]


def test_a_get_record_answering_another_record_after_others_keeps_it_and_deletes_those_gone(
    source: FakeSource, settings: Settings
) -> None:
    """GetRecord of one vanished record keeps answering another record (a proxy mixing
    answers up), after the source confirmed another one gone. Before, no deletion was made
    and the error said to run reconcile again later, which answered the same. The one
    confirmed is deleted, the other kept; alone the next time, it refuses, saying what
    would tell more."""
    gone, mixed = source.records.pop(2).identifier, source.records.pop(4).identifier
    _answering_another_record(source, mixed)
    with Services(settings) as services:
        report = reconcile(services, "sample")
        assert report.vanished == [gone]
        assert report.kept.to_dict() == {"served": [], "unconfirmed": [mixed], "unasked": 0}
        other = source.records[0].identifier
        assert report.notices == [
            f"GetRecord of {mixed} failed (the source answered with record {other!r}, not "
            f"{mixed!r}, on every try (a proxy or cache mixing answers up, or a source filing "
            "the record under another identifier): not staged) after the source answered for "
            "1 record: kept, not deleted, and no other asked for; the next reconcile asks for "
            "it after the others"
        ]
        assert services.state.get_record(mixed, "sample")["deleted"] is False
        assert services.state.get_record(gone, "sample")["deleted"] is True

        refusal = _refusal(services)
        assert "run reconcile again later" not in refusal
        assert refusal.endswith(
            "): whether they are gone is not confirmed; run reconcile again once the source "
            f"answers GetRecord of {mixed}, or with --force to delete them all the same"
        )


def test_a_first_get_record_failing_is_asked_for_after_the_others_next_time(
    source: FakeSource, settings: Settings
) -> None:
    """GetRecord of the first vanished record fails at every try (HTTP 500): nothing is
    deleted, and the error says the next reconcile asks for the others first. Before, it
    said to run reconcile again later, which asked for the same record first and refused
    again. The next one deletes the record confirmed gone and keeps the failing one."""
    failing, gone = source.records.pop(2).identifier, source.records.pop(4).identifier
    answer = source.answer
    source.answer = lambda request: (  # type: ignore[method-assign]
        httpx.Response(500) if request.url.params.get("identifier") == failing else answer(request)
    )
    with Services(settings) as services:
        sent = len(source.requests)
        refusal = _refusal(services)
        assert set(_asked(source, sent)) == {failing}
        assert refusal.startswith(
            "reconcile of sample deletes nothing: 2 harvested records vanished from the "
            f"source's list, and GetRecord of {failing} failed ("
        )
        assert refusal.splitlines()[0].endswith(
            "): whether they are gone is not confirmed; the next reconcile asks GetRecord for "
            "the others first; to delete them all the same, run reconcile again with --force"
        )
        assert services.state.get_record(gone, "sample")["deleted"] is False

        sent = len(source.requests)
        report = reconcile(services, "sample")
        assert _asked(source, sent)[0] == gone
        assert report.vanished == [gone] and report.kept.unconfirmed == [failing]
        assert services.state.get_record(failing, "sample")["deleted"] is False


def test_a_record_that_left_the_set_is_deleted_beside_one_the_sets_list_hides(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A set's harvester: one record moved to another set (its GetRecord names that set:
    gone from the harvester's), and the set's list hides another GetRecord serves in the
    set. Before, the hidden one refused the deletion of the one that left. The one that
    left is deleted, the hidden one kept."""
    fake = SetlessGetRecordSource(_in_set(make_records(10), 10), page_size=3, deleted_record="no")
    fake.sets_in_get_record = True
    _harvested(settings, monkeypatch, 0, fake=fake, setspec="s1")
    left, hidden = fake.records[2], fake.records[6].identifier
    left.sets = ["s2"]
    fake.hidden.add(hidden)
    with Services(settings) as services:
        report = reconcile(services, "sample")
        assert report.vanished == [left.identifier] and report.kept.served == [hidden]
        assert services.state.get_record(left.identifier, "sample")["deleted"] is True
        assert services.state.get_record(hidden, "sample")["deleted"] is False
