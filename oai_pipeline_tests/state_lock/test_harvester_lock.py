from __future__ import annotations

import os
import threading
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from oai_pipeline.errors import PipelineError
from oai_pipeline.state import harvester_lock
from oai_pipeline.state.harvester_lock import HarvesterLock


@pytest.fixture
def engine(tmp_path: Path) -> sa.Engine:
    return sa.create_engine(f"sqlite:///{tmp_path / 'state.sqlite'}")


def test_one_holder_per_harvester_others_side_by_side(engine: sa.Engine) -> None:
    lock = HarvesterLock(engine)
    refused: list[BaseException] = []

    def another_run() -> None:
        try:
            with lock.hold("zenodo", wait_seconds=0, sleep=lambda s: None):
                pass
        except PipelineError as error:
            refused.append(error)

    with lock.hold("zenodo"):
        assert not lock.try_acquire("zenodo", "someone-else")
        assert lock.try_acquire("arxiv", "someone-else")  # another harvester is free
        thread = threading.Thread(target=another_run)
        thread.start()
        thread.join()
        assert len(refused) == 1 and "another run is writing" in str(refused[0])
        with lock.hold("zenodo"):  # a stage of the run that holds it (same thread)
            assert not lock.try_acquire("zenodo", "someone-else")
        assert not lock.try_acquire("zenodo", "someone-else")  # still held
    assert lock.try_acquire("zenodo", "next")


def test_a_waiting_run_gets_the_lease_when_it_is_released(engine: sa.Engine) -> None:
    lock = HarvesterLock(engine)
    order: list[str] = []
    release = threading.Event()

    def first() -> None:
        with lock.hold("h"):
            order.append("first in")
            release.wait(5)
            order.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    while not order:
        pass
    release.set()
    with lock.hold("h", poll_seconds=0.05):
        order.append("second in")
    thread.join()
    assert order == ["first in", "first out", "second in"]


def test_a_dead_holders_lease_expires(engine: sa.Engine) -> None:
    lock = HarvesterLock(engine, lease=timedelta(seconds=-1))  # already expired when taken
    assert lock.try_acquire("h", "crashed-run")
    assert lock.try_acquire("h", "new-run")


def test_a_killed_local_holder_is_taken_over_at_once(engine: sa.Engine) -> None:
    import socket
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # its pid is now free: the holder is dead
    lock = HarvesterLock(engine)
    assert lock.try_acquire("h", f"{socket.gethostname()}:{child.pid}:nonce")
    assert lock.try_acquire("h", "new-owner")  # taken over, no waiting for the lease
    # a holder on another machine can't be judged from here: wait for its lease
    assert lock.try_acquire("remote", f"other-host:{child.pid}:nonce")
    assert not lock.try_acquire("remote", "new-owner")


def test_a_lease_released_is_told_from_one_a_killed_holder_left(engine: sa.Engine) -> None:
    """What tells `status` whether a run's process ended (it released its lease: a harvest
    refused by an upgrade of the store) or was killed (its lease left behind, maybe taken
    over since by the process that asks)."""
    import socket
    import subprocess
    import sys

    lock = HarvesterLock(engine)
    with lock.hold("h"):
        owner = lock.owner("h")
        assert owner is not None and lock.lease_of("h", owner) == "held"
    assert lock.lease_of("h", owner) == "released"
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # its pid is now free: the holder is dead
    killed = f"{socket.gethostname()}:{child.pid}:nonce"
    assert lock.try_acquire("k", killed)
    assert lock.lease_of("k", killed) == "lost"
    with lock.hold("k"):  # taken over: the killed holder's row is gone, not released
        assert lock.lease_of("k", killed) == "lost"


def test_a_lease_taken_over_reads_lost_to_every_process(engine: sa.Engine) -> None:
    """A killed holder's lease taken over by one process (a harvest, a reconcile, a Dagster
    step) reads `lost` to another (`status`): not `released`, as if the holder had ended
    cleanly."""
    import socket
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # its pid is now free: the holder is dead
    killed = f"{socket.gethostname()}:{child.pid}:nonce"
    harvest, status = HarvesterLock(engine), HarvesterLock(engine)
    assert harvest.try_acquire("k", killed)
    with harvest.hold("k"):  # the next harvest takes it over at once
        assert status.lease_of("k", killed) == "lost"
    assert status.lease_of("k", killed) == "lost"
    # one on another machine that stopped renewing, taken over once expired
    remote = "other-host:1:nonce"
    assert harvest.try_acquire("r", remote)
    expired = HarvesterLock(engine, lease=timedelta(0))
    assert expired.try_acquire("r", "next-owner")
    assert status.lease_of("r", remote) == "lost"
    assert expired.try_acquire("r", remote)  # it renews, takes it again, loses it again
    assert expired.try_acquire("r", "next-owner")
    assert status.lease_of("r", remote) == "lost"
    # a clean release still reads released, to every process
    with harvest.hold("h"):
        owner = harvest.owner("h")
    assert owner is not None and status.lease_of("h", owner) == "released"


def test_whether_a_holder_still_works_on_its_harvester(engine: sa.Engine) -> None:
    """What tells a harvest run's status whether the process that works on it is alive."""
    lock = HarvesterLock(engine)
    with lock.hold("h"):
        owner = lock.owner("h")
        assert owner is not None and lock.works_on("h", owner)
        assert not lock.works_on("other", owner)
    assert lock.owner("h") is None and not lock.works_on("h", owner)  # released
    # A holder on another machine that stopped renewing: alive until its lease expires.
    assert lock.try_acquire("remote", "other-host:1:nonce")
    assert lock.works_on("remote", "other-host:1:nonce")
    expired = HarvesterLock(engine, lease=timedelta(seconds=-1))
    assert not expired.works_on("remote", "other-host:1:nonce")


def test_two_processes_creating_the_lock_table_at_once(
    engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other one creates the table between this one's check and its CREATE TABLE."""
    create_all = harvester_lock._metadata.create_all

    def racing(bind: sa.Engine, checkfirst: bool = True) -> None:
        create_all(bind)  # the other process
        create_all(bind, checkfirst=False)

    monkeypatch.setattr(harvester_lock._metadata, "create_all", racing)
    lock = HarvesterLock(engine)
    assert lock.try_acquire("h", "me")


def test_a_live_holder_on_this_machine_keeps_its_lease_when_its_renewals_stall(
    engine: sa.Engine,
) -> None:
    """A harvest suspended with Ctrl-Z, or whose renewals the database held up, writes again
    when it wakes: nobody takes its lease, and its run is not shown as interrupted."""
    stalled = HarvesterLock(engine, lease=timedelta(seconds=-1))  # expired when taken
    me = harvester_lock.new_owner()
    assert stalled.try_acquire("h", me)
    assert not stalled.try_acquire("h", "new-owner")
    assert stalled.works_on("h", me)


def test_a_pid_given_to_another_process_is_not_taken_for_the_holder(engine: sa.Engine) -> None:
    """The holder died and the system gave its pid to a new process (here: this one)."""
    import os
    import socket

    lock = HarvesterLock(engine)
    reused = f"{socket.gethostname()}:{os.getpid()}:nonce:1"  # started at another time
    assert lock.try_acquire("h", reused)
    assert not lock.works_on("h", reused)
    assert lock.try_acquire("h", "new-owner")  # taken over at once


class _Ticks(threading.Event):
    """A stop event that lets the renewer run `times` rounds without waiting."""

    def __init__(self, times: int) -> None:
        super().__init__()
        self.left = times

    def wait(self, timeout: float | None = None) -> bool:
        self.left -= 1
        return self.left < 0


def test_renewals_go_on_after_the_database_refused_one(
    engine: sa.Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    lock = HarvesterLock(engine)
    assert lock.try_acquire("h", "me")
    renew = lock.renew
    calls: list[bool] = []

    def flaky(harvester_id: str, owner: str) -> bool:
        if not calls:
            calls.append(False)
            raise sa.exc.OperationalError("UPDATE", {}, Exception("database is locked"))
        calls.append(renew(harvester_id, owner))
        return calls[-1]

    monkeypatch.setattr(lock, "renew", flaky)
    lock._keep_renewing("h", "me", _Ticks(3))
    assert calls == [False, True, True]
    assert "could not renew the lease of h (will retry)" in caplog.text


def test_a_refused_renewal_is_logged_as_the_database_said_it_in_one_line(
    engine: sa.Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """PostgreSQL restarting: psycopg2's message spans lines; SQLAlchemy's adds the
    statement, its parameters and a link. Logged every round while the database is away."""
    lock = HarvesterLock(engine)
    closed = (
        "server closed the connection unexpectedly\n\tThis probably means the server "
        "terminated abnormally\n\tbefore or while processing the request.\n"
    )

    def refused(_harvester_id: str, _owner: str) -> bool:
        raise sa.exc.OperationalError("UPDATE harvester_locks", {"owner": "me"}, Exception(closed))

    monkeypatch.setattr(lock, "renew", refused)
    lock._keep_renewing("h", "me", _Ticks(1))
    assert [record.getMessage() for record in caplog.records] == [
        "could not renew the lease of h (will retry): server closed the connection "
        "unexpectedly This probably means the server terminated abnormally before or while "
        "processing the request."
    ]


def test_a_lease_lost_to_another_process_is_logged_once_and_retaken_when_free(
    engine: sa.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    lock = HarvesterLock(engine)
    assert lock.try_acquire("h", "other-host:1:nonce")  # took it after ours expired
    lock._keep_renewing("h", "me", _Ticks(2))
    assert caplog.text.count("the lease of h expired and another process holds it") == 1
    lock.release("h", "other-host:1:nonce")
    assert lock.renew("h", "me") and lock.works_on("h", "me")


def test_a_killed_holder_its_parent_has_not_reaped_is_dead(engine: sa.Engine) -> None:
    """A zombie still answers `kill(pid, 0)`: its lease must not be held until the parent
    (a Dagster run worker) gets round to reaping it."""
    import signal
    import socket
    import subprocess
    import sys
    import time

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owner = f"{socket.gethostname()}:{child.pid}:nonce"
        lock = HarvesterLock(engine)
        assert lock.try_acquire("h", owner)
        assert lock.works_on("h", owner)  # alive
        os.kill(child.pid, signal.SIGKILL)
        while Path(f"/proc/{child.pid}/stat").read_bytes().rpartition(b")")[2].split()[0] != b"Z":
            time.sleep(0.01)  # not reaped: a zombie
        assert not lock.works_on("h", owner)
        assert lock.try_acquire("h", "new-owner")
    finally:
        child.kill()
        child.wait()


@pytest.mark.postgres
def test_a_lease_is_released_after_postgresql_dropped_its_connections(
    postgres_url: str, tmp_path: Path
) -> None:
    """A restarted server (here: its connections ended by an administrator) leaves the
    lease's pooled connections dead: the first statement on one failed, the release that
    ends a stage whose work was done, or the take of the next stage's lease."""
    from oai_pipeline.pipeline.services import Services
    from oai_pipeline.settings import Settings
    from oai_pipeline_tests.postgres import drop_connections, fresh_database

    url = fresh_database(postgres_url, "lease")
    settings = Settings(
        home=tmp_path,
        state_db_url=url,
        target_db_url=f"sqlite:///{tmp_path / 'target.sqlite'}",
        storage_url=str(tmp_path / "storage"),
    )
    with Services(settings) as services:
        lock = services.harvester_lock
        with lock.hold("h", wait_seconds=0):
            drop_connections(url)
        assert lock.try_acquire("h", "someone-else")  # it was released
        lock.release("h", "someone-else")
        drop_connections(url)
        with lock.hold("h", wait_seconds=0):
            assert not lock.try_acquire("h", "someone-else")


def test_a_lease_that_could_not_be_released_is_taken_over_in_the_same_process(
    engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database went away as the work ended (its server restarting): the release failed.
    Before, that error replaced the work's own, and the next harvest in this process (a
    code server, a second command in one interpreter) waited an hour for itself."""
    lock = HarvesterLock(engine)
    gone = sa.exc.OperationalError("DELETE", {}, Exception("server closed the connection"))

    def refused(harvester_id: str, owner: str) -> None:
        raise gone

    with monkeypatch.context() as patch:
        patch.setattr(lock, "release", refused)
        with pytest.raises(ValueError, match="the work's own error"), lock.hold("h"):
            raise ValueError("the work's own error")
    assert HarvesterLock(engine).try_acquire("h", "next-run")  # at once, not after an hour
