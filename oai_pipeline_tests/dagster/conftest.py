"""The shipped sample records, shifted into the grid, served over HTTP for Dagster runs."""

from __future__ import annotations

import pytest

from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline_tests.support import shifted_sample_records


@pytest.fixture
def records():
    return shifted_sample_records()


@pytest.fixture
def endpoint(records):
    with OAIEndpoint(records, page_size=3) as endpoint:
        yield endpoint


def window_range(records) -> tuple[str, str]:
    """The first and last day the records' datestamps fall on."""
    days = sorted(r.datestamp.date() for r in records)
    return days[0].isoformat(), days[-1].isoformat()
