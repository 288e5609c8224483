"""Each fault switch of the sample endpoint, and that faults change while it runs."""

from __future__ import annotations

import re
import time

import httpx
import pytest
from lxml import etree
from pydantic import ValidationError

from oai_pipeline.sample_endpoint import (
    Faults,
    OAIEndpoint,
    load_sample_records,
    records_for_prefix,
)
from oai_pipeline_tests.endpoint.oai_http import NS, error_codes, headers_of, sweep

IDENTIFY = {"verb": "Identify"}
DATACITE_IDS = {r.identifier for r in records_for_prefix(load_sample_records(), "oai_datacite")}


def _endpoint(**faults) -> OAIEndpoint:
    return OAIEndpoint(faults=Faults(**faults))


def test_faults_are_off_by_default():
    faults = Faults()
    assert not (faults.drop_connection_on or faults.not_xml_on or faults.html_error_on)
    assert not (faults.truncate_on or faults.illegal_characters or faults.ratelimit_headers)
    assert faults.unavailable_every == 0 and faults.expire_tokens_after_pages is None


def test_faults_reject_mistakes():
    with pytest.raises(ValidationError):
        Faults(unavailable_evry=3)
    with pytest.raises(ValidationError):
        Faults(unavailable_every=-1)
    with pytest.raises(ValidationError):
        Faults(expire_tokens_after_pages=0)


def test_unavailable_every_nth_request_with_retry_after():
    with _endpoint(unavailable_every=3, retry_after="7") as endpoint, httpx.Client() as client:
        statuses = [client.get(endpoint.base_url, params=IDENTIFY) for _ in range(7)]
    assert [r.status_code for r in statuses] == [200, 200, 503, 200, 200, 503, 200]
    assert statuses[2].headers["Retry-After"] == "7"
    assert "Retry-After" not in statuses[0].headers


def test_retry_after_can_be_an_http_date():
    date = "Wed, 21 Oct 2015 07:28:00 GMT"
    with _endpoint(unavailable_every=1, retry_after=date) as endpoint:
        response = httpx.get(endpoint.base_url, params=IDENTIFY)
    assert response.status_code == 503 and response.headers["Retry-After"] == date


def test_drop_connection_sends_no_response():
    with _endpoint(drop_connection_on={2}) as endpoint, httpx.Client() as client:
        assert client.get(endpoint.base_url, params=IDENTIFY).status_code == 200
        with pytest.raises(httpx.RemoteProtocolError):
            client.get(endpoint.base_url, params=IDENTIFY)
        assert client.get(endpoint.base_url, params=IDENTIFY).status_code == 200
        assert endpoint.request_count == 3


def test_not_xml_body_with_status_200():
    with _endpoint(not_xml_on={1}) as endpoint:
        response = httpx.get(
            endpoint.base_url, params={"verb": "ListRecords", "metadataPrefix": "oai_dc"}
        )
    assert response.status_code == 200
    with pytest.raises(etree.XMLSyntaxError):
        etree.fromstring(response.content)


def test_html_error_page_with_status_200():
    with _endpoint(html_error_on={1}) as endpoint:
        response = httpx.get(
            endpoint.base_url, params={"verb": "ListRecords", "metadataPrefix": "oai_dc"}
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert b"<html>" in response.content and b"OAI-PMH" not in response.content


def test_truncated_body_is_cut_at_60_percent():
    params = {"verb": "ListRecords", "metadataPrefix": "oai_datacite"}
    with _endpoint(truncate_on={2}) as endpoint, httpx.Client() as client:
        whole = client.get(endpoint.base_url, params=params)
        cut = client.get(endpoint.base_url, params=params)
    assert cut.status_code == 200
    assert len(cut.content) == len(whole.content) * 6 // 10
    assert whole.content.startswith(cut.content[:200])
    with pytest.raises(etree.XMLSyntaxError):
        etree.fromstring(cut.content)
    # What a lenient parser makes of it: fewer records and no token — a silent wrong end.
    lenient = etree.fromstring(cut.content, etree.XMLParser(recover=True))
    assert len(headers_of(lenient)) < len(headers_of(etree.fromstring(whole.content)))
    assert lenient.find(".//oai:resumptionToken", NS) is None


def test_truncation_also_applies_to_gzip_responses():
    with _endpoint(truncate_on={1}) as endpoint:
        response = httpx.get(
            endpoint.base_url,
            params={"verb": "ListRecords", "metadataPrefix": "oai_dc"},
            headers={"Accept-Encoding": "gzip"},
        )
    assert response.headers["Content-Encoding"] == "gzip"
    with pytest.raises(etree.XMLSyntaxError):
        etree.fromstring(response.content)  # httpx decoded the gzip; the XML inside is cut


def test_expired_tokens_answer_bad_resumption_token_once():
    with _endpoint(expire_tokens_after_pages=2) as endpoint, httpx.Client() as client:
        url = endpoint.base_url
        first = etree.fromstring(
            client.get(
                url, params={"verb": "ListRecords", "metadataPrefix": "oai_datacite"}
            ).content
        )
        token = first.find(".//oai:resumptionToken", NS).text
        second = etree.fromstring(
            client.get(url, params={"verb": "ListRecords", "resumptionToken": token}).content
        )
        token2 = second.find(".//oai:resumptionToken", NS).text
        response = client.get(url, params={"verb": "ListRecords", "resumptionToken": token2})
        assert response.status_code == 422
        assert error_codes(etree.fromstring(response.content)) == ["badResumptionToken"]
        # The token issued before the "restart" stays bad; a fresh sweep works to the end.
        again = client.get(url, params={"verb": "ListRecords", "resumptionToken": token})
        assert error_codes(etree.fromstring(again.content)) == ["badResumptionToken"]
    with endpoint:
        assert sweep(endpoint.base_url, metadataPrefix="oai_datacite").identifiers == DATACITE_IDS


def test_illegal_characters_are_injected_into_every_record():
    with _endpoint(illegal_characters=True) as endpoint:
        response = httpx.get(
            endpoint.base_url, params={"verb": "ListRecords", "metadataPrefix": "oai_datacite"}
        )
    body = response.content
    assert body.count(b"\x01&#1;&#xFFFE;&#xD800;") == 4
    with pytest.raises(etree.XMLSyntaxError):
        etree.fromstring(body)
    cleaned = re.sub(rb"\x01|&#1;|&#xFFFE;|&#xD800;", b"", body)
    headers = headers_of(etree.fromstring(cleaned))
    assert len(headers) == 4 and {h.identifier for h in headers} <= DATACITE_IDS
    titles = etree.fromstring(cleaned).iterfind(".//{http://datacite.org/schema/kernel-4}title")
    assert all(title.text and title.text.strip() for title in titles)


def test_illegal_characters_in_get_record_oai_dc():
    with _endpoint(illegal_characters=True) as endpoint:
        response = httpx.get(
            endpoint.base_url,
            params={
                "verb": "GetRecord",
                "identifier": "oai:zenodo.org:8435696",
                "metadataPrefix": "oai_dc",
            },
        )
    assert b"<dc:title>\x01&#1;&#xFFFE;&#xD800;PocketCoffea" in response.content


def test_ratelimit_headers_like_zenodo():
    with _endpoint(ratelimit_headers=True, ratelimit_limit=5) as endpoint, httpx.Client() as client:
        responses = [client.get(endpoint.base_url, params=IDENTIFY) for _ in range(7)]
    assert [r.headers["X-RateLimit-Remaining"] for r in responses] == [
        "4",
        "3",
        "2",
        "1",
        "0",
        "0",
        "0",
    ]
    assert all(r.status_code == 200 for r in responses)
    first = responses[0].headers
    assert first["X-RateLimit-Limit"] == "5"
    assert 0 <= int(first["Retry-After"]) <= 60
    assert time.time() <= int(first["X-RateLimit-Reset"]) <= time.time() + 61


def test_faults_can_be_switched_while_running():
    with OAIEndpoint() as endpoint, httpx.Client() as client:
        assert client.get(endpoint.base_url, params=IDENTIFY).status_code == 200
        endpoint.faults = Faults(unavailable_every=1)
        assert client.get(endpoint.base_url, params=IDENTIFY).status_code == 503
        endpoint.faults = Faults(html_error_on={endpoint.request_count + 1})
        assert (
            client.get(endpoint.base_url, params=IDENTIFY)
            .headers["content-type"]
            .startswith("text/html")
        )
        endpoint.faults = Faults()
        assert client.get(endpoint.base_url, params=IDENTIFY).status_code == 200


def test_a_harvest_through_503s_ends_with_every_record():
    """Retrying each 503 (here by hand) still yields exactly the records of the prefix."""
    with _endpoint(unavailable_every=2) as endpoint, httpx.Client() as client:
        params = {"verb": "ListRecords", "metadataPrefix": "oai_datacite"}
        seen, unavailable = set(), 0
        while True:
            response = client.get(endpoint.base_url, params=params)
            if response.status_code == 503:
                unavailable += 1
                continue
            root = etree.fromstring(response.content)
            seen |= {h.identifier for h in headers_of(root)}
            token = root.find(".//oai:resumptionToken", NS)
            if token is None or not token.text:
                break
            params = {"verb": "ListRecords", "resumptionToken": token.text}
    assert seen == DATACITE_IDS and unavailable >= 2


def test_slow_on_delays_only_the_named_requests():
    with _endpoint(slow_on={2: 0.3}) as endpoint, httpx.Client() as client:
        started = time.monotonic()
        client.get(endpoint.base_url, params=IDENTIFY)
        first = time.monotonic() - started
        client.get(endpoint.base_url, params=IDENTIFY)
        second = time.monotonic() - started - first
    assert second >= 0.3  # the second request waited; the first was answered at once
    assert first < second


def test_identify_can_declare_another_granularity_and_base_url():
    """The Identify of an install that declares seconds it refuses, behind a proxy."""
    declared = "https://repository.example.org/oai"
    faults = Faults(identify_granularity="seconds", identify_base_url=declared)
    in_seconds = {"verb": "ListRecords", "metadataPrefix": "oai_dc", "from": "2024-01-03T00:00:00Z"}
    with OAIEndpoint(granularity="day", faults=faults) as endpoint, httpx.Client() as client:
        identify = etree.fromstring(client.get(endpoint.base_url, params=IDENTIFY).content)
        refused = client.get(endpoint.base_url, params=in_seconds)
    assert identify.findtext(".//oai:granularity", namespaces=NS) == "YYYY-MM-DDThh:mm:ssZ"
    assert identify.findtext(".//oai:baseURL", namespaces=NS) == declared
    assert error_codes(etree.fromstring(refused.content)) == ["badArgument"]


def test_plain_labelled_gzip_sends_the_body_plain_with_the_gzip_label():
    with (
        _endpoint(plain_labelled_gzip=True) as endpoint,
        httpx.stream(
            "GET", endpoint.base_url, params=IDENTIFY, headers={"Accept-Encoding": "gzip"}
        ) as response,
    ):
        body = b"".join(response.iter_raw())
    assert response.headers["Content-Encoding"] == "gzip"
    assert etree.fromstring(body).findtext(".//oai:repositoryName", namespaces=NS)


def test_refuse_list_from_cursor_refuses_every_list_from_that_page_until_it_recovers():
    """HTTP 403 for the token of the page at the cursor, every time it is asked for (not a
    request number: each harvest fails at the same page); the first pages are served."""
    params = {"verb": "ListIdentifiers", "metadataPrefix": "oai_dc"}
    refusing = Faults(refuse_list_from_cursor=2)
    with OAIEndpoint(page_size=2, faults=refusing) as endpoint, httpx.Client() as client:
        first = client.get(endpoint.base_url, params=params)
        token = etree.fromstring(first.content).findtext(".//oai:resumptionToken", None, NS)
        again = {"verb": "ListIdentifiers", "resumptionToken": token}
        refused = [client.get(endpoint.base_url, params=again) for _ in range(2)]
        endpoint.faults = Faults()
        recovered = client.get(endpoint.base_url, params=again)
    assert first.status_code == 200 and len(headers_of(etree.fromstring(first.content))) == 2
    assert [r.status_code for r in refused] == [403, 403]
    assert recovered.status_code == 200 and headers_of(etree.fromstring(recovered.content))


def test_unlisted_identifiers_are_left_out_of_list_identifiers_only():
    """A stale identifier index: ListIdentifiers (and its completeListSize) leaves the record
    out, while ListRecords lists it and GetRecord serves it live."""
    hidden = sorted(DATACITE_IDS)[0]
    with _endpoint(unlisted_identifiers={hidden}) as endpoint:
        identifiers = sweep(endpoint.base_url, "ListIdentifiers", metadataPrefix="oai_datacite")
        records = sweep(endpoint.base_url, metadataPrefix="oai_datacite")
        response = httpx.get(
            endpoint.base_url,
            params={"verb": "GetRecord", "identifier": hidden, "metadataPrefix": "oai_datacite"},
        )
    assert identifiers.identifiers == DATACITE_IDS - {hidden}
    sizes = {int(token.get("completeListSize")) for token in identifiers.tokens}
    assert sizes == {len(DATACITE_IDS) - 1}
    assert records.identifiers == DATACITE_IDS
    [header] = headers_of(etree.fromstring(response.content))
    assert header.identifier == hidden and not header.deleted and header.has_metadata


def test_failing_verbs_answer_http_500_to_that_verb_only():
    record = sorted(DATACITE_IDS)[0]
    get_record = {"verb": "GetRecord", "identifier": record, "metadataPrefix": "oai_datacite"}
    with _endpoint(failing_verbs={"GetRecord"}) as endpoint, httpx.Client() as client:
        failed = client.get(endpoint.base_url, params=get_record)
        identify = client.get(endpoint.base_url, params=IDENTIFY)
    assert failed.status_code == 500 and identify.status_code == 200


def test_get_record_without_sets_leaves_set_specs_out_of_get_record_only():
    """GetRecord's header names no set; the lists' headers still name theirs."""
    with _endpoint(get_record_without_sets=True) as endpoint:
        identifiers = sweep(endpoint.base_url, "ListIdentifiers", metadataPrefix="oai_datacite")
        some = sorted(identifiers.identifiers)[0]
        listed = httpx.get(
            endpoint.base_url,
            params={"verb": "ListIdentifiers", "metadataPrefix": "oai_datacite"},
        )
        got = httpx.get(
            endpoint.base_url,
            params={"verb": "GetRecord", "identifier": some, "metadataPrefix": "oai_datacite"},
        )
    assert any(header.set_specs for header in headers_of(etree.fromstring(listed.content)))
    [header] = headers_of(etree.fromstring(got.content))
    assert header.identifier == some and header.has_metadata
    assert header.set_specs == []
