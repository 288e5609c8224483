"""`harvest --use-job`: hand the run to the running Dagster instance, through its run queue.

The same path as a run launched from the UI: the `harvest` job over the windows of the
requested range, options as the `harvest_options` resource config.
"""

from __future__ import annotations

import os
from datetime import datetime
from urllib.parse import urlparse

from oai_pipeline.errors import PipelineError
from oai_pipeline.pipeline.options import RunOptions

DEFAULT_WEBSERVER = "http://127.0.0.1:3000"


def harvest_run_config(options: RunOptions) -> dict:
    fields = options.model_dump(exclude={"resume_batch_id"}, exclude_defaults=True)
    return {"resources": {"harvest_options": {"config": fields}}} if fields else {}


def submit_harvest_job(
    harvester_id: str, start: datetime | None, end: datetime | None, options: RunOptions
) -> dict:
    from dagster_graphql import DagsterGraphQLClient, DagsterGraphQLClientError

    from oai_pipeline.defs.jobs import harvest_job
    from oai_pipeline.defs.launch import range_tags, window_range

    if options.resume_batch_id is not None:
        raise PipelineError(
            "--resume works in this process; a Dagster run resumes by re-executing it"
        )
    url = urlparse(os.environ.get("DAGSTER_WEBSERVER_URL", DEFAULT_WEBSERVER))
    first, last = window_range(start, end)
    client = DagsterGraphQLClient(
        url.hostname or "127.0.0.1", port_number=url.port, use_https=url.scheme == "https"
    )
    try:
        run_id = client.submit_job_execution(
            harvest_job.name,
            run_config=harvest_run_config(options),
            tags=range_tags(harvester_id, first, last),
        )
    except DagsterGraphQLClientError as error:
        raise PipelineError(f"Dagster refused the run: {error}") from error
    except Exception as error:  # connection refused, DNS, timeouts
        raise PipelineError(
            f"no Dagster webserver at {url.geturl()} ({type(error).__name__}); start it with "
            "`./run.sh dev` or set DAGSTER_WEBSERVER_URL"
        ) from error
    return {"run_id": run_id, "harvester_id": harvester_id, "windows": [first, last]}
