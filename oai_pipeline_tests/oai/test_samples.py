"""The client against real recorded responses, served with their recorded status and headers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
from lxml import etree

from oai_pipeline.oai.client import OAIClient
from oai_pipeline.oai.errors import (
    BadResumptionToken,
    HarvestProtocolError,
    OAIError,
    UnknownMetadataFormat,
)
from oai_pipeline.oai.pages import UnusablePage, parse_response
from oai_pipeline.oai.windows import parse_datestamp

SAMPLES = Path(__file__).parent / "samples"
RECORDED = json.loads((SAMPLES / "responses.json").read_text())
OAI = "{http://www.openarchives.org/OAI/2.0/}"


class Recorded:
    """Answers a request with the recorded response whose request parameters match."""

    def __init__(self, extra: dict[tuple, str] | None = None) -> None:
        self.routes: dict[tuple, str] = {}
        for name, entry in RECORDED.items():
            if entry.get("request", "").startswith("GET "):
                url = entry["request"][4:]
                self.routes[self.key(urlsplit(url).netloc, parse_qsl(urlsplit(url).query))] = name
        self.routes.update(extra or {})
        self.requests: list[httpx.Request] = []

    @staticmethod
    def key(host: str, params) -> tuple:
        return (host, tuple(sorted(params)))

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        name = self.routes.get(self.key(request.url.host, request.url.params.multi_items()))
        if name is None:
            return httpx.Response(404, text=f"no recording for {request.url}")
        entry = RECORDED.get(name, {})
        headers = {k: v for k, v in entry.get("headers", {}).items() if k != "content-length"}
        return httpx.Response(
            entry.get("status", 200), content=(SAMPLES / name).read_bytes(), headers=headers
        )


def zenodo(recorded: Recorded, sleeps: list[float] | None = None) -> OAIClient:
    sink = sleeps if sleeps is not None else []
    return OAIClient("https://zenodo.org/oai2d", transport=recorded.transport(), sleep=sink.append)


def test_identify_zenodo_seconds_granularity_and_no_deletions() -> None:
    info = zenodo(Recorded()).identify()
    assert info.repository_name == "Zenodo"
    assert info.granularity == "seconds"
    assert info.deleted_record == "no"
    assert info.earliest_datestamp == "2014-02-03T14:41:33Z"
    assert info.response_date == "2026-08-10T08:56:30Z"
    assert info.base_url == "https://zenodo.org/oai2d"
    assert info.admin_emails == ("info@zenodo.org",)


def test_identify_e_periodica() -> None:
    client = OAIClient(
        "https://www.e-periodica.ch/oai/dataprovider", transport=Recorded().transport()
    )
    info = client.identify()
    assert info.repository_name == "repository.prod"
    assert info.granularity == "seconds"
    assert info.deleted_record == "no"
    assert parse_datestamp(info.earliest_datestamp).year == 2013
    assert info.admin_emails == ("webmaster@e-periodica.ch",)


def _sample_with(name: str, *changes: tuple[bytes, bytes]) -> bytes:
    """A sample response with each (old, new) replaced."""
    body = (SAMPLES / name).read_bytes()
    for old, new in changes:
        body = body.replace(old, new)
    return body


@pytest.mark.parametrize(
    "breakage",
    [
        (b"</delimiter>", b"</delimter>"),  # a misspelt end tag inside oai-identifier
        (b"</oai-identifier>\n    </description>", b"<br></oai-identifier>\n    </description>"),
        (b"</oai-identifier>\n    </description>", b""),  # cut, no end tags at all
    ],
    ids=["misspelt-end-tag", "html-inside", "unclosed"],
)
def test_an_identify_whose_description_is_not_well_formed_is_read_without_it(
    breakage: tuple[bytes, bytes],
) -> None:
    """Every try met the same broken description, so a source never identified could not
    be harvested; the harvest reads nothing in a description."""
    body = _sample_with("e-periodica-Identify.xml", breakage)
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    client = OAIClient("https://www.e-periodica.ch/oai/dataprovider", transport=transport)
    info = client.identify()
    assert (info.repository_name, info.granularity, info.deleted_record) == (
        "repository.prod",
        "seconds",
        "no",
    )
    assert info.admin_emails == ("webmaster@e-periodica.ch",)
    (notice,) = client.notices
    assert "Identify holds a <description> that is not well-formed XML" in notice


def test_an_identify_broken_outside_its_descriptions_stays_unreadable() -> None:
    body = _sample_with(
        "e-periodica-Identify.xml",
        (b"</granularity>", b"</granularty>"),
        (b"</delimiter>", b"</delimter>"),
    )
    with pytest.raises(UnusablePage, match="not well-formed XML"):
        parse_response(body, "Identify")


def test_identify_day_granularity() -> None:
    body = _sample_with(
        "zenodo-Identify.xml",
        (b"YYYY-MM-DDThh:mm:ssZ", b"YYYY-MM-DD"),
        (b"<deletedRecord>no", b"<deletedRecord>persistent"),
    )
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    info = OAIClient("https://day.test/oai", transport=transport).identify()
    assert info.granularity == "day" and info.deleted_record == "persistent"


@pytest.mark.parametrize(
    ("sent", "read"), [("Persistent", "persistent"), (" TRANSIENT ", "transient")]
)
def test_deleted_record_is_read_whatever_its_case(sent: str, read: str) -> None:
    """A source writing `Persistent` keeps its deletions: read as `no`, every reconcile would
    sweep it for nothing."""
    body = (
        (SAMPLES / "zenodo-Identify.xml")
        .read_bytes()
        .replace(b"<deletedRecord>no", f"<deletedRecord>{sent}".encode())
    )
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    assert OAIClient("https://case.test/oai", transport=transport).identify().deleted_record == read


def test_polite_request_headers_and_a_retry_after_on_200_is_not_obeyed() -> None:
    recorded, sleeps = Recorded(), []
    zenodo(recorded, sleeps).identify()
    request = recorded.requests[0]
    assert request.headers["user-agent"].startswith("oai-pipeline/")
    assert "gzip" in request.headers["accept-encoding"]
    assert sleeps == []  # the recording carries retry-after: 60 on a 200


def test_list_records_with_token_then_resumed_page_with_deleted_header() -> None:
    page1 = RECORDED["zenodo-ListRecords-oai_dc-page1.xml"]
    resumed = RECORDED["zenodo-ListRecords-oai_dc-resumed-with-deleted.xml"]
    recorded = Recorded()
    client = zenodo(recorded)
    first = client.list_page("ListRecords", metadata_prefix="oai_dc")
    assert [r.identifier for r in first.records] == [
        "oai:zenodo.org:8435696",
        "oai:zenodo.org:8435639",
        "oai:zenodo.org:8433301",
    ]
    assert first.records[0].set_specs == ["user-pyhep2023", "openaire"]
    assert first.cursor == 0 and first.complete_list_size == 8091628
    assert first.response_date == "2026-08-13T17:56:48Z"
    token = first.resumption_token
    assert token and token in resumed["request"]  # attributes read, text is the token
    assert page1["status"] == 200
    second = client.list_page("ListRecords", metadata_prefix="oai_dc", resumption_token=token)
    # only verb and the (URL-encoded) token go with a resumed request
    assert dict(recorded.requests[-1].url.params) == {
        "verb": "ListRecords",
        "resumptionToken": token,
    }
    deleted = second.records[0]
    assert deleted.identifier == "oai:zenodo.org:8433364" and deleted.deleted
    assert deleted.error is None
    assert b"<metadata>" in deleted.xml  # metadata left in, yet the header is the truth
    assert second.cursor == 50 and second.resumption_token


def test_each_record_xml_is_the_whole_record_and_parses_on_its_own() -> None:
    page = zenodo(Recorded()).list_page("ListRecords", metadata_prefix="oai_dc")
    for record in page.records:
        root = etree.fromstring(record.xml)
        assert root.tag == OAI + "record"
        assert root.findtext(f"{OAI}header/{OAI}identifier") == record.identifier
        dc = root.find(f"{OAI}metadata")[0]
        assert dc.tag == "{http://www.openarchives.org/OAI/2.0/oai_dc/}dc"
        # xsi:schemaLocation on the payload still has its namespace
        assert dc.get("{http://www.w3.org/2001/XMLSchema-instance}schemaLocation")


@pytest.mark.parametrize(("max_restarts", "pages_read"), [(1, [3, 3, 3, 3]), (0, [3, 3])])
def test_no_records_match_with_http_422_for_a_token_of_a_long_list_is_a_lost_list(
    max_restarts: int, pages_read: list[int]
) -> None:
    """Zenodo's list says 8,091,628 records (completeListSize) and 6 came: noRecordsMatch
    for its next token cannot be the end. The window is redone (unless max_restarts is 0);
    answered the same at the same point again, the run still fails rather than succeed with
    the rest of the list unread: far more than a page is missing (a list that ends short of
    less than a page at the same point twice ends there: test_faults)."""
    resumed = RECORDED["zenodo-ListRecords-oai_dc-resumed-with-deleted.xml"]
    last_token = ".eJwlzEuOgjAAANC7dG0mLeAMkMwCRmlEqYLSQjemUBRtFRSMROPd5"
    recorded = Recorded(
        {
            Recorded.key(
                "zenodo.org", [("verb", "ListRecords"), ("resumptionToken", last_token)]
            ): "zenodo-error-noRecordsMatch-http422.xml"
        }
    )
    pages: list = []
    client = zenodo(recorded)
    sweep = client.sweep("ListRecords", metadata_prefix="oai_dc", max_restarts=max_restarts)
    with pytest.raises(HarvestProtocolError, match="noRecordsMatch"):
        for page in sweep:
            pages.append(page)
    assert [len(p.records) for p in pages] == pages_read  # with a redo, the window once more
    assert resumed["status"] == 200


def test_list_identifiers_page_with_token_attributes() -> None:
    page = zenodo(Recorded()).list_page(
        "ListIdentifiers", metadata_prefix="oai_dc", from_="2026-04-01"
    )
    assert len(page.records) == 50
    assert all(r.xml is None and r.identifier.startswith("oai:zenodo.org:") for r in page.records)
    assert page.cursor == 0 and page.complete_list_size == 1337969
    assert page.resumption_token and len(page.resumption_token) > 300


def test_list_sets_follows_the_token_to_a_last_page_without_token_element() -> None:
    recorded = Recorded()
    sets = list(zenodo(recorded).list_sets())
    assert len(recorded.requests) == 2
    specs = [s.spec for s in sets]
    assert len(specs) == len(set(specs)) > 0
    assert all(s.name for s in sets)


def test_bad_argument_with_http_422_fails_without_retry() -> None:
    """Zenodo's answer to a prefix it lacks is badArgument, not cannotDisseminateFormat: the
    error names the prefixes its ListMetadataFormats offers (before, only its own message)."""
    recorded, sleeps = Recorded(), []
    with pytest.raises(UnknownMetadataFormat) as caught:
        zenodo(recorded, sleeps).list_page("ListRecords", metadata_prefix="XXX")
    assert caught.value.code == "badArgument"
    assert "(its answer: badArgument: metadataPrefix does not exist)" in str(caught.value)
    assert "the source offers marcxml, oai_dc, dcat, marc21, datacite, " in str(caught.value)
    # the list once (a badArgument is not retried), then ListMetadataFormats
    verbs = [request.url.params["verb"] for request in recorded.requests]
    assert verbs == ["ListRecords", "ListMetadataFormats"] and sleeps == []


def test_a_bad_argument_about_another_argument_asks_no_more() -> None:
    """A badArgument for a prefix ListMetadataFormats lists is about another argument: the
    source's own error, as before."""
    body = (
        b'<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>2026-01-01T00:00:00Z'
        b'</responseDate><request>x</request><error code="badArgument">bad from</error></OAI-PMH>'
    )
    formats = (SAMPLES / "zenodo-ListMetadataFormats.xml").read_bytes()

    def answer(request: httpx.Request) -> httpx.Response:
        listing = request.url.params["verb"] == "ListMetadataFormats"
        return (
            httpx.Response(200, content=formats) if listing else httpx.Response(422, content=body)
        )

    client = OAIClient("https://zenodo.org/oai2d", transport=httpx.MockTransport(answer))
    with pytest.raises(OAIError) as caught:
        client.list_page("ListRecords", metadata_prefix="oai_dc", from_="2026-01-01")
    assert not isinstance(caught.value, UnknownMetadataFormat)
    assert (
        "(ListRecords): badArgument: bad from (the list was asked for metadataPrefix oai_dc "
        "from 2026-01-01: check" in str(caught.value)
    )


@pytest.mark.parametrize("until", ["2026-08-13T23:59:59Z", "2026-08-13"])
def test_a_bad_prefix_answered_bad_argument_is_not_asked_again_by_day(until: str) -> None:
    """Zenodo answers an unknown prefix with badArgument, which in answer to a from/until
    in seconds might be the dates: its message names the prefix, so the harvest fails at
    once, as before (the request by day would be refused as well)."""
    answer = "zenodo-error-badArgument-unknown-prefix-http422.xml"
    dates = [("from", until.replace("23:59:59", "00:00:00")), ("until", until)]
    params = [("verb", "ListRecords"), ("metadataPrefix", "XXX"), *dates]
    recorded = Recorded({Recorded.key("zenodo.org", params): answer})
    client = zenodo(recorded)
    with pytest.raises(UnknownMetadataFormat, match="badArgument: metadataPrefix does not exist"):
        client.list_page("ListRecords", metadata_prefix="XXX", from_=dates[0][1], until=until)
    # not asked again by day: the list once, then ListMetadataFormats for the error
    assert [r.url.params["verb"] for r in recorded.requests] == [
        "ListRecords",
        "ListMetadataFormats",
    ]
    assert client.notices == [] and not client.dates_by_day


def test_bad_resumption_token_with_http_422() -> None:
    with pytest.raises(BadResumptionToken) as caught:
        zenodo(Recorded()).list_page(
            "ListRecords", metadata_prefix="oai_dc", resumption_token="XXX"
        )
    assert caught.value.code == "badResumptionToken"


def test_no_records_match_with_empty_text_and_http_422_is_an_empty_last_page() -> None:
    page = zenodo(Recorded()).list_page("ListRecords", metadata_prefix="oai_dc", from_="2030-01-01")
    assert page.records == [] and page.resumption_token is None
    assert page.response_date == "2026-08-13T18:19:00Z"


# arXiv's ListSets, cut to the set the test lists (a dated list of a set that answers
# noRecordsMatch is checked against ListSets once)
ARXIV_SETS = b"""<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">
  <responseDate>2016-06-02T19:13:02Z</responseDate>
  <request verb="ListSets">http://export.arxiv.org/oai2</request>
  <ListSets><set><setSpec>physics:hep-lat</setSpec><setName>Lattice</setName></set></ListSets>
</OAI-PMH>"""


def test_arxiv_padded_no_records_match_with_status_200() -> None:
    body = (SAMPLES / "arxiv-error-noRecordsMatch-2016.xml").read_bytes()

    def answer(request: httpx.Request) -> httpx.Response:
        listing_sets = request.url.params.get("verb") == "ListSets"
        return httpx.Response(200, content=ARXIV_SETS if listing_sets else body)

    transport = httpx.MockTransport(answer)
    client = OAIClient("http://export.arxiv.org/oai2", transport=transport)
    pages = list(
        client.sweep(
            "ListRecords",
            metadata_prefix="arXiv",
            from_="2015-01-17",
            until="2015-01-17",
            set_spec="physics:hep-lat",
        )
    )
    assert len(pages) == 1 and pages[0].records == []


def test_arxiv_day_granularity_list_without_token() -> None:
    body = (SAMPLES / "arxiv-ListRecords-cs-2015-01-16_2015-01-18.xml").read_bytes()
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    client = OAIClient("http://export.arxiv.org/oai2", transport=transport)
    pages = list(client.sweep("ListRecords", metadata_prefix="arXiv", set_spec="cs"))
    assert len(pages) == 1 and len(pages[0].records) == 46
    assert all(len(r.datestamp) == 10 for r in pages[0].records)
    assert all(parse_datestamp(r.datestamp).year >= 2011 for r in pages[0].records)


def test_get_record_datacite_and_id_does_not_exist_with_http_422() -> None:
    client = zenodo(Recorded())
    record = client.get_record("oai:zenodo.org:10357859", "datacite")
    assert record.error is None and not record.deleted
    payload = etree.fromstring(record.xml).find(f"{OAI}metadata")[0]
    assert etree.QName(payload).localname == "resource"
    missing = client.get_record("oai:zenodo.org:XXX", "oai_dc")
    assert missing.error.type == "idDoesNotExist"
    assert missing.error.message == "No matching identifier"
    assert missing.identifier == "oai:zenodo.org:XXX"


def test_several_error_elements_are_all_reported() -> None:
    body = (
        b'<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>2026-01-01T00:00:00Z'
        b'</responseDate><request>x</request><error code="badArgument">from is bad</error>'
        b'<error code="badArgument">until is bad</error></OAI-PMH>'
    )
    transport = httpx.MockTransport(lambda request: httpx.Response(400, content=body))
    with pytest.raises(OAIError) as caught:
        OAIClient("https://x.test/oai", transport=transport).list_page(
            "ListRecords", metadata_prefix="oai_dc", from_="x"
        )
    assert caught.value.errors == [("badArgument", "from is bad"), ("badArgument", "until is bad")]


def test_gzip_and_redirects() -> None:
    import gzip

    body = gzip.compress((SAMPLES / "zenodo-Identify.xml").read_bytes())

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/old":
            return httpx.Response(
                301, headers={"location": "https://zenodo.org/oai2d?verb=Identify"}
            )
        return httpx.Response(200, content=body, headers={"content-encoding": "gzip"})

    client = OAIClient("https://zenodo.org/old", transport=httpx.MockTransport(handler))
    assert client.identify().repository_name == "Zenodo"


def test_http_404_html_is_a_clear_error_not_retried() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(404, text="<html><body>Not Found</body></html>")

    from oai_pipeline.oai.errors import HarvestProtocolError

    with pytest.raises(HarvestProtocolError, match="HTTP 404"):
        OAIClient("https://x.test/nope", transport=httpx.MockTransport(handler)).identify()
    assert len(calls) == 1


def test_list_metadata_formats() -> None:
    prefixes = zenodo(Recorded()).list_metadata_formats()
    assert {"oai_dc", "datacite", "oai_datacite"} <= set(prefixes)


def test_user_agent_carries_the_operators_contact(monkeypatch: pytest.MonkeyPatch) -> None:
    from oai_pipeline.oai.client import default_user_agent

    monkeypatch.setenv("OAI_PIPELINE_CONTACT", "harvest-admin@example.org")
    assert default_user_agent().endswith("(OAI-PMH harvester; +mailto:harvest-admin@example.org)")
    monkeypatch.delenv("OAI_PIPELINE_CONTACT")
    assert "+https://" in default_user_agent()


@pytest.mark.parametrize(
    ("attribute", "value"),
    [("cursor", "-1"), ("completeListSize", "-1"), ("completeListSize", str(2**63))],
)
def test_a_count_of_the_resumption_token_no_checkpoint_holds_is_none(
    attribute: str, value: str
) -> None:
    """Zenodo's first page, its token's count made negative or beyond 64 bits: no count."""
    body = (SAMPLES / "zenodo-ListRecords-oai_dc-page1.xml").read_bytes()
    body, changed = re.subn(f'{attribute}="\\d+"'.encode(), f'{attribute}="{value}"'.encode(), body)
    page = parse_response(body, "ListRecords")
    assert changed == 1 and page.next_token
    assert (page.cursor, page.complete_list_size) == (
        (None, 8091628) if attribute == "cursor" else (0, None)
    )
