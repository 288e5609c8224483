"""`crash_sweep --scenario prefix` at a few points, so that the mode cannot rot: the harvest
after `harvesters update --metadata-prefix` (every record listed again in the new format,
those last harvested before the change staged and written again), killed while it lists,
writes and finishes, ends like an uninterrupted one."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from oai_pipeline.sample_endpoint.records import generate_datacite_records
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline_tests.resume import crash_sweep
from oai_pipeline_tests.resume.crash_sweep import HARVESTER, NEW_PREFIX, PREFIX, Backend

RECORDS = generate_datacite_records(
    60,
    seed=5,
    start=datetime(2024, 1, 5, tzinfo=UTC),
    span_days=2,
    prefixes=(PREFIX, NEW_PREFIX),
)
crash_sweep.unreadable(RECORDS, 13)  # served in the old format only: not listed in the new
crash_sweep.retitled_in_new_format(RECORDS, 5)  # the new format says another title
ARGS = ["harvest", HARVESTER, "--json"]
POINTS = ["stage:2:after", "writer_apply:1:after"]


def test_the_harvest_after_a_prefix_change_killed_ends_like_an_uninterrupted_one(
    tmp_path: Path,
) -> None:
    with OAIEndpoint(RECORDS, page_size=20) as endpoint:
        empty = Backend().new_home(tmp_path, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=10)
        full = Backend().new_home(tmp_path, "full", empty)
        assert crash_sweep._cli(full, "none", ARGS).returncode == 0
        template = crash_sweep.prefix_changed_template(Backend(), tmp_path, full)
        scenario = crash_sweep.Scenario(
            "prefix",
            ARGS,
            template,
            endpoint=endpoint,
            check=crash_sweep.prefix_problems(template),
        )
        outcomes = crash_sweep.run_scenario(
            Backend(),
            tmp_path,
            endpoint.base_url,
            scenario,
            POINTS,
            per_point=1,
            double=False,
            log=lambda _: None,
        )

    assert [(o["spec"], o["reached"], o["problems"]) for o in outcomes] == [
        (point, True, []) for point in POINTS
    ]
