"""Which failures Dagster's retry policy retries: a passing fault, not a source's loop."""

from __future__ import annotations

import socket
from collections.abc import Callable

import httpx
import pytest

from oai_pipeline.defs.assets import _transient
from oai_pipeline.oai.client import OAIClient
from oai_pipeline.oai.errors import (
    HarvestProtocolError,
    LoopingSource,
    MalformedResponse,
    OversizedResponse,
    PersistentProtocolError,
)
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline_tests.oai.fake_source import (
    BASE_URL,
    FakeSource,
    Fault,
    html_page,
    make_records,
    not_xml,
    transform_body,
    truncated,
)
from oai_pipeline_tests.oai.fault_server import (
    SELF_SIGNED,
    FaultServer,
    moved,
    reset_mid_body,
    stall_mid_body,
)
from oai_pipeline_tests.oai.test_faults import Harvest
from oai_pipeline_tests.oai.test_server_quirks import _second_page_loops


def _failure(source: FakeSource, **options: object) -> HarvestProtocolError:
    with pytest.raises(HarvestProtocolError) as failed:
        Harvest(source, **{"max_retries": 1, **options}).run()
    return failed.value


def _failing_after_the_first_page(fault: Fault) -> HarvestProtocolError:
    """The failure of a harvest whose every request after the first meets ``fault``."""
    source = FakeSource(make_records(9), page_size=3)
    source.faults = {number: fault for number in range(2, 20)}
    return _failure(source)


def test_a_source_looping_short_of_its_list_size_is_not_retried() -> None:
    source = FakeSource(make_records(9), page_size=3)
    source.every = (1, _second_page_loops)
    error = _failure(source)
    assert isinstance(error, LoopingSource)
    assert "not looping" in str(error)
    assert not _transient(error)


def test_a_truncated_page_stays_transient() -> None:
    source = FakeSource(make_records(9), page_size=3)
    source.every = (1, truncated)
    error = _failure(source)
    assert not isinstance(error, LoopingSource)
    assert _transient(error)


def test_an_oversized_response_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """A page over the size bound is that size at every attempt: Dagster's three retries
    spread over minutes only delayed the failure that names max_response_mb."""
    monkeypatch.setattr("oai_pipeline.oai.client.MAX_DOCUMENT_BYTES", 200)
    error = _failure(FakeSource(make_records(4), page_size=4))
    assert isinstance(error, OversizedResponse)
    assert not _transient(error)


@pytest.mark.parametrize("element", [b"<request", b"<ListRecords"])
def test_a_value_over_the_parsers_limit_in_the_page_is_said_so_and_not_retried(
    element: bytes,
) -> None:
    """An attribute over libxml2's 10 MB bound outside any record is in every copy of the
    page: it failed with libxml2's "try XML_PARSE_HUGE" as a passing fault, which Dagster
    retried to the same failure; and sent again alike, it ends the client's tries too (they
    went on to the last, ~50 s with the defaults)."""
    source = FakeSource(make_records(4), page_size=4)
    huge = b' big="' + b"v" * 11_000_000 + b'"'
    source.every = (1, transform_body(lambda body: body.replace(element, element + huge, 1)))
    error = _failure(source, max_retries=4)
    assert len(source.requests) == 2
    assert isinstance(error, PersistentProtocolError)
    assert "larger than the parser's limit of 10 MB in the page" in str(error)
    assert "XML_PARSE_HUGE" not in str(error)
    assert not _transient(error)


def _well_formed_login_page(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    """A single sign-on proxy's answer in front of the endpoint, well-formed XHTML with 200."""
    page = (
        '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>Sign'
        "in</title></head><body><form action='/login'></form></body></html>"
    )
    return httpx.Response(200, text=page, headers={"content-type": "text/html"})


def _other_xml(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    page = "<?xml version='1.0'?><status><message>no such service</message></status>"
    return httpx.Response(200, text=page, headers={"content-type": "text/xml"})


def test_a_whole_answer_that_is_not_oai_pmh_the_same_at_every_try_is_not_retried() -> None:
    """After a first sound page, the source answers with one and the same XML document of
    another kind at every one of the client's tries: asked again by a retried step, it
    answers it again. Before, Dagster retried the step three times, each failing the same
    way."""
    error = _failing_after_the_first_page(_other_xml)
    assert isinstance(error, MalformedResponse)
    assert "the same at each of 2 tries" in str(error)
    assert not _transient(error)


@pytest.mark.parametrize("fault", [html_page, _well_formed_login_page], ids=["html", "xhtml"])
def test_a_web_page_the_same_at_every_try_stays_transient(fault: Fault) -> None:
    """A web page with status 200 from a source that has answered OAI-PMH is a proxy's
    maintenance page (README: retried, it goes away), byte for byte the same at each of the
    client's tries while the maintenance lasts. Taken for the source's answer, the run
    failed for good after a minute of it (no Dagster retry) on a source down for minutes."""
    error = _failing_after_the_first_page(fault)
    assert isinstance(error, MalformedResponse)
    assert _transient(error)


def test_a_truncated_page_is_malformed_and_transient() -> None:
    error = _failing_after_the_first_page(truncated)
    assert isinstance(error, MalformedResponse) and "not well-formed" in str(error)
    assert _transient(error)


def test_a_web_page_cut_short_at_another_place_each_try_stays_transient() -> None:
    """An HTML page cut by a dropped connection is not the source's answer: the next
    attempt may get the page itself."""
    cuts = iter(range(40, 80, 7))

    def cut_html(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        page = html_page(request, response).content
        return httpx.Response(
            200, content=page[: next(cuts)], headers={"content-type": "text/html"}
        )

    error = _failing_after_the_first_page(cut_html)
    assert isinstance(error, MalformedResponse)
    assert _transient(error)


def _identify_fails(url: str, **options: object) -> HarvestProtocolError:
    """The error of an Identify of ``url`` over loopback, with no real waits between tries."""
    options = {"max_retries": 1, "backoff_base": 0.01, "timeout": 0.5, **options}
    with (
        OAIClient(url, sleep=lambda seconds: None, **options) as client,
        pytest.raises(HarvestProtocolError) as failed,
    ):
        client.identify()
    return failed.value


def _through_a_fault_server(fault: Callable[..., bool] | None, **server: bool):
    def failure() -> HarvestProtocolError:
        with FaultServer(FakeSource(make_records(3)), **server) as running:
            running.every = fault
            return _identify_fails(running.base_url)

    return failure


def _https_to_plain_http() -> HarvestProtocolError:
    with OAIEndpoint() as endpoint:  # a real HTTP server: it answers the TLS hello in http
        return _identify_fails(endpoint.base_url.replace("http://", "https://"), timeout=5)


def _certificate_for_another_host(monkeypatch: pytest.MonkeyPatch) -> HarvestProtocolError:
    monkeypatch.setenv("SSL_CERT_FILE", str(SELF_SIGNED / "cert.pem"))
    with FaultServer(FakeSource(make_records(3)), self_signed_tls=True) as running:
        return _identify_fails(running.base_url.replace("127.0.0.1", "localhost"))


def _expired_certificate(monkeypatch: pytest.MonkeyPatch) -> HarvestProtocolError:
    monkeypatch.setenv("SSL_CERT_FILE", str(SELF_SIGNED / "expired_cert.pem"))
    return _through_a_fault_server(None, self_signed_tls=True, expired=True)()


@pytest.mark.parametrize(
    "failure",
    [
        lambda monkeypatch: _through_a_fault_server(None, self_signed_tls=True)(),
        _expired_certificate,
        _certificate_for_another_host,
        lambda monkeypatch: _https_to_plain_http(),
        lambda monkeypatch: _through_a_fault_server(
            moved(302, lambda server, query: f"/oai?{query}")
        )(),
        lambda monkeypatch: _through_a_fault_server(
            moved(302, lambda server, query: f"ftp://127.0.0.1/oai?{query}")
        )(),
    ],
    ids=["untrusted", "expired", "another-host", "plain-http", "redirect-loop", "ftp-redirect"],
)
def test_a_connection_refused_the_same_at_every_attempt_is_not_retried(
    failure, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A certificate not trusted, expired or for another host, https to a port speaking
    http, a redirect loop or one to a scheme httpx refuses: the next attempt meets them
    again. Before, each cost Dagster's three retries, 30 s and more apart."""
    assert not _transient(failure(monkeypatch))


def _refused_connection() -> HarvestProtocolError:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # closed when the request comes: refused
    return _identify_fails(f"http://127.0.0.1:{port}/oai")


def _resolver_down(monkeypatch: pytest.MonkeyPatch) -> HarvestProtocolError:
    def temporary_failure(*args: object, **kwargs: object) -> object:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", temporary_failure)
    return _identify_fails("http://zenodo.org/oai2d")


@pytest.mark.parametrize(
    "failure",
    [
        _resolver_down,
        lambda monkeypatch: _refused_connection(),
        lambda monkeypatch: _through_a_fault_server(reset_mid_body)(),
        lambda monkeypatch: _through_a_fault_server(stall_mid_body)(),
    ],
    ids=["dns", "refused", "reset", "timeout"],
)
def test_a_passing_network_fault_stays_transient(failure, monkeypatch) -> None:
    """What the next attempt may not meet: a resolver down, a source restarting, a dropped
    connection, a stalled answer."""
    error = failure(monkeypatch)
    assert "gave up after 2 attempts" in str(error)
    assert _transient(error)


# ---- a base URL that has never answered OAI-PMH: almost always a typo -----------------------


def _no_such_name_for(monkeypatch: pytest.MonkeyPatch, suffix: str = ".invalid") -> None:
    """Host names ending with ``suffix`` do not exist (EAI_NONAME); others resolve as ever."""
    resolve = socket.getaddrinfo

    def getaddrinfo(host: object, *args: object, **kwargs: object) -> object:
        if isinstance(host, str) and host.endswith(suffix):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return resolve(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def _assert_never_answered(error: HarvestProtocolError, base_url: str) -> None:
    """Not retried, one line naming the base URL and why (never answered OAI-PMH)."""
    message = str(error)
    assert isinstance(error, PersistentProtocolError)
    assert not _transient(error)
    assert message.startswith(base_url) and "\n" not in message
    assert "this base URL has never answered OAI-PMH" in message


def test_an_unknown_host_of_a_base_url_that_never_answered_is_not_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host name that does not exist, before the base URL ever answered OAI-PMH, is a
    typo in it: before, each of Dagster's three retries (30 s, 60 s, 120 s) met it again."""
    _no_such_name_for(monkeypatch)
    error = _identify_fails("http://zenodo.invalid/oai2d", endpoint_proven=False)
    _assert_never_answered(error, "http://zenodo.invalid/oai2d (Identify): no host is named")


def test_an_unknown_host_after_the_base_url_answered_stays_transient(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once the base URL has answered OAI-PMH (in this client, or a saved Identify), a name
    that no longer resolves is a DNS blip: Dagster retries it as before."""
    _no_such_name_for(monkeypatch)
    with FaultServer(FakeSource(make_records(3))) as running:
        port = running.port
        running.faults[2] = moved(
            302, lambda server, query: f"http://oai.invalid:{port}/oai?{query}"
        )
        with OAIClient(running.base_url, max_retries=1, endpoint_proven=False) as client:
            client.identify()
            with pytest.raises(HarvestProtocolError) as failed:
                client.identify()
    assert "no host is named 'oai.invalid'" in str(failed.value)
    assert _transient(failed.value)
    assert _transient(_identify_fails("http://zenodo.invalid/oai2d", endpoint_proven=True))


def _json_answer(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    """What a REST API or a web framework's route answers at a path that is no endpoint."""
    return httpx.Response(200, json={"hits": [], "links": {"self": str(request.url)}})


NO_ENDPOINT_ANSWERS = [
    pytest.param(html_page, "not an OAI-PMH response (root element 'html')", id="web-page"),
    pytest.param(_json_answer, """not XML at all (its body: '{"hits":[],""", id="json"),
    pytest.param(not_xml, "not XML at all (its body: 'Internal error: database", id="text"),
]


@pytest.mark.parametrize(("answer", "said"), NO_ENDPOINT_ANSWERS)
def test_a_web_answer_at_a_base_url_that_never_answered_is_not_retried(
    answer: Fault, said: str
) -> None:
    """A web page, JSON or plain text with status 200 before the base URL ever answered
    OAI-PMH is a home page, a REST API or a login page at a wrong URL: the client told a web
    page at once, but as a transient error, so Dagster retried the step three times, each
    failing the same way. JSON and text were retried by the client too (7 tries, ~50 s),
    then by Dagster, and read "not well-formed XML: Start tag expected, '<' not found"."""
    source = FakeSource(make_records(9), page_size=3)
    source.every = (1, answer)
    error = _failure(source, endpoint_proven=False)
    _assert_never_answered(error, f"{BASE_URL} (ListRecords): {said}")
    assert "check that the harvester's base URL is the source's OAI-PMH endpoint" in str(error)
    assert len(source.requests) == 1


@pytest.mark.parametrize(("answer", "said"), NO_ENDPOINT_ANSWERS)
def test_a_web_answer_after_the_base_urls_first_answer_stays_transient(
    answer: Fault, said: str
) -> None:
    """The first page proved the base URL: a web page or text after it is a maintenance
    notice in the page's place."""
    source = FakeSource(make_records(9), page_size=3)
    source.faults = {number: answer for number in range(2, 20)}
    error = _failure(source, endpoint_proven=False)
    assert isinstance(error, MalformedResponse)
    assert _transient(error)
    assert said in str(error)
    assert len(source.requests) == 3  # the first page, then the second's two tries


@pytest.mark.parametrize("code", [401, 403, 404])
def test_access_refused_or_not_found_at_a_base_url_that_never_answered_is_not_retried(
    code: int,
) -> None:
    """HTTP 401/403 (a firewall, a login) or 404 (a wrong path) before the base URL ever
    answered OAI-PMH: each retry meets it again. Before, Dagster retried the step three
    times, some five minutes, before the same failure."""
    source = FakeSource(make_records(9), page_size=3)
    source.every = (1, lambda request, response: httpx.Response(code, text="Nope"))
    error = _failure(source, endpoint_proven=False)
    _assert_never_answered(error, f"{BASE_URL} (ListRecords): HTTP {code} ")
    assert len(source.requests) == 1


def test_access_refused_after_the_base_urls_first_answer_stays_transient() -> None:
    """A firewall or rate limiter refusing a burst of requests mid-list: the run's retries,
    minutes apart, may outlast it."""
    source = FakeSource(make_records(9), page_size=3)
    source.faults = {number: (lambda q, r: httpx.Response(403, text="Nope")) for number in (2, 3)}
    error = _failure(source, endpoint_proven=False)
    assert _transient(error)
    assert "after answering this run's earlier requests" in str(error)
