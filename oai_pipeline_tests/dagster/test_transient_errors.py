"""Which failures Dagster's retry policy retries: a passing fault, not a source's loop."""

from __future__ import annotations

import pytest

from oai_pipeline.defs.assets import _transient
from oai_pipeline.oai.errors import HarvestProtocolError, LoopingSource
from oai_pipeline_tests.oai.fake_source import FakeSource, make_records, truncated
from oai_pipeline_tests.oai.test_faults import Harvest
from oai_pipeline_tests.oai.test_server_quirks import _second_page_loops


def _failure(source: FakeSource) -> HarvestProtocolError:
    with pytest.raises(HarvestProtocolError) as failed:
        Harvest(source, max_retries=1).run()
    return failed.value


def test_a_source_looping_short_of_its_list_size_is_not_retried() -> None:
    source = FakeSource(make_records(9), page_size=3)
    source.every = (1, _second_page_loops)
    error = _failure(source)
    assert isinstance(error, LoopingSource)
    assert "not looping" in str(error)
    assert not _transient(error)


def test_a_truncated_page_stays_transient() -> None:
    source = FakeSource(make_records(9), page_size=3)
    source.every = (1, truncated)
    error = _failure(source)
    assert not isinstance(error, LoopingSource)
    assert _transient(error)
