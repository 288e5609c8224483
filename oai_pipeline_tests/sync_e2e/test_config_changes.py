"""A harvester's set changed, by `harvesters update` or by a fixture file: what the operator
is told, and what the harvest and reconcile after it do."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

from oai_pipeline.cli import main
from oai_pipeline.harvesters.plugins import RDM_MODEL
from oai_pipeline.pipeline.reconcile import reconcile
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import load_settings
from oai_pipeline_tests.sync_e2e.conftest import PREFIX, SQLITE_ONLY, Harness

pytestmark = SQLITE_ONLY


def _change_set(harness: Harness, how: str, setspec: str, tmp_path: Path) -> str:
    """The operator gives the harvester another set; what the command printed."""
    if how == "update":
        args = ["harvesters", "update", "sample", "--setspec", setspec]
    else:  # the same harvester in a fixture file, but for its set
        fixture = tmp_path / "oai_harvesters.yaml"
        fixture.write_text(
            f"- id: sample\n  name: test harvester\n  base-url: {harness.endpoint.base_url}\n"
            f"  metadata-prefix: {PREFIX}\n  setspec: {setspec}\n  batch-size: 100\n"
            f"  transformer: '{RDM_MODEL.transformer}'\n  writer: '{RDM_MODEL.writer}'\n",
            encoding="utf-8",
        )
        args = ["harvesters", "load", str(fixture)]
    changed = CliRunner().invoke(main, args)
    assert changed.exit_code == 0, changed.output
    return changed.output


@pytest.mark.parametrize("how", ["update", "load"])
def test_a_harvester_given_another_set_is_told_to_harvest_again_and_what_reconcile_deletes(
    harness: Harness, how: str, tmp_path: Path
) -> None:
    """Records of the new set keep their datestamps, older than the last harvest: no
    incremental harvest lists them, and a reconcile deletes those of the old set only (the
    target mirrors the set). Before, no path said either; `load` said nothing of a new
    metadata prefix either."""
    only_old, both, only_new = harness.identifiers()
    for identifier, sets in ((only_old, ["old"]), (both, ["old", "new"]), (only_new, ["new"])):
        record = dataclasses.replace(harness.records[identifier], set_specs=sets)
        harness.records[identifier] = record
        harness.endpoint.upsert(record)
    harness.register(setspec="old")
    harness.harvest()
    assert harness.local(only_new) is None

    told = _change_set(harness, how, "new", tmp_path)

    assert "the set changed from 'old' to 'new'" in told, told
    assert "harvest them all again" in told
    assert "the next reconcile deletes the records harvested from 'old'" in told
    harness.harvest()  # the window again: a backfill
    assert harness.local(only_new)["state"] == "live"
    with Services(load_settings()) as services:
        assert reconcile(services, "sample").vanished == [only_old]
    assert harness.local(only_old)["state"] == "tombstone"
    assert harness.local(both)["state"] == "live" and harness.local(only_new)["state"] == "live"
