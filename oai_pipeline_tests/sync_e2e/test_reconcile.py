"""A source that keeps no deletions (deletedRecord=no, like Zenodo) drops records silently."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Iterator

import dagster as dg
import pytest
from click.testing import CliRunner

from oai_pipeline.cli import main
from oai_pipeline.errors import PipelineError
from oai_pipeline.pipeline.reconcile import reconcile
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.faults import Faults
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import load_settings
from oai_pipeline_tests.support import register
from oai_pipeline_tests.sync_e2e.conftest import PREFIX, SQLITE_ONLY, Harness, at, source_records

pytestmark = SQLITE_ONLY

# Fail fast: one retry, no real waiting.
IMPATIENT_LOADER = "oai-pmh{max_retries: 1, backoff_base: 0, max_empty_pages: 2}"


@pytest.fixture
def forgetful(backend: str, instance: dg.DagsterInstance) -> Iterator[Harness]:
    settings = load_settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    with OAIEndpoint(source_records(), page_size=2, deleted_record="no") as endpoint:
        harness = Harness(instance, settings, endpoint)
        try:
            yield harness
        finally:
            harness.close()


def test_records_that_vanished_are_deleted_after_a_complete_sweep(forgetful: Harness) -> None:
    forgetful.register(loader=IMPATIENT_LOADER)
    forgetful.harvest()
    gone, kept = forgetful.identifiers()[0], forgetful.identifiers()[1:]
    forgetful.endpoint.remove(gone)

    result = CliRunner().invoke(main, ["reconcile", "sample", "--json"])

    assert result.exit_code == 0, result.output
    assert '"vanished": [' in result.output and gone in result.output
    local = forgetful.local(gone)
    assert local["state"] == "tombstone"
    assert forgetful.harvest_record(gone)["deleted"] is True
    assert all(forgetful.local(i)["state"] == "live" for i in kept)
    with Services(load_settings()) as services:
        assert services.state.get_identify("sample").deleted_record == "no"


def test_a_record_the_list_hides_but_get_record_serves_is_not_deleted_without_force(
    forgetful: Harness,
) -> None:
    """Some sources' ListIdentifiers leaves out records their GetRecord still serves live (a
    stale identifier index: DSpace's withdrawn items, Invenio, EPrints' per-verb caches).
    Before, the reconcile took such a record for deleted at the source and deleted it; then,
    refused every deletion of the harvester while it was among the 10 it asked for. It is
    kept, and the reports (text and --json) say so."""
    forgetful.register(loader=IMPATIENT_LOADER)
    forgetful.harvest()
    hidden = forgetful.identifiers()[1]
    forgetful.endpoint.faults = Faults(unlisted_identifiers={hidden})

    result = CliRunner().invoke(main, ["reconcile", "sample", "--json"])

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    notice = (
        f"GetRecord still serves 1 record the source's list no longer holds (e.g. {hidden}): "
        "the list hides records the source has; kept, not deleted (reconcile --force deletes "
        "them all the same)"
    )
    assert report["vanished"] == [] and report["actions"] == {}
    assert report["kept"] == {"served": [hidden], "unconfirmed": [], "unasked": 0}
    assert report["notices"] == [notice]
    assert all(forgetful.local(i)["state"] == "live" for i in forgetful.identifiers())
    assert forgetful.harvest_record(hidden)["deleted"] is False

    text = CliRunner().invoke(main, ["reconcile", "sample"])

    assert text.exit_code == 0, text.output
    assert text.stdout.splitlines()[1:] == [
        f"kept (vanished from the list, not deleted): 1 still served by GetRecord (e.g. {hidden})",
        f"  note: {notice}",
    ]
    assert forgetful.local(hidden)["state"] == "live"

    forced = CliRunner().invoke(main, ["reconcile", "sample", "--force"])

    assert forced.exit_code == 0, forced.output
    assert forgetful.local(hidden)["state"] == "tombstone"


def test_a_record_the_sets_list_hides_at_a_source_whose_get_record_names_no_set_is_kept(
    forgetful: Harness,
) -> None:
    """The set's list hides a record, and the source's GetRecord names no set of any record.
    Before, GetRecord's header without sets read "outside the set" and confirmed the
    deletion of a record the source still has in the set."""
    forgetful.register(loader=IMPATIENT_LOADER, setspec="datacite")
    forgetful.harvest()
    hidden = forgetful.identifiers()[1]
    forgetful.endpoint.faults = Faults(unlisted_identifiers={hidden}, get_record_without_sets=True)

    refused = CliRunner().invoke(main, ["reconcile", "sample", "--json"])

    assert refused.exit_code == 1, refused.output
    error = json.loads(refused.stdout)["error"]
    assert f"GetRecord names no set of {hidden}, nor of " in error
    assert "whether they left the set datacite is not known" in error
    assert forgetful.local(hidden)["state"] == "live"
    assert forgetful.harvest_record(hidden)["deleted"] is False


def test_a_vanished_record_get_record_answers_deleted_is_deleted_at_one_request(
    forgetful: Harness,
) -> None:
    """GetRecord's deleted header confirms the deletion, as its idDoesNotExist does (the
    first test): one request per vanished record, no more than the sample."""
    forgetful.register(loader=IMPATIENT_LOADER)
    forgetful.harvest()
    gone = forgetful.identifiers()[2]
    forgetful.delete_at_source(gone, at(9))
    # deleted at the source, and left out of its list: a source that keeps no deletions
    forgetful.endpoint.faults = Faults(unlisted_identifiers={gone})
    asked = len(forgetful.endpoint.requests)

    result = CliRunner().invoke(main, ["reconcile", "sample"])

    assert result.exit_code == 0, result.output
    assert forgetful.local(gone)["state"] == "tombstone"
    get_records = [r for r in forgetful.endpoint.requests[asked:] if r["verb"] == "GetRecord"]
    assert get_records == [
        {"verb": "GetRecord", "identifier": gone, "metadataPrefix": PREFIX},
    ]


def test_a_get_record_that_keeps_failing_deletes_nothing(forgetful: Harness) -> None:
    """GetRecord failing after the client's retries (HTTP 500 at every try) proves neither
    that the record is gone nor that it is served: nothing is deleted, and the error says
    so. Before, the reconcile never asked and deleted it."""
    forgetful.register(loader=IMPATIENT_LOADER)
    forgetful.harvest()
    gone = forgetful.identifiers()[0]
    forgetful.endpoint.remove(gone)
    forgetful.endpoint.faults = Faults(failing_verbs={"GetRecord"})
    asked = len(forgetful.endpoint.requests)

    refused = CliRunner().invoke(main, ["reconcile", "sample"])

    assert refused.exit_code == 1, refused.output
    first_line = refused.output.splitlines()[0]
    assert first_line.startswith(
        "Error: reconcile of sample deletes nothing: 1 harvested record vanished from the "
        f"source's list, and GetRecord of {gone} failed ("
    )
    assert "HTTP 500" in first_line and first_line.endswith(
        "): whether they are gone is not confirmed; run reconcile again once the source "
        f"answers GetRecord of {gone}, or with --force to delete them all the same"
    )
    assert forgetful.local(gone)["state"] == "live"
    # the client's retry policy (IMPATIENT_LOADER: one retry), then no other record asked
    get_records = [r for r in forgetful.endpoint.requests[asked:] if r["verb"] == "GetRecord"]
    assert len(get_records) == 2

    forgetful.endpoint.faults = Faults()
    assert CliRunner().invoke(main, ["reconcile", "sample"]).exit_code == 0
    assert forgetful.local(gone)["state"] == "tombstone"


def test_a_sweep_that_fails_part_way_deletes_nothing(forgetful: Harness) -> None:
    forgetful.register(loader=IMPATIENT_LOADER)
    forgetful.harvest()
    forgetful.endpoint.remove(forgetful.identifiers()[0])
    already = forgetful.endpoint.request_count
    # Identify works; every list page after it is garbage, retries included.
    forgetful.endpoint.faults = Faults(not_xml_on=set(range(already + 2, already + 50)))

    with Services(load_settings()) as services, pytest.raises(PipelineError):
        reconcile(services, "sample")

    assert all(forgetful.local(i)["state"] == "live" for i in forgetful.identifiers())


def test_reconcile_waits_for_a_run_writing_for_the_harvester(forgetful: Harness) -> None:
    forgetful.register(loader=IMPATIENT_LOADER)
    forgetful.harvest()
    gone = forgetful.identifiers()[0]
    forgetful.endpoint.remove(gone)
    holding, released = threading.Event(), threading.Event()

    def another_writer() -> None:
        with Services(load_settings()) as services, services.harvester_lock.hold("sample"):
            holding.set()
            time.sleep(3)
            assert forgetful.local(gone)["state"] == "live"  # reconcile has not written
            released.set()

    holder = threading.Thread(target=another_writer, daemon=True)
    holder.start()
    assert holding.wait(10)
    with Services(load_settings()) as services:
        report = reconcile(services, "sample")
        assert released.is_set()
    holder.join(10)
    assert report.vanished == [gone] and forgetful.local(gone)["state"] == "tombstone"


def test_a_sweep_that_lists_nothing_deletes_nothing_without_force(forgetful: Harness) -> None:
    forgetful.register(loader=IMPATIENT_LOADER)
    forgetful.harvest()
    for identifier in forgetful.identifiers():  # an emptied index: noRecordsMatch
        forgetful.endpoint.remove(identifier)

    refused = CliRunner().invoke(main, ["reconcile", "sample"])

    assert refused.exit_code == 1
    assert "lists no identifiers" in refused.output and "--force" in refused.output
    assert all(forgetful.local(i)["state"] == "live" for i in forgetful.identifiers())

    forced = CliRunner().invoke(main, ["reconcile", "sample", "--force"])

    assert forced.exit_code == 0, forced.output
    assert all(forgetful.local(i)["state"] == "tombstone" for i in forgetful.identifiers())


def test_a_record_that_left_the_harvested_set_is_deleted_by_reconcile(harness: Harness) -> None:
    """A set-filtered harvest does not list it any more; reconcile lists within the set."""
    harness.register()
    harness._update_harvester(setspec="datacite:kernel-4")
    harness.harvest()
    moved = harness.identifiers()[0]
    record = dataclasses.replace(harness.records[moved], set_specs=["other"], datestamp=at(9))
    harness.endpoint.upsert(record)
    harness.harvest()
    assert harness.local(moved)["state"] == "live"  # not listed: nothing happens to it

    with Services(load_settings()) as services:
        assert reconcile(services, "sample").vanished == [moved]

    assert harness.local(moved)["state"] == "tombstone"
    assert all(harness.local(i)["state"] == "live" for i in harness.identifiers()[1:])
    harness.endpoint.upsert(
        dataclasses.replace(record, set_specs=["datacite:kernel-4"], datestamp=at(10))
    )
    harness.harvest()
    assert harness.local(moved)["state"] == "live"


def test_a_record_not_offered_in_a_new_metadata_prefix_is_not_deleted_without_force(
    forgetful: Harness,
) -> None:
    """The new prefix's list leaves out a record the source has only in the old format: no
    deletion at the source. Before, the reconcile after the change deleted it."""
    only_old, *both = forgetful.identifiers()
    record = forgetful.records[only_old]
    forgetful.endpoint.upsert(
        dataclasses.replace(record, metadata={PREFIX: record.metadata[PREFIX]})
    )
    forgetful.register(loader=IMPATIENT_LOADER)
    forgetful.harvest()
    changed = CliRunner().invoke(
        main, ["harvesters", "update", "sample", "--metadata-prefix", "datacite"]
    )
    assert changed.exit_code == 0, changed.output
    assert "a reconcile deletes no record harvested as 'oai_datacite'" in changed.output
    forgetful.harvest()  # the new format's list: the others are harvested again in it

    refused = CliRunner().invoke(main, ["reconcile", "sample"])

    assert refused.exit_code == 1, refused.output
    assert (
        f"1 of the 1 records it would delete (e.g. {only_old}) were harvested as" in refused.output
    )
    assert "'oai_datacite'" in refused.output and "--force" in refused.output
    assert forgetful.local(only_old)["state"] == "live"

    # One the source deleted after the others were harvested again in the new format is
    # deleted: the change holds back only what was harvested before it.
    forgetful.endpoint.remove(both[0])
    forced = CliRunner().invoke(main, ["reconcile", "sample", "--force", "--json"])

    assert forced.exit_code == 0, forced.output
    assert forgetful.local(only_old)["state"] == "tombstone"
    assert forgetful.local(both[0])["state"] == "tombstone"
    assert forgetful.local(both[1])["state"] == "live"


def test_a_record_harvested_again_after_a_prefix_change_is_deleted_once_it_vanishes(
    forgetful: Harness,
) -> None:
    forgetful.register(loader=IMPATIENT_LOADER)
    forgetful.harvest()
    changed = CliRunner().invoke(
        main, ["harvesters", "update", "sample", "--metadata-prefix", "datacite"]
    )
    assert changed.exit_code == 0, changed.output
    forgetful.harvest()
    gone = forgetful.identifiers()[0]
    forgetful.endpoint.remove(gone)

    result = CliRunner().invoke(main, ["reconcile", "sample"])

    assert result.exit_code == 0, result.output
    assert forgetful.local(gone)["state"] == "tombstone"


def _reconcile_job_run(instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    """The `reconcile_sources` job of the code location, as its schedule launches it."""
    from oai_pipeline.definitions import defs

    return defs.resolve_job_def("reconcile_sources").execute_in_process(
        instance=instance, raise_on_error=False
    )


def test_the_reconcile_job_deletes_what_vanished_at_sources_that_keep_none(
    forgetful: Harness,
) -> None:
    """Left to an operator's memory, an unattended deployment kept the records such a source
    dropped live for good: the job (and its weekly schedule) reconciles every enabled
    harvester whose source keeps no deletions."""
    forgetful.register(loader=IMPATIENT_LOADER)
    forgetful.harvest()
    gone = forgetful.identifiers()[0]
    forgetful.endpoint.remove(gone)

    result = _reconcile_job_run(forgetful.instance)

    assert result.success
    assert forgetful.local(gone)["state"] == "tombstone"
    [materialization] = [
        e.event_specific_data.metadata
        for e in result.all_events
        if e.event_type_value == "STEP_OUTPUT" and e.event_specific_data.metadata
    ]
    assert materialization["vanished"].value == 1
    assert result.output_for_node("reconcile_harvesters")["sample"]["vanished"] == [gone]


def test_the_reconcile_job_keeps_what_the_list_hides_but_get_record_serves(
    forgetful: Harness,
) -> None:
    """The job keeps such a record as the CLI does, and says so: a warning in its log (the
    CLI's line), `kept` in its metadata, the report in its output. Before, its run failed,
    every week, and no other record of the harvester was ever deleted."""
    forgetful.register(loader=IMPATIENT_LOADER)
    forgetful.harvest()
    hidden = forgetful.identifiers()[0]
    forgetful.endpoint.faults = Faults(unlisted_identifiers={hidden})

    result = _reconcile_job_run(forgetful.instance)

    assert result.success
    assert all(forgetful.local(i)["state"] == "live" for i in forgetful.identifiers())
    [metadata] = [
        e.event_specific_data.metadata
        for e in result.all_events
        if e.event_type_value == "STEP_OUTPUT" and e.event_specific_data.metadata
    ]
    assert metadata["vanished"].value == 0 and metadata["kept"].value == 1
    report = result.output_for_node("reconcile_harvesters")["sample"]
    assert report["kept"] == {"served": [hidden], "unconfirmed": [], "unasked": 0}
    logged = [entry.user_message for entry in forgetful.instance.all_logs(result.run_id)]
    assert any(
        message.endswith(
            "reconcile of sample: kept (vanished from the list, not deleted): 1 still served "
            f"by GetRecord (e.g. {hidden})"
        )
        for message in logged
    )


def test_the_reconcile_job_says_which_harvester_waits_for_its_moved_source_to_be_harvested(
    forgetful: Harness,
) -> None:
    """A harvester moved to another base URL (its old Identify dropped) is not reconciled
    until a harvest identifies its new source; the run says so in its log and metadata.
    Before, it was passed over without a word."""
    forgetful.register(loader=IMPATIENT_LOADER)
    forgetful.harvest()
    gone = forgetful.identifiers()[0]
    forgetful.endpoint.remove(gone)
    # the same server under another name: a URL the harvester was never harvested at
    moved_url = forgetful.endpoint.base_url.replace("127.0.0.1", "localhost")
    register(forgetful.settings, moved_url, metadata_prefix=PREFIX, loader=IMPATIENT_LOADER)

    result = _reconcile_job_run(forgetful.instance)

    assert result.success
    assert forgetful.local(gone)["state"] == "live"  # not reconciled yet
    [metadata] = [
        e.event_specific_data.metadata
        for e in result.all_events
        if e.event_type_value == "STEP_OUTPUT" and e.event_specific_data.metadata
    ]
    waiting = metadata["waiting"].value
    assert list(waiting) == ["sample"] and "has not answered Identify" in waiting["sample"]
    logged = [entry.user_message for entry in forgetful.instance.all_logs(result.run_id)]
    assert any("reconcile: harvester sample waits" in message for message in logged)

    forgetful.harvest()  # at the new URL: identified
    assert _reconcile_job_run(forgetful.instance).success
    assert forgetful.local(gone)["state"] == "tombstone"


def test_a_fleet_not_harvested_yet_is_named_in_a_few_warnings_and_all_in_the_metadata(
    forgetful: Harness,
) -> None:
    """Harvesters registered but never harvested all wait. The run logged one warning per
    harvester (300 lines for a new fleet); it now names the first ten and counts the rest,
    while the `waiting` metadata still has every one."""
    fleet = [f"fleet-{number:02d}" for number in range(14)]
    for harvester_id in fleet:
        register(
            forgetful.settings,
            forgetful.endpoint.base_url,
            harvester_id=harvester_id,
            metadata_prefix=PREFIX,
            loader=IMPATIENT_LOADER,
        )

    result = _reconcile_job_run(forgetful.instance)

    assert result.success
    [metadata] = [
        e.event_specific_data.metadata
        for e in result.all_events
        if e.event_type_value == "STEP_OUTPUT" and e.event_specific_data.metadata
    ]
    assert sorted(metadata["waiting"].value) == fleet
    warnings = [
        entry.user_message
        for entry in forgetful.instance.all_logs(result.run_id)
        if "reconcile: " in entry.user_message
    ]
    assert len(warnings) == 11
    assert "harvester fleet-00 waits" in warnings[0]
    assert warnings[-1].endswith("reconcile: and 4 more harvesters waiting")


def test_a_reconcile_the_job_may_not_act_on_fails_the_run_saying_why(forgetful: Harness) -> None:
    """The job never forces: a source that suddenly lists nothing deletes nothing, and the
    run fails naming the harvester, for an operator to look at."""
    forgetful.register(loader=IMPATIENT_LOADER)
    forgetful.harvest()
    for identifier in forgetful.identifiers():
        forgetful.endpoint.remove(identifier)

    result = _reconcile_job_run(forgetful.instance)

    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message
    assert "1 of 1 reconciles failed or were refused" in message and "sample:" in message
    assert all(forgetful.local(i)["state"] == "live" for i in forgetful.identifiers())
