"""A PostgreSQL role that lacks a privilege (SQLSTATE 42501: no INSERT on the target's
tables, no CREATE in the state store's schema): the command fails in one line naming the
database, the role and the grant; once granted, the same command goes through."""

from __future__ import annotations

import json
import re

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.errors import without_password
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.cli.conftest import create_args, run_left_running
from oai_pipeline_tests.postgres import as_role, execute, fresh_database, login_role

pytestmark = pytest.mark.postgres


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def role(postgres_url: str) -> str:
    return login_role(postgres_url)


def _advised_grants(line: str) -> list[str]:
    """The statements the line says to run (in backquotes)."""
    return re.findall(r"`(GRANT [^`]+)`", line)


def test_a_target_role_without_insert_names_the_target_the_role_and_the_grant(
    postgres_url: str, role: str, endpoint: OAIEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A role that may read the target's tables but not write them (42501 on INSERT) was
    reported as a read-only database ("let it take writes"): the wrong cure, and no word of
    which database or role."""
    monkeypatch.setenv("OAI_PIPELINE_STATE_DB_URL", fresh_database(postgres_url))
    owner_url = fresh_database(postgres_url)
    EmbeddedRepository(owner_url).close()  # its tables, owned by another role
    execute(owner_url, f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    role_url = as_role(owner_url, role)
    monkeypatch.setenv("OAI_PIPELINE_TARGET_DB_URL", role_url)
    assert _run(*create_args("sample", endpoint.base_url)).exit_code == 0

    refused = _run("harvest", "sample")

    assert refused.exit_code == 1, refused.output
    assert "Traceback" not in refused.output
    [line] = refused.stderr.splitlines()
    assert re.fullmatch(
        r"Error: database error: permission denied for table \w+; "
        + re.escape(
            f"the target database {without_password(role_url)} refuses role {role} this: "
            "grant it (as the owner of its tables) "
            f"`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}` "
            f"and `GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}`, "
            "then run again: a harvest resumes where it stopped"
        ),
        line,
    ), line
    assert "secret" not in line

    execute(owner_url, *_advised_grants(line))
    rerun = _run("harvest", "sample")

    assert rerun.exit_code == 0, rerun.output
    with EmbeddedRepository(owner_url) as repository:
        assert repository.list(limit=100)


def test_a_state_store_role_that_may_not_create_tables_names_the_store_the_role_and_the_grant(
    postgres_url: str, role: str, endpoint: OAIEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty state store whose role may not create its tables in `public` (PostgreSQL
    15's default): the first command's line named the database but neither the role nor
    the grant, and quoted the statement across lines (`LINE 2: CREATE TABLE … ^`)."""
    owner_url = fresh_database(postgres_url)
    role_url = as_role(owner_url, role)
    monkeypatch.setenv("OAI_PIPELINE_STATE_DB_URL", role_url)
    monkeypatch.setenv("OAI_PIPELINE_TARGET_DB_URL", fresh_database(postgres_url))

    refused = _run(*create_args("sample", endpoint.base_url))

    assert refused.exit_code == 1, refused.output
    assert "Traceback" not in refused.output
    [line] = refused.stderr.splitlines()
    assert line == (
        f"Error: cannot open the state database {without_password(role_url)}: permission "
        f"denied for schema public; it refuses role {role} this: grant it `GRANT USAGE, "
        f"CREATE ON SCHEMA public TO {role}`, then run again: a harvest resumes where it "
        "stopped"
    )

    execute(owner_url, *_advised_grants(line))
    created = _run(*create_args("sample", endpoint.base_url))

    assert created.exit_code == 0, created.output
    assert _run("harvest", "sample").exit_code == 0


def test_a_role_and_password_given_in_the_urls_query_are_named_and_hidden_alike(
    postgres_url: str, role: str, endpoint: OAIEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libpq's other URL form, `postgresql:///db?host=…&user=…&password=…` (the one a socket
    directory needs): the line showed the password, in text and in --json, and named this
    process's user as the role refused, not the URL's."""
    monkeypatch.setenv("OAI_PIPELINE_STATE_DB_URL", fresh_database(postgres_url))
    owner_url = fresh_database(postgres_url)
    EmbeddedRepository(owner_url).close()  # its tables, owned by another role
    execute(owner_url, f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    owner = sa.make_url(owner_url)
    role_url = sa.URL.create(
        owner.drivername,
        host=owner.host,
        port=owner.port,
        database=owner.database,
        query={"user": role, "password": "secret"},
    )
    monkeypatch.setenv("OAI_PIPELINE_TARGET_DB_URL", role_url.render_as_string(False))
    assert _run(*create_args("sample", endpoint.base_url)).exit_code == 0

    for refused in (_run("harvest", "sample"), _run("harvest", "sample", "--json")):
        assert refused.exit_code == 1, refused.output
        assert "Traceback" not in refused.output
        assert "secret" not in refused.output
        assert f"refuses role {role} this" in refused.output
        assert "password=***" in refused.output  # the URL still says which database


@pytest.mark.parametrize(
    ("harvested", "as_json", "refused", "grant"),
    [
        (  # the UPDATE that fails the run: a privilege on the tables
            True,
            False,
            "permission denied for table harvest_runs",
            "grant it (as the owner of its tables) `GRANT SELECT, INSERT, UPDATE, DELETE ON "
            "ALL TABLES IN SCHEMA public TO {role}` and `GRANT USAGE ON ALL SEQUENCES IN "
            "SCHEMA public TO {role}`",
        ),
        (  # no harvest yet made the lease tables, which status creates: one on the schema
            False,
            True,
            "permission denied for schema public",
            "grant it `GRANT USAGE, CREATE ON SCHEMA public TO {role}`",
        ),
    ],
)
def test_status_as_a_role_that_may_only_read_the_state_store_says_what_the_harvest_says(
    postgres_url: str,
    role: str,
    endpoint: OAIEndpoint,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    harvested: bool,
    as_json: bool,
    refused: str,
    grant: str,
) -> None:
    """A monitoring role granted only SELECT on the state store (42501 on what status
    writes to fail a run whose process is gone): status called it "read-only", the cure of
    another refusal (25006), where the harvest's line names the database, the role and
    the grant."""
    owner_url = fresh_database(postgres_url)
    monkeypatch.setenv("OAI_PIPELINE_STATE_DB_URL", owner_url)
    monkeypatch.setenv("OAI_PIPELINE_TARGET_DB_URL", fresh_database(postgres_url))
    assert _run(*create_args("sample", endpoint.base_url)).exit_code == 0
    if harvested:
        assert _run("harvest", "sample").exit_code == 0
    run_id = run_left_running("sample")  # one whose process was killed
    execute(owner_url, f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    role_url = as_role(owner_url, role)
    monkeypatch.setenv("OAI_PIPELINE_STATE_DB_URL", role_url)

    shown = _run("status", "--batch-id", str(run_id), *(["--json"] if as_json else []))

    assert shown.exit_code == 0, shown.output
    if as_json:
        assert json.loads(shown.stdout)["run"]["status"] == "running"
    else:
        assert shown.stdout.startswith(f"harvest run {run_id} of sample: running\n")
    assert "read-only" not in caplog.text
    [said] = [r.getMessage() for r in caplog.records if "shown as stored" in r.getMessage()]
    assert said == (
        f"database error: {refused}; the state database {without_password(role_url)} "
        f"refuses role {role} this: {grant.format(role=role)}, then run again: a harvest "
        "resumes where it stopped; runs whose process is gone are shown as stored "
        "(running); a status that can write marks them failed"
    )
    assert "secret" not in said
