"""The transformer chain in worker processes makes what it makes in this process."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from click.testing import CliRunner

from oai_pipeline import json_codec
from oai_pipeline.cli import main
from oai_pipeline.defs.launch import materialize_windows
from oai_pipeline.errors import ConfigurationError
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.harvesters.plugins import RDM_MODEL, transform_fingerprint
from oai_pipeline.pipeline import transform_workers
from oai_pipeline.pipeline.frames import RAW_OAI_XML, TRANSFORMED_RECORDS
from oai_pipeline.pipeline.transform_workers import TransformChain
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings, default_transform_workers, load_settings
from oai_pipeline.state.store import StateStore
from oai_pipeline.storage import PartitionStore
from oai_pipeline.transform import base as transform_base
from oai_pipeline.transform.base import TransformItem
from oai_pipeline_tests.dagster_results import run_totals
from oai_pipeline_tests.support import (
    live_records,
    register,
    shifted_sample_records,
    use_transformer,
)
from oai_pipeline_tests.transform.records import (
    DATACITE_SAMPLES,
    SAMPLES,
    ZENODO_PAGES,
    page_items,
    wrap_metadata,
)

CHAIN = 'oai-import{model:"rdm", set_communities:{"user-a":"community-a"}}'

# Kills the worker process it runs in; in the harvest's own process it does nothing.
DYING_PLUGIN = """
import multiprocessing
import os

from oai_pipeline.transform.base import Transformer


class DieInWorker(Transformer):
    def transform(self, items):
        if multiprocessing.parent_process() is not None:
            os._exit(3)
"""

NOT_JSON_PLUGIN = """
from oai_pipeline.transform.base import Transformer


class Sets(Transformer):
    def transform(self, items):
        for item in items[::2]:
            item.data["metadata"]["keywords"] = {"not", "json"}
"""

FAILING_PLUGIN = """
from oai_pipeline.transform.base import Transformer


class Fail(Transformer):
    def transform(self, items):
        raise RuntimeError("this plug-in always fails")
"""

# Raises for the whole batch when one record in it is the odd one; marks the others first.
PICKY_PLUGIN = """
from oai_pipeline.transform.base import Transformer


class Picky(Transformer):
    def transform(self, items):
        for item in items:
            item.data["metadata"].setdefault("notes", []).append("seen")
            if item.identifier.endswith(".xml") and item.set_specs:
                raise ValueError(f"cannot handle {item.identifier}")
"""


def harvester(*transformers: str) -> Harvester:
    return Harvester(
        id="sample",
        base_url="http://example.org/oai",
        metadata_prefix="oai_datacite",
        transformers=list(transformers) or [CHAIN],
    )


def items() -> list[TransformItem]:
    """Every sample record once, some in a set with a community, plus broken ones."""
    made = [
        TransformItem(
            identifier=f"oai:test:{name}",
            datestamp="2024-01-01",
            set_specs=["user-a"] if index % 2 else [],
            xml=wrap_metadata((SAMPLES / name).read_bytes(), identifier=f"oai:test:{name}"),
        )
        for index, name in enumerate(DATACITE_SAMPLES)
    ]
    for page in ZENODO_PAGES:
        made.extend(item for item in page_items(page) if item.xml is not None)
    made.append(TransformItem("oai:test:malformed", "2024-01-01", [], b"<record><unclosed>"))
    made.append(
        TransformItem(
            "oai:test:unknown",
            "2024-01-01",
            [],
            wrap_metadata('<mods xmlns="http://www.loc.gov/mods/v3"/>', identifier="x"),
        )
    )
    return made


def outcome(batch: list[TransformItem]) -> list[tuple]:
    return [(i.identifier, i.data, i.pid, i.communities, i.error) for i in batch]


def in_process(chain_harvester: Harvester, batch: list[TransformItem]) -> list[tuple]:
    with TransformChain(chain_harvester, workers=1, min_records=0) as chain:
        chain.run(batch)
        assert chain.workers == 1
    return outcome(batch)


def test_workers_make_what_the_chain_makes_in_process() -> None:
    expected = in_process(harvester(), items())
    assert any(error is not None for *_, error in expected)
    assert any(communities == ["community-a"] for *_, communities, _ in expected)

    batch = items()
    with TransformChain(harvester(), workers=2, min_records=0) as chain:
        # Two batches: the workers, once started, serve every later batch of the stage.
        chain.run(batch[:7])
        chain.run(batch[7:])
        assert chain.workers == 2
    assert outcome(batch) == expected


def test_a_small_stage_starts_no_workers() -> None:
    batch = items()
    with TransformChain(harvester(), workers=2, min_records=len(batch) + 1) as chain:
        chain.run(batch)
        assert chain.workers == 1
    assert outcome(batch) == in_process(harvester(), items())


def test_a_plug_in_failing_in_a_worker_is_each_records_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_transformer(monkeypatch, tmp_path / "site", "fail", "Fail", FAILING_PLUGIN)
    batch = items()
    with TransformChain(harvester(CHAIN, "fail"), workers=2, min_records=0) as chain:
        chain.run(batch)
        assert chain.workers == 2
    assert outcome(batch) == in_process(harvester(CHAIN, "fail"), items())
    errors = {i.error.type for i in batch if i.error is not None}
    assert "transformer_failure" in errors


@pytest.mark.parametrize("workers", [1, 2])
def test_a_plug_in_raising_for_one_record_fails_that_record_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    use_transformer(monkeypatch, tmp_path / "site", "picky", "Picky", PICKY_PLUGIN)
    batch = items()
    with TransformChain(harvester(CHAIN, "picky"), workers=workers, min_records=0) as chain:
        chain.run(batch)
        assert chain.workers == workers
    odd = {i.identifier for i in batch if i.identifier.endswith(".xml") and i.set_specs}
    failed = {i.identifier: i.error for i in batch if i.error is not None}
    assert odd and odd <= set(failed)
    for identifier in odd:
        assert failed[identifier].type == "transformer_failure"
        assert "Picky: cannot handle" in failed[identifier].message
    # The others went through the whole chain, once, as if the odd ones were not there.
    others = [i for i in batch if i.identifier not in failed]
    assert others
    assert all(i.data["metadata"]["notes"] == ["seen"] for i in others)
    assert {i.identifier for i in others} == {
        identifier
        for identifier, data, *_, error in in_process(harvester(), items())
        if error is None and identifier not in odd
    }


def test_data_that_is_not_json_is_the_records_error_in_either_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_transformer(monkeypatch, tmp_path / "site", "sets", "Sets", NOT_JSON_PLUGIN)
    expected = in_process(harvester(CHAIN, "sets"), items())
    not_json = [e for *_, e in expected if e is not None and "not JSON" in e.message]
    assert not_json and {e.type for e in not_json} == {"transformer_failure"}

    batch = items()
    with TransformChain(harvester(CHAIN, "sets"), workers=2, min_records=0) as chain:
        chain.run(batch)
        assert chain.workers == 2
    # The chunks differ from the one batch in-process, so other records have the set.
    failed = [i for i in batch if i.error is not None and "not JSON" in i.error.message]
    assert failed and all(i.data is None for i in failed)
    assert all(i.data is not None for i in batch if i.error is None)


def test_a_worker_that_dies_leaves_the_batch_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_transformer(monkeypatch, tmp_path / "site", "die-in-worker", "DieInWorker", DYING_PLUGIN)
    chain_harvester = harvester(CHAIN, "die-in-worker")
    batch = items()
    with TransformChain(chain_harvester, workers=2, min_records=0) as chain:
        chain.run(batch)
        assert chain.workers == 1  # the workers broke; the rest runs here
        rest = items()
        chain.run(rest)
    assert outcome(batch) == in_process(chain_harvester, items())
    assert outcome(rest) == outcome(batch)


@pytest.mark.parametrize("plugin", ["", "die-in-worker"])
def test_batches_handed_out_together_come_back_each_as_the_chain_makes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plugin: str
) -> None:
    """The stage hands out the next batch before it takes the results of the one before:
    each batch still comes back whole and as made in this process, and a worker dying with
    both batches out leaves both to this process."""
    use_transformer(monkeypatch, tmp_path / "site", "die-in-worker", "DieInWorker", DYING_PLUGIN)
    chain_harvester = harvester(*([CHAIN, plugin] if plugin else [CHAIN]))
    first, second = items(), items()[::-1]
    with TransformChain(chain_harvester, workers=2, min_records=0) as chain:
        handed_out = [chain.start(first), chain.start(second)]
        results = [batch.result() for batch in handed_out]
        assert chain.workers == (1 if plugin else 2)
    assert outcome(first) == in_process(chain_harvester, items())
    assert outcome(second) == in_process(chain_harvester, items()[::-1])
    for batch, texts in zip((first, second), results, strict=True):
        assert {k: json.loads(v) for k, v in texts.items()} == {
            i.identifier: i.data for i in batch if i.data is not None
        }


def test_the_transform_stage_uses_the_workers(
    instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transform_workers, "MIN_RECORDS", 0)
    monkeypatch.setenv("OAI_PIPELINE_TRANSFORM_WORKERS", "2")
    records = shifted_sample_records()
    days = sorted(r.datestamp.date().isoformat() for r in records)
    with OAIEndpoint(records) as endpoint:
        register(settings, endpoint.base_url)
        result = materialize_windows(instance, "sample", days[0], days[-1])
    assert result.success
    assert run_totals(result, TRANSFORMED_RECORDS)["transform_workers"].value == 2

    storage = PartitionStore(settings.storage_url)
    raw, transformed = (
        [
            row
            for day in sorted(set(days))
            if (part := storage.read_partition(asset, "sample", day)) is not None
            for row in part.to_dicts()
        ]
        for asset in (RAW_OAI_XML, TRANSFORMED_RECORDS)
    )
    live = [
        TransformItem(row["identifier"], row["datestamp"], list(row["set_specs"]), row["xml"])
        for row in raw
        if not row["deleted"]
    ]
    assert len(live) == len(live_records(records, "oai_datacite"))
    made = in_process(harvester(RDM_MODEL.transformer), live)
    expected = {identifier: data for identifier, data, *_ in made}
    stored = {row["identifier"]: row["data"] for row in transformed if not row["deleted"]}
    assert {k: json.loads(v) for k, v in stored.items()} == expected


class _NoDecoding:
    """`json_codec` for a TransformItem's data in the harvest's process: decoding fails."""

    dumps = staticmethod(json_codec.dumps)

    @staticmethod
    def loads(text: str | bytes) -> object:
        raise AssertionError("the workers' JSON text was decoded in the harvest's process")


def test_the_stage_stores_the_workers_json_text_as_it_is(
    instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stage only stores the data a worker sends as JSON text: decoding each record in
    the harvest's process for the state store to encode it again was ~15 % of the stage's
    own time, while the workers waited. The state store holds the very same text."""
    monkeypatch.setattr(transform_workers, "MIN_RECORDS", 0)
    monkeypatch.setattr(transform_base, "json_codec", _NoDecoding)  # where `data` decodes
    monkeypatch.setenv("OAI_PIPELINE_TRANSFORM_WORKERS", "2")
    records = shifted_sample_records()
    days = sorted(r.datestamp.date().isoformat() for r in records)
    with OAIEndpoint(records) as endpoint:
        harvester = register(settings, endpoint.base_url)
        result = materialize_windows(instance, "sample", days[0], days[-1])
    assert result.success
    assert run_totals(result, TRANSFORMED_RECORDS)["transform_workers"].value == 2

    storage = PartitionStore(settings.storage_url)
    transformed = [
        row
        for day in sorted(set(days))
        if (part := storage.read_partition(TRANSFORMED_RECORDS, "sample", day)) is not None
        for row in part.to_dicts()
        if row["data"] is not None
    ]
    assert len(transformed) == len(live_records(records, "oai_datacite"))
    store = StateStore(settings.state_db_url)
    try:
        stored = store.stored_transforms(
            "sample",
            {row["identifier"]: row["datestamp"] for row in transformed},
            transform_fingerprint(harvester),
        )
    finally:
        store.close()
    assert {i: t.data_json for i, t in stored.items()} == {
        row["identifier"]: row["data"] for row in transformed
    }


def test_transform_workers_setting() -> None:
    home = {"OAI_PIPELINE_HOME": "/tmp/oai-home"}
    assert load_settings(home).transform_workers == default_transform_workers()
    assert 1 <= default_transform_workers() <= 4
    assert load_settings({**home, "OAI_PIPELINE_TRANSFORM_WORKERS": "3"}).transform_workers == 3
    for bad in ("0", "two", "-1", "1000"):
        with pytest.raises(ConfigurationError, match="OAI_PIPELINE_TRANSFORM_WORKERS"):
            load_settings({**home, "OAI_PIPELINE_TRANSFORM_WORKERS": bad})


def test_a_bad_transform_workers_setting_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OAI_PIPELINE_TRANSFORM_WORKERS", "many")
    result = CliRunner().invoke(main, ["status"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: OAI_PIPELINE_TRANSFORM_WORKERS must be")
    assert "Traceback" not in result.output


ORPHAN = """
import multiprocessing, sys, time
from oai_pipeline.pipeline.transform_workers import exit_with_parent

def worker():
    exit_with_parent()
    time.sleep(120)

if __name__ == "__main__":
    process = multiprocessing.get_context("spawn").Process(target=worker)
    process.start()
    time.sleep(1)  # the worker is up and watching
    print(process.pid, flush=True)
    time.sleep(120)
"""


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):  # the second: it ended while read
        return True
    return "\\nState:\\tZ" in status  # exited, not yet reaped


def test_a_worker_ends_when_the_harvest_process_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "orphan.py"
    script.write_text(ORPHAN)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    worker = int(parent.stdout.readline())
    assert not _gone(worker)

    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=10)

    deadline = time.monotonic() + 10
    while not _gone(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(worker)


def _blocked_signals(pid: int) -> set[int]:
    status = Path(f"/proc/{pid}/status").read_text()
    mask = int(
        next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16
    )
    return {number for number in range(1, 65) if mask >> (number - 1) & 1}


def test_workers_leave_ctrl_c_and_sigterm_to_the_harvest_process() -> None:
    """A terminal's Ctrl-C reaches every process of its group: before, each worker printed
    a KeyboardInterrupt traceback next to the harvest's one-line `interrupted`."""
    with TransformChain(harvester(), workers=2, min_records=0) as chain:
        chain.run(items())
        workers = list(chain._pool._processes)  # type: ignore[union-attr]
        assert workers
        for pid in workers:
            assert {signal.SIGINT, signal.SIGTERM} <= _blocked_signals(pid)
    assert not {signal.SIGINT, signal.SIGTERM} & _blocked_signals(os.getpid())


def test_a_workers_collector_leaves_its_imports_alone() -> None:
    """~15 % of a record's transform was Python's cyclic collector going through the
    ~110,000 objects of the worker's imports, every 700 allocations in part, and in whole
    now and then. They are set aside in the workers only: the harvest's process is left as
    it was (it runs Dagster, whose objects come and go)."""
    before = gc.get_threshold()
    with TransformChain(harvester(), workers=2, min_records=0) as chain:
        chain.run(items())
        pool = chain._pool  # type: ignore[union-attr]
        assert pool is not None
        assert pool.submit(gc.get_freeze_count).result() > 10_000
        threshold = pool.submit(gc.get_threshold).result()
        assert threshold[0] == transform_workers.WORKER_GC_THRESHOLD
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
