"""At most one run writes for a given harvester at a time, whatever started it; and one
harvest at a time lists records from a source's server.

Dagster's run-tag limits cover runs that carry the harvester tag; a backfill launched from
the UI, a CLI harvest in another shell, or a range run over several harvesters does not.
This lease in the state store covers them all: it is taken for a stage and released after;
a holder that died stops renewing it and the lease expires. The same lease, keyed by the
source's host (`source_key`), keeps harvesters of one server (Zenodo communities, a DSpace's
sets) from sweeping it at the same time: polite harvesters send one request at a time.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from oai_pipeline.errors import PipelineError

logger = logging.getLogger(__name__)

_metadata = sa.MetaData()
harvester_locks = sa.Table(
    "harvester_locks",
    _metadata,
    sa.Column("harvester_id", sa.String(200), primary_key=True),
    sa.Column("owner", sa.String(200), nullable=False),
    sa.Column("renewed_at", sa.DateTime(timezone=True), nullable=False),
)


# A sweep of a large source takes hours: a harvest of the same server waits that long.
SOURCE_WAIT_SECONDS = 48 * 3600.0


def source_key(base_url: str) -> str:
    """The lease of the server behind an OAI-PMH base URL: its host and port (one server
    may serve several endpoints, e.g. DSpace's /oai/request and /oai/openaire)."""
    parts = urlsplit(base_url.strip())
    host = (parts.hostname or base_url).lower()[:150]
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"source:{host}" + (f":{port}" if port else "")


def new_owner() -> str:
    """host:pid:nonce, so a holder killed on this machine is recognised as dead."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"


def is_dead_local_process(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class HarvesterLock:
    def __init__(self, engine: sa.Engine, *, lease: timedelta = timedelta(minutes=2)) -> None:
        self.engine = engine
        self.lease = lease
        # (harvester, thread) this object holds the lease for, and how many times over
        self._held: Counter[tuple[str, int]] = Counter()
        self._owners: dict[tuple[str, int], str] = {}
        try:
            _metadata.create_all(engine, checkfirst=True)
        except sa.exc.DatabaseError:
            # Another process starting at the same time created it between our check and
            # our CREATE TABLE (a fresh state database).
            if not sa.inspect(engine).has_table(harvester_locks.name):
                raise

    def try_acquire(self, harvester_id: str, owner: str) -> bool:
        now = datetime.now(UTC)
        with self.engine.begin() as connection:
            connection.execute(
                harvester_locks.delete().where(
                    harvester_locks.c.harvester_id == harvester_id,
                    harvester_locks.c.renewed_at < now - self.lease,
                )
            )
        try:
            with self.engine.begin() as connection:
                connection.execute(
                    harvester_locks.insert().values(
                        harvester_id=harvester_id, owner=owner, renewed_at=now
                    )
                )
            return True
        except IntegrityError:
            return self._take_over_from_dead_holder(harvester_id, owner)

    def _take_over_from_dead_holder(self, harvester_id: str, owner: str) -> bool:
        """A holder on this machine whose process is gone (killed) can't renew: don't wait."""
        with self.engine.begin() as connection:
            holder = connection.execute(
                sa.select(harvester_locks.c.owner).where(
                    harvester_locks.c.harvester_id == harvester_id
                )
            ).scalar()
            if holder is None or not is_dead_local_process(holder):
                return False
            taken = connection.execute(
                harvester_locks.update()
                .where(
                    harvester_locks.c.harvester_id == harvester_id,
                    harvester_locks.c.owner == holder,
                )
                .values(owner=owner, renewed_at=datetime.now(UTC))
            )
            return taken.rowcount == 1

    def owner(self, harvester_id: str) -> str | None:
        """Who holds the harvester's lease in this thread (None: not held here): a harvest
        run names it, so that `works_on` tells whether the run's process still works on it."""
        return self._owners.get((harvester_id, threading.get_ident()))

    def works_on(self, harvester_id: str, owner: str) -> bool:
        """Whether `owner` still holds the harvester's lease: a process that was killed holds
        it no more once it is on this machine or the lease expired (not renewed)."""
        with self.engine.connect() as connection:
            renewed_at = connection.execute(
                sa.select(harvester_locks.c.renewed_at).where(
                    harvester_locks.c.harvester_id == harvester_id,
                    harvester_locks.c.owner == owner,
                )
            ).scalar()
        if renewed_at is None or is_dead_local_process(owner):
            return False
        if renewed_at.tzinfo is None:  # SQLite keeps no time zone: it was stored in UTC
            renewed_at = renewed_at.replace(tzinfo=UTC)
        return renewed_at >= datetime.now(UTC) - self.lease

    def renew(self, harvester_id: str, owner: str) -> None:
        with self.engine.begin() as connection:
            connection.execute(
                harvester_locks.update()
                .where(
                    harvester_locks.c.harvester_id == harvester_id,
                    harvester_locks.c.owner == owner,
                )
                .values(renewed_at=datetime.now(UTC))
            )

    def release(self, harvester_id: str, owner: str) -> None:
        with self.engine.begin() as connection:
            connection.execute(
                harvester_locks.delete().where(
                    harvester_locks.c.harvester_id == harvester_id,
                    harvester_locks.c.owner == owner,
                )
            )

    def hold_source(
        self,
        base_url: str,
        *,
        wait_seconds: float = SOURCE_WAIT_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> AbstractContextManager[None]:
        """Hold the lease of the source's server while listing from it (`source_key`)."""
        key = source_key(base_url)
        return self.hold(
            key,
            wait_seconds=wait_seconds,
            sleep=sleep,
            busy=f"another harvest is listing records from {key.removeprefix('source:')}",
        )

    @contextmanager
    def hold(
        self,
        harvester_id: str,
        *,
        wait_seconds: float = 3600.0,
        poll_seconds: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
        busy: str | None = None,
    ) -> Iterator[None]:
        """Wait for the lease and hold it; a background thread renews it while we live.

        Reentrant within a thread: a stage inside a whole run holding the lease has it.
        `busy` says what the holder is doing (default: writing for the harvester).
        """
        busy = busy or f"another run is writing for harvester {harvester_id!r}"
        held = (harvester_id, threading.get_ident())
        if self._held[held]:
            self._held[held] += 1
            try:
                yield
            finally:
                self._held[held] -= 1
            return
        owner = new_owner()
        deadline = time.monotonic() + wait_seconds
        waited = False
        while not self.try_acquire(harvester_id, owner):
            if not waited and wait_seconds > 0:
                logger.info("%s; waiting for it (up to %.0f s)", busy, wait_seconds)
                waited = True
            if time.monotonic() >= deadline:
                raise PipelineError(f"{busy}; gave up after {wait_seconds:.0f} s")
            sleep(poll_seconds)
        stop = threading.Event()
        interval = max(1.0, self.lease.total_seconds() / 3)

        def keep_renewing() -> None:
            while not stop.wait(interval):
                self.renew(harvester_id, owner)

        renewer = threading.Thread(target=keep_renewing, name=f"lease-{harvester_id}", daemon=True)
        renewer.start()
        self._held[held] = 1
        self._owners[held] = owner
        try:
            yield
        finally:
            del self._held[held]
            del self._owners[held]
            stop.set()
            renewer.join()
            self.release(harvester_id, owner)
