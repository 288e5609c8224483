"""The shipped Dagster instances purge old schedule and sensor ticks: Dagster keeps them for
good by default (an hourly schedule stores 8,760 a year, a run status sensor one per run)."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.definitions.run_request import InstigatorType

PROJECT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("kind", list(InstigatorType))
def test_the_shipped_instance_purges_every_kind_of_tick(
    tmp_path: Path, kind: InstigatorType
) -> None:
    shutil.copy(PROJECT / "dagster.yaml", tmp_path / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        settings = instance.get_tick_retention_settings(kind)
    assert settings and all(0 < days <= 90 for days in settings.values()), settings


def test_the_postgresql_instance_keeps_ticks_as_long() -> None:
    def retention(name: str) -> dict:
        return yaml.safe_load((PROJECT / name).read_text())["retention"]

    assert retention("dagster-postgres.yaml") == retention("dagster.yaml")
