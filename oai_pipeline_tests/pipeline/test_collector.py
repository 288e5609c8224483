"""Stages collect garbage rarely while they run and leave the settings as they found them."""

from __future__ import annotations

import gc

import pytest

from oai_pipeline.pipeline.collector import BULK_THRESHOLDS, bulk_allocation


def test_thresholds_are_raised_inside_and_restored_after_an_error() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), bulk_allocation():
        assert gc.get_threshold() == BULK_THRESHOLDS
        raise RuntimeError("a stage failed")
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
