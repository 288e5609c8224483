"""A running sample endpoint, and the harvester `sample` registered on it through the CLI."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from oai_pipeline.cli import main
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline_tests.support import shifted_sample_records

RECORDS = shifted_sample_records()


def create_args(harvester_id: str, base_url: str) -> list[str]:
    return [
        "harvesters", "create", "--id", harvester_id, "--base-url", base_url,
        "--metadata-prefix", "oai_datacite", "--model", "rdm",
    ]  # fmt: skip


@pytest.fixture
def endpoint() -> Iterator[OAIEndpoint]:
    with OAIEndpoint(RECORDS, page_size=3) as endpoint:
        yield endpoint


@pytest.fixture
def registered(endpoint: OAIEndpoint) -> str:
    result = CliRunner().invoke(main, create_args("sample", endpoint.base_url))
    assert result.exit_code == 0, result.output
    return "sample"
