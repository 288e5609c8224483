"""Registering a harvester from the Dagster launchpad: the `register_harvester` job."""

from __future__ import annotations

from typing import Any

import dagster as dg

from oai_pipeline.definitions import defs
from oai_pipeline.defs.partitions import HARVESTER
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings

ZENODO = {
    "id": "zenodo",
    "name": "Zenodo",
    "base_url": "https://zenodo.org/oai2d",
    "metadata_prefix": "oai_datacite",
    "model": "rdm",
    "community": "cesnet",
    "harvest_managers": ["oai@example.org"],
}


def _register(instance: dg.DagsterInstance, config: dict[str, Any]) -> dg.ExecuteInProcessResult:
    job = defs.resolve_job_def("register_harvester")
    return job.execute_in_process(
        run_config={"ops": {"register_harvester_op": {"config": config}}},
        instance=instance,
        raise_on_error=False,
    )


def _registered(settings: Settings) -> dict[str, Any]:
    with Services(settings) as services:
        return {h.id: h for h in HarvesterRegistry(services.state).list()}


def test_a_harvester_registered_from_the_launchpad_is_stored_with_its_partition(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    result = _register(instance, ZENODO)

    assert result.success
    harvester = _registered(settings)["zenodo"]
    assert harvester.base_url == "https://zenodo.org/oai2d"
    assert harvester.harvest_managers == ["oai@example.org"]
    assert all("cesnet" in writer for writer in harvester.writers)
    assert instance.get_dynamic_partitions(HARVESTER) == ["zenodo"]
    (output,) = [e for e in result.all_events if e.is_successful_output]
    assert output.event_specific_data.metadata["result"].value == "created"

    again = _register(instance, {**ZENODO, "setspec": "user-cesnet", "enabled": False})

    assert again.success
    updated = _registered(settings)["zenodo"]
    assert (updated.setspec, updated.enabled) == ("user-cesnet", False)
    assert instance.get_dynamic_partitions(HARVESTER) == ["zenodo"]


def test_the_launchpad_config_takes_the_loader_as_the_fixture_file_does(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    """The README: the job's config is a fixture entry's fields in snake_case. Before, it
    had no `loader`: a harvester's loader options (a slow source's timeout) could not be set
    there, and a config with them was refused."""
    result = _register(instance, {**ZENODO, "loader": "oai-pmh{timeout: 120, max_retries: 8}"})

    assert result.success
    assert _registered(settings)["zenodo"].loader == "oai-pmh{timeout: 120, max_retries: 8}"

    bad = _register(instance, {**ZENODO, "loader": "oai-pmh{timeout: 1}"})

    assert not bad.success
    assert _registered(settings)["zenodo"].loader == "oai-pmh{timeout: 120, max_retries: 8}"


def test_a_mistake_in_the_config_stores_nothing_and_says_which_field(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    result = _register(instance, {**ZENODO, "base_url": "zenodo.org/oai2d"})

    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    message = failure.step_failure_data.error.message
    assert "base_url" in message and "is not an http(s) URL" in message
    assert "Traceback" not in (failure.step_failure_data.user_failure_data.description or "")
    assert _registered(settings) == {}
    assert instance.get_dynamic_partitions(HARVESTER) == []


def test_a_request_url_from_the_launchpad_is_registered_as_its_endpoint(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    """The launchpad's base URL pasted from a browser (`…?verb=Identify`) is stored as the
    endpoint, and the run's output says so."""
    result = _register(instance, {**ZENODO, "base_url": "https://zenodo.org/oai2d?verb=Identify"})

    assert result.success
    assert _registered(settings)["zenodo"].base_url == "https://zenodo.org/oai2d"
    (output,) = [e for e in result.all_events if e.is_successful_output]
    [warning] = output.event_specific_data.metadata["warnings"].value
    assert "registered as https://zenodo.org/oai2d" in warning


def test_a_harvester_given_another_set_or_prefix_from_the_launchpad_is_warned_as_update_is(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    """Before, only `harvesters update` said what a new metadata prefix means for the next
    runs, and nothing said what a new set does: the job's output says both now."""
    assert _register(instance, {**ZENODO, "setspec": "user-a"}).success
    result = _register(instance, {**ZENODO, "setspec": "user-b", "metadata_prefix": "datacite"})

    assert result.success
    (output,) = [e for e in result.all_events if e.is_successful_output]
    prefix, setspec = output.event_specific_data.metadata["warnings"].value
    assert "the metadata prefix changed from 'oai_datacite' to 'datacite'" in prefix
    assert "the set changed from 'user-a' to 'user-b'" in setspec
    assert "harvest them all again" in setspec


def test_a_base_url_changed_from_the_launchpad_warns_of_the_runs_queued_for_the_old_one(
    instance: dg.DagsterInstance, settings: Settings
) -> None:
    """Only `harvesters update` warned that a run queued before the base URL changed
    harvests the new one when it starts: the launchpad's change said nothing."""
    from oai_pipeline.defs.launch import range_tags
    from oai_pipeline_tests.orchestration.dagster_runs import add_queued_run

    assert _register(instance, ZENODO).success
    queued = add_queued_run(
        instance, range_tags("zenodo", "2024-01-01", "2024-01-31", ZENODO["base_url"])
    )

    moved = _register(instance, {**ZENODO, "base_url": "https://zenodo.example/oai2d"})
    renamed = _register(
        instance, {**ZENODO, "base_url": "https://zenodo.example/oai2d", "name": "Z"}
    )

    def warnings(result: dg.ExecuteInProcessResult) -> list[str]:
        (output,) = [e for e in result.all_events if e.is_successful_output]
        return output.event_specific_data.metadata["warnings"].value

    [warning] = [w for w in warnings(moved) if "queued" in w]
    assert f"{queued.run_id} (QUEUED)" in warning and "harvest the new base URL" in warning
    assert not [w for w in warnings(renamed) if "queued" in w]  # the URL did not change
