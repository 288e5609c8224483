"""Faults below OAI-PMH, over real loopback HTTP: broken connections and bodies, redirects."""

from __future__ import annotations

import gzip
import os
import socket
import ssl
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from oai_pipeline.errors import ConfigurationError
from oai_pipeline.oai.client import OAIClient
from oai_pipeline.oai.errors import (
    HarvestProtocolError,
    OversizedResponse,
    PersistentProtocolError,
)
from oai_pipeline.oai.tls import _tls_context
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline_tests.oai.fake_source import BASE_URL, FakeSource, make_records
from oai_pipeline_tests.oai.fault_server import (
    SELF_SIGNED,
    FaultServer,
    close_after_headers,
    labelled,
    moved,
    reset_mid_body,
    short_of_content_length,
    stall_mid_body,
    trickle,
    truncated_chunked,
    truncated_gzip,
)


def harvest(server: FaultServer, **options: object) -> tuple[set[str], list[float]]:
    sleeps: list[float] = []
    options = {"max_retries": 2, "backoff_base": 0.01, "timeout": 0.5, **options}
    with OAIClient(server.base_url, sleep=sleeps.append, **options) as client:
        got = {
            record.identifier
            for page in client.sweep("ListRecords", metadata_prefix="oai_dc")
            for record in page.records
        }
    return got, sleeps


def held(source: FakeSource) -> set[str]:
    return {record.identifier for record in source.records}


@pytest.mark.parametrize(
    "fault",
    [
        reset_mid_body,
        close_after_headers,
        short_of_content_length,
        truncated_chunked,
        truncated_gzip,
        stall_mid_body,
    ],
)
def test_a_broken_response_is_retried_and_the_harvest_completes(fault) -> None:
    source = FakeSource(make_records(10), page_size=3)
    with FaultServer(source) as server:
        server.faults[2] = fault
        got, sleeps = harvest(server)
    assert got == held(source)
    assert len(server.targets) == 5 and len(sleeps) == 1  # page two asked twice


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize(
    "location",
    [
        lambda server, query: f"/new/oai?{query}",
        lambda server, query: f"new/oai?{query}",
        lambda server, query: f"http://localhost:{server.port}/new/oai?{query}",
    ],
    ids=["absolute-path", "relative", "other-host"],
)
def test_redirects_are_followed(status: int, location) -> None:
    source = FakeSource(make_records(7), page_size=3)
    with FaultServer(source) as server:
        server.every = moved(status, location)
        got, sleeps = harvest(server)
    assert got == held(source) and sleeps == []


def test_a_redirect_loop_fails_at_once() -> None:
    source = FakeSource(make_records(3))
    with FaultServer(source) as server:
        server.every = moved(302, lambda server, query: f"/oai?{query}")
        with pytest.raises(PersistentProtocolError) as caught:
            harvest(server)
    assert len(server.targets) == 21  # httpx's limit of 20 redirects, not retried
    message = str(caught.value)
    assert message.startswith(f"{server.base_url} (ListRecords): the source's redirects go ")
    assert "Exceeded maximum allowed redirects" in message
    assert message.endswith("check the harvester's base URL in a browser")


def test_a_redirect_that_drops_the_query_names_where_it_leads() -> None:
    """A common web-server rule (``return 301 https://$host$uri``) forgets the query: the
    source then answered badVerb to a request we never sent, and the error said only that."""
    source = FakeSource(make_records(3))
    with FaultServer(source) as server:
        server.every = moved(301, lambda server, query: "/new/oai")
        with pytest.raises(ConfigurationError) as caught:
            harvest(server)
    message = str(caught.value)
    assert f"redirects (HTTP 301) to {server.origin}/new/oai, dropping the OAI-PMH" in message
    assert message.endswith(f"set the harvester's base URL to {server.origin}/new/oai")
    assert len(server.targets) == 2  # not retried


def test_a_redirect_to_a_scheme_not_http_fails_at_once() -> None:
    source = FakeSource(make_records(3))
    with FaultServer(source) as server:
        server.every = moved(302, lambda server, query: f"ftp://127.0.0.1/oai?{query}")
        with pytest.raises(PersistentProtocolError, match="unsupported protocol 'ftp://'"):
            harvest(server)
    assert len(server.targets) == 1  # before: retried with backoff like a network failure


def refused_at_once(url: str, **options: object) -> str:
    """The message of the PersistentProtocolError an Identify of ``url`` fails with, at
    its first try (no retry with backoff)."""
    sleeps: list[float] = []
    with (
        OAIClient(url, sleep=sleeps.append, max_retries=3, **options) as client,
        pytest.raises(PersistentProtocolError) as caught,
    ):
        client.identify()
    assert sleeps == []
    return str(caught.value)


def test_an_untrusted_certificate_fails_at_once_saying_so() -> None:
    """Before, a self-signed or incompletely chained certificate was retried with backoff
    like a network hiccup (a minute of waiting per attempt by default) and then reported
    as one more ConnectError."""
    source = FakeSource(make_records(3))
    with FaultServer(source, self_signed_tls=True) as server:
        message = refused_at_once(server.base_url)
    assert message.startswith(
        f"{server.base_url} (Identify): the source's TLS certificate is not trusted: "
    )
    assert "self-signed certificate" in message and "CERTIFICATE_VERIFY_FAILED" in message
    assert message.endswith("set SSL_CERT_FILE to a CA bundle that trusts it, or fix the base URL)")


def test_the_tls_context_is_shared_until_the_trusted_bundle_changes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Made once per process (loading the CA bundle took 25-65 ms per client), the context
    still follows SSL_CERT_FILE: set to another bundle, or the bundle rewritten, the next
    client trusts what it now says."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    made: list[ssl.SSLContext] = []
    create = httpx.create_ssl_context
    monkeypatch.setattr(httpx, "create_ssl_context", lambda: made.append(create()) or made[-1])
    _tls_context.cache_clear()
    for _ in range(3):
        OAIClient("https://oai.example.org/oai").close()
    assert len(made) == 1
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes((SELF_SIGNED / "expired_cert.pem").read_bytes())
    with FaultServer(FakeSource(make_records(3)), self_signed_tls=True) as server:
        assert "is not trusted" in refused_at_once(server.base_url)  # certifi's bundle
        monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
        assert "is not trusted" in refused_at_once(server.base_url)  # another certificate
        bundle.write_bytes((SELF_SIGNED / "cert.pem").read_bytes())
        changed = bundle.stat().st_mtime_ns + 1_000_000_000  # however coarse the clock
        os.utime(bundle, ns=(changed, changed))
        with OAIClient(server.base_url, sleep=lambda _s: None) as client:
            assert client.identify().repository_name


def test_an_expired_certificate_fails_at_once_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trusted, but expired: before, the same "not trusted ... SSL_CERT_FILE" advice as for
    a self-signed one (which cannot help), and Dagster retried the step three times."""
    monkeypatch.setenv("SSL_CERT_FILE", str(SELF_SIGNED / "expired_cert.pem"))
    with FaultServer(FakeSource(make_records(3)), self_signed_tls=True, expired=True) as server:
        message = refused_at_once(server.base_url)
    assert message.startswith(
        f"{server.base_url} (Identify): the source's TLS certificate has expired ("
    )
    assert "SSL_CERT_FILE" not in message
    assert message.endswith("ask the source's operator to renew it")


def test_a_certificate_for_another_host_fails_at_once_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A certificate for 127.0.0.1, asked for by the name localhost: the base URL names
    another host than the certificate."""
    monkeypatch.setenv("SSL_CERT_FILE", str(SELF_SIGNED / "cert.pem"))
    with FaultServer(FakeSource(make_records(3)), self_signed_tls=True) as server:
        url = server.base_url.replace("127.0.0.1", "localhost")
        message = refused_at_once(url)
    assert message.startswith(
        f"{url} (Identify): the source's TLS certificate is not for host 'localhost' ("
    )
    assert message.endswith(
        "set the harvester's base URL to a host name the certificate names, or ask the "
        "source's operator to fix it"
    )


def test_https_to_a_source_serving_plain_http_fails_at_once_saying_so() -> None:
    """Before, `https://` registered for a source that serves http there (a user's usual
    slip) was retried with backoff like a network hiccup (~47 s by default), and reported
    as `ConnectError: [SSL: WRONG_VERSION_NUMBER]`, with no word of http."""
    with OAIEndpoint() as endpoint:  # a real HTTP server: it answers the TLS hello in http
        https_url = endpoint.base_url.replace("http://", "https://")
        message = refused_at_once(https_url, timeout=5)
    assert message.startswith(f"{https_url} (Identify): the source does not speak https there")
    assert message.endswith(f"set the harvester's base URL to {endpoint.base_url})")


def test_a_host_name_that_does_not_exist_fails_at_once_saying_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before, a typo in the base URL's host (the resolver answers: no such name) was retried
    with backoff like a network hiccup, ~40 s by default, before the same error."""

    def no_such_name(*args: object, **kwargs: object) -> object:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_name)
    sleeps: list[float] = []
    with (
        OAIClient("http://zenodo.orgg/oai2d", sleep=sleeps.append, max_retries=3) as client,
        pytest.raises(HarvestProtocolError) as caught,
    ):
        client.identify()
    message = str(caught.value)
    assert message.startswith("http://zenodo.orgg/oai2d (Identify): no host is named 'zenodo.orgg'")
    assert message.endswith("check the harvester's base URL") and sleeps == []


def test_a_resolver_failing_for_now_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """EAI_AGAIN (no answer from the resolver) may pass: backed off as before."""

    def resolver_down(*args: object, **kwargs: object) -> object:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", resolver_down)
    sleeps: list[float] = []
    with (
        OAIClient("http://zenodo.org/oai2d", sleep=sleeps.append, max_retries=2) as client,
        pytest.raises(HarvestProtocolError, match="gave up after 3 attempts"),
    ):
        client.identify()
    assert len(sleeps) == 2


def test_ssl_cert_file_trusts_a_source_with_its_own_certificate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the error above advises works."""
    monkeypatch.setenv("SSL_CERT_FILE", str(SELF_SIGNED / "cert.pem"))
    source = FakeSource(make_records(4))
    with FaultServer(source, self_signed_tls=True) as server:
        got, _ = harvest(server)
    assert got == held(source)


def test_closing_a_sweep_stops_reading_the_page_fetched_ahead() -> None:
    """A capped run (or an interrupted one) closes its sweep while the next page is coming
    in: before, closing waited until that page was read whole (up to 5 timeouts)."""
    source = FakeSource(make_records(10), page_size=3)
    with FaultServer(source) as server, OAIClient(server.base_url, timeout=2) as client:
        server.faults[2] = trickle(seconds=6)
        sweep = client.sweep("ListRecords", metadata_prefix="oai_dc")
        next(sweep)
        time.sleep(0.3)  # the page ahead is on its way
        started = time.monotonic()
        sweep.close()
        assert time.monotonic() - started < 2  # before: the rest of the 6 s


def _moved_notice(base_url: str, status: int, moved_to: str, harvester: str = "ID") -> str:
    """The one notice of a base URL whose requests are redirected to ``moved_to``."""
    update = f"(`oai-pipeline harvesters update {harvester} --base-url {moved_to}`)"
    if status in (301, 308):
        return (
            f"{base_url} has moved permanently (HTTP {status}) to {moved_to}: each request "
            "goes there by a redirect (two requests for one); set the harvester's base URL to "
            f"it {update}"
        )
    return (
        f"{base_url} redirects requests (HTTP {status}) to {moved_to}: each goes there by a "
        "redirect (two requests for one); if the source lives there now, set the harvester's "
        f"base URL to it {update}"
    )


@pytest.mark.parametrize("status", [301, 308, 302, 303, 307])
def test_a_redirect_of_every_request_is_reported_once(
    status: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, every request of every run went through a redirect unnoticed; then only a
    permanent one was noted, though a moved endpoint answers 302 as often (every request
    still costing two)."""
    source = FakeSource(make_records(7), page_size=3)
    with FaultServer(source) as server:
        server.every = moved(status, lambda server, query: f"/new/oai?{query}")
        harvest(server)
    expected = _moved_notice(server.base_url, status, f"{server.origin}/new/oai")
    messages = [record.getMessage() for record in caplog.records]
    assert [m for m in messages if server.base_url in m and "redirect" in m] == [expected]


def test_a_redirect_is_a_notice_of_the_harvest_naming_its_harvester() -> None:
    """Before, only the log said so, where the operator of a scheduled harvest looks last;
    then its command said `ID`, which the operator had to fill in."""
    source = FakeSource(make_records(7), page_size=3)
    with (
        FaultServer(source) as server,
        OAIClient(server.base_url, harvester_id="zenodo", sleep=lambda _s: None) as client,
    ):
        server.every = moved(302, lambda server, query: f"/new/oai?{query}")
        for _page in client.sweep("ListRecords", metadata_prefix="oai_dc"):
            pass
    assert len(server.targets) == 2 * 3  # each page asked twice: the redirect, then there
    moved_to = f"{server.origin}/new/oai"
    assert client.notices == [_moved_notice(server.base_url, 302, moved_to, "zenodo")]


@pytest.mark.parametrize(
    ("userinfo", "hint"),
    [("alice:s3cret", ", the password in place of ***"), ("alice:${OAI_TEST_PW}", "")],
    ids=["password", "environment"],
)
def test_a_redirect_of_a_source_behind_basic_auth_names_the_url_with_its_user(
    userinfo: str, hint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The URL to set keeps the harvester's user and password (the password as `***`, or
    the `${NAME}` it is read from): set as the notice named it before, without them, the
    harvest of the new URL went without its credentials."""
    monkeypatch.setenv("OAI_TEST_PW", "s3cret")
    source = FakeSource(make_records(4), page_size=3)
    with FaultServer(source) as server:
        base_url = server.base_url.replace("http://", f"http://{userinfo}@")
        with OAIClient(base_url, harvester_id="priv", sleep=lambda _s: None) as client:
            server.every = moved(302, lambda server, query: f"/new/oai?{query}")
            for _page in client.sweep("ListRecords", metadata_prefix="oai_dc"):
                pass
    shown = userinfo.replace("s3cret", "***")
    moved_to = f"{server.origin.replace('http://', f'http://{shown}@')}/new/oai"
    (notice,) = client.notices
    assert notice == (
        f"{server.base_url} redirects requests (HTTP 302) to {moved_to}: each goes there by a "
        "redirect (two requests for one); if the source lives there now, set the harvester's "
        f"base URL to it (`oai-pipeline harvesters update priv --base-url {moved_to}`{hint})"
    )
    assert "s3cret" not in notice


def test_redirects_to_several_places_are_noted_once_per_client() -> None:
    """A load balancer sending each request to another node: one notice, not one a node."""
    source = FakeSource(make_records(7), page_size=3)
    nodes = iter(["a", "b", "c", "d"])
    with FaultServer(source) as server, OAIClient(server.base_url, sleep=lambda _s: None) as client:
        server.every = moved(301, lambda server, query: f"/{next(nodes)}/oai?{query}")
        for _page in client.sweep("ListRecords", metadata_prefix="oai_dc"):
            pass
    assert client.notices == [_moved_notice(server.base_url, 301, f"{server.origin}/a/oai")]


def test_a_redirect_to_the_base_url_with_a_trailing_slash_is_noted() -> None:
    """`/oai` to `/oai/` costs two requests for one like any move."""
    source = FakeSource(make_records(7), page_size=3)

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/oai":
            moved = request.url.copy_with(path="/oai/")
            return httpx.Response(302, headers={"location": str(moved)})
        return source.handle(request)

    client = _swept_seven(handle)
    assert client.notices == [_moved_notice(BASE_URL, 302, f"{BASE_URL}/")]


def _swept_seven(handle: Callable[[httpx.Request], httpx.Response]) -> OAIClient:
    """The client that swept `handle`'s list of 7 records (all of them came)."""
    with OAIClient(
        BASE_URL, transport=httpx.MockTransport(handle), sleep=lambda _s: None
    ) as client:
        pages = list(client.sweep("ListRecords", metadata_prefix="oai_dc"))
    assert sum(len(page.records) for page in pages) == 7
    return client


def test_a_bounce_back_to_the_base_url_is_not_noted() -> None:
    """A cookie check that sends the first request through another page and back to the
    very URL asked: no other base URL to set."""
    source = FakeSource(make_records(7), page_size=3)

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/check":
            back = {"location": request.url.params["then"], "set-cookie": "checked=1; Path=/"}
            return httpx.Response(302, headers=back)
        if "checked=1" not in request.headers.get("cookie", ""):
            check = httpx.URL("http://fake.test/check", params={"then": str(request.url)})
            return httpx.Response(302, headers={"location": str(check)})
        return source.handle(request)

    client = _swept_seven(handle)
    assert [r.url.path for r in source.requests] == ["/oai"] * 3  # bounced once, at first
    assert client.notices == []


def test_a_plain_body_labelled_gzip_is_read_as_it_is() -> None:
    """A proxy that labels plain XML `Content-Encoding: gzip`. Before, httpx failed every
    page with DecodingError, each was retried in vain and the harvest failed."""
    source = FakeSource(make_records(7), page_size=3)
    with FaultServer(source) as server:
        server.every = labelled("gzip")
        got, sleeps = harvest(server)
    assert got == held(source) and sleeps == []


def _members(count: int, padding: bytes = b"") -> Callable[[bytes], bytes]:
    """The body cut in ``count`` pieces, each gzipped on its own and the members sent one
    after the other (what `cat a.gz b.gz` makes, and proxies that compress as the body
    streams through), ``padding`` after each."""

    def pack(body: bytes) -> bytes:
        step = -(-len(body) // count)
        pieces = [body[start : start + step] for start in range(0, len(body), step)]
        return b"".join(gzip.compress(piece) + padding for piece in pieces)

    return pack


@pytest.mark.parametrize(
    ("coding", "pack"),
    [
        ("gzip", _members(2)),
        ("gzip", _members(5)),
        ("x-gzip", _members(3)),
        ("gzip", _members(3, padding=b"\0" * 7)),  # zero padding, which gzip(1) skips
        ("gzip", lambda body: gzip.compress(_members(2)(body))),  # members inside gzip
    ],
    ids=["two-members", "five-members", "x-gzip", "zero-padded", "gzipped-again"],
)
def test_a_gzip_body_of_several_members_is_read_whole(coding: str, pack) -> None:
    """Before, only the first member was inflated: every page was cut short (not
    well-formed), retried in vain, and the harvest failed."""
    source = FakeSource(make_records(7), page_size=3)
    with FaultServer(source) as server:
        server.every = labelled(coding, pack)
        got, sleeps = harvest(server)
    assert got == held(source) and sleeps == []


def test_a_gzip_member_cut_short_after_a_whole_one_is_retried() -> None:
    """A second member cut short is a truncated body, never the first member alone."""
    source = FakeSource(make_records(7), page_size=3)
    with FaultServer(source) as server:
        server.faults[2] = labelled("gzip", lambda body: _members(2)(body)[:-30])
        got, sleeps = harvest(server)
    assert got == held(source) and len(sleeps) == 1


def test_a_gzip_body_of_several_members_is_bounded_as_a_whole() -> None:
    """Each member is below the bound, together they are not: the bound holds for all of
    what the body unpacks to, not for each member."""
    source = FakeSource(make_records(30), page_size=30)
    with FaultServer(source) as server:
        body = server.response("/oai?verb=ListRecords&metadataPrefix=oai_dc").content
        members = 8
        assert len(body) // members < 4096 < len(body)
        server.every = labelled("gzip", _members(members))
        with pytest.raises(OversizedResponse, match="4096 bytes once unpacked"):
            harvest(server, max_response_bytes=4096)
    assert len(server.targets) == 1  # the same every time: not retried


@pytest.mark.parametrize(
    ("pack", "when"),
    [(lambda body: body, "larger than 4096 bytes;"), (gzip.compress, "4096 bytes once unpacked")],
    ids=["plain-labelled-gzip", "gzip"],
)
def test_a_body_labelled_gzip_is_bounded_like_any_other(pack, when: str) -> None:
    """The bound holds for the bytes as they come and for what they unpack to."""
    source = FakeSource(make_records(30), page_size=30)
    with FaultServer(source) as server:
        server.every = labelled("gzip", pack)
        with pytest.raises(OversizedResponse, match=when):
            harvest(server, max_response_bytes=4096)
    assert len(server.targets) == 1  # the same every time: not retried


class _InChunks(httpx.SyncByteStream):
    """A body as a network transport hands it over: 64 KiB at a time, not read yet."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __iter__(self) -> Iterator[bytes]:
        for start in range(0, len(self.data), 65536):
            yield self.data[start : start + 65536]


@pytest.mark.parametrize("coding", [None, "gzip", "deflate"])
def test_a_large_response_is_held_once_while_it_is_received(coding: str | None) -> None:
    """The body was gathered in chunks joined at the end, and a compressed one inflated in
    one call (zlib joins its output blocks): either way a large page was held twice at once."""
    body = b"<x>" + b"".join(b"<r>%d</r>" % n for n in range(1_500_000)) + b"</x>"
    sent = {None: body, "gzip": gzip.compress(body), "deflate": zlib.compress(body)}[coding]
    headers = {"content-type": "text/xml"} | ({"content-encoding": coding} if coding else {})
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, stream=_InChunks(sent), headers=headers)
    )
    with OAIClient("https://oai.fake.test/oai", transport=transport) as client:
        tracemalloc.start()
        try:
            _, _, received = client._send({"verb": "ListRecords"})
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert received == body
    assert peak < 1.5 * len(body)


def _moving_to(scheme: str, source: FakeSource, status: int = 301) -> httpx.MockTransport:
    """The source at ``scheme`` only: a request by the other scheme is redirected there."""

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.scheme != scheme:
            moved = request.url.copy_with(scheme=scheme)
            return httpx.Response(status, headers={"location": str(moved)})
        return source.handle(request)

    return httpx.MockTransport(handle)


def _identify_refused(
    base_url: str, transport: httpx.MockTransport, error_type: type[Exception]
) -> tuple[str, OAIClient]:
    """Identify at base_url through transport, which must fail with error_type: its text."""
    with (
        OAIClient(base_url, transport=transport, sleep=lambda _s: None) as client,
        pytest.raises(error_type) as caught,
    ):
        client.identify()
    return str(caught.value), client


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_from_https_to_plain_http_is_refused_naming_both(status: int) -> None:
    """Before, it was followed silently (the harvest went on unencrypted), and a permanent
    one was noted with the advice to set the base URL to the http:// address."""
    source = FakeSource(make_records(3))
    transport = _moving_to("http", source, status)
    error, client = _identify_refused("https://fake.test/oai", transport, ConfigurationError)
    assert error == (
        f"https://fake.test/oai redirects (HTTP {status}) from https to plain http, "
        "http://fake.test/oai: not followed, as the harvest would go on unencrypted; ask the "
        "source's operator to serve OAI-PMH over https"
    )
    assert source.requests == []  # the http:// address was never asked
    assert client.notices == []


@pytest.mark.parametrize("status", [301, 302, 307])
def test_a_redirect_from_http_to_https_is_followed_and_noted(status: int) -> None:
    source = FakeSource(make_records(7), page_size=3)
    transport = _moving_to("https", source, status)
    with OAIClient("http://fake.test/oai", transport=transport, sleep=lambda _s: None) as client:
        client.identify()
        pages = list(client.sweep("ListRecords", metadata_prefix="oai_dc"))
    assert sum(len(page.records) for page in pages) == 7
    assert client.notices == [
        _moved_notice("http://fake.test/oai", status, "https://fake.test/oai")
    ]


def test_a_redirect_names_the_base_urls_own_query() -> None:
    """A base URL with a query of its own (`index.php?option=com_oai`): the URL to set keeps
    it. Before, the notice named the bare path, which answers no OAI-PMH."""
    source = FakeSource(make_records(3))
    transport = _moving_to("https", source)
    base_url = "http://fake.test/index.php?option=com_oai"
    source.identify_base_url = base_url
    with OAIClient(base_url, transport=transport, sleep=lambda _s: None) as client:
        client.identify()
    assert client.notices == [
        _moved_notice(base_url, 301, "https://fake.test/index.php?option=com_oai")
    ]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_without_a_location_says_so(status: int) -> None:
    """Before: "HTTP 302 and not well-formed XML: Document is empty", which sent the
    operator looking at the source's XML."""
    transport = httpx.MockTransport(lambda request: httpx.Response(status))
    error, _client = _identify_refused("http://fake.test/oai", transport, HarvestProtocolError)
    assert error == (
        f"http://fake.test/oai (Identify): HTTP {status}, a redirect without a Location "
        "(where to go): the source's web server or proxy is misconfigured"
    )
