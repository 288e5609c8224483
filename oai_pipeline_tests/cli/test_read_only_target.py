"""A PostgreSQL target that refuses writes as read-only (`default_transaction_read_only`, a
hot standby, a role that may only read): the harvest fails in one line and writes nothing
twice; once the target takes writes again, a rerun writes every record once."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.errors import without_password
from oai_pipeline.settings import load_settings
from oai_pipeline.targets.embedded.repository import EmbeddedRepository

# PostgreSQL's read-only transactions and where they are refused: the `backend` fixture on
# PostgreSQL only (SQLite's read-only file is `cli/test_disk_refusals.py`'s)
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.parametrize("backend", ["postgresql"], indirect=True),
]


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _read_only(url: str, on: bool) -> None:
    """Make the target's database take only reads in every new session (or no longer)."""
    database = sa.make_url(url)
    engine = sa.create_engine(database.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql(
                f"ALTER DATABASE {database.database} SET default_transaction_read_only = "
                + ("on" if on else "off")
            )
    finally:
        engine.dispose()


def test_a_read_only_postgresql_target_fails_the_harvest_in_one_line_and_a_rerun_writes_all(
    backend: str, registered: str
) -> None:
    """PostgreSQL refusing the target's writes (`cannot execute INSERT in a read-only
    transaction`, SQLSTATE 25006) is an InternalError, which the command took for a bug:
    its traceback. Now it is one line saying which database refused and what to do (it
    named neither the target nor its URL), and a rerun once the database takes writes
    writes every record once."""
    target_url = load_settings().target_db_url
    EmbeddedRepository(target_url).close()  # the target's tables, as a first harvest makes
    _read_only(target_url, True)

    refused = _run("harvest", registered)

    assert refused.exit_code == 1, refused.output
    assert "Traceback" not in refused.output
    [line] = refused.stderr.splitlines()
    assert line == (
        "Error: database error: cannot execute INSERT in a read-only transaction; the "
        f"target database {without_password(target_url)} takes only reads (a read-only "
        "default transaction, a standby, a role that may only read): let it take writes, "
        "then run again: a harvest resumes where it stopped"
    )
    with EmbeddedRepository(target_url) as repository:
        assert repository.list(limit=100) == []
    staged = json.loads(_run("records", "list", "--json").stdout)
    assert staged and all(record["last_written_at"] is None for record in staged)

    _read_only(target_url, False)
    rerun = _run("harvest", registered)

    assert rerun.exit_code == 0, rerun.output
    records = json.loads(_run("records", "list", "--json").stdout)
    live = [record for record in records if not record["deleted"]]
    assert live and all(record["written_revision"] == 1 for record in live)
    with EmbeddedRepository(target_url) as repository:
        written = repository.list(limit=100)
    assert len(written) == len(live)
    assert len({record["id"] for record in written}) == len(written)


def test_a_read_only_postgresql_state_store_is_named_in_the_harvest_s_one_line(
    backend: str, registered: str
) -> None:
    """The state store refusing writes read as the target's did: "the database takes only
    reads", with two databases to choose from. The line names the state store and its URL."""
    state_url = load_settings().state_db_url
    _read_only(state_url, True)

    refused = _run("harvest", registered)

    assert refused.exit_code == 1, refused.output
    assert "Traceback" not in refused.output
    [line] = refused.stderr.splitlines()
    assert line.startswith("Error: database error: cannot execute "), line
    assert f"; the state database {without_password(state_url)} takes only reads " in line
