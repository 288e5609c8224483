"""The `reconciles` check's problem texts: each names the numbers its rule compares."""

from __future__ import annotations

from oai_pipeline.pipeline.reconciliation import StageCounts


def test_the_decisions_problem_names_the_writer_count_it_multiplied_by() -> None:
    """The rule is decisions = transformed x writers; with two writers, "decisions 7 !=
    transformed 4" read as a wrong count though 8 was wanted: the text names the writers."""
    counts = StageCounts(raw=4, transformed=4, decisions=7, written=7, writers=2)

    assert counts.problems == ["decisions 7 != transformed 4 x writers 2"]
