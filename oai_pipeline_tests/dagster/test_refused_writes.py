"""A PostgreSQL target that refuses a Dagster run's writes (a role lacking the privilege,
42501): the run's failure and its harvest run's error are the command line's line (the
database named, its password hidden, the GRANT to run), not PostgreSQL's bare error."""

from __future__ import annotations

import dagster as dg
import pytest

from oai_pipeline.defs.launch import range_tags
from oai_pipeline.defs.partitions import ensure_harvester_partitions
from oai_pipeline.errors import without_password
from oai_pipeline.pipeline.services import Services
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import load_settings
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.postgres import ROLE_PASSWORD, as_role, execute, fresh_database, login_role
from oai_pipeline_tests.support import register

pytestmark = pytest.mark.postgres

IN_PROCESS = {"execution": {"config": {"in_process": {}}}}


def harvest_job() -> dg.JobDefinition:
    from oai_pipeline.definitions import defs

    return defs.resolve_job_def("harvest")


def test_a_target_role_without_insert_fails_the_run_with_the_command_line_s_line(
    instance: dg.DagsterInstance,
    endpoint: OAIEndpoint,
    postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The step failed with `ProgrammingError: (psycopg2.errors.InsufficientPrivilege)
    permission denied for table …` and the SQL statement, the harvest run's error with
    `InsufficientPrivilege: …`: neither said which database, which role, nor what to do."""
    owner_url = fresh_database(postgres_url)
    EmbeddedRepository(owner_url).close()  # its tables, owned by another role
    role = login_role(postgres_url)
    execute(owner_url, f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    role_url = as_role(owner_url, role)
    monkeypatch.setenv("OAI_PIPELINE_TARGET_DB_URL", role_url)
    settings = load_settings()
    register(settings, endpoint.base_url)
    ensure_harvester_partitions(instance, ["sample"])

    failed = dg.execute_job(
        dg.reconstructable(harvest_job),
        instance,
        run_config=IN_PROCESS,
        tags=range_tags("sample", "2024-01-03", "2024-01-12"),
        raise_on_error=False,
    )

    assert not failed.success
    [step] = [e for e in failed.all_events if e.is_step_failure]
    assert step.step_key == "written_records"
    description = step.step_failure_data.user_failure_data.description
    line = (
        f"the target database {without_password(role_url)} refuses role {role} this: grant "
        "it (as the owner of its tables) `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES "
        f"IN SCHEMA public TO {role}` and `GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO "
        f"{role}`, then run again: a harvest resumes where it stopped"
    )
    assert description.startswith("sample: database error: permission denied for table ")
    assert description.endswith(f"; {line}"), description
    with Services(settings) as services:
        [run] = services.state.runs_of_dagster_run(failed.run_id)
    assert run["status"] == "failed"
    assert run["error"] == description.removeprefix("sample: ")
    assert ROLE_PASSWORD not in description
