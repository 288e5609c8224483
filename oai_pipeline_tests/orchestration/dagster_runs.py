"""Dagster runs as the run coordinator and the daemon leave them, without running them."""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg


def add_queued_run(instance: dg.DagsterInstance, tags: Mapping[str, str]) -> dg.DagsterRun:
    """A run of the code location waiting in the queue, as the run coordinator leaves it."""
    from dagster._core.remote_origin import (
        RegisteredCodeLocationOrigin,
        RemoteJobOrigin,
        RemoteRepositoryOrigin,
    )

    location = RegisteredCodeLocationOrigin("oai_pipeline.definitions")
    origin = RemoteJobOrigin(RemoteRepositoryOrigin(location, "__repository__"), "harvest")
    return instance.add_run(
        dg.DagsterRun(
            job_name="harvest",
            tags=dict(tags),
            status=dg.DagsterRunStatus.QUEUED,
            remote_job_origin=origin,
        )
    )
