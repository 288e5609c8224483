"""PID takeover and the community rules, through the four assets."""

from __future__ import annotations

import dataclasses

import pytest

from oai_pipeline_tests.support import expected_title_and_doi
from oai_pipeline_tests.sync_e2e.conftest import SQLITE_ONLY, Harness, at


@pytest.mark.parametrize("case", [str.lower, str.upper], ids=["same-case", "upper-case"])
def test_takeover_when_the_deposit_came_first(harness: Harness, case) -> None:
    harness.register()
    identifier = harness.identifiers()[1]
    # The DOI the source carries, read from its XML without writing anything.
    _, doi = expected_title_and_doi(harness.records[identifier], "oai_datacite")
    assert doi
    deposited = harness.repository.deposit(
        {
            "metadata": {"title": "mine"},
            # DOIs are case-insensitive: the user may write it in any case.
            "pids": {"doi": {"identifier": case(doi), "provider": "external"}},
        },
        publish=True,
    )

    harness.harvest()

    local = harness.local(identifier)
    assert local["id"] == deposited
    assert local["source_identifier"] == identifier
    assert local["data"]["metadata"]["title"] != "mine"
    assert sum(1 for r in harness.all_local() if r["doi"].lower() == doi.lower()) == 1


@SQLITE_ONLY
def test_writer_community_its_parent_and_the_default(harness: Harness) -> None:
    harness.repository.create_community("cesnet")
    harness.repository.create_community("cesnet-data", parent="cesnet")
    harness.register(writer='oai-service{model:"rdm", community:"cesnet-data"}')

    harness.harvest()

    for identifier in harness.identifiers():
        local = harness.local(identifier)
        assert set(local["communities"]) == {"cesnet-data", "cesnet"}
        assert local["default_community"] == "cesnet-data"


@SQLITE_ONLY
def test_transformer_communities_are_added_and_never_removed(harness: Harness) -> None:
    harness.repository.create_community("first")
    harness.repository.create_community("from-sets")
    harness.register(
        writer='oai-service{model:"rdm", community:"first"}',
        transformer='oai-import{model:"rdm", set_communities:'
        '{"datacite:kernel-4": "from-sets", zenodo: "from-sets"}}',
    )
    harness.harvest()
    identifier = harness.identifiers()[0]
    assert set(harness.local(identifier)["communities"]) == {"first", "from-sets"}
    assert harness.local(identifier)["default_community"] == "first"

    harness.repository.create_community("second")
    harness.set_writer('oai-service{model:"rdm", community:"second"}')
    harness.change_title(identifier, "moved", at(9))
    harness.harvest()

    local = harness.local(identifier)
    assert {"first", "from-sets", "second"} <= set(local["communities"])
    assert local["default_community"] == "first"


def last_writes(harness: Harness) -> dict[str, str]:
    """When the harvest last wrote each record (a skip writes nothing)."""
    return {i: harness.harvest_record(i)["last_written_at"] for i in harness.identifiers()}


@SQLITE_ONLY
def test_a_community_given_to_the_writer_later_reaches_the_records_already_written(
    harness: Harness,
) -> None:
    """The next harvest files every record already written in the writer's new community,
    unchanged at the source and without `update_all`; the harvest after skips them. Before,
    they were skipped until `update_all`."""
    harness.register()
    harness.harvest()
    harness.repository.create_community("later")
    harness.set_writer('oai-service{model:"rdm", community:"later"}')
    harness.harvest()
    for identifier in harness.identifiers():
        assert "later" in harness.local(identifier)["communities"], identifier
    written = last_writes(harness)
    harness.harvest()
    assert last_writes(harness) == written


@SQLITE_ONLY
def test_a_writer_option_that_changes_nothing_written_rewrites_nothing(
    harness: Harness,
) -> None:
    """`direct_update` and the harvester's batch size change how records are written, not
    what: the harvest after the change skips every record."""
    harness.register()
    harness.harvest()
    written = last_writes(harness)
    harness.set_writer('oai-service{model:"rdm", direct_update:true}')
    harness.set_batch_size(1)
    harness.harvest()
    assert last_writes(harness) == written


@SQLITE_ONLY
def test_a_missing_community_means_not_written_with_the_error_stored(harness: Harness) -> None:
    harness.register(writer='oai-service{model:"rdm", community:"nowhere"}')

    harness.harvest()

    assert harness.all_local() == []
    for identifier in harness.identifiers():
        errors = harness.harvest_record(identifier)["errors"]
        assert any(e["type"] == "missing_community" for e in errors), errors

    # once the community exists, the next harvest writes them (errors are not skipped)
    harness.repository.create_community("nowhere")
    harness.harvest()
    assert {r["source_identifier"] for r in harness.all_local()} == set(harness.identifiers())


@SQLITE_ONLY
def test_one_writers_error_is_not_wiped_by_another_writer(harness: Harness) -> None:
    """Stored before a harvester could not name oai-service twice: the first writer's
    missing community stays the record's error, and the next harvest writes it."""
    harness.register()
    harness._update_harvester(
        writers=[
            'oai-service{model:"rdm", community:"later"}',
            'oai-service{model:"rdm", community:"present"}',
        ]
    )
    harness.repository.create_community("present")

    harness.harvest()

    for identifier in harness.identifiers():
        errors = harness.harvest_record(identifier)["errors"]
        assert [e["type"] for e in errors] == ["missing_community"], errors
    harness.repository.create_community("later")
    harness.harvest()
    for identifier in harness.identifiers():
        assert harness.harvest_record(identifier)["errors"] == []
        assert "later" in harness.local(identifier)["communities"]


@SQLITE_ONLY
def test_a_record_moved_into_a_mapped_set_without_a_new_datestamp_joins_its_community(
    harness: Harness,
) -> None:
    """DSpace and InvenioRDM move a record to another collection without a new datestamp:
    listed again, it goes to the community its new set maps to (its stored transform, made
    for its old sets, was reused: the target never saw the move)."""
    harness.repository.create_community("from-sets")
    harness.register(
        transformer='oai-import{model:"rdm", set_communities:{"moved-collection": "from-sets"}}'
    )
    harness.harvest()
    identifier = harness.identifiers()[0]
    assert "from-sets" not in harness.local(identifier)["communities"]

    record = harness.records[identifier]
    harness.endpoint.upsert(
        dataclasses.replace(record, set_specs=[*record.set_specs, "moved-collection"])
    )
    harness.harvest()

    assert "from-sets" in harness.local(identifier)["communities"]
    assert harness.harvest_record(identifier)["set_specs"][-1] == "moved-collection"
