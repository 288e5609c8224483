"""`crash_sweep --fails-first` at a few points, so that the mode cannot rot: a harvest that
fails outright (the source refuses its list half way, HTTP 403), killed while it fails and
while it is rerun once the source recovered, ends like an uninterrupted fail-then-rerun."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from oai_pipeline.sample_endpoint.faults import Faults
from oai_pipeline.sample_endpoint.records import generate_datacite_records
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline_tests.resume import crash_sweep
from oai_pipeline_tests.resume.crash_sweep import HARVESTER, PREFIX, Backend

RECORDS = generate_datacite_records(
    80, seed=5, start=datetime(2024, 1, 5, tzinfo=UTC), span_days=2, prefixes=(PREFIX,)
)
crash_sweep.unreadable(RECORDS, 13)  # records failing in the transform stage, as swept


def test_a_failed_harvest_killed_while_failing_and_while_rerun_ends_like_an_uninterrupted_one(
    tmp_path: Path,
) -> None:
    """Two pages staged, the third refused: killed after staging the second page and before
    recording the failure, the harvest rerun on the failing source fails as the
    uninterrupted one did; killed at the same points of the rerun on the recovered source,
    its rerun ends like the uninterrupted rerun."""
    with OAIEndpoint(RECORDS, page_size=20) as endpoint:
        empty = Backend().new_home(tmp_path, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=10)
        scenario = crash_sweep.Scenario(
            "first",
            ["harvest", HARVESTER, "--json"],
            empty,
            endpoint=endpoint,
            fails_first=crash_sweep.fails_first(len(RECORDS), 20),
        )
        outcomes = crash_sweep.run_scenario(
            Backend(),
            tmp_path,
            endpoint.base_url,
            scenario,
            ["stage:2:after", "finish_run:1:before"],
            per_point=1,
            double=False,
            log=lambda _: None,
        )
        assert endpoint.faults == Faults()  # the source recovered after each failing run

    assert scenario.fails_first == Faults(refuse_list_from_cursor=40)
    assert [(o["spec"], o["reached"], o["problems"]) for o in outcomes] == [
        ("failing/stage:2:after", True, []),
        ("failing/finish_run:1:before", True, []),
        ("stage:2:after", True, []),
        ("finish_run:1:before", True, []),
    ]
