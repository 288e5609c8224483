"""Stages collect garbage rarely while they run and leave the settings as they found them."""

from __future__ import annotations

import gc
import threading

import pytest

from oai_pipeline.pipeline.collector import BULK_THRESHOLDS, bulk_allocation
from oai_pipeline.pipeline.discover import discover
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline_tests.oai.fake_source import FakeSource, make_records
from oai_pipeline_tests.support import EVERYTHING, harvest_fake_source


def test_thresholds_are_raised_inside_and_restored_after_an_error() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), bulk_allocation():
        assert gc.get_threshold() == BULK_THRESHOLDS
        raise RuntimeError("a stage failed")
    assert gc.get_threshold() == before


def test_stages_overlapping_in_threads_restore_the_thresholds_found_before_both() -> None:
    """The first in is not the last out: the thresholds the first found are restored when
    the last one leaves, not the bulk ones the second found."""
    before = gc.get_threshold()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    inside_after_the_first_left: list[tuple[int, int, int]] = []

    def second() -> None:
        first_in.wait()
        with bulk_allocation():
            second_in.set()
            first_out.wait()
            inside_after_the_first_left.append(gc.get_threshold())

    thread = threading.Thread(target=second)
    thread.start()
    with bulk_allocation():
        first_in.set()
        second_in.wait()
    first_out.set()
    thread.join()
    assert inside_after_the_first_left == [BULK_THRESHOLDS]
    assert gc.get_threshold() == before


def test_a_host_that_switched_automatic_collection_off_keeps_it_off() -> None:
    before = gc.get_threshold()
    gc.set_threshold(0)
    try:
        with bulk_allocation():
            assert gc.get_threshold()[0] == 0
        assert gc.get_threshold()[0] == 0
    finally:
        gc.set_threshold(*before)


def test_discovery_stages_and_exports_with_the_bulk_thresholds(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep and the export collected at the default thresholds: a full collection of
    the process's heap (a Dagster run's holds the definitions and the run's events) every
    few pages, as the other stages no longer do. Restored when discovery is done."""
    before = gc.get_threshold()
    harvest_fake_source(settings, monkeypatch, FakeSource(make_records(7), page_size=3))
    seen: dict[str, set[tuple[int, int, int]]] = {"stage": set(), "write_part": set()}

    def recording(owner: object, name: str) -> None:
        original = getattr(owner, name)

        def record(*args: object, **kwargs: object) -> object:
            seen[name].add(gc.get_threshold())
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, record)

    with Services(settings) as services:
        recording(services.state, "stage")
        recording(services.storage, "write_part")
        result = discover(services, EVERYTHING, RunOptions(), progress=lambda _m: None)
    assert result.counters["staged"] == 7
    assert seen == {"stage": {BULK_THRESHOLDS}, "write_part": {BULK_THRESHOLDS}}
    assert gc.get_threshold() == before
