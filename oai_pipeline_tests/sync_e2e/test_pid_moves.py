"""Records of one source that exchange DOIs, through the four assets."""

from __future__ import annotations

import dataclasses

import pytest

from oai_pipeline.sample_endpoint.provider import order_key
from oai_pipeline_tests.support import expected_title_and_doi
from oai_pipeline_tests.sync_e2e.conftest import PREFIX, Harness, at


def set_doi(harness: Harness, identifier: str, doi: str, minute: int) -> None:
    """The source gives the record another DOI (and a new datestamp)."""
    harness.change_doi(identifier, doi, at(9, minute))


def doi_of(harness: Harness, identifier: str) -> str:
    return expected_title_and_doi(harness.records[identifier], PREFIX)[1]


@pytest.mark.parametrize("batch_size", [100, 1], ids=["one-batch", "two-batches"])
def test_two_records_swap_their_dois(harness: Harness, batch_size: int) -> None:
    harness.register(batch_size=batch_size)
    harness.harvest()
    first, second = harness.identifiers()[:2]
    doi_a, doi_b = doi_of(harness, first), doi_of(harness, second)
    ids = {i: harness.local(i)["id"] for i in (first, second)}

    set_doi(harness, first, doi_b, 1)
    set_doi(harness, second, doi_a, 2)
    harness.harvest()

    assert harness.local(first)["doi"] == doi_b
    assert harness.local(second)["doi"] == doi_a
    assert {i: harness.local(i)["id"] for i in (first, second)} == ids
    assert harness.harvest_record(first)["errors"] == []
    assert harness.harvest_record(second)["errors"] == []
    assert len(harness.all_local()) == 3


def test_a_doi_moves_to_a_record_written_before_the_one_giving_it_up(harness: Harness) -> None:
    harness.register()
    harness.harvest()
    first, second = [r.identifier for r in harness.endpoint.records()][:2]  # list order
    doi_b = doi_of(harness, second)

    set_doi(harness, first, doi_b, 1)  # listed first: takes the DOI the second still holds
    set_doi(harness, second, "10.5072/new-one", 2)
    harness.harvest()

    assert harness.local(first)["doi"] == doi_b
    assert harness.local(second)["doi"] == "10.5072/new-one"
    assert harness.harvest_record(first)["errors"] == []


def test_a_record_the_source_re_identifies_keeps_its_doi_and_target_record(
    harness: Harness,
) -> None:
    """The source lists the record under a new identifier (before the old one's deletion)."""
    harness.register()
    harness.harvest()
    old = harness.identifiers()[2]
    doi = doi_of(harness, old)
    local_id = harness.local(old)["id"]

    # A new identifier the endpoint lists before the old one.
    new = next(
        name
        for n in range(100)
        if order_key(name := f"oai:sample.oai-pipeline:renamed-{n}") < order_key(old)
    )
    harness.endpoint.upsert(
        dataclasses.replace(harness.records[old], identifier=new, datestamp=at(9))
    )
    harness.delete_at_source(old, at(9, 1))
    harness.harvest()

    local = harness.local(new)
    assert local is not None and local["id"] == local_id
    assert local["state"] == "live" and local["doi"] == doi
    assert harness.harvest_record(new)["errors"] == []


def test_a_doi_changing_to_a_users_deposit_is_refused_saying_whose(harness: Harness) -> None:
    """The harvested record keeps its own target record; the deposit is not overwritten."""
    harness.register()
    harness.harvest()
    identifier = harness.identifiers()[0]
    old_doi = doi_of(harness, identifier)
    deposit = harness.repository.deposit(
        {"metadata": {"title": "mine"}, "pids": {"doi": {"identifier": "10.5072/MINE"}}},
        publish=True,
    )

    set_doi(harness, identifier, "10.5072/mine", 1)
    harness.harvest()
    harness.harvest()  # and again: the same error, no crash

    [error] = harness.harvest_record(identifier)["errors"]
    assert error["type"] == "duplicate_pid"
    assert error["message"] == (
        f"DOI 10.5072/mine is already used by record {deposit}, a user's deposit (only a "
        "record new to the target takes a deposit over)"
    )
    assert harness.repository.show(deposit)["data"]["metadata"]["title"] == "mine"
    assert harness.local(identifier)["doi"] == old_doi


@pytest.mark.parametrize("length", [600, 1200], ids=["over-the-target", "over-the-state"])
def test_a_doi_longer_than_the_target_keeps_is_that_records_error(
    harness: Harness, length: int
) -> None:
    """Before, on PostgreSQL, a DOI over 512 characters failed the write with the database's
    "value too long for type character varying(512)", and one over 1000 failed the whole
    transform stage: no record of the harvest was written. SQLite took both."""
    harness.register()
    harness.harvest()
    first, second, third = harness.identifiers()
    old_doi = doi_of(harness, second)
    set_doi(harness, second, "10.5072/" + "x" * length, 1)
    harness.change_title(third, "Changed in the same harvest", at(9, 2))
    harness.harvest()
    harness.harvest()  # and again: the same error, nothing else changes

    [error] = harness.harvest_record(second)["errors"]
    assert (error["stage"], error["type"]) == ("transform", "validation")
    assert error["message"] == "pids.doi.identifier: String should have at most 512 characters"
    assert harness.local(second)["doi"] == old_doi
    assert harness.local(third)["data"]["metadata"]["title"] == "Changed in the same harvest"
    assert harness.harvest_record(third)["errors"] == []
    assert len(harness.all_local()) == 3
