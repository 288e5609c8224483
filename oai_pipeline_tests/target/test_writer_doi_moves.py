"""Records whose DOI changes to a free one are updated with their batch: before, each went
alone (some eight round trips each on PostgreSQL), so a source that began to register DOIs
for the records it had listed without one rewrote every record one by one."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from oai_pipeline.settings import Settings
from oai_pipeline.sync.rules import Action
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.target.test_writer import Harness, data
from oai_pipeline_tests.target.test_writer_drafts import (
    _snapshot,
    as_one_by_one,
    last_harvest,
    review_drafts,
    writing,
)

LATER = "2026-03-01T00:00:00Z"
BATCH_WRITE = {True: "update_many_published", False: "save_many_drafts"}


def _moves(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, *, together: bool, publish: bool = True
) -> tuple[dict[str, Any], dict[str, Any], Counter[str]]:
    """Six records harvested, then listed again with their DOIs changed: one gains a DOI,
    one moves to a free one, two swap theirs, one takes the DOI a third record keeps, and
    that one keeps it; one loses its DOI. `publish`: the writer's option (False: the records
    are harvested drafts, never published, whose DOIs the drafts reserve)."""
    spied = [BATCH_WRITE[publish]]
    with writing(settings, monkeypatch, together=together, spied=spied, publish=publish) as (
        harness,
        repo,
        seen,
    ):
        harness.harvest(
            [
                ("oai:gains", data("Gains")),
                ("oai:moves", data("Moves", doi="10.1/old")),
                ("oai:swap-1", data("Swap 1", doi="10.1/s1")),
                ("oai:swap-2", data("Swap 2", doi="10.1/s2")),
                ("oai:takes", data("Takes")),
                ("oai:keeps", data("Keeps", doi="10.1/kept")),
                ("oai:loses", data("Loses", doi="10.1/lost")),
            ]
        )
        return last_harvest(
            harness,
            repo,
            seen,
            [
                ("oai:gains", data("Gains, with a DOI", doi="10.1/gained")),
                ("oai:moves", data("Moves, moved", doi="10.1/new")),
                ("oai:swap-1", data("Swap 1, swapped", doi="10.1/s2")),
                ("oai:swap-2", data("Swap 2, swapped", doi="10.1/s1")),
                ("oai:takes", data("Takes, refused", doi="10.1/kept")),
                ("oai:keeps", data("Keeps, changed", doi="10.1/kept")),
                ("oai:loses", data("Loses, without")),
            ],
            datestamp=LATER,
        )


def test_doi_moves_together_end_as_one_by_one(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes, after, seen = as_one_by_one(_moves, target_settings, monkeypatch)

    # the new DOIs no other record holds or names went together (with the record that
    # keeps its DOI); the swap, the DOI another record holds, and the lost one went alone
    assert seen["update_many_published"] == 3
    assert {key for key in seen if key.startswith("alone")} == {
        "alone oai:swap-1",
        "alone oai:swap-2",
        "alone oai:takes",
        "alone oai:loses",
    }
    assert {identifier: outcome[0] for identifier, outcome in outcomes.items()} == {
        **dict.fromkeys(("oai:gains", "oai:moves", "oai:keeps", "oai:loses"), Action.UPDATE),
        **dict.fromkeys(("oai:swap-1", "oai:swap-2"), Action.UPDATE),
        "oai:takes": Action.ERROR,
    }
    dois = {row[0]: row[2] for row in after["records"]}
    assert dois == {
        "oai:gains": "10.1/gained",
        "oai:moves": "10.1/new",
        "oai:swap-1": "10.1/s2",
        "oai:swap-2": "10.1/s1",
        "oai:takes": None,
        "oai:keeps": "10.1/kept",
        "oai:loses": None,
    }


def test_doi_moves_of_drafts_together_end_as_one_by_one(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`publish: false`: a harvested draft's DOI moves with its batch when no record holds
    or names the new one (a source that began to register DOIs rewrote every draft alone)."""
    outcomes, after, seen = as_one_by_one(_moves, target_settings, monkeypatch, publish=False)

    assert seen["save_many_drafts"] == 3  # gains, moves, keeps
    assert {key for key in seen if key.startswith("alone")} == {
        "alone oai:swap-1",
        "alone oai:swap-2",
        "alone oai:takes",
        "alone oai:loses",
    }
    assert outcomes["oai:takes"][0] is Action.ERROR
    assert {o[0] for i, o in outcomes.items() if i != "oai:takes"} == {Action.PUBLISH_DRAFT}
    assert {row[0]: (row[1], row[2]) for row in after["records"]} == {
        "oai:gains": ("draft", "10.1/gained"),
        "oai:moves": ("draft", "10.1/new"),
        "oai:swap-1": ("draft", "10.1/s2"),
        "oai:swap-2": ("draft", "10.1/s1"),
        "oai:takes": ("draft", None),
        "oai:keeps": ("draft", "10.1/kept"),
        "oai:loses": ("draft", None),
    }


def _reviewed_moves(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, *, together: bool
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], Counter[str]]:
    """`publish: false`, each record published by a reviewer, then two harvests: one moves a
    record to a new DOI, drops another's, and gives a third the DOI of a user's deposit; the
    next gives the DOIs the first two are leaving to a record that holds one and to one that
    holds none. Then the reviewer publishes every draft."""
    with writing(settings, monkeypatch, together=together, spied=[], publish=False) as (
        harness,
        repo,
        seen,
    ):
        for outcome in harness.harvest(
            [
                ("oai:leaves", data("Leaves", doi="10.1/a")),
                ("oai:takes-leaving", data("Takes leaving", doi="10.1/b")),
                ("oai:takes-deposit", data("Takes deposit", doi="10.1/c")),
                ("oai:drops", data("Drops", doi="10.1/d")),
                ("oai:gains", data("Gains")),
            ]
        ):
            repo.publish(outcome.local_id)  # type: ignore[arg-type]
        repo.deposit(data("A user's", doi="10.1/user"), publish=True)
        (moved, _, _), (taken, before_review, _) = (
            last_harvest(harness, repo, seen, sources, datestamp=datestamp)
            for sources, datestamp in (
                (
                    [
                        ("oai:leaves", data("Leaves, moved", doi="10.1/a2")),
                        ("oai:takes-deposit", data("Takes deposit, refused", doi="10.1/user")),
                        ("oai:drops", data("Drops, without")),
                    ],
                    LATER,
                ),
                (
                    [
                        ("oai:takes-leaving", data("Takes leaving, moved", doi="10.1/a")),
                        ("oai:gains", data("Gains the dropped", doi="10.1/d")),
                    ],
                    "2026-04-01T00:00:00Z",
                ),
            )
        )
        # the order that frees 10.1/a and 10.1/d
        review_drafts(repo, ("oai:leaves", "oai:takes-leaving", "oai:drops", "oai:gains"))
        return moved, taken, before_review, _snapshot(repo)


def test_edit_drafts_name_only_dois_a_reviewer_can_publish(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`publish: false`: a published record's edit draft may name a DOI no other record
    holds, or one whose holder's own draft leaves it; one a user's deposit holds is refused
    (duplicate_pid on its harvest record), as a publishing writer refuses it. Before, its
    harvest reported `update` and left a draft whose publishing was refused ever after."""
    moved, taken, before_review, reviewed = as_one_by_one(
        _reviewed_moves, target_settings, monkeypatch
    )

    assert moved["oai:leaves"][0] is Action.UPDATE
    assert moved["oai:takes-deposit"][0] is Action.ERROR
    assert moved["oai:takes-deposit"][2] == ("duplicate_pid", "pids.doi")
    assert taken["oai:takes-leaving"][0] is taken["oai:gains"][0] is Action.UPDATE
    drafts = {row[0]: row[4] for row in before_review["drafts"]}
    assert drafts == {
        "oai:leaves": "10.1/a2",
        "oai:takes-leaving": "10.1/a",
        "oai:drops": None,
        "oai:gains": "10.1/d",
    }
    assert {row[0]: (row[1], row[2]) for row in reviewed["records"]} == {
        "oai:leaves": ("live", "10.1/a2"),
        "oai:takes-leaving": ("live", "10.1/a"),
        "oai:takes-deposit": ("live", "10.1/c"),
        "oai:drops": ("live", None),
        "oai:gains": ("live", "10.1/d"),
    }
    assert reviewed["drafts"] == []


@pytest.mark.parametrize(
    "reviewed", [(), ("oai:1",), ("oai:1", "oai:2")], ids=["drafts", "one-published", "published"]
)
def test_records_under_review_exchange_dois_only_as_drafts(
    target_settings: Settings, reviewed: tuple[str, ...]
) -> None:
    """`publish: false`: two drafts never published exchange their DOIs (each reserved at
    once). A published record holds its DOI until a reviewer publishes its draft, which
    could not take the other's first: both are refused (`duplicate_pid`), nothing changes.
    Before, each published one got an edit draft that no reviewer could publish."""
    harness = Harness(target_settings, publish=False)
    try:
        with EmbeddedRepository(target_settings.target_db_url) as repo:
            first = harness.harvest(
                [("oai:1", data("One", doi="10.1/x")), ("oai:2", data("Two", doi="10.1/z"))]
            )
            ids = {o.identifier: o.local_id for o in first}
            for identifier in reviewed:
                repo.publish(ids[identifier])  # type: ignore[arg-type]
            swapped = harness.harvest(
                [("oai:1", data("One", doi="10.1/z")), ("oai:2", data("Two", doi="10.1/x"))],
                datestamp=LATER,
            )
            shown = {i: repo.show(record_id) for i, record_id in ids.items()}  # type: ignore[arg-type]
    finally:
        harness.writer.close()
    if not reviewed:
        assert [o.action for o in swapped] == [Action.PUBLISH_DRAFT] * 2
        assert (shown["oai:1"]["doi"], shown["oai:2"]["doi"]) == ("10.1/z", "10.1/x")
        return
    assert [(o.action, o.error and o.error.type) for o in swapped] == [
        (Action.ERROR, "duplicate_pid")
    ] * 2
    assert [(shown[i]["doi"], shown[i]["draft_kind"]) for i in ("oai:1", "oai:2")] == [
        ("10.1/x", None),
        ("10.1/z", None if "oai:2" in reviewed else "new"),
    ]


def _claimed_twice(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, *, together: bool
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], Counter[str]]:
    """`publish: false`: two records published by a reviewer and a draft never published;
    a harvest moves the first to a new DOI (an edit draft names it); the next gives that DOI
    to the second, to the draft, and to a new record (a source that gave one DOI to several
    records). Then the reviewer publishes every draft."""
    with writing(settings, monkeypatch, together=together, spied=[], publish=False) as (
        harness,
        repo,
        seen,
    ):
        first = harness.harvest(
            [
                ("oai:moves", data("Moves", doi="10.1/a")),
                ("oai:also", data("Also", doi="10.1/b")),
                ("oai:draft", data("Draft", doi="10.1/c")),
            ]
        )
        for outcome in first[:2]:
            repo.publish(outcome.local_id)  # type: ignore[arg-type]
        harness.harvest([("oai:moves", data("Moves, moved", doi="10.1/new"))], datestamp=LATER)
        claimed, before_review, _ = last_harvest(
            harness,
            repo,
            seen,
            [
                ("oai:also", data("Also, the same DOI", doi="10.1/new")),
                ("oai:draft", data("Draft, the same DOI", doi="10.1/new")),
                ("oai:fresh", data("Fresh, the same DOI", doi="10.1/new")),
            ],
            datestamp="2026-04-01T00:00:00Z",
        )
        review_drafts(repo)
        return claimed, before_review, _snapshot(repo), seen


def test_an_edit_draft_reserves_the_doi_it_names(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`publish: false`: a published record's edit draft that names a new DOI reserves it
    for the review, as a new record's draft does: another record's draft that names it is
    refused (`duplicate_pid`, naming the record), as a publishing writer refuses the second
    record. Before, each was written, and the review could publish only one of them."""
    claimed, before_review, reviewed, _ = as_one_by_one(
        _claimed_twice, target_settings, monkeypatch
    )

    assert {i: (o[0], o[2]) for i, o in claimed.items()} == dict.fromkeys(
        ("oai:also", "oai:draft", "oai:fresh"), (Action.ERROR, ("duplicate_pid", "pids.doi"))
    )
    assert {row[0]: row[4] for row in before_review["drafts"]} == {
        "oai:moves": "10.1/new",
        "oai:draft": "10.1/c",
    }
    assert {row[0]: (row[1], row[2]) for row in reviewed["records"]} == {
        "oai:moves": ("live", "10.1/new"),
        "oai:also": ("live", "10.1/b"),
        "oai:draft": ("live", "10.1/c"),
    }


def _rotation(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, *, together: bool
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], Counter[str]]:
    """`publish: false`: three records published by a reviewer (DOIs a, b, c); harvests move
    c's record to a free DOI, then b's to c, then a's to b, each a draft a reviewer could
    publish in turn; the last gives c's record the DOI a, closing a ring. Then the reviewer
    publishes the drafts in the order that frees each DOI."""
    with writing(settings, monkeypatch, together=together, spied=[], publish=False) as (
        harness,
        repo,
        seen,
    ):
        first = harness.harvest(
            [(f"oai:{n}", data(n.upper(), doi=f"10.1/{n}")) for n in ("a", "b", "c")]
        )
        for outcome in first:
            repo.publish(outcome.local_id)  # type: ignore[arg-type]
        for month, (identifier, doi) in enumerate(
            (("oai:c", "10.1/free"), ("oai:b", "10.1/c"), ("oai:a", "10.1/b")), start=3
        ):
            harness.harvest(
                [(identifier, data(f"{identifier} to {doi}", doi=doi))],
                datestamp=f"2026-0{month}-01T00:00:00Z",
            )
        ring, before_review, _ = last_harvest(
            harness,
            repo,
            seen,
            [("oai:c", data("C to a", doi="10.1/a"))],
            datestamp="2026-07-01T00:00:00Z",
        )
        review_drafts(repo, ("oai:c", "oai:b", "oai:a"))
        return ring, before_review, _snapshot(repo), seen


def test_records_under_review_move_dois_along_a_chain_not_a_ring(
    target_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`publish: false`: an edit draft may name a DOI whose holder's draft leaves it along a
    chain of drafts that ends at a free DOI (or none): published from its end, each frees
    the next. One that closes a ring is refused (`duplicate_pid`), its draft as it was:
    before, only a ring of two (an exchange) was, and a ring of three left drafts none of
    which a reviewer could publish first."""
    ring, before_review, reviewed, _ = as_one_by_one(_rotation, target_settings, monkeypatch)

    assert ring["oai:c"][0] is Action.ERROR
    assert ring["oai:c"][2] == ("duplicate_pid", "pids.doi")
    assert {row[0]: row[4] for row in before_review["drafts"]} == {
        "oai:a": "10.1/b",
        "oai:b": "10.1/c",
        "oai:c": "10.1/free",
    }
    assert {row[0]: (row[1], row[2]) for row in reviewed["records"]} == {
        "oai:a": ("live", "10.1/b"),
        "oai:b": ("live", "10.1/c"),
        "oai:c": ("live", "10.1/free"),
    }
