"""An unchanged record is not transformed again; a changed record or chain is."""

from __future__ import annotations

import dataclasses
import json
import re

import dagster as dg
import pytest
from click.testing import CliRunner

from oai_pipeline.cli import main
from oai_pipeline.harvesters import plugins
from oai_pipeline.pipeline.frames import TRANSFORMED_RECORDS, WRITTEN_RECORDS
from oai_pipeline.storage import PartitionStore
from oai_pipeline_tests.dagster_results import run_totals
from oai_pipeline_tests.sync_e2e.conftest import DAY, SQLITE_ONLY, Harness, at

pytestmark = SQLITE_ONLY


def _transform_counts(result: dg.ExecuteInProcessResult) -> tuple[int, int]:
    metadata = run_totals(result, TRANSFORMED_RECORDS)
    return int(metadata["run_transformed"].value), int(metadata["run_reused"].value)


def _write_actions(result: dg.ExecuteInProcessResult) -> dict[str, int]:
    return {
        name.removeprefix("run_action_"): int(value.value)
        for name, value in run_totals(result, WRITTEN_RECORDS).items()
        if name.startswith("run_action_") and value.value
    }


def _data(harness: Harness) -> dict[str, dict]:
    frame = PartitionStore(harness.settings.storage_url).read_partition(
        TRANSFORMED_RECORDS, "sample", DAY
    )
    assert frame is not None
    return {row["identifier"]: json.loads(row["data"]) for row in frame.iter_rows(named=True)}


def test_stored_transforms_are_reused_until_the_record_or_the_chain_changes(
    harness: Harness,
) -> None:
    harness.register()
    first, second, third = harness.identifiers()
    assert _transform_counts(harness.harvest()) == (3, 0)
    fresh = _data(harness)

    harness.change_title(first, "Changed at the source", at(9))
    assert _transform_counts(harness.harvest()) == (3, 2)
    reused = _data(harness)
    assert reused[second] == fresh[second] and reused[third] == fresh[third]
    assert reused[first]["metadata"]["title"] == "Changed at the source"
    assert harness.local(first)["data"]["metadata"]["title"] == "Changed at the source"

    # Another chain (here: another option) makes another fingerprint: all transformed again,
    # and written again, although no datestamp changed: the target holds what it makes.
    harness.set_transformer('oai-import{model:"rdm", doi_provider:"datacite"}')
    revisions = {i: harness.local(i)["revision"] for i in (first, second, third)}
    assert _transform_counts(harness.harvest()) == (3, 0)
    again = _data(harness)
    providers = {d.get("pids", {}).get("doi", {}).get("provider") for d in again.values()}
    assert providers <= {"datacite", None} and "datacite" in providers
    for identifier in (first, second, third):
        local = harness.local(identifier)
        assert local["data"].get("pids") == again[identifier].get("pids")
        assert local["revision"] == revisions[identifier] + 1
    assert _transform_counts(harness.harvest()) == (3, 3)
    assert _data(harness) == again
    # the chain written with is remembered: the next harvest rewrites nothing
    assert {i: harness.local(i)["revision"] for i in revisions} == {
        i: revision + 1 for i, revision in revisions.items()
    }


def test_an_upgrade_whose_transformers_make_other_outputs_transforms_again(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Upgraded in place, with the same package version (the transform fixes after 0.3.1
    kept it) but a new OUTPUT_REVISION: the records harvested before are transformed and
    written again, as a fresh install would write them, although no datestamp changed. A
    record the new chain makes the same data of keeps its revision (`nothing`): a copy of
    the last revision for each record of a large repository was noise."""
    harness.register()
    identifiers = harness.identifiers()
    assert _transform_counts(harness.harvest()) == (3, 0)
    revisions = {i: harness.local(i)["revision"] for i in identifiers}
    monkeypatch.setattr(plugins, "OUTPUT_REVISION", plugins.OUTPUT_REVISION + 1)

    upgraded = harness.harvest()

    assert _transform_counts(upgraded) == (3, 0)
    assert _write_actions(upgraded) == {"nothing": 3}
    assert {i: harness.local(i)["revision"] for i in identifiers} == revisions
    assert _transform_counts(harness.harvest()) == (3, 3)  # then reused again


def test_a_datestamp_bumped_without_a_change_leaves_the_record_as_it_is(
    harness: Harness,
) -> None:
    """A source that bumps datestamps without changing its records (a repository
    reindexed) made a new revision of each, a copy of the last: now the write finds the
    record holding that data already (`nothing`), and the harvest record remembers the new
    datestamp, so the next harvest skips it. `update_all` still rewrites."""
    harness.register()
    first, *_ = harness.identifiers()
    harness.harvest()
    revision = harness.local(first)["revision"]
    record = harness.records[first]
    harness.endpoint.upsert(dataclasses.replace(record, datestamp=at(20)))

    assert _write_actions(harness.harvest()) == {"nothing": 1, "skip": 2}
    assert harness.local(first)["revision"] == revision
    assert _write_actions(harness.harvest()) == {"skip": 3}
    assert _write_actions(harness.harvest(update_all=True)) == {"update": 3}
    assert harness.local(first)["revision"] == revision + 1


def test_a_harvester_given_another_metadata_prefix_writes_what_the_new_format_says(
    harness: Harness,
) -> None:
    """The source offers a record in two formats that say different things (here, its
    title). Before, after `harvesters update --metadata-prefix`, the records harvested in
    the new format with unchanged datestamps kept the old format's transform (the chain's
    fingerprint left out the format): the target never got what the new format says."""
    harness.register()
    first = harness.identifiers()[0]
    record = harness.records[first]
    kernel = record.metadata["datacite"]
    retitled = re.sub(
        rb"(<title(?: [^>]*)?>)[^<]*", rb"\1Said only in the bare kernel", kernel, count=1
    )
    harness.endpoint.upsert(
        dataclasses.replace(record, metadata={**record.metadata, "datacite": retitled})
    )
    harness.harvest()
    assert harness.local(first)["data"]["metadata"]["title"] != "Said only in the bare kernel"

    changed = CliRunner().invoke(
        main, ["harvesters", "update", "sample", "--metadata-prefix", "datacite"]
    )
    assert changed.exit_code == 0, changed.output
    harness.harvest()

    assert _data(harness)[first]["metadata"]["title"] == "Said only in the bare kernel"
    assert harness.local(first)["data"]["metadata"]["title"] == "Said only in the bare kernel"
