"""The code location loads, with four partitioned assets in one group and their lineage."""

from __future__ import annotations

import multiprocessing.forkserver
import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from oai_pipeline.definitions import STEP_PROCESSES, build_definitions, defs
from oai_pipeline.defs.partitions import HARVESTER, WINDOW, harvest_partitions
from oai_pipeline.errors import ConfigurationError

PROJECT = Path(__file__).resolve().parents[2]
ASSETS = ["raw_oai_xml", "transformed_records", "sync_decisions", "written_records"]


def test_four_partitioned_assets_in_one_group_with_lineage() -> None:
    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert set(ASSETS) <= keys
    for name in ASSETS:
        node = graph.get(dg.AssetKey(name))
        assert node.group_name == "oai_harvest"
        assert node.partitions_def == harvest_partitions
    for upstream, downstream in zip(ASSETS, ASSETS[1:], strict=False):
        assert graph.get(dg.AssetKey(downstream)).parent_keys == {dg.AssetKey(upstream)}
    dimensions = {d.name: d.partitions_def for d in harvest_partitions.partitions_defs}
    assert isinstance(dimensions[HARVESTER], dg.DynamicPartitionsDefinition)
    assert isinstance(dimensions[WINDOW], dg.TimeWindowPartitionsDefinition)


def _owners(definitions: dg.Definitions) -> dict[str, list[str]]:
    graph = definitions.resolve_asset_graph()
    return {name: list(graph.get(dg.AssetKey(name)).owners) for name in ASSETS}


def test_the_assets_have_the_owners_the_environment_names_and_none_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The UI's Owner column of the four assets was always empty: an operator may now name
    the team or people answering for the harvest once, for every asset."""
    assert _owners(defs) == {name: [] for name in ASSETS}

    monkeypatch.setenv("OAI_PIPELINE_ASSET_OWNERS", " team:repository, ops@example.org ")
    owned = build_definitions()

    assert _owners(owned) == {name: ["team:repository", "ops@example.org"] for name in ASSETS}


def test_an_owner_dagster_would_refuse_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OAI_PIPELINE_ASSET_OWNERS", "team:repository,ops")

    with pytest.raises(ConfigurationError) as refused:
        build_definitions()

    assert str(refused.value) == (
        "OAI_PIPELINE_ASSET_OWNERS: 'ops' is no owner Dagster takes: an e-mail address or "
        "team:NAME, comma-separated"
    )


def test_jobs_schedules_sensors_and_checks_are_defined() -> None:
    assert defs.resolve_job_def("harvest") is not None
    assert defs.resolve_job_def("run_all_harvesters") is not None
    assert defs.resolve_sensor_def("harvester_registry_sensor").default_status == (
        dg.DefaultSensorStatus.RUNNING
    )
    assert defs.resolve_schedule_def("incremental_harvest_schedule").default_status == (
        dg.DefaultScheduleStatus.RUNNING
    )
    checks = {key.name for key in defs.resolve_asset_graph().asset_check_keys}
    assert {"reconciles", "no_record_errors"} <= checks


@dg.op
def _step_process() -> tuple[int, int]:
    return os.getpid(), os.getppid()


@dg.job(executor_def=STEP_PROCESSES)
def _one_step() -> None:
    _step_process()


def test_every_job_runs_each_step_in_a_process_forked_from_a_preloaded_server() -> None:
    """A process per step (the UI's Terminate stops the step where it is), forked from a
    server that imported the code once per run instead of a fresh interpreter per step; the
    asset job behind backfills and the UI's Materialize too. In-process on request."""
    repository = defs.get_repository_def()
    names = [job.name for job in repository.get_all_jobs()]
    assert {"harvest", "run_all_harvesters", "__ASSET_JOB"} <= set(names)
    for name in names:
        assert repository.get_job(name).executor_def is STEP_PROCESSES, name

    def step_process(**run_config: object) -> tuple[int, int]:
        execution = {"execution": {"config": run_config}} if run_config else None
        with dg.execute_job(
            dg.reconstructable(_one_step), instance, run_config=execution
        ) as result:
            return result.output_for_node("_step_process")

    with dg.instance_for_test() as instance:
        try:
            pid, parent = step_process()
            assert pid != os.getpid() and parent != os.getpid()  # the forkserver's child
            assert step_process(in_process={})[0] == os.getpid()
            spawned = step_process(multiprocess={"start_method": {"spawn": {}}})
            assert spawned[1] == os.getpid()  # as configured
        finally:
            # The forkserver lives as long as the process that started it (a run's ends with
            # the run): stopped here, the tests after this one see no stray child.
            multiprocessing.forkserver._forkserver._stop()


def test_dagster_definitions_validate() -> None:
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("dagster")),
            "definitions",
            "validate",
            "-w",
            "workspace.yaml",
        ],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_fixture_in_the_data_folder_is_loaded_with_the_definitions(settings) -> None:
    from oai_pipeline.definitions import build_definitions
    from oai_pipeline.pipeline.services import Services

    settings.fixture_file.write_text(
        "- id: zenodo\n"
        "  name: Zenodo\n"
        "  base-url: https://zenodo.org/oai2d\n"
        "  metadata-prefix: oai_datacite\n"
        "  model: rdm\n"
    )

    build_definitions()

    with Services(settings) as services:
        harvester = services.state.get_harvester("zenodo")
    assert harvester is not None
    assert harvester.metadata_prefix == "oai_datacite"
    assert harvester.writers == ['oai-service{model:"rdm"}']


def test_the_data_folder_fixture_is_applied_once_per_content(
    instance: dg.DagsterInstance, settings
) -> None:
    """Every run worker loads the definitions: a harvester changed in the UI since the file
    was applied (here: disabled) keeps the change until the file itself changes."""
    from oai_pipeline.definitions import build_definitions
    from oai_pipeline.pipeline.services import Services

    entry = (
        "- id: zenodo\n  name: Zenodo\n  base-url: https://zenodo.org/oai2d\n"
        "  metadata-prefix: oai_datacite\n  model: rdm\n"
    )
    settings.fixture_file.write_text(entry)
    build_definitions()
    disable = {
        "id": "zenodo",
        "base_url": "https://zenodo.org/oai2d",
        "metadata_prefix": "oai_datacite",
        "model": "rdm",
        "enabled": False,
    }
    assert (
        defs.resolve_job_def("register_harvester")
        .execute_in_process(
            run_config={"ops": {"register_harvester_op": {"config": disable}}}, instance=instance
        )
        .success
    )

    build_definitions()  # a run worker, a code reload

    with Services(settings) as services:
        assert services.state.get_harvester("zenodo").enabled is False
    settings.fixture_file.write_text(entry + "  setspec: user-cesnet\n")
    build_definitions()
    with Services(settings) as services:
        harvester = services.state.get_harvester("zenodo")
    assert (harvester.setspec, harvester.enabled) == ("user-cesnet", True)


def test_a_fixture_file_in_error_leaves_the_code_location_running(
    instance: dg.DagsterInstance, settings, caplog
) -> None:
    """Before, a typo in the data folder's oai_harvesters.yaml failed the import of the
    definitions: no schedule, sensor or run of any harvester until the file was fixed. Now
    the registry stays as it was, the registry sensor's ticks fail saying why, and the fixed
    file is applied by the next tick, without a code reload."""
    from oai_pipeline.definitions import build_definitions
    from oai_pipeline.pipeline.services import Services

    entry = "  base-url: https://zenodo.org/oai2d\n  metadata-prefix: oai_datacite\n"
    settings.fixture_file.write_text("- id: Zen odo\n" + entry)

    loaded = build_definitions()

    assert loaded.resolve_schedule_def("incremental_harvest_schedule") is not None
    assert "'Zen odo' is not a harvester id" in caplog.text
    sensor = loaded.resolve_sensor_def("harvester_registry_sensor")
    context = dg.build_sensor_context(instance=instance, resources=loaded.resources)
    with pytest.raises(ConfigurationError) as failed:
        sensor.evaluate_tick(context)
    assert "'Zen odo' is not a harvester id" in str(failed.value)
    assert "harvesters unchanged; fix the file" in str(failed.value)
    with Services(settings) as services:
        assert services.state.list_harvesters() == []

    settings.fixture_file.write_text("- id: zenodo\n" + entry)
    data = sensor.evaluate_tick(context)

    with Services(settings) as services:
        assert [h.id for h in services.state.list_harvesters()] == ["zenodo"]
    [added] = data.dynamic_partitions_requests
    assert list(added.partition_keys) == ["zenodo"]


def _descriptions() -> dict[str, str | None]:
    """What the UI shows beside each asset, check, job, schedule and sensor."""
    graph = defs.resolve_asset_graph()
    described: dict[str, str | None] = {
        f"asset {spec.key.to_user_string()}": spec.description
        for spec in defs.resolve_all_asset_specs()
    }
    described.update(
        {
            f"check {key.name}": graph.get_check_spec(key).description
            for key in graph.asset_check_keys
        }
    )
    described.update(
        {
            f"job {job.name}": job.description
            for job in defs.resolve_all_job_defs()
            if not job.name.startswith("__")  # Dagster's own implicit asset job
        }
    )
    described.update({f"schedule {s.name}": s.description for s in defs.schedules})
    described.update({f"sensor {s.name}": s.description for s in defs.sensors})
    return described


def test_every_definition_says_what_it_does_in_the_ui() -> None:
    """The harvest_automation sensor had no description: the one line in the sensor list
    that did not say what it does."""
    assert not [name for name, text in _descriptions().items() if not (text or "").strip()]


def test_a_scheduled_jobs_description_names_its_schedule() -> None:
    """From a job's page, which schedule launches it. run_all_harvesters named a
    "run_all_harvesters schedule" that does not exist; the others named none."""
    for schedule in defs.schedules:
        job = defs.resolve_job_def(schedule.job_name)
        assert schedule.name in (job.description or ""), (job.name, schedule.name)


def test_descriptions_name_only_definitions_that_exist() -> None:
    names = {s.name for s in defs.schedules} | {s.name for s in defs.sensors}
    names |= {job.name for job in defs.resolve_all_job_defs()}
    named = {
        token
        for text in _descriptions().values()
        for token in re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", text or "")
        if token.endswith(("_schedule", "_sensor")) or token == "harvest_automation"
    }
    assert named <= names
    # the plan is written right after it is made, unless that sensor is stopped: said where
    # the plan is shown
    assert "harvest_automation" in (
        defs.resolve_assets_def("sync_decisions").descriptions_by_key[dg.AssetKey("sync_decisions")]
        or ""
    )


@pytest.mark.parametrize("resource", ["pipeline", "harvest_options"])
def test_every_resource_field_is_described(resource: str) -> None:
    """The UI's Resources page and the launchpad list these fields: `pipeline`'s four
    locations were shown bare, with nothing saying what each is or what it defaults to."""
    fields = type(defs.resources[resource]).model_fields
    assert fields
    assert not [name for name, field in fields.items() if not (field.description or "").strip()]
    assert (type(defs.resources[resource]).__doc__ or "").strip()


def test_each_asset_lists_its_parquet_columns_for_the_ui() -> None:
    """The UI's asset page lists an asset's columns from `dagster/column_schema`: none was
    set, so its Columns section was empty for all four Parquet assets."""
    from oai_pipeline.pipeline.frames import SCHEMAS

    for spec in defs.resolve_all_asset_specs():
        name = spec.key.to_user_string()
        schema = spec.metadata["dagster/column_schema"]
        assert isinstance(schema, dg.TableSchema)
        assert [(c.name, c.type) for c in schema.columns] == [
            (column, str(dtype)) for column, dtype in SCHEMAS[name].items()
        ]
        assert schema.columns[0].description  # the identifier: what it is
        # every column says what it holds: error_message and error_location were listed bare
        assert [c.name for c in schema.columns if not c.description] == []


def test_the_automation_label_says_it_follows_any_window() -> None:
    """Dagster's `eager` waits for the latest time window only; the downstream assets drop
    that part, yet the UI labelled their condition plain "eager", telling a Dagster user
    that a backfilled window is not followed."""
    for name in ASSETS[1:]:
        condition = defs.resolve_assets_def(name).automation_conditions_by_key[dg.AssetKey(name)]
        assert "in_latest_time_window" not in repr(condition)
        assert condition.get_label() == "eager, any window"
    # the label leaves the condition's identity, so the automation sensor's cursor, as it was
    unlabelled = dg.AutomationCondition.eager().without(
        dg.AutomationCondition.in_latest_time_window()
    )
    ids = [
        c.get_node_unique_id(parent_unique_id=None, index=None, target_key=None)
        for c in (condition, unlabelled)
    ]
    assert ids[0] == ids[1]


def test_the_prune_says_which_runs_it_deletes() -> None:
    """A run goes once it *finished* more than the kept days ago and was superseded, however
    recently. The job and its schedule said "superseded for longer than" the kept days: an
    operator expected last week's superseded runs of a month-old harvest to stay."""
    job = defs.resolve_job_def("prune_run_history")
    schedule = defs.resolve_schedule_def("prune_run_history_schedule")
    [op] = [node.definition for node in job.nodes]
    rule = "finished more than OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS ago and were superseded"
    for description in (job.description, schedule.description, op.description):
        assert rule in (description or "")
        assert "superseded for longer" not in (description or "")
        # Dagster's runs of the harvests: "harvest runs" is what `status` lists (the state
        # store's), which the prune leaves; the UI said it deleted "the harvest runs"
        assert "Dagster runs of harvests" in (description or "")
        assert "harvest runs" not in (description or "")


def test_the_registry_sensor_says_it_applies_the_fixture_file() -> None:
    """Its ticks fail while the data folder's oai_harvesters.yaml is in error (see the test
    above), and it cancels the queued runs of deleted harvesters: its description said only
    that it keeps the partitions, so a failed tick looked like a broken sensor."""
    description = defs.resolve_sensor_def("harvester_registry_sensor").description or ""
    assert "oai_harvesters.yaml" in description
    assert "cancels the queued runs" in description


def test_the_readme_names_every_job_schedule_sensor_check_and_config_field() -> None:
    """Before, it named neither harvest_canceled_sensor, nor the `pipeline` resource and its
    fields, nor most of harvest_options' fields: an operator met them only in the UI."""
    readme = (PROJECT / "README.md").read_text(encoding="utf-8")
    repo = defs.get_repository_def()
    names = {job.name for job in repo.get_all_jobs() if not job.name.startswith("__")}
    names |= {schedule.name for schedule in repo.schedule_defs}
    names |= {sensor.name for sensor in repo.sensor_defs}
    names |= {key.name for key in repo.asset_graph.asset_check_keys}
    for name, resource in repo.get_top_level_resources().items():
        names |= {name, *resource.config_schema.config_type.fields}
    for job in repo.get_all_jobs():
        if job.name == "register_harvester":  # its fields are the fixture file's, named there
            continue
        for op in job.graph.node_defs:
            config = op.config_schema.config_type if op.config_schema else None
            names |= set(getattr(config, "fields", {}))

    assert {name for name in names if f"`{name}`" not in readme} == set()
