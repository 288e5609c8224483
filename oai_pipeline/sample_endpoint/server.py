"""The sample OAI-PMH endpoint over real HTTP on loopback, with switchable faults.

`OAIEndpoint` runs a stdlib `ThreadingHTTPServer` (HTTP/1.1 keep-alive, no Nagle delay) in
a background thread and answers `GET`/`POST <base>/oai` through `OAIProvider`. Faults
(`faults.py`) decide per request number whether the answer is the real one or a failure
seen in the wild. Tests drive it as a context manager; the CLI uses `serve_forever`.
"""

from __future__ import annotations

import contextlib
import gzip
import math
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from oai_pipeline.sample_endpoint.faults import Faults
from oai_pipeline.sample_endpoint.provider import (
    DeletedRecordPolicy,
    Granularity,
    LastPageToken,
    OAIProvider,
)
from oai_pipeline.sample_endpoint.records import (
    EndpointRecord,
    default_set_names,
    load_sample_records,
)

OAI_PATH = "/oai"
SAMPLE_REPOSITORY_NAME = "oai-pipeline sample endpoint"
_XML = "text/xml; charset=utf-8"
# A deleted record's header up to its datestamp (Faults.undated_deletions drops the latter).
_DELETED_HEADER_DATESTAMP = re.compile(
    rb'(<header status="deleted"><identifier>[^<]*</identifier>)<datestamp>[^<]*</datestamp>'
)
_SET_SPEC = re.compile(rb"<setSpec>[^<]*</setSpec>")
_UNAVAILABLE_PAGE = (
    b"<html><head><title>503 Service Temporarily Unavailable</title></head><body>"
    b"<center><h1>503 Service Temporarily Unavailable</h1></center><hr><center>nginx</center>"
    b"</body></html>"
)
_HTML_ERROR_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>Internal Server Error</title></head><body>"
    b"<h1>Something went wrong</h1><p>The repository could not answer your request. "
    b"Please try again later.<br>Error ID: 5f1c0c2e</p></body></html>"
)
_NOT_XML_BODY = b'{"status": 500, "message": "Internal Server Error: backend timed out"}\n'


@dataclass
class _Reply:
    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-reply (a harvest killed or timed out) is no error of the
        endpoint's: the stdlib would print a traceback to stderr for each."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _RequestHandler(BaseHTTPRequestHandler):
    """Hands each request to its endpoint; one instance per connection."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "oai-pipeline-sample-endpoint"
    endpoint: OAIEndpoint

    def setup(self) -> None:
        super().setup()
        self.endpoint._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.endpoint._track(self.connection, False)

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's naming)
        url = urlsplit(self.path)
        self._answer(url.path, parse_qs(url.query, keep_blank_values=True))

    def do_POST(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        form = self.rfile.read(length).decode("utf-8", "replace")
        params = parse_qs(url.query, keep_blank_values=True)
        for name, values in parse_qs(form, keep_blank_values=True).items():
            params.setdefault(name, []).extend(values)
        self._answer(url.path, params)

    def _answer(self, path: str, params: dict[str, list[str]]) -> None:
        reply = self.endpoint._respond(path, params, self.headers.get("Accept-Encoding", ""))
        if reply is None:  # the drop-connection fault: no status line, no body
            self.close_connection = True
            return
        self.send_response(reply.status)
        for name, value in reply.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Quiet: tests and benchmarks make many thousands of requests."""


def _accepts_gzip(accept_encoding: str) -> bool:
    for item in accept_encoding.lower().split(","):
        coding, _, quality = item.strip().partition(";")
        if coding.strip() == "gzip":
            return quality.replace(" ", "") not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


class OAIEndpoint:
    """A real OAI-PMH 2.0 data provider on loopback, for the demo, tests and benchmarks.

    `records=None` serves the shipped sample set. Mutations (`upsert`, `mark_deleted`,
    `remove`) and `faults` may change while it runs.
    """

    def __init__(
        self,
        records: list[EndpointRecord] | None = None,
        *,
        page_size: int = 4,
        granularity: Granularity = "seconds",
        deleted_record: DeletedRecordPolicy = "persistent",
        errors_with_http_422: bool = True,
        faults: Faults | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        repository_name: str = SAMPLE_REPOSITORY_NAME,
        earliest_datestamp: datetime | None = None,
        last_page_token: LastPageToken = "empty",
        set_names: Mapping[str, str] | None = None,
    ) -> None:
        self.provider = OAIProvider(
            load_sample_records() if records is None else records,
            page_size=page_size,
            granularity=granularity,
            deleted_record=deleted_record,
            errors_with_http_422=errors_with_http_422,
            repository_name=repository_name,
            earliest_datestamp=earliest_datestamp,
            last_page_token=last_page_token,
            set_names=default_set_names() if set_names is None else set_names,
        )
        self.host = host
        self.port = port
        self.base_url = ""
        self.request_count = 0
        self.requests: list[dict[str, str]] = []
        # Requests being answered now, and the most at once: a polite harvester sends one
        # at a time.
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._faults = faults or Faults()
        self._pages_since_faults = 0
        self._tokens_expired = False
        self._ratelimit_window_start = 0.0
        self._ratelimit_used = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()

    # ------------------------------------------------------------- lifecycle

    def start(self) -> str:
        """Listen and serve in a background thread; returns the base URL (`…/oai`)."""
        if self._server is not None:
            return self.base_url
        handler = type("_BoundRequestHandler", (_RequestHandler,), {"endpoint": self})
        self._server = _Server((self.host, self.port), handler)
        host, port = self._server.server_address[:2]
        self.base_url = f"http://{host}:{port}{OAI_PATH}"
        self.provider.base_url = self.base_url
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"oai-endpoint-{port}",
            daemon=True,
        )
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        """Stop listening and cut open keep-alive connections, so clients see it gone."""
        server, thread = self._server, self._thread
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by the client
                connection.shutdown(socket.SHUT_RDWR)
        if thread is not None:
            thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> OAIEndpoint:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _track(self, connection: socket.socket, is_open: bool) -> None:
        with self._lock:
            if is_open:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    # ---------------------------------------------------------- faults, data

    @property
    def faults(self) -> Faults:
        return self._faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        """New faults; the page count for `expire_tokens_after_pages` starts again."""
        with self._lock:
            self._faults = faults
            self._pages_since_faults = 0
            self._tokens_expired = False

    def upsert(self, record: EndpointRecord) -> None:
        """Add or change a record (the caller sets its datestamp)."""
        self.provider.upsert(record)

    def mark_deleted(self, identifier: str, at: datetime | None = None) -> None:
        """Turn a record into a deleted header; its datestamp becomes `at` (default: now)."""
        self.provider.mark_deleted(identifier, at)

    def remove(self, identifier: str) -> None:
        """Make a record vanish without a trace (a source that keeps no deletions)."""
        self.provider.remove(identifier)

    def records(self) -> list[EndpointRecord]:
        """The records the endpoint holds now, in its list order."""
        return self.provider.records()

    # -------------------------------------------------------------- requests

    def _respond(
        self, path: str, params: dict[str, list[str]], accept_encoding: str
    ) -> _Reply | None:
        with self._lock:
            self.request_count += 1
            number = self.request_count
            self.requests.append({name: values[0] for name, values in params.items()})
            faults = self._faults
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if number in faults.slow_on:
                time.sleep(faults.slow_on[number])
            reply = self._reply(number, path, params, faults)
        finally:
            with self._lock:
                self.in_flight -= 1
        if reply is None:
            return None
        if faults.ratelimit_headers:
            reply.headers += self._ratelimit_headers(faults)
        if faults.plain_labelled_gzip:
            reply.headers.append(("Content-Encoding", "gzip"))
        elif _accepts_gzip(accept_encoding):
            reply.body = gzip.compress(reply.body, compresslevel=1)
            reply.headers.append(("Content-Encoding", "gzip"))
        reply.headers.append(("Vary", "Accept-Encoding"))
        return reply

    def _reply(
        self, number: int, path: str, params: dict[str, list[str]], faults: Faults
    ) -> _Reply | None:
        if path != OAI_PATH:
            return _Reply(404, b"not found\n", [("Content-Type", "text/plain")])
        if number in faults.drop_connection_on:
            return None
        if faults.unavailable_every and number % faults.unavailable_every == 0:
            headers = [("Content-Type", "text/html"), ("Retry-After", faults.retry_after)]
            return _Reply(503, _UNAVAILABLE_PAGE, headers)
        if number in faults.not_xml_on:
            return _Reply(200, _NOT_XML_BODY, [("Content-Type", _XML)])
        if number in faults.html_error_on:
            return _Reply(200, _HTML_ERROR_PAGE, [("Content-Type", "text/html; charset=utf-8")])
        if (params.get("verb") or [""])[0] in faults.failing_verbs:
            return _Reply(500, b"500 Internal Server Error\n", [("Content-Type", "text/plain")])
        response = self.provider.handle(
            params,
            illegal_characters=faults.illegal_characters,
            identify_granularity=faults.identify_granularity,
            identify_base_url=faults.identify_base_url,
            refuse_list_from_cursor=faults.refuse_list_from_cursor,
            unlisted=frozenset(faults.unlisted_identifiers),
        )
        if response.list_page:
            self._count_list_page(faults)
        body = response.body
        if faults.undated_deletions:
            body = _DELETED_HEADER_DATESTAMP.sub(rb"\1", body)
        if faults.get_record_without_sets and params.get("verb") == ["GetRecord"]:
            body = _SET_SPEC.sub(b"", body)
        if number in faults.truncate_on:
            body = body[: len(body) * 6 // 10]
        return _Reply(response.status, body, [("Content-Type", _XML)])

    def _count_list_page(self, faults: Faults) -> None:
        with self._lock:
            if faults is not self._faults:
                return
            self._pages_since_faults += 1
            limit = faults.expire_tokens_after_pages
            if limit and not self._tokens_expired and self._pages_since_faults >= limit:
                self._tokens_expired = True
                self.provider.invalidate_tokens()

    def _ratelimit_headers(self, faults: Faults) -> list[tuple[str, str]]:
        now = time.time()
        with self._lock:
            window = faults.ratelimit_window_seconds
            if now >= self._ratelimit_window_start + window:
                self._ratelimit_window_start, self._ratelimit_used = now, 0
            self._ratelimit_used += 1
            remaining = max(faults.ratelimit_limit - self._ratelimit_used, 0)
            reset = self._ratelimit_window_start + window
        return [
            ("X-RateLimit-Limit", str(faults.ratelimit_limit)),
            ("X-RateLimit-Remaining", str(remaining)),
            ("X-RateLimit-Reset", str(math.ceil(reset))),
            ("Retry-After", str(max(math.ceil(reset - now), 0))),
        ]


def serve_forever(
    records: list[EndpointRecord] | None = None,
    *,
    on_ready: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    exit_with_parent: bool = False,
    **options: Any,
) -> None:
    """Serve until Ctrl-C (or until `stop` is set); `on_ready` gets the base URL.

    `exit_with_parent`: also until the process that started this one ends (`./run.sh dev`
    serves it beside `dagster dev`, which it execs into: started in the background from a
    script, this process ignores Ctrl-C, and a script killed by a signal runs no trap).
    `options` are `OAIEndpoint`'s keyword arguments.
    """
    import os

    endpoint = OAIEndpoint(records, **options)
    stop = stop or threading.Event()
    parent = os.getppid()
    base_url = endpoint.start()
    try:
        if on_ready is not None:
            on_ready(base_url)
        while not stop.wait(0.2):  # short waits: Ctrl-C is noticed promptly
            if exit_with_parent and os.getppid() != parent:  # adopted: the parent ended
                break
    except KeyboardInterrupt:
        pass
    finally:
        endpoint.stop()


# The port of the shipped endpoint that the demo's harvester `sample` harvests: the demo
# serves it there while it runs, and `./run.sh dev` beside the UI, so the harvester it leaves
# registered keeps working in the UI (schedules, sensors, new materialisations).
SAMPLE_PORT_ENV = "OAI_PIPELINE_SAMPLE_PORT"
DEFAULT_SAMPLE_PORT = 8765
SAMPLE_HOST = "127.0.0.1"


def sample_port(environ: Mapping[str, str] | None = None) -> int:
    """The shipped endpoint's fixed port: OAI_PIPELINE_SAMPLE_PORT, else 8765."""
    import os

    from oai_pipeline.errors import ConfigurationError

    text = (os.environ if environ is None else environ).get(SAMPLE_PORT_ENV) or ""
    if not text:
        return DEFAULT_SAMPLE_PORT
    port = int(text) if text.isdigit() else 0
    if not 1 <= port <= 65535:
        raise ConfigurationError(f"{SAMPLE_PORT_ENV} must be a port from 1 to 65535, not {text!r}")
    return port


def sample_base_url(port: int) -> str:
    return f"http://{SAMPLE_HOST}:{port}{OAI_PATH}"


def serves_the_sample(base_url: str) -> bool:
    """Whether the shipped endpoint answers at `base_url` (started by `./run.sh dev`)."""
    import httpx

    try:
        response = httpx.get(base_url, params={"verb": "Identify"}, timeout=5)
    except httpx.HTTPError:
        return False
    return f"<repositoryName>{SAMPLE_REPOSITORY_NAME}</repositoryName>".encode() in response.content
