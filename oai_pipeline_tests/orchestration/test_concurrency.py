"""One writer per harvester: the run tag limit of the shipped dagster.yaml, and the lease."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.remote_origin import RegisteredCodeLocationOrigin, RemoteRepositoryOrigin
from dagster._core.test_utils import create_run_for_test
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon
from dagster._utils.tags import TagConcurrencyLimitsCounter, is_valid_tag_key

from oai_pipeline.defs import run_coordinator
from oai_pipeline.defs.assets import SOURCE_POOL, harvest_assets, raw_oai_xml
from oai_pipeline.defs.checks import harvest_checks
from oai_pipeline.defs.launch import (
    HARVESTER_TAG,
    RANGE_END_TAG,
    RANGE_START_TAG,
    dagster_instance,
    range_tags,
)
from oai_pipeline.defs.partitions import (
    HARVESTER,
    SOURCE_TAG,
    harvesters_of,
    one_value_key,
    partition_key,
    several_tag,
)
from oai_pipeline.defs.resources import HarvestOptions, PipelineResource
from oai_pipeline.defs.run_coordinator import HarvestRunCoordinator
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.records import generate_datacite_records
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline_tests.support import register, shifted_sample_records, target_by_source

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture
def shipped_instance() -> Iterator[dg.DagsterInstance]:
    """A test instance configured by the shipped dagster.yaml."""
    config = yaml.safe_load((PROJECT / "dagster.yaml").read_text())
    with dg.instance_for_test(overrides=config) as instance:
        yield instance


def _run(instance: dg.DagsterInstance, tags: dict[str, str]) -> dg.DagsterRun:
    return instance.create_run_for_job(dg.GraphDefinition("noop").to_job(), tags=tags)


def test_the_shipped_config_allows_one_run_per_harvester(
    shipped_instance: dg.DagsterInstance,
) -> None:
    config = shipped_instance.get_concurrency_config()
    queue = config.run_queue_config
    assert queue.max_concurrent_runs >= 2
    assert {
        "key": HARVESTER_TAG,
        "limit": 1,
        "value": {"applyLimitPerUniqueValue": True},
    } in queue.tag_concurrency_limits
    assert config.pool_config.default_pool_limit >= 1
    assert raw_oai_xml.op.pool == SOURCE_POOL  # the global cap on concurrent source requests

    # what the queued-run daemon decides with these limits while an alpha run is in progress
    alpha = _run(shipped_instance, range_tags("alpha", "2024-01-01", "2024-01-31"))
    counter = TagConcurrencyLimitsCounter(queue.tag_concurrency_limits, [alpha])
    second_alpha = _run(shipped_instance, range_tags("alpha", "2024-02-01", "2024-02-29"))
    beta = _run(shipped_instance, range_tags("beta", "2024-01-01", "2024-01-31"))
    assert counter.is_blocked(second_alpha)  # one writer per harvester
    assert not counter.is_blocked(beta)  # harvesters side by side


def test_the_shipped_config_queues_runs_of_one_server(
    shipped_instance: dg.DagsterInstance,
) -> None:
    """Scheduled runs carry their source's server: two harvesters of one server (Zenodo
    communities) run one after the other, harvesters of other servers side by side."""
    queue = shipped_instance.get_concurrency_config().run_queue_config
    zenodo = "https://zenodo.org/oai2d"
    first = _run(shipped_instance, range_tags("zenodo-a", "2024-01-01", "2024-01-31", zenodo))
    counter = TagConcurrencyLimitsCounter(queue.tag_concurrency_limits, [first])
    same_server = _run(shipped_instance, range_tags("zenodo-b", "2024-01-01", "2024-01-31", zenodo))
    arxiv = _run(
        shipped_instance,
        range_tags("arxiv", "2024-01-01", "2024-01-31", "https://export.arxiv.org/oai2"),
    )
    assert counter.is_blocked(same_server)
    assert not counter.is_blocked(arxiv)


def test_a_run_launched_in_the_ui_is_queued_by_its_harvester_and_server(
    shipped_instance: dg.DagsterInstance, settings: Settings
) -> None:
    """A UI launch names its partitions only; the shipped run coordinator tags it, so a
    second run of the harvester (or of its server) waits in the queue, not in a run slot."""
    zenodo = "https://zenodo.org/oai2d"
    register(settings, zenodo, harvester_id="zenodo-a")
    register(settings, zenodo, harvester_id="zenodo-b")
    register(settings, "https://export.arxiv.org/oai2", harvester_id="arxiv")
    shipped_instance.add_dynamic_partitions(HARVESTER, ["arxiv", "zenodo-a", "zenodo-b"])
    assert isinstance(shipped_instance.run_coordinator, HarvestRunCoordinator)

    def launched_in_the_ui(tags: dict[str, str]) -> dg.DagsterRun:
        run = _ui_run(shipped_instance, tags)
        _submit(shipped_instance, run)
        stored = shipped_instance.get_run_by_id(run.run_id)
        assert stored is not None and stored.status is dg.DagsterRunStatus.QUEUED
        return stored

    one_key = launched_in_the_ui(
        {"dagster/partition": str(partition_key("zenodo-a", "2024-01-02"))}
    )
    assert one_key.tags[HARVESTER_TAG] == "zenodo-a"
    assert one_key.tags[SOURCE_TAG] == "zenodo.org"
    both = {  # a backfill range over the two harvesters of one server
        RANGE_START_TAG: str(partition_key("zenodo-a", "2024-01-01")),
        RANGE_END_TAG: str(partition_key("zenodo-b", "2024-01-31")),
    }
    shared_server = launched_in_the_ui(both)
    assert shared_server.tags[HARVESTER_TAG] == "zenodo-a+zenodo-b"
    assert shared_server.tags[SOURCE_TAG] == "zenodo.org"
    arxiv = launched_in_the_ui({"dagster/partition": str(partition_key("arxiv", "2024-01-02"))})

    queue = shipped_instance.get_concurrency_config().run_queue_config
    counter = TagConcurrencyLimitsCounter(queue.tag_concurrency_limits, [one_key])
    again = launched_in_the_ui({"dagster/partition": str(partition_key("zenodo-a", "2024-01-03"))})
    assert counter.is_blocked(again)
    assert counter.is_blocked(shared_server)
    assert not counter.is_blocked(arxiv)
    # a run that is not a harvest's is queued as it was
    other = launched_in_the_ui({"team": "x"}).tags
    assert HARVESTER_TAG not in other and SOURCE_TAG not in other


def test_a_ui_run_keeps_its_harvester_tag_when_the_state_store_does_not_answer(
    shipped_instance: dg.DagsterInstance,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The server tag needs the harvester's URL from the state store; the harvester tag only
    the run's partition. A state store down at launch (a restarting PostgreSQL) cost the run
    both, so a second run of the harvester started beside it and waited for the lease in a
    run slot. The launch never fails for it."""
    garbage = tmp_path / "state.db"
    garbage.write_bytes(b"not a database" * 100)
    monkeypatch.setenv("OAI_PIPELINE_STATE_DB_URL", f"sqlite:///{garbage}")
    shipped_instance.add_dynamic_partitions(HARVESTER, ["zenodo-a"])
    run = _ui_run(
        shipped_instance, {"dagster/partition": str(partition_key("zenodo-a", "2024-01-02"))}
    )
    _submit(shipped_instance, run)

    stored = shipped_instance.get_run_by_id(run.run_id)
    assert stored is not None and stored.status is dg.DagsterRunStatus.QUEUED
    assert stored.tags[HARVESTER_TAG] == "zenodo-a"
    assert SOURCE_TAG not in stored.tags
    assert f"run {run.run_id} queued without its server tag" in caplog.text


def _ui_run(instance: dg.DagsterInstance, tags: dict[str, str]) -> dg.DagsterRun:
    """A run as the webserver creates it: of a job of a code location, not yet started."""
    location = RemoteRepositoryOrigin(
        RegisteredCodeLocationOrigin("oai_pipeline"), "__repository__"
    )
    return create_run_for_test(
        instance,
        job_name="harvest_job",
        tags=tags,
        status=dg.DagsterRunStatus.NOT_STARTED,
        remote_job_origin=location.get_job_origin("harvest_job"),
    )


def _submit(instance: dg.DagsterInstance, run: dg.DagsterRun) -> None:
    """What the webserver does with a run launched in the UI."""
    instance.run_coordinator.submit_run(dg.SubmitRunContext(run, workspace=None))  # type: ignore[arg-type]


def test_a_range_run_without_the_tag_waits_for_the_harvester_lease(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    """A UI backfill carries no harvester tag: the lease in the state store serialises its
    writers, while another harvester runs side by side."""
    other = generate_datacite_records(
        6, start=datetime(2024, 1, 3, tzinfo=UTC), span_days=10, prefixes=("oai_datacite",)
    )
    with (
        OAIEndpoint(shifted_sample_records(), page_size=4) as alpha_source,
        OAIEndpoint(other, page_size=4) as beta_source,
    ):
        register(settings, alpha_source.base_url, harvester_id="alpha")
        register(settings, beta_source.base_url, harvester_id="beta")
        instance.add_dynamic_partitions(HARVESTER, ["alpha", "beta"])
        holding, beta_done = threading.Event(), threading.Event()
        released_at: list[datetime] = []

        def another_writer_of_alpha() -> None:
            with Services(settings) as services, services.harvester_lock.hold("alpha"):
                holding.set()
                beta_done.wait(60)
                time.sleep(4)  # longer than alpha's whole run takes when it need not wait
                released_at.append(datetime.now(UTC))

        holder = threading.Thread(target=another_writer_of_alpha, daemon=True)
        holder.start()
        assert holding.wait(10)

        assert _materialize(instance, "beta").success  # not held up by alpha's lease
        assert not released_at
        beta_done.set()
        alpha = _materialize(instance, "alpha")
        holder.join(30)

    assert alpha.success
    assert set(target_by_source(settings, "alpha")) == {
        r.identifier
        for r in shifted_sample_records()
        if not r.deleted and "oai_datacite" in r.metadata
    }
    with Services(settings) as services:
        alpha_runs = services.state.list_runs(harvester_id="alpha")
    assert alpha_runs and all(run["status"] == "succeeded" for run in alpha_runs)
    for run in alpha_runs:  # alpha's sweep and writes came after the other writer let go
        finished = datetime.strptime(run["finished_at"], "%Y-%m-%dT%H:%M:%S.%fZ")
        assert finished.replace(tzinfo=UTC) >= released_at[0]


def _materialize(instance: dg.DagsterInstance, harvester_id: str) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [*harvest_assets, *harvest_checks],
        instance=instance,
        resources={"pipeline": PipelineResource(), "harvest_options": HarvestOptions()},
        tags={
            RANGE_START_TAG: str(partition_key(harvester_id, "2024-01-01")),
            RANGE_END_TAG: str(partition_key(harvester_id, "2024-01-15")),
        },
    )


def _submit_while_held(
    instance: dg.DagsterInstance, settings: Settings, statements: list[str]
) -> dg.DagsterRun:
    """A UI run of zenodo-a submitted while `statements` hold the SQLite state store."""
    register(settings, "https://zenodo.org/oai2d", harvester_id="zenodo-a")
    instance.add_dynamic_partitions(HARVESTER, ["zenodo-a"])
    state_db = sqlite3.connect(settings.state_db_url.removeprefix("sqlite:///"))
    state_db.isolation_level = None
    for statement in statements:
        state_db.execute(statement)
    try:
        run = _ui_run(instance, {"dagster/partition": str(partition_key("zenodo-a", "2024-01-02"))})
        _submit(instance, run)
    finally:
        state_db.execute("ROLLBACK")
        state_db.close()
    return run


def test_a_ui_run_gets_its_server_tag_while_a_harvest_holds_the_state_store(
    shipped_instance: dg.DagsterInstance, settings: Settings
) -> None:
    """A harvest holds the state store's write lock for each of its writes. The coordinator,
    in the webserver's launch, opened the store as a writer (schema check) and waited up to
    60 s on that lock, then queued the run without its server tag; it only reads."""
    # what a harvest's write holds while it runs
    run = _submit_while_held(shipped_instance, settings, ["BEGIN IMMEDIATE"])
    stored = shipped_instance.get_run_by_id(run.run_id)
    assert stored is not None and stored.status is dg.DagsterRunStatus.QUEUED
    assert stored.tags[HARVESTER_TAG] == "zenodo-a"
    assert stored.tags[SOURCE_TAG] == "zenodo.org"


def test_a_ui_run_is_queued_in_bounded_time_when_the_state_store_cannot_be_read(
    shipped_instance: dg.DagsterInstance,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A state store that even a reader must wait for (a process holding SQLite's exclusive
    lock) costs the run its server tag after the coordinator's short wait, not the
    launch: the run is queued with its harvester tag and the reason logged."""
    monkeypatch.setattr(run_coordinator, "STATE_STORE_TIMEOUT_SECONDS", 0.1)
    run = _submit_while_held(
        shipped_instance, settings, ["PRAGMA locking_mode = EXCLUSIVE", "BEGIN EXCLUSIVE"]
    )
    stored = shipped_instance.get_run_by_id(run.run_id)
    assert stored is not None and stored.status is dg.DagsterRunStatus.QUEUED
    assert stored.tags[HARVESTER_TAG] == "zenodo-a"
    assert SOURCE_TAG not in stored.tags
    assert f"run {run.run_id} queued without its server tag" in caplog.text
    assert "database is locked" in caplog.text


def test_runs_over_the_same_harvesters_queue_one_after_the_other(
    shipped_instance: dg.DagsterInstance, settings: Settings
) -> None:
    """A UI backfill of a few windows of many harvesters is cut by Dagster into one run per
    window, each over all the harvesters. Untagged, those runs filled every run slot, each
    waiting for the same harvesters' leases, and escaped the per-server limit. Tagged with the
    harvesters (and servers) they share, they queue one after the other, and the sensors,
    schedules and pruning still read each harvester of them."""
    register(settings, "https://zenodo.org/oai2d", harvester_id="zenodo-a")
    register(settings, "https://export.arxiv.org/oai2", harvester_id="arxiv")
    register(settings, "https://example.org/oai", harvester_id="other")
    shipped_instance.add_dynamic_partitions(HARVESTER, ["zenodo-a", "arxiv", "other"])

    def backfill_run(day: str) -> dg.DagsterRun:  # one window of zenodo-a and arxiv
        run = _ui_run(
            shipped_instance,
            {
                RANGE_START_TAG: str(partition_key("zenodo-a", day)),
                RANGE_END_TAG: str(partition_key("arxiv", day)),
                "dagster/backfill": "abcdefgh",
            },
        )
        _submit(shipped_instance, run)
        stored = shipped_instance.get_run_by_id(run.run_id)
        assert stored is not None and stored.status is dg.DagsterRunStatus.QUEUED
        return stored

    first, second = backfill_run("2024-01-02"), backfill_run("2024-01-03")
    assert first.tags[HARVESTER_TAG] == "arxiv+zenodo-a"
    assert first.tags[SOURCE_TAG] == "export.arxiv.org+zenodo.org"
    assert harvesters_of(first.tags, list) == {"zenodo-a", "arxiv"}

    queue = shipped_instance.get_concurrency_config().run_queue_config
    counter = TagConcurrencyLimitsCounter(queue.tag_concurrency_limits, [first])
    assert counter.is_blocked(second)
    other = _ui_run(
        shipped_instance, {"dagster/partition": str(partition_key("other", "2024-01-02"))}
    )
    _submit(shipped_instance, other)
    stored_other = shipped_instance.get_run_by_id(other.run_id)
    assert stored_other is not None and not counter.is_blocked(stored_other)


def test_a_long_list_of_harvesters_makes_a_short_tag_value() -> None:
    many = {f"harvester-{n:03d}" for n in range(50)}
    value = several_tag(many)
    assert len(value) < 80
    assert value.startswith("harvester-000+48-more+harvester-049+")
    assert value == several_tag(set(many))
    assert value != several_tag(many - {"harvester-010"})


def _dequeued(instance: dg.DagsterInstance) -> set[str]:
    """The queued runs the daemon would launch now: its own pass over the queue, with the
    instance's run queue config as the daemon reads it each iteration."""
    daemon = QueuedRunCoordinatorDaemon(interval_seconds=5)
    runs = daemon._get_runs_to_dequeue(instance, instance.get_concurrency_config(), None)  # noqa: SLF001
    return {run.run_id for run in runs}


@pytest.mark.parametrize("several_first", [True, False])
def test_a_run_over_several_harvesters_and_a_run_of_one_of_them_queue_one_after_the_other(
    shipped_instance: dg.DagsterInstance, settings: Settings, several_first: bool
) -> None:
    """A UI backfill of one window of alpha and beta is one run tagged `alpha+beta`: a tag
    holds one value, so it neither held back nor was held back by a run of alpha alone.
    Both left the queue; the later one waited for alpha's lease in a run slot (up to an
    hour, then failed). Each harvester (and server) of a run now holds its own limit."""
    for harvester_id in ("alpha", "beta", "gamma"):
        register(settings, f"https://{harvester_id}.example.org/oai", harvester_id=harvester_id)
    register(settings, "https://beta.example.org/oai", harvester_id="beta-set")  # beta's server
    shipped_instance.add_dynamic_partitions(HARVESTER, ["alpha", "beta", "gamma", "beta-set"])

    def queued(tags: dict[str, str]) -> dg.DagsterRun:
        run = _ui_run(shipped_instance, tags)
        _submit(shipped_instance, run)
        return run

    def several() -> dg.DagsterRun:
        return queued(
            {
                RANGE_START_TAG: str(partition_key("alpha", "2024-01-02")),
                RANGE_END_TAG: str(partition_key("beta", "2024-01-02")),
            }
        )

    def alpha_alone() -> dg.DagsterRun:  # as the CLI and the schedules tag it
        return queued(range_tags("alpha", "2024-01-03", "2024-01-09"))

    first, second = (several(), alpha_alone()) if several_first else (alpha_alone(), several())
    gamma = queued({"dagster/partition": str(partition_key("gamma", "2024-01-02"))})
    beta_server = queued({"dagster/partition": str(partition_key("beta-set", "2024-01-02"))})

    # alpha's second run waits in the queue; so does beta-set's behind the run over beta
    launched = {first.run_id, gamma.run_id} | (set() if several_first else {beta_server.run_id})
    assert _dequeued(shipped_instance) == launched
    assert second.run_id not in launched


def test_limits_left_under_concurrency_runs_are_named_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An older dagster.yaml kept in DAGSTER_HOME sets the limits under `concurrency: runs:`,
    which replace the coordinator's own: the daemon says so, once."""
    config = yaml.safe_load((PROJECT / "dagster.yaml").read_text())
    limits = config["run_coordinator"].pop("config")["tag_concurrency_limits"]
    config["concurrency"]["runs"]["tag_concurrency_limits"] = limits
    with dg.instance_for_test(overrides=config) as instance:
        instance.get_concurrency_config()
        instance.get_concurrency_config()
    assert caplog.text.count("tag_concurrency_limits under `concurrency: runs:`") == 1
    assert "launched in the UI" not in caplog.text  # the coordinator tags those


def test_a_ui_run_of_a_key_with_its_dimensions_swapped_is_queued_untagged_and_logged(
    shipped_instance: dg.DagsterInstance, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """A key typed window first (`2024-01-01|sample`; the key is harvester|window) was tagged
    with the harvester `2024-01-01`: a limit of no harvester, and the runs of the sensors'
    and schedules' reading. It is queued untagged now, and the log says what was meant."""
    register(settings, "https://sample.example.org/oai", harvester_id="sample")
    shipped_instance.add_dynamic_partitions(HARVESTER, ["sample"])
    run = _ui_run(
        shipped_instance,
        {
            "dagster/partition": "2024-01-01|sample",
            "dagster/partition/harvester": "2024-01-01",
            "dagster/partition/window": "sample",
        },
    )
    _submit(shipped_instance, run)

    stored = shipped_instance.get_run_by_id(run.run_id)
    assert stored is not None and stored.status is dg.DagsterRunStatus.QUEUED
    assert not [key for key in stored.tags if key.startswith("oai_pipeline/")]
    assert (
        f"run {run.run_id} queued without harvester tags: partition key '2024-01-01|sample' "
        "is not harvester|window (did you mean 'sample|2024-01-01'?)"
    ) in caplog.text


@pytest.mark.parametrize(
    ("tag_key", "values"),
    [
        (SOURCE_TAG, ["localhost:8765", "localhost:8766", "localhost_8765"]),
        (HARVESTER_TAG, ["a" * 60, "a" * 61, "zenodo"]),
    ],
)
def test_each_harvester_and_server_key_is_one_dagster_takes(
    tag_key: str, values: list[str]
) -> None:
    """A server's port (`:`) or a long harvester id made a key Dagster deprecates (and may
    refuse): the key names such a value by its tidied start and a digest, one per value."""
    keys = [one_value_key(tag_key, value) for value in values]
    assert all(is_valid_tag_key(key) for key in keys), keys
    assert len(set(keys)) == len(keys)
    assert one_value_key(HARVESTER_TAG, "zenodo") == "oai_pipeline/harvester.zenodo"


def test_the_daemon_pass_reads_all_run_tags_once_a_minute(
    shipped_instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-harvester limits come from the tag keys of every run ever made, a scan of all
    their tags: read once a minute, not at each daemon pass (every 5 s); a harvester
    registered meanwhile, or the server of a run queued meanwhile, is held to its limit at
    once."""
    reads: list[int] = []
    all_keys = shipped_instance.get_run_tag_keys
    monkeypatch.setattr(shipped_instance, "get_run_tag_keys", lambda: reads.append(1) or all_keys())
    clock = [1000.0]
    monkeypatch.setattr(run_coordinator.time, "monotonic", lambda: clock[0])
    register(settings, "https://alpha.example.org/oai", harvester_id="alpha")
    shipped_instance.add_dynamic_partitions(HARVESTER, ["alpha"])

    def limited_keys() -> set[str]:
        limits = shipped_instance.get_concurrency_config().run_queue_config.tag_concurrency_limits
        return {limit["key"] for limit in limits}

    assert one_value_key(HARVESTER_TAG, "alpha") in limited_keys()
    shipped_instance.add_dynamic_partitions(HARVESTER, ["beta"])
    clock[0] += 30
    new_server = one_value_key(SOURCE_TAG, "gamma.example.org")
    _submit(shipped_instance, _ui_run(shipped_instance, {new_server: "gamma.example.org"}))
    assert {one_value_key(HARVESTER_TAG, "beta"), new_server} <= limited_keys()
    assert len(reads) == 1
    clock[0] += 31
    limited_keys()
    assert len(reads) == 2


def _older_dagster_yaml() -> dict:
    """The shipped dagster.yaml as versions before the run coordinator shipped it (and as it
    stays in DAGSTER_HOME on an upgrade): no run_coordinator block, the harvest limits under
    `concurrency: runs:`."""
    config = yaml.safe_load((PROJECT / "dagster.yaml").read_text())
    limits = config.pop("run_coordinator")["config"]["tag_concurrency_limits"]
    config["concurrency"]["runs"]["tag_concurrency_limits"] = limits
    return config


def test_an_older_dagster_yaml_is_named_by_the_commands_that_open_the_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """It names no run coordinator, so the coordinator's own warning never comes: the CLI's
    opening of the instance (`demo`, `harvest --use-job`) says it instead."""
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(_older_dagster_yaml()))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with dagster_instance() as instance:
        assert not isinstance(instance.run_coordinator, HarvestRunCoordinator)
    assert caplog.text.count("tag_concurrency_limits under `concurrency: runs:`") == 1
    assert "runs launched in the UI" in caplog.text  # untagged: no coordinator tags them
    assert "run_coordinator: config:" in caplog.text

    caplog.clear()
    (tmp_path / "dagster.yaml").write_text((PROJECT / "dagster.yaml").read_text())
    with dagster_instance():
        pass
    assert "tag_concurrency_limits" not in caplog.text


def test_an_older_dagster_yaml_is_named_in_the_log_of_each_harvest_run(
    settings: Settings,
) -> None:
    """A run launched in the UI on such an instance waits in a run slot: its log says why."""
    with (
        dg.instance_for_test(overrides=_older_dagster_yaml()) as instance,
        OAIEndpoint(shifted_sample_records(), page_size=4) as source,
    ):
        register(settings, source.base_url, harvester_id="alpha")
        instance.add_dynamic_partitions(HARVESTER, ["alpha"])
        result = _materialize(instance, "alpha")
        assert result.success
        warnings = [
            event.message
            for event in instance.all_logs(result.run_id)
            if event.level == logging.WARNING
        ]
    assert any("tag_concurrency_limits under `concurrency: runs:`" in w for w in warnings)
