"""Fetching the next page ahead: the same pages, errors and checkpoints as a sequential sweep.

A sweep with ``prefetch`` requests page k+1 while its caller still processes page k, yet
saves the checkpoint that names page k+1 only when the caller comes back for it, raises the
errors of that fetch only then, and leaves no thread behind when it is closed early.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import pytest

from oai_pipeline.oai.client import OAIClient
from oai_pipeline.oai.errors import HarvestProtocolError, OAIError
from oai_pipeline.oai.types import SweepCheckpoint
from oai_pipeline_tests.oai.fake_source import (
    BASE_URL,
    FakeSource,
    expire_tokens,
    make_records,
    status,
    transform_body,
    unavailable,
)

Event = str | tuple[object, ...]


def ahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("oai-ahead")]


@dataclass
class Drive:
    """One sweep driven step by step, recording what the caller sees and when checkpoints
    are saved: "ask" (the caller asks for a page), checkpoints, pages."""

    events: list[Event] = field(default_factory=list)
    error: BaseException | None = None
    requested: list[str | None] = field(default_factory=list)

    @classmethod
    def run(cls, source: FakeSource, *, prefetch: bool, **options: object) -> Drive:
        drive = cls()
        client = OAIClient(
            BASE_URL,
            transport=source.transport(),
            sleep=lambda seconds: None,
            max_retries=1,
            backoff_base=0,
        )

        def save(checkpoint: SweepCheckpoint) -> None:
            drive.events.append(("checkpoint", checkpoint.resumption_token, checkpoint.pages_read))

        sweep = client.sweep(
            "ListRecords",
            metadata_prefix="oai_dc",
            save_checkpoint=save,
            prefetch=prefetch,
            **options,
        )
        with client:
            try:
                while True:
                    drive.events.append("ask")
                    try:
                        page = next(sweep)
                    except StopIteration:
                        break
                    identifiers = tuple(r.identifier for r in page.records)
                    drive.events.append(("page", identifiers, page.resumption_token))
            except (OAIError, HarvestProtocolError) as error:
                drive.error = error
        drive.requested = [r.url.params.get("resumptionToken") for r in source.requests]
        return drive

    def assert_checkpoints_wait_for_the_caller(self) -> None:
        """Each checkpoint is saved after the caller asked for the page it names, and that
        page (if any) is handed over only after it."""
        asked = False
        for event in self.events:
            if event == "ask":
                asked = True
            elif event[0] == "checkpoint":
                assert asked, self.events
            else:
                asked = False
        pages_and_checkpoints = [e[0] for e in self.events if e != "ask"]
        for before, after in zip(pages_and_checkpoints, pages_and_checkpoints[1:], strict=False):
            assert (before, after) != ("page", "page"), self.events


def _oai_error(source: FakeSource) -> Callable[[httpx.Request, httpx.Response], httpx.Response]:
    return lambda request, response: source.error("badArgument", "no such argument", 422)


def _repeating(source: FakeSource) -> Callable[[httpx.Request, httpx.Response], httpx.Response]:
    """Answers the third request with the second page again: its token repeats."""
    return lambda request, response: source.answer(source.requests[1])


def _clean(source: FakeSource) -> None:
    pass


def _expired_mid_list(source: FakeSource) -> None:
    source.faults[3] = expire_tokens(source)


def _always_expiring(source: FakeSource) -> None:
    source.every = (2, expire_tokens(source))


def _next_page_fails(source: FakeSource) -> None:
    source.faults.update({2: status(500), 3: status(500)})


def _next_page_is_an_oai_error(source: FakeSource) -> None:
    source.faults[2] = _oai_error(source)


def _token_repeated(source: FakeSource) -> None:
    source.faults[3] = _repeating(source)


def _no_records(source: FakeSource) -> None:
    source.records = []


def _empty_pages_with_tokens(source: FakeSource) -> None:
    source.every = (1, transform_body(lambda body: re.sub(rb"<record>.*?</record>", b"", body)))


SCENARIOS: dict[str, Callable[[FakeSource], None]] = {
    "clean": _clean,
    "bad-token-mid-list": _expired_mid_list,
    "restarts-exhausted": _always_expiring,
    "next-page-http-failure": _next_page_fails,
    "next-page-oai-error": _next_page_is_an_oai_error,
    "repeated-token": _token_repeated,
    "no-records": _no_records,
    "empty-pages-with-tokens": _empty_pages_with_tokens,
}


@pytest.mark.parametrize("scenario", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_prefetch_gives_the_same_pages_checkpoints_and_errors(scenario) -> None:
    drives = {}
    for prefetch in (False, True):
        source = FakeSource(make_records(10), page_size=3)
        scenario(source)
        drives[prefetch] = Drive.run(source, prefetch=prefetch, max_restarts=2, max_empty_pages=1)
    sequential, ahead = drives[False], drives[True]
    assert ahead.events == sequential.events
    assert ahead.requested == sequential.requested
    assert type(ahead.error) is type(sequential.error)
    assert str(ahead.error) == str(sequential.error)
    ahead.assert_checkpoints_wait_for_the_caller()
    assert not ahead_threads()


def test_bad_token_mid_list_redoes_the_window_with_prefetch() -> None:
    source = FakeSource(make_records(10), page_size=3)
    source.faults[3] = expire_tokens(source)
    drive = Drive.run(source, prefetch=True)
    pages = [e for e in drive.events if e[0] == "page"]
    seen = [identifier for page in pages for identifier in page[1]]
    assert drive.error is None
    assert set(seen) == {r.identifier for r in source.records}
    assert len(seen) == 16  # pages one and two again after the restart
    checkpoints = [e for e in drive.events if e[0] == "checkpoint"]
    first_token, second_token = pages[0][2], pages[1][2]
    # page three's checkpoint, its refused fetch, then the window from its start
    assert checkpoints[:4] == [
        ("checkpoint", None, 0),
        ("checkpoint", first_token, 1),
        ("checkpoint", second_token, 2),
        ("checkpoint", None, 2),
    ]


def test_the_checkpoint_of_a_failing_next_page_is_saved_when_the_caller_asks() -> None:
    source = FakeSource(make_records(10), page_size=3)
    source.faults.update({2: status(500), 3: status(500)})
    drive = Drive.run(source, prefetch=True)
    first_page = drive.events[2]
    assert drive.events == [
        "ask",
        ("checkpoint", None, 0),
        first_page,
        "ask",
        ("checkpoint", first_page[2], 1),
    ]
    assert isinstance(drive.error, HarvestProtocolError) and "HTTP 500" in str(drive.error)


def test_the_next_page_is_requested_while_the_caller_still_holds_the_current_one() -> None:
    source = FakeSource(make_records(9), page_size=3)
    log: list[Event] = []
    second_request = threading.Event()

    def handler(request: httpx.Request) -> httpx.Response:
        log.append(("request", request.url.params.get("resumptionToken")))
        response = source.handle(request)
        if len(source.requests) == 2:
            second_request.set()
        return response

    with OAIClient(BASE_URL, transport=httpx.MockTransport(handler)) as client:
        sweep = client.sweep("ListRecords", metadata_prefix="oai_dc")
        first = next(sweep)
        assert second_request.wait(30)  # the caller has not asked yet
        assert len(source.requests) == 2  # one page ahead, not more
        log.append("ask")
        second = next(sweep)
        # page two was requested while the caller held page one, before it asked
        assert log[:3] == [("request", None), ("request", first.resumption_token), "ask"]
        assert [r.identifier for r in second.records] == [r.identifier for r in source.records[3:6]]
        assert len(list(sweep)) == 1
    assert not ahead_threads()

    sequential = FakeSource(make_records(9), page_size=3)
    with OAIClient(BASE_URL, transport=sequential.transport()) as client:
        sweep = client.sweep("ListRecords", metadata_prefix="oai_dc", prefetch=False)
        next(sweep)
        assert len(sequential.requests) == 1 and not ahead_threads()
        sweep.close()


def test_closing_the_sweep_stops_a_request_waiting_to_retry(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Real waits: a Retry-After of 100 s met by the page fetched ahead is cut short."""
    source = FakeSource(make_records(9), page_size=3)
    source.faults[2] = unavailable("100")
    retrying = threading.Event()

    def handler(request: httpx.Request) -> httpx.Response:
        response = source.handle(request)
        if len(source.requests) == 2:
            retrying.set()
        return response

    client = OAIClient(BASE_URL, transport=httpx.MockTransport(handler))
    sweep = client.sweep("ListRecords", metadata_prefix="oai_dc")
    next(sweep)
    assert retrying.wait(30)
    sweep.close()
    assert not ahead_threads()
    assert len(source.requests) == 2  # the retry was never sent
    client.close()
    assert "Traceback" not in capfd.readouterr().err
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


def test_closing_the_sweep_drops_the_result_of_a_running_request(
    capfd: pytest.CaptureFixture[str],
) -> None:
    source = FakeSource(make_records(9), page_size=3)
    arrived, release = threading.Event(), threading.Event()

    def handler(request: httpx.Request) -> httpx.Response:
        response = source.handle(request)
        if len(source.requests) == 2:
            arrived.set()
            release.wait(30)
        return response

    client = OAIClient(BASE_URL, transport=httpx.MockTransport(handler), sleep=lambda s: None)
    sweep = client.sweep("ListRecords", metadata_prefix="oai_dc")
    next(sweep)
    assert arrived.wait(30)
    closing = threading.Thread(target=sweep.close)
    closing.start()  # waits for the running request, which the source now answers
    release.set()
    closing.join(30)
    assert not closing.is_alive() and not ahead_threads()
    assert len(source.requests) == 2
    client.close()
    assert "Traceback" not in capfd.readouterr().err


def test_a_caller_stopped_by_an_exception_leaves_no_thread_once_the_sweep_closes() -> None:
    source = FakeSource(make_records(9), page_size=3)
    checkpoints: list[SweepCheckpoint] = []
    with OAIClient(BASE_URL, transport=source.transport(), sleep=lambda s: None) as client:
        sweep = client.sweep(
            "ListRecords", metadata_prefix="oai_dc", save_checkpoint=checkpoints.append
        )
        with pytest.raises(KeyboardInterrupt):
            for _page in sweep:
                raise KeyboardInterrupt
        sweep.close()
        assert not ahead_threads()
        assert [c.pages_read for c in checkpoints] == [0]  # page two's was never saved


def test_closing_the_client_stops_the_page_ahead_of_an_open_sweep() -> None:
    source = FakeSource(make_records(9), page_size=3)
    source.faults[2] = unavailable("100")
    client = OAIClient(BASE_URL, transport=source.transport())
    sweep = client.sweep("ListRecords", metadata_prefix="oai_dc")
    next(sweep)
    client.close()  # the sweep itself is still open
    assert not ahead_threads()
    with pytest.raises(RuntimeError, match="closed"):  # as a sequential sweep would
        next(sweep)
    sweep.close()
