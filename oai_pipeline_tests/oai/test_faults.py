"""Every fault a real endpoint shows must end with exactly the records the source holds."""

from __future__ import annotations

import dataclasses
import pickle
import re
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from lxml import etree

from oai_pipeline.errors import ConfigurationError, PipelineError
from oai_pipeline.oai.client import OAIClient, _count_notice, another_base_url
from oai_pipeline.oai.errors import (
    HarvestProtocolError,
    NoRecordsMatchForToken,
    NotOAIResponse,
    OAIError,
    PersistentProtocolError,
    RefusedRequest,
    SourceFailure,
    UnknownSet,
    UnprovenEndpoint,
)
from oai_pipeline.oai.pages import (
    UnusablePage,
    parse_response,
    read_identify,
    read_metadata_prefixes,
    read_sets,
)
from oai_pipeline.oai.types import HarvestedRecord, OAISet, SweepCheckpoint
from oai_pipeline_tests.oai.fake_source import (
    BASE_URL,
    EchoingSource,
    FakeRecord,
    FakeSource,
    Fault,
    OpaqueTokenSource,
    PrefixWithTokenSource,
    SecondsRefusedSource,
    ShortCountSource,
    drop_connection,
    expire_tokens,
    html_page,
    make_records,
    no_records_match,
    not_xml,
    oai_error,
    status,
    timeout,
    transform_body,
    truncated,
    unavailable,
)


class Harvest:
    """One sweep of a FakeSource with a recording sleep and checkpoint store."""

    def __init__(self, source: FakeSource, **client_options: object) -> None:
        self.source = source
        self.sleeps: list[float] = []
        self.checkpoints: list[SweepCheckpoint] = []
        options = {"max_retries": 4, "backoff_base": 0.01, **client_options}
        self.client = OAIClient(
            BASE_URL, transport=source.transport(), sleep=self.sleeps.append, **options
        )
        self.records: dict[str, HarvestedRecord] = {}
        self.yielded = 0

    def run(self, verb: str = "ListRecords", **sweep_options: object) -> Harvest:
        for page in self.client.sweep(
            verb,
            metadata_prefix="oai_dc",
            save_checkpoint=self.checkpoints.append,
            **sweep_options,
        ):
            for record in page.records:
                self.yielded += 1
                self.records[record.identifier] = record
        return self


def held(source: FakeSource) -> set[str]:
    return {record.identifier for record in source.records}


def _saved_mid_list(source: FakeSource) -> SweepCheckpoint:
    """The checkpoint a run leaves when it fails after two pages: it names the third."""
    first = Harvest(source)
    sweep = first.client.sweep(
        "ListRecords", metadata_prefix="oai_dc", save_checkpoint=first.checkpoints.append
    )
    next(sweep)
    next(sweep)
    sweep.close()
    source.requests.clear()
    return first.checkpoints[-1]


@pytest.mark.parametrize("prefetch", [True, False], ids=["prefetch", "sequential"])
def test_clean_harvest_pages_through_tokens_and_checkpoints_before_each_page(
    prefetch: bool,
) -> None:
    source = FakeSource(make_records(10), page_size=3)
    harvest = Harvest(source).run(prefetch=prefetch)
    assert set(harvest.records) == held(source)
    assert harvest.yielded == 10  # nothing twice
    assert len(source.requests) == 4
    tokens = [c.resumption_token for c in harvest.checkpoints]
    assert tokens[0] is None and all(tokens[1:]) and len(set(tokens)) == 4
    assert [c.pages_read for c in harvest.checkpoints] == [0, 1, 2, 3]
    assert harvest.checkpoints[1].cursor == 0 and harvest.checkpoints[2].cursor == 3
    assert harvest.checkpoints[1].response_date == "2026-01-01T00:00:00Z"
    # each checkpoint names the page requested next (saved before that page is handed over)
    assert [r.url.params.get("resumptionToken") for r in source.requests] == tokens
    assert harvest.sleeps == []


def test_503_with_retry_after_every_third_request() -> None:
    source = FakeSource(make_records(10), page_size=2)
    source.every = (3, unavailable("2"))
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source)
    assert harvest.yielded == 10
    assert harvest.sleeps and all(2 <= s <= 2.5 for s in harvest.sleeps)


def test_503_retry_after_http_date_in_the_past_is_clamped_to_zero() -> None:
    source = FakeSource(make_records(4), page_size=2)
    source.faults[1] = unavailable("Wed, 21 Oct 2015 07:28:00 GMT")
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source)
    assert len(harvest.sleeps) == 1 and 0 <= harvest.sleeps[0] <= 0.5


def test_503_retry_after_is_clamped_to_max_retry_wait() -> None:
    source = FakeSource(make_records(4), page_size=2)
    source.faults[1] = unavailable("86400")
    harvest = Harvest(source, max_retry_wait=30).run()
    assert set(harvest.records) == held(source)
    assert 30 <= harvest.sleeps[0] <= 33


def test_503_retry_after_counts_against_the_retry_budget() -> None:
    source = FakeSource(make_records(4), page_size=2)
    source.every = (1, unavailable("100"))
    with pytest.raises(HarvestProtocolError, match="gave up"):
        Harvest(source, retry_budget_seconds=250).run()
    assert len(source.requests) == 3  # waited ~100 twice; a third wait would exceed 250


def test_a_retry_after_of_hours_is_named_when_the_retries_give_up() -> None:
    """A source down for maintenance asks to come back in two hours: the waits are clamped
    and the run gives up within its budget, as before; its error now says what the source
    asked (it read "last problem: HTTP 503", as for a blip)."""
    source = FakeSource(make_records(4), page_size=2)
    source.every = (1, unavailable("7200"))
    with pytest.raises(HarvestProtocolError) as gave_up:
        Harvest(source, max_retry_wait=60, retry_budget_seconds=250).run()
    assert str(gave_up.value).endswith(
        "last problem: HTTP 503, asked to come back in 2 h 0 min (Retry-After), longer than a "
        "retry waits (60 s): the run resumes where it stopped when run again after that"
    )


def bad_gzip(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    return httpx.Response(200, content=b"\x1f\x8bnot gzip", headers={"content-encoding": "gzip"})


@pytest.mark.parametrize(
    "fault",
    [status(500), status(502), status(429), unavailable(None), drop_connection, timeout, bad_gzip],
)
def test_server_errors_and_transport_failures_back_off_and_recover(fault) -> None:
    source = FakeSource(make_records(9), page_size=3)
    source.faults = {2: fault, 3: fault}
    harvest = Harvest(source, backoff_base=1.0).run()
    assert set(harvest.records) == held(source)
    assert harvest.yielded == 9
    # exponential with jitter: first in [0.5, 1], second in [1, 2]
    assert 0.5 <= harvest.sleeps[0] <= 1 and 1 <= harvest.sleeps[1] <= 2


def test_backoff_is_bounded_by_max_retries() -> None:
    source = FakeSource(make_records(9), page_size=3)
    source.every = (1, status(500))
    with pytest.raises(HarvestProtocolError, match="HTTP 500"):
        Harvest(source, max_retries=3).run()
    assert len(source.requests) == 4


@pytest.mark.parametrize("fault", [not_xml, html_page, truncated], ids=["not-xml", "html", "cut"])
def test_unusable_page_with_status_200_is_retried_never_the_end_of_the_list(fault) -> None:
    source = FakeSource(make_records(10), page_size=4)
    source.faults = {2: fault}
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source)
    assert harvest.yielded == 10
    assert len(harvest.sleeps) == 1


@pytest.mark.parametrize("prefetch", [True, False], ids=["prefetch", "sequential"])
def test_a_page_that_stays_truncated_fails_the_run_instead_of_ending_it(prefetch: bool) -> None:
    source = FakeSource(make_records(10), page_size=4)
    source.faults = {number: truncated for number in range(2, 10)}  # page 2 keeps breaking
    harvest = Harvest(source, max_retries=2)
    with pytest.raises(HarvestProtocolError, match="not well-formed"):
        harvest.run(prefetch=prefetch)
    assert len(harvest.records) == 4  # page one only: the cut page was never taken as the end
    assert harvest.checkpoints[-1].pages_read == 1  # a rerun resumes at page two


def test_illegal_characters_are_cleaned_without_a_retry() -> None:
    source = FakeSource(make_records(6), page_size=3)
    dirty = "\x01&#1;&#xFFFE;&#xD800;&#x1F;"
    source.every = (1, transform_body(lambda b: b.replace(b"Record ", f"Rec{dirty}ord ".encode())))
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source)
    assert harvest.sleeps == []
    for record in harvest.records.values():
        assert record.error is None
        assert b"<dc:title>Record " in record.xml


def test_wrong_declared_encodings_are_repaired() -> None:
    records = [
        FakeRecord(f"oai:fake.test:{n}", f"2024-03-01T00:00:0{n}Z", title="Café") for n in range(4)
    ]
    source = FakeSource(records, page_size=2)
    # UTF-8 declared, Windows-1252 sent; then ISO-8859-1 declared, UTF-8 sent
    source.faults[1] = transform_body(lambda b: b.decode("utf-8").encode("cp1252"))
    source.faults[2] = transform_body(
        lambda b: b.replace(b'encoding="UTF-8"', b'encoding="ISO-8859-1"')
    )
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source)
    for record in harvest.records.values():
        assert "<dc:title>Café</dc:title>".encode() in record.xml


def test_expired_token_mid_harvest_redoes_the_window_from_its_start() -> None:
    source = FakeSource(make_records(10), page_size=3)
    source.faults[3] = expire_tokens(source)
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source)
    assert harvest.yielded == 16  # two pages again after the restart; the caller skips them
    tokens = [c.resumption_token for c in harvest.checkpoints]
    assert tokens.count(None) == 2  # the window start, then again after the restart


def test_a_protocol_error_code_in_another_case_is_read_as_the_protocols() -> None:
    """`BadResumptionToken` (a source's own spelling) failed the run as an unknown error,
    where the window is redone after badResumptionToken."""
    source = FakeSource(make_records(10), page_size=3)
    source.faults[3] = lambda request, response: FakeSource([]).error(
        "BadResumptionToken", "expired", status=422
    )
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source)


def _timed_out(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    """OpenSKOS's answer to a token page whose query timed out: an OAI-PMH <error> with an
    empty code, which OAI-PMH does not define."""
    return FakeSource([]).error("", "Read timed out after 10 seconds")


@pytest.mark.parametrize(
    "fault", [_timed_out, oai_error("serverBusy", 500)], ids=["empty-code", "own-code-500"]
)
def test_an_error_of_the_sources_own_is_retried_as_a_failed_request(fault: Fault) -> None:
    """Taken for the source's answer, it failed the run at once, not retried by Dagster
    either, though the next try may pass."""
    source = FakeSource(make_records(10), page_size=3)
    source.faults[3] = fault
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source)
    assert harvest.yielded == 10  # the page asked again, not the window redone


def test_an_error_of_the_sources_own_at_every_try_is_a_transient_failure() -> None:
    source = FakeSource(make_records(10), page_size=3)
    source.every = (1, _timed_out)
    with pytest.raises(SourceFailure) as failed:
        Harvest(source, max_retries=2).run()
    assert "gave up after 3 attempts" in str(failed.value)
    assert "an error OAI-PMH does not define, the source's own (unknown: Read timed out" in str(
        failed.value
    )
    assert not isinstance(failed.value, PersistentProtocolError)  # Dagster retries it


def test_restarts_are_bounded() -> None:
    source = FakeSource(make_records(10), page_size=3)
    source.every = (2, expire_tokens(source))
    with pytest.raises(HarvestProtocolError, match="refused"):
        Harvest(source).run(max_restarts=2)


@pytest.mark.parametrize("prefetch", [True, False], ids=["prefetch", "sequential"])
def test_resume_from_a_saved_checkpoint_after_a_crash(prefetch: bool) -> None:
    source = FakeSource(make_records(10), page_size=3)
    first = Harvest(source)
    sweep = first.client.sweep(
        "ListRecords",
        metadata_prefix="oai_dc",
        save_checkpoint=first.checkpoints.append,
        prefetch=prefetch,
    )
    page_one = {r.identifier for r in next(sweep).records}
    page_two = {r.identifier for r in next(sweep).records}
    sweep.close()  # the process dies while staging the second page
    saved = first.checkpoints[-1]  # saved before page two was fetched
    assert saved.pages_read == 1 and saved.resumption_token
    source.requests.clear()
    second = Harvest(source).run(checkpoint=saved, prefetch=prefetch)
    assert source.requests[0].url.params["resumptionToken"] == saved.resumption_token
    assert page_one | set(second.records) == held(source)
    assert page_one.isdisjoint(second.records) and page_two <= set(second.records)
    assert second.checkpoints[0] == saved
    assert [c.pages_read for c in second.checkpoints] == [1, 2, 3]


def test_a_checkpoint_of_another_window_is_refused() -> None:
    source = FakeSource(make_records(3))
    checkpoint = SweepCheckpoint(
        from_="2024-01-01",
        until=None,
        set_spec=None,
        metadata_prefix="oai_dc",
        resumption_token="x",
    )
    with pytest.raises(ConfigurationError, match="checkpoint"):
        Harvest(source).run(checkpoint=checkpoint)


def _looping_transport(make_body) -> httpx.MockTransport:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        return httpx.Response(200, content=make_body(calls["n"]).encode())

    return httpx.MockTransport(handler)


def _page(inner: str) -> str:
    return (
        '<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>2026-01-01T00:00:00Z'
        f"</responseDate><request>x</request><ListRecords>{inner}</ListRecords></OAI-PMH>"
    )


def test_a_repeated_token_is_an_error_not_a_loop() -> None:
    record = (
        "<record><header><identifier>oai:x:1</identifier><datestamp>2024-01-01</datestamp>"
        "</header><metadata><x/></metadata></record>"
    )
    transport = _looping_transport(
        lambda n: _page(record + "<resumptionToken>same</resumptionToken>")
    )
    client = OAIClient(BASE_URL, transport=transport, sleep=lambda s: None)
    with pytest.raises(HarvestProtocolError, match="repeated"):
        list(client.sweep("ListRecords", metadata_prefix="oai_dc"))


@pytest.mark.parametrize(
    ("size", "ending_page", "notice"),
    [
        # Some DSpace and EPrints versions end a page that has records with an empty
        # <resumptionToken cursor=… completeListSize=…/> far short of that size: the list
        # ends there (OAI-PMH: nothing more to ask for), and the operator is told.
        (30, 2, "the list ended after 6 records, 24 fewer than the 30 the source announced"),
        # A small list: before, the slack of 5 records for changes meanwhile covered all
        # 5 of the 8 records that never came, and the run said nothing.
        (8, 1, "the list ended after 3 records, 5 fewer than the 8 the source announced"),
    ],
)
def test_an_empty_token_with_a_list_size_mid_list_ends_it_with_a_notice(
    size: int, ending_page: int, notice: str
) -> None:
    source = FakeSource(make_records(size), page_size=3)
    source.faults[ending_page] = transform_body(
        lambda body: re.sub(rb"(<resumptionToken [^>]*)>[^<]*</resumptionToken>", rb"\1/>", body)
    )
    harvest = Harvest(source).run()
    assert len(harvest.records) == 3 * ending_page and len(source.requests) == ending_page
    (told,) = harvest.client.notices
    assert notice in told


def test_endless_empty_pages_are_an_error_not_a_loop() -> None:
    transport = _looping_transport(lambda n: _page(f"<resumptionToken>t{n}</resumptionToken>"))
    client = OAIClient(BASE_URL, transport=transport, sleep=lambda s: None)
    with pytest.raises(HarvestProtocolError, match="empty or repeat"):
        list(client.sweep("ListRecords", metadata_prefix="oai_dc", max_empty_pages=5))


def test_endless_pages_of_the_same_records_are_an_error_not_a_loop() -> None:
    # A broken offset: every page lists the first records again, with a fresh token.
    records = "".join(
        f"<record><header><identifier>oai:x:{n}</identifier><datestamp>2024-01-01</datestamp>"
        "</header><metadata><x/></metadata></record>"
        for n in range(3)
    )
    transport = _looping_transport(  # (ends after 100 pages, so a regression fails, not hangs)
        lambda n: _page(records + (f"<resumptionToken>t{n}</resumptionToken>" if n < 100 else ""))
    )
    client = OAIClient(BASE_URL, transport=transport, sleep=lambda s: None)
    taken = []
    with pytest.raises(HarvestProtocolError, match="repeat the records of an earlier page"):
        for page in client.sweep("ListRecords", metadata_prefix="oai_dc", max_empty_pages=5):
            taken.append(page)
    # The first page, then six that added nothing: the sixth is the one too many.
    assert len(taken) == 7


def test_no_records_match_is_a_single_empty_last_page() -> None:
    source = FakeSource(make_records(3))
    harvest = Harvest(source)
    pages = list(harvest.client.sweep("ListRecords", metadata_prefix="oai_dc", from_="2030-01-01"))
    assert len(pages) == 1 and pages[0].records == [] and pages[0].resumption_token is None


def test_a_bad_metadata_prefix_fails_at_once_with_the_oai_code() -> None:
    source = FakeSource(make_records(3))
    harvest = Harvest(source)
    with pytest.raises(OAIError) as caught:
        list(harvest.client.sweep("ListRecords", metadata_prefix="marcxml"))
    assert caught.value.code == "cannotDisseminateFormat"
    # the list asked once; then ListMetadataFormats, for the error to name what there is
    assert source.verbs == ["ListRecords", "ListMetadataFormats"] and harvest.sleeps == []


def test_a_broken_record_becomes_a_record_error_and_the_page_is_kept() -> None:
    records = make_records(5)
    records[2].raw_metadata = (
        '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>a < b</dc:title></oai_dc:dc>'
    )
    source = FakeSource(records, page_size=5)
    harvest = Harvest(source, max_retries=0).run()
    assert set(harvest.records) == held(source)
    broken = harvest.records[records[2].identifier]
    assert broken.error is not None and broken.error.type == "MalformedRecord"
    assert broken.datestamp == records[2].datestamp
    fine = [r for r in harvest.records.values() if r is not broken]
    assert all(r.error is None and r.xml for r in fine)


def test_oai_pmh_elements_in_no_namespace_are_read_as_oai_pmh_not_what_records_hold() -> None:
    """Records, headers and tokens of every verb that lost their namespace are OAI-PMH's; a
    metadata format in no namespace (MARC without its namespace has a <record> of its own)
    stays as the source sent it."""
    records = make_records(5)
    for record in records:
        record.raw_metadata = "<record><leader>00000nam</leader></record>"
    source = FakeSource(records, page_size=2)
    source.every = (
        1,
        transform_body(
            lambda body: body.replace(
                b'<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"', b"<OAI-PMH"
            )
        ),
    )
    harvest = Harvest(source, max_retries=0)
    assert harvest.client.identify().granularity == "seconds"
    harvest.run()
    assert set(harvest.records) == held(source)
    metadata = etree.fromstring(harvest.records[records[0].identifier].xml).find(
        "{http://www.openarchives.org/OAI/2.0/}metadata"
    )
    assert [child.tag for child in metadata] == ["record"]  # MARC's, in no namespace still
    assert [child.tag for child in metadata[0]] == ["leader"]
    headers = Harvest(source, max_retries=0).run("ListIdentifiers")
    assert set(headers.records) == held(source)
    one = harvest.client.get_record(records[3].identifier, "oai_dc")
    assert (one.identifier, one.error) == (records[3].identifier, None)
    (notice,) = harvest.client.notices
    assert "OAI-PMH elements in no namespace" in notice
    assert harvest.sleeps == []


def test_a_record_broken_before_its_header_is_still_identified() -> None:
    source = FakeSource(make_records(3), page_size=3)
    target = source.records[1].identifier.encode()
    source.faults[1] = transform_body(
        lambda b: b.replace(
            b"<record><header><identifier>" + target, b"<record><header junk<><identifier>" + target
        )
    )
    harvest = Harvest(source, max_retries=0).run()
    assert set(harvest.records) == held(source)
    assert harvest.records[target.decode()].error.type == "MalformedRecord"


def test_a_broken_record_of_a_page_in_no_namespace_is_that_records_error() -> None:
    """A source whose OAI-PMH elements lost their namespace, one record not well-formed: the
    header of the broken record was read with sickle's Header, which wants a namespace, and
    its AttributeError failed the whole page instead of that record."""
    page = (
        b'<OAI-PMH><responseDate>2024-03-01T10:00:00Z</responseDate><request verb="ListRecords">'
        b"http://x/oai</request><ListRecords>"
        b"<record><header><identifier>oai:x:1</identifier><datestamp>2024-03-01</datestamp>"
        b'</header><metadata><a xmlns="urn:a">1</a></metadata></record>'
        b"<record><header><identifier>oai:x:2</identifier><datestamp>2024-03-02</datestamp>"
        b'<setSpec>s</setSpec></header><metadata><a xmlns="urn:a">a < b</a></metadata></record>'
        b"</ListRecords></OAI-PMH>"
    )
    fine, broken = parse_response(page, "ListRecords").records
    assert (fine.identifier, fine.error) == ("oai:x:1", None)
    assert (broken.identifier, broken.datestamp) == ("oai:x:2", "2024-03-02")
    assert broken.set_specs == ["s"]
    assert broken.error is not None and broken.error.type == "MalformedRecord"


def test_a_comment_inside_a_header_value_does_not_cut_it_short() -> None:
    """XML allows a comment (or a processing instruction) anywhere: the header's values were
    read up to it, so two records became one identifier (`oai:x:`), one staged over the other."""
    page = (
        b'<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><request verb="ListRecords">'
        b"http://x/oai</request><ListRecords>"
        + b"".join(
            b"<record><header><identifier>oai:x:<!-- n -->%d</identifier><datestamp>2024-03-01"
            b"<?pi x?>T10:00:00Z</datestamp><setSpec>a<!-- -->b</setSpec></header>"
            b'<metadata><a xmlns="urn:a">1</a></metadata></record>' % number
            for number in (1, 2)
        )
        + b"<resumptionToken>to<!-- -->ken</resumptionToken></ListRecords></OAI-PMH>"
    )
    parsed = parse_response(page, "ListRecords")
    assert [(r.identifier, r.datestamp, r.set_specs) for r in parsed.records] == [
        ("oai:x:1", "2024-03-01T10:00:00Z", ["ab"]),
        ("oai:x:2", "2024-03-01T10:00:00Z", ["ab"]),
    ]
    assert parsed.next_token == "token"


def test_a_comment_inside_envelope_and_identify_values_does_not_cut_them_short() -> None:
    """The responseDate, Identify's values, an <error>'s text and the names of sets and
    formats were read up to a comment or processing instruction inside: a responseDate
    cut to its day moved the next incremental window, a granularity cut before its `hh`
    harvested by days, a deletedRecord cut to `pers` was taken for "no"."""
    envelope = (
        '<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>2024-03-01'
        "<!-- c -->T10:00:00Z</responseDate><request>http://x/oai</request>{0}</OAI-PMH>"
    )
    identify = (
        "<Identify><repositoryName>Our<!-- c --> Repository</repositoryName>"
        "<baseURL>http://x/<?pi x?>oai</baseURL><protocolVersion>2.0</protocolVersion>"
        "<earliestDatestamp>2020-01-01<!-- c -->T00:00:00Z</earliestDatestamp>"
        "<deletedRecord>pers<!-- c -->istent</deletedRecord>"
        "<granularity>YYYY-MM-DD<!-- c -->Thh:mm:ssZ</granularity>"
        "<adminEmail>a@x<!-- c -->.org</adminEmail></Identify>"
    )
    parsed = parse_response(envelope.format(identify).encode(), "Identify")
    info = read_identify(parsed, "http://x/oai")
    assert (info.repository_name, info.base_url) == ("Our Repository", "http://x/oai")
    assert (info.earliest_datestamp, info.granularity) == ("2020-01-01T00:00:00Z", "seconds")
    assert (info.deleted_record, info.response_date) == ("persistent", "2024-03-01T10:00:00Z")
    error = '<error code="badArgument">bad <!-- c -->argument</error>'
    assert parse_response(envelope.format(error).encode(), "Identify").errors == [
        ("badArgument", "bad argument")
    ]
    sets = (
        "<ListSets><set><setSpec>a<!-- c -->b</setSpec><setName>A<?pi x?>B</setName></set>"
        "</ListSets>"
    )
    assert read_sets(parse_response(envelope.format(sets).encode(), "ListSets")) == [
        OAISet(spec="ab", name="AB")
    ]
    formats = (
        "<ListMetadataFormats><metadataFormat><metadataPrefix>oai<!-- c -->_dc</metadataPrefix>"
        "</metadataFormat></ListMetadataFormats>"
    )
    parsed = parse_response(envelope.format(formats).encode(), "ListMetadataFormats")
    assert read_metadata_prefixes(parsed) == ["oai_dc"]


HEADER = "<identifier{0}>oai:x:1</identifier><datestamp>2024-03-01</datestamp>"
METADATA = '<metadata><a xmlns="urn:a">1</a></metadata>'
NO_NS = ' xmlns=""'


# A record whose header, identifier or <metadata> lost OAI-PMH's namespace inside it.
LOST_INSIDE = [
    f'<record><header xmlns="">{HEADER.format("")}</header>{METADATA}</record>',
    f"<record><header>{HEADER.format(NO_NS)}</header>{METADATA}</record>",
    f"<record><header>{HEADER.format('')}</header>"
    '<metadata xmlns=""><a xmlns="urn:a">1</a></metadata></record>',
]


@pytest.mark.parametrize(
    ("verb", "item"),
    [
        ("ListRecords", LOST_INSIDE[0]),
        ("GetRecord", LOST_INSIDE[1]),
        ("ListRecords", LOST_INSIDE[2]),
        ("ListIdentifiers", f"<header>{HEADER.format(NO_NS)}</header>"),
    ],
)
def test_a_header_or_metadata_that_lost_its_namespace_in_a_sound_item_is_read_and_noted(
    verb: str, item: str
) -> None:
    """Only the list's items were looked at for OAI-PMH elements in no namespace: a header
    (or its identifier) or a <metadata> that lost it inside a record that kept it made the
    record a MissingHeader (MissingIdentifier, MissingMetadata) error, never harvested, and
    no notice said why."""
    page = (
        '<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><request verb="ListRecords">'
        f"http://x/oai</request><{verb}>{item}</{verb}></OAI-PMH>"
    ).encode()
    parsed = parse_response(page, verb)  # type: ignore[arg-type]
    (record,) = parsed.records
    assert (record.identifier, record.datestamp, record.error) == ("oai:x:1", "2024-03-01", None)
    assert parsed.notice is not None
    if record.xml is not None:  # stored as OAI-PMH's: the transformer finds its metadata
        stored = etree.fromstring(record.xml)
        assert stored.find("{http://www.openarchives.org/OAI/2.0/}metadata") is not None


@pytest.mark.parametrize("item", LOST_INSIDE, ids=["header", "identifier", "metadata"])
def test_a_sound_record_that_lost_its_namespace_inside_beside_a_broken_one_is_read(
    item: str,
) -> None:
    """The same record on a page that is read record by record, as another of its records
    is not well-formed: it was read as the sound page's were not, a MissingHeader
    (MissingIdentifier, MissingMetadata) error, and the page's notice said nothing."""
    broken = HEADER.format("").replace("oai:x:1", "oai:x:2")
    page = (
        '<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><request verb="ListRecords">'
        f"http://x/oai</request><ListRecords>{item}<record><header>{broken}</header>"
        "<metadata><a>1<b></a></metadata></record></ListRecords></OAI-PMH>"
    ).encode()
    parsed = parse_response(page, "ListRecords")
    sound, malformed = parsed.records
    assert (sound.identifier, sound.datestamp, sound.error) == ("oai:x:1", "2024-03-01", None)
    assert (malformed.identifier, malformed.error.type) == ("oai:x:2", "MalformedRecord")
    assert parsed.notice is not None
    stored = etree.fromstring(sound.xml)  # as OAI-PMH's: the transformer finds its metadata
    assert stored.find("{http://www.openarchives.org/OAI/2.0/}metadata") is not None


def test_an_error_beside_records_is_an_unusable_page_not_an_empty_list() -> None:
    """A response with noRecordsMatch and records in its list contradicts itself: taken as
    the error, it was an empty last page, and its records were dropped without a word."""
    record = f"<record><header>{HEADER.format('')}</header>{METADATA}</record>"
    page = (
        '<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><request verb="ListRecords">'
        f'http://x/oai</request><error code="noRecordsMatch"/><ListRecords>{record}'
        "</ListRecords></OAI-PMH>"
    ).encode()
    with pytest.raises(UnusablePage, match="noRecordsMatch") as caught:
        parse_response(page, "ListRecords")
    assert caught.value.whole
    with pytest.raises(UnusablePage, match="noRecordsMatch"):  # one of them broken
        parse_response(page.replace(b">1</a>", b">a < b</a>"), "ListRecords")
    empty = page.replace(record.encode(), b"")
    assert parse_response(empty, "ListRecords").errors == [("noRecordsMatch", "")]


def test_a_parser_refusal_is_told_on_one_line_in_the_operators_words() -> None:
    """libxml2 ends some messages with a line break (an attribute over its 10 MB bound): the
    page's error, and the run's failure, came on two lines, with libxml2's hint to a
    programmer ("try XML_PARSE_HUGE") where the operator needs what is wrong and where."""
    page = (
        b'<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><request verb="Identify" x="'
        + b"v" * 11_000_000
        + b'">http://x/oai</request></OAI-PMH>'
    )
    with pytest.raises(UnusablePage) as caught:
        parse_response(page, "Identify")
    message = str(caught.value)
    assert "\n" not in message and "XML_PARSE_HUGE" not in message
    assert message.startswith("a value (text or attribute) larger than the parser's limit of ")
    assert "10 MB in the page (line 1, column " in message
    assert caught.value.whole  # the same at every attempt: not a page cut short
    with pytest.raises(UnusablePage) as caught:  # a web page's complaint too
        parse_response(b"<!DOCTYPE html>" + page, "Identify")
    assert "XML_PARSE_HUGE" not in str(caught.value)
    assert "larger than the parser's limit of 10 MB" in str(caught.value)


@pytest.mark.parametrize("where", ["attribute", "text"])
def test_a_value_over_the_parsers_limit_in_one_record_is_that_records_error(where: str) -> None:
    """One record with a value over libxml2's 10 MB bound: it became a MalformedRecord
    "not well-formed: ... try XML_PARSE_HUGE", which told the operator nothing of what was
    wrong; the other records of the page are kept."""
    huge = "v" * 11_000_000
    sound = '<a xmlns="urn:a">1</a>'
    metadata = f'<a xmlns="urn:a" big="{huge}">1</a>' if where == "attribute" else f"<a>{huge}</a>"
    page = (
        '<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><request verb="ListRecords">'
        "http://x/oai</request><ListRecords>"
        + "".join(
            f"<record><header><identifier>oai:x:{n}</identifier><datestamp>2024-03-01"
            f"</datestamp></header><metadata>{metadata if n == 2 else sound}"
            "</metadata></record>"
            for n in (1, 2, 3)
        )
        + "</ListRecords></OAI-PMH>"
    ).encode()
    first, huge_one, third = parse_response(page, "ListRecords").records
    assert (first.error, third.error) == (None, None)
    assert (huge_one.identifier, huge_one.datestamp) == ("oai:x:2", "2024-03-01")
    assert huge_one.error is not None
    assert (huge_one.error.type, huge_one.error.location) == (
        "OverParserLimit",
        "record 2 of the page",
    )
    assert huge_one.error.message == (
        "record holds a value (text or attribute) larger than the parser's limit of 10 MB"
    )


LAUGHS = (
    b'<!DOCTYPE OAI-PMH [<!ENTITY lol "lol">'
    + b"".join(
        f'<!ENTITY lol{n} "{("&lol" + str(n - 1) + ";") * 10 if n > 1 else "&lol;" * 10}">'.encode()
        for n in range(1, 10)
    )
    + b"]>"
)


def _with_doctype(doctype: bytes, use: bytes) -> Callable[[bytes], bytes]:
    def change(body: bytes) -> bytes:
        head, rest = body.split(b"\n", 1)
        return head + b"\n" + doctype + rest.replace(b"Record ", use + b" Record ", 1)

    return change


def test_billion_laughs_page_is_refused_not_expanded() -> None:
    """Said so, and the source's answer once it comes again byte for byte: before, it read
    "not well-formed XML", and was retried to the end of the client's tries (~50 s with the
    defaults), then by Dagster."""
    source = FakeSource(make_records(6), page_size=3)
    source.every = (1, transform_body(_with_doctype(LAUGHS, b"&lol9;")))
    harvest = Harvest(source)  # four retries allowed
    with pytest.raises(NotOAIResponse, match="the same bytes at 2 tries in a row") as refused:
        harvest.run()
    assert "(ListRecords): the page declares XML entities (<!ENTITY …> in its DOCTYPE)" in str(
        refused.value
    )
    assert harvest.records == {}
    assert len(source.requests) == 2  # refused (and tried once more), never expanded


def test_a_page_declaring_entities_anew_at_each_try_is_retried_to_the_end() -> None:
    """Only the same bytes again are the source's answer: differing ones (a generator that
    dates its pages) are tried as any unreadable page is, then fail as malformed."""
    source = FakeSource(make_records(3), page_size=3)
    tries = iter(range(100))
    source.every = (
        1,
        transform_body(
            lambda body: _with_doctype(LAUGHS, f"&lol9;<!-- {next(tries)} -->".encode())(body)
        ),
    )
    harvest = Harvest(source, max_retries=2)
    with pytest.raises(PipelineError, match="declares XML entities"):
        harvest.run()
    assert len(source.requests) == 3


def test_billion_laughs_once_is_retried_and_the_harvest_completes() -> None:
    source = FakeSource(make_records(6), page_size=3)
    source.faults[2] = transform_body(_with_doctype(LAUGHS, b"&lol9;"))
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source)
    assert all(b"lollol" not in r.xml for r in harvest.records.values())


def test_external_entity_page_never_reads_the_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-42")
    doctype = f'<!DOCTYPE OAI-PMH [<!ENTITY xxe SYSTEM "file://{secret}">]>'.encode()
    source = FakeSource(make_records(3), page_size=3)
    source.every = (1, transform_body(_with_doctype(doctype, b"&xxe;")))
    harvest = Harvest(source, max_retries=1)
    with pytest.raises(NotOAIResponse, match="declares XML entities") as caught:
        harvest.run()
    assert "TOP-SECRET" not in str(caught.value)


def test_external_entity_reference_in_one_record_is_that_records_error() -> None:
    records = make_records(4)
    records[1].raw_metadata = (
        '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>&xxe;</dc:title></oai_dc:dc>'
    )
    source = FakeSource(records, page_size=4)
    harvest = Harvest(source, max_retries=0).run()
    assert set(harvest.records) == held(source)
    assert harvest.records[records[1].identifier].error.type == "MalformedRecord"
    assert "xxe" in harvest.records[records[1].identifier].error.message


def test_list_identifiers_sweep_and_get_record() -> None:
    records = make_records(5)
    records[3].deleted = True
    source = FakeSource(records, page_size=2)
    harvest = Harvest(source).run("ListIdentifiers")
    assert set(harvest.records) == held(source)
    assert harvest.records[records[3].identifier].deleted
    assert all(r.xml is None for r in harvest.records.values())
    got = harvest.client.get_record(records[0].identifier, "oai_dc")
    assert got.identifier == records[0].identifier and got.error is None and got.xml
    missing = harvest.client.get_record("oai:fake.test:nope", "oai_dc")
    assert missing.error.type == "idDoesNotExist" and missing.identifier == "oai:fake.test:nope"


def test_one_request_at_a_time_even_from_several_threads() -> None:
    import threading
    import time

    active, most = 0, 0
    lock = threading.Lock()
    source = FakeSource(make_records(4), page_size=2)

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal active, most
        with lock:
            active += 1
            most = max(most, active)
        time.sleep(0.01)
        with lock:
            active -= 1
        return source.handle(request)

    client = OAIClient(BASE_URL, transport=httpx.MockTransport(handler))
    threads = [
        threading.Thread(target=lambda: list(client.sweep("ListRecords", metadata_prefix="oai_dc")))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(source.requests) == 8 and most == 1


def test_an_oversized_response_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("oai_pipeline.oai.client.MAX_DOCUMENT_BYTES", 200)
    source = FakeSource(make_records(4), page_size=4)
    harvest = Harvest(source)
    with pytest.raises(HarvestProtocolError, match="larger than 200 bytes"):
        harvest.run()
    assert len(source.requests) == 1


# -- noRecordsMatch in answer to a token --------------------------------------------------------


def without_list_size(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    body = response.content.replace(b' completeListSize="10"', b"")
    return httpx.Response(response.status_code, content=body, headers=response.headers)


def test_no_records_match_for_a_token_before_the_list_size_redoes_the_window() -> None:
    """The source lost the list (its index changed): the list is not over, redo it."""
    source = FakeSource(make_records(10), page_size=3)
    source.faults[2] = no_records_match  # the answer to the first token
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source)
    assert [c.resumption_token for c in harvest.checkpoints].count(None) == 2


def test_no_records_match_after_a_page_without_size_is_judged_by_the_size_announced() -> None:
    """Fuzz seeds 116 and 164: the list's first page announced 20 records, a later page
    said no size, then the source lost the list (noRecordsMatch for its token). Judged by
    the last page's size alone, nothing said more was coming: the list ended after 6 of 20
    records and the run succeeded without the other 14."""
    source = FakeSource(make_records(20), page_size=3)
    source.faults[2] = transform_body(lambda body: re.sub(rb' completeListSize="\d+"', b"", body))
    source.faults[3] = no_records_match
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source)  # the window redone from its start
    assert [c.resumption_token for c in harvest.checkpoints].count(None) == 2


def test_a_small_list_lost_more_than_a_quarter_short_redoes_the_window() -> None:
    """10 records, no cursor: the source lost the list after 6 (noRecordsMatch for the next
    token). Within the slack of a large list (5), it was taken for the list's end: a notice,
    the run succeeded without the other 4, and an incremental window's were never harvested,
    though the same list ending so is short (`ended_short`: more than a quarter)."""
    source = FakeSource(make_records(10), page_size=3)
    source.every = (1, transform_body(lambda body: re.sub(rb' cursor="\d+"', b"", body)))
    source.faults[3] = no_records_match  # the answer to the second token
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source)  # the window redone from its start
    assert [c.resumption_token for c in harvest.checkpoints].count(None) == 2


def test_a_list_lost_again_and_again_fails_instead_of_ending() -> None:
    """Lost at another point in each attempt (its tokens expire): redone until the run fails."""
    source = FakeSource(make_records(20), page_size=3)
    # after 3 records listed, then after 6, then after 9
    source.faults = {n: no_records_match for n in (2, 5, 9)}
    harvest = Harvest(source)
    with pytest.raises(HarvestProtocolError, match="refused 3 times.*noRecordsMatch"):
        harvest.run(max_restarts=2)
    assert harvest.client.notices == []


def _refused_twice(listed: int, announced: int) -> str:
    return (
        f"{BASE_URL} (ListRecords): the source answered noRecordsMatch to its resumption "
        f"token after {listed} of the {announced} records its completeListSize announced, "
        "twice at the same point; taken as the end of the list (its count is off, or it "
        "leaves records out: if records are missing, tell the source's operator)"
    )


@pytest.mark.parametrize("prefetch", [True, False], ids=["prefetch", "sequential"])
def test_a_list_short_of_its_size_at_the_same_point_twice_ends_there(prefetch: bool) -> None:
    """The source announces 14 records and sends 10, its last page naming a token it answers
    with noRecordsMatch. Before, the list looked lost: the window was redone, ended the same
    way each time, and every harvest of the source failed after its restarts."""
    source = ShortCountSource(make_records(10), page_size=5, extra=4)
    harvest = Harvest(source).run(prefetch=prefetch)
    assert set(harvest.records) == held(source)
    assert [c.resumption_token for c in harvest.checkpoints].count(None) == 2  # redone once
    assert len(source.requests) == 2 * 3  # 2 pages and the token refused, twice
    assert harvest.client.notices == [_refused_twice(10, 14)]  # not the count's notice too


def test_a_list_short_of_its_size_ends_with_its_count_as_a_reconcile_reads_it() -> None:
    """The last page says how many records the list held and what it announced, so that a
    reconcile deletes nothing by a list that ended short (`ended_short`)."""
    source = ShortCountSource(make_records(10), page_size=5, extra=4)
    client = Harvest(source).client
    pages = list(client.sweep("ListIdentifiers", metadata_prefix="oai_dc"))
    last = pages[-1]
    assert last.resumption_token is None and last.list_records == 10
    assert not last.token_refused  # the size says what is missing: ended short
    assert [p.complete_list_size for p in pages if p.complete_list_size][-1] == 14


def test_a_list_short_of_its_size_is_redone_while_its_size_changes() -> None:
    """Ended at the same record but announcing another size, the list may still be lost:
    the window is redone until two attempts in a row agree."""
    source = ShortCountSource(make_records(10), page_size=5, extra=4)
    announced = iter([14, 15, 15])

    def grow(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if "resumptionToken" not in request.url.params:
            source.extra = next(announced) - 10  # a new attempt: the count moves
        return response

    source.every = (1, grow)
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source)
    assert [c.resumption_token for c in harvest.checkpoints].count(None) == 3
    assert harvest.client.notices == [_refused_twice(10, 15)]


def test_a_list_short_of_its_size_resumed_from_its_refused_token_ends_after_one_redo() -> None:
    """A run that failed on the refused token (an older version's, or without restarts)
    left a checkpoint naming it: the resumed run's attempt counts as the first."""
    source = ShortCountSource(make_records(10), page_size=5, extra=4)
    failed = Harvest(source)
    with pytest.raises(HarvestProtocolError, match="noRecordsMatch"):
        failed.run(max_restarts=0)
    saved = failed.checkpoints[-1]
    assert saved.resumption_token == ShortCountSource.PAST_THE_END and saved.listed == 10
    source.requests.clear()

    resumed = Harvest(source).run(checkpoint=saved)

    assert set(resumed.records) == held(source)
    assert len(source.requests) == 1 + 3  # the token, then the window once
    assert resumed.client.notices == [_refused_twice(10, 14)]


def test_a_list_short_of_more_than_a_page_at_the_same_point_each_time_still_fails() -> None:
    """More than a page missing is pages lost at a fixed point (a search index's paging
    limit), not a count that is off: the run fails after its redos, as before, instead of
    ending the list without them."""
    source = ShortCountSource(make_records(10), page_size=3, extra=4)
    harvest = Harvest(source)
    with pytest.raises(HarvestProtocolError, match="refused 3 times.*noRecordsMatch"):
        harvest.run(max_restarts=2)
    assert harvest.client.notices == []


def test_a_token_refused_as_bad_at_the_same_point_each_time_still_fails() -> None:
    """Only noRecordsMatch says the list has no more: badResumptionToken keeps its redo."""
    source = ShortCountSource(make_records(10), page_size=5, extra=4)
    source.refused_with = "badResumptionToken"
    harvest = Harvest(source)
    with pytest.raises(HarvestProtocolError, match="refused 3 times.*badResumptionToken"):
        harvest.run(max_restarts=2)
    assert harvest.client.notices == []


def test_a_token_that_expired_past_a_size_too_small_is_redone_not_taken_for_the_end() -> None:
    """Fuzz seeds 319, 409, 458: a source announcing 7 of its 12 records, its tokens expired
    (a restart) after 9 were listed. Past the size, the list looked whole and the last 3
    records were never harvested; the count is proven wrong there and says nothing of the
    end, so the window is redone."""
    source = OpaqueTokenSource(make_records(12), page_size=3)
    shrink = transform_body(
        lambda body: re.sub(rb'completeListSize="12"', b'completeListSize="7"', body)
    )
    source.every = (1, shrink)
    source.faults[4] = expire_tokens(source)  # the token after 9 records

    harvest = Harvest(source).run()

    assert set(harvest.records) == held(source)
    assert [c.resumption_token for c in harvest.checkpoints].count(None) == 2  # redone once
    assert harvest.client.notices == []  # nothing ended early


def test_a_token_refused_past_a_size_too_small_at_the_same_point_twice_ends_there() -> None:
    """The source announces 7 of the 10 records it sends (its count leaves some out), its
    last page naming a token it refuses as bad. Redone, the window ends at the same point:
    that is the list's end, told as such, not a failure of every harvest."""
    source = ShortCountSource(make_records(10), page_size=5, extra=-3)
    source.refused_with = "badResumptionToken"

    harvest = Harvest(source).run()

    assert set(harvest.records) == held(source)
    assert len(source.requests) == 2 * 3  # 2 pages and the token refused, twice
    assert harvest.client.notices == [
        f"{BASE_URL} (ListRecords): the source refused a resumption token "
        "(badResumptionToken) after 10 records, more than the 7 its completeListSize "
        "announced, twice at the same point; taken as the end of the list (its count is "
        "off: if records are missing, tell the source's operator)"
    ]


def test_pages_sent_again_do_not_make_a_lost_list_look_whole() -> None:
    """Fuzz seed 7066: a source answered a token with an earlier page (fresh tokens, so
    the sweep went on from there) and later lost the list. The repeated pages had counted
    as listed records, so 21 of 20 looked whole and the last 5 were never harvested."""
    source = OpaqueTokenSource(make_records(20), page_size=3)
    source.faults[4] = lambda request, response: source.answer(source.requests[-3])
    source.faults[8] = no_records_match  # offsets 0, 3, 6, then 3, 6, 9, 12, lost at 15

    harvest = Harvest(source).run()

    assert set(harvest.records) == held(source)  # the window redone from its start
    assert [c.resumption_token for c in harvest.checkpoints].count(None) == 2


def test_pages_sent_again_with_changed_records_do_not_make_a_lost_list_look_whole() -> None:
    """A page sent again after its records changed (a re-index moved every datestamp) was
    not taken for a repeat and counted again: with no cursor to tell, 27 of 30 listed
    looked whole when the source then lost the list, and the last 9 records were missed."""
    source = OpaqueTokenSource(make_records(30), page_size=3)
    no_cursor = transform_body(lambda body: re.sub(rb' cursor="\d+"', b"", body))

    def sent_again_changed(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        for record in source.records:  # a day later each time
            day = int(record.datestamp[8:10]) + 1
            record.datestamp = f"{record.datestamp[:8]}{day:02d}{record.datestamp[10:]}"
        return no_cursor(request, source.answer(source.requests[-2]))

    source.every = (1, no_cursor)
    source.faults.update({4: sent_again_changed, 6: sent_again_changed, 10: no_records_match})

    harvest = Harvest(source).run(prefetch=False)

    assert set(harvest.records) == held(source)  # the window redone from its start
    assert [c.resumption_token for c in harvest.checkpoints].count(None) == 2


@pytest.mark.parametrize("other", ["first page", "other token"])
@pytest.mark.parametrize("prefetch", [False, True])
def test_a_page_of_another_list_for_a_token_is_retried_not_taken(
    other: str, prefetch: bool
) -> None:
    """A cache or load balancer answered a token with a page of another list (the window of
    another harvest, its <request> says so): taken, it ended the list early and 14 of the
    20 records were never harvested, the run ending well. Retried, the token is answered."""
    source = EchoingSource(make_records(20, day=2) + make_records(4, day=1), page_size=3)
    window = {"from_": "2024-03-02T00:00:00Z", "until": "2024-03-02T23:59:59Z"}
    another = {"from": "2024-03-01T00:00:00Z", "until": "2024-03-01T23:59:59Z"}
    first = httpx.Request(
        "GET", BASE_URL, params={"verb": "ListRecords", "metadataPrefix": "oai_dc", **another}
    )
    if other == "other token":  # the other list's last page, to its own token
        token = re.search(r"<resumptionToken[^>]*>([^<]+)<", source.answer(first).text)[1]
        first = httpx.Request(
            "GET", BASE_URL, params={"verb": "ListRecords", "resumptionToken": token}
        )
    source.faults[3] = lambda request, response: source.answer(first)
    harvest = Harvest(source).run(prefetch=prefetch, **window)
    assert set(harvest.records) == {r.identifier for r in source.records[:20]}
    assert len(source.requests) == 8  # 7 pages and the one retry


class EchoingPrefixWithTokenSource(PrefixWithTokenSource, EchoingSource):
    """Wants the prefix with each token, and echoes each request in <request>."""


def test_a_page_of_another_list_for_a_token_sent_again_with_the_prefix_is_retried() -> None:
    """A source wanting the prefix with each token (pycsw) answered the token sent again
    with it by a page of another list: taken unchecked (the check was on the first try
    only), it ended the list early and 14 of the 20 records were never harvested."""
    source = EchoingPrefixWithTokenSource(
        make_records(20, day=2) + make_records(4, day=1), page_size=3
    )
    another = {"from": "2024-03-01T00:00:00Z", "until": "2024-03-01T23:59:59Z"}
    first = httpx.Request(
        "GET", BASE_URL, params={"verb": "ListRecords", "metadataPrefix": "oai_dc", **another}
    )
    source.faults[3] = lambda request, response: source.answer(first)  # the token again
    harvest = Harvest(source).run(from_="2024-03-02T00:00:00Z", until="2024-03-02T23:59:59Z")
    assert set(harvest.records) == {r.identifier for r in source.records[:20]}
    assert len(source.requests) == 9  # 7 pages, the token refused alone, the one retry


@pytest.mark.parametrize(
    "echo",
    [
        # the list's first request, on every page (the token left out), days for seconds
        '<request verb="ListRecords" metadataPrefix="oai_dc" from="2024-03-01" until="2024-03-01">',
        '<request verb="ListRecords">',  # nothing echoed
    ],
)
def test_a_token_page_echoing_what_is_still_its_list_is_taken(echo: str) -> None:
    source = FakeSource(make_records(20), page_size=3)
    source.every = (1, transform_body(lambda b: re.sub(rb"<request [^>]*>", echo.encode(), b)))
    harvest = Harvest(source).run(from_="2024-03-01T00:00:00Z", until="2024-03-01T23:59:59Z")
    assert set(harvest.records) == held(source) and len(source.requests) == 7


@pytest.mark.parametrize("set_spec", ["col_10023/1", "ddc:610", "user-abc", "openaire_data"])
def test_a_set_echoed_url_escaped_on_token_pages_is_still_its_list(set_spec: str) -> None:
    """The source echoes the list's first request on every page, its set URL-escaped as it
    was sent (`col_10023%2F1`). Before, each token page was taken for another list's: retried
    until the retries ran out (a minute of backoff at the defaults), with a notice of mixed-up
    answers at every harvest."""
    records = make_records(9)
    for record in records:
        record.sets = [set_spec]
    source = FakeSource(records, page_size=3)
    escaped = quote(set_spec, safe="")
    echo = f'<request verb="ListRecords" metadataPrefix="oai_dc" set="{escaped}">'
    source.every = (1, transform_body(lambda b: re.sub(rb"<request [^>]*>", echo.encode(), b)))
    harvest = Harvest(source).run(set_spec=set_spec)
    assert set(harvest.records) == held(source) and len(source.requests) == 3
    assert harvest.client.notices == []


def test_a_token_echoed_percent_encoded_is_the_tokens_page() -> None:
    source = OpaqueTokenSource(make_records(9), page_size=3)
    """Echoed percent-encoded (`%74` for `t`): the same token."""

    def echo_decoded(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        token = request.url.params.get("resumptionToken", "")
        body = response.content.replace(
            b'<request verb="ListRecords">',
            f'<request verb="ListRecords" resumptionToken="{token.replace("t", "%74")}">'.encode(),
        )
        return httpx.Response(response.status_code, content=body, headers=response.headers)

    source.every = (1, echo_decoded)
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source) and len(source.requests) == 3


def test_a_source_that_always_echoes_another_token_is_harvested_after_one_page_of_retries() -> None:
    """A source whose <request> names a token other than the one sent on every try (here
    doubly escaped, as some PHP providers write it) is quirky, not mixed up: before, every
    token page failed after its retries, and with them the run, for good. The page taken
    after one round of retries, its echo is not judged again, with a notice."""
    source = OpaqueTokenSource(make_records(12), page_size=3)

    def echo_escaped_twice(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        token = request.url.params.get("resumptionToken", "")
        echo = f'<request verb="ListRecords" resumptionToken="{token}&amp;amp;x">'
        body = response.content.replace(b'<request verb="ListRecords">', echo.encode())
        return httpx.Response(response.status_code, content=body, headers=response.headers)

    source.every = (1, echo_escaped_twice)
    harvest = Harvest(source, max_retries=2).run()

    assert set(harvest.records) == held(source)
    assert len(source.requests) == 4 + 2  # the first token page tried 3 times, then taken
    (notice,) = harvest.client.notices
    assert "answered another resumption token" in notice and "on each of 3 tries" in notice


def test_no_records_match_after_the_whole_list_ends_it() -> None:
    """Some sources put a token on the last full page and answer it with noRecordsMatch."""
    source = FakeSource(make_records(9), page_size=3)
    last = b'<resumptionToken cursor="6" completeListSize="9"/>'
    source.faults[3] = transform_body(
        lambda body: body.replace(last, last[:-2] + b">more?</resumptionToken>")
    )
    source.faults[4] = no_records_match  # the answer to the last full page's token
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source)
    assert len(source.requests) == 4 and harvest.sleeps == []
    assert [c.resumption_token for c in harvest.checkpoints].count(None) == 1  # not redone


def test_no_records_match_for_a_token_of_a_list_without_size_ends_it() -> None:
    source = FakeSource(make_records(10), page_size=3)
    source.every = (1, without_list_size)
    source.faults[4] = no_records_match
    harvest = Harvest(source).run()
    assert len(harvest.records) == 9  # nothing says more was coming: the list ended
    assert len(source.requests) == 4


# -- What else real endpoints send ---------------------------------------------------------------


def test_an_item_lacking_the_format_is_that_records_error_in_get_record() -> None:
    source = FakeSource(make_records(3))
    wanted = [r.identifier for r in source.records]

    def lacks_format(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        return source.error("cannotDisseminateFormat", "", status=422)

    source.faults[2] = lacks_format
    client = Harvest(source).client
    got = [client.get_record(identifier, "oai_dc") for identifier in wanted]
    assert [r.error.type if r.error else None for r in got] == [
        None,
        "cannotDisseminateFormat",
        None,
    ]
    assert got[1].identifier == wanted[1] and "cannot disseminate" in got[1].error.message


def test_an_oai_error_to_get_record_names_the_identifier_asked_for() -> None:
    """A badArgument that says nothing of what it refuses, to the first GetRecord, may be a
    refused metadata prefix: it fails the run, naming the identifier. Before, the error did
    not say which: the operator could not drop it, and `--resume` failed the same way."""
    source = FakeSource(make_records(3))
    source.faults[1] = lambda request, response: source.error(
        "badArgument", "Bad argument", status=400
    )
    with pytest.raises(OAIError) as caught:
        Harvest(source).client.get_record("10.1234/not-an-oai-id", "oai_dc")
    assert caught.value.code == "badArgument"
    assert "badArgument: Bad argument (asked for identifier '10.1234/not-an-oai-id'" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("message", "answered_before"),
    [
        ("Illegal identifier", False),  # it says what it refuses
        ("'10.1234/not-an-oai-id' is not a valid OAI identifier", False),
        ("Bad argument", True),  # the same prefix was answered: the identifier is refused
    ],
)
def test_a_get_record_refusing_the_identifier_is_that_records_error(
    message: str, answered_before: bool
) -> None:
    """Before, one identifier the source refuses (a DOI given for an OAI identifier, a syntax
    it does not take) failed a run of hundreds of selected identifiers, and its --resume
    failed on it again; now it is that record's error and the others are harvested."""
    source = FakeSource(make_records(3))
    wanted = [source.records[0].identifier, "10.1234/not-an-oai-id", source.records[2].identifier]
    refused_at = 2 if answered_before else 1
    if not answered_before:
        wanted = wanted[1:]
    source.faults[refused_at] = lambda request, response: source.error(
        "badArgument", message, status=400
    )
    client = Harvest(source).client
    got = [client.get_record(identifier, "oai_dc") for identifier in wanted]
    refused = got[refused_at - 1]
    assert refused.error is not None and refused.error.type == "badArgument"
    assert refused.error.message == message and refused.identifier == "10.1234/not-an-oai-id"
    assert [r.error for i, r in enumerate(got) if i != refused_at - 1] == [None] * (len(got) - 1)


@pytest.mark.parametrize(
    ("fault", "code", "said"),
    [
        (status(500), 500, "gave up after 5 attempts"),
        (unavailable("0"), 503, "gave up after 21 attempts"),
        (drop_connection, None, "gave up after 5 attempts"),
        (timeout, None, "gave up after 5 attempts"),
    ],
)
def test_retries_run_out_with_the_last_tries_http_status(
    fault: Fault, code: int | None, said: str
) -> None:
    """A request the retries could not get through says the HTTP status of its last try, or
    None if it got no HTTP answer: a harvest of selected identifiers stores one identifier's
    5xx as that record's error, while a source that does not answer at all fails the run."""
    source = FakeSource(make_records(2))
    source.every = (1, fault)
    with pytest.raises(HarvestProtocolError) as caught:
        Harvest(source).client.get_record(source.records[0].identifier, "oai_dc")
    assert caught.value.status == code
    assert caught.value.detail.startswith(said)
    assert f"; last problem: {'HTTP ' if code else ''}" in str(caught.value)


@pytest.mark.parametrize("code", [401, 403, 404, 410])
def test_a_refused_request_keeps_what_its_body_says_apart(code: int) -> None:
    """What an HTTP error's body says, apart from the run's advice, for a caller that words
    the refusal its own way (a GetRecord refused while the others are answered)."""
    source = FakeSource(make_records(2))
    harvest = Harvest(source)
    harvest.client.get_record(source.records[0].identifier, "oai_dc")
    source.every = (1, lambda request, response: httpx.Response(code, text="Not for you"))
    with pytest.raises(RefusedRequest) as caught:
        harvest.client.get_record(source.records[1].identifier, "oai_dc")
    assert (caught.value.status, caught.value.detail) == (code, "its body: 'Not for you'")


def test_a_get_record_refusing_the_metadata_prefix_fails_the_run() -> None:
    """A badArgument naming the prefix is the run's (every identifier would get it)."""
    source = FakeSource(make_records(3))
    source.faults[1] = lambda request, response: source.error(
        "badArgument", "metadataPrefix oai_dc is not valid for identifier x", status=400
    )
    with pytest.raises(OAIError) as caught:
        Harvest(source).client.get_record(source.records[0].identifier, "oai_dc")
    assert caught.value.code == "badArgument"


def test_an_oai_error_sent_with_http_500_is_the_sources_answer_not_retried() -> None:
    source = FakeSource(make_records(3))
    source.faults[1] = lambda request, response: source.error(
        "cannotDisseminateFormat", "no such format", status=500
    )
    harvest = Harvest(source)
    with pytest.raises(OAIError) as caught:
        harvest.run()
    assert caught.value.code == "cannotDisseminateFormat"
    assert source.verbs == ["ListRecords", "ListMetadataFormats"] and harvest.sleeps == []


def test_a_503_with_an_oai_error_body_is_still_come_back_later() -> None:
    source = FakeSource(make_records(3))
    busy = source.error("badArgument", "busy", status=503)
    busy.headers["retry-after"] = "1"
    source.faults[1] = lambda request, response: busy
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source) and len(harvest.sleeps) == 1


def test_whitespace_before_the_xml_declaration_is_dropped() -> None:
    source = FakeSource(make_records(5), page_size=2)
    source.every = (1, transform_body(lambda body: b"\r\n  \n" + body))
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source) and harvest.sleeps == []


def test_the_http_charset_decodes_a_page_without_encoding_declaration() -> None:
    records = make_records(2)
    records[0].title = "Příliš žluťoučký kůň"
    source = FakeSource(records)

    def latin2(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        text = response.content.decode("utf-8").replace(' encoding="UTF-8"', "")
        return httpx.Response(
            200,
            content=text.encode("iso-8859-2", "replace"),
            headers={"content-type": "text/xml; charset=ISO-8859-2"},
        )

    source.every = (1, latin2)
    harvest = Harvest(source).run()
    assert "<dc:title>Příliš žluťoučký kůň</dc:title>".encode() in (
        harvest.records[records[0].identifier].xml
    )


def test_a_response_trickling_in_is_cut_off_and_retried() -> None:
    source = FakeSource(make_records(2))

    def trickle(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        def slowly():
            for byte in response.content:
                time.sleep(0.05)
                yield bytes([byte])

        return httpx.Response(200, content=slowly(), headers=response.headers)

    source.faults[1] = trickle
    harvest = Harvest(source, timeout=0.04, max_retries=1).run()  # a whole response: 0.2 s
    assert set(harvest.records) == held(source) and len(source.requests) == 2


def test_a_list_lost_right_after_a_resume_is_redone_too() -> None:
    """The checkpoint keeps the list's size and what came before the token, so that
    noRecordsMatch for the token a resumed run starts with is judged as in one sweep."""
    source = FakeSource(make_records(10), page_size=3)
    saved = _saved_mid_list(source)  # the process dies while staging the second page
    assert (saved.complete_list_size, saved.delivered) == (10, 3)
    source.faults[1] = no_records_match  # the source lost the list meanwhile

    second = Harvest(source).run(checkpoint=saved)

    assert set(second.records) == held(source)  # the window redone from its start
    assert [c.resumption_token for c in second.checkpoints].count(None) == 1


# A token the source no longer takes, answered otherwise than badResumptionToken: a bare 404
# (or 410, 400), no OAI error; or badArgument, the token being the request's one argument
# and one the source issued (some answer an expired token so, some at times a live one:
# code4lib/ruby-oai#107). Before, a badArgument failed the run as a mistyped argument, and
# every run resuming the token failed on it again.
_BAD_TOKEN = oai_error("badArgument", message="bad token")
TOKEN_REFUSALS = [
    pytest.param(status(404), id="404"),
    pytest.param(status(410), id="410"),
    pytest.param(status(400), id="400"),
    pytest.param(
        oai_error("badArgument", message="Illegal argument1 'resumptionToken'"), id="bad-arg"
    ),
    pytest.param(
        oai_error(
            "badArgument", message="either 'metadataPrefix' or 'resumptionToken' is required"
        ),
        id="bad-arg-names-both",
    ),
    pytest.param(oai_error("badArgument", message=""), id="bad-arg-unsaid"),
]


@pytest.mark.parametrize("refusal", TOKEN_REFUSALS)
def test_a_token_answered_not_found_is_refused_and_the_window_redone(refusal: Fault) -> None:
    source = FakeSource(make_records(10), page_size=3)
    source.faults[3] = refusal
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source)
    assert [c.resumption_token for c in harvest.checkpoints].count(None) == 2
    assert harvest.sleeps == []  # a definite answer: not retried


@pytest.mark.parametrize("refusal", TOKEN_REFUSALS[::3])
def test_a_resumed_token_the_source_no_longer_knows_redoes_the_window(refusal: Fault) -> None:
    """Before, the run failed on the dead token, and so did every run resuming it."""
    source = FakeSource(make_records(10), page_size=3)
    saved = _saved_mid_list(source)
    source.faults[1] = refusal  # the source restarted and forgot its tokens
    second = Harvest(source).run(checkpoint=saved)
    assert set(second.records) == held(source)


def _fails_for_token(
    token: str | None,
) -> Callable[[httpx.Request, httpx.Response], httpx.Response]:
    def fault(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.params.get("resumptionToken") == token:
            return httpx.Response(500, text="<html>Internal Server Error</html>")
        return response

    return fault


def test_a_resumed_token_the_source_fails_on_for_ever_redoes_the_window() -> None:
    """A source that answers a dead token with HTTP 500 (DOAJ did): before, every run resuming
    the token failed on it, for ever."""
    source = FakeSource(make_records(10), page_size=3)
    saved = _saved_mid_list(source)
    source.token_epoch += 1  # the source restarted: the tokens it issues now are others
    source.every = (1, _fails_for_token(saved.resumption_token))
    second = Harvest(source).run(checkpoint=saved)
    assert set(second.records) == held(source)
    assert [c.resumption_token for c in second.checkpoints].count(None) == 1  # redone once


def test_a_resumed_token_failing_while_the_source_is_down_keeps_the_checkpoint() -> None:
    source = FakeSource(make_records(10), page_size=3)
    saved = _saved_mid_list(source)
    source.every = (1, status(503))
    harvest = Harvest(source, max_retries=1)
    with pytest.raises(HarvestProtocolError, match="503"):
        harvest.run(checkpoint=saved)
    assert harvest.checkpoints[-1] == saved  # the next run resumes the token


@pytest.mark.parametrize(
    ("refusal", "said"),
    [(status(404), "HTTP 404"), (_BAD_TOKEN, "bad token")],
    ids=["404", "bad-arg"],
)
def test_a_token_answered_not_found_every_time_fails_after_the_restarts(
    refusal: Fault, said: str
) -> None:
    source = FakeSource(make_records(10), page_size=3)
    source.faults = {n: refusal for n in (2, 4, 6)}
    with pytest.raises(HarvestProtocolError, match=f"refused 3 times.*{said}"):
        Harvest(source).run(max_restarts=2)


@pytest.mark.parametrize("code", [401, 403])
def test_a_token_answered_forbidden_fails_without_losing_the_checkpoint(code: int) -> None:
    """Not a lost token (a firewall, a login): the run fails and a rerun resumes the token.
    Mid-list, as a rate limiter or firewall answers a burst of requests: a failure Dagster
    retries later (not persistent), saying so."""
    source = FakeSource(make_records(10), page_size=3)
    source.faults[3] = status(code)
    harvest = Harvest(source)
    with pytest.raises(HarvestProtocolError, match=f"HTTP {code}") as refused:
        harvest.run()
    assert harvest.checkpoints[-1].pages_read == 2
    assert harvest.checkpoints[-1].resumption_token
    assert not isinstance(refused.value, PersistentProtocolError)
    assert f"(its body: 'HTTP {code}'): the source refuses the harvester after " in str(
        refused.value
    )
    assert "a firewall or rate limiter blocking it for a while" in str(refused.value)


_CLOUDFLARE = (
    "<!DOCTYPE html><html><head><title>Attention Required! | Cloudflare</title></head>"
    "<body><h1>Sorry, you have been blocked</h1></body></html>"
)


@pytest.mark.parametrize("code", [401, 403])
def test_forbidden_at_a_base_url_that_never_answered_fails_at_once(code: int) -> None:
    """A 401/403 before the base URL ever answered OAI-PMH is access refused (a firewall
    blocking the machine or its User-Agent, a login): before, it was retried by Dagster three
    times as a passing fault, and the error read "not an OAI-PMH response (root element
    'html')"."""
    source = FakeSource(make_records(3))
    source.every = (1, lambda request, response: httpx.Response(code, text=_CLOUDFLARE))
    harvest = Harvest(source, endpoint_proven=False)
    with pytest.raises(UnprovenEndpoint) as refused:
        harvest.run()
    reason = httpx.codes.get_reason_phrase(code)
    assert str(refused.value).startswith(
        f"http://fake.test/oai (ListRecords): HTTP {code} {reason} (a web page titled "
        "'Attention Required! | Cloudflare'): the source refuses the harvester, and this "
        "base URL has never answered OAI-PMH"
    )
    assert len(source.requests) == 1


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("Bad Request\n", "its body: 'Bad Request'"),
        ("", "an empty body"),
        ('{"status": 400, "message": "Invalid argument"}',
         """its body: '{"status": 400, "message": "Invalid argument"}'"""),
        ('<?xml version="1.0"?><OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">'
         '<responseDate>2024-01-01T00:00:00Z</responseDate><error code="badArgument">Illegal '
         "from", "an OAI-PMH error cut short: badArgument: 'Illegal from'"),
        ("<html><head><title>400 Bad Request</title></head><body>nginx</body></html>",
         "a web page titled '400 Bad Request'"),
    ],
    ids=["plain", "empty", "json", "oai-error-cut-short", "html"],
)  # fmt: skip
def test_a_refused_request_says_what_its_body_says(body: str, says: str) -> None:
    """An HTTP 4xx without an OAI-PMH answer: its error told what the parser made of the body
    ("not well-formed XML: Start tag expected, '<' not found"), not what the source said."""
    source = FakeSource(make_records(3))
    source.every = (1, lambda request, response: httpx.Response(400, text=body))
    with pytest.raises(HarvestProtocolError) as refused:
        Harvest(source).run()
    assert (
        str(refused.value) == f"http://fake.test/oai (ListRecords): HTTP 400 Bad Request ({says})"
    )


def test_dates_in_seconds_refused_by_a_source_declaring_them_go_by_day_from_then_on() -> None:
    """Identify declares seconds, the source answers badArgument to them. Before, the
    harvest failed on it, every time."""
    source = SecondsRefusedSource(make_records(9, day=1) + make_records(4, day=2), page_size=4)
    harvest = Harvest(source)
    harvest.run(from_="2024-03-01T12:00:00Z", until="2024-03-01T23:59:59Z")
    harvest.run(from_="2024-03-02T00:00:00Z", until="2024-03-02T05:00:00Z")
    dates = source.list_dates
    # the first window refused in seconds and asked again by day; the second by day at once
    assert dates == [
        ("2024-03-01T12:00:00Z", "2024-03-01T23:59:59Z"),
        ("2024-03-01", "2024-03-01"),
        ("2024-03-02", "2024-03-02"),
    ]
    assert set(harvest.records) == held(source)  # whole days: a wider window, never a gap
    (notice,) = harvest.client.notices
    assert "refuses from/until in seconds (badArgument: Illegal from parameter)" in notice


@pytest.mark.parametrize(
    ("from_", "message", "asked"),
    [
        ("2024-03-01T12:00:00Z", "Illegal argument", 2),  # might be the dates: tried by day
        ("2024-03-01T12:00:00Z", "Illegal set", 1),  # names another argument
        ("2024-03-01", "Illegal argument", 1),
    ],
    ids=["seconds", "seconds-other-argument-named", "day"],
)
def test_a_bad_argument_for_another_reason_still_fails(
    from_: str, message: str, asked: int
) -> None:
    source = FakeSource(make_records(3))
    source.every = (1, lambda request, response: source.error("badArgument", message))
    harvest = Harvest(source)
    with pytest.raises(OAIError, match=f"badArgument: {message}") as caught:
        harvest.run(from_=from_, set_spec="no:such:set")
    assert caught.value.code == "badArgument"
    # and ListSets, asked whether the source has the set (answered badArgument: not known),
    # and ListMetadataFormats whether it has the prefix (the same: the source's error stands)
    assert len(source.requests) == asked + 2
    assert source.verbs[-2:] == ["ListSets", "ListMetadataFormats"]
    assert harvest.client.notices == [] and not harvest.client.dates_by_day


@pytest.mark.parametrize(
    ("code", "what_to_check"),
    [
        # every endpoint takes ListRecords: no OAI-PMH 2.0 endpoint is at the base URL
        ("badVerb", "the source refuses the OAI-PMH verb ListRecords; check that the "
         "harvester's base URL is the source's OAI-PMH endpoint"),
        # the prefix is offered and the dates are days: the operator is told what was asked
        ("badArgument", "the list was asked for metadataPrefix oai_dc from 2024-03-01 until "
         "2024-03-02: check the harvester's metadata prefix and setspec"),
    ],
)  # fmt: skip
def test_an_oai_error_to_a_list_says_what_to_check_and_is_not_retried(
    code: str, what_to_check: str
) -> None:
    """Before, the error said only the source's words ("badVerb: Illegal verb"), which left
    the operator to guess whether the harvester's base URL, prefix, set or dates were wrong."""
    source = FakeSource(make_records(3))

    def refused(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.params.get("verb") != "ListRecords":
            return response
        return source.error(code, "Illegal argument", status=400)

    source.every = (1, refused)
    harvest = Harvest(source)
    with pytest.raises(OAIError) as caught:
        harvest.run(from_="2024-03-01", until="2024-03-02")
    assert caught.value.code == code
    assert f"{code}: Illegal argument ({what_to_check}" in str(caught.value)
    assert source.verbs.count("ListRecords") == 1 and harvest.sleeps == []


@pytest.mark.parametrize(
    ("registered", "declared"),
    [
        ("http://fake.test/oai", "http://fake.test/oai"),
        ("http://fake.test/oai", "HTTP://Fake.Test/oai/"),
        ("http://fake.test/oai", "http://fake.test:80/oai"),
        ("https://fake.test:443/oai/", "https://fake.test/oai"),
        # a request URL pasted as the base URL, or given as one: not another endpoint
        ("http://fake.test/oai?verb=Identify", "http://fake.test/oai"),
        ("http://fake.test/index.php?q=oai", "http://fake.test/index.php/?q=oai&verb=Identify"),
    ],
)
def test_an_identify_naming_the_same_base_url_however_written_is_not_noted(
    registered: str, declared: str
) -> None:
    assert another_base_url(registered, declared) is None


@pytest.mark.parametrize(
    "declared",
    [
        "https://fake.test/oai",  # http registered, https declared
        "http://proxy.fake.test/oai",  # the host behind a proxy
        "http://fake.test:8080/oai",
        "http://fake.test/oai/request",  # a trailing path
        "http://fake.test/OAI",
        "http://fake.test/index.php?q=oai",
        # a real one: the baseURL Stud.IP's Lernmarktplatz hard-codes (Krassmus/LernMarktplatz,
        # views/oai/identify.php)
        "http://localhost/studip/plugins.php/lernmarktplatz/oai/",
    ],
)
def test_an_identify_naming_another_base_url_is_noted_once_and_not_followed(declared: str) -> None:
    """Before, nothing mentioned it."""
    source = FakeSource(make_records(4), page_size=2)
    source.identify_base_url = declared
    harvest = Harvest(source)
    harvest.client.identify()
    harvest.client.identify()
    harvest.run()
    assert harvest.client.notices == [
        f"{BASE_URL}: the source's Identify names another base URL, {declared}; harvesting "
        "the registered one (if the source lives there, set the harvester's base URL to it)"
    ]
    assert {str(request.url.copy_with(query=None)) for request in source.requests} == {BASE_URL}


@pytest.mark.parametrize(
    "declared",
    ["http://fake.test/oai", "HTTP://Fake.Test:80/oai/", "http://fake.test/oai?verb=Identify"],
)
def test_an_identify_naming_the_http_form_of_our_https_base_url_is_not_noted(
    declared: str,
) -> None:
    """A source behind a TLS-terminating proxy often declares its http:// form. Before, the
    note advised setting the harvester's base URL to it: a downgrade to plain http."""
    assert another_base_url("https://fake.test/oai", declared) is None


def test_of_several_base_urls_the_http_form_of_our_https_one_is_taken_as_ours() -> None:
    """Before, the first listed was taken and noted, with the advice to switch to it."""
    body = (
        FakeSource([])
        .xml(
            "Identify",
            "<Identify><repositoryName>R</repositoryName><baseURL>http://other.fake.test/oai"
            "</baseURL><baseURL>http://fake.test/oai</baseURL><granularity>YYYY-MM-DD"
            "</granularity><earliestDatestamp>2024-01-01</earliestDatestamp></Identify>",
        )
        .content
    )
    info = read_identify(parse_response(body, "Identify"), "https://fake.test/oai")
    assert info.base_url == "http://fake.test/oai"
    assert another_base_url("https://fake.test/oai", info.base_url) is None


def test_an_identify_naming_another_plain_http_base_url_never_advises_switching_to_it() -> None:
    """Before, an https harvester was told to set its base URL to the http:// one."""
    declared = "http://proxy.fake.test/oai"
    assert another_base_url("https://fake.test/oai", declared) == (
        f"https://fake.test/oai: the source's Identify names another base URL, {declared}; "
        "harvesting the registered one (that one is plain http: keep to https)"
    )


def _ends_here(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    """A token page answered with an empty list and no token."""
    return FakeSource([]).xml("ListRecords", "<ListRecords/>")


@pytest.mark.parametrize(
    ("listed", "announced", "noted"),
    [
        (15, 20, False),
        (14, 20, True),
        (990, 1000, False),
        (989, 1000, True),
        (26, 20, True),
        (6, 8, False),
        (5, 8, True),
        (1, 2, False),
        (0, 2, True),
        (13, 8, False),
    ],
)
def test_a_list_is_noted_only_when_it_ends_beyond_what_changes_meanwhile_explain(
    listed: int, announced: int, noted: bool
) -> None:
    """A few records, or 1 % of a large list, may be deleted (or added) while it is listed."""
    assert (_count_notice(listed, announced) is not None) is noted


def test_a_source_whose_list_size_counts_something_else_is_noted() -> None:
    source = FakeSource(make_records(20), page_size=3)
    source.every = (1, transform_body(lambda b: b.replace(b'ListSize="20"', b'ListSize="7"')))
    harvest = Harvest(source).run()
    assert harvest.yielded == 20
    (notice,) = harvest.client.notices
    assert notice.startswith(
        "http://fake.test/oai (ListRecords): the list held 20 records, 13 more than the 7 "
    )


def test_a_list_whose_records_are_deleted_while_it_is_listed_is_not_noted() -> None:
    source = FakeSource(make_records(20), page_size=3)

    def drop_two(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        del source.records[:2]
        return source.answer(request)

    source.faults[3] = drop_two
    harvest = Harvest(source).run()
    assert harvest.yielded < 20 and harvest.client.notices == []


def test_a_resumed_checkpoint_without_a_count_judges_no_list_size() -> None:
    """A checkpoint an older version saved does not say how many records came before its
    token: the resumed sweep cannot tell a short list from one it listed only part of."""
    source = FakeSource(make_records(20), page_size=3)
    checkpoint = _saved_mid_list(source)
    assert checkpoint.listed == 3  # page one's, before the token of page two
    source.faults[2] = _ends_here
    old = Harvest(source).run(checkpoint=dataclasses.replace(checkpoint, listed=None))
    assert old.yielded == 3 and old.client.notices == []
    source.requests.clear()
    source.faults[2] = _ends_here
    counted = Harvest(source).run(checkpoint=checkpoint)
    (notice,) = counted.client.notices
    assert "the list ended after 6 records, 14 fewer than the 20" in notice


class PageNumberSource(FakeSource):
    """Sends the page's number as its cursor, and a token on the last page, answered with
    noRecordsMatch."""

    def list_response(self, verb: str, params: httpx.QueryParams) -> httpx.Response:
        if params.get("resumptionToken") == "past-the-end":
            return self.error("noRecordsMatch", "", status=422)
        response = super().list_response(verb, params)
        body = re.sub(
            rb'cursor="(\d+)"',
            lambda m: b'cursor="%d"' % (int(m[1]) // self.page_size),
            response.content,
        )
        body = re.sub(rb"(<resumptionToken [^>]*)/>", rb"\1>past-the-end</resumptionToken>", body)
        return httpx.Response(response.status_code, content=body, headers=response.headers)


def test_a_cursor_that_is_a_page_number_does_not_make_the_list_look_lost() -> None:
    """Before, cursor 2 plus the 3 records of the last page made 5 of 9 listed: the
    noRecordsMatch after it was taken for a lost list, the window redone until the run
    failed. The records the sweep counted say the list was whole."""
    source = PageNumberSource(make_records(9), page_size=3)
    harvest = Harvest(source).run()
    assert set(harvest.records) == held(source) and harvest.yielded == 9
    assert len(source.requests) == 4 and harvest.client.notices == []


@pytest.mark.parametrize(
    ("declared", "noted"),
    [
        (["http://proxy.fake.test/oai", BASE_URL], None),
        ([BASE_URL, "http://proxy.fake.test/oai"], None),
        (
            ["http://proxy.fake.test/oai", "http://other.fake.test/oai"],
            "http://proxy.fake.test/oai",
        ),
    ],
    ids=["ours-second", "ours-first", "neither"],
)
def test_an_identify_with_several_base_urls_is_noted_only_when_none_is_ours(
    declared: list[str], noted: str | None
) -> None:
    """A source reachable under two names may list both. Before, only the first was compared
    with ours: ours listed second still got the notice of another base URL."""
    source = FakeSource(make_records(2))
    several = "".join(f"<baseURL>{url}</baseURL>" for url in declared)
    source.every = (
        1,
        transform_body(lambda body: re.sub(rb"<baseURL>[^<]*</baseURL>", several.encode(), body)),
    )
    harvest = Harvest(source)
    info = harvest.client.identify()
    assert info.base_url == (noted or BASE_URL)
    notices = (
        []
        if noted is None
        else [
            f"{BASE_URL}: the source's Identify names another base URL, {noted}; harvesting "
            "the registered one (if the source lives there, set the harvester's base URL to it)"
        ]
    )
    assert harvest.client.notices == notices


def _answering_for(source: FakeSource, other: str, echo: str | None) -> Fault:
    """GetRecord answered as a request for ``other`` is (a proxy or cache mixing answers
    up), its <request> echoing ``echo`` as the identifier (None: no identifier echoed)."""

    def fault(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.params.get("verb") != "GetRecord":
            return response
        answer = source.answer(
            httpx.Request("GET", request.url.copy_set_param("identifier", other))
        )
        if echo is None:
            return answer
        return transform_body(
            lambda body: body.replace(b"<request ", f'<request identifier="{echo}" '.encode())
        )(request, answer)

    return fault


@pytest.mark.parametrize("echo", [True, False], ids=["echoed", "not-echoed"])
def test_get_record_answered_for_another_identifier_is_asked_again(echo: bool) -> None:
    """Before, the other item's record was taken (and staged under its identifier, the one
    asked for left unharvested)."""
    records = make_records(3)
    asked, other = records[0].identifier, records[1].identifier
    source = FakeSource(records)
    source.faults[1] = _answering_for(source, other, other if echo else None)
    harvest = Harvest(source)
    got = harvest.client.get_record(asked, "oai_dc")
    assert (got.identifier, got.error) == (asked, None)
    assert len(source.requests) == 2 and len(harvest.sleeps) == 1


def test_another_identifiers_id_does_not_exist_is_not_taken_for_ours() -> None:
    """An idDoesNotExist for another request stages ours as gone (deleted at the source)."""
    records = make_records(3)
    source = FakeSource(records)
    source.faults[1] = _answering_for(source, "oai:fake.test:nope", "oai:fake.test:nope")
    harvest = Harvest(source)
    got = harvest.client.get_record(records[0].identifier, "oai_dc")
    assert (got.identifier, got.error) == (records[0].identifier, None)
    assert len(source.requests) == 2


def test_get_record_answered_for_another_identifier_every_time_is_that_records_error() -> None:
    records = make_records(3)
    asked, other = records[0].identifier, records[1].identifier
    source = FakeSource(records)
    source.every = (1, _answering_for(source, other, None))
    harvest = Harvest(source, max_retries=2)
    got = harvest.client.get_record(asked, "oai_dc")
    assert got.identifier == asked and got.xml is None and got.error is not None
    assert got.error.type == "AnotherRecordAnswered" and got.error.location == asked
    assert got.error.message.startswith(
        f"the source answered with record {other!r}, not {asked!r}, on every try"
    )
    assert len(source.requests) == 3  # tried, then retried twice


@pytest.mark.parametrize(
    "written",
    [
        "OAI:fake.test:1-0",  # the scheme in another case
        "oai:Fake.TEST:1-0",  # the namespace (a domain name) in another case
        "\n   oai:fake.test:1-0\n ",  # surrounded by whitespace
    ],
)
@pytest.mark.parametrize("echoed", [True, False], ids=["echoed", "not-echoed"])
def test_get_record_answered_for_our_identifier_written_otherwise_is_taken(
    written: str, echoed: bool
) -> None:
    """An OAI identifier's scheme and namespace are case-insensitive. Before, a header or
    echo differing from the identifier asked for only so was another item's answer: asked
    again through every retry, then the record's AnotherRecordAnswered error."""
    records = make_records(1)
    asked = records[0].identifier
    assert asked == "oai:fake.test:1-0"

    def rewritten(body: bytes) -> bytes:
        body = body.replace(f"<identifier>{asked}<".encode(), f"<identifier>{written}<".encode())
        if echoed:
            body = body.replace(b"<request ", f'<request identifier="{written}" '.encode())
        return body

    source = FakeSource(records)
    source.every = (1, transform_body(rewritten))
    harvest = Harvest(source, max_retries=2)
    got = harvest.client.get_record(asked, "oai_dc")
    assert (got.identifier, got.error) == (asked, None)
    assert got.xml is not None
    assert len(source.requests) == 1 and harvest.sleeps == [] and harvest.client.notices == []


def test_get_record_answered_for_our_identifier_with_another_local_part_case_is_refused() -> None:
    """The local part of an OAI identifier is case-sensitive: `item-A` is not `item-a`."""
    records = [dataclasses.replace(make_records(1)[0], identifier="oai:fake.test:item-a")]
    source = FakeSource(records)
    source.every = (1, transform_body(lambda body: body.replace(b":item-a<", b":item-A<")))
    harvest = Harvest(source, max_retries=1)
    got = harvest.client.get_record("oai:fake.test:item-a", "oai_dc")
    assert got.error is not None and got.error.type == "AnotherRecordAnswered"
    assert len(source.requests) == 2


def test_get_record_echoing_another_identifier_with_ours_is_taken_and_noted_once() -> None:
    """A source whose <request> echoes the identifier rewritten (a quirk, not mixed-up
    answers): its record is the one asked for. Taken after the retries, with a note, and the
    echo not judged again (each GetRecord would wait through every retry)."""
    records = make_records(3)
    source = FakeSource(records)

    def rewritten_echo(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        return transform_body(
            lambda body: body.replace(b"<request ", b'<request identifier="rewritten" ')
        )(request, response)

    source.every = (1, rewritten_echo)
    harvest = Harvest(source, max_retries=2)
    first = harvest.client.get_record(records[0].identifier, "oai_dc")
    second = harvest.client.get_record(records[1].identifier, "oai_dc")
    assert (first.identifier, first.error) == (records[0].identifier, None)
    assert (second.identifier, second.error) == (records[1].identifier, None)
    assert len(source.requests) == 3 + 1
    assert harvest.client.notices == [
        f"{BASE_URL} (GetRecord): the source answered GetRecord for identifier 'rewritten', "
        f"not {records[0].identifier!r} on every try, with the record asked for; the source's "
        "<request> no longer judged"
    ]


@pytest.mark.parametrize(
    "error",
    [
        RefusedRequest("HTTP 403 Forbidden", status=403, detail="no robots"),
        OAIError("badArgument", "bad from", context="http://x/oai (ListRecords)", hint="check"),
        NoRecordsMatchForToken("noRecordsMatch", "empty", response_date="2024-01-01T00:00:00Z"),
        UnknownSet("noSetHierarchy", "no sets", errors=[("noSetHierarchy", "no sets")]),
    ],
    ids=lambda error: type(error).__name__,
)
def test_a_client_error_pickles_as_itself(error: PipelineError) -> None:
    """An error raised in a worker process comes back the same: its class, text and fields
    (RefusedRequest's required status made its unpickling fail)."""
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert vars(copy) == vars(error)
