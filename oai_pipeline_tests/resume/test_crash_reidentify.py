"""`crash_sweep --scenario reidentify` at a few points, so that the scenario cannot rot: a
source that re-identified every record (same DOIs), whose old identifiers' deletions a harvest
lists (or a reconcile finds vanished) after the new ones were refused their DOIs. Killed
after the target took the records over, the rerun ends as an uninterrupted run: the same
target ids under the new identifiers, one live record per DOI, nothing failed, and a report
that still counts the take-overs (before, a rerun reported none, or reported them `update`
or `nothing`: the killed attempt's take-overs were counted nowhere).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline_tests.resume import crash_sweep
from oai_pipeline_tests.resume.crash_sweep import Backend, Scenario

# killed with every take-over in both stores, the run not closed; and between the target's
# commit of the take-overs and the state store's record of them
POINTS = {
    "persistent": ["finish_run:1:before", "save_write_outcomes:1:before"],
    "no": ["finish_reconcile_run:1:before", "save_write_outcomes:2:before"],
}


@pytest.mark.parametrize("policy", ["persistent", "no"])
def test_a_take_over_of_re_identified_records_killed_ends_like_an_uninterrupted_one(
    tmp_path: Path, policy: str
) -> None:
    backend = Backend()
    records = crash_sweep.reidentify_records(20)
    with OAIEndpoint(records, page_size=10, deleted_record=policy) as endpoint:  # type: ignore[arg-type]
        template, swept = crash_sweep.reidentify_template(
            backend, tmp_path, endpoint, batch_size=10, log=lambda line: None
        )
        scenario = Scenario(
            "reidentify", swept, template, check=crash_sweep.reidentified_problems(template)
        )
        lines: list[str] = []
        outcomes = crash_sweep.run_scenario(
            backend, tmp_path, endpoint.base_url, scenario, POINTS[policy], 1, False, lines.append
        )

    assert [o["spec"] for o in outcomes] == POINTS[policy]
    assert all(o["reached"] for o in outcomes)  # each attempt was killed at its point
    assert [o["problems"] for o in outcomes] == [[], []], lines
    reference = next(line for line in lines if "reference report" in line)
    assert "'reidentified': {'restore': 20}" in reference


def test_a_dagster_run_killed_after_its_take_overs_reports_them_when_re_executed(
    tmp_path: Path,
) -> None:
    """The written_records asset of a Dagster run killed (`os._exit`) once the take-overs
    were saved, before its harvest run was closed: the run re-executed reports them in the
    asset's run totals (`reidentified`), as the uncrashed run does; before, it said 0."""
    backend = Backend()
    records = crash_sweep.reidentify_records(20)
    day = crash_sweep.OLD_ONES_DELETED_ON.date().isoformat()
    with OAIEndpoint(records, page_size=10) as endpoint:
        template, _ = crash_sweep.reidentify_template(
            backend, tmp_path, endpoint, batch_size=10, log=lambda line: None
        )
        home = backend.new_home(tmp_path, "killed", template)
        killed = crash_sweep._cli(home, "finish_run:1:before", ["dagster", day, day])
        assert killed.returncode == crash_sweep.EXIT_CODE, killed.stderr[-3000:]
        rerun = crash_sweep._cli(home, "none", ["dagster", day, day])

    assert rerun.returncode == 0, rerun.stderr[-3000:]
    report = crash_sweep.report_of(rerun)
    assert report is not None and report["reidentified"] == 20
    assert report["harvest_run_status"] == "succeeded"
    assert crash_sweep.reidentified_problems(template)(home) == []
