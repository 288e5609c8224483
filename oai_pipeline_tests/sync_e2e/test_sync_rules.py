"""Every row of the sync table, the skip rule and update_all, through the four assets.

The harvest always wins: whatever happened locally, the next harvest that includes a record
brings it back to the state the source reports.
"""

from __future__ import annotations

import pytest

from oai_pipeline.defs.launch import materialize_windows
from oai_pipeline.errors import PipelineError
from oai_pipeline_tests.dagster_results import run_totals
from oai_pipeline_tests.sync_e2e.conftest import SQLITE_ONLY, Harness, at

pytestmark = SQLITE_ONLY


def test_live_missing_is_created_and_second_harvest_writes_nothing(harness: Harness) -> None:
    harness.register()
    harness.harvest()
    locals_ = {i: harness.local(i) for i in harness.identifiers()}
    assert all(r is not None and r["state"] == "live" for r in locals_.values())
    assert all(r["revision"] == 1 for r in locals_.values())

    harness.harvest()

    assert {i: harness.local(i) for i in harness.identifiers()} == locals_
    assert len(harness.all_local()) == len(locals_)


def test_live_live_update_overwrites_a_local_edit_draft(harness: Harness) -> None:
    harness.register()
    harness.harvest()
    identifier = harness.identifiers()[0]
    local_id = harness.local(identifier)["id"]
    harness.repository.edit(local_id, {"metadata.title": "edited locally"})
    assert harness.local(identifier)["draft"] is not None

    harness.change_title(identifier, "Changed at the source", at(9))
    harness.harvest()

    local = harness.local(identifier)
    assert local["id"] == local_id
    assert local["draft"] is None
    assert local["data"]["metadata"]["title"] == "Changed at the source"
    assert local["revision"] == 2


def test_a_published_local_edit_is_undone_without_a_source_change(harness: Harness) -> None:
    harness.register()
    harness.harvest()
    identifier = harness.identifiers()[1]
    original = harness.local(identifier)
    harness.repository.edit(original["id"], {"metadata.title": "edited locally"})
    harness.repository.publish(original["id"])
    assert harness.local(identifier)["data"]["metadata"]["title"] == "edited locally"

    harness.harvest()

    local = harness.local(identifier)
    assert local["data"]["metadata"]["title"] == original["data"]["metadata"]["title"]
    assert local["state"] == "live"


def test_live_draft_only_is_updated_and_published(harness: Harness) -> None:
    harness.register(writer='oai-service{model:"rdm", publish:false}')
    harness.harvest()
    identifier = harness.identifiers()[0]
    assert harness.local(identifier)["state"] == "draft"

    harness.set_writer('oai-service{model:"rdm"}')
    harness.change_title(identifier, "Published after all", at(9))
    harness.harvest()

    local = harness.local(identifier)
    assert local["state"] == "live"
    assert local["data"]["metadata"]["title"] == "Published after all"


def test_live_tombstone_marked_for_purge_is_restored_then_updated(harness: Harness) -> None:
    harness.register()
    harness.harvest()
    identifier = harness.identifiers()[0]
    local_id = harness.local(identifier)["id"]
    harness.repository.delete(local_id, purge=True)
    assert harness.local(identifier)["state"] == "tombstone"

    harness.harvest()

    local = harness.local(identifier)
    assert local["id"] == local_id
    assert local["state"] == "live"
    assert local["purge"] is False


def test_live_hard_deleted_is_revived_with_the_same_id(harness: Harness) -> None:
    harness.register()
    harness.harvest()
    identifier = harness.identifiers()[2]
    before = harness.local(identifier)
    harness.repository.hard_delete(before["id"])

    harness.change_title(identifier, "Revived and updated", at(10))
    harness.harvest()

    local = harness.local(identifier)
    assert local["id"] == before["id"]
    assert local["state"] == "live"
    assert local["data"]["metadata"]["title"] == "Revived and updated"
    assert len(harness.all_local()) == 3


def test_deleted_live_becomes_a_tombstone_and_its_edit_draft_is_removed(harness: Harness) -> None:
    harness.register()
    harness.harvest()
    identifier = harness.identifiers()[0]
    harness.repository.edit(harness.local(identifier)["id"], {"metadata.title": "local edit"})

    harness.delete_at_source(identifier, at(11))
    harness.harvest()

    local = harness.local(identifier)
    assert local["state"] == "tombstone"
    assert local["draft"] is None
    assert "source" in (local["tombstone_note"] or "")
    record = harness.harvest_record(identifier)
    assert record["deleted"] is True


def test_deleted_draft_only_is_deleted(harness: Harness) -> None:
    harness.register(writer='oai-service{model:"rdm", publish:false}')
    harness.harvest()
    identifier = harness.identifiers()[1]
    assert harness.local(identifier)["state"] == "draft"

    harness.delete_at_source(identifier, at(11))
    harness.harvest()

    local = harness.local(identifier)
    assert local is None or local["state"] in {"deleted", "tombstone"}
    assert all(
        r["source_identifier"] != identifier or r["state"] != "draft" for r in harness.all_local()
    )
    # The harvest record names no local record that is gone.
    local_id = harness.harvest_record(identifier)["local_id"]
    assert local_id is None or harness.repository.show(local_id) is not None


def test_deleted_already_deleted_does_nothing_but_drops_a_left_over_draft(harness: Harness) -> None:
    harness.register()
    harness.harvest()
    identifier = harness.identifiers()[2]
    local_id = harness.local(identifier)["id"]
    harness.repository.edit(local_id, {"metadata.title": "draft before deletion"})
    harness.repository.delete(local_id)
    assert harness.local(identifier)["state"] == "tombstone"

    harness.delete_at_source(identifier, at(12))
    harness.harvest()

    local = harness.local(identifier)
    assert local["state"] == "tombstone"
    assert local["draft"] is None


def test_update_all_rewrites_unchanged_records(harness: Harness) -> None:
    harness.register()
    harness.harvest()
    revisions = {i: harness.local(i)["revision"] for i in harness.identifiers()}

    harness.harvest(update_all=True)

    assert {i: harness.local(i)["revision"] for i in harness.identifiers()} == {
        i: r + 1 for i, r in revisions.items()
    }


def test_update_all_picks_up_a_change_made_without_a_new_datestamp(harness: Harness) -> None:
    harness.register()
    harness.harvest()
    first, second = harness.identifiers()[:2]
    for identifier in (first, second):  # changed at the source, the datestamp left as it was
        harness.change_title(identifier, "Changed quietly", harness.records[identifier].datestamp)

    harness.harvest()  # an ordinary harvest trusts the datestamp
    assert harness.local(first)["data"]["metadata"]["title"] != "Changed quietly"

    harness.harvest(update_all=True)
    assert harness.local(first)["data"]["metadata"]["title"] == "Changed quietly"
    assert "Changed quietly" in harness.harvest_record(first)["xml"]

    # the writer's own update_all does the same
    harness.set_writer('oai-service{model: "rdm", update_all: true}')
    harness.harvest()
    assert harness.local(second)["data"]["metadata"]["title"] == "Changed quietly"


def _undone(result) -> int:
    return run_totals(result, "written_records")["run_local_changes_undone"].value


def test_a_harvest_that_does_not_list_a_record_still_undoes_its_local_changes(
    harness: Harness,
) -> None:
    harness.register()
    harness.harvest()
    edited, deleted, removed = harness.identifiers()
    before = {i: harness.local(i) for i in harness.identifiers()}
    repository = harness.repository
    repository.edit(before[edited]["id"], {"metadata.title": "Local edit"})
    repository.delete(before[deleted]["id"])
    repository.hard_delete(before[removed]["id"])

    # an incremental harvest of a later day: the source lists none of these records
    later = materialize_windows(harness.instance, "sample", "2024-03-01", "2024-03-01")

    assert _undone(later) == 3
    for identifier in (edited, deleted, removed):
        local = harness.local(identifier)
        assert (local["state"], local["draft"]) == ("live", None)
        assert local["data"] == before[identifier]["data"]
    revisions = {i: harness.local(i)["revision"] for i in harness.identifiers()}
    again = materialize_windows(harness.instance, "sample", "2024-03-01", "2024-03-01")
    assert _undone(again) == 0  # nothing left to undo, nothing rewritten
    assert {i: harness.local(i)["revision"] for i in harness.identifiers()} == revisions

    # an edit published locally comes back too
    repository.edit(before[edited]["id"], {"metadata.title": "Published locally"})
    repository.publish(before[edited]["id"])
    assert _undone(materialize_windows(harness.instance, "sample", "2024-03-01", "2024-03-01")) == 1
    assert harness.local(edited)["data"] == before[edited]["data"]


def test_a_reviewer_publishing_a_harvested_draft_is_not_a_change_to_undo(
    harness: Harness,
) -> None:
    harness.register()
    harness.set_writer('oai-service{model: "rdm", publish: false}')
    harness.harvest()
    identifier = harness.identifiers()[0]
    harness.repository.publish(harness.local(identifier)["id"])  # the review accepts it

    later = materialize_windows(harness.instance, "sample", "2024-03-01", "2024-03-01")

    assert _undone(later) == 0
    local = harness.local(identifier)
    assert (local["state"], local["draft"]) == ("live", None)


@pytest.mark.parametrize("how", ["delete", "hard_delete"])
def test_a_harvested_draft_a_user_deleted_comes_back_on_an_incremental_harvest(
    harness: Harness, how: str
) -> None:
    """publish: false leaves drafts; deleting one is a local change like any other."""
    harness.register()
    harness.set_writer('oai-service{model: "rdm", publish: false}')
    harness.harvest()
    identifier = harness.identifiers()[0]
    before = harness.local(identifier)
    getattr(harness.repository, how)(before["id"])
    assert harness.local(identifier)["state"] == "deleted"
    with pytest.raises(PipelineError, match="nothing to restore; the next harvest brings"):
        harness.repository.restore(before["id"])  # never published: no revision to restore

    later = materialize_windows(harness.instance, "sample", "2024-03-01", "2024-03-01")

    assert _undone(later) == 1
    local = harness.local(identifier)
    assert (local["id"], local["state"], local["draft"]) == (before["id"], "draft", before["draft"])
    again = materialize_windows(harness.instance, "sample", "2024-03-01", "2024-03-01")
    assert _undone(again) == 0
