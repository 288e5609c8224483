"""A part cut short (a power cut while it was written) is named, and re-materialising repairs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from oai_pipeline.defs.partitions import partition_key, scopes_for_keys
from oai_pipeline.errors import PipelineError
from oai_pipeline.pipeline.frames import TRANSFORMED_RECORDS
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.plan import plan
from oai_pipeline.pipeline.runner import run_harvest
from oai_pipeline.pipeline.services import Services
from oai_pipeline.pipeline.transform_stage import transform
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings
from oai_pipeline.storage import MANIFEST
from oai_pipeline_tests.support import register, shifted_sample_records, window_keys


def test_a_part_or_manifest_cut_short_fails_the_next_stage_by_name_and_its_stage_rewrites_it(
    settings: Settings,
) -> None:
    records = shifted_sample_records()
    days = window_keys(
        min(r.datestamp.date() for r in records), max(r.datestamp.date() for r in records)
    )
    (scope,) = scopes_for_keys([str(partition_key("sample", day)) for day in days])
    with OAIEndpoint(records, page_size=3) as endpoint:
        register(settings, endpoint.base_url, metadata_prefix="oai_datacite")
        with Services(settings) as services:
            run_harvest(services, scope, RunOptions(), progress=lambda _m: None)
            storage = services.storage
            window = next(d for d in days if storage.part_names(TRANSFORMED_RECORDS, "sample", d))
            part = storage.part_names(TRANSFORMED_RECORDS, "sample", window)[0]
            path = Path(storage.root) / TRANSFORMED_RECORDS / "sample" / window / part
            whole = path.read_bytes()
            path.write_bytes(whole[: len(whole) // 2])

            with pytest.raises(PipelineError) as failure:
                plan(services, scope, RunOptions())
            message = str(failure.value)
            assert f"{TRANSFORMED_RECORDS} partition sample/{window} is damaged" in message
            assert f"materialise {TRANSFORMED_RECORDS} for this window again" in message

            transform(services, scope)
            plan(services, scope, RunOptions())
            assert path.read_bytes() == whole

            manifest = path.parent / MANIFEST
            manifest.write_bytes(manifest.read_bytes()[:10])
            with pytest.raises(PipelineError) as failure:
                plan(services, scope, RunOptions())
            assert f"{TRANSFORMED_RECORDS} has not been materialised for sample {window}" in str(
                failure.value
            )
            transform(services, scope)
            plan(services, scope, RunOptions())
