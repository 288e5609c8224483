"""A source that changes every OAI identifier (a DSpace upgrade, a move to a new host): the
same works, with the same DOIs, under a new namespace, the old identifiers deleted or gone.

Each record must end as the same target record under its new identifier (same id, a new
revision), whichever order the source lists the new identifiers and the old ones' deletions
in. Before, a new identifier listed before its old one's deletion (another window, a later
day, or a source that keeps no deletions and needs a reconcile) was refused its DOI
(`duplicate_pid`), and the old one's deletion then left a tombstone: the target showed every
record deleted until the operator ran `harvest ID --failed`.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.sample_endpoint.provider import DeletedRecordPolicy
from oai_pipeline.sample_endpoint.records import generate_datacite_records
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline_tests.cli.conftest import create_args

OLD = "oai:generated.oai-pipeline:"
NEW = "oai:repo.example.org:"
RECORDS = 50


def run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result


def run_json(*args: str) -> dict:
    return json.loads(run(*args, "--json").stdout)


def target(harvester_id: str = "moved") -> dict[str, dict]:
    """The harvester's target records by id, with their DOI, state, identifier, revision."""
    listed = run_json("target", "list", "--harvester", harvester_id, "--limit", "1000")
    return {r["id"]: r for r in listed}


def every_target_record() -> list[dict]:
    return run_json("target", "list", "--limit", "1000")


def renumber(endpoint: OAIEndpoint, stamp: datetime) -> list[str]:
    """The source lists each record again under the new namespace, at `stamp`."""
    old = [r for r in endpoint.records() if r.identifier.startswith(OLD)]
    for record in old:
        new = record.identifier.replace(OLD, NEW)
        endpoint.upsert(dataclasses.replace(record, identifier=new, datestamp=stamp))
    return [r.identifier for r in old]


def source(policy: DeletedRecordPolicy) -> OAIEndpoint:
    records = generate_datacite_records(
        RECORDS, deleted_fraction=0, span_days=3, prefixes=("oai_datacite",)
    )
    return OAIEndpoint(records, page_size=10, deleted_record=policy)


def assert_same_records_under_new_identifiers(before: dict[str, dict]) -> None:
    after = target()
    assert after.keys() == before.keys()  # the same target records, no new one
    for record_id, record in after.items():
        old = before[record_id]
        assert record["state"] == "live", record
        assert record["source_identifier"] == old["source_identifier"].replace(OLD, NEW)
        assert record["doi"] == old["doi"]
        assert record["revision"] > old["revision"]  # revisions continued
    # nothing else holds a DOI of theirs: no tombstone, no duplicate
    assert len(every_target_record()) == RECORDS
    failed = run_json("records", "list", "--harvester", "moved", "--error-type", "duplicate_pid")
    assert failed == []


@pytest.mark.usefixtures("backend")
def test_old_identifiers_deleted_in_a_later_harvest_hand_their_records_to_the_new_ones() -> None:
    """Day one the source lists the new identifiers (each refused the DOI the old one holds);
    day two it deletes the old ones: the new ones take the records over in that harvest."""
    now = datetime.now(UTC).replace(microsecond=0)
    with source("persistent") as endpoint:
        run(*create_args("moved", endpoint.base_url))
        run("harvest", "moved")
        before = target()

        old = renumber(endpoint, now - timedelta(days=2))
        since, until = (now - timedelta(days=3)).date(), (now - timedelta(days=1)).date()
        first = run_json("harvest", "moved", "--since", str(since), "--until", str(until))
        assert first["error_types"] == {"duplicate_pid": RECORDS}  # the old ones still live

        for identifier in old:
            endpoint.mark_deleted(identifier, now)
        second = run_json("harvest", "moved", "--since", now.date().isoformat())

    assert_same_records_under_new_identifiers(before)
    assert second["actions"] == {"delete": RECORDS}
    assert second["reidentified"] == {"restore": RECORDS}
    assert second["errors"] == 0


@pytest.mark.usefixtures("backend")
def test_a_reconcile_hands_the_records_of_vanished_identifiers_to_the_new_ones() -> None:
    """A source keeping no deletions: the old identifiers vanish; the reconcile that finds
    them gone hands their records to the new identifiers refused their DOIs."""
    now = datetime.now(UTC).replace(microsecond=0)
    with source("no") as endpoint:
        run(*create_args("moved", endpoint.base_url))
        run("harvest", "moved")
        before = target()

        for identifier in renumber(endpoint, now):
            endpoint.remove(identifier)
        harvested = run_json("harvest", "moved", "--since", now.date().isoformat())
        assert harvested["error_types"] == {"duplicate_pid": RECORDS}
        reconciled = run_json("reconcile", "moved")
        text = run("reconcile", "moved").stdout  # a second one finds nothing to do

    assert_same_records_under_new_identifiers(before)
    assert Counter(reconciled["actions"]) == {"delete": RECORDS}
    assert reconciled["reidentified"] == {"restore": RECORDS}
    assert "re-identified" not in text


def test_two_live_identifiers_of_one_doi_stay_refused() -> None:
    """The old identifiers still live at the source: two records of one DOI is the source's
    mistake, not a move. The new ones stay refused, whatever harvest or reconcile comes."""
    now = datetime.now(UTC).replace(microsecond=0)
    with source("no") as endpoint:
        run(*create_args("moved", endpoint.base_url))
        run("harvest", "moved")
        before = target()

        renumber(endpoint, now)
        since = now.date().isoformat()
        harvested = run_json("harvest", "moved", "--since", since)
        reconciled = run_json("reconcile", "moved")
        again = run_json("harvest", "moved", "--since", since)

    assert harvested["error_types"] == again["error_types"] == {"duplicate_pid": RECORDS}
    assert reconciled["vanished"] == [] and not reconciled.get("reidentified")
    assert target() == before
    failed = run_json("records", "list", "--harvester", "moved", "--error-type", "duplicate_pid")
    assert len(failed) == RECORDS


def test_killed_after_the_target_took_the_records_over_its_rerun_makes_no_duplicate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Killed between the target's write and the state store's record of it: the rerun finds
    the records already under their new identifiers and clears their refusal, no new record,
    no second revision."""
    from oai_pipeline.state.store import StateStore

    now = datetime.now(UTC).replace(microsecond=0)
    with source("persistent") as endpoint:
        run(*create_args("moved", endpoint.base_url))
        run("harvest", "moved")
        before = target()
        old = renumber(endpoint, now - timedelta(days=2))
        since, until = (now - timedelta(days=3)).date(), (now - timedelta(days=1)).date()
        run("harvest", "moved", "--since", str(since), "--until", str(until))
        for identifier in old:
            endpoint.mark_deleted(identifier, now)

        saved = StateStore.save_write_outcomes

        def killed(self: StateStore, *args: object, **kwargs: object) -> None:
            raise KeyboardInterrupt  # as a kill: the target committed, the store did not

        monkeypatch.setattr(StateStore, "save_write_outcomes", killed)
        interrupted = CliRunner().invoke(main, ["harvest", "moved", "--since", str(now.date())])
        assert interrupted.exit_code == 130, interrupted.output
        taken_over = target()
        monkeypatch.setattr(StateStore, "save_write_outcomes", saved)
        rerun = run_json("harvest", "moved", "--since", now.date().isoformat())

    assert rerun["errors"] == 0
    assert_same_records_under_new_identifiers(before)
    assert target() == taken_over  # the rerun wrote no new revision
