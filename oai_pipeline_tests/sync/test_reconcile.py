from __future__ import annotations

from oai_pipeline.oai.client import in_set
from oai_pipeline.sync.reconcile import (
    implausible_loss,
    spread_sample,
    vanished_identifiers,
)


def test_vanished_after_a_complete_sweep() -> None:
    harvested = {"oai:a", "oai:b", "oai:c"}
    source = {"oai:a", "oai:c", "oai:new"}
    assert vanished_identifiers(harvested, source, sweep_complete=True) == {"oai:b"}


def test_a_partial_sweep_deletes_nothing() -> None:
    assert vanished_identifiers({"oai:a", "oai:b"}, {"oai:a"}, sweep_complete=False) == set()


def test_nothing_vanished() -> None:
    assert vanished_identifiers({"oai:a"}, {"oai:a", "oai:b"}, sweep_complete=True) == set()
    assert vanished_identifiers(set(), set(), sweep_complete=True) == set()


def test_a_loss_that_looks_like_a_broken_source_is_named() -> None:
    assert implausible_loss(100, 98, 2) is None  # deletions
    assert implausible_loss(100, 60, 40) is None  # many, not most
    assert "lists no identifiers" in implausible_loss(3, 0, 3)
    assert "51 of the 100" in implausible_loss(100, 49, 51)
    assert "8 of the 9" in implausible_loss(9, 1, 8)  # a few records: judged alike
    assert implausible_loss(2, 1, 1) is None  # half is not more than half
    # a list that ended far short of the size its source announced proves no absence
    ended = implausible_loss(30, 18, 12, ended_early=(18, 30))
    assert ended is not None and "ended after 18 of the 30 records it announced" in ended
    assert implausible_loss(30, 18, 0, ended_early=(18, 30)) is None  # nothing to delete
    assert implausible_loss(100, 0, 0) is None  # nothing vanished, nothing to doubt


def test_the_sample_to_confirm_is_spread_over_the_vanished_records() -> None:
    few = {"oai:c", "oai:a", "oai:b"}
    assert spread_sample(few) == ["oai:a", "oai:b", "oai:c"]  # all of them, sorted
    many = {f"oai:x:{n:03d}" for n in range(100)}
    assert spread_sample(many, 10) == [f"oai:x:{n:03d}" for n in range(0, 100, 10)]
    assert spread_sample(many, 3) == ["oai:x:000", "oai:x:033", "oai:x:066"]
    assert spread_sample(set()) == []


def test_a_record_is_in_the_set_or_in_a_set_below_it() -> None:
    assert in_set(["a:b"], "a") and in_set(["x", "a"], "a")
    assert not in_set(["ab", "b:a"], "a")
    assert in_set([], None) and in_set(["x"], "")
