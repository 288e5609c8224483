"""Every verb and every OAI-PMH error of the sample endpoint, over real HTTP."""

from __future__ import annotations

import gzip
import http.client
import math
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode, urlsplit

import httpx
import pytest
from lxml import etree
from sickle import Sickle

from oai_pipeline.sample_endpoint import (
    EndpointRecord,
    OAIEndpoint,
    load_sample_records,
    records_for_prefix,
)
from oai_pipeline.sample_endpoint.formats import KNOWN_FORMATS
from oai_pipeline_tests.endpoint.oai_http import NS, error_codes, get, headers_of, sweep

SAMPLE = load_sample_records()
BY_ID = {record.identifier: record for record in SAMPLE}


def _ids(prefix: str, *, live_only: bool = False) -> set[str]:
    return {
        record.identifier
        for record in records_for_prefix(SAMPLE, prefix)
        if not (live_only and record.deleted)
    }


@pytest.fixture(scope="module")
def endpoint():
    with OAIEndpoint() as running:
        yield running


@pytest.fixture(scope="module")
def day_endpoint():
    with OAIEndpoint(granularity="day") as running:
        yield running


# ------------------------------------------------------------------ Identify


def test_identify(endpoint):
    response, root = get(endpoint.base_url, verb="Identify")
    assert response.status_code == 200
    identify = root.find("oai:Identify", NS)
    assert identify.findtext("oai:baseURL", namespaces=NS) == endpoint.base_url
    assert identify.findtext("oai:protocolVersion", namespaces=NS) == "2.0"
    assert identify.findtext("oai:granularity", namespaces=NS) == "YYYY-MM-DDThh:mm:ssZ"
    assert identify.findtext("oai:deletedRecord", namespaces=NS) == "persistent"
    earliest = min(record.datestamp for record in SAMPLE).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert identify.findtext("oai:earliestDatestamp", namespaces=NS) == earliest
    assert root.find("oai:request", NS).get("verb") == "Identify"


def test_identify_reports_constructor_settings():
    with OAIEndpoint(
        granularity="day",
        deleted_record="no",
        repository_name="Test & Co",
        earliest_datestamp=datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC),
    ) as endpoint:
        _, root = get(endpoint.base_url, verb="Identify")
    identify = root.find("oai:Identify", NS)
    assert identify.findtext("oai:granularity", namespaces=NS) == "YYYY-MM-DD"
    assert identify.findtext("oai:deletedRecord", namespaces=NS) == "no"
    assert identify.findtext("oai:repositoryName", namespaces=NS) == "Test & Co"
    assert identify.findtext("oai:earliestDatestamp", namespaces=NS) == "2001-02-03"


def test_responses_carry_a_stylesheet_processing_instruction(endpoint):
    response = httpx.get(endpoint.base_url, params={"verb": "Identify"})
    assert response.content.startswith(b"<?xml version='1.0' encoding='UTF-8'?>\n<?xml-stylesheet")
    assert response.headers["content-type"] == "text/xml; charset=utf-8"


# ------------------------------------------------------- ListMetadataFormats


def test_list_metadata_formats(endpoint):
    _, root = get(endpoint.base_url, verb="ListMetadataFormats")
    prefixes = [e.text for e in root.iterfind(".//oai:metadataPrefix", NS)]
    assert sorted(prefixes) == ["datacite", "oai_datacite", "oai_dc"]
    for row in root.iterfind(".//oai:metadataFormat", NS):
        fmt = KNOWN_FORMATS[row.findtext("oai:metadataPrefix", namespaces=NS)]
        assert row.findtext("oai:schema", namespaces=NS) == fmt.schema
        assert row.findtext("oai:metadataNamespace", namespaces=NS) == fmt.namespace


def test_list_metadata_formats_of_one_item(endpoint):
    _, root = get(
        endpoint.base_url, verb="ListMetadataFormats", identifier="oai:zenodo.org:8435696"
    )
    assert [e.text for e in root.iterfind(".//oai:metadataPrefix", NS)] == ["oai_dc"]
    _, root = get(
        endpoint.base_url, verb="ListMetadataFormats", identifier="oai:sample.oai-pipeline:video"
    )
    prefixes = {e.text for e in root.iterfind(".//oai:metadataPrefix", NS)}
    assert prefixes == {"oai_datacite", "datacite"}


def test_list_metadata_formats_of_an_unknown_item(endpoint):
    response, root = get(endpoint.base_url, verb="ListMetadataFormats", identifier="oai:x:1")
    assert response.status_code == 422
    assert error_codes(root) == ["idDoesNotExist"]


def test_an_item_without_any_format_is_no_metadata_formats():
    bare = EndpointRecord("oai:x:bare", datetime(2024, 1, 1, tzinfo=UTC))
    with OAIEndpoint([bare]) as endpoint:
        _, root = get(endpoint.base_url, verb="ListMetadataFormats", identifier="oai:x:bare")
    assert error_codes(root) == ["noMetadataFormats"]


def test_only_formats_some_record_has_are_listed():
    record = EndpointRecord(
        "oai:x:1", datetime(2024, 1, 1, tzinfo=UTC), metadata={"oai_dc": b"<a/>"}
    )
    with OAIEndpoint([record]) as endpoint:
        _, root = get(endpoint.base_url, verb="ListMetadataFormats")
    assert [e.text for e in root.iterfind(".//oai:metadataPrefix", NS)] == ["oai_dc"]


# ------------------------------------------------------------------ ListSets


def test_list_sets_includes_hierarchy_parents(endpoint):
    _, root = get(endpoint.base_url, verb="ListSets")
    specs = [e.text for e in root.iterfind(".//oai:setSpec", NS)]
    expected = {spec for record in SAMPLE for spec in record.set_specs} | {"datacite"}
    assert set(specs) == expected
    names = {
        s.findtext("oai:setSpec", namespaces=NS): s.findtext("oai:setName", namespaces=NS)
        for s in root.iterfind(".//oai:set", NS)
    }
    assert names["user-rdmo"] == "RDMO"


def test_list_sets_without_sets_is_no_set_hierarchy():
    record = EndpointRecord(
        "oai:x:1", datetime(2024, 1, 1, tzinfo=UTC), metadata={"oai_dc": b"<a/>"}
    )
    with OAIEndpoint([record]) as endpoint:
        _, root = get(endpoint.base_url, verb="ListSets")
        assert error_codes(root) == ["noSetHierarchy"]
        _, root = get(endpoint.base_url, verb="ListRecords", metadataPrefix="oai_dc", set="a")
        assert error_codes(root) == ["noSetHierarchy"]


def test_list_sets_with_a_token_is_bad_resumption_token(endpoint):
    _, root = get(endpoint.base_url, verb="ListSets", resumptionToken="abc")
    assert error_codes(root) == ["badResumptionToken"]


# ----------------------------------------------------------------- GetRecord


def test_get_record_serves_the_stored_metadata(endpoint):
    for prefix in ("oai_datacite", "datacite"):
        _, root = get(
            endpoint.base_url,
            verb="GetRecord",
            identifier="oai:sample.oai-pipeline:full",
            metadataPrefix=prefix,
        )
        (header,) = headers_of(root)
        assert header.identifier == "oai:sample.oai-pipeline:full"
        assert header.datestamp == "2023-10-05T12:00:00Z"
        assert header.set_specs == BY_ID[header.identifier].set_specs
        served = root.find(".//oai:metadata", NS)[0]
        stored = etree.fromstring(BY_ID[header.identifier].metadata[prefix])
        assert etree.tostring(served, with_tail=False) == etree.tostring(stored)
        assert root.find("oai:request", NS).get("metadataPrefix") == prefix


def test_get_record_of_a_deleted_record_is_a_deleted_header(endpoint):
    _, root = get(
        endpoint.base_url,
        verb="GetRecord",
        identifier="oai:zenodo.org:8433364",
        metadataPrefix="oai_dc",
    )
    (header,) = headers_of(root)
    assert header.deleted and not header.has_metadata


@pytest.mark.parametrize(
    ("identifier", "prefix", "code"),
    [
        ("oai:zenodo.org:8435696", "oai_datacite", "cannotDisseminateFormat"),
        ("oai:zenodo.org:8435696", "marcxml", "cannotDisseminateFormat"),
        ("oai:zenodo.org:XXX", "oai_dc", "idDoesNotExist"),
    ],
)
def test_get_record_errors(endpoint, identifier, prefix, code):
    response, root = get(
        endpoint.base_url, verb="GetRecord", identifier=identifier, metadataPrefix=prefix
    )
    assert response.status_code == 422
    assert error_codes(root) == [code]
    request = root.find("oai:request", NS)
    assert request.get("verb") == "GetRecord" and request.get("identifier") == identifier


# -------------------------------------------------------- badVerb, badArgument


@pytest.mark.parametrize(
    "query",
    [
        "",
        "verb=Frobnicate",
        "verb=Identify&verb=Identify",
        "verb=",
        "verb=listrecords&metadataPrefix=oai_dc",
    ],
)
def test_bad_verb(endpoint, query):
    response = httpx.get(f"{endpoint.base_url}?{query}")
    root = etree.fromstring(response.content)
    assert response.status_code == 422
    assert error_codes(root) == ["badVerb"]
    assert root.find("oai:request", NS).attrib == {}


@pytest.mark.parametrize(
    "params",
    [
        {"verb": "Identify", "extra": "1"},
        {"verb": "ListRecords"},
        {"verb": "ListIdentifiers", "from": "2023-10-01"},
        {"verb": "GetRecord", "identifier": "oai:zenodo.org:8435696"},
        {"verb": "GetRecord", "metadataPrefix": "oai_dc"},
        {"verb": "ListRecords", "metadataPrefix": "oai_dc", "resumptionToken": "x"},
        {"verb": "ListRecords", "metadataPrefix": ""},
        {"verb": "ListRecords", "metadataPrefix": "oai_dc", "from": "2023-10"},
        {"verb": "ListRecords", "metadataPrefix": "oai_dc", "from": "2023-02-30"},
        {"verb": "ListRecords", "metadataPrefix": "oai_dc", "until": "2023-10-05T12:00:00"},
        {"verb": "ListRecords", "metadataPrefix": "oai_dc", "from": "2023-10-05T12:00:00+01:00"},
        {"verb": "ListRecords", "metadataPrefix": "oai_dc", "from": "2023-10-05",
         "until": "2023-10-06T00:00:00Z"},
        {"verb": "ListRecords", "metadataPrefix": "oai_dc", "from": "2023-10-06",
         "until": "2023-10-05"},
        {"verb": "ListSets", "set": "zenodo"},
    ],
)  # fmt: skip
def test_bad_argument(endpoint, params):
    response, root = get(endpoint.base_url, **params)
    assert response.status_code == 422
    assert "badArgument" in error_codes(root)
    assert root.find("oai:request", NS).attrib == {}


def test_repeated_argument_is_bad_argument(endpoint):
    query = "verb=ListRecords&metadataPrefix=oai_dc&metadataPrefix=oai_dc"
    response = httpx.get(f"{endpoint.base_url}?{query}")
    assert error_codes(etree.fromstring(response.content)) == ["badArgument"]


def test_several_errors_come_as_several_elements(endpoint):
    _, root = get(endpoint.base_url, verb="ListRecords", metadataPrefix="XXX", until="yesterday")
    assert error_codes(root) == ["badArgument", "cannotDisseminateFormat"]


def test_unknown_prefix_is_cannot_disseminate_format(endpoint):
    for verb in ("ListRecords", "ListIdentifiers"):
        response, root = get(endpoint.base_url, verb=verb, metadataPrefix="XXX")
        assert response.status_code == 422
        assert error_codes(root) == ["cannotDisseminateFormat"]


def test_errors_can_come_with_http_200():
    with OAIEndpoint(errors_with_http_422=False) as endpoint:
        response, root = get(endpoint.base_url, verb="ListRecords", metadataPrefix="XXX")
    assert response.status_code == 200
    assert error_codes(root) == ["cannotDisseminateFormat"]


def test_no_records_match(endpoint):
    response, root = get(
        endpoint.base_url, verb="ListRecords", metadataPrefix="oai_dc", **{"from": "2030-01-01"}
    )
    assert response.status_code == 422
    assert error_codes(root) == ["noRecordsMatch"]
    assert root.find("oai:request", NS).get("from") == "2030-01-01"
    _, root = get(endpoint.base_url, verb="ListIdentifiers", metadataPrefix="oai_dc", set="nope")
    assert error_codes(root) == ["noRecordsMatch"]


# --------------------------------------------------------- lists and paging


@pytest.mark.parametrize("prefix", ["oai_datacite", "datacite", "oai_dc"])
def test_list_records_returns_every_record_of_the_prefix(endpoint, prefix):
    result = sweep(endpoint.base_url, metadataPrefix=prefix)
    assert [h.identifier for h in result.headers].count(result.headers[0].identifier) == 1
    assert result.identifiers == _ids(prefix)
    assert result.pages == math.ceil(len(_ids(prefix)) / 4)
    for header in result.headers:
        record = BY_ID[header.identifier]
        assert header.deleted == record.deleted
        assert header.has_metadata == (not record.deleted)
        assert header.datestamp == record.datestamp.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert header.set_specs == record.set_specs


def test_list_identifiers_returns_headers_only(endpoint):
    result = sweep(endpoint.base_url, "ListIdentifiers", metadataPrefix="oai_datacite")
    assert result.identifiers == _ids("oai_datacite")
    assert not any(header.has_metadata for header in result.headers)
    assert {h.identifier for h in result.headers if h.deleted} == {
        "oai:sample.oai-pipeline:relateditem1"
    }


def test_records_are_not_in_datestamp_order(endpoint):
    result = sweep(endpoint.base_url, metadataPrefix="oai_datacite")
    stamps = [header.datestamp for header in result.headers]
    assert stamps != sorted(stamps) and stamps != sorted(stamps, reverse=True)
    again = sweep(endpoint.base_url, metadataPrefix="oai_datacite")
    assert [h.identifier for h in again.headers] == [h.identifier for h in result.headers]


def test_resumption_token_attributes_and_empty_last_token(endpoint):
    result = sweep(endpoint.base_url, metadataPrefix="oai_datacite")
    size = str(len(_ids("oai_datacite")))
    assert [token.get("cursor") for token in result.tokens] == ["0", "4", "8"]
    assert all(token.get("completeListSize") == size for token in result.tokens)
    *issued, last = result.tokens
    for token in issued:
        assert token.text and len(token.text) > 40
        expires = datetime.strptime(token.get("expirationDate"), "%Y-%m-%dT%H:%M:%SZ")
        assert expires.replace(tzinfo=UTC) > datetime.now(UTC)
    assert last.text is None and last.get("expirationDate") is None


def test_last_page_without_token_element():
    with OAIEndpoint(last_page_token="absent") as endpoint:
        result = sweep(endpoint.base_url, metadataPrefix="oai_datacite")
    assert result.identifiers == _ids("oai_datacite")
    assert len(result.tokens) == result.pages - 1
    assert all(token.text for token in result.tokens)


def test_a_list_that_fits_one_page_has_no_token():
    with OAIEndpoint(page_size=100) as endpoint:
        result = sweep(endpoint.base_url, metadataPrefix="oai_datacite")
    assert result.pages == 1 and result.tokens == []
    assert result.identifiers == _ids("oai_datacite")


def test_reissuing_a_token_returns_the_same_page(endpoint):
    _, first = get(endpoint.base_url, verb="ListRecords", metadataPrefix="oai_dc")
    token = first.find(".//oai:resumptionToken", NS).text
    _, page = get(endpoint.base_url, verb="ListRecords", resumptionToken=token)
    _, again = get(endpoint.base_url, verb="ListRecords", resumptionToken=token)
    assert [h.identifier for h in headers_of(page)] == [h.identifier for h in headers_of(again)]
    assert page.find("oai:request", NS).attrib == {"verb": "ListRecords", "resumptionToken": token}


def test_bad_resumption_tokens(endpoint):
    _, first = get(endpoint.base_url, verb="ListRecords", metadataPrefix="oai_dc")
    token = first.find(".//oai:resumptionToken", NS).text
    for bad in ("XXX", token[:-1] + ("0" if token[-1] != "0" else "1"), "a.b", token + "x"):
        response, root = get(endpoint.base_url, verb="ListRecords", resumptionToken=bad)
        assert response.status_code == 422
        assert error_codes(root) == ["badResumptionToken"], bad
    _, root = get(endpoint.base_url, verb="ListIdentifiers", resumptionToken=token)
    assert error_codes(root) == ["badResumptionToken"]
    with OAIEndpoint() as other:
        _, root = get(other.base_url, verb="ListRecords", resumptionToken=token)
    assert error_codes(root) == ["badResumptionToken"]


def test_a_record_without_the_requested_format_is_omitted(endpoint):
    dc = sweep(endpoint.base_url, metadataPrefix="oai_dc").identifiers
    assert "oai:sample.oai-pipeline:video" not in dc
    assert "oai:zenodo.org:10357859" in dc


# ------------------------------------------------------------ from / until


def _window(base_url: str, **bounds: str) -> set[str]:
    return sweep(base_url, "ListIdentifiers", metadataPrefix="oai_datacite", **bounds).identifiers


def _expected(low: datetime | None, high: datetime | None) -> set[str]:
    return {
        record.identifier
        for record in records_for_prefix(SAMPLE, "oai_datacite")
        if (low is None or record.datestamp >= low) and (high is None or record.datestamp <= high)
    }


def _seconds(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_seconds_bounds_are_inclusive_to_the_second(endpoint):
    second = timedelta(seconds=1)
    for record in records_for_prefix(SAMPLE, "oai_datacite"):
        stamp = record.datestamp
        assert record.identifier in _window(
            endpoint.base_url, **{"from": _seconds(stamp), "until": _seconds(stamp)}
        )
        assert record.identifier not in _window(
            endpoint.base_url, **{"from": _seconds(stamp + second)}
        )
        assert record.identifier not in _window(endpoint.base_url, until=_seconds(stamp - second))


def test_midnight_records_fall_in_exactly_one_of_adjacent_windows(endpoint):
    midnight = datetime(2023, 10, 6, tzinfo=UTC)
    assert "oai:sample.oai-pipeline:fundingReference" in _expected(midnight, midnight)
    before = _window(
        endpoint.base_url,
        **{"from": "2023-10-05T00:00:00Z", "until": _seconds(midnight - timedelta(seconds=1))},
    )
    after = _window(
        endpoint.base_url,
        **{"from": _seconds(midnight), "until": "2023-10-06T23:59:59Z"},
    )
    assert "oai:sample.oai-pipeline:fundingReference" in after
    assert not before & after
    whole = _window(
        endpoint.base_url, **{"from": "2023-10-05T00:00:00Z", "until": "2023-10-06T23:59:59Z"}
    )
    assert (
        before | after
        == whole
        == _expected(midnight - timedelta(days=1), midnight + timedelta(days=1, seconds=-1))
    )


def test_day_form_bounds_on_a_seconds_repository_cover_whole_days(endpoint):
    day = datetime(2023, 10, 3, tzinfo=UTC)
    found = _window(endpoint.base_url, **{"from": "2023-10-03", "until": "2023-10-03"})
    assert found == _expected(day, day + timedelta(days=1, seconds=-1))
    assert {"oai:sample.oai-pipeline:affiliation", "oai:sample.oai-pipeline:complicated"} <= found
    assert _window(endpoint.base_url, **{"from": "2023-10-04"}) == _expected(
        day + timedelta(days=1), None
    )


@pytest.mark.parametrize("day", [f"2023-10-{n:02d}" for n in range(2, 14)])
def test_day_granularity_windows(day_endpoint, day):
    start = datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC)
    expected = _expected(start, start + timedelta(days=1, seconds=-1))
    if expected:
        assert _window(day_endpoint.base_url, **{"from": day, "until": day}) == expected
    else:
        _, root = get(
            day_endpoint.base_url,
            verb="ListIdentifiers",
            metadataPrefix="oai_datacite",
            **{"from": day, "until": day},
        )
        assert error_codes(root) == ["noRecordsMatch"]


def test_day_granularity_headers_and_rejection_of_seconds(day_endpoint):
    result = sweep(day_endpoint.base_url, "ListIdentifiers", metadataPrefix="oai_dc")
    assert all(len(header.datestamp) == 10 for header in result.headers)
    _, root = get(
        day_endpoint.base_url,
        verb="ListRecords",
        metadataPrefix="oai_dc",
        **{"from": "2023-10-12T00:00:00Z"},
    )
    assert error_codes(root) == ["badArgument"]


# ---------------------------------------------------------------------- sets


def test_sets_select_through_the_hierarchy(endpoint):
    examples = {i for i in _ids("oai_datacite") if i.startswith("oai:sample.oai-pipeline:")}
    for spec in ("datacite", "datacite:kernel-4"):
        assert (
            sweep(endpoint.base_url, metadataPrefix="oai_datacite", set=spec).identifiers
            == examples
        )
    software = sweep(endpoint.base_url, metadataPrefix="oai_datacite", set="software").identifiers
    assert software == {"oai:sample.oai-pipeline:affiliation", "oai:zenodo.org:10357859"}
    zenodo = sweep(
        endpoint.base_url, metadataPrefix="oai_dc", set="zenodo", until="2023-10-12T03:00:00Z"
    )
    assert zenodo.identifiers == {
        r.identifier
        for r in records_for_prefix(SAMPLE, "oai_dc")
        if r.datestamp <= datetime(2023, 10, 12, 3, tzinfo=UTC)
    }


def test_set_prefix_that_is_not_a_hierarchy_level_does_not_match(endpoint):
    _, root = get(
        endpoint.base_url, verb="ListIdentifiers", metadataPrefix="oai_datacite", set="data"
    )
    assert error_codes(root) == ["noRecordsMatch"]


# ---------------------------------------------------------- HTTP behaviour


def _raw(base_url: str, query: str, headers: dict[str, str]) -> http.client.HTTPResponse:
    url = urlsplit(base_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    connection.request("GET", f"{url.path}?{query}", headers=headers)
    response = connection.getresponse()
    response.body = response.read()
    connection.close()
    return response


def test_gzip_when_asked_for(endpoint):
    query = urlencode({"verb": "ListRecords", "metadataPrefix": "oai_dc"})
    zipped = _raw(endpoint.base_url, query, {"Accept-Encoding": "gzip, deflate"})
    assert zipped.getheader("Content-Encoding") == "gzip"
    assert int(zipped.getheader("Content-Length")) == len(zipped.body)
    plain = _raw(endpoint.base_url, query, {"Accept-Encoding": "identity"})
    assert plain.getheader("Content-Encoding") is None
    assert len(plain.body) > len(zipped.body)
    assert headers_of(etree.fromstring(gzip.decompress(zipped.body))) == headers_of(
        etree.fromstring(plain.body)
    )
    refused = _raw(endpoint.base_url, query, {"Accept-Encoding": "gzip;q=0"})
    assert refused.getheader("Content-Encoding") is None


def test_post_is_accepted(endpoint):
    response = httpx.post(
        endpoint.base_url, data={"verb": "ListIdentifiers", "metadataPrefix": "oai_dc"}
    )
    assert {h.identifier for h in headers_of(etree.fromstring(response.content))} <= _ids("oai_dc")
    assert len(headers_of(etree.fromstring(response.content))) == 4


def test_other_paths_are_not_found(endpoint):
    assert httpx.get(endpoint.base_url.replace("/oai", "/other")).status_code == 404


def test_requests_are_counted_and_recorded():
    with OAIEndpoint() as endpoint:
        get(endpoint.base_url, verb="Identify")
        get(endpoint.base_url, verb="ListSets")
        assert endpoint.request_count == 2
        assert endpoint.requests == [{"verb": "Identify"}, {"verb": "ListSets"}]


def test_sickle_harvests_the_endpoint(endpoint):
    """A hand-written harvester (sickle) sees exactly the records of the prefix."""
    harvested = {}
    for record in Sickle(endpoint.base_url).ListRecords(metadataPrefix="oai_datacite"):
        harvested[record.header.identifier] = record.header.deleted
    assert harvested == {
        r.identifier: r.deleted for r in records_for_prefix(SAMPLE, "oai_datacite")
    }


def test_stop_closes_the_port_and_open_connections():
    endpoint = OAIEndpoint()
    base_url = endpoint.start()
    with httpx.Client() as client:
        assert client.get(base_url, params={"verb": "Identify"}).status_code == 200
        endpoint.stop()
        with pytest.raises(httpx.TransportError):
            client.get(base_url, params={"verb": "Identify"})
    with pytest.raises(httpx.ConnectError):
        httpx.get(base_url, params={"verb": "Identify"})
    endpoint.stop()  # stopping twice is harmless
