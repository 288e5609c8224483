from __future__ import annotations

from oai_pipeline.sync.reconcile import vanished_identifiers


def test_vanished_after_a_complete_sweep() -> None:
    harvested = {"oai:a", "oai:b", "oai:c"}
    source = {"oai:a", "oai:c", "oai:new"}
    assert vanished_identifiers(harvested, source, sweep_complete=True) == {"oai:b"}


def test_a_partial_sweep_deletes_nothing() -> None:
    assert vanished_identifiers({"oai:a", "oai:b"}, {"oai:a"}, sweep_complete=False) == set()


def test_nothing_vanished() -> None:
    assert vanished_identifiers({"oai:a"}, {"oai:a", "oai:b"}, sweep_complete=True) == set()
    assert vanished_identifiers(set(), set(), sweep_complete=True) == set()
