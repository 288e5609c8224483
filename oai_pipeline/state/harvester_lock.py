"""At most one run writes for a given harvester at a time, whatever started it; and one
harvest at a time lists records from a source's server.

Dagster's run-tag limits cover runs that carry the harvester tag; a backfill launched from
the UI, a CLI harvest in another shell, or a range run over several harvesters does not.
This lease in the state store covers them all: it is taken for a stage and released after;
a holder on this machine keeps it while its process runs (one killed is taken over at
once), one on another machine while it renews it (the lease expires otherwise). The same
lease, keyed by the source's host (`source_key`), keeps harvesters of one server (Zenodo
communities, a DSpace's sets) from sweeping it at the same time: polite harvesters send one
request at a time.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from typing import Literal
from urllib.parse import urlsplit

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from oai_pipeline.errors import PipelineError, database_error_text, log_unsaved

logger = logging.getLogger(__name__)

_metadata = sa.MetaData()
harvester_locks = sa.Table(
    "harvester_locks",
    _metadata,
    sa.Column("harvester_id", sa.String(200), primary_key=True),
    sa.Column("owner", sa.String(200), nullable=False),
    sa.Column("renewed_at", sa.DateTime(timezone=True), nullable=False),
)
# Holders whose lease another process took over (they had died or stopped renewing), so that
# every process, not only the one that took it over, tells a lost lease from a released one
# (`lease_of`). Beside the leases, not among them: a count of the leases left stays a count
# of leases.
lost_leases = sa.Table(
    "harvester_lost_leases",
    _metadata,
    sa.Column("owner", sa.String(200), primary_key=True),
    sa.Column("harvester_id", sa.String(200), nullable=False),
    sa.Column("lost_at", sa.DateTime(timezone=True), nullable=False),
)


# What became of a holder's lease (HarvesterLock.lease_of).
LeaseState = Literal["held", "released", "lost"]

# Lost leases are remembered this long: a run the holder left `running` is settled (by
# `status`, or the harvester's next harvest) well before.
_LOST_KEPT = timedelta(days=90)

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


def _process_stat(pid: int) -> tuple[str, str] | None:
    """The process's state and when it started (clock ticks since boot), from /proc
    (Linux; None elsewhere): a pid the system gave to another process since is not taken
    for the holder, nor a killed one its parent has not reaped yet (a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat.rpartition(b")")[2].split()  # from field 3, the state
    if len(fields) <= 19:
        return None
    return fields[0].decode(), fields[19].decode()  # field 22: starttime


def new_owner() -> str:
    """host:pid:nonce[:start], so a holder on this machine is judged by its process."""
    pid = os.getpid()
    stat = _process_stat(pid)
    start = stat[1] if stat else None
    return f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex}" + (f":{start}" if start else "")


# Leases this process stopped using but could not release (its database away at the time):
# their holder counts as dead, so the next `hold` in this process (a Dagster code server, a
# second CLI command in one interpreter) takes them over instead of waiting for itself.
_abandoned: set[str] = set()


def _local_process_alive(owner: str) -> bool | None:
    """Whether the holder's process still runs: None when it is on another machine."""
    if owner in _abandoned:
        return False
    parts = owner.split(":")  # host, pid, nonce and (where /proc tells it) start
    host, pid_text = parts[0], parts[1] if len(parts) > 1 else ""
    recorded = parts[3] if len(parts) > 3 else ""
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    except OverflowError:
        return False
    stat = _process_stat(pid)
    if stat is None:
        return True  # no /proc to tell more
    state, start = stat
    return state not in ("Z", "X") and (not recorded or start == recorded)


def is_dead_local_process(owner: str) -> bool:
    return _local_process_alive(owner) is False


def _note_lost(connection: sa.Connection, harvester_id: str, holder: str, now: datetime) -> None:
    """Note, with the takeover, that `holder` lost its lease; forget old notes and this
    holder's own (one on another machine may take its lease again and lose it again)."""
    connection.execute(
        lost_leases.delete().where(
            (lost_leases.c.lost_at < now - _LOST_KEPT) | (lost_leases.c.owner == holder[:200])
        )
    )
    connection.execute(
        lost_leases.insert().values(owner=holder[:200], harvester_id=harvester_id, lost_at=now)
    )


class HarvesterLock:
    def __init__(self, engine: sa.Engine, *, lease: timedelta = timedelta(minutes=2)) -> None:
        self.engine = engine
        self.lease = lease
        # (harvester, thread) this object holds the lease for -> the owner name it holds it as
        self._held: dict[tuple[str, int], str] = {}
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
            expired = connection.execute(
                sa.select(harvester_locks.c.owner).where(
                    harvester_locks.c.harvester_id == harvester_id,
                    harvester_locks.c.renewed_at < now - self.lease,
                )
            ).scalar()
            # A holder on this machine is judged by its process, not by its renewals: one
            # suspended (Ctrl-Z) or slowed down still writes when it wakes up.
            if expired is not None and not _local_process_alive(expired):
                cleared = connection.execute(
                    harvester_locks.delete().where(
                        harvester_locks.c.harvester_id == harvester_id,
                        harvester_locks.c.owner == expired,
                    )
                )
                if cleared.rowcount == 1:
                    _note_lost(connection, harvester_id, expired, now)
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
            now = datetime.now(UTC)
            taken = connection.execute(
                harvester_locks.update()
                .where(
                    harvester_locks.c.harvester_id == harvester_id,
                    harvester_locks.c.owner == holder,
                )
                .values(owner=owner, renewed_at=now)
            )
            if taken.rowcount != 1:
                return False
            _note_lost(connection, harvester_id, holder, now)
            return True

    def owner(self, harvester_id: str) -> str | None:
        """Who holds the harvester's lease in this thread (None: not held here): a harvest
        run names it, so that `works_on` tells whether the run's process still works on it."""
        return self._held.get((harvester_id, threading.get_ident()))

    def works_on(self, harvester_id: str, owner: str) -> bool:
        """Whether `owner` still holds the harvester's lease: on this machine, while its
        process runs; on another, until the lease expires (not renewed)."""
        return self.lease_of(harvester_id, owner) == "held"

    def lease_of(self, harvester_id: str, owner: str) -> LeaseState:
        """What became of `owner`'s lease of the harvester: `held` (see `works_on`),
        `released` (its holder let it go as it ended its work: it was not killed) or `lost`
        (its holder died or stopped renewing it, leaving it behind, and maybe a process
        took it over since: any process, the answer is the same)."""
        with self.engine.connect() as connection:
            renewed_at = connection.execute(
                sa.select(harvester_locks.c.renewed_at).where(
                    harvester_locks.c.harvester_id == harvester_id,
                    harvester_locks.c.owner == owner,
                )
            ).scalar()
            if renewed_at is None:
                taken_over = connection.execute(
                    sa.select(lost_leases.c.harvester_id).where(lost_leases.c.owner == owner[:200])
                ).scalar()
                return "released" if taken_over is None else "lost"
        alive = _local_process_alive(owner)
        if alive is not None:
            return "held" if alive else "lost"
        if renewed_at.tzinfo is None:  # SQLite keeps no time zone: it was stored in UTC
            renewed_at = renewed_at.replace(tzinfo=UTC)
        return "held" if renewed_at >= datetime.now(UTC) - self.lease else "lost"

    def renew(self, harvester_id: str, owner: str) -> bool:
        """Renew the lease; False if it is no longer ours (expired and taken, or deleted)."""
        with self.engine.begin() as connection:
            renewed = connection.execute(
                harvester_locks.update()
                .where(
                    harvester_locks.c.harvester_id == harvester_id,
                    harvester_locks.c.owner == owner,
                )
                .values(renewed_at=datetime.now(UTC))
            )
        return renewed.rowcount == 1 or self.try_acquire(harvester_id, owner)

    def _keep_renewing(self, harvester_id: str, owner: str, stop: threading.Event) -> None:
        """Renew until stopped. A database that refuses for a while (locked, restarting) must
        not end the renewals for the rest of the run: the lease would expire under it."""
        interval = max(1.0, self.lease.total_seconds() / 3)
        lost = False
        while not stop.wait(interval):
            try:
                held = self.renew(harvester_id, owner)
            except sa.exc.SQLAlchemyError as error:
                # The database's own words, as one line: not SQLAlchemy's statement,
                # parameters and link, every round while the database is away.
                reason = database_error_text(getattr(error, "orig", None) or error)
                logger.warning(
                    "could not renew the lease of %s (will retry): %s", harvester_id, reason
                )
                continue
            if not held and not lost:
                logger.error(
                    "the lease of %s expired and another process holds it now: "
                    "this run and that one may both write for it",
                    harvester_id,
                )
            lost = not held

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
        if held in self._held:  # the outermost `hold` releases it
            yield
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
        renewer = threading.Thread(
            target=self._keep_renewing,
            args=(harvester_id, owner, stop),
            name=f"lease-{harvester_id}",
            daemon=True,
        )
        renewer.start()
        self._held[held] = owner
        try:
            yield
        finally:
            del self._held[held]
            stop.set()
            renewer.join()
            self._release_after_use(harvester_id, owner)

    def _release_after_use(self, harvester_id: str, owner: str) -> None:
        """Release at the end of a `hold`. A database gone meanwhile (its server restarting)
        must not replace the error that ended the work, nor fail work that was done: the
        lease is left abandoned, taken over at once by the next holder on this machine
        (seen from another, once it expires unrenewed)."""
        try:
            self.release(harvester_id, owner)
        except sa.exc.DBAPIError as error:
            _abandoned.add(owner)
            log_unsaved(logger, f"release the lease of {harvester_id}", error)
