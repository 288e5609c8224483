"""The transform's outputs are byte for byte those recorded before it was optimised."""

from __future__ import annotations

from collections import Counter

import pytest

from . import golden


@pytest.fixture(scope="module")
def recorded() -> dict[str, list[dict]]:
    return golden.load()


@pytest.mark.parametrize("options", sorted(golden.OPTION_SETS))
def test_outputs_equal_the_recorded_ones(recorded: dict[str, list[dict]], options: str) -> None:
    expected = {row["identifier"]: row for row in recorded[options]}
    actual = golden.outputs(golden.OPTION_SETS[options], golden.golden_items())
    assert [row["identifier"] for row in actual] == list(expected)
    for row in actual:
        assert row == expected[row["identifier"]], row["identifier"]


def test_the_golden_set_covers_successes_and_every_error_type(
    recorded: dict[str, list[dict]],
) -> None:
    rows = recorded["default"]
    assert sum(row["data"] is not None for row in rows) > 600
    types = Counter(row["error"][0] for row in rows if row["error"])
    expected = {"malformed_xml", "missing_field", "invalid_date", "validation", "unknown_root"}
    assert expected <= set(types), types
