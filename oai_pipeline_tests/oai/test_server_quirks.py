"""Quirks real OAI-PMH servers were reported to show, each in the shape of its report."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from lxml import etree

from oai_pipeline.oai.client import OAIClient
from oai_pipeline.oai.errors import (
    HarvestProtocolError,
    MalformedResponse,
    OAIError,
    UnknownMetadataFormat,
)
from oai_pipeline.oai.pages import UnusablePage, parse_response
from oai_pipeline.state.store import StateStore
from oai_pipeline_tests.oai.fake_source import (
    BASE_URL,
    PHP_MARKUP_WARNING,
    PHP_TEXT_WARNING,
    DaysRefusedSource,
    FakeRecord,
    FakeSource,
    Fault,
    PrefixWithTokenSource,
    SecondsRefusedSource,
    expire_tokens,
    make_records,
    status,
    transform_body,
)
from oai_pipeline_tests.oai.test_faults import Harvest, held
from oai_pipeline_tests.oai.test_samples import SAMPLES

# AtoM before its fix (artefactual/atom#441) and WEKO3 answer a request whose verb is fine but
# whose argument is not with badVerb and the protocol's stock sentence for it.
_STOCK_BAD_VERB = (
    "Value of the verb argument is not a legal OAI-PMH verb, the verb argument is missing, "
    "or the verb argument is repeated."
)

_FORMATS = (
    "<ListMetadataFormats><metadataFormat><metadataPrefix>oai_dc</metadataPrefix>"
    "<schema>http://www.openarchives.org/OAI/2.0/oai_dc.xsd</schema><metadataNamespace>"
    "http://www.openarchives.org/OAI/2.0/oai_dc/</metadataNamespace></metadataFormat>"
    "</ListMetadataFormats>"
)


def test_bad_verb_in_answer_to_an_unknown_prefix_names_the_prefixes_the_source_offers() -> None:
    """Before, the error blamed the base URL ("no OAI-PMH endpoint there") although the
    source answered Identify and ListMetadataFormats: the prefix was the mistake."""
    source = FakeSource(make_records(3))

    def bad_verb_for_a_prefix(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        params = request.url.params
        if params.get("verb") == "ListRecords" and params.get("metadataPrefix") != "oai_dc":
            return source.error("badVerb", _STOCK_BAD_VERB)
        if params.get("verb") == "ListMetadataFormats":
            return source.xml("ListMetadataFormats", _FORMATS)
        return response

    source.every = (1, bad_verb_for_a_prefix)
    harvest = Harvest(source)
    with pytest.raises(UnknownMetadataFormat) as caught:
        list(harvest.client.sweep("ListRecords", metadata_prefix="marc21"))
    message = str(caught.value)
    assert "does not disseminate 'marc21'" in message and "the source offers oai_dc" in message
    assert "base URL" not in message
    assert source.verbs == ["ListRecords", "ListMetadataFormats"] and harvest.sleeps == []


def _names_its_own_token(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    """The list's last page carries the very token it was asked with instead of an empty one
    (DOAJ/doaj#1396: "it will use [the token] twice, on the second last and the last page";
    archive.org in afuetterer/oaipmh-scythe#411: "a request will return its own resumption
    token"). Asked again, that token gives that page again."""
    token = request.url.params.get("resumptionToken")
    if token is None:
        return response
    body = re.sub(
        rb"(<resumptionToken [^>]*)/>",
        rb"\1>" + token.encode() + rb"</resumptionToken>",
        response.content,
    )
    return httpx.Response(response.status_code, headers=response.headers, content=body)


@pytest.mark.parametrize("prefetch", [True, False], ids=["prefetch", "sequential"])
def test_a_last_page_naming_its_own_token_ends_a_list_whose_size_is_reached(
    prefetch: bool,
) -> None:
    """Before, the harvest failed at the list's end every time (and every retry of the run
    resumed the token and failed again): the source was never harvested whole."""
    source = FakeSource(make_records(9), page_size=3)
    source.every = (1, _names_its_own_token)
    harvest = Harvest(source).run(prefetch=prefetch)
    assert set(harvest.records) == {r.identifier for r in source.records}
    # the three pages, and the last one's token asked once more: the same page again
    assert source.verbs.count("ListRecords") == 4
    (notice,) = harvest.client.notices
    assert "names the resumption token of its last page again" in notice
    assert "all 9 records its completeListSize announced" in notice


def test_a_repeated_token_short_of_the_list_size_still_fails_naming_the_loop() -> None:
    """A loop before the list's announced end: ended there, the records after it were
    missing with no failure, and a reconcile took them for deleted."""
    source = FakeSource(make_records(9), page_size=3)
    source.every = (1, _second_page_loops)
    harvest = Harvest(source)
    with pytest.raises(HarvestProtocolError, match="repeated resumption token"):
        harvest.run()
    assert len(harvest.records) == 6


def _second_page_loops(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    """The second page (cursor 3) names its own token, its list's size not reached."""
    if b'cursor="3"' not in response.content:
        return response
    token = request.url.params["resumptionToken"]
    body = re.sub(
        rb"(<resumptionToken [^>]*>)[^<]*(</resumptionToken>)",
        lambda match: match[1] + token.encode() + match[2],
        response.content,
    )
    return httpx.Response(response.status_code, headers=response.headers, content=body)


def test_a_session_token_that_stays_the_same_while_pages_go_on_is_followed() -> None:
    """Some servers keep one token per harvest session and move a cursor on the server side:
    the same token names the next page each time. Refused as a loop, such a source could
    never be harvested past its first page."""
    records = [
        "".join(
            f"<record><header><identifier>oai:x:{page}-{n}</identifier>"
            "<datestamp>2024-01-01</datestamp></header><metadata><x/></metadata></record>"
            for n in range(2)
        )
        for page in range(3)
    ]
    served = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        page = served["n"]
        served["n"] += 1
        token = "<resumptionToken>session-1</resumptionToken>" if page < 2 else ""
        return httpx.Response(
            200,
            content=(
                '<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>'
                "2026-01-01T00:00:00Z</responseDate><request>x</request><ListRecords>"
                f"{records[page]}{token}</ListRecords></OAI-PMH>"
            ).encode(),
        )

    client = OAIClient(BASE_URL, transport=httpx.MockTransport(handler), sleep=lambda s: None)
    pages = list(client.sweep("ListRecords", metadata_prefix="oai_dc", prefetch=False))
    identifiers = [r.identifier for page in pages for r in page.records]
    assert identifiers == [f"oai:x:{page}-{n}" for page in range(3) for n in range(2)]


@pytest.mark.parametrize("answer", ["noRecordsMatch", "badResumptionToken"])
def test_a_token_on_the_last_full_page_answered_with_an_error_ends_a_whole_list(
    answer: str,
) -> None:
    """invenio-app-rdm#2715: when the list size is a multiple of the page size, the last page
    still carries a token, and that token gives "an invalid response (without any records)".
    The list was whole by its size: redone again and again, it failed the run."""
    source = FakeSource(make_records(9), page_size=3)

    def token_past_the_end(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.params.get("resumptionToken") == "past-the-end":
            return source.error(answer, "", status=422)
        body = re.sub(
            rb"(<resumptionToken [^>]*)/>", rb"\1>past-the-end</resumptionToken>", response.content
        )
        return httpx.Response(response.status_code, headers=response.headers, content=body)

    source.every = (1, token_past_the_end)
    harvest = Harvest(source).run()
    assert set(harvest.records) == {r.identifier for r in source.records}
    assert source.verbs.count("ListRecords") == 4


def test_dates_by_day_refused_go_in_seconds_from_then_on() -> None:
    """DSpace/xoai#34: XOAI answered badArgument ("Invalid date given in until parameter") to
    a from/until by day, whatever the granularity its Identify declared. Before, every
    harvest by day of such a source failed on it. Asked again with the same days in seconds
    (from the day's first second to its last), and so from then on, with a notice."""
    source = DaysRefusedSource(make_records(9, day=1) + make_records(4, day=2), page_size=4)
    harvest = Harvest(source)
    harvest.run(from_="2024-03-01", until="2024-03-01")
    day_one = set(harvest.records)
    harvest.run(from_="2024-03-02", until="2024-03-02")
    dates = source.list_dates
    assert dates == [
        ("2024-03-01", "2024-03-01"),
        ("2024-03-01T00:00:00Z", "2024-03-01T23:59:59Z"),
        ("2024-03-02T00:00:00Z", "2024-03-02T23:59:59Z"),
    ]
    assert day_one == {r.identifier for r in source.records[:9]}
    assert set(harvest.records) == {r.identifier for r in source.records}
    (notice,) = harvest.client.notices
    assert "refuses from/until by day (badArgument: Invalid date given in until" in notice


def test_dates_refused_by_day_and_in_seconds_fail_with_the_first_answer() -> None:
    """Refused in seconds too, the source refuses something else: its first answer stands,
    and the client neither goes back to days nor keeps asking."""
    source = DaysRefusedSource(make_records(3))

    def refuse_seconds_too(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.params.get("verb") == "ListRecords" and "from" in request.url.params:
            return source.error("badArgument", f"Illegal from {request.url.params['from']}")
        return response

    source.every = (1, refuse_seconds_too)
    harvest = Harvest(source)
    with pytest.raises(OAIError, match="badArgument: Illegal from 2024-03-01 "):
        harvest.run(from_="2024-03-01", until="2024-03-01")
    assert source.verbs.count("ListRecords") == 2
    assert harvest.client.notices == [] and not harvest.client.dates_by_day


@pytest.mark.parametrize("prefetch", [True, False], ids=["prefetch", "sequential"])
def test_a_source_wanting_the_prefix_with_each_token_gets_it_from_then_on(prefetch: bool) -> None:
    """geopython/pycsw#317: pycsw answered a resumption token sent alone (as the protocol
    wants it) with badArgument "Missing metadataprefix parameter". Before, every harvest of
    such a source failed at its second page. The token is sent again with the prefix, and
    so is every later one, with a notice."""
    source = PrefixWithTokenSource(make_records(10), page_size=3)
    harvest = Harvest(source).run(prefetch=prefetch)
    assert set(harvest.records) == {r.identifier for r in source.records}
    tokens = [r.url.params for r in source.requests if "resumptionToken" in r.url.params]
    # the first token refused alone, then each with the prefix
    assert [params.get("metadataPrefix") for params in tokens] == [
        None,
        "oai_dc",
        "oai_dc",
        "oai_dc",
    ]
    (notice,) = harvest.client.notices
    assert "badArgument: Missing metadataprefix parameter" in notice
    assert "sending the metadata prefix with each resumption token" in notice


def test_a_token_refused_with_the_prefix_too_fails_with_the_first_answer() -> None:
    """The prefix was not what the source missed: its first answer stands, asked once more
    only."""
    source = PrefixWithTokenSource(make_records(10), page_size=3)

    def refuse_tokens(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if "resumptionToken" in request.url.params and "metadataPrefix" in request.url.params:
            return source.error("badArgument", "Illegal resumptionToken and metadataPrefix")
        return response

    source.every = (1, refuse_tokens)
    harvest = Harvest(source)
    with pytest.raises(OAIError, match="badArgument: Missing metadataprefix parameter"):
        harvest.run(prefetch=False)
    assert source.verbs.count("ListRecords") == 3 and harvest.client.notices == []


def test_a_token_that_expired_meanwhile_redoes_the_window_with_the_prefix() -> None:
    """Sent again with the prefix, the token is refused as expired: the source read it, so
    the window is redone as after any expired token, not failed on the badArgument."""
    source = PrefixWithTokenSource(make_records(10), page_size=3)
    source.faults = {3: expire_tokens(source)}
    harvest = Harvest(source).run(prefetch=False)
    assert set(harvest.records) == {r.identifier for r in source.records}


def _cut_when(asked: Callable[[httpx.QueryParams], bool]) -> Fault:
    """The answer cut short at the same byte each time, to the requests ``asked`` picks."""
    cut = transform_body(lambda body: body[: len(body) // 2])
    return lambda request, response: (
        cut(request, response) if asked(request.url.params) else response
    )


_SAME_BYTES = "the same bytes at 2 tries in a row: the source's answer, not retried further"


@pytest.mark.parametrize("stop_on_repeat", [True, False])
def test_dates_sent_again_by_day_stop_on_a_repeated_answer_as_the_sweep_does(
    stop_on_repeat: bool,
) -> None:
    """A reconcile's sweep (stop_on_repeat) whose dates in seconds the source refuses: asked
    again by day, the page came cut at the same byte each time. Before, that request was
    retried to the end of the client's tries (a minute and more of backoff) although the
    sweep's every other request stops at the second copy."""
    source = SecondsRefusedSource(make_records(9), page_size=4)
    source.every = (1, _cut_when(lambda params: "T" not in params.get("from", "T")))
    harvest = Harvest(source)
    with pytest.raises(MalformedResponse) as caught:
        harvest.run(
            "ListIdentifiers",
            from_="2024-03-01T00:00:00Z",
            until="2024-03-01T23:59:59Z",
            stop_on_repeat=stop_on_repeat,
        )
    tries = 2 if stop_on_repeat else 1 + harvest.client.max_retries
    assert source.list_dates[1:] == [("2024-03-01", "2024-03-01")] * tries
    assert (_SAME_BYTES in str(caught.value)) is stop_on_repeat


@pytest.mark.parametrize("stop_on_repeat", [True, False])
def test_a_token_sent_again_with_the_prefix_stops_on_a_repeated_answer_as_the_sweep_does(
    stop_on_repeat: bool,
) -> None:
    """The same for a token sent again with the metadata prefix (pycsw)."""
    source = PrefixWithTokenSource(make_records(10), page_size=3)
    source.every = (
        1,
        _cut_when(lambda params: "resumptionToken" in params and "metadataPrefix" in params),
    )
    harvest = Harvest(source)
    with pytest.raises(MalformedResponse) as caught:
        harvest.run("ListIdentifiers", prefetch=False, stop_on_repeat=stop_on_repeat)
    tries = 2 if stop_on_repeat else 1 + harvest.client.max_retries
    assert len(source.requests) == 2 + tries  # the first page, the token alone, then these
    assert (_SAME_BYTES in str(caught.value)) is stop_on_repeat


_DIM = "http://www.dspace.org/xmlns/dspace/dim"


class OwnMetadataSource(FakeSource):
    """A source whose live records carry the metadata `own_metadata` gives (None: the
    fake's own)."""

    def own_metadata(self, record: FakeRecord) -> str | None:
        return None

    def record_xml(self, record: FakeRecord) -> str:
        metadata = None if record.deleted else self.own_metadata(record)
        if metadata is None:
            return super().record_xml(record)
        return f"<record>{self.header_xml(record)}<metadata>{metadata}</metadata></record>"


class OaiDcOnTokensSource(OwnMetadataSource):
    """DSpace/xoai#28 (wontfix): the first page of a list comes in the metadata prefix asked
    for (here DSpace's ``dim``), the pages resumption tokens name in ``oai_dc``."""

    def list_response(self, verb: str, params: httpx.QueryParams) -> httpx.Response:
        self.first_page = "resumptionToken" not in params
        if self.first_page and params.get("metadataPrefix") == "dim":
            params = params.set("metadataPrefix", "oai_dc")
        return super().list_response(verb, params)

    def own_metadata(self, record: FakeRecord) -> str | None:
        if not self.first_page:
            return None
        return (
            f'<dim:dim xmlns:dim="{_DIM}"><dim:field mdschema="dc" element="title">'
            f"{record.title}</dim:field></dim:dim>"
        )


def test_token_pages_in_another_format_than_the_first_page_are_a_notice_named_once() -> None:
    """Before, a DSpace answering its token pages in oai_dc although ``dim`` was asked for
    went unnoticed: every record after the first page failed its transform (unknown_root)
    with nothing to say why. The records are still handed over (staged as sent)."""
    source = OaiDcOnTokensSource(make_records(10), page_size=3)
    harvest = Harvest(source)
    pages = list(harvest.client.sweep("ListRecords", metadata_prefix="dim"))
    roots = [
        {
            etree.QName(etree.fromstring(record.xml).find(".//{*}metadata")[0]).namespace
            for record in page.records
        }
        for page in pages
    ]
    assert roots == [{_DIM}] + [{"http://www.openarchives.org/OAI/2.0/oai_dc/"}] * 3
    assert sum(len(page.records) for page in pages) == 10
    (notice,) = harvest.client.notices
    assert notice == (
        f"{BASE_URL} (ListRecords, metadataPrefix dim): the records of the pages resumption "
        f"tokens name come in the namespace http://www.openarchives.org/OAI/2.0/oai_dc/, not "
        f"in {_DIM} as on the list's first page: the source answers its tokens in another "
        "format than asked for (DSpace: DSpace/xoai#28); staged as sent, their transform "
        "fails (unknown_root) unless the harvester's transformer chain reads that format"
    )


def test_a_run_resumed_after_the_first_page_still_notices_token_pages_in_another_format(
    tmp_path: Path,
) -> None:
    """The reference namespace was the first page of the attempt: a run that failed after
    the list's first page (``dim``) and resumed from its checkpoint took its first page
    (``oai_dc``, a token's) as the reference, and the rest of the list, all ``oai_dc``, went
    unnoticed. The checkpoint keeps it (in its JSON payload, as the state store saves it)."""
    source = OaiDcOnTokensSource(make_records(10), page_size=3)
    source.faults = {2: status(503)}  # the second page's request fails: so does the run
    failed = Harvest(source, max_retries=0)
    sweep = failed.client.sweep(
        "ListRecords",
        metadata_prefix="dim",
        save_checkpoint=failed.checkpoints.append,
        prefetch=False,
    )
    assert len(next(sweep).records) == 3  # the first page, in dim
    with pytest.raises(HarvestProtocolError):
        next(sweep)
    assert failed.client.notices == []
    with StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}") as store:
        run_id = store.create_run(
            "dspace", window_from=None, window_until=None, scale=None, max_records=0, options={}
        )
        store.save_checkpoint(run_id, failed.checkpoints[-1])
        checkpoint = store.get_run(run_id)["checkpoint"]
    assert checkpoint.resumption_token is not None and checkpoint.pages_read == 1

    resumed = Harvest(source)
    pages = list(resumed.client.sweep("ListRecords", metadata_prefix="dim", checkpoint=checkpoint))
    assert sum(len(page.records) for page in pages) == 7
    (notice,) = resumed.client.notices
    assert notice.startswith(
        f"{BASE_URL} (ListRecords, metadataPrefix dim): the records of the pages resumption "
        f"tokens name come in the namespace http://www.openarchives.org/OAI/2.0/oai_dc/, not "
        f"in {_DIM} as on the list's first page: "
    )


class MixedKernelsSource(OwnMetadataSource):
    """DataCite's OAI-PMH: each record in the kernel it was registered in, kernel-4 on the
    first page and kernel-3 on the pages its tokens name."""

    def list_response(self, verb: str, params: httpx.QueryParams) -> httpx.Response:
        self.kernel = "4" if "resumptionToken" not in params else "3"
        return super().list_response(verb, params)

    def own_metadata(self, record: FakeRecord) -> str | None:
        return (
            f'<resource xmlns="http://datacite.org/schema/kernel-{self.kernel}">'
            f"<titles><title>{record.title}</title></titles></resource>"
        )


def test_token_pages_in_another_version_of_the_format_are_no_notice() -> None:
    """Before, DataCite's lists, whose records come in the kernel each was registered in,
    were told at every harvest that the source answered its tokens in another format."""
    harvest = Harvest(MixedKernelsSource(make_records(10), page_size=3)).run()
    assert len(harvest.records) == 10 and harvest.client.notices == []


def test_token_pages_in_the_first_page_s_format_are_no_notice() -> None:
    source = FakeSource(make_records(10), page_size=3)
    harvest = Harvest(source).run()
    assert len(harvest.records) == 10 and harvest.client.notices == []


PHP_WARNINGS = [
    pytest.param(lambda body: PHP_TEXT_WARNING + body, id="text-before"),
    pytest.param(lambda body: PHP_MARKUP_WARNING + body, id="markup-before"),
    pytest.param(lambda body: body + PHP_TEXT_WARNING, id="text-after"),
    pytest.param(lambda body: body + b"\n" + PHP_MARKUP_WARNING, id="markup-after"),
    pytest.param(lambda body: PHP_MARKUP_WARNING + body + PHP_TEXT_WARNING, id="both"),
]


@pytest.mark.parametrize("with_warnings", PHP_WARNINGS)
def test_php_warnings_beside_each_response_are_dropped_with_a_notice(
    with_warnings: Callable[[bytes], bytes],
) -> None:
    """Before, every page failed to parse ("Start tag expected", "Extra content at the end of
    the document"): retried to the end, then the run failed, every time, and a base URL that
    had never answered OAI-PMH was taken for a wrong one. Now each page is read from its XML
    alone, the records whole, and the operator told once."""
    source = FakeSource(make_records(9), page_size=3)
    source.every = (1, transform_body(with_warnings))
    harvest = Harvest(source, endpoint_proven=False).run()

    assert harvest.client.identify().repository_name  # Identify too
    assert set(harvest.records) == held(source)
    assert all(record.error is None for record in harvest.records.values())
    assert source.verbs.count("ListRecords") == 3  # each page read at its first try
    (notice,) = harvest.client.notices
    assert "the source sends text before or after its XML (PHP's warnings or notices" in notice


def test_a_page_cut_short_after_php_warnings_is_still_retried() -> None:
    """The XML after the warnings is judged as any page: cut short, it is asked for again."""
    source = FakeSource(make_records(9), page_size=3)
    source.every = (1, transform_body(lambda body: PHP_TEXT_WARNING + body))
    source.faults[2] = transform_body(lambda body: PHP_TEXT_WARNING + body[:-300])
    harvest = Harvest(source).run()

    assert set(harvest.records) == held(source)
    assert source.verbs.count("ListRecords") == 4


def test_a_second_document_after_the_first_is_not_dropped_as_a_warning() -> None:
    """Two responses in one body are no warning beside one: reading the first alone would
    lose what the second holds, so the page stays unreadable (retried, then the run fails)."""
    identify = (SAMPLES / "zenodo-Identify.xml").read_bytes()
    with pytest.raises(UnusablePage, match="not well-formed XML"):
        parse_response(identify + identify, "Identify")


def test_a_comment_after_a_broken_page_is_no_warning() -> None:
    """A comment after the root is XML's own: a page broken elsewhere is read as before, its
    broken record isolated, with no notice of text dropped."""
    page = (SAMPLES / "zenodo-ListRecords-oai_dc-page1.xml").read_bytes()
    broken = page.replace(b"</dc:title>", b"</dc:titel>", 1) + b"\n<!-- served in 0.3 s -->\n"
    parsed = parse_response(broken, "ListRecords")
    assert [record.error is not None for record in parsed.records] == [True, False, False]
    assert parsed.notice is None
