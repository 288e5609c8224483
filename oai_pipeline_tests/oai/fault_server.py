"""A FakeSource served over real loopback HTTP, whose faults write raw bytes to the socket.

httpx.MockTransport cannot misbehave below HTTP (a connection reset mid-body, a body shorter
than its Content-Length, broken chunked encoding, a stalled response, a redirect): this
server can. Each fault gets the request target and the socket and writes what it likes.
"""

from __future__ import annotations

import gzip
import socket
import socketserver
import ssl
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from oai_pipeline_tests.oai.fake_source import FakeSource

# A self-signed certificate for 127.0.0.1 (valid for 100 years) and its key; and one that
# expired on 31 January 2020 (expired_cert.pem, expired_key.pem).
SELF_SIGNED = Path(__file__).parent / "self_signed"

# A raw fault: (server, request target, socket) -> whether the connection may be kept open.
RawFault = Callable[["FaultServer", str, socket.socket], bool]


class FaultServer:
    """``with FaultServer(source) as server:`` serves ``source`` at ``server.base_url``;
    ``server.faults[n]`` (1-based request number) or ``server.every`` replace an answer.
    With ``self_signed_tls`` it speaks https with a certificate nobody trusts; with
    ``expired`` too, that certificate has expired."""

    def __init__(
        self, source: FakeSource, *, self_signed_tls: bool = False, expired: bool = False
    ) -> None:
        self.source = source
        self.faults: dict[int, RawFault] = {}
        self.every: RawFault | None = None
        self.targets: list[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                reader = self.request.makefile("rb")
                while True:
                    line = reader.readline()
                    while line and reader.readline() not in (b"\r\n", b"\n", b""):
                        pass  # the headers: not needed
                    if not line:
                        return
                    target = line.split()[1].decode("latin-1")
                    with server._lock:
                        server.targets.append(target)
                        fault = server.faults.get(len(server.targets), server.every)
                    keep_open = (fault or answer)(server, target, self.request)
                    if not keep_open:
                        return

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if self_signed_tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            prefix = "expired_" if expired else ""
            context.load_cert_chain(
                SELF_SIGNED / f"{prefix}cert.pem", SELF_SIGNED / f"{prefix}key.pem"
            )
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self.origin = f"{'https' if self_signed_tls else 'http'}://127.0.0.1:{self.port}"
        self.base_url = f"{self.origin}/oai"

    def __enter__(self) -> FaultServer:
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def response(self, target: str) -> httpx.Response:
        """What the source answers to ``target`` (path and query; the path is ignored)."""
        query = target.partition("?")[2]
        return self.source.answer(httpx.Request("GET", f"http://fake.test/oai?{query}"))


def send(
    sock: socket.socket, status: int, body: bytes = b"", headers: dict[str, str] | None = None
) -> None:
    head = {"Content-Length": str(len(body)), "Content-Type": "text/xml; charset=utf-8"}
    head.update(headers or {})
    lines = "".join(f"{name}: {value}\r\n" for name, value in head.items())
    sock.sendall(f"HTTP/1.1 {status} X\r\n{lines}\r\n".encode() + body)


def answer(server: FaultServer, target: str, sock: socket.socket) -> bool:
    """The source's own answer."""
    response = server.response(target)
    send(sock, response.status_code, response.content)
    return True


# ---- faults -------------------------------------------------------------------------------


def reset_mid_body(server: FaultServer, target: str, sock: socket.socket) -> bool:
    body = server.response(target).content
    sock.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body[:200])
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
    sock.close()
    return False


def close_after_headers(server: FaultServer, target: str, sock: socket.socket) -> bool:
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\nContent-Type: text/xml\r\n\r\n")
    return False


def short_of_content_length(server: FaultServer, target: str, sock: socket.socket) -> bool:
    body = server.response(target).content
    sock.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body) + 100}\r\n\r\n".encode() + body)
    return False


def truncated_chunked(server: FaultServer, target: str, sock: socket.socket) -> bool:
    body = server.response(target).content[:300]
    sock.sendall(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (len(body), body)
    )
    return False


def truncated_gzip(server: FaultServer, target: str, sock: socket.socket) -> bool:
    """A gzip stream cut short, with the Content-Length of what is sent."""
    cut = gzip.compress(server.response(target).content)[:-40]
    send(sock, 200, cut, {"Content-Encoding": "gzip"})
    return True


def labelled(coding: str, pack: Callable[[bytes], bytes] = lambda body: body) -> RawFault:
    """The answer ``pack``ed (by default: left plain) and labelled ``Content-Encoding:
    coding``, as a misconfigured proxy does."""

    def fault(server: FaultServer, target: str, sock: socket.socket) -> bool:
        response = server.response(target)
        send(sock, response.status_code, pack(response.content), {"Content-Encoding": coding})
        return True

    return fault


def stall_mid_body(server: FaultServer, target: str, sock: socket.socket) -> bool:
    body = server.response(target).content
    sock.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body[:200])
    time.sleep(3)
    return False


def trickle(seconds: float) -> RawFault:
    """The answer in small pieces spread over ``seconds`` (a slow link, a big page)."""

    def fault(server: FaultServer, target: str, sock: socket.socket) -> bool:
        body = server.response(target).content
        pieces = [body[start : start + 64] for start in range(0, len(body), 64)]
        try:
            sock.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode())
            for piece in pieces:
                time.sleep(seconds / len(pieces))
                sock.sendall(piece)
        except OSError:  # the client hung up
            return False
        return True

    return fault


def moved(status: int, location: Callable[[FaultServer, str], str]) -> RawFault:
    """Requests to /oai get ``status`` with the Location ``location(server, query)``; any
    other path is answered as /oai would be."""

    def fault(server: FaultServer, target: str, sock: socket.socket) -> bool:
        path, _, query = target.partition("?")
        if path != "/oai":
            return answer(server, target, sock)
        send(sock, status, headers={"Location": location(server, query)})
        return True

    return fault
