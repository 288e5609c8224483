"""The state store on SQLite and PostgreSQL: registry, harvest records, runs, run status."""

from __future__ import annotations

import dataclasses
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from oai_pipeline.errors import ConfigurationError, PipelineError, RecordError
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.oai.pages import parse_response
from oai_pipeline.oai.types import (
    MAX_DATESTAMP_LENGTH,
    MAX_IDENTIFIER_LENGTH,
    HarvestedRecord,
    IdentifyInfo,
    SweepCheckpoint,
)
from oai_pipeline.state.schema import (
    CATCH_UP_COUNTERS,
    SCHEMA_VERSION,
    harvest_runs,
    harvesters,
    run_records,
    schema_version,
)
from oai_pipeline.state.store import (
    MAX_NOTICE_LENGTH,
    MAX_RUN_NOTICES,
    NOTICES_LEFT_OUT,
    RECORD_STATUSES,
    SCALES,
    StateStore,
    read_base_urls,
)
from oai_pipeline.sync.rules import Action, HarvestMemory
from oai_pipeline.targets.base import WriteOutcome
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline.transform.base import TransformItem


def record(n: int, *, deleted: bool = False, error: RecordError | None = None, day: int = 1):
    return HarvestedRecord(
        identifier=f"oai:x:{n}",
        datestamp=f"2024-01-{day:02d}",
        deleted=deleted,
        set_specs=["s1"],
        xml=None if deleted else f"<record n='{n}'/>".encode(),
        error=error,
    )


def new_run(store: StateStore, harvester_id: str = "h", *, max_records: int = 0, **window):
    return store.create_run(
        harvester_id,
        window_from=window.get("window_from"),
        window_until=window.get("window_until"),
        scale=None,
        max_records=max_records,
        options={"update_all": False},
    )


def harvester(harvester_id: str = "h") -> Harvester:
    return Harvester.from_stored(
        {"id": harvester_id, "base_url": "https://example.org/oai", "metadata_prefix": "oai_dc"}
    )


def execute(store: StateStore, statement) -> None:
    with store._engine.begin() as conn:
        conn.execute(statement)


# -- schema ------------------------------------------------------------------------------


def test_schema_is_created_once_and_versioned(store, store_url):
    StateStore(store_url).close()  # a second process opening the same database
    with store._engine.begin() as conn:
        assert conn.execute(sa.select(schema_version.c.version)).scalars().all() == [SCHEMA_VERSION]


def test_newer_schema_is_refused(store, store_url):
    execute(store, schema_version.update().values(version=SCHEMA_VERSION + 1))
    with pytest.raises(ConfigurationError, match="newer than this oai-pipeline"):
        StateStore(store_url)


def test_unusable_database_path_is_a_pipeline_error(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(PipelineError, match="cannot open the state database"):
        StateStore(f"sqlite:///{tmp_path}/a-file/state.sqlite")


# -- registry ----------------------------------------------------------------------------


def test_harvesters_saved_listed_deleted(store):
    store.save_harvester(harvester("b"))
    store.save_harvester(harvester("a"))
    store.save_harvester(harvester("a").model_copy(update={"name": "A"}))
    assert [h.id for h in store.list_harvesters()] == ["a", "b"]
    assert store.get_harvester("a").name == "A"
    assert store.get_harvester("zzz") is None
    assert store.delete_harvester("a") is True
    assert store.delete_harvester("a") is False


def test_identify_is_recorded_on_the_harvester(store):
    info = IdentifyInfo(
        "Zenodo",
        "https://zenodo.org/oai2d",
        "seconds",
        "2014-02-03T14:41:33Z",
        "no",
        "2026-01-01T00:00:00Z",
    )
    with pytest.raises(PipelineError, match="unknown harvester"):
        store.save_identify("h", info)
    store.save_harvester(harvester())
    assert store.get_identify("h") is None
    store.save_identify("h", info)
    assert store.get_identify("h") == info
    with_admins = dataclasses.replace(info, admin_emails=("info@zenodo.org", "b@x.org"))
    store.save_identify("h", with_admins)
    assert store.get_identify("h") == with_admins


def test_an_identify_saved_before_admin_emails_were_read_loads_without_them(store):
    """What an earlier version saved has no admin_emails: read as none, not a failure."""
    store.save_harvester(harvester())
    with store._engine.begin() as conn:
        conn.execute(
            harvesters.update()
            .where(harvesters.c.id == "h")
            .values(
                identify={
                    "repository_name": "Zenodo",
                    "base_url": "https://zenodo.org/oai2d",
                    "granularity": "seconds",
                    "earliest_datestamp": "2014-02-03T14:41:33Z",
                    "deleted_record": "no",
                    "response_date": "2026-01-01T00:00:00Z",
                }
            )
        )
    assert store.get_identify("h").admin_emails == ()


def test_a_prefix_change_undone_before_a_harvest_in_it_leaves_the_records_as_they_are(store):
    """A prefix mistyped and put right before any record was harvested in it: the records
    are in the prefix the harvester has again. Before, each was taken for the mistyped
    format's (`harvested as 'oai_dcc'`): held back from every reconcile, and staged,
    transformed and written anew at the next harvest that listed it."""
    dc = harvester()
    store.save_harvester(dc)
    store.upsert_harvested("h", [record(1)])
    store.save_harvester(dc.model_copy(update={"metadata_prefix": "oai_dcc"}))
    store.save_harvester(dc)
    assert store.harvested_before_prefix_change("h", ["oai:x:1"]) is None
    # a change kept: records harvested before it (in oai_dc) are of another format
    datacite = dc.model_copy(update={"metadata_prefix": "oai_datacite"})
    store.save_harvester(datacite)
    assert store.harvested_before_prefix_change("h", ["oai:x:1"]) == ({"oai_dc": 1}, ["oai:x:1"])
    # undone after a harvest in it: the record harvested since is of the prefix undone; the
    # one harvested before both changes is in the prefix the harvester has again (it was
    # held back too, as oai_dc's, although oai_dc is the prefix again)
    store.upsert_harvested("h", [record(2)])
    store.save_harvester(dc)
    found = store.harvested_before_prefix_change("h", ["oai:x:1", "oai:x:2"])
    assert found == ({"oai_datacite": 1}, ["oai:x:2"])
    assert store.harvested_before_prefix_change("h", ["oai:x:1"]) is None
    # mistyped again and put right: the change before the typo stands again
    store.save_harvester(dc.model_copy(update={"metadata_prefix": "oai_dcc"}))
    store.save_harvester(dc)
    found = store.harvested_before_prefix_change("h", ["oai:x:1", "oai:x:2"])
    assert found == ({"oai_datacite": 1}, ["oai:x:2"])


def test_records_held_back_after_two_prefix_changes_are_counted_by_the_format_harvested_in(
    store,
):
    """A -> B -> C: the records harvested as A are held back too, and were named as B's
    (`harvested as 'B'`). Each is counted under the prefix it was harvested in."""
    dc = harvester()
    store.save_harvester(dc)
    store.upsert_harvested("h", [record(1), record(2)])  # as oai_dc
    store.save_harvester(dc.model_copy(update={"metadata_prefix": "oai_datacite"}))
    store.upsert_harvested("h", [record(3)])  # as oai_datacite
    store.save_harvester(dc.model_copy(update={"metadata_prefix": "datacite"}))
    store.upsert_harvested("h", [record(4)])  # as datacite: not held back

    found = store.harvested_before_prefix_change("h", [f"oai:x:{n}" for n in (1, 2, 3, 4)])

    assert found == ({"oai_datacite": 1, "oai_dc": 2}, ["oai:x:1", "oai:x:2", "oai:x:3"])
    assert list(found[0]) == ["oai_datacite", "oai_dc"]  # the latest format first


def test_a_harvester_re_created_over_its_kept_records_in_another_prefix_changed_its_prefix(
    store,
):
    """Deleted with its records kept and created again with another metadata prefix: no
    prefix change was recorded, so a reconcile took the records harvested in the old format,
    which the new format's list leaves out, for deletions. It is a change of prefix, as
    `harvesters update --metadata-prefix` records one; created again in the same prefix, the
    change kept before stands; deleted with its records, nothing is left to hold back."""
    dc = harvester()
    store.save_harvester(dc)
    store.upsert_harvested("h", [record(1)])
    store.delete_harvester("h")
    datacite = dc.model_copy(update={"metadata_prefix": "oai_datacite"})
    store.save_harvester(datacite)
    assert store.harvested_before_prefix_change("h", ["oai:x:1"]) == ({"oai_dc": 1}, ["oai:x:1"])
    store.delete_harvester("h")
    store.save_harvester(datacite)  # the same prefix again: the change before stands
    assert store.harvested_before_prefix_change("h", ["oai:x:1"]) == ({"oai_dc": 1}, ["oai:x:1"])
    store.delete_harvester("h", delete_records=True)
    store.save_harvester(dc)
    store.upsert_harvested("h", [record(2)])
    assert store.harvested_before_prefix_change("h", ["oai:x:2"]) is None


@pytest.mark.parametrize("delete_records", [False, True])
def test_deleting_a_harvester_keeps_records_unless_asked(store, delete_records):
    store.save_harvester(harvester())
    run_id = new_run(store)
    store.stage(run_id, "h", [record(1)])
    store.resume_run(run_id, "a-dagster-run")  # remembered beside the run
    store.delete_harvester("h", delete_records=delete_records)
    assert (store.get_record("oai:x:1") is None) is delete_records
    assert (store.get_run(run_id) is None) is delete_records
    assert (store.runs_of_dagster_run("a-dagster-run") == []) is delete_records


@pytest.mark.parametrize("alive", [False, True])
def test_a_run_the_cli_resumed_from_a_dagster_run_is_judged_by_its_process(store, alive):
    """`oai-pipeline harvest --resume RUN` of a run a failed Dagster run began, then killed:
    no Dagster run works on it any more, so its process tells whether it is alive."""
    run_id = new_run(store)
    store.resume_run(run_id, "a-failed-dagster-run")
    store.finish_run(run_id, "failed", error="the Dagster run failed")
    store.resume_run(run_id, worker="host:1234:nonce")

    settled = store.settle_interrupted_runs(
        "h", lambda _harvester, _worker: "held" if alive else "lost"
    )

    run = store.get_run(run_id)
    assert (run["status"], [r["id"] for r in settled]) == (
        ("running", []) if alive else ("failed", [run_id])
    )
    assert run["dagster_run_id"] is None
    assert alive or run["error"].startswith("interrupted: its process (host:1234) is gone")


# -- harvest records ---------------------------------------------------------------------


def test_harvested_transformed_written_and_remembered(store):
    parse_error = RecordError(type="xml_syntax", message="unclosed tag", location="line 3")
    store.upsert_harvested("h", [record(1), record(2, error=parse_error), record(3, deleted=True)])
    item1 = TransformItem("oai:x:1", "2024-01-01", [], b"<r/>", data={"title": "one"}, pid="10/1")
    item2 = TransformItem("oai:x:2", "2024-01-01", [], b"<r/>", error=parse_error)
    item3 = TransformItem("oai:x:3", "2024-01-01", [], None)
    store.save_transformed("h", [item1, item2, item3])
    one = store.get_record("oai:x:1")
    assert one["data"] == {"title": "one"} and one["pid"] == "10/1" and one["errors"] == []
    assert one["xml"] == "<record n='1'/>" and one["set_specs"] == ["s1"]
    # the parse error carried through the chain is not stored twice
    assert [e["stage"] for e in store.get_record("oai:x:2")["errors"]] == ["harvest"]
    assert store.get_memories("h", ["oai:x:1", "oai:x:2"]) == {}

    failure = RecordError(type="missing_community", message="no community 'x'", location="parent")
    store.save_write_outcomes(
        "h",
        [
            WriteOutcome("oai:x:1", Action.CREATE, "abc-123", 1),
            WriteOutcome("oai:x:3", Action.DELETE, None, None, error=failure),
        ],
        {"oai:x:1": "2024-01-01", "oai:x:3": "2024-01-01"},
    )
    memories = store.get_memories("h", ["oai:x:1", "oai:x:3", "oai:x:9"])
    assert memories == {
        "oai:x:1": HarvestMemory("2024-01-01", False, "abc-123", 1, deleted=False),
        "oai:x:3": HarvestMemory("2024-01-01", True, None, None, deleted=True),
    }
    # a later write without a local id keeps the one we know; errors are those of the last write
    store.save_write_outcomes(
        "h", [WriteOutcome("oai:x:1", Action.UPDATE, None, 2, error=failure)], {"oai:x:1": "d2"}
    )
    assert store.get_memories("h", ["oai:x:1"])["oai:x:1"] == HarvestMemory(
        "d2", True, "abc-123", 2, deleted=False
    )
    store.save_write_outcomes(
        "h", [WriteOutcome("oai:x:1", Action.UPDATE, "abc-123", 3)], {"oai:x:1": "d3"}
    )
    assert store.get_memories("h", ["oai:x:1"])["oai:x:1"].had_errors is False
    assert store.get_record("oai:x:1")["last_written_at"] is not None


def test_reharvest_replaces_datestamp_and_parse_error(store):
    bad = RecordError(type="xml_syntax", message="broken")
    store.upsert_harvested("h", [record(1, error=bad)])
    store.upsert_harvested("h", [record(1, day=5)])
    again = store.get_record("oai:x:1", "h")
    assert again["datestamp"] == "2024-01-05" and again["errors"] == []


def test_a_record_listed_again_unchanged_takes_its_new_sets(store):
    """Staging touches a record listed again as stored in one statement for all: a record
    whose sets changed without a new datestamp must still take them."""
    store.stage(new_run(store), "h", [record(1), record(2)])
    before = store.get_record("oai:x:1", "h")["last_harvested_at"]
    moved = dataclasses.replace(record(2), set_specs=["s1", "s2"])
    store.stage(new_run(store), "h", [record(1), moved])
    assert store.get_record("oai:x:2", "h")["set_specs"] == ["s1", "s2"]
    assert store.get_record("oai:x:1", "h")["set_specs"] == ["s1"]
    assert store.get_record("oai:x:1", "h")["last_harvested_at"] >= before


def test_mark_gone_and_live_identifiers(store):
    store.upsert_harvested("h", [record(1), record(2), record(3, deleted=True)])
    store.upsert_harvested("other", [record(1)])
    assert store.live_identifiers("h") == {"oai:x:1", "oai:x:2"}
    store.mark_gone("h", {"oai:x:2"})
    assert store.live_identifiers("h") == {"oai:x:1"}
    gone = store.get_record("oai:x:2", "h")
    assert gone["deleted"] is True and gone["gone_at"] is not None
    assert store.live_identifiers("other") == {"oai:x:1"}


def test_get_record_needs_a_harvester_when_ambiguous(store):
    store.upsert_harvested("a", [record(1)])
    store.upsert_harvested("b", [record(1)])
    with pytest.raises(PipelineError, match=r"several harvesters \(a, b\)"):
        store.get_record("oai:x:1")
    assert store.get_record("oai:x:1", "b")["harvester_id"] == "b"
    assert store.get_record("oai:x:404") is None


@pytest.fixture
def records_with_errors(store):
    store.upsert_harvested("h", [record(n) for n in range(1, 6)] + [record(6, deleted=True)])
    store.upsert_harvested("other", [record(7)])
    store.save_transformed(
        "h",
        [
            TransformItem(
                "oai:x:2",
                "d",
                [],
                b"<r/>",
                error=RecordError(type="transform", message="No TITLE found", location="titles"),
            ),
            TransformItem(
                "oai:x:3",
                "d",
                [],
                b"<r/>",
                error=RecordError(type="transform", message="bad 100% date", location="dates.0"),
            ),
        ],
    )
    store.save_write_outcomes(
        "h",
        [
            WriteOutcome(
                "oai:x:4",
                Action.ERROR,
                None,
                None,
                RecordError(
                    type="missing_community",
                    message="no such community",
                    location="parent.communities",
                ),
            ),
            WriteOutcome("oai:x:6", Action.DELETE, "L6", 2),
        ],
        {"oai:x:4": "d", "oai:x:6": "d"},
    )
    return store


def _ids(found):
    return [r["identifier"] for r in found]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, ["oai:x:1", "oai:x:2", "oai:x:3", "oai:x:4", "oai:x:5", "oai:x:6", "oai:x:7"]),
        ({"harvester_id": "other"}, ["oai:x:7"]),
        ({"harvester_id": "h", "deleted": True}, ["oai:x:6"]),
        (
            {"harvester_id": "h", "deleted": False},
            ["oai:x:1", "oai:x:2", "oai:x:3", "oai:x:4", "oai:x:5"],
        ),
        ({"error_type": "transform"}, ["oai:x:2", "oai:x:3"]),
        ({"error_type": "missing_community"}, ["oai:x:4"]),
        ({"error_type": "nothing"}, []),
        ({"message": "title"}, ["oai:x:2"]),  # case-insensitive substring
        ({"message": "100%"}, ["oai:x:3"]),  # % is text, not a wildcard
        ({"message": "1_0"}, []),
        ({"location": "communities"}, ["oai:x:4"]),
        ({"location": "dates"}, ["oai:x:3"]),
        ({"error_type": "transform", "location": "titles"}, ["oai:x:2"]),
        ({"error_type": "missing_community", "message": "title"}, []),  # same error, all filters
        ({"harvester_id": "h", "error_type": "transform"}, ["oai:x:2", "oai:x:3"]),
        ({"harvester_id": "other", "error_type": "transform"}, []),
        ({"deleted": False, "message": "no such"}, ["oai:x:4"]),
        ({"limit": 2}, ["oai:x:1", "oai:x:2"]),
    ],
)
def test_list_records_filters(records_with_errors, filters, expected):
    found = records_with_errors.list_records(**filters)
    assert _ids(found) == expected


def test_listed_records_carry_their_errors(records_with_errors):
    [four] = records_with_errors.list_records(error_type="missing_community")
    assert four["errors"] == [
        {
            "stage": "write",
            "type": "missing_community",
            "message": "no such community",
            "location": "parent.communities",
        }
    ]
    assert "xml" not in four and "data" not in four


# -- harvest runs ------------------------------------------------------------------------


def test_runs_created_listed_found_and_finished(store):
    first = new_run(store, window_from="2024-01-01", window_until="2024-01-31")
    other = new_run(store, "other")
    run = store.get_run(first)
    assert run["status"] == "running" and run["options"] == {"update_all": False}
    assert run["checkpoint"] is None and run["staged"] == 0
    assert store.get_run(999) is None
    assert [r["id"] for r in store.list_runs()] == [other, first]
    assert [r["id"] for r in store.list_runs(harvester_id="h")] == [first]
    assert store.latest_run("h")["id"] == first
    assert store.latest_run("h", status="succeeded") is None
    # a run that did not succeed is resumed for the same window only
    assert store.find_resumable_run("h", "2024-01-01", "2024-01-31")["id"] == first
    assert store.find_resumable_run("h", "2024-01-01", None) is None
    store.finish_run(first, "failed", error="ConnectError: boom")
    assert (
        store.find_resumable_run("h", "2024-01-01", "2024-01-31")["error"] == "ConnectError: boom"
    )
    store.finish_run(first, "succeeded")
    assert store.find_resumable_run("h", "2024-01-01", "2024-01-31") is None
    assert store.get_run(first)["finished_at"] is not None
    unbounded = new_run(store)
    assert store.find_resumable_run("h", None, None)["id"] == unbounded
    with pytest.raises(ValueError):
        store.finish_run(first, "running")  # type: ignore[arg-type]
    with pytest.raises(PipelineError, match="unknown scale"):
        store.create_run(
            "h", window_from=None, window_until=None, scale="huge", max_records=0, options={}
        )
    assert SCALES == {"smoke": 10, "small": 100, "medium": 1000, "large": 10000, "full": 0}


def test_checkpoint_is_durable_and_last_success_has_the_first_response_date(store):
    run_id = new_run(store)
    first_page = SweepCheckpoint(
        "2024-01-01", None, "s1", "oai_dc", None, 0, None, "2026-05-01T10:00:00Z"
    )
    later = SweepCheckpoint(
        "2024-01-01", None, "s1", "oai_dc", "token-2", 1, 50, "2026-05-01T10:00:09Z"
    )
    store.save_checkpoint(run_id, first_page)
    store.save_response_date(run_id, "2026-05-01T10:00:00Z")
    store.save_checkpoint(run_id, later)
    store.save_response_date(run_id, "2026-05-01T10:00:09Z")  # a later page's: kept the first
    assert store.get_run(run_id)["checkpoint"] == later
    assert store.last_success("h") is None
    store.finish_run(run_id, "succeeded")
    assert store.last_success("h")["response_date"] == "2026-05-01T10:00:00Z"


def test_staging_is_idempotent(store, store_url):
    run_id = new_run(store)
    page = [record(1), record(2), record(3)]
    assert store.stage(run_id, "h", page + [record(1)]) == (3, 1, 0)
    assert store.stage(run_id, "h", page) == (0, 3, 0)  # the same page again (redone window)
    assert store.stage(run_id, "h", [record(3), record(4)]) == (1, 1, 0)
    # after a crash, another process sees the same durable rows
    reopened = StateStore(store_url)
    assert reopened.stage(run_id, "h", [record(4), record(5)]) == (1, 1, 0)
    reopened.close()
    assert store.get_run(run_id)["staged"] == 5
    assert [r.identifier for r in store.iter_staged(run_id, batch_size=2)] == [
        "oai:x:1",
        "oai:x:2",
        "oai:x:3",
        "oai:x:4",
        "oai:x:5",
    ]
    # another run stages the same records anew
    assert store.stage(new_run(store), "h", page) == (3, 0, 0)


def test_a_newer_copy_of_a_staged_record_is_the_runs_newest_datestamp(store):
    """`status` shows the newest datestamp a run staged: a resumed run's catch-up list that
    brought only newer copies of the run's records (updated since) left it at the old ones'."""
    run_id = new_run(store)
    store.stage(run_id, "h", [record(1, day=5), record(2, day=6)])
    assert store.stage(run_id, "h", [record(1, day=20)]) == (0, 1, 1)
    assert store.get_run(run_id)["last_datestamp"] == "2024-01-20"


def test_a_catch_up_page_is_counted_with_what_it_staged(store):
    """A catch-up page's counters are saved with its records (one transaction): counted
    after, a run killed in between had its rerun take the page's records for duplicates."""
    run_id = new_run(store)
    store.stage(run_id, "h", [record(1, day=5), record(2, day=5)])
    page = [record(1, day=20), record(2, day=5), record(3, day=20)]
    assert store.stage(run_id, "h", page, catch_up_listed=4) == (1, 2, 1)
    run = store.get_run(run_id)
    counted = {name: run[name] for name in CATCH_UP_COUNTERS}
    assert counted == {
        "catch_up_pages": 1,
        "catch_up_listed": 4,
        "catch_up_new_records": 1,
        "catch_up_newer_copies": 1,
    }
    # a page of the token sweep is none of the catch-up list's
    store.stage(run_id, "h", [record(4)])
    assert store.get_run(run_id)["catch_up_pages"] == 1


def test_the_room_under_a_cap_is_for_new_records_only(store):
    """A capped run's room goes to records new to the run: newer copies of its own records
    (a resumed run's catch-up list) are always taken."""
    run_id = new_run(store)
    store.stage(run_id, "h", [record(1, day=5)])
    page = [record(1, day=20), record(2, day=20), record(3, day=20)]
    assert store.stage(run_id, "h", page, room=1) == (1, 1, 1)
    staged = {r.identifier: r.datestamp for r in store.iter_staged(run_id)}
    assert staged == {"oai:x:1": "2024-01-20", "oai:x:2": "2024-01-20"}


def test_iter_staged_gives_records_as_harvested(store):
    run_id = new_run(store)
    bad = RecordError(type="xml_syntax", message="broken", location="line 2")
    store.stage(run_id, "h", [record(1), record(2, deleted=True), record(3, error=bad)])
    one, two, three = store.iter_staged(run_id)
    assert one == record(1)
    assert two.deleted is True and two.xml is None
    assert three.error == bad
    with pytest.raises(PipelineError):
        list(store.iter_staged(999))


def test_reconcile_counters_after_a_crash_between_rows_and_counters(store):
    run_id = new_run(store, max_records=4)
    store.stage(run_id, "h", [record(n) for n in range(1, 5)])
    store.update_counters(run_id, pages_read=1, discovered=2)
    # the process died after its rows were durable but before its counters were saved
    execute(store, harvest_runs.update().values(staged=1, discovered=0, cap_reached=False))
    counters = store.reconcile_counters(run_id)
    assert counters == {
        "pages_read": 1,
        "discovered": 4,
        "staged": 4,
        "duplicates_skipped": 0,
        "existing_skipped": 0,
        "cap_reached": True,  # 4 staged of a cap of 4: the cap holds across the crash
        **dict.fromkeys(CATCH_UP_COUNTERS, 0),
    }
    run = store.get_run(run_id)
    assert (run["staged"], run["discovered"], run["cap_reached"]) == (4, 4, True)
    with pytest.raises(PipelineError):
        store.reconcile_counters(999)


def test_update_counters_adds_deltas(store):
    run_id = new_run(store)
    store.update_counters(run_id, pages_read=1, discovered=10, duplicates_skipped=2)
    store.update_counters(run_id, pages_read=1, discovered=5, existing_skipped=3)
    store.set_cap_reached(run_id)
    run = store.get_run(run_id)
    assert (run["pages_read"], run["discovered"], run["duplicates_skipped"]) == (2, 15, 2)
    assert run["existing_skipped"] == 3 and run["cap_reached"] is True
    with pytest.raises(ValueError, match="unknown run counter"):
        store.update_counters(run_id, pages=1)


def _age_claims(store: StateStore, minutes: int) -> None:
    old = (datetime.now(UTC) - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    execute(
        store, run_records.update().where(run_records.c.status == "running").values(claimed_at=old)
    )


def test_claim_reclaim_and_retry_failed(store):
    run_id = new_run(store)
    store.stage(run_id, "h", [record(n) for n in range(1, 7)])
    assert store.claim(run_id, limit=2) == ["oai:x:1", "oai:x:2"]
    assert store.claim(run_id) == ["oai:x:3", "oai:x:4", "oai:x:5", "oai:x:6"]
    assert store.claim(run_id) == []  # nothing pending; running ones are not stale yet
    assert store.claim(run_id, reclaim_stale_minutes=10) == []
    failure = RecordError(type="writer", message="rejected")
    store.set_record_status(
        run_id,
        {
            "oai:x:1": "imported",
            "oai:x:2": "updated",
            "oai:x:3": "unchanged",
            "oai:x:4": "gone",
            "oai:x:5": "failed",
        },
        {"oai:x:5": failure},
    )
    _age_claims(store, 15)  # oai:x:6 was left running by a crashed process
    assert store.claim(run_id) == []
    assert store.claim(run_id, reclaim_stale_minutes=20) == []
    assert store.claim(run_id, reclaim_stale_minutes=10) == ["oai:x:6"]
    assert store.claim(run_id, reclaim_stale_minutes=10) == []  # freshly claimed again
    assert store.claim(run_id, retry_failed=True) == ["oai:x:5"]
    _age_claims(store, 60)
    store.set_record_status(run_id, {"oai:x:5": "imported", "oai:x:6": "failed"})
    # successful records are never claimed again, whatever is asked
    assert store.claim(run_id, reclaim_stale_minutes=0, retry_failed=True) == ["oai:x:6"]
    with pytest.raises(ValueError, match="unknown record status"):
        store.set_record_status(run_id, {"oai:x:1": "done"})


def test_claim_as_unchanged_settles_records_in_one_step(store):
    run_id = new_run(store)
    store.stage(run_id, "h", [record(n) for n in range(1, 5)])
    store.claim(run_id, identifiers=["oai:x:3", "oai:x:4"])
    store.set_record_status(
        run_id,
        {"oai:x:3": "imported", "oai:x:4": "failed"},
        {"oai:x:4": RecordError(type="w", message="no")},
    )
    every = [f"oai:x:{n}" for n in range(1, 5)]
    assert store.claim(run_id, identifiers=every, unchanged=True) == ["oai:x:1", "oai:x:2"]
    assert store.claim(run_id, identifiers=every, unchanged=True, retry_failed=True) == ["oai:x:4"]
    with store._engine.begin() as conn:
        rows = conn.execute(
            sa.select(run_records.c.identifier, run_records.c.status)
            .add_columns(run_records.c.attempts, run_records.c.error_type)
            .order_by(run_records.c.identifier)
        ).all()
    assert [tuple(row) for row in rows] == [
        ("oai:x:1", "unchanged", 1, None),
        ("oai:x:2", "unchanged", 1, None),
        ("oai:x:3", "imported", 1, None),
        ("oai:x:4", "unchanged", 2, None),  # the retried failure's error is gone
    ]
    assert store.claim(run_id, retry_failed=True, reclaim_stale_minutes=0) == []


def test_run_status_reports_everything(store):
    store.save_harvester(harvester())
    run_id = store.create_run(
        "h",
        window_from="2024-01-01",
        window_until="2024-01-31",
        scale="smoke",
        max_records=10,
        options={},
        dagster_run_id="dg-1",
    )
    store.save_checkpoint(
        run_id,
        SweepCheckpoint(
            "2024-01-01", "2024-01-31", None, "oai_dc", "tok", 1, 3, "2026-05-01T10:00:00Z"
        ),
    )
    store.stage(run_id, "h", [record(n) for n in range(1, 6)] + [record(1)])
    store.update_counters(
        run_id, pages_read=1, discovered=6, duplicates_skipped=1, existing_skipped=0
    )
    store.claim(run_id, limit=4)
    failure = RecordError(type="writer", message="rejected", location="metadata.title")
    store.set_record_status(
        run_id, {"oai:x:1": "imported", "oai:x:2": "failed"}, {"oai:x:2": failure}
    )
    execute(
        store,
        run_records.update()
        .where(run_records.c.identifier == "oai:x:3")
        .values(claimed_at="2000-01-01T00:00:00.000000Z"),
    )
    status = store.run_status(run_id=run_id, target_stats={"records": 7, "source_ids": 5})
    assert status["run"]["id"] == run_id and status["run"]["status"] == "running"
    assert status["run"]["scale"] == "smoke" and status["run"]["dagster_run_id"] == "dg-1"
    assert status["counters"] == {
        "pages_read": 1,
        "discovered": 6,
        "staged": 5,
        "duplicates_skipped": 1,
        "existing_skipped": 0,
        "cap_reached": False,
        **dict.fromkeys(CATCH_UP_COUNTERS, 0),
    }
    assert status["records"] == {
        "pending": 1,
        "running": 2,
        "imported": 1,
        "updated": 0,
        "unchanged": 0,
        "gone": 0,
        "failed": 1,
    }
    assert set(status["records"]) == set(RECORD_STATUSES)
    assert status["total_records"] == 5
    assert status["stale_running"] == 1
    [failed] = status["recent_failures"]
    assert failed["identifier"] == "oai:x:2" and failed["attempts"] == 1
    assert failed["error"] == {
        "type": "writer",
        "message": "rejected",
        "location": "metadata.title",
    }
    assert status["discovery_state"]["resumption_token"] == "tok"
    assert status["discovery_state"]["cursor"] == 3
    assert status["discovery_state"]["complete"] is False  # running: resumes from its token
    assert status["harvest_records"] == {"total": 5, "live": 5, "deleted": 0, "with_errors": 0}
    assert status["target"] == {"records": 7, "source_ids": 5}
    # the harvester's latest run, or the latest of all
    later = new_run(store, "other")
    assert store.run_status(harvester_id="h")["run"]["id"] == run_id
    assert store.run_status()["run"]["id"] == later
    with pytest.raises(PipelineError, match="unknown harvester 'nobody'"):
        store.run_status(harvester_id="nobody")
    with pytest.raises(PipelineError, match="no harvest run 999"):
        store.run_status(run_id=999)


def test_a_runs_notices_are_kept_once_each_in_order_and_bounded(store):
    """What the source did that the operator should know of (Reader.notices), saved by each
    attempt of the run: an attempt's own are added to the earlier ones, none twice."""
    run_id = new_run(store)
    assert store.get_run(run_id)["notices"] == []
    assert store.run_status(run_id=run_id)["notices"] == []
    assert store.add_run_notices(run_id, []) == []
    assert store.add_run_notices(run_id, ["moved", "by day"]) == ["moved", "by day"]
    # a resumed attempt met one of them again, and another
    assert store.add_run_notices(run_id, ["by day", "another base URL"]) == [
        "moved",
        "by day",
        "another base URL",
    ]
    assert store.get_run(run_id)["notices"] == ["moved", "by day", "another base URL"]
    assert store.run_status(run_id=run_id)["notices"] == ["moved", "by day", "another base URL"]
    assert [r["notices"] for r in store.list_runs()] == [["moved", "by day", "another base URL"]]
    # a source's message quoted in a notice is its own: one line, and not without end
    other = new_run(store)
    [long] = store.add_run_notices(other, ["the source says:\n" + "x" * 5000])
    assert long.startswith("the source says: xxx") and long.endswith("…")
    assert len(long) == MAX_NOTICE_LENGTH
    # and not without number
    many = [f"notice {n}" for n in range(MAX_RUN_NOTICES + 5)]
    kept = store.add_run_notices(other, many)
    assert len(kept) == MAX_RUN_NOTICES and kept[-1] == NOTICES_LEFT_OUT
    assert kept[1:-1] == many[: MAX_RUN_NOTICES - 2]  # the first met are kept
    assert store.add_run_notices(other, ["later still"]) == kept  # still full
    assert store.add_run_notices(other, many[:3]) == kept
    assert store.get_run(run_id)["notices"] == ["moved", "by day", "another base URL"]


def test_two_processes_write_side_by_side(store, store_url):
    """Two harvesters' runs, each through its own connection pool, at the same time."""
    from concurrent.futures import ThreadPoolExecutor

    def harvest(harvester_id: str) -> int:
        own = StateStore(store_url)
        try:
            run_id = new_run(own, harvester_id)
            for page in range(20):
                records = [record(page * 10 + n) for n in range(10)]
                own.stage(run_id, harvester_id, records)
                own.update_counters(run_id, pages_read=1, discovered=len(records))
                claimed = own.claim(run_id)
                own.set_record_status(run_id, dict.fromkeys(claimed, "imported"))
            return own.reconcile_counters(run_id)["staged"]
        finally:
            own.close()

    with ThreadPoolExecutor(max_workers=3) as pool:
        staged = list(pool.map(harvest, ["a", "b", "c"]))
    assert staged == [200, 200, 200]
    assert store.run_status(harvester_id="b")["records"]["imported"] == 200


@pytest.mark.parametrize(
    ("metadata", "without_identifier"),
    [
        ("<x/>", "MissingIdentifier"),
        # not well-formed: the page's records are read one by one, the error is the cut
        ("<x>&undefined;</x>", "InvalidDatestamp"),
        ("<x>a</y>", "InvalidDatestamp"),
    ],
    ids=["well-formed", "undefined-entity", "mismatched-tags"],
)
def test_an_over_long_identifier_or_datestamp_is_the_records_error(
    store, metadata, without_identifier
):
    """Longer than the columns: PostgreSQL would refuse the whole page. Before, a record
    that did not parse (read apart from its page) kept them whole, and so did a record with
    both too long (only the identifier was cut), or without identifier: PostgreSQL
    refused to stage the page and the harvest failed."""
    long_id, long_stamp = "oai:x:" + "i" * 1200, "2024-01-01T10:00:00.123456789012+02:00"

    def item(identifier: str, datestamp: str) -> str:
        return (
            f"<record><header><identifier>{identifier}</identifier>"
            f"<datestamp>{datestamp}</datestamp></header><metadata>{metadata}</metadata></record>"
        )

    page = (
        '<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">'
        "<responseDate>2024-01-01T00:00:00Z</responseDate><ListRecords>"
        f"{item(long_id, '2024-01-01')}{item('oai:x:2', long_stamp)}"
        f"{item('oai:x:' + 'j' * 1200, long_stamp)}{item('', long_stamp)}"
        "</ListRecords></OAI-PMH>"
    ).encode()
    records = parse_response(page, "ListRecords").records

    assert store.stage(new_run(store), "h", records) == (4, 0, 0)

    stored = [store.get_record(r.identifier, "h") for r in records]
    assert [(len(r["identifier"]), len(r["datestamp"])) for r in stored] == [
        (MAX_IDENTIFIER_LENGTH, 10),
        (7, MAX_DATESTAMP_LENGTH),
        (MAX_IDENTIFIER_LENGTH, MAX_DATESTAMP_LENGTH),
        (0, MAX_DATESTAMP_LENGTH),
    ]
    assert [r["errors"][0]["type"] for r in stored] == [
        "InvalidIdentifier",
        "InvalidDatestamp",
        "InvalidIdentifier",
        without_identifier,
    ]


def test_read_base_urls_reads_only_the_harvesters_asked_for(
    store: StateStore, store_url: str
) -> None:
    """The run coordinator's read (no schema check, a bounded wait), on both databases."""
    store.save_harvesters([harvester("a"), harvester("b")])
    assert read_base_urls(store_url, {"a", "gone"}, timeout_seconds=2) == {
        "a": "https://example.org/oai"
    }
    assert read_base_urls(store_url, set(), timeout_seconds=2) == {}


def test_read_base_urls_of_a_store_not_made_yet_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "none" / "state.sqlite"
    assert read_base_urls(f"sqlite:///{missing}", {"a"}, timeout_seconds=2) == {}
    assert not missing.parent.exists()


def test_records_listed_later_are_read_from_the_harvesters_later_runs(store):
    """Every discover (and the sensor's `records_owed`) asks which of its run's records a
    later run of the harvester listed. Asked by `run_id >` alone, SQLite read the rows of every
    later run of every harvester (ix_run_records_status (run_id>?)) to keep the harvester's:
    another harvester's full harvest staged beside it cost every discover its million rows.
    The answer stays the same; on SQLite, its plan searches the harvester's later runs."""
    first = new_run(store)
    store.stage(first, "h", [record(n) for n in range(1, 5)])
    beside = new_run(store, "other")  # another harvester's run, later, same identifiers
    store.stage(beside, "other", [record(n) for n in range(1, 5)])
    later = new_run(store)
    store.stage(later, "h", [record(2)])
    sent: list[tuple[str, object]] = []

    def grab(_conn, _cursor, statement, parameters, _context, _many) -> None:  # noqa: ANN001
        if "FROM run_records" in statement and not statement.startswith("EXPLAIN"):
            sent.append((statement, parameters))

    engine = store._engine  # noqa: SLF001
    sa.event.listen(engine, "before_cursor_execute", grab)
    try:
        staged = store.iter_staged(first, group_of=lambda _d: 0, moved_out=lambda _d: True)
        assert [r.identifier for r in staged] == ["oai:x:1", "oai:x:3", "oai:x:4"]
        assert store.records_owed(first) == 3
    finally:
        sa.event.remove(engine, "before_cursor_execute", grab)
    if engine.dialect.name != "sqlite":
        return
    asking = [(s, p) for s, p in sent if "run_records.identifier IN (SELECT" in s or "NOT IN" in s]
    assert len(asking) == 2, sent
    with engine.connect() as conn:
        for statement, parameters in asking:
            plan = " | ".join(
                row[3]
                for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
            )
            assert "(run_id>?)" not in plan, plan


@pytest.mark.postgres
def test_a_new_runs_records_are_searched_by_identifier_once_staged(postgres_url: str) -> None:
    """PostgreSQL estimated a run made since its last ANALYZE at a row or so: each chunk of the
    write (`run_id = ? AND identifier IN (...)`) searched the run by run_id alone and filtered
    every row of it. Once staged, the run's statistics are gathered and the chunk's
    identifiers are searched in the (run_id, identifier) index."""
    from oai_pipeline_tests.postgres import fresh_database

    def staged(run_id: int, rows: int) -> str:  # a large run's rows, quickly
        return (
            "INSERT INTO run_records (run_id, harvester_id, identifier, status, attempts, "
            f"updated_at) SELECT {run_id}, 'h', 'oai:x:' || n, 'pending', 0, 'x' "
            f"FROM generate_series(1, {rows}) n"
        )

    with StateStore(fresh_database(postgres_url, "state")) as store:
        engine = store._engine  # noqa: SLF001
        older = new_run(store)
        with engine.connect() as conn:
            conn.execute(sa.text(staged(older, 100_000)))
            conn.execute(sa.text("ANALYZE run_records"))
            conn.commit()
        run_id = new_run(store)
        with engine.connect() as conn:
            conn.execute(sa.text(staged(run_id, 100_000)))
            conn.commit()
        store.refresh_run_statistics()
        chunk = ", ".join(f"'oai:x:{n}'" for n in range(4000, 4500))
        with engine.connect() as conn:
            plan = " | ".join(
                row[0]
                for row in conn.exec_driver_sql(
                    "EXPLAIN SELECT status FROM run_records "
                    f"WHERE run_id = {run_id} AND identifier IN ({chunk})"
                )
            )
        assert "uq_run_records_run_identifier" in plan, plan
        assert "identifier" in plan.split("Index Cond")[1].split("Filter")[0], plan
        asked = [f"oai:x:{n}" for n in range(4000, 4500)]
        assert set(store.record_statuses(run_id, asked).values()) == {"pending"}


def test_a_failed_record_changed_the_same_day_is_a_newer_copy(store):
    """A source dating records by day: a record whose transform failed, changed again later
    that day (same datestamp, other XML), is the run's to transform again. Before, its stored
    error kept it out of the XML comparison: the new copy counted as the one staged, and the
    record stayed failed with the old XML."""
    today = datetime.now(UTC).date().isoformat()
    listed_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    first = HarvestedRecord("oai:x:1", today, False, ["s1"], b"<record v='1'/>")
    run_id = new_run(store)
    store.stage(run_id, "h", [first], listed_at=listed_at)
    failed = RecordError(type="TransformError", message="no title", location=None)
    store.save_transformed(
        "h", [TransformItem(first.identifier, today, [], first.xml, error=failed)]
    )
    store.set_record_status(run_id, {first.identifier: "failed"}, {first.identifier: failed})

    fixed = dataclasses.replace(first, xml=b"<record v='2'/>")
    store.stage(run_id, "h", [fixed], listed_at=listed_at)
    assert [r.xml for r in store.iter_staged(run_id)] == [fixed.xml]
    assert store.claim(run_id, limit=5) == [first.identifier]  # pending again


def test_refused_a_pid_lists_live_records_whose_last_write_was_refused_their_doi(store):
    """What a write stage or reconcile offers their DOI again (pipeline/reidentified.py): live
    records of the harvester whose last write failed with duplicate_pid, not other errors,
    not records deleted at the source, not another harvester's, not once written since."""
    store.upsert_harvested("h", [record(n) for n in range(1, 6)] + [record(6, deleted=True)])
    store.upsert_harvested("other", [record(1)])
    refused = RecordError(type="duplicate_pid", message="DOI 10.1/x is already used")
    other = RecordError(type="missing_community", message="no community 'x'")

    def fail(harvester_id: str, n: int, error: RecordError) -> None:
        outcome = WriteOutcome(f"oai:x:{n}", Action.CREATE, None, None, error=error)
        store.save_write_outcomes(harvester_id, [outcome], {f"oai:x:{n}": "2024-01-01"})

    for n in (3, 1, 5, 6):
        fail("h", n, refused)
    fail("h", 2, other)
    fail("other", 1, refused)
    written = WriteOutcome("oai:x:5", Action.RESTORE, "abc-123", 3)
    store.save_write_outcomes("h", [written], {"oai:x:5": "2024-01-01"})

    assert store.refused_a_pid("h") == ["oai:x:1", "oai:x:3"]
    assert store.refused_a_pid("nobody") == []


@pytest.mark.parametrize("opened", [StateStore, EmbeddedRepository], ids=["state", "target"])
def test_a_store_at_this_schema_opens_while_another_process_holds_the_write_lock(
    tmp_path: Path, opened: type[StateStore | EmbeddedRepository]
) -> None:
    """Opening took SQLite's write lock to check the schema, so every process opening the
    state store or the target (a sensor's tick, `status`) waited up to 60 s behind a long
    write transaction (a migration, a prune) and a tick timed out. One already at this
    schema is only read."""
    path = tmp_path / "store.sqlite"
    opened(f"sqlite:///{path}").close()  # created at this schema
    writer = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE schema_version SET version = version")
        with opened(f"sqlite:///{path}") as store:
            assert not store.read_only
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_claim_of_many_records_is_one_transaction(store):
    """A group's claim was one transaction per 500 identifiers (a commit each, ten for a
    group of 5,000): now one, so a group is claimed all or nothing and commits once."""
    run_id = new_run(store)
    store.stage(run_id, "h", [record(n) for n in range(1, 1201)])
    commits: list[object] = []

    def count(connection: object) -> None:
        commits.append(connection)

    sa.event.listen(store._engine, "commit", count)
    try:
        every = [f"oai:x:{n}" for n in range(1, 1201)]
        assert len(store.claim(run_id, identifiers=every)) == 1200
        assert len(commits) == 1
        assert store.claim(run_id, identifiers=[]) == [] and len(commits) == 1
    finally:
        sa.event.remove(store._engine, "commit", count)
    assert store.claim(run_id, identifiers=every) == []  # all running now


def _undated_deletion(n: int, response_date: str) -> HarvestedRecord:
    """A deleted header without a datestamp, dated by its page's responseDate (as
    pages._date_deletions dates Zenodo's tombstones)."""
    return dataclasses.replace(
        record(n, deleted=True), datestamp=response_date, undated_deletion=True
    )


def test_an_undated_deletion_listed_again_keeps_its_first_date(store):
    """A page redone within a run (a resumed run, the catch-up list) has a later responseDate:
    the same deletion, without a date of its own, is no newer copy (before, it was staged
    again as one and planned again); nor is it in the next run of the harvester."""
    run_id = new_run(store)
    store.stage(run_id, "h", [_undated_deletion(1, "2024-03-01T10:00:00Z"), record(2)])
    redone = [_undated_deletion(1, "2024-03-01T10:05:00Z"), record(2)]
    assert store.stage(run_id, "h", redone, listed_at="2024-03-01T10:05:00Z") == (0, 2, 0)
    assert store.get_record("oai:x:1", "h")["datestamp"] == "2024-03-01T10:00:00Z"

    later = new_run(store)
    store.stage(later, "h", [_undated_deletion(1, "2024-03-09T08:00:00Z")])
    assert store.get_record("oai:x:1", "h")["datestamp"] == "2024-03-01T10:00:00Z"
    assert [r.datestamp for r in store.iter_staged(later)] == ["2024-03-01T10:00:00Z"]

    # live again, then deleted again without a date: a new deletion, dated anew
    store.stage(new_run(store), "h", [record(1, day=20)])
    store.stage(new_run(store), "h", [_undated_deletion(1, "2024-03-21T08:00:00Z")])
    assert store.get_record("oai:x:1", "h")["datestamp"] == "2024-03-21T08:00:00Z"


def test_the_runs_last_datestamp_is_the_sources_not_an_undated_deletions(store):
    """`status` shows the newest datestamp the run staged: a responseDate that dated a deletion
    without a datestamp is no date the source gave a record."""
    run_id = new_run(store)
    store.stage(run_id, "h", [record(1, day=5), _undated_deletion(2, "2024-03-01T10:00:00Z")])
    assert store.get_run(run_id)["last_datestamp"] == "2024-01-05"
    only_undated = new_run(store)
    store.stage(only_undated, "h", [_undated_deletion(3, "2024-03-01T10:00:00Z")])
    assert store.get_run(only_undated)["last_datestamp"] is None
