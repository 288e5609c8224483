"""The PostgreSQL server goes away mid-harvest (crash, restart, failover): the harvest fails in
one line with its checkpoint saved, and the next run resumes it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import load_settings
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.cli.conftest import RECORDS, create_args
from oai_pipeline_tests.support import live_records

pytestmark = pytest.mark.postgres


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def databases(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    from oai_pipeline_tests.postgres import fresh_database

    urls = [fresh_database(postgres_url, "gone") for _ in range(2)]
    monkeypatch.setenv("OAI_PIPELINE_STATE_DB_URL", urls[0])
    monkeypatch.setenv("OAI_PIPELINE_TARGET_DB_URL", urls[1])
    yield urls
    _allow_connections(urls, True)


def _allow_connections(urls: list[str], allowed: bool) -> None:
    """Refused (and the open ones ended): to the harvest, as a server that is down."""
    admin = sa.create_engine(
        sa.make_url(urls[0]).set(database="postgres"), isolation_level="AUTOCOMMIT"
    )
    try:
        with admin.connect() as connection:
            for url in urls:
                name = sa.make_url(url).database
                connection.exec_driver_sql(
                    f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS {str(allowed).lower()}"
                )
                if not allowed:
                    connection.exec_driver_sql(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        f"WHERE datname = '{name}'"
                    )
    finally:
        admin.dispose()


def _server_gone_before(monkeypatch: pytest.MonkeyPatch, target: str, urls: list[str]) -> None:
    """The server goes away once the harvest reaches `target` (module:function or
    module:Class.method)."""
    module_name, path = target.split(":")
    import importlib

    owner: Any = importlib.import_module(module_name)
    *classes, name = path.split(".")
    for attribute in classes:
        owner = getattr(owner, attribute)
    original: Callable[..., Any] = getattr(owner, name)

    def gone(*args: Any, **kwargs: Any) -> Any:
        _allow_connections(urls, False)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, gone)


@pytest.mark.parametrize(
    "stage",
    [
        "oai_pipeline.pipeline.discover:_fetch",
        "oai_pipeline.pipeline.runner:transform",
        "oai_pipeline.pipeline.runner:write",
        # inside a target batch's transaction, in a savepoint: the lost connection was taken
        # for the records' own failures, then the batch ended in PendingRollbackError
        "oai_pipeline.targets.embedded.transaction:TargetTransaction.create_many",
    ],
)
def test_a_server_gone_mid_harvest_is_one_line_and_the_next_run_resumes(
    databases: list[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    stage: str,
) -> None:
    with OAIEndpoint(RECORDS, page_size=3) as endpoint:
        assert _run(*create_args("sample", endpoint.base_url)).exit_code == 0
        with monkeypatch.context() as patch:
            _server_gone_before(patch, stage, databases)
            result = _run("harvest", "sample")
        # one line naming what the server said; not three chained tracebacks (the stage's,
        # then recording the failure's, then releasing the lease's)
        assert result.exit_code == 1, result.output
        assert "Traceback" not in result.output
        errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
        assert len(errors) == 1 and "database" in errors[0], result.stderr
        # nor a traceback logged on the way (the CLI's log handler prints a record's
        # exc_info: keeping the failing sweep's notices printed the database's error whole)
        logged = [r.getMessage() for r in caplog.records if r.exc_info]
        assert not logged, logged
        _allow_connections(databases, True)  # the server is back

        resumed = _run("harvest", "sample", "--json")

    assert resumed.exit_code == 0, resumed.output
    report = json.loads(resumed.stdout)
    assert report["run_id"] == 1  # the interrupted run, resumed from its checkpoint
    live = {r.identifier for r in live_records(RECORDS, "oai_datacite")}
    assert report["created"] == len(live)  # the run's, all its attempts
    repository = EmbeddedRepository(load_settings().target_db_url)
    try:
        written = [r["source_identifier"] for r in repository.list(harvester="sample")]
    finally:
        repository.close()
    assert sorted(written) == sorted(live)  # each once
    status = json.loads(_run("status", "--harvester", "sample", "--json").stdout)
    assert status["run"]["id"] == 1 and status["run"]["status"] == "succeeded"
