"""Helpers for tests that harvest the shipped endpoint end to end."""

from __future__ import annotations

import dataclasses
import importlib
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from lxml import etree

from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.harvesters.plugins import RDM_MODEL
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.oai.reader import OAIPMHReader
from oai_pipeline.oai.windows import INDEXING_OVERLAP
from oai_pipeline.pipeline import discover as discover_module
from oai_pipeline.pipeline.scope import HarvestScope, Window
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.records import (
    SAMPLE_FIRST_DAY,
    EndpointRecord,
    load_sample_records,
)
from oai_pipeline.settings import Settings
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.oai.fake_source import BASE_URL, FakeSource

# Tests move the sample into the partition grid (which starts 2024-01-01) so that a
# harvest spans several windows.
SHIFTED_FIRST_DAY = date(2024, 1, 3)


def settled_midnight() -> datetime:
    """The latest midnight (UTC) before what a rerun's catch-up list looks back on
    (INDEXING_OVERLAP before it began, and some slack). Records dated up to it are never
    listed again by a catch-up list, whatever the time of day: dated up to today's midnight,
    they were, in the first hours of a day (a test run at 00:30 UTC listed 12, not 9)."""
    moment = datetime.now(UTC) - INDEXING_OVERLAP - timedelta(minutes=30)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def shifted_sample_records(first_day: date = SHIFTED_FIRST_DAY) -> list[EndpointRecord]:
    offset = timedelta(days=(first_day - SAMPLE_FIRST_DAY).days)
    return [
        dataclasses.replace(r, datestamp=r.datestamp + offset, set_specs=list(r.set_specs))
        for r in load_sample_records()
    ]


def window_keys(first: date, last: date) -> list[str]:
    return [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]


def register(
    settings: Settings,
    base_url: str,
    *,
    harvester_id: str = "sample",
    metadata_prefix: str = "oai_datacite",
    writer: str | None = None,
    transformer: str | None = None,
    loader: str = "oai-pmh",
    batch_size: int = 100,
    enabled: bool = True,
    setspec: str | None = None,
) -> Harvester:
    harvester = Harvester(
        batch_size=batch_size,
        setspec=setspec,
        id=harvester_id,
        loader=loader,
        name="test harvester",
        base_url=base_url,
        metadata_prefix=metadata_prefix,
        transformers=[transformer or RDM_MODEL.transformer],
        writers=[writer or RDM_MODEL.writer],
        enabled=enabled,
    )
    with Services(settings) as services:
        HarvesterRegistry(services.state).upsert(harvester)
    return harvester


def live_records(records: list[EndpointRecord], prefix: str) -> list[EndpointRecord]:
    return [r for r in records if not r.deleted and prefix in r.metadata]


def deleted_records(records: list[EndpointRecord], prefix: str) -> list[EndpointRecord]:
    return [r for r in records if r.deleted and (prefix in r.metadata or not r.metadata)]


def expected_title_and_doi(record: EndpointRecord, prefix: str) -> tuple[str, str | None]:
    """Read the title and DOI straight from the served XML, independently of the importer."""
    root = etree.fromstring(record.metadata[prefix])
    title = root.xpath("string((//*[local-name()='title'])[1])").strip()
    doi = root.xpath("string((//*[local-name()='identifier'][@identifierType='DOI'])[1])")
    return title, (doi.strip().lower() or None)


def target_by_source(settings: Settings, harvester_id: str) -> dict[str, dict]:
    repository = EmbeddedRepository(settings.target_db_url)
    try:
        return {
            row["source_identifier"]: repository.show(row["id"])
            for row in repository.list(harvester=harvester_id)
        }
    finally:
        repository.close()


def utc(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def install_plugin(
    site: Path,
    module: str,
    source: str,
    entry_points: dict[str, dict[str, str]],
    version: str = "1.0",
) -> Path:
    """Install a distribution the way pip would: a module and its dist-info in `site`.

    `entry_points` maps a group (e.g. `oai_pipeline.writers`) to {name: "module:Class"}.
    Put `site` on sys.path (or PYTHONPATH of a child process) to make it visible. Another
    `version` replaces the one installed, as `pip install --upgrade` does.
    """
    for installed in site.glob(f"{module}-*.dist-info"):
        shutil.rmtree(installed)
    dist_info = site / f"{module}-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (site / f"{module}.py").write_text(source)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: {version}\n"
    )
    (dist_info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in plugins.items())
            for group, plugins in entry_points.items()
        )
    )
    importlib.invalidate_caches()
    return site


def use_plugin(
    monkeypatch: pytest.MonkeyPatch,
    site: Path,
    module: str,
    source: str,
    entry_points: dict[str, dict[str, str]],
) -> Path:
    """`install_plugin`, with `site` put on sys.path for the rest of the test."""
    install_plugin(site, module, source, entry_points)
    monkeypatch.syspath_prepend(str(site))
    return site


# A transformer `Urn`: the record's persistent identifier is also a URN made from its DOI,
# at pids.urn (for a writer's `pid_field`).
URN_TRANSFORMER = """
from oai_pipeline.transform.base import Transformer


class Urn(Transformer):
    def transform(self, items):
        for item in items:
            doi = item.data.get("pids", {}).get("doi", {}).get("identifier")
            if doi:
                item.data["pids"]["urn"] = {"identifier": "urn:x:" + doi}
"""


def use_transformer(
    monkeypatch: pytest.MonkeyPatch, site: Path, name: str, class_name: str, source: str
) -> None:
    """`use_plugin` for one transformer `name`, the class `class_name` of `source`."""
    module = name.replace("-", "_") + "_plugin"
    entry_points = {"oai_pipeline.transformers": {name: f"{module}:{class_name}"}}
    use_plugin(monkeypatch, site, module, source, entry_points)


def raise_on_call(
    monkeypatch: pytest.MonkeyPatch, owner: object, name: str, number: int, error: Exception
) -> None:
    """The `number`th call of `owner.name` raises `error` (a crash mid-run); the others
    go through."""
    original = getattr(owner, name)
    calls = 0

    def failing(*args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        if calls == number:
            raise error
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, failing)


def stored_harvester_ids() -> list[str]:
    """The ids in the state store of the current settings, as a fresh process reads them."""
    from oai_pipeline.settings import load_settings
    from oai_pipeline.state.store import StateStore

    store = StateStore(load_settings().state_db_url)
    try:
        return [h.id for h in store.list_harvesters()]
    finally:
        store.close()


def harvest_fake_source(
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    fake: FakeSource,
    *,
    base_url: str = BASE_URL,
    reader_options: dict[str, object] | None = None,
    setspec: str | None = None,
) -> FakeSource:
    """`fake` behind the harvester `sample` (oai_dc, of the set `setspec` if given)
    registered with `base_url`: discovery reads it through its transport, with no real
    waits, and with `reader_options` (the loader spec's options) as they are when the reader
    is built."""
    register(settings, base_url, metadata_prefix="oai_dc", setspec=setspec)
    monkeypatch.setattr(
        discover_module,
        "build_reader",
        lambda harvester: OAIPMHReader(
            reader_options, harvester, transport=fake.transport(), sleep=lambda _s: None
        ),
    )
    return fake


# The harvester `sample` over all of its source at once: one window without bounds.
EVERYTHING = HarvestScope("sample", (Window("all", None, None),))


def oai_dc(
    title: str, creator: str = "Doe, Jane", date_text: str = "2020-01-01", kind: str | None = None
) -> str:
    """An oai_dc record the rdm model imports without an error (a title, a creator, a date)."""
    kind_element = f"<dc:type>{kind}</dc:type>" if kind else ""
    return (
        '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f"<dc:title>{title}</dc:title><dc:creator>{creator}</dc:creator>"
        f"<dc:date>{date_text}</dc:date>{kind_element}</oai_dc:dc>"
    )


# The CLI of this environment, as an operator starts it (a process of its own).
CLI = str(Path(sys.executable).with_name("oai-pipeline"))


def cli_killed_when(
    args: list[str], condition: Callable[[], bool], env: dict[str, str] | None = None
) -> None:
    """Start `oai-pipeline ARGS` and SIGKILL it as soon as `condition` holds (the kill point),
    as `kill -9` or the OOM killer would: it cannot record anything."""
    process = subprocess.Popen(
        [CLI, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    try:
        while not condition():
            assert process.poll() is None, "the command ended before the kill point"
            assert time.monotonic() < deadline, "kill point never reached"
            time.sleep(0.01)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)


def cap_sqlite_file(path: Path, max_pages: int) -> Callable[[], None]:
    """The SQLite file at `path` may grow to `max_pages` pages in this process's new
    connections (the others' are not touched): SQLite itself then refuses a write
    (SQLITE_FULL, `database or disk is full`), as a full file system does. Returns what
    lifts the cap again (for connections opened after)."""
    import sqlite3

    import sqlalchemy as sa

    capped = path.resolve()

    def cap(connection: object, _record: object) -> None:
        if not isinstance(connection, sqlite3.Connection):
            return
        [main, *_] = connection.execute("PRAGMA database_list").fetchall()
        if main[2] and Path(main[2]).resolve() == capped:
            connection.execute(f"PRAGMA max_page_count = {max_pages}")

    sa.event.listen(sa.pool.Pool, "connect", cap)
    return lambda: sa.event.remove(sa.pool.Pool, "connect", cap)


@contextmanager
def listening(target: object, event: str, listener: Callable[..., None]) -> Iterator[None]:
    """SQLAlchemy's `listener` on `target`'s `event` within, removed after."""
    sa.event.listen(target, event, listener)
    try:
        yield
    finally:
        sa.event.remove(target, event, listener)
