"""The README's table of the assets' Parquet columns is what the stages write: data engineers
read those files with their own tools and go by that table."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from oai_pipeline.pipeline.frames import SCHEMAS

README = Path(__file__).resolve().parents[2] / "README.md"


def _documented() -> dict[str, dict[str, str]]:
    tables = {}
    for asset, columns in re.findall(r"^\| `(\w+)` \| (`.+) \|$", README.read_text(), re.M):
        pairs = re.findall(r"`(\w+)` ([\w()]+)", columns)
        tables[asset] = dict(pairs)
    return tables


def test_readme_documents_each_assets_columns_and_types() -> None:
    documented = _documented()
    for asset, schema in SCHEMAS.items():
        assert documented.get(asset) == {name: str(dtype) for name, dtype in schema.items()}


def test_the_readmes_datestamp_recipe_reads_both_granularities() -> None:
    [recipe] = re.findall(r"`(pl\.col\(\"datestamp\"\).+?)`\. ", README.read_text(), re.S)
    frame = pl.DataFrame({"datestamp": ["2015-01-16", "2023-10-07T16:45:30Z"]})
    parsed = frame.select(eval(recipe.replace("\n  ", "")))["datestamp"]  # noqa: S307
    assert parsed.dtype == pl.Datetime("us", "UTC")
    assert parsed.null_count() == 0
