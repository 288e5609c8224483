"""A TCP proxy in front of a database server: it counts round trips and can add latency.

PostgreSQL in production is across a network, where each round trip costs a fraction of
a millisecond or more; the throwaway server of the tests is on loopback, where it costs
microseconds, so a statement sent once per record instead of once per batch shows in no
timing. Behind this proxy it shows in the count (`round_trips`), and with `delay` in the
time too, as it would against a server in another rack.

A round trip is counted when the client sends after the server has answered (the
protocol alternates: a request, its answer), so a large request cut into many TCP reads
still counts once.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

_CHUNK = 65536


class NetworkProxy:
    def __init__(self, target_host: str, target_port: int, *, delay: float = 0.0) -> None:
        """`delay`: seconds added to each round trip (before the request is passed on)."""
        self._target = (target_host, target_port)
        self._delay = delay
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._round_trips = 0
        self._answered: dict[int, bool] = {}  # per connection: the server spoke since
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def round_trips(self) -> int:
        with self._lock:
            return self._round_trips

    def url_through(self, url: str) -> str:
        """The database URL with the proxy's address in place of the server's."""
        parts = urlsplit(url)
        credentials = parts.netloc.rpartition("@")[0]
        netloc = f"{credentials}@127.0.0.1:{self.port}" if credentials else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self._target)
            except OSError:  # the server is gone: the client sees its connection refused
                client.close()
                continue
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            key = id(client)
            with self._lock:
                self._sockets += [client, server]
                self._answered[key] = True
            for source, sink, request in ((client, server, True), (server, client, False)):
                pump = threading.Thread(target=self._pump, args=(source, sink, key, request))
                pump.daemon = True
                pump.start()

    def _pump(self, source: socket.socket, sink: socket.socket, key: int, request: bool) -> None:
        try:
            while data := source.recv(_CHUNK):
                if request:
                    with self._lock:
                        new_trip = self._answered[key]
                        self._answered[key] = False
                        self._round_trips += int(new_trip)
                    if new_trip and self._delay:
                        time.sleep(self._delay)
                else:
                    with self._lock:
                        self._answered[key] = True
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def network_proxy(url: str, *, delay: float = 0.0) -> Iterator[NetworkProxy]:
    """A proxy in front of the database server of `url` (host and port as in the URL)."""
    parts = urlsplit(url)
    proxy = NetworkProxy(parts.hostname or "127.0.0.1", parts.port or 5432, delay=delay)
    try:
        yield proxy
    finally:
        proxy.close()


# The settings that put the state store and the target on a database each.
DATABASE_SETTINGS = ("OAI_PIPELINE_STATE_DB_URL", "OAI_PIPELINE_TARGET_DB_URL")


def proxied_databases(proxy: NetworkProxy, server_url: str) -> dict[str, str]:
    """A fresh database each for the state store and the target, reached through `proxy`."""
    from oai_pipeline_tests.postgres import fresh_database

    return {name: proxy.url_through(fresh_database(server_url)) for name in DATABASE_SETTINGS}


@contextlib.contextmanager
def postgres_behind_network(delay: float) -> Iterator[tuple[NetworkProxy, dict[str, str]]]:
    """A throwaway PostgreSQL server behind a proxy adding `delay` per round trip, and the
    settings of a fresh database each for the state store and the target on it."""
    from oai_pipeline_tests.postgres import throwaway_postgres

    with throwaway_postgres() as server, network_proxy(server, delay=delay) as proxy:
        yield proxy, proxied_databases(proxy, server)
