"""The TLS context harvests verify sources with, made once per process.

Building one loads the whole CA bundle (25-65 ms); every harvest, reconcile and Dagster
step opens a client, and a run of many small windows or a test suite paid it each time.
It is made again when the bundle httpx would trust changes: ``SSL_CERT_FILE`` or
``SSL_CERT_DIR`` set to another path, or the file or directory rewritten.
"""

from __future__ import annotations

import functools
import os
import ssl

import certifi
import httpx


def trusted_tls_context() -> ssl.SSLContext:
    """httpx's default context (``SSL_CERT_FILE``, else ``SSL_CERT_DIR``, else certifi's
    bundle), shared while that bundle is unchanged."""
    cert_file = os.environ.get("SSL_CERT_FILE") or None
    cert_dir = None if cert_file else os.environ.get("SSL_CERT_DIR") or None
    bundle = cert_file or cert_dir or certifi.where()
    return _tls_context(cert_file, cert_dir, _changed_at(bundle))


def _changed_at(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None  # httpx says what is wrong with it when the context is made


@functools.lru_cache(maxsize=8)
def _tls_context(
    cert_file: str | None, cert_dir: str | None, changed_at: int | None
) -> ssl.SSLContext:
    """One context per bundle and version of it (the arguments are the cache's key; httpx
    reads the same environment)."""
    return httpx.create_ssl_context()
