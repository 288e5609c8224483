"""Quirks of real OAI-PMH servers, each through a whole harvest into the target: what the
target and the harvest-record store end up holding, and what the run reports."""

from __future__ import annotations

import base64
import codecs
import gzip
import json
import re
import zlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from click.testing import CliRunner

from oai_pipeline.cli import main
from oai_pipeline.cli.output import report_text
from oai_pipeline.defs.partitions import build_window_partitions, partition_key, scopes_for_keys
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.oai.errors import HarvestProtocolError, UnknownSet
from oai_pipeline.oai.windows import parse_datestamp
from oai_pipeline.pipeline.frames import RAW_OAI_XML
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.runner import HarvestReport, run_harvest
from oai_pipeline.pipeline.scope import HarvestScope
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline.storage import PartitionStore
from oai_pipeline_tests.oai.fake_source import (
    BASE_URL,
    DateBlindSource,
    FakeRecord,
    FakeSource,
    Fault,
    SecondsRefusedSource,
    SetBlindSizeSource,
    compressed,
    html_page,
    status,
    transform_body,
    truncated,
)
from oai_pipeline_tests.support import EVERYTHING, harvest_fake_source, oai_dc, target_by_source


def dublin_core(number: int) -> str:
    return oai_dc(f"Record {number}", kind="Dataset")


def importable(count: int) -> list[FakeRecord]:
    return [
        FakeRecord(f"oai:fake.test:{n}", f"2024-03-01T00:00:{n:02d}Z", raw_metadata=dublin_core(n))
        for n in range(count)
    ]


def harvest(settings: Settings, scope: HarvestScope = EVERYTHING) -> HarvestReport:
    with Services(settings) as services:
        return run_harvest(services, scope, RunOptions(), progress=lambda _m: None)


class QueryRoutedSource(FakeSource):
    """An endpoint behind a query-routed script (a CMS without clean URLs): without its own
    `q=oai` it answers with the site's home page."""

    def answer(self, request: httpx.Request) -> httpx.Response:
        if request.url.params.get("q") != "oai":
            return html_page(request, super().answer(request))
        return super().answer(request)


@pytest.mark.parametrize(
    "base_url",
    [
        "http://fake.test/index.php?q=oai",
        # a request URL pasted as the base URL: its OAI-PMH arguments are not the endpoint's
        "http://fake.test/index.php?q=oai&verb=Identify&metadataPrefix=marc",
    ],
)
def test_a_base_url_with_its_own_query_keeps_it_on_every_request(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, base_url: str
) -> None:
    """Before, httpx replaced the base URL's query with the OAI-PMH arguments: every
    request went to the site's home page and the harvest failed after its retries."""
    source = harvest_fake_source(
        settings, monkeypatch, QueryRoutedSource(importable(5), page_size=2), base_url=base_url
    )
    report = harvest(settings)
    assert (report.harvested, report.created, report.errors) == (5, 5, 0)
    assert set(target_by_source(settings, "sample")) == {r.identifier for r in source.records}
    assert all(request.url.params.get_list("q") == ["oai"] for request in source.requests)
    assert [r.url.params.get("metadataPrefix") for r in source.requests[:2]] == [None, "oai_dc"]


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        # Java's Instant prints fractional seconds only when there are some
        ("2024-03-01T10:00:00Z", "2024-03-01T10:00:00.500Z"),
        # local time with its offset (10:30 UTC), then 11:00 UTC
        ("2024-03-01T12:30:00+02:00", "2024-03-01T11:00:00Z"),
    ],
)
def test_a_record_listed_twice_in_one_sweep_keeps_its_newest_copy_by_time_not_by_text(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, older: str, newer: str
) -> None:
    """The source changed a record mid-sweep and lists it again a page later. Before, the
    copies were compared as text, by which the older one of these pairs is the later."""
    records = importable(4)
    records[0].datestamp = older
    changed = FakeRecord(records[0].identifier, newer, title="", raw_metadata=dublin_core(99))
    harvest_fake_source(settings, monkeypatch, FakeSource([*records, changed], page_size=2))
    report = harvest(settings)
    with Services(settings) as services:
        stored = services.state.get_record(records[0].identifier, "sample")
    target = target_by_source(settings, "sample")[records[0].identifier]
    assert (report.harvested, report.created, report.errors) == (4, 4, 0)
    assert stored["datestamp"] == newer
    assert target["data"]["metadata"]["title"] == "Record 99"


BOM = codecs.BOM_UTF8


@pytest.mark.parametrize(
    "before",
    [b"\r\n" + BOM, BOM + b"\n", BOM + BOM, b"\n" + BOM + b" \n"],
    ids=["newline-bom", "bom-newline", "two-boms", "bom-between-newlines"],
)
def test_byte_order_marks_and_line_breaks_before_the_declaration_are_dropped(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, before: bytes
) -> None:
    """PHP endpoints send what their included files hold before `<?php`: line breaks and
    UTF-8 byte order marks, in any order. Before, only line breaks alone were dropped: every
    page failed to parse, each was retried in vain and the harvest failed."""
    report, title, requests = _harvested_title(
        settings, monkeypatch, "Zürich", lambda body: before + body
    )
    assert (report.harvested, report.created, report.errors) == (5, 5, 0)
    assert title == "Zürich"
    assert requests == 4  # Identify and three pages: nothing retried


def _harvested_title(
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    title: str,
    change: Callable[[bytes], bytes],
    headers: dict[str, str] | None = None,
) -> tuple[HarvestReport, str, int]:
    """A harvest of five records, the third titled `title`, each response `change`d (and
    with `headers`): its report, that title in the target and the requests made."""
    records = importable(5)
    records[2].raw_metadata = dublin_core(2).replace("Record 2", title)
    source = FakeSource(records, page_size=2)
    source.response_headers = headers or {}
    source.every = (1, transform_body(change))
    harvest_fake_source(settings, monkeypatch, source)
    report = harvest(settings)
    target = target_by_source(settings, "sample")
    return report, target["oai:fake.test:2"]["data"]["metadata"]["title"], len(source.requests)


def test_a_source_sending_utf16_without_a_byte_order_mark_is_read_whole(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Windows server's UTF-16 (its declaration says so, the header says `text/xml`, no
    BOM). Before, it was read as UTF-8: harvested without an error, its titles garbled
    (`Łódź – ✓` stored as `Aódz '`)."""

    def as_utf16(body: bytes) -> bytes:
        return body.replace(b'encoding="UTF-8"', b'encoding="UTF-16"').decode().encode("utf-16-le")

    report, title, requests = _harvested_title(
        settings, monkeypatch, "Łódź – ✓", as_utf16, {"content-type": "text/xml"}
    )
    assert (report.harvested, report.created, report.errors) == (5, 5, 0)
    assert title == "Łódź – ✓"
    assert requests == 4  # Identify and three pages: nothing retried


@pytest.mark.parametrize(
    "response_date", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:00:00-05:00"]
)
def test_a_response_date_beyond_the_calendar_in_utc_is_no_date(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, response_date: str
) -> None:
    """A source with a broken clock or time zone: its responseDate, converted to UTC, is
    before year 1 or after 9999. Before, every page raised OverflowError out of the page
    parser and the harvest failed with a traceback; now the pages are read by our clock."""
    source = FakeSource(importable(5), page_size=2)
    stamp = f"<responseDate>{response_date}</responseDate>".encode()
    sent: list[bytes] = []

    def restamp(body: bytes) -> bytes:
        sent.append(re.sub(rb"<responseDate>[^<]*</responseDate>", stamp, body))
        return sent[-1]

    source.every = (1, transform_body(restamp))
    harvest_fake_source(settings, monkeypatch, source)
    report = harvest(settings)
    assert (report.harvested, report.created, report.errors) == (5, 5, 0)
    assert len(sent) == 4 and all(stamp in body for body in sent)  # Identify and three pages


def test_a_response_date_ahead_of_our_clock_is_not_where_the_next_harvest_starts(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source whose clock runs ahead (local time written with `Z`, a clock set years
    ahead): its responseDate is a moment that has not come yet. Before, it was kept as where
    the next incremental harvest starts, which then skipped the windows between the real
    last harvest and that moment (only today's window was listed); now our clock before the
    first request stands in for it, and a note says so."""
    ahead = datetime.now(UTC) + timedelta(days=3)
    stamp = f"<responseDate>{ahead.strftime('%Y-%m-%dT%H:%M:%SZ')}</responseDate>".encode()
    source = FakeSource(importable(5), page_size=2)
    source.every = (
        1,
        transform_body(lambda body: re.sub(rb"<responseDate>[^<]*</responseDate>", stamp, body)),
    )
    harvest_fake_source(settings, monkeypatch, source)
    before = datetime.now(UTC)
    report = harvest(settings)
    with Services(settings) as services:
        saved = services.state.get_run(report.run_id)["response_date"]
    assert (report.harvested, report.created, report.errors) == (5, 5, 0)
    assert before - timedelta(seconds=1) <= parse_datestamp(saved) <= datetime.now(UTC)
    (notice,) = report.notices
    assert "responseDate" in notice and "ahead of this machine's clock" in notice


@pytest.mark.parametrize(
    ("attribute", "value"),
    [
        ("completeListSize", "99999999999999999999999999"),
        ("cursor", "99999999999999999999999999"),
    ],
)
def test_a_resumption_token_count_no_checkpoint_holds_is_none(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, attribute: str, value: str
) -> None:
    """Before, a count beyond 64 bits failed to be saved in the checkpoint (orjson's
    TypeError) before the next page: every harvest of the source failed with a traceback."""
    source = FakeSource(importable(5), page_size=2)
    pattern = re.compile(f'{attribute}="[^"]*"'.encode())
    source.every = (
        1,
        transform_body(lambda body: pattern.sub(f'{attribute}="{value}"'.encode(), body)),
    )
    harvest_fake_source(settings, monkeypatch, source)
    report = harvest(settings)
    assert (report.harvested, report.created, report.errors) == (5, 5, 0)


class UnescapedTokenSource(FakeSource):
    """A source that writes its resumption tokens into the XML unescaped (`&` as it is)."""

    PREFIX = "prefix=oai_dc&offset="

    def list_response(self, verb: str, params: httpx.QueryParams) -> httpx.Response:
        token = params.get("resumptionToken")
        if token is not None:
            assert token.startswith(self.PREFIX), token
            params = params.set("resumptionToken", token.removeprefix(self.PREFIX))
        response = super().list_response(verb, params)
        body = response.content.replace(b'">eyJ', f'">{self.PREFIX}eyJ'.encode())
        return httpx.Response(response.status_code, content=body, headers=response.headers)


def test_a_bare_ampersand_in_a_resumption_token_is_read_as_one(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, every page with a token failed to parse, was retried in vain, and the
    harvest failed on the second page, again on every rerun."""
    source = harvest_fake_source(
        settings, monkeypatch, UnescapedTokenSource(importable(5), page_size=2)
    )
    report = harvest(settings)
    assert (report.harvested, report.created, report.errors) == (5, 5, 0)
    assert len(source.requests) == 4  # Identify and three pages: nothing retried
    assert source.requests[-1].url.params["resumptionToken"].startswith("prefix=oai_dc&offset=")


def test_html_entities_and_bare_ampersands_in_a_record_are_read_as_characters(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Feeds built from HTML put `&nbsp;`, `&eacute;` and a bare `&` into the XML. Before,
    each such record was a MalformedRecord error and never reached the target."""
    records = importable(4)
    records[1].raw_metadata = dublin_core(1).replace("Record 1", "Caf&eacute;&nbsp;au lait")
    records[2].raw_metadata = dublin_core(2).replace("Record 2", "Tom & Jerry &c")
    # a CDATA section means what it says: its `&amp;` is five characters, not repaired in the
    # page (the record's XML keeps them); the transform reads the HTML references a title
    # holds, as of any source escaping its text once more than XML needs
    records[3].raw_metadata = dublin_core(3).replace("Record 3", "<![CDATA[R&amp;D &nbsp;]]>")
    harvest_fake_source(settings, monkeypatch, FakeSource(records, page_size=4))
    report = harvest(settings)
    target = target_by_source(settings, "sample")
    titles = [target[r.identifier]["data"]["metadata"]["title"] for r in records]
    with Services(settings) as services:
        kept = services.state.get_record(records[3].identifier, "sample")
    assert (report.harvested, report.created, report.errors) == (4, 4, 0)
    assert titles == ["Record 0", "Café\xa0au lait", "Tom & Jerry &c", "R&D"]
    assert "<dc:title>R&amp;amp;D &amp;nbsp;</dc:title>" in kept["xml"]


def test_a_page_over_the_size_bound_fails_each_run_at_that_page_until_the_bound_is_raised(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, a rerun took the oversized page for a resumption token the source had lost:
    it redid the window from its start three times, then failed saying the token had been
    refused; every rerun did the same, and nothing said how to get past the page."""
    records = importable(7)
    records[4].raw_metadata = dublin_core(4).replace("Record 4", "Large " + "x" * 1_200_000)
    options: dict[str, object] = {"max_response_mb": 1}
    source = harvest_fake_source(
        settings, monkeypatch, FakeSource(records, page_size=2), reader_options=options
    )
    for attempt in range(2):
        before = len(source.requests)
        with pytest.raises(HarvestProtocolError, match="larger than 1 MiB.*max_response_mb"):
            harvest(settings)
        # the first attempt lists pages 1 to 3; a rerun asks for page 3 at once, and only once
        assert len(source.requests) - before == (4 if attempt == 0 else 2)
    with Services(settings) as services:
        (run,) = services.state.list_runs(harvester_id="sample")
        assert (run["status"], run["staged"]) == ("failed", 4)
        assert run["checkpoint"].resumption_token == source.requests[-1].url.params.get(
            "resumptionToken"
        )
    options["max_response_mb"] = 2
    report = harvest(settings)
    assert (report.run_id, report.harvested, report.created, report.errors) == (run["id"], 7, 7, 0)
    assert target_by_source(settings, "sample")["oai:fake.test:4"]["data"]["metadata"][
        "title"
    ].startswith("Large xxx")


class BrokenPageSource(FakeSource):
    """Offset tokens, the same every time the list is asked for; while `broken`, the page
    at `offset` comes truncated, every time (a record the source cannot render whole)."""

    def __init__(self, *args: object, offset: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.broken_token: str | None = None
        self.broken = True
        self.offset = offset

    def answer(self, request: httpx.Request) -> httpx.Response:
        response = super().answer(request)
        token = request.url.params.get("resumptionToken")
        if token is not None and f'"offset": {self.offset},' in base64.b64decode(token).decode():
            self.broken_token = token
            if self.broken:
                return truncated(request, response)
        return response


def test_a_page_that_always_comes_broken_fails_a_rerun_with_its_own_error(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rerun resumes the saved token; when it keeps failing but the window's first page
    comes, the source may have lost it (DOAJ answers dead tokens with HTTP 500), so the
    window is redone. Before, reaching the very same token again was taken for a lost token
    once more: the window was redone three times, each time with the page's seven attempts,
    and the run failed saying the token had been refused four times."""
    source = BrokenPageSource(importable(9), page_size=2, offset=4)
    harvest_fake_source(settings, monkeypatch, source)
    with pytest.raises(HarvestProtocolError, match="not well-formed"):
        harvest(settings)
    before = len(source.requests)
    with pytest.raises(HarvestProtocolError, match="not well-formed") as failure:
        harvest(settings)
    asked = source.requests[before:]
    assert "refused" not in str(failure.value)
    # the saved token (7 attempts), the first page (asked to judge the token, then for the
    # redone window), the second, the same token again (7 attempts), and no more
    assert sum(r.url.params.get("resumptionToken") == source.broken_token for r in asked) == 14
    assert [r.url.params.get("verb") for r in asked if "resumptionToken" not in r.url.params] == [
        "Identify",
        "ListRecords",
        "ListRecords",
    ]
    assert len(asked) == 18
    source.broken = False
    report = harvest(settings)
    assert (report.harvested, report.created, report.errors) == (9, 9, 0)


def test_a_record_changed_again_on_its_day_at_a_day_granular_source_is_updated(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A day-granular datestamp says on which day a record last changed, not when: harvested
    in the morning and changed in the afternoon, it keeps its datestamp. Before, the next
    harvest took it for unchanged (its XML was not even stored) and the change never reached
    the target."""
    today = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    records = importable(3)
    for record in records:
        record.datestamp = today
    source = harvest_fake_source(
        settings, monkeypatch, FakeSource(records, page_size=2, granularity="day")
    )
    first = harvest(settings)
    source.records[0].raw_metadata = dublin_core(0).replace("Record 0", "Changed that day")
    second = harvest(settings)
    third = harvest(settings)
    target = target_by_source(settings, "sample")
    assert (first.created, second.updated, second.unchanged) == (3, 1, 2)
    assert target["oai:fake.test:0"]["data"]["metadata"]["title"] == "Changed that day"
    assert (third.updated, third.unchanged) == (0, 3)  # the same XML again: unchanged


def _raw_deflate(body: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(body) + packer.flush()


@pytest.mark.parametrize(
    ("times", "header", "compress"),
    [
        (2, "gzip", gzip.compress),
        (1, None, gzip.compress),
        (0, "gzip", gzip.compress),
        (0, "x-gzip", gzip.compress),
        (0, "deflate", zlib.compress),
        (1, "deflate", zlib.compress),
        (1, "deflate", _raw_deflate),
        (1, "gzip", zlib.compress),
        (1, "x-gzip", _raw_deflate),
    ],
    ids=[
        "gzip-twice-labelled-once",
        "gzip-unlabelled",
        "plain-labelled-gzip",
        "plain-labelled-x-gzip",
        "plain-labelled-deflate",
        "zlib-deflate",
        "raw-deflate",
        "zlib-deflate-labelled-gzip",
        "raw-deflate-labelled-x-gzip",
    ],
)
def test_a_body_is_read_as_it_is_whatever_its_content_encoding_says(
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    times: int,
    header: str | None,
    compress: Callable[[bytes], bytes],
) -> None:
    """PHP's output compression behind a compressing web server gzips twice and says so
    once; a cache may serve the stored gzip without its header; a misconfigured proxy labels
    a plain body gzip (or deflate), or deflate gzip. No XML starts with the gzip magic bytes,
    nor inflates whole. Before, every page was "not well-formed" (or, for a plain body
    labelled gzip, httpx's DecodingError), retried in vain, and the harvest failed."""
    source = FakeSource(importable(5), page_size=2)
    source.every = (1, compressed(times, header, compress))
    harvest_fake_source(settings, monkeypatch, source)
    report = harvest(settings)
    assert (report.harvested, report.created, report.errors) == (5, 5, 0)
    assert len(source.requests) == 4  # Identify and three pages: nothing retried


def test_a_source_refusing_the_dates_in_seconds_it_declares_is_harvested_by_day(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, an incremental harvest of such a source failed on badArgument, every time.
    By day, the window grows to whole days: the records of that day listed again outside
    the hours asked are left out (said in a note), only the changed one is written."""
    records = importable(4)
    for number, record in enumerate(records):
        record.datestamp = f"2024-03-02T0{number}:00:00Z"
    source = harvest_fake_source(settings, monkeypatch, SecondsRefusedSource(records, page_size=2))
    first = harvest(settings)  # everything: no from/until to refuse
    source.records[3].datestamp = "2024-03-02T10:00:00Z"
    source.records[3].raw_metadata = dublin_core(3).replace("Record 3", "Changed")
    since = datetime(2024, 3, 2, 9, tzinfo=UTC)
    second = harvest(settings, HarvestScope.adhoc("sample", since=since))
    asked = [r.url.params.get("from") for r in source.requests if "from" in r.url.params]
    target = target_by_source(settings, "sample")
    assert (first.created, first.notices) == (4, [])
    assert asked == ["2024-03-02T09:00:00Z", "2024-03-02"]
    assert (second.harvested, second.updated, second.unchanged, second.errors) == (1, 1, 0, 0)
    assert target["oai:fake.test:3"]["data"]["metadata"]["title"] == "Changed"
    notice, by_day = second.notices
    assert by_day.startswith(
        "the source lists by day: 2024-03-02T09:00:00Z .. … (until exclusive) was asked for "
        "as the whole days 2024-03-02 .. …; 3 records dated outside the hours asked were left out"
    )
    assert notice.startswith("http://fake.test/oai: the source refuses from/until in seconds")
    assert f"  note: {notice}" in report_text(second.to_dict()).splitlines()
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [notice]


def _status(*args: str) -> tuple[str, dict]:
    """`oai-pipeline status ARGS` as text and as JSON."""
    text = CliRunner().invoke(main, ["status", *args])
    data = CliRunner().invoke(main, ["status", *args, "--json"])
    assert text.exit_code == data.exit_code == 0, text.output + data.output
    return text.stdout, json.loads(data.stdout)


def test_the_notices_of_a_harvest_are_kept_on_its_run_and_shown_by_status(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, they were in the harvest's report and its log only: once the terminal was
    closed (or for a scheduled run), `status` said nothing of them."""
    records = importable(4)
    harvest_fake_source(settings, monkeypatch, SecondsRefusedSource(records, page_size=2))
    first = harvest(settings)
    since = datetime(2024, 3, 1, tzinfo=UTC)
    second = harvest(settings, HarvestScope.adhoc("sample", since=since))
    (notice,) = second.notices
    text, data = _status("--harvester", "sample")
    assert data["run"]["id"] == second.run_id and data["notices"] == [notice]
    assert data["run"]["notices"] == [notice]
    assert f"  note: {notice}" in text.splitlines()
    # the earlier run met none
    text, data = _status("--batch-id", str(first.run_id))
    assert data["notices"] == [] and "note:" not in text
    recent = json.loads(CliRunner().invoke(main, ["status", "--list-recent", "--json"]).stdout)
    assert [run["notices"] for run in recent] == [[notice], []]


def dated_daily(count: int) -> list[FakeRecord]:
    """`count` records, one a day from 2024-03-01."""
    records = importable(count)
    for number, record in enumerate(records):
        record.datestamp = f"2024-03-{number + 1:02d}T01:00:00Z"
    return records


SINCE_MARCH_6 = HarvestScope.adhoc("sample", since=datetime(2024, 3, 6, tzinfo=UTC))
DATES_IGNORED = (
    "4 of the 6 records the source listed are dated more than a day outside the dates asked "
    "for (2024-03-06T00:00:00Z .. …), e.g. oai:fake.test:0 dated 2024-03-01T01:00:00Z: the "
    "source ignores from/until, or selects by another date than its datestamps; such records "
    "are harvested (unchanged ones skipped), and listed again by each incremental harvest"
)


def test_a_source_that_ignores_the_dates_asked_for_is_told(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, each incremental harvest of such a source listed all of it without a word: an
    operator saw a daily run take as long as a full harvest and could not tell why. Its
    records are still harvested (a source may select by another date than the one it sends),
    and those unchanged are skipped; the record of the day before `from` is within what time
    zones explain, not counted."""
    harvest_fake_source(settings, monkeypatch, DateBlindSource(dated_daily(6), page_size=2))
    full = harvest(settings)
    since = harvest(settings, SINCE_MARCH_6)
    text, status = _status("--harvester", "sample")
    assert full.notices == []  # no dates asked for
    assert (since.harvested, since.unchanged, since.errors) == (6, 6, 0)
    assert since.notices == status["notices"] == [DATES_IGNORED]
    assert f"  note: {DATES_IGNORED}" in text.splitlines()


@pytest.mark.parametrize(
    ("source", "harvested"),
    [
        (FakeSource(dated_daily(6), page_size=2), 1),
        # 2024-03-05T01:00:00Z: 23 hours before `from`
        (DateBlindSource(dated_daily(6)[4:], page_size=2), 2),
    ],
    ids=["kept-to", "hours-before"],
)
def test_records_listed_within_a_day_of_the_dates_asked_for_are_not_told(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, source: FakeSource, harvested: int
) -> None:
    """A source keeping to the dates, and one listing a record a few hours before them (its
    local time written with `Z`, or its index a little behind): nothing to tell."""
    harvest_fake_source(settings, monkeypatch, source)
    report = harvest(settings, SINCE_MARCH_6)
    assert (report.harvested, report.errors, report.notices) == (harvested, 0, [])


def test_a_failed_run_of_a_source_that_ignores_the_dates_says_so(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the source listed before it failed is told with the failure, and kept on the
    run for `status`: a source failing on its third page of a day's changes may be one
    listing all of itself."""
    source = harvest_fake_source(
        settings,
        monkeypatch,
        DateBlindSource(dated_daily(6), page_size=2),
        reader_options={"max_retries": 0, "prefetch": False},
    )
    harvest(settings)
    # Identify, then the third page of the list fails
    source.faults[len(source.requests) + 4] = lambda request, response: httpx.Response(500)
    with pytest.raises(HarvestProtocolError, match="HTTP 500") as failure:
        harvest(settings, SINCE_MARCH_6)
    _text, failed = _status("--harvester", "sample")
    notice = DATES_IGNORED.replace("of the 6", "of the 4")  # two pages read
    assert failed["run"]["status"] == "failed"
    assert failure.value.__notes__ == failed["notices"] == [notice]


class BasicAuthSource(FakeSource):
    """A source behind HTTP basic auth (a restricted feed): 401 without alice's password."""

    expected = "Basic " + base64.b64encode(b"alice:s@cret").decode()

    def answer(self, request: httpx.Request) -> httpx.Response:
        if request.headers.get("authorization") != self.expected:
            return httpx.Response(401, text="authentication required")
        return super().answer(request)


def test_a_source_behind_basic_auth_gets_the_password_and_no_screen_shows_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The base URL names the user and password (`http://alice:s%40cret@…`): they go as an
    Authorization header, not in the request's URL. Before, every log line, error, `status`
    and `harvesters list` printed the password."""
    source = harvest_fake_source(
        settings,
        monkeypatch,
        BasicAuthSource(importable(3), page_size=2),
        base_url="http://alice:s%40cret@fake.test/oai",
    )
    report = harvest(settings)
    assert (report.harvested, report.created, report.errors) == (3, 3, 0)
    assert {str(request.url).split("?")[0] for request in source.requests} == {BASE_URL}

    source.every = (1, lambda request, response: httpx.Response(503, text="down"))
    with pytest.raises(HarvestProtocolError, match="HTTP 503") as failure:
        harvest(settings)
    said = [str(failure.value)]
    for command in (["status", "--harvester", "sample"], ["harvesters", "list"]):
        for output in ([], ["--json"]):
            result = CliRunner().invoke(main, [*command, *output])
            assert result.exit_code == 0, result.output
            said.append(result.output)
    shown = CliRunner().invoke(main, ["harvesters", "show", "sample", "--json"])
    assert json.loads(shown.stdout)["base_url"] == "http://alice:***@fake.test/oai"
    assert all("cret" not in text for text in said), said
    assert "alice:***@fake.test" in said[-1]


def test_a_basic_auth_password_can_come_from_the_environment(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`${NAME}` in the base URL: read when the harvest runs, so that neither the state
    database nor the register job's run config holds the password. Unset where the harvest
    runs, the harvest fails in one line naming the variable."""
    url = "http://alice:${OAI_TEST_PASSWORD}@fake.test/oai"
    harvest_fake_source(
        settings, monkeypatch, BasicAuthSource(importable(3), page_size=2), base_url=url
    )
    monkeypatch.setenv("OAI_TEST_PASSWORD", "s@cret")
    report = harvest(settings)
    shown = CliRunner().invoke(main, ["harvesters", "show", "sample", "--json"])
    stored = b"".join(path.read_bytes() for path in settings.home.glob("*.sqlite*"))
    assert (report.harvested, report.created, report.errors) == (3, 3, 0)
    assert json.loads(shown.stdout)["base_url"] == url
    assert b"s@cret" not in stored

    monkeypatch.delenv("OAI_TEST_PASSWORD")
    failed = CliRunner().invoke(main, ["harvest", "sample"])
    assert failed.exit_code != 0
    assert failed.stderr.strip().splitlines() == [
        "Error: the base URL's credentials name the environment variable OAI_TEST_PASSWORD, "
        "which is not set where the harvest runs (set it there, e.g. in the Dagster code "
        "location's environment)"
    ]


def test_a_failed_run_keeps_its_notices_and_its_resumed_attempt_adds_its_own(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first attempt went by day, then the source failed mid-list; the attempt that
    resumes it goes on by token, meets another quirk, and meets the first again when it lists
    what changed since the run began. The run keeps both, each once, and its report says
    both."""
    records = importable(6)
    source = harvest_fake_source(
        settings,
        monkeypatch,
        SecondsRefusedSource(records, page_size=2),
        reader_options={"max_retries": 0, "prefetch": False},
    )
    scope = HarvestScope.adhoc("sample", since=datetime(2024, 3, 1, tzinfo=UTC))
    # Identify, the page refused in seconds, the page by day, then the second page fails
    source.faults[4] = lambda request, response: httpx.Response(500, text="oops")
    with pytest.raises(HarvestProtocolError, match="HTTP 500") as failure:
        harvest(settings, scope)
    text, failed = _status("--harvester", "sample")
    (by_day,) = failed["notices"]
    assert failure.value.__notes__ == [by_day]  # the failure says them, as status does
    assert failed["run"]["status"] == "failed"
    assert by_day.startswith("http://fake.test/oai: the source refuses from/until in seconds")
    assert f"  note: {by_day}" in text.splitlines()

    asked = len(source.requests)
    source.identify_base_url = "https://fake.test/oai"
    resumed = harvest(settings, scope)
    assert resumed.run_id == failed["run"]["id"] and resumed.harvested == 6
    # the token first, where the failed attempt stopped; then, with dates, what the source
    # changed since the run began listing (meeting the refusal again, said once)
    lists = [r.url.params for r in source.requests[asked:] if r.url.params["verb"] != "Identify"]
    assert "resumptionToken" in lists[0] and "from" in lists[-1]
    moved = (
        "http://fake.test/oai: the source's Identify names another base URL, "
        "https://fake.test/oai; harvesting the registered one (if the source lives there, "
        "set the harvester's base URL to it)"
    )
    assert resumed.notices == [by_day, moved]
    text, data = _status("--batch-id", str(resumed.run_id))
    assert data["run"]["status"] == "succeeded" and data["notices"] == [by_day, moved]
    assert [line for line in text.splitlines() if "note:" in line] == [
        f"  note: {by_day}",
        f"  note: {moved}",
    ]


OAI_XMLNS = b' xmlns="http://www.openarchives.org/OAI/2.0/"'


def _every_page(*changes: tuple[bytes, bytes]) -> Fault:
    """Each response with the given bytes replaced."""

    def change(body: bytes) -> bytes:
        for old, new in changes:
            body = body.replace(old, new)
        return body

    return transform_body(change)


@pytest.mark.parametrize(
    "changes",
    [
        [(b"<record>", b'<record xmlns="">')],
        [(b"<resumptionToken", b'<resumptionToken xmlns=""')],
        [(b"<OAI-PMH" + OAI_XMLNS, b"<OAI-PMH")],
        [(b"<record>", b'<record xmlns="">'), (b"Record 2", b"Record 2 < 3")],
    ],
    ids=["records", "token", "envelope", "records-one-broken"],
)
def test_oai_pmh_elements_in_no_namespace_are_read_as_oai_pmh_and_noted(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, changes: list[tuple[bytes, bytes]]
) -> None:
    """A DOM built with createElement, not createElementNS, serialises as `<record
    xmlns="">`; a template may leave out the xmlns. Before, such records were skipped
    unseen: every page was empty and the harvest succeeded with nothing (a token in no
    namespace ended the list after its first page; an envelope without it was retried,
    then failed as "not an OAI-PMH response (root element 'OAI-PMH')")."""
    source = FakeSource(importable(5), page_size=2)
    source.every = (1, _every_page(*changes))
    harvest_fake_source(settings, monkeypatch, source)
    report = harvest(settings)
    broken = 1 if len(changes) > 1 else 0  # its page is read record by record
    assert (report.harvested, report.created, report.errors) == (5, 5 - broken, broken)
    target = target_by_source(settings, "sample")
    assert set(target) == {r.identifier for r in source.records} - (
        {"oai:fake.test:2"} if broken else set()
    )
    assert target["oai:fake.test:4"]["data"]["metadata"]["title"] == "Record 4"
    (notice,) = report.notices
    assert notice.startswith("http://fake.test/oai: the source sends OAI-PMH elements in no ")
    assert len(source.requests) == 4  # Identify and three pages: nothing retried


@pytest.mark.parametrize(
    ("changes", "found"),
    [
        # misspelt (no trailing slash)
        ([(b"<record>", b'<record xmlns="http://www.openarchives.org/OAI/2.0">')], "record"),
        # OAI-PMH 1.1's
        (
            [
                (
                    b"<record>",
                    b'<record xmlns="http://www.openarchives.org/OAI/1.1/OAI_ListRecords">',
                )
            ],
            "record",
        ),
        ([(b"<resumptionToken", b'<resumptionToken xmlns="urn:elsewhere"')], "resumptionToken"),
    ],
    ids=["misspelt", "oai-1.1", "token"],
)
def test_records_in_another_namespace_fail_the_run_naming_it(
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    changes: list[tuple[bytes, bytes]],
    found: str,
) -> None:
    """What they say cannot be read as OAI-PMH, and is not taken for nothing. Before, the
    records were skipped unseen and the harvest succeeded with none (a token in another
    namespace ended the list after its first page). Not retried: the same every time."""
    source = FakeSource(importable(5), page_size=2)
    source.every = (1, _every_page(*changes))
    harvest_fake_source(settings, monkeypatch, source)
    namespace = changes[0][1].split(b'"')[1].decode()
    with pytest.raises(HarvestProtocolError, match=f"<ListRecords> holds <{found}> in the "):
        harvest(settings)
    assert len(source.requests) == 2  # Identify and the first page, once
    with Services(settings) as services:
        run = services.state.latest_run("sample")
    assert run["status"] == "failed" and f"namespace {namespace!r}" in run["error"]
    assert target_by_source(settings, "sample") == {}


def test_an_envelope_in_another_namespace_fails_at_once_naming_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, it was retried as any page that is no OAI-PMH, then failed naming the root
    element 'OAI-PMH' without its namespace."""
    source = FakeSource(importable(5), page_size=2)
    misspelt = b' xmlns="http://www.openarchives.org/OAI/2.0"'
    source.every = (1, _every_page((b"<OAI-PMH" + OAI_XMLNS, b"<OAI-PMH" + misspelt)))
    harvest_fake_source(settings, monkeypatch, source)
    with pytest.raises(HarvestProtocolError, match="root element <OAI-PMH> in the namespace"):
        harvest(settings)
    assert len(source.requests) == 1  # Identify, once


def test_by_day_on_the_window_grid_asks_each_window_exactly_and_files_each_record_once(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grid's windows are whole UTC days (daily, weekly, monthly; a grid finer than a
    day is refused): asked by day, a window is asked for exactly its days, so the records
    that come are its own, each filed in the window of its datestamp and in no other.
    (Widening reaches past what was asked only for `harvest --since/--until` moments within
    days: that run files the whole days under its own key, unchanged records skipped.)"""
    stamps = {
        "oai:fake.test:feb29-last": "2024-02-29T23:59:59Z",
        "oai:fake.test:mar1-first": "2024-03-01T00:00:00Z",
        "oai:fake.test:mar1-noon": "2024-03-01T12:00:00Z",
        "oai:fake.test:mar1-last": "2024-03-01T23:59:59Z",
        "oai:fake.test:mar2-first": "2024-03-02T00:00:00Z",
        "oai:fake.test:mar2-ten": "2024-03-02T10:00:00Z",
        "oai:fake.test:mar3-first": "2024-03-03T00:00:00Z",
    }
    records = [
        FakeRecord(identifier, stamp, raw_metadata=dublin_core(n))
        for n, (identifier, stamp) in enumerate(stamps.items())
    ]
    source = harvest_fake_source(settings, monkeypatch, SecondsRefusedSource(records, page_size=2))
    grid = build_window_partitions("daily", "2024-02-01")
    keys = [str(partition_key("sample", day)) for day in ("2024-03-01", "2024-03-02")]
    (scope,) = scopes_for_keys(keys, grid)
    report = harvest(settings, scope)

    asked = [
        (r.url.params.get("from"), r.url.params.get("until"))
        for r in source.requests
        if "from" in r.url.params
    ]
    assert asked == [
        ("2024-03-01T00:00:00Z", "2024-03-02T23:59:59Z"),
        ("2024-03-01", "2024-03-02"),
    ]
    storage = PartitionStore(settings.storage_url)

    def filed(day: str) -> list[str]:
        frame = storage.read_partition(RAW_OAI_XML, "sample", day)
        return sorted(frame["identifier"].to_list()) if frame is not None else []

    assert filed("2024-03-01") == sorted(i for i in stamps if i.startswith("oai:fake.test:mar1"))
    assert filed("2024-03-02") == sorted(i for i in stamps if i.startswith("oai:fake.test:mar2"))
    assert (report.harvested, report.created) == (5, 5)  # the two days' records, once each
    assert "harvesting by whole days" in report.notices[0]
    # the next day's window alone (what the incremental schedule asks): that day only
    (later,) = scopes_for_keys([str(partition_key("sample", "2024-03-03"))], grid)
    next_day = harvest(settings, later)
    assert (next_day.harvested, next_day.created) == (1, 1)
    assert filed("2024-03-03") == ["oai:fake.test:mar3-first"]
    assert filed("2024-03-02") == sorted(i for i in stamps if i.startswith("oai:fake.test:mar2"))


@pytest.mark.parametrize(
    ("pattern", "replacement"),
    [
        (rb"Z</datestamp>", rb"</datestamp>"),  # `2024-03-01T10:30:00`: no zone, UTC
        (rb"(<datestamp>[\d-]+)T", rb"\1 "),  # `2024-03-01 10:30:00Z`: a datetime as printed
    ],
    ids=["without-zone", "space"],
)
def test_datestamps_in_a_loose_iso_form_file_each_record_in_its_own_window(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, pattern: bytes, replacement: bytes
) -> None:
    """Sources send datestamps without their `Z` or with a space for the `T` (templates
    that print a database's datetime). Before, a harvest of several windows in one sweep
    (a backfill, a full harvest) filed every such record in its first window: the others
    stayed empty, whatever their records' days."""
    records = [
        FakeRecord(
            f"oai:fake.test:{day}-{hour}",
            f"2024-03-0{day}T{hour:02d}:30:00Z",
            raw_metadata=dublin_core(day * 100 + hour),
        )
        for day in (1, 2, 3)
        for hour in (0, 12, 23)
    ]
    source = FakeSource(records, page_size=4)
    source.every = (1, transform_body(lambda body: re.sub(pattern, replacement, body)))
    harvest_fake_source(settings, monkeypatch, source)
    grid = build_window_partitions("daily", "2024-02-01")
    days = ("2024-03-01", "2024-03-02", "2024-03-03")
    (scope,) = scopes_for_keys([str(partition_key("sample", day)) for day in days], grid)
    report = harvest(settings, scope)
    storage = PartitionStore(settings.storage_url)
    assert (report.harvested, report.created, report.errors) == (9, 9, 0)
    for number, day in enumerate(days, 1):
        frame = storage.read_partition(RAW_OAI_XML, "sample", day)
        assert frame is not None, day
        assert sorted(frame["identifier"].to_list()) == sorted(
            f"oai:fake.test:{number}-{hour}" for hour in (0, 12, 23)
        )
        sent = re.sub(
            pattern, replacement, f"<datestamp>2024-03-0{number}T12:30:00Z</datestamp>".encode()
        )
        assert sent.decode()[11:-12] in frame["datestamp"].to_list()  # kept as sent


def _empty_list(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    """A token page answered with an empty list and no token: the list ends, silently."""
    return FakeSource([]).xml("ListRecords", "<ListRecords/>")


SHORT_LIST = (
    "http://fake.test/oai (ListRecords): the list ended after {listed} records, {gap} fewer "
    "than the 20 the source announced (completeListSize)"
)


def test_a_list_ended_far_short_of_its_announced_size_is_noted_with_the_numbers(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, a token page answered with an empty <ListRecords/> ended the list silently:
    the run succeeded with 6 of the 20 records its tokens announced, and nothing said so."""
    source = harvest_fake_source(settings, monkeypatch, FakeSource(importable(20)))
    source.faults[4] = _empty_list  # Identify, pages one and two, then the empty page
    report = harvest(settings)
    assert report.harvested == 6
    (notice,) = report.notices
    assert notice.startswith(SHORT_LIST.format(listed=6, gap=14))
    text, data = _status("--harvester", "sample")
    assert data["notices"] == [notice] and f"  note: {notice}" in text.splitlines()


def test_a_set_whose_list_size_counts_the_whole_source_is_noted_once_as_a_quirk(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source lists the set's 7 records whole but announces its 20 as the set's
    completeListSize. Before, every harvest of the set warned of a list cut short (harvest
    again, tell the source's operator) though nothing was missing."""
    records = importable(20)
    for record in records[:7]:
        record.sets = ["s1"]
    source = SetBlindSizeSource(records)
    harvest_fake_source(settings, monkeypatch, source, setspec="s1")
    report = harvest(settings)
    assert report.harvested == 7
    assert report.notices == [
        "http://fake.test/oai: the source's completeListSize counts the whole source, not the "
        "set (a set's list announces the size of the list without the set): a set's list "
        "that ends normally is taken as whole"
    ]


def test_a_set_list_ended_short_of_the_sets_own_size_is_still_noted(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list without the set is larger than the size announced: that size is the set's,
    and a set's list ended after 6 of its 20 records is cut short, as before."""
    records = importable(30)
    for record in records[:20]:
        record.sets = ["s1"]
    source = harvest_fake_source(settings, monkeypatch, FakeSource(records), setspec="s1")
    source.faults[4] = _empty_list  # Identify, pages one and two, then the empty page
    (notice,) = harvest(settings).notices
    assert notice.startswith(SHORT_LIST.format(listed=6, gap=14).replace(")", " set s1)", 1))


def _in_sets(count: int, *sets: str) -> list[FakeRecord]:
    records = importable(count)
    for record in records:
        record.sets = list(sets)
    return records


@pytest.mark.parametrize(
    ("code", "said"),
    [
        ("noSetHierarchy", "the source has no sets (its answer: noSetHierarchy: "),
        ("badArgument", "the source has no set 'user-nosuch' (ListSets does not list it; "),
        ("noRecordsMatch", "the source has no set 'user-nosuch' (ListSets does not list it; "),
    ],
)
def test_a_set_the_source_does_not_have_is_a_configuration_error(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, code: str, said: str
) -> None:
    """Before, noRecordsMatch for a set the source does not have was an empty harvest (and a
    later reconcile took every record harvested before for deleted), and noSetHierarchy or
    badArgument the source's error alone, not saying that the setspec is wrong."""
    source = FakeSource(_in_sets(4, "user-abc"))
    if code != "noRecordsMatch":
        if code == "noSetHierarchy":
            source.records = importable(4)  # a source without sets
        answer = source.error(code, "no such set", status=422)
        source.faults[2] = lambda request, response: answer  # Identify, then the list
    harvest_fake_source(settings, monkeypatch, source, setspec="user-nosuch")
    with pytest.raises(UnknownSet) as refused:
        harvest(settings)
    assert said in str(refused.value)


def test_an_empty_set_the_source_has_is_an_empty_harvest(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A set ListSets lists (itself, or a set below it) is only empty; an incremental
    harvest's empty answer for the set the last succeeded run listed is not judged again (no
    ListSets at every quiet harvest)."""
    source = FakeSource(_in_sets(4, "col_10023/1"))
    source.sets = ["col_10023/1", "ddc:610:1", "openaire_data"]
    harvest_fake_source(settings, monkeypatch, source, setspec="openaire_data")
    assert harvest(settings).harvested == 0
    with Services(settings) as services:
        HarvesterRegistry(services.state).upsert(
            services.harvester("sample").model_copy(update={"setspec": "ddc:610"})
        )
    assert harvest(settings).harvested == 0
    asked = len(source.requests)
    since = HarvestScope.adhoc("sample", since=datetime(2024, 3, 1, tzinfo=UTC))
    source.sets = []
    assert harvest(settings, since).harvested == 0
    assert "ListSets" not in source.verbs[asked:]


def test_an_incremental_harvest_of_a_set_the_source_does_not_have_is_a_configuration_error(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dated list of a mistyped set answers noRecordsMatch, as a quiet day does: before, an
    incremental harvest took it for an empty harvest, and the typo went unnoticed until the
    next full harvest or reconcile. ListSets is asked once when a set's dated list is empty
    and the harvester's last succeeded run did not list that set (a quiet incremental of a
    set harvested before asks nothing more: see the test above)."""
    source = FakeSource(_in_sets(4, "user-abc"))
    harvest_fake_source(settings, monkeypatch, source, setspec="user-abcd")
    since = HarvestScope.adhoc("sample", since=datetime(2024, 3, 2, tzinfo=UTC))
    with pytest.raises(UnknownSet, match="the source has no set 'user-abcd'"):
        harvest(settings, since)
    assert source.verbs.count("ListSets") == 1

    with Services(settings) as services:  # fixed, harvested; then mistyped in an update
        registry = HarvesterRegistry(services.state)
        registry.upsert(services.harvester("sample").model_copy(update={"setspec": "user-abc"}))
    assert harvest(settings).harvested == 4
    assert harvest(settings, since).harvested == 0
    with Services(settings) as services:
        registry = HarvesterRegistry(services.state)
        registry.upsert(services.harvester("sample").model_copy(update={"setspec": "user-ab"}))
    with pytest.raises(UnknownSet, match="the source has no set 'user-ab'"):
        harvest(settings, since)
    assert source.verbs.count("ListSets") == 2


def test_a_set_whose_check_failed_is_checked_again_by_the_next_incremental_harvest(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mistyped set's first harvest succeeds empty when ListSets fails (nothing says the
    set is wrong). Before, that success alone made every later empty incremental list of
    the set a quiet day, and the typo went unnoticed; now only a run whose list confirmed
    the set (records, or ListSets listing it) does, as does a run of an older version."""
    source = harvest_fake_source(
        settings,
        monkeypatch,
        FakeSource(_in_sets(4, "user-abc")),
        setspec="user-abcd",
        reader_options={"max_retries": 0},
    )
    source.faults[3] = status(500)  # Identify, the list, then ListSets fails
    assert harvest(settings).harvested == 0
    assert source.verbs == ["Identify", "ListRecords", "ListSets"]

    since = HarvestScope.adhoc("sample", since=datetime(2024, 3, 2, tzinfo=UTC))
    with pytest.raises(UnknownSet, match="the source has no set 'user-abcd'"):
        harvest(settings, since)
    assert source.verbs.count("ListSets") == 2


def test_a_set_whose_list_held_records_is_not_checked_when_its_next_list_is_empty(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A set ListSets does not list (sources hide some) but whose list held records is the
    source's: the resumed run's second list (what changed since the run began, empty) and the
    next quiet incremental harvest take it for empty. Before, they asked ListSets and failed
    the run with UnknownSet."""
    source = harvest_fake_source(
        settings,
        monkeypatch,
        FakeSource(_in_sets(6, "hidden"), page_size=2),
        setspec="hidden",
        reader_options={"max_retries": 0, "prefetch": False},
    )
    source.sets = ["other"]
    source.faults[3] = status(500)  # Identify, page one, then page two fails
    with pytest.raises(HarvestProtocolError, match="HTTP 500"):
        harvest(settings)
    assert harvest(settings).harvested == 6
    since = HarvestScope.adhoc("sample", since=datetime(2024, 3, 2, tzinfo=UTC))
    assert harvest(settings, since).harvested == 0
    assert "ListSets" not in source.verbs


def test_a_resumed_sweep_counts_what_its_earlier_attempts_listed(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attempt that resumes a failed run lists only the rest of the list: it is not
    short for that, and when it ends early, the notice counts every attempt's records."""
    source = harvest_fake_source(
        settings,
        monkeypatch,
        FakeSource(importable(20)),
        reader_options={"max_retries": 0, "prefetch": False},
    )
    source.faults[3] = status(500)  # Identify, page one, then page two fails
    with pytest.raises(HarvestProtocolError, match="HTTP 500"):
        harvest(settings)
    resumed = harvest(settings)
    assert resumed.harvested == 20 and resumed.notices == []

    since = HarvestScope.adhoc("sample", since=datetime(2024, 3, 1, tzinfo=UTC))
    source.faults[len(source.requests) + 3] = status(500)  # Identify, page one, page two
    with pytest.raises(HarvestProtocolError, match="HTTP 500"):
        harvest(settings, since)
    # Identify, then pages two and three by token, then the empty page
    source.faults[len(source.requests) + 4] = _empty_list
    short = harvest(settings, since)
    (notice,) = short.notices
    assert notice.startswith("http://fake.test/oai (ListRecords from 2024-03-01")
    assert "the list ended after 9 records, 11 fewer than the 20 the source" in notice


def _identify_refused(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    """An Identify answered with an OAI-PMH error and HTTP 500 (a source's broken
    front end): the source's answer, not retried."""
    return FakeSource([]).error("badArgument", "Internal error", status=500)


def test_an_oai_error_in_answer_to_identify_is_noted_or_the_saved_identify_serves(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Identify the source answers with an OAI-PMH error: a first harvest failed (before
    that, without any run), though the source's lists work; it lists by whole days now, and
    `status` notes why. Once identified, the Identify saved serves, as it does when Identify
    fails otherwise."""
    source = harvest_fake_source(settings, monkeypatch, FakeSource(importable(5), page_size=2))
    source.faults[1] = _identify_refused
    first = harvest(settings)
    assert first.created == 5
    text, shown = _status("--harvester", "sample")
    assert shown["run"]["status"] == "succeeded"
    (notice,) = [n for n in shown["notices"] if "Identify failed" in n]
    assert "badArgument: Internal error" in notice and "note: the source's Identify" in text

    identified = harvest(settings)  # Identify answers now
    assert identified.run_id != first.run_id and identified.unchanged == 5

    source.faults[len(source.requests) + 1] = _identify_refused
    again = harvest(settings)
    assert again.run_id != identified.run_id and again.harvested == 5 and again.errors == 0
    assert not [n for n in again.notices if "Identify failed" in n]


@pytest.mark.parametrize("identifier", ["", " \n "], ids=["empty", "blank"])
def test_a_record_without_identifier_is_an_error_status_names_as_such(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, identifier: str
) -> None:
    """The page's other records are written; `status` said `failed : MissingIdentifier`
    before, as if a name had been lost from the line."""
    records = importable(5)
    records[2].identifier = identifier
    harvest_fake_source(settings, monkeypatch, FakeSource(records, page_size=5))
    for _ in range(2):  # a second harvest: the same error, nothing written twice
        report = harvest(settings)
        assert (report.created + report.unchanged, report.error_types) == (
            4,
            {"MissingIdentifier": 1},
        )
        assert len(target_by_source(settings, "sample")) == 4
    text, data = _status("--harvester", "sample")
    assert "  failed (no identifier): MissingIdentifier: record header has no identifier" in (
        text.splitlines()
    )
    assert [f["identifier"] for f in data["recent_failures"]] == [""]


class DayListingSource(FakeSource):
    """Declares day granularity and takes `from`/`until` by day, but dates its records in
    seconds (as DSpace does): a range with hours is asked for as whole days."""

    def granule(self, datestamp: str) -> str:
        return datestamp


def _failed_run_since_three(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """Harvest run 1, `--since 03:00` of six records an hour apart from 00:00 at a source
    listing by day, two a page, failed at its second page: it left out the first page's
    00:00 and 01:00 (outside its hours), and stopped before 02:00 (outside) and 03:00."""
    source = harvest_fake_source(
        settings,
        monkeypatch,
        DayListingSource(_hourly(6), page_size=2, granularity="day"),
        reader_options={"max_retries": 0, "prefetch": False},
    )
    # Identify, the first page, then the second page fails (no retries)
    source.faults[3] = lambda request, response: httpx.Response(500, text="oops")
    with pytest.raises(HarvestProtocolError, match="HTTP 500"):
        harvest(settings, HarvestScope.adhoc("sample", since=datetime(2024, 3, 2, 3, tzinfo=UTC)))
    source.faults.clear()


def _hourly(count: int) -> list[FakeRecord]:
    records = importable(count)
    for hour, record in enumerate(records):
        record.datestamp = f"2024-03-02T{hour:02d}:00:00Z"
    return records


def test_a_failed_run_with_hours_is_not_resumed_by_a_harvest_of_other_hours_of_its_days(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a source listing by day, `--since 03:00` and `--since 01:00` ask for the same
    days. The second resumed the first's failed run where it stopped: the records of its
    first page dated 01:00-03:00 had been left out, and were never harvested. It starts a
    run of its own now."""
    _failed_run_since_three(settings, monkeypatch)

    report = harvest(
        settings, HarvestScope.adhoc("sample", since=datetime(2024, 3, 2, 1, tzinfo=UTC))
    )

    assert report.run_id == 2
    assert report.harvested == 5
    assert sorted(target_by_source(settings, "sample")) == [
        f"oai:fake.test:{n}" for n in range(1, 6)
    ]


@pytest.mark.parametrize("by_number", [True, False])
def test_a_run_with_hours_resumed_leaves_out_what_its_hours_leave_out(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, by_number: bool
) -> None:
    """`--resume N` (an open scope) of a `--since 03:00` run at a source listing by day
    staged the records of 00:00-03:00 its later pages listed: its hours were forgotten.
    A harvest of the same hours resumes the run too, and leaves them out."""
    _failed_run_since_three(settings, monkeypatch)

    since = None if by_number else datetime(2024, 3, 2, 3, tzinfo=UTC)
    with Services(settings) as services:
        resumed = run_harvest(
            services,
            HarvestScope.adhoc("sample", since=since),
            RunOptions(resume_batch_id=1 if by_number else None),
            progress=lambda _m: None,
        )

    assert (resumed.run_id, resumed.harvested) == (1, 3)
    assert sorted(target_by_source(settings, "sample")) == [f"oai:fake.test:{n}" for n in (3, 4, 5)]
    assert any("1 record dated outside the hours asked was left out" in n for n in resumed.notices)
