"""The transformer chain on several cores.

Transforming is pure CPU work per record (parse the XML, import, validate, dump), the
largest stage of a full harvest, and Python runs it on one core. A stage with enough
records to transform hands them, in chunks, to worker processes that each build the
harvester's chain from its configuration; the results come back in order, so the stage
sees the same records as from the chain run in its own process. A small stage (a test, an
incremental harvest) never pays for starting workers.
"""

from __future__ import annotations

import gc
import math
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager

from oai_pipeline.errors import RecordError
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.harvesters.plugins import build_transformers
from oai_pipeline.transform.base import Transformer, TransformItem

# Below this many records to transform in one stage, starting workers costs more than it saves.
MIN_RECORDS = 2000
# Most records per task sent to a worker; a batch is shared evenly among the workers.
CHUNK = 256

# What a worker is sent per record: identifier, datestamp, setSpecs, XML, communities; and
# what it sends back: data as JSON, pid, communities, error. Plain tuples and JSON text, not
# the items and their data: unpickling nested dicts took longer than the transform saved.
ChainInput = tuple[str, str, list[str], bytes, list[str]]
ChainResult = tuple[str | None, str | None, list[str], RecordError | None]


def run_chain(transformers: list[Transformer], items: list[TransformItem]) -> None:
    """Each transformer sees the records that are live and still without an error.

    A transformer that raises (a plug-in bug, usually on one odd record) must not cost the
    batch: the chain is run again record by record from where it started, so only the
    records it raises for carry the error."""
    pending = [i for i in items if i.error is None and i.xml is not None]
    starts = [(item.data, item.pid, list(item.communities)) for item in pending]
    if _run_transformers(transformers, pending) is None:
        return
    for item, (data, pid, communities) in zip(pending, starts, strict=True):
        item.data, item.pid, item.communities, item.error = data, pid, communities, None
        failure = _run_transformers(transformers, [item])
        if failure is not None:
            transformer, error = failure
            item.error = RecordError(
                type="transformer_failure",
                message=f"{type(transformer).__name__}: {error}",
                location=None,
            )


def _run_transformers(
    transformers: list[Transformer], items: list[TransformItem]
) -> tuple[Transformer, Exception] | None:
    """The transformer that raised and what it raised, if one did."""
    for transformer in transformers:
        pending = [i for i in items if i.error is None and i.xml is not None]
        if not pending:
            return None
        try:
            transformer.transform(pending)
        except Exception as error:  # noqa: BLE001 - a plug-in's bug is the record's error
            return transformer, error
    return None


class TransformChain:
    """Runs a harvester's chain on batches of records, in this process or in `workers`
    processes (started on the first batch that makes the stage reach `min_records`).
    Either way, the data it leaves on an item is JSON (see `data_json`)."""

    def __init__(
        self, harvester: Harvester, *, workers: int = 1, min_records: int | None = None
    ) -> None:
        self._harvester = harvester
        self._transformers = build_transformers(harvester)
        self._workers = workers
        self._min_records = MIN_RECORDS if min_records is None else min_records
        self._seen = 0
        self._pool: ProcessPoolExecutor | None = None

    @property
    def workers(self) -> int:
        """How many processes transform: 1 until the workers start, or after they broke."""
        return self._workers if self._pool is not None else 1

    def run(self, items: list[TransformItem]) -> dict[str, str]:
        """Transform `items` in place; returns the data of each as JSON text, by identifier
        (made anyway to check the data is JSON, so the stage need not encode it again).

        An item's `data` is that text until read (`TransformItem.set_data_json`): the stage
        only stores the text, and decoding it was ~15 % of its own time."""
        return self.start(items).result()

    def start(self, items: list[TransformItem]) -> ChainBatch:
        """Hand `items` to the workers and return at once: `result()` waits for them (what
        `run` returns). Without workers, the batch is transformed here before returning."""
        pending = [i for i in items if i.error is None and i.xml is not None]
        self._seen += len(pending)
        pool = self._pool_for(self._seen)
        if pool is None or not pending:
            return ChainBatch(self, pending, done=self._run_here(pending))
        tasks = max(self._workers, math.ceil(len(pending) / CHUNK))
        size = math.ceil(len(pending) / tasks)
        chunks = [pending[start : start + size] for start in range(0, len(pending), size)]
        try:
            with interrupts_held():  # the workers start here, on the stage's first batch
                futures = [pool.submit(_transform_chunk, _sendable(chunk)) for chunk in chunks]
        except BrokenProcessPool:
            return ChainBatch(self, pending, done=self._run_here_for_good(pending))
        return ChainBatch(self, pending, chunks=chunks, futures=futures)

    def _run_here_for_good(self, items: list[TransformItem]) -> dict[str, str]:
        """A worker died (killed, out of memory, a crashing extension): go on here."""
        self._close_pool()
        self._workers = 1
        return self._run_here(items)

    def _run_here(self, items: list[TransformItem]) -> dict[str, str]:
        run_chain(self._transformers, items)
        texts = ((item.identifier, data_json(item)) for item in items)
        return {identifier: text for identifier, text in texts if text is not None}

    def _pool_for(self, seen: int) -> ProcessPoolExecutor | None:
        if self._pool is None and self._workers > 1 and seen >= self._min_records:
            self._pool = ProcessPoolExecutor(
                max_workers=self._workers,
                # Not fork: the parent may hold threads (prefetch, Dagster) and open databases.
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
                initargs=(self._harvester,),
            )
        return self._pool

    def _close_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def close(self) -> None:
        self._close_pool()

    def __enter__(self) -> TransformChain:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ChainBatch:
    """A batch handed to the chain: the stage saves the batch before while workers run it."""

    def __init__(
        self,
        chain: TransformChain,
        items: list[TransformItem],
        *,
        done: dict[str, str] | None = None,
        chunks: list[list[TransformItem]] | None = None,
        futures: list[Future[list[ChainResult]]] | None = None,
    ) -> None:
        self._chain = chain
        self._items = items
        self._done = done
        self._chunks = chunks or []
        self._futures = futures or []

    def result(self) -> dict[str, str]:
        """The data of each item as JSON text, by identifier; the items are transformed."""
        if self._done is None:
            self._done = self._collect()
        return self._done

    def _collect(self) -> dict[str, str]:
        try:
            results = [future.result() for future in self._futures]
        except (BrokenProcessPool, CancelledError):  # cancelled: an earlier batch broke it
            return self._chain._run_here_for_good(self._items)
        encoded: dict[str, str] = {}
        for chunk, chunk_results in zip(self._chunks, results, strict=True):
            for item, (text, pid, communities, error) in zip(chunk, chunk_results, strict=True):
                item.pid, item.communities, item.error = pid, communities, error
                if text is None:
                    item.data = None
                else:
                    item.set_data_json(text)
                    encoded[item.identifier] = text
        return encoded


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait while workers start: they keep this signal mask for good, so
    only the harvest's process gets them (a terminal's Ctrl-C goes to its whole process
    group, and every worker printed a KeyboardInterrupt traceback); it stops, and shuts the
    workers down. One held back meanwhile arrives when the mask is restored."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def data_json(item: TransformItem) -> str | None:
    """The item's data as JSON text. Data that is not JSON (a plug-in's set, date or object)
    is the record's error, not the stage's: the data is dropped."""
    try:
        return item.data_json()
    except TypeError as error:  # orjson.JSONEncodeError is a TypeError
        item.data = None
        item.error = item.error or RecordError(
            type="transformer_failure", message=f"the record data is not JSON: {error}"
        )
        return None


def _sendable(items: list[TransformItem]) -> list[ChainInput]:
    return [
        (item.identifier, item.datestamp, item.set_specs, item.xml or b"", item.communities)
        for item in items
    ]


# In a worker process: the chain, built once from the harvester's configuration.
_worker_chain: list[Transformer] = []


def _start_worker(harvester: Harvester) -> None:
    global _worker_chain
    exit_with_parent()
    _worker_chain = build_transformers(harvester)
    collect_less()


# Objects allocated between the cyclic collector's youngest-generation runs in a worker.
WORKER_GC_THRESHOLD = 10_000


def collect_less() -> None:
    """A worker only transforms: the ~110,000 objects of its imports live as long as it
    does, and a record's allocations (pydantic's most) are freed by reference counting.
    Python's collector still ran every 700 allocations and went through all of them now and
    then: ~15 % of a record's transform (~100 µs of ~600). Those objects are set aside
    (`gc.freeze`) and the youngest generation collected every 10,000 allocations: ~11 µs."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(WORKER_GC_THRESHOLD, older, oldest)


def exit_with_parent() -> None:
    """End this worker when the harvest's process ends: killed (`kill -9`, the OOM killer),
    it cannot shut the pool down, and its workers would wait for work for ever."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _transform_chunk(rows: list[ChainInput]) -> list[ChainResult]:
    items = [
        TransformItem(identifier, datestamp, set_specs, xml, communities=communities)
        for identifier, datestamp, set_specs, xml, communities in rows
    ]
    run_chain(_worker_chain, items)
    return [(data_json(item), item.pid, item.communities, item.error) for item in items]
