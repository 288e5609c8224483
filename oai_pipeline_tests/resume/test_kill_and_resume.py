"""A harvest killed with SIGKILL at several points, then resumed, ends like an uninterrupted one.

Nothing lost, nothing duplicated, and a cap that still holds.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from oai_pipeline.sample_endpoint.faults import Faults
from oai_pipeline.sample_endpoint.records import generate_datacite_records
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings, load_settings
from oai_pipeline.state.store import StateStore
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.support import CLI, cli_killed_when, register, use_plugin

HARVEST = ["harvest", "gen", "--since", "2024-01-01", "--progress-every", "50"]
RECORDS = generate_datacite_records(
    1500, seed=7, start=datetime(2024, 1, 5, tzinfo=UTC), span_days=2
)
PAGE_SIZE = 100


# A writer that takes its time, installed as a plug-in, so a kill lands inside the write
# stage every time (the real writer finishes 1,500 records before a poll sees it). Slow
# only in the attempt to kill (SLOW_WRITER_SECONDS, set by `_kill_when`): the harvests
# before and after it would spend seconds sleeping for nothing.
SLOW_WRITER_SECONDS = "0.02"
SLOW_WRITER = """
import os
import time

from oai_pipeline.targets.embedded.writer import EmbeddedWriter


class SlowWriter(EmbeddedWriter):
    def apply(self, harvester_id, writes):
        time.sleep(float(os.environ.get("SLOW_WRITER_SECONDS", "0")))
        return super().apply(harvester_id, writes)
"""


@pytest.fixture
def slow_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = use_plugin(
        monkeypatch,
        tmp_path / "site",
        "slow_writer",
        SLOW_WRITER,
        {"oai_pipeline.writers": {"slow-service": "slow_writer:SlowWriter"}},
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    return site


@pytest.fixture(scope="module")
def endpoint() -> Iterator[OAIEndpoint]:
    with OAIEndpoint(RECORDS, page_size=PAGE_SIZE) as endpoint:
        yield endpoint
        endpoint.faults = Faults()


def _settings(home: Path) -> Settings:
    settings = load_settings({"OAI_PIPELINE_HOME": str(home)})
    settings.home.mkdir(parents=True, exist_ok=True)
    return settings


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OAI_PIPELINE_")}
    return {**env, "OAI_PIPELINE_HOME": str(home)}


def _run(home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *HARVEST, *extra], env=_env(home), capture_output=True, text=True, timeout=300
    )


def _harvest(home: Path, *extra: str) -> None:
    result = _run(home, *extra)
    assert result.returncode == 0, result.stdout + result.stderr


def _snapshot(settings: Settings) -> tuple[int, set[tuple]]:
    repository = EmbeddedRepository(settings.target_db_url)
    try:
        rows = repository.list(harvester="gen")
    finally:
        repository.close()
    return len(rows), {(r["source_identifier"], r["state"], r["doi"], r["title"]) for r in rows}


def _revisions(settings: Settings) -> set[int]:
    repository = EmbeddedRepository(settings.target_db_url)
    try:
        return {r["revision"] for r in repository.list(harvester="gen")}
    finally:
        repository.close()


def _staged(settings: Settings) -> int:
    with StateStore(settings.state_db_url) as state:
        runs = state.list_runs(harvester_id="gen", limit=1)
    return int(runs[0]["staged"]) if runs else 0


def _target_count(settings: Settings) -> int:
    if not Path(settings.target_db_url.removeprefix("sqlite:///")).exists():
        return 0
    repository = EmbeddedRepository(settings.target_db_url)
    try:
        return repository.stats("gen")["records"]
    finally:
        repository.close()


def _kill_when(home: Path, condition: Callable[[], bool], *extra: str) -> None:
    env = {**_env(home), "SLOW_WRITER_SECONDS": SLOW_WRITER_SECONDS}
    cli_killed_when([*HARVEST, *extra], condition, env)


@pytest.fixture(scope="module")
def baseline(
    endpoint: OAIEndpoint, tmp_path_factory: pytest.TempPathFactory
) -> tuple[int, set[tuple]]:
    settings = _settings(tmp_path_factory.mktemp("uninterrupted"))
    register(settings, endpoint.base_url, harvester_id="gen")
    _harvest(settings.home)
    count, snapshot = _snapshot(settings)
    assert count == sum(1 for r in RECORDS if not r.deleted)
    return count, snapshot


def _interrupted(
    endpoint: OAIEndpoint,
    tmp_path: Path,
    name: str,
    batch_size: int = 100,
    writer: str | None = None,
) -> Settings:
    settings = _settings(tmp_path / name)
    register(settings, endpoint.base_url, harvester_id="gen", batch_size=batch_size, writer=writer)
    return settings


def _slowly_writing(endpoint: OAIEndpoint, tmp_path: Path, name: str) -> Settings:
    """Small, slow write batches: a kill lands between two of them."""
    return _interrupted(endpoint, tmp_path, name, batch_size=5, writer='slow-service{model:"rdm"}')


@contextmanager
def _slow_after(endpoint: OAIEndpoint, pages: int) -> Iterator[None]:
    """Pages after the first `pages` take 0.5 s each, so a poll sees the kill point before
    the harvest has run past it (a fast harvest stages all 1,500 records between two polls)."""
    first_slow = endpoint.request_count + 2 + pages  # Identify, then the list pages
    endpoint.faults = Faults(slow_on={first_slow + n: 0.5 for n in range(len(RECORDS))})
    try:
        yield
    finally:
        endpoint.faults = Faults()


def test_killed_mid_page(endpoint: OAIEndpoint, tmp_path: Path, baseline) -> None:
    settings = _interrupted(endpoint, tmp_path, "mid_page")
    start = endpoint.request_count
    slow_request = start + 5  # Identify, then the 4th list page answers slowly
    endpoint.faults = Faults(slow_on={slow_request: 5.0})

    try:
        _kill_when(settings.home, lambda: endpoint.request_count >= slow_request)
    finally:
        endpoint.faults = Faults()
    assert 0 < _staged(settings) < len(RECORDS)
    _harvest(settings.home)

    assert _snapshot(settings) == baseline


def test_killed_between_pages(endpoint: OAIEndpoint, tmp_path: Path, baseline) -> None:
    settings = _interrupted(endpoint, tmp_path, "between_pages")

    with _slow_after(endpoint, pages=3):
        _kill_when(settings.home, lambda: _staged(settings) >= 3 * PAGE_SIZE)
    assert _staged(settings) < len(RECORDS)
    _harvest(settings.home)

    assert _snapshot(settings) == baseline


def test_killed_mid_write(
    endpoint: OAIEndpoint, tmp_path: Path, baseline, slow_writer: Path
) -> None:
    settings = _slowly_writing(endpoint, tmp_path, "mid_write")

    _kill_when(settings.home, lambda: _target_count(settings) >= 100)
    # killed inside the write stage: some target records written, the run not finished
    assert 100 <= _target_count(settings) < baseline[0]
    with StateStore(settings.state_db_url) as state:
        assert state.list_runs(harvester_id="gen", limit=1)[0]["status"] == "running"
    resumed = _run(settings.home, "--json")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr

    assert _snapshot(settings) == baseline
    # what the killed attempt wrote is not written again (no new revision), and the
    # report accounts for every record once, the killed attempt's by what it did
    assert _revisions(settings) == {1}
    report = json.loads(resumed.stdout)
    assert report["created"] + report["updated"] == baseline[0]


def test_a_resume_that_may_not_reclaim_the_running_records_does_not_succeed(
    endpoint: OAIEndpoint, tmp_path: Path, baseline, slow_writer: Path
) -> None:
    settings = _slowly_writing(endpoint, tmp_path, "stale_minutes")
    _kill_when(settings.home, lambda: _target_count(settings) >= 100)

    # the records the dead attempt claimed are minutes old, not 30: not reclaimed
    result = _run(settings.home, "--reset-stale-running-minutes", "30")
    assert result.returncode == 1
    assert "left running by an earlier attempt" in result.stderr
    assert "Traceback" not in result.stderr
    with StateStore(settings.state_db_url) as state:
        run = state.list_runs(harvester_id="gen", limit=1)[0]
    assert run["status"] == "failed"  # not succeeded: the next run resumes it
    _harvest(settings.home)

    assert _snapshot(settings) == baseline
    assert _revisions(settings) == {1}


def test_a_resumed_update_all_run_rewrites_every_record_once(
    endpoint: OAIEndpoint, tmp_path: Path, baseline, slow_writer: Path
) -> None:
    settings = _slowly_writing(endpoint, tmp_path, "update_all")
    _harvest(settings.home)
    assert _revisions(settings) == {1}

    _kill_when(settings.home, lambda: 2 in _revisions(settings), "--update-all")
    assert _revisions(settings) == {1, 2}  # killed half way through the rewrite
    _harvest(settings.home)  # the same window, without --update-all: resumes the run

    assert _snapshot(settings) == baseline
    assert _revisions(settings) == {2}  # each record rewritten once, none twice, none missed


def test_a_cap_holds_across_a_kill(endpoint: OAIEndpoint, tmp_path: Path) -> None:
    settings = _interrupted(endpoint, tmp_path, "capped")
    cap = 250

    with _slow_after(endpoint, pages=2):
        _kill_when(
            settings.home, lambda: _staged(settings) >= 2 * PAGE_SIZE, "--max-records", str(cap)
        )
    _harvest(settings.home, "--max-records", str(cap))

    assert _staged(settings) == cap
    with StateStore(settings.state_db_url) as state:
        run = state.list_runs(harvester_id="gen", limit=1)[0]
        harvested = state.record_totals("gen")
    assert run["cap_reached"] is True
    assert harvested["total"] == cap  # exactly the cap, across the kill
    count, snapshot = _snapshot(settings)
    assert count == len(snapshot) == harvested["live"]  # every staged live record, once
