"""The shipped instance's event log: Dagster's SQLite files, connections kept open."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa
from dagster._core.events.log import EventLogEntry
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
from dagster._core.storage.event_log.base import PartitionKeyFilter

from oai_pipeline.dagster_event_log import OPEN_RUN_SHARDS, PooledSqliteEventLogStorage
from oai_pipeline.defs.assets import written_records
from oai_pipeline.defs.launch import materialize_windows
from oai_pipeline.defs.partitions import partition_key
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline_tests.support import register, shifted_sample_records

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A DAGSTER_HOME with the shipped dagster.yaml."""
    home = tmp_path / "shipped_home"
    home.mkdir()
    shutil.copy(PROJECT / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


@pytest.fixture
def instance(home: Path) -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.get() as instance:
        yield instance


def _log_entry(run_id: str, message: str) -> EventLogEntry:
    return EventLogEntry(
        error_info=None,
        level="INFO",
        user_message=message,
        run_id=run_id,
        timestamp=time.time(),
    )


def _messages(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [entry.user_message for entry in instance.all_logs(run_id)]


def _materialize(instance: dg.DagsterInstance, partition: str) -> None:
    instance.report_runless_asset_event(dg.AssetMaterialization("harvested", partition=partition))


def _materialize_and_check(instance: dg.DagsterInstance, partition: str) -> None:
    """What a run stores for a window: a tagged materialisation (Dagster indexes its data
    version) and a check's evaluation."""
    instance.report_runless_asset_event(
        dg.AssetMaterialization(
            "harvested", partition=partition, tags={"dagster/data_version": partition}
        )
    )
    instance.report_runless_asset_event(
        dg.AssetCheckEvaluation(asset_key=dg.AssetKey("harvested"), check_name="ok", passed=True)
    )


def _count_connections() -> tuple[list[int], Callable[..., None]]:
    opened: list[int] = []

    def on_connect(*_args: object) -> None:
        opened.append(1)

    return opened, on_connect


def test_the_shipped_instance_keeps_its_event_log_where_dagster_does(
    instance: dg.DagsterInstance, home: Path
) -> None:
    storage = instance.event_log_storage
    assert isinstance(storage, PooledSqliteEventLogStorage)
    _materialize(instance, "2024-01-01")
    assert (home / "history" / "runs" / "index.db").exists()


def test_without_dagster_home_the_shipped_config_loads_in_a_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`dagster dev` (or any dagster command) run in the project without DAGSTER_HOME reads
    the project's dagster.yaml and keeps the instance in a temporary folder of its own."""
    monkeypatch.delenv("DAGSTER_HOME")
    temporary = tmp_path / ".tmp_dagster_home_x"
    temporary.mkdir()
    ref = InstanceRef.from_dir(str(temporary), config_dir=str(PROJECT))
    with dg.DagsterInstance.from_ref(ref) as instance:
        assert isinstance(instance.event_log_storage, PooledSqliteEventLogStorage)
        _materialize(instance, "2024-01-01")
        assert instance.get_materialized_partitions(dg.AssetKey("harvested")) == {"2024-01-01"}
    assert (temporary / "history" / "runs" / "index.db").exists()


def test_a_home_whose_config_names_dagster_home_keeps_working(home: Path) -> None:
    """The shipped dagster.yaml once named `dagster_home: {env: DAGSTER_HOME}`; a home
    holding that copy is left as it is and still loads."""
    config = home / "dagster.yaml"
    config.write_text(
        config.read_text().replace(
            "  class: PooledSqliteEventLogStorage\n",
            "  class: PooledSqliteEventLogStorage\n  config:\n    dagster_home:\n"
            "      env: DAGSTER_HOME\n",
        )
    )
    assert "env: DAGSTER_HOME" in config.read_text()
    with dg.DagsterInstance.get() as instance:
        _materialize(instance, "2024-01-01")
    assert (home / "history" / "runs" / "index.db").exists()


def test_events_reuse_one_connection_per_database(instance: dg.DagsterInstance) -> None:
    _materialize_and_check(instance, "2024-01-01")  # creates the run shard and the index
    opened, on_connect = _count_connections()
    sa.event.listen(sa.Engine, "connect", on_connect)
    try:
        for day in range(2, 32):
            _materialize_and_check(instance, f"2024-01-{day:02d}")
    finally:
        sa.event.remove(sa.Engine, "connect", on_connect)
    # Dagster's own storage opens two a stored event and one more a "has this table?" (for
    # tags and check evaluations): 150 here.
    assert len(opened) <= 1
    assert instance.get_latest_materialization_event(dg.AssetKey("harvested")) is not None
    materialized = instance.get_materialized_partitions(dg.AssetKey("harvested"))
    assert len(materialized) == 31
    tags = instance.event_log_storage.get_event_tags_for_asset(dg.AssetKey("harvested"))
    assert len(tags) == 31  # every materialisation's tags were stored
    check = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("harvested"), "ok"), limit=100
    )
    assert len(check) == 31


def test_a_table_added_later_is_seen_at_once(instance: dg.DagsterInstance) -> None:
    storage = instance.event_log_storage
    assert storage.has_table("asset_event_tags")
    assert not storage.has_table("added_by_a_later_migration")
    with storage.index_connection() as connection:
        connection.exec_driver_sql("CREATE TABLE added_by_a_later_migration (id INTEGER)")
    assert storage.has_table("added_by_a_later_migration")


def test_a_watcher_in_another_process_sees_events_as_they_are_written(
    instance: dg.DagsterInstance, home: Path
) -> None:
    writer = PooledSqliteEventLogStorage.from_config_value(None, {"dagster_home": str(home)})
    try:
        writer.store_event(_log_entry("run-1", "first"))  # the shard exists from here on
        seen: list[str] = []
        arrived = threading.Event()

        def callback(entry: EventLogEntry, _cursor: str) -> None:
            seen.append(entry.user_message)
            if len(seen) == 4:
                arrived.set()

        instance.event_log_storage.watch("run-1", None, callback)
        # The writer's connection stays open: these go to the shard's WAL only.
        for number in range(3):
            writer.store_event(_log_entry("run-1", f"next {number}"))
            time.sleep(0.05)
        assert arrived.wait(10), seen
        assert seen == ["first", "next 0", "next 1", "next 2"]
        instance.event_log_storage.end_watch("run-1", callback)
    finally:
        writer.dispose()


def test_a_forked_child_opens_its_own_connections(instance: dg.DagsterInstance) -> None:
    storage = instance.event_log_storage
    storage.store_event(_log_entry("run-1", "from the parent"))
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def child() -> None:
        opened, on_connect = _count_connections()
        sa.event.listen(sa.Engine, "connect", on_connect)
        storage.store_event(_log_entry("run-1", "from the child"))
        send.send(len(opened))

    process = context.Process(target=child)
    process.start()
    assert receive.poll(30)
    assert receive.recv() >= 1  # not the parent's open connection
    process.join(30)
    assert process.exitcode == 0
    storage.store_event(_log_entry("run-1", "parent again"))
    assert _messages(instance, "run-1") == ["from the parent", "from the child", "parent again"]


def test_a_wipe_leaves_no_connection_to_a_removed_file(instance: dg.DagsterInstance) -> None:
    instance.event_log_storage.store_event(_log_entry("run-1", "before"))
    instance.event_log_storage.wipe()
    instance.event_log_storage.store_event(_log_entry("run-1", "after"))
    with dg.DagsterInstance.get() as fresh:  # another process's view of the files
        assert _messages(fresh, "run-1") == ["after"]


def test_only_the_recent_run_shards_stay_open(instance: dg.DagsterInstance, home: Path) -> None:
    runs = home / "history" / "runs"
    for number in range(OPEN_RUN_SHARDS + 4):
        instance.event_log_storage.store_event(_log_entry(f"run-{number}", "hello"))
    open_files = {
        os.readlink(f"/proc/self/fd/{fd}")
        for fd in os.listdir("/proc/self/fd")
        if os.path.exists(f"/proc/self/fd/{fd}")
    }
    open_shards = {
        path for path in open_files if path.startswith(str(runs)) and path.endswith(".db")
    }
    assert len(open_shards) == OPEN_RUN_SHARDS + 1  # and the index
    assert str(runs / f"run-{OPEN_RUN_SHARDS + 3}.db") in open_shards
    assert str(runs / "run-0.db") not in open_shards


def test_disposing_the_instance_checkpoints_every_shard(home: Path) -> None:
    with dg.DagsterInstance.get() as instance:
        instance.event_log_storage.store_event(_log_entry("run-1", "hello"))
        _materialize(instance, "2024-01-01")
        runs = home / "history" / "runs"
        assert list(runs.glob("*.db-wal"))  # open connections, WAL not yet copied back
    assert not list(runs.glob("*.db-wal"))


def test_an_instance_home_can_switch_storages_either_way(home: Path) -> None:
    config = home / "dagster.yaml"
    shipped = config.read_text()
    config.write_text("telemetry:\n  enabled: false\n")  # Dagster's default storage
    with dg.DagsterInstance.get() as default:
        default.event_log_storage.store_event(_log_entry("run-1", "by dagster's storage"))
        _materialize(default, "2024-01-01")
    config.write_text(shipped)
    with dg.DagsterInstance.get() as pooled:
        assert isinstance(pooled.event_log_storage, PooledSqliteEventLogStorage)
        pooled.event_log_storage.store_event(_log_entry("run-1", "by ours"))
        _materialize(pooled, "2024-01-02")
    config.write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.get() as default:
        assert not isinstance(default.event_log_storage, PooledSqliteEventLogStorage)
        assert _messages(default, "run-1") == ["by dagster's storage", "by ours"]
        materialized = default.get_materialized_partitions(dg.AssetKey("harvested"))
        assert materialized == {"2024-01-01", "2024-01-02"}


def test_commits_do_not_wait_for_an_fsync(instance: dg.DagsterInstance) -> None:
    storage = instance.event_log_storage
    storage.store_event(_log_entry("run-1", "hello"))
    for connect in (storage.index_connection, lambda: storage.run_connection("run-1")):
        with connect() as connection:
            assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_a_process_that_never_disposes_its_instance_leaves_no_wal(home: Path) -> None:
    script = (
        "import dagster as dg\n"
        "instance = dg.DagsterInstance.get()\n"
        "instance.report_runless_asset_event(dg.AssetMaterialization('harvested'))\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    runs = home / "history" / "runs"
    assert (runs / "index.db").exists()
    assert not list(runs.glob("*.db-wal"))


def test_closing_with_a_wait_gives_up_on_a_query_in_another_thread(
    instance: dg.DagsterInstance,
) -> None:
    storage = instance.event_log_storage
    storage.store_event(_log_entry("run-1", "before"))
    inside, done = threading.Event(), threading.Event()

    def query() -> None:
        with storage.index_connection():
            inside.set()
            done.wait(3)

    thread = threading.Thread(target=query)
    thread.start()
    assert inside.wait(10)
    started = time.monotonic()
    storage.close_connections(wait=0.2)  # what the exit hook does, with 5 s
    assert time.monotonic() - started < 2
    done.set()
    thread.join(10)
    storage.store_event(_log_entry("run-1", "after"))
    assert _messages(instance, "run-1") == ["before", "after"]


_DAYS = dg.DailyPartitionsDefinition(start_date="2024-01-01")


@dg.asset(partitions_def=_DAYS)
def daily(context) -> dg.MaterializeResult:  # noqa: ANN001 - Dagster reads the annotation
    return dg.MaterializeResult(metadata={"windows": len(context.partition_keys)})


def _materialize_range(instance: dg.DagsterInstance, first: str, last: str) -> None:
    result = dg.materialize(
        [daily],
        instance=instance,
        tags={
            "dagster/asset_partition_range_start": first,
            "dagster/asset_partition_range_end": last,
        },
    )
    assert result.success


def test_a_range_run_stores_its_windows_events_in_batches(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[int] = []
    store_batch = PooledSqliteEventLogStorage.store_event_batch

    def counted(self: PooledSqliteEventLogStorage, events) -> None:
        batches.append(len(events))
        store_batch(self, events)

    monkeypatch.setattr(PooledSqliteEventLogStorage, "store_event_batch", counted)
    _materialize_range(instance, "2024-01-01", "2024-01-10")
    # the planned events, then the materialisations: each window's in one batch
    assert batches == [10, 10]
    assert instance.get_materialized_partitions(dg.AssetKey("daily")) == {
        f"2024-01-{day:02d}" for day in range(1, 11)
    }
    latest = instance.get_latest_materialization_event(dg.AssetKey("daily"))
    assert latest is not None and latest.asset_materialization.metadata["windows"].value == 10


def test_a_failed_batch_stores_none_of_its_events(instance: dg.DagsterInstance) -> None:
    storage = instance.event_log_storage
    good = [_log_entry("run-1", f"event {number}") for number in range(3)]
    broken = _log_entry("run-1", "broken")._replace(timestamp="not a time")
    with pytest.raises(TypeError):  # its timestamp
        storage.store_event_batch([*good, broken])
    assert _messages(instance, "run-1") == []
    storage.store_event_batch(good)  # the storage is usable afterwards
    assert _messages(instance, "run-1") == ["event 0", "event 1", "event 2"]


def test_a_first_start_killed_while_the_index_was_made_is_completed(home: Path) -> None:
    """Killed (a harvest's first Dagster run, here) after Dagster made the index's first
    table: Dagster completes it only on the first event stored, and every run failed
    before that, adding its harvester's partition ("requires the dynamic partitions table,
    which currently does not exist")."""
    from dagster._core.storage.event_log.schema import SqlEventLogStorageTable

    index = home / "history" / "runs" / "index.db"
    index.parent.mkdir(parents=True)
    engine = sa.create_engine(f"sqlite:///{index}")
    SqlEventLogStorageTable.create(engine)  # as far as the killed start got
    engine.dispose()
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions("harvester", ["sample"])
        assert instance.get_dynamic_partitions("harvester") == ["sample"]


def test_a_range_runs_check_evaluations_are_stored_in_one_batch(
    instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each window's two check evaluations were stored one by one (730 commits to each of
    two databases for a year of daily windows): now in one batch, where the UI reads them."""
    batches: list[list[str]] = []
    store_batch = PooledSqliteEventLogStorage.store_event_batch

    def recorded(self: PooledSqliteEventLogStorage, events) -> None:
        batches.append([event.dagster_event_type for event in events])
        store_batch(self, events)

    monkeypatch.setattr(PooledSqliteEventLogStorage, "store_event_batch", recorded)
    days = [f"2024-01-{day:02d}" for day in range(2, 9)]
    with OAIEndpoint(shifted_sample_records()) as endpoint:
        register(settings, endpoint.base_url, harvester_id="alpha")
        result = materialize_windows(instance, "alpha", days[0], days[-1])
    assert result.success

    checks = [b for b in batches if dg.DagsterEventType.ASSET_CHECK_EVALUATION in b]
    assert checks == [[dg.DagsterEventType.ASSET_CHECK_EVALUATION] * 2 * len(days)]
    # stored as Dagster stores each: every window's status, this run's, in the check table
    for name in ("reconciles", "no_record_errors"):
        for day in days:
            [record] = instance.event_log_storage.get_asset_check_execution_history(
                dg.AssetCheckKey(written_records.key, name),
                limit=1,
                partition_filter=PartitionKeyFilter(key=str(partition_key("alpha", day))),
            )
            assert record.run_id == result.run_id
            assert record.status == AssetCheckExecutionRecordStatus.SUCCEEDED
    # and in the run's log, once each
    logged = instance.all_logs(result.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    partitions = [entry.dagster_event.event_specific_data.partition for entry in logged]
    assert sorted(p for p in partitions if p) == sorted(
        str(partition_key("alpha", day)) for day in days for _ in range(2)
    )
