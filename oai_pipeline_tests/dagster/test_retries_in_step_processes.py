"""A step Dagster retries, run as the daemon and the UI run it: each step in a process of its
own (the multiprocess executor), where Dagster hands the step the retry mode `deferred` (the
parent process retries), not `enabled`."""

from __future__ import annotations

import dagster as dg

from oai_pipeline.defs.assets import raw_oai_xml
from oai_pipeline.defs.launch import range_tags
from oai_pipeline.defs.partitions import ensure_harvester_partitions, harvest_partitions
from oai_pipeline.defs.resources import HarvestOptions, PipelineResource
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.faults import Faults
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline_tests.support import register

FIRST, LAST = "2024-01-01", "2024-01-05"  # the first window holds the sample set


def retried_once_job() -> dg.JobDefinition:
    """`raw_oai_xml`'s own code under a retry policy of one retry at once (its own waits 30 s
    first, which the step's process, another one, cannot be told to skip)."""
    asset = dg.asset(
        name=raw_oai_xml.key.path[-1],
        partitions_def=harvest_partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
        retry_policy=dg.RetryPolicy(max_retries=1),
    )(raw_oai_xml.op.compute_fn.decorated_fn)
    defs = dg.Definitions(
        assets=[asset],
        jobs=[dg.define_asset_job("retried_once", selection=[asset])],
        resources={"pipeline": PipelineResource(), "harvest_options": HarvestOptions()},
    )
    return defs.resolve_job_def("retried_once")


def test_a_harvest_run_stays_running_between_the_attempts_of_a_step_in_its_own_process(
    settings: Settings,
) -> None:
    """In the UI's runs the harvest run read `failed` (no attempt named) as soon as the first
    attempt failed, while Dagster was to retry the step (README: it stays `running`, saying
    `attempt N of M failed; Dagster retries the step: …`). Only in-process runs said so."""
    seen_at_retry: list[tuple[str, str | None]] = []
    refused = False

    with OAIEndpoint(page_size=3, faults=Faults(refuse_list_from_cursor=1)) as endpoint:
        reply = endpoint._reply

        def watched(number: int, path: str, params: dict[str, list[str]], faults: Faults):
            nonlocal refused
            if refused and params.get("verb") == ["Identify"] and not seen_at_retry:
                # the next attempt begins: where the harvest run stands between the two
                with Services(settings) as services:
                    run = services.state.latest_run("sample")
                assert run is not None
                seen_at_retry.append((run["status"], run["error"]))
            answer = reply(number, path, params, faults)
            refused = refused or (answer is not None and answer.status == 403)
            return answer

        endpoint._reply = watched
        register(settings, endpoint.base_url)
        with dg.instance_for_test() as instance:
            ensure_harvester_partitions(instance, ["sample"])
            result = dg.execute_job(
                dg.reconstructable(retried_once_job),
                instance,
                tags=range_tags("sample", FIRST, LAST),
                raise_on_error=False,
            )
            assert not result.success
            retries = [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
            assert len(retries) == 1
            [failure] = [e.step_failure_data for e in result.all_events if e.is_step_failure]

    assert len(seen_at_retry) == 1
    [(status, error)] = seen_at_retry
    assert status == "running"
    assert error is not None
    assert error.startswith("attempt 1 of 2 failed; Dagster retries the step: RefusedRequest")
    with Services(settings) as services:
        run = services.state.latest_run("sample")
    assert run is not None
    assert run["status"] == "failed"  # the last attempt failed
    assert run["error"].startswith("RefusedRequest: ")
    # The UI's step failure: the last attempt's error in one line, led by its harvester, as
    # a failure that is not retried reads (it read "Exceeded max_retries of 1", the error
    # itself only in the traceback's cause, naming no harvester).
    assert failure.user_failure_data is not None
    error = run["error"].removeprefix("RefusedRequest: ")  # as the other failures: no kind
    assert failure.user_failure_data.description == f"sample: {error}"
    assert "\n" not in failure.user_failure_data.description
    assert "max_retries" not in failure.error.message
