"""A deletion whose header has no datestamp (Zenodo's tombstones) is applied all the same."""

from __future__ import annotations

import dataclasses

from oai_pipeline.sample_endpoint.faults import Faults
from oai_pipeline_tests.dagster_results import run_totals
from oai_pipeline_tests.sync_e2e.conftest import SQLITE_ONLY, Harness, at

pytestmark = SQLITE_ONLY


def test_a_deletion_without_a_datestamp_is_applied_once_and_a_restore_follows(
    harness: Harness,
) -> None:
    harness.register()
    harness.harvest()
    identifier = harness.identifiers()[0]
    harness.endpoint.faults = Faults(undated_deletions=True)

    harness.delete_at_source(identifier, at(11))
    deleting = harness.harvest()

    assert harness.local(identifier)["state"] == "tombstone"
    # no record error: before, each such tombstone was a MissingDatestamp error of the run
    assert run_totals(deleting, "written_records")["run_error_count"].value == 0
    record = harness.harvest_record(identifier)
    assert record["deleted"] is True and record["datestamp"]
    notices = run_totals(deleting, "raw_oai_xml")["source_notices"].value
    assert "1 deleted record(s) without a datestamp" in notices

    # listed again (another responseDate): nothing deleted again
    tombstone = harness.local(identifier)
    again = harness.harvest()
    assert harness.local(identifier) == tombstone
    assert run_totals(again, "written_records")["run_error_count"].value == 0

    # live again at the source, with a datestamp older than the responseDate that dated the
    # deletion: the record comes back all the same
    restored = dataclasses.replace(harness.records[identifier], datestamp=at(12))
    harness.endpoint.upsert(restored)
    harness.harvest()
    assert harness.local(identifier)["state"] == "live"


def test_an_applied_undated_deletion_listed_again_is_not_planned_again(harness: Harness) -> None:
    """Each harvest lists the tombstone again with its own responseDate: the deletion it
    applied stays applied, skipped as unchanged, not planned again (`nothing`)."""
    harness.register()
    harness.harvest()
    identifier = harness.identifiers()[0]
    harness.endpoint.faults = Faults(undated_deletions=True)
    harness.delete_at_source(identifier, at(11))
    harness.harvest()
    dated = harness.harvest_record(identifier)["datestamp"]
    tombstone = harness.local(identifier)

    for _ in range(2):
        again = harness.harvest()
        planned = run_totals(again, "sync_decisions")
        assert "run_action_nothing" not in planned and "run_action_delete" not in planned
        assert planned["run_action_skip"].value == len(harness.identifiers())
        assert harness.local(identifier) == tombstone
        assert harness.harvest_record(identifier)["datestamp"] == dated
