"""A harvest with two writers and failing records, killed at a precise point and rerun, ends
like an uninterrupted one: both targets, each writer's memory, the records failed (in the
transform stage, and refused by the last writer) with their errors, and the run's status.

A small deterministic slice of `crash_sweep.py --writers 2 --failing-records` (run by hand,
see its docstring), compared by the sweep's own `compare`, `compare_reports` and
`variant_problems`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from oai_pipeline.sample_endpoint.records import generate_datacite_records
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline_tests.resume import crash_sweep
from oai_pipeline_tests.resume.crash_sweep import EXIT_CODE, HARVESTER, PREFIX, Backend

RECORDS = generate_datacite_records(
    40, seed=5, start=datetime(2024, 1, 5, tzinfo=UTC), span_days=2, prefixes=(PREFIX,)
)
crash_sweep.unreadable(RECORDS, 13)  # 3 records fail in the transform stage
# 3 live records the last writer's target refuses (their set's community it lacks)
RECORDS[4:16:4] = [
    dataclasses.replace(r, deleted=False, set_specs=[*r.set_specs, crash_sweep.REFUSED_SET])
    for r in RECORDS[4:16:4]
]
HARVEST = ["harvest", HARVESTER, "--json"]


@dataclasses.dataclass
class Reference:
    empty: crash_sweep.Home  # the harvester registered, nothing harvested
    snapshot: dict[str, Any]
    report: dict[str, Any] | None


class References:
    """One uninterrupted harvest per number of writers, made when first asked for."""

    def __init__(self, endpoint: OAIEndpoint, root: Path) -> None:
        self.endpoint = endpoint
        self._root = root
        self._made: dict[int, Reference] = {}

    def __call__(self, writers: int) -> Reference:
        if writers not in self._made:
            empty = Backend().new_home(self._root, f"empty-{writers}")
            crash_sweep.register_harvester(
                empty, self.endpoint.base_url, 10, writers=writers, failing_records=True
            )
            home = Backend().new_home(self._root, f"reference-{writers}", empty)
            done = crash_sweep._cli(home, "none", HARVEST)
            assert done.returncode == 0, done.stderr[-3000:]
            self._made[writers] = Reference(
                empty, crash_sweep.snapshot(home), crash_sweep.report_of(done)
            )
        return self._made[writers]


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> Iterator[References]:
    with OAIEndpoint(RECORDS, page_size=20) as endpoint:
        yield References(endpoint, tmp_path_factory.mktemp("crash_points_failing"))


@pytest.mark.parametrize(
    ("writers", "crash"),
    [
        # the first writer wrote the first batch, the mirror not yet, the store heard nothing
        (2, "writer_apply:1:after"),
        # everything written and saved, the run not finished: the rerun resumes it and
        # reports what the killed attempt did, each writer's (it reported the first writer's
        # creations of the records the mirror refused `failed_before`)
        (2, "finish_run:1:before"),
        # one writer, which refuses the records: killed after its batch of them
        (1, "writer_apply:1:after"),
    ],
)
def test_a_harvest_with_failing_records_killed_and_rerun_ends_like_an_uninterrupted_one(
    references: References, tmp_path: Path, writers: int, crash: str
) -> None:
    reference = references(writers)
    check = crash_sweep.variant_problems(writers, failing_records=True)
    assert check is not None
    home = Backend().new_home(tmp_path, "home", reference.empty)
    assert crash_sweep._cli(home, crash, HARVEST).returncode == EXIT_CODE
    rerun = crash_sweep._cli(home, "none", HARVEST)
    assert rerun.returncode == 0, rerun.stderr[-3000:]

    got = crash_sweep.snapshot(home, reference.snapshot["last_run_id"])
    assert crash_sweep.compare(reference.snapshot, got) == []
    assert crash_sweep.compare_reports(reference.report, crash_sweep.report_of(rerun)) == []
    assert check(home) == []
    assert reference.snapshot["run_record_statuses"]["failed"] == 6
    assert reference.snapshot["last_run_status"] == "succeeded"
