"""A PostgreSQL role that lacks a privilege (SQLSTATE 42501: no INSERT on the target's
tables, no CREATE in the state store's schema): the command fails in one line naming the
database, the role and the grant; once granted, the same command goes through."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.errors import without_password
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.cli.conftest import create_args
from oai_pipeline_tests.postgres import fresh_database

pytestmark = pytest.mark.postgres


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _execute(url: str, *statements: str) -> None:
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            for statement in statements:
                connection.exec_driver_sql(statement)
    finally:
        engine.dispose()


@pytest.fixture
def role(postgres_url: str) -> Iterator[str]:
    """A login role granted nothing (PostgreSQL 15 and later: no CREATE in `public` either)."""
    name = f"harvest_{uuid.uuid4().hex[:8]}"
    _execute(postgres_url, f"CREATE ROLE {name} LOGIN PASSWORD 'secret'")
    yield name


def _as(role: str, url: str) -> str:
    """`url` logged in as `role` (with a password, which the error must not show)."""
    return sa.make_url(url).set(username=role, password="secret").render_as_string(False)


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
    _execute(owner_url, f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    role_url = _as(role, owner_url)
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

    _execute(owner_url, *_advised_grants(line))
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
    role_url = _as(role, owner_url)
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

    _execute(owner_url, *_advised_grants(line))
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
    _execute(owner_url, f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
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
