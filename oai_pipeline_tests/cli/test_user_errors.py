"""User mistakes on the command line: one clear line (and JSON with --json), never a
traceback, and nothing half-written."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.cli.harvest import harvest
from oai_pipeline.defs.resources import HarvestOptions
from oai_pipeline.errors import ConfigurationError
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.harvesters.plugins import RDM_MODEL
from oai_pipeline.sample_endpoint.faults import Faults
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline.settings import Settings, load_settings
from oai_pipeline.state.store import StateStore
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.cli.conftest import create_args, run_left_running
from oai_pipeline_tests.support import CLI, shifted_sample_records, stored_harvester_ids

RECORDS_FOR_ERRORS = shifted_sample_records()


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def assert_one_line_error(result: Result, message: str, exit_code: int = 1) -> None:
    assert result.exit_code == exit_code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- F5: with --json an error is JSON on stdout too -------------------------------------------


@pytest.mark.parametrize(
    ("args", "message", "kind", "exit_code"),
    [
        # what the user named does not exist (was exit 1, `pipeline_error`) or exists already
        (["harvest", "nope"], "unknown harvester 'nope'", "not_found", 2),
        (["reconcile", "nope"], "unknown harvester 'nope'", "not_found", 2),
        (["status", "--batch-id", "999"], "no harvest run 999", "not_found", 2),
        (["records", "show", "nope"], "no harvest record 'nope'", "not_found", 2),
        (["harvesters", "show", "nope"], "unknown harvester 'nope'", "not_found", 2),
        (["harvesters", "update", "nope", "--name", "x"], "unknown harvester", "not_found", 2),
        (["prune", "nope"], "unknown harvester 'nope'", "not_found", 2),
        (["target", "show", "nope"], "no record 'nope'", "not_found", 2),
        (
            create_args("", "http://example.org/oai"),
            "is not a harvester id",
            "validation_error",
            2,
        ),
        (["target", "list", "--state", "bogus"], "'bogus' is not one of", "bad_parameter", 2),
        (["harvest", "nope", "--bogus"], "No such option '--bogus'", "no_such_option", 2),
        # a command that would do nothing, or ignore what it was given
        (["harvesters", "update", "nope"], "nothing to update", "validation_error", 2),
        (["status", "--limit", "5"], "--limit counts the runs", "validation_error", 2),
    ],
)
def test_json_errors_are_a_json_object_on_stdout(
    args: list[str], message: str, kind: str, exit_code: int
) -> None:
    result = run(*args, "--json")

    assert_one_line_error(result, message, exit_code)
    payload = json.loads(result.stdout)
    assert payload["type"] == kind
    assert message in payload["error"]
    assert f"Error: {payload['error']}" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (create_args("h", "http://example.org/oai"), "harvester 'h' already exists (use update)"),
        (["target", "communities", "create", "c"], "community 'c' already exists"),
    ],
)
def test_creating_what_exists_exits_2_as_the_other_mistakes(args: list[str], message: str) -> None:
    """Before, exit 1 (`pipeline_error`), where the command's other mistakes (an invalid
    option, an id no harvester can have) exit 2."""
    assert run(*args).exit_code == 0

    assert_one_line_error(run(*args), message, 2)


def test_creating_a_harvester_that_exists_is_already_exists_in_json() -> None:
    args = create_args("h", "http://example.org/oai")
    assert run(*args).exit_code == 0

    result = run(*args, "--json")

    message = "harvester 'h' already exists (use update)"
    assert_one_line_error(result, message, 2)
    assert json.loads(result.stdout) == {"error": message, "type": "already_exists"}


def test_errors_without_json_leave_stdout_empty() -> None:
    result = run("harvest", "nope")

    assert_one_line_error(result, "unknown harvester 'nope'", 2)
    assert result.stdout == ""


def test_json_errors_of_a_command_run_on_its_own() -> None:
    """A command used as the top command parses its arguments before any invoke."""
    result = CliRunner().invoke(harvest, ["--json"])

    assert_one_line_error(result, "Missing argument", 2)
    assert json.loads(result.stdout)["type"] == "missing_parameter"


def test_a_json_option_value_is_not_the_json_flag() -> None:
    result = run("records", "list", "--message", "--json")

    assert result.exit_code == 0, result.output
    assert result.stdout == "" and result.stderr.strip() == "no matching harvest records"


# -- F6 and the httpx request lines: stdout holds only the result -----------------------------


@pytest.fixture
def http_log_levels() -> Iterator[None]:
    """The CLI sets the HTTP libraries' log levels; put them back for the other tests."""
    loggers = [logging.getLogger(name) for name in ("httpx", "httpcore")]
    levels = [logger.level for logger in loggers]
    yield
    for logger, level in zip(loggers, levels, strict=True):
        logger.setLevel(level)


def test_harvest_json_is_one_document_and_progress_goes_to_stderr(registered: str) -> None:
    result = run("harvest", registered, "--json", "--progress-every", "1")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # exactly one JSON document, nothing before it
    assert report["errors"] == 0
    assert "records staged" in result.stderr and "records written" in result.stderr


def test_harvest_logs_no_line_per_http_request(
    registered: str, http_log_levels: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)

    result = run("harvest", registered)

    assert result.exit_code == 0, result.output
    http_lines = [r for r in caplog.records if r.name.startswith(("httpx", "httpcore"))]
    assert [r.getMessage() for r in http_lines if r.levelno < logging.WARNING] == []


# -- Command-line bytes that are not UTF-8 ----------------------------------------------------

# `--name $'Z\xfcrich'` typed in a Latin-1 terminal: Python's argv holds a lone surrogate.
NOT_UTF8 = b"Z\xfcrich".decode("utf-8", "surrogateescape")


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        ([*create_args("latin", "http://example.org/oai"), "--name", NOT_UTF8], "'--name'"),
        (["records", "show", f"oai:{NOT_UTF8}"], "'OAI_IDENTIFIER'"),
        (["harvesters", "show", NOT_UTF8, "--json"], "'HARVESTER_ID'"),
        (["records", "list", "--message", NOT_UTF8], "'--message'"),
    ],
)
def test_an_argument_that_is_not_utf8_is_a_one_line_error(args: list[str], hint: str) -> None:
    """Before, the lone surrogate reached the database: a traceback."""
    result = run(*args)

    assert_one_line_error(result, f"{hint}: ", 2)
    assert "Z\ufffdrich' is not UTF-8 text (is the terminal's locale UTF-8?)" in result.stderr
    assert stored_harvester_ids() == []


# -- F7: the base URL's port ------------------------------------------------------------------


def test_a_base_url_with_a_control_character_is_refused_at_registration() -> None:
    result = run(*create_args("control", "http://127.0.0.1/oai\x01"))

    assert_one_line_error(result, "is not a URL a request can go to", 2)
    assert stored_harvester_ids() == []


@pytest.mark.parametrize("port", ["abc", "99999", "0", "-1"])
def test_a_bad_port_is_refused_at_registration(port: str) -> None:
    result = run(*create_args("bad-port", f"http://127.0.0.1:{port}/oai"))

    assert_one_line_error(result, "the port must be a number from 1 to 65535", 2)
    assert stored_harvester_ids() == []


def test_a_good_port_is_accepted() -> None:
    assert run(*create_args("good-port", "http://127.0.0.1:8080/oai")).exit_code == 0


@pytest.mark.parametrize("command", ["harvest", "reconcile"])
def test_a_stored_url_httpx_refuses_is_a_one_line_error(command: str) -> None:
    """Registered before the port check: still listed, and a harvest fails in one line."""
    stored = Harvester.from_stored(
        {
            "id": "old",
            "base_url": "http://127.0.0.1:abc/oai",
            "metadata_prefix": "oai_datacite",
            "transformers": [RDM_MODEL.transformer],
            "writers": [RDM_MODEL.writer],
        }
    )
    store = StateStore(load_settings().state_db_url)
    try:
        store.save_harvester(stored)
    finally:
        store.close()
    assert "old" in run("harvesters", "list").stdout

    result = run(command, "old")

    assert_one_line_error(result, "invalid URL")


# -- F8 and F13: fixture files ----------------------------------------------------------------

GOOD_ENTRY = """\
- id: fx
  base-url: http://example.org/oai
  metadata-prefix: oai_datacite
  model: rdm
"""


def test_a_fixture_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "binary.yaml"
    path.write_bytes(GOOD_ENTRY.encode() + b"  comment: \xff\xfe\n")

    result = run("harvesters", "load", str(path))

    assert_one_line_error(result, f"{path} is not UTF-8 text", 2)
    assert stored_harvester_ids() == []


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('  comment: "a\\ud800b"\n', "invalid comment: 'a\\ud800b' holds a lone surrogate"),
        ('  name: "a\\0b"\n', "invalid name: 'a\\x00b' holds a NUL character"),
        (
            '  harvest-managers: ["ops\\udcff@example.org"]\n',
            "invalid harvest_managers: 'ops\\udcff@example.org' holds a lone surrogate",
        ),
    ],
)
def test_a_fixture_escape_no_database_stores_is_a_one_line_error(
    tmp_path: Path, extra: str, message: str
) -> None:
    """YAML's `\\ud800` and `\\0` escapes: before, a traceback from the database (SQLite
    refuses the surrogate, PostgreSQL the NUL)."""
    path = tmp_path / "harvesters.yaml"
    path.write_text(GOOD_ENTRY + extra, encoding="utf-8")

    result = run("harvesters", "load", str(path))

    assert_one_line_error(result, message, exit_code=2)  # a validation error of the file
    assert stored_harvester_ids() == []


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("  base-url: http://example.org/other\n", "found duplicate key 'base-url'"),
        ("  rate-limit-per-minute: true\n", "rate-limit-per-minute: Input should be a valid"),
        ("  batch-size: false\n", "batch-size: Input should be a valid integer"),
    ],
)
def test_fixture_duplicate_keys_and_booleans_for_integers(
    tmp_path: Path, extra: str, message: str
) -> None:
    path = tmp_path / "harvesters.yaml"
    path.write_text(GOOD_ENTRY + extra, encoding="utf-8")

    result = run("harvesters", "load", str(path))

    assert_one_line_error(result, message, 2)
    assert stored_harvester_ids() == []


def test_fixture_merge_keys_may_still_override(tmp_path: Path) -> None:
    path = tmp_path / "harvesters.yaml"
    path.write_text(
        "harvesters:\n"
        "  - &base {id: a, base-url: 'http://example.org/oai', metadata-prefix: oai_dc, "
        "model: rdm}\n"
        "  - <<: *base\n"
        "    id: b\n",
        encoding="utf-8",
    )

    result = run("harvesters", "load", str(path))

    assert result.exit_code == 0, result.output
    assert stored_harvester_ids() == ["a", "b"]


# -- F11: harvest --use-job -------------------------------------------------------------------


def test_use_job_checks_the_harvester_before_submitting(
    monkeypatch: pytest.MonkeyPatch, closed_port: int
) -> None:
    monkeypatch.setenv("DAGSTER_WEBSERVER_URL", f"http://127.0.0.1:{closed_port}")

    result = run("harvest", "nope", "--use-job")

    assert_one_line_error(result, "unknown harvester 'nope'", 2)


def test_resuming_a_run_that_does_not_exist_asks_nothing_of_the_source(
    registered: str, closed_port: int
) -> None:
    """Before, the source was asked for its Identify first: a source down (here, nothing
    listens) hid the typo behind its retries and its error."""
    update = run(
        "harvesters", "update", registered, "--base-url", f"http://127.0.0.1:{closed_port}/oai"
    )
    assert update.exit_code == 0, update.output

    result = run("harvest", registered, "--resume", "999")

    assert_one_line_error(result, f"no harvest run 999 for harvester {registered!r}", 2)


def test_use_job_with_selected_identifiers_is_refused(registered: str) -> None:
    """They belong to no window: a partitioned run would overwrite windows with them."""
    result = run("harvest", registered, "oai:zenodo.org:1", "--use-job")

    assert_one_line_error(result, "leave out --use-job", 2)


def test_dagster_harvest_options_have_no_identifiers() -> None:
    assert "identifiers" not in HarvestOptions.model_fields


def test_use_job_without_a_webserver(
    registered: str, monkeypatch: pytest.MonkeyPatch, closed_port: int
) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    monkeypatch.setenv("DAGSTER_WEBSERVER_URL", url)

    result = run("harvest", registered, "--use-job")

    assert_one_line_error(result, f"no Dagster webserver at {url}")
    assert len(result.output.strip().splitlines()) == 1
    # The harvester's partition is there before any run names it (a run for a harvester
    # without one would be stored, then never start).
    with dg.DagsterInstance.get() as instance:
        assert instance.get_dynamic_partitions("harvester") == [registered]


def test_use_job_refused_is_one_line(
    registered: str, endpoint: OAIEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that answers but is not Dagster (404 on /graphql)."""
    host_port = endpoint.base_url.split("/")[2]
    monkeypatch.setenv("DAGSTER_WEBSERVER_URL", f"http://{host_port}")

    result = run("harvest", registered, "--use-job")

    assert_one_line_error(result, "Dagster refused the run")
    assert len(result.output.strip().splitlines()) == 1


# -- F14: community slugs ---------------------------------------------------------------------


@pytest.mark.parametrize("slug", ["a b", "a/b", "a|b", "a,b", "Upper", "_x", "", "x" * 256])
def test_community_slugs_follow_the_harvester_id_rule(slug: str) -> None:
    result = run("target", "communities", "create", slug)

    assert_one_line_error(result, "community slug", 2)  # as a bad harvester id is
    assert json.loads(run("target", "communities", "list", "--json").stdout) == []


def test_community_slug_rule_in_the_repository(settings: Settings) -> None:
    repository = EmbeddedRepository(settings.target_db_url)
    try:
        with pytest.raises(ConfigurationError, match="is not a community slug"):
            repository.create_community("a b/c|d")
        assert repository.create_community(" cesnet-data_1 ")["slug"] == "cesnet-data_1"
    finally:
        repository.close()


# -- The target's input: a file or a field wrong in itself is a validation error --------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON: unexpected character"),
        ("", "is not valid JSON: Input is a zero-length, empty document"),
        (b"\xff{}", "is not valid JSON: 'utf-8' codec can't decode"),
        ("[1, 2]", "a record must be a JSON object"),
        (None, "cannot read"),
    ],
)
def test_a_deposit_file_that_is_no_record_is_a_validation_error(
    tmp_path: Path, content: str | bytes | None, message: str
) -> None:
    """The operator's mistake, as a bad harvesters load file is: before, exit 1 (the code of
    a run that failed), so a script could not tell it from the target being down."""
    path = tmp_path / "record.json"
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    elif content is not None:
        path.write_bytes(content)

    result = run("target", "deposit", str(path))

    assert_one_line_error(result, message, 2)
    assert json.loads(run("target", "list", "--json").stdout) == []


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("metadata.title", "--set 'metadata.title': expected FIELD=VALUE"),
        ("=New", "--set '=New': expected FIELD=VALUE"),
        ("metadata..title=New", "'metadata..title' is not a field path"),
        (".title=New", "'.title' is not a field path"),
    ],
)
def test_an_edit_field_that_is_no_field_is_a_validation_error(
    tmp_path: Path, assignment: str, message: str
) -> None:
    path = tmp_path / "record.json"
    path.write_text('{"metadata": {"title": "Old"}}', encoding="utf-8")
    record_id = run("target", "deposit", str(path)).stdout.strip()

    result = run("target", "edit", record_id, "--set", assignment)

    assert_one_line_error(result, message, 2)
    shown = json.loads(run("target", "show", record_id, "--json").stdout)
    assert shown["draft"] == {"metadata": {"title": "Old"}}


# -- F15: conflicting options -----------------------------------------------------------------


def test_records_list_live_and_deleted_together() -> None:
    result = run("records", "list", "--live", "--deleted")

    assert_one_line_error(result, "not both", 2)


@pytest.mark.parametrize(
    "extra",
    [["--since", "2020-01-01"], ["--until", "2030-01-01"], ["oai:example:1"]],
)
def test_resume_with_a_range_or_identifiers(registered: str, extra: list[str]) -> None:
    first = json.loads(run("harvest", registered, "--json").stdout)

    result = run("harvest", registered, "--resume", str(first["run_id"]), *extra)

    assert_one_line_error(result, "--resume continues a run", 2)


# -- F17: harvester id length -----------------------------------------------------------------


def test_harvester_ids_fit_the_state_store_column() -> None:
    result = run(*create_args("a" * 201, "http://example.org/oai"))

    assert_one_line_error(result, "a harvester id has at most 200 characters, not 201", 2)
    assert stored_harvester_ids() == []
    assert run(*create_args("a" * 200, "http://example.org/oai")).exit_code == 0


# -- Settings the machine cannot serve: one line, not a traceback ------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("OAI_PIPELINE_STORAGE_URL", "nosuchfs://bucket/x", "Protocol not known: nosuchfs"),
        ("OAI_PIPELINE_STORAGE_URL", "s3://bucket/x", "Install s3fs"),
        ("OAI_PIPELINE_STORAGE_URL", "s3://key:secret@bucket/x", "'s3://key:***@bucket/x'"),
        ("OAI_PIPELINE_STORAGE_URL", "{file}/storage", "cannot create the storage folder"),
        ("OAI_PIPELINE_STATE_DB_URL", "mysql://user@host/db", "No module named"),
        ("OAI_PIPELINE_TARGET_DB_URL", "mysql://u:secret@host/db", "mysql://u:***@host/db"),
    ],
)
def test_an_unusable_location_is_a_one_line_error(
    registered: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    message: str,
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    monkeypatch.setenv(variable, value.format(file=a_file))

    result = run("harvest", registered, "--json")

    assert_one_line_error(result, message)
    assert "error" in json.loads(result.stdout)
    assert "secret" not in result.output  # a password in a URL is never printed


# A command that opens the state database, and one that opens the target's.
DATABASE_URLS = [
    ("OAI_PIPELINE_STATE_DB_URL", ["harvesters", "list"]),
    ("OAI_PIPELINE_TARGET_DB_URL", ["target", "list"]),
]


@pytest.mark.parametrize("url", ["bogus", "mysql://u@host/db", "sqlite:///{file}/state.sqlite"])
@pytest.mark.parametrize(("variable", "command"), DATABASE_URLS)
def test_an_unusable_database_url_is_the_same_kind_of_error_for_both_databases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, variable: str, command: list[str]
) -> None:
    """Before, the state database's was a pipeline_error, the target's a configuration_error:
    a script had to know which database it was to tell a setting from a failure."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    monkeypatch.setenv(variable, url.format(file=a_file))

    result = run(*command, "--json")

    assert_one_line_error(result, "")
    assert json.loads(result.stdout)["type"] == "configuration_error"


@pytest.mark.parametrize(("variable", "command"), DATABASE_URLS)
def test_a_plain_postgresql_url_says_which_driver_is_installed(
    monkeypatch: pytest.MonkeyPatch, variable: str, command: list[str]
) -> None:
    """SQLAlchemy 2.1 reads postgresql:// as psycopg 3, which is not installed: before, the
    error said only "No module named 'psycopg'", as if it should be installed."""
    monkeypatch.setenv(variable, "postgresql://u:secret@127.0.0.1:1/db")

    result = run(*command, "--json")

    assert_one_line_error(result, "driver installed is psycopg2: postgresql+psycopg2://")
    assert "secret" not in result.output


@pytest.mark.parametrize(("variable", "command"), DATABASE_URLS)
def test_an_unreachable_postgresql_server_is_one_plain_line(
    monkeypatch: pytest.MonkeyPatch, closed_port: int, variable: str, command: list[str]
) -> None:
    """libpq's message spans lines indented with a tab: the state database's error kept the
    tab and a trailing space, in the JSON too. Each names which database it could not open
    (the target's named none), without its password."""
    monkeypatch.setenv(variable, f"postgresql+psycopg2://u:secret@127.0.0.1:{closed_port}/db")

    result = run(*command, "--json")

    assert_one_line_error(result, "Connection refused Is the server running on that host")
    error = json.loads(result.stdout)["error"]
    assert error == " ".join(error.split())
    assert f"database postgresql+psycopg2://u:***@127.0.0.1:{closed_port}/db: " in error


def test_a_full_disk_during_a_harvest_is_a_one_line_error(
    registered: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(self: object, folder: str, name: str, data: object) -> None:
        raise OSError(28, "No space left on device", f"{folder}/{name}")

    monkeypatch.setattr("oai_pipeline.storage.PartitionStore._write_local", full)

    result = run("harvest", registered)

    assert_one_line_error(result, "No space left on device: ")
    assert "failed" in run("status").stdout  # the run is recorded as failed, to resume


# -- A harvester needs a transformer and a writer ----------------------------------------------


def test_a_harvester_without_model_gets_the_default_one() -> None:
    result = run(
        "harvesters", "create", "--id", "plain", "--base-url", "http://example.org/oai",
        "--metadata-prefix", "oai_dc", "--json",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    created = json.loads(result.stdout)
    assert (created["transformers"], created["writers"]) == (
        [RDM_MODEL.transformer],
        [RDM_MODEL.writer],
    )


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        (["--transformer", RDM_MODEL.transformer], "writer"),
        (["--writer", RDM_MODEL.writer], "transformer"),
    ],
)
def test_a_harvester_with_half_a_chain_is_refused(given: list[str], missing: str) -> None:
    result = run(
        "harvesters", "create", "--id", "half", "--base-url", "http://example.org/oai",
        "--metadata-prefix", "oai_dc", *given,
    )  # fmt: skip

    # named as the flag to give (was the model's field: `writers: a harvester needs …`)
    assert_one_line_error(result, f"--{missing}: a harvester needs {missing}s", 2)
    assert stored_harvester_ids() == []


def test_a_stored_harvester_without_writer_fails_its_run_clearly(endpoint: OAIEndpoint) -> None:
    """Registered before writers were required: listed, and its run says what is missing."""
    stored = Harvester.from_stored(
        {
            "id": "nowriter",
            "base_url": endpoint.base_url,
            "metadata_prefix": "oai_datacite",
            "transformers": [RDM_MODEL.transformer],
        }
    )
    store = StateStore(load_settings().state_db_url)
    try:
        store.save_harvester(stored)
    finally:
        store.close()

    result = run("harvest", "nowriter")

    assert_one_line_error(result, "harvester nowriter has no writer")
    assert "harvesters update nowriter --model rdm" in result.stderr
    assert run("harvesters", "update", "nowriter", "--model", "rdm").exit_code == 0
    assert run("harvest", "nowriter").exit_code == 0


# -- Databases that are not what they should be -----------------------------------------------


@pytest.mark.parametrize(
    ("file", "args"),
    [("state.sqlite", ["harvesters", "list"]), ("target.sqlite", ["target", "list"])],
)
def test_a_corrupt_database_file_is_a_one_line_error(
    settings: Settings, file: str, args: list[str]
) -> None:
    (settings.home / file).write_bytes(b"SQLite format 3\0" + b"garbage" * 1000)

    result = run(*args, "--json")

    assert_one_line_error(result, "file is not a database")
    assert json.loads(result.stdout)["type"] == "pipeline_error"


def test_a_target_database_of_a_newer_version_is_refused(settings: Settings) -> None:
    """Its tables may not be the ones this code writes: written to, it could be damaged."""
    from oai_pipeline.targets.embedded.schema import SCHEMA_VERSION, schema_version

    repository = EmbeddedRepository(settings.target_db_url)
    with repository.engine.begin() as connection:
        connection.execute(schema_version.update().values(version=SCHEMA_VERSION + 1))
    repository.close()

    result = run("target", "list", "--json")

    assert_one_line_error(result, f"schema version {SCHEMA_VERSION + 1}, newer than this")
    assert json.loads(result.stdout)["type"] == "configuration_error"


# -- --since/--until at the ends of the calendar ----------------------------------------------


def test_since_the_year_one_is_sent_with_four_digits(registered: str) -> None:
    """Some sources' earliestDatestamp is 0001-01-01; `from=1-01-01` was a badArgument."""
    result = run("harvest", registered, "--since", "0001-01-01", "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["created"] == 8


@pytest.mark.parametrize(
    "args",
    [
        ["--until", "0001-01-01"],
        ["--until", "0001-01-01T12:00:00Z"],
        ["--until", "9999-12-31T12:00:00Z", "--use-job"],
    ],
)
def test_moments_at_the_ends_of_the_calendar(registered: str, args: list[str]) -> None:
    result = run("harvest", registered, *args, "--json")

    assert_one_line_error(result, "is out of range (0001-0", 2)
    assert "to 9999-12-30)" in result.stderr
    assert json.loads(result.stdout)["type"] == "validation_error"


@pytest.mark.parametrize(
    "args",
    [["--since", "0001-01-01T00:00:00+01:00"], ["--until", "9999-12-31T23:00:00-05:00"]],
)
def test_an_offset_beyond_the_calendar_in_utc_is_one_line(registered: str, args: list[str]) -> None:
    """Before, converting the moment to UTC raised OverflowError: a traceback."""
    result = run("harvest", registered, *args, "--json")

    assert_one_line_error(result, f"{args[0]}: out of range in UTC: {args[1]!r}", 2)
    assert json.loads(result.stdout)["type"] == "validation_error"


# -- Interrupts: the run is stopped, not left running ------------------------------------------


@pytest.mark.parametrize(
    ("stage", "raised", "status"),
    [
        ("transform", KeyboardInterrupt(), "stopped"),
        ("plan", KeyboardInterrupt(), "stopped"),
        ("transform", OSError(28, "No space left on device"), "failed"),
    ],
)
def test_a_run_stopped_between_discovery_and_writing_is_marked(
    registered: str, monkeypatch: pytest.MonkeyPatch, stage: str, raised: BaseException, status: str
) -> None:
    """Ctrl-C or a failure in the transform or plan stage left the run `running` for ever."""

    def stop(*args: object) -> None:
        raise raised

    with monkeypatch.context() as patch:
        patch.setattr(f"oai_pipeline.pipeline.runner.{stage}", stop)
        run("harvest", registered)

    assert json.loads(run("status", "--json").stdout)["run"]["status"] == status
    resumed = json.loads(run("harvest", registered, "--json").stdout)
    assert (resumed["run_id"], resumed["created"]) == (1, 8)


def test_ctrl_c_is_a_json_error_too(registered: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, click's `Aborted!` (exit 1) left stdout empty under --json."""

    def interrupt(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("oai_pipeline.pipeline.runner.write", interrupt)

    result = run("harvest", registered, "--json")

    assert_one_line_error(result, "interrupted", 130)
    assert json.loads(result.stdout) == {"error": "interrupted", "type": "interrupted"}


@pytest.mark.parametrize(
    ("args", "stdout"),
    [
        (["harvesters", "list"], ""),
        (["harvesters", "list", "--json"], '{"error": "interrupted", "type": "interrupted"}\n'),
        (["records", "list", "--message", "--", "--json"], ""),  # `--json` after `--` is a value
    ],
)
def test_ctrl_c_while_the_command_line_loads(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    stdout: str,
) -> None:
    """Loading the commands takes seconds: a Ctrl-C then was a traceback of the import."""
    from oai_pipeline import console

    def interrupted(name: str) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(console, "import_module", interrupted)
    monkeypatch.setattr("sys.argv", ["oai-pipeline", *args])

    with pytest.raises(SystemExit) as stopped:
        console.main()

    assert stopped.value.code == 130
    assert capsys.readouterr() == (stdout, "Error: interrupted\n")


CTRL_C_IN_A_ROLLBACK = """
import sqlalchemy as sa
from oai_pipeline.cli.output import setup_cli_logging

setup_cli_logging()
engine = sa.create_engine("sqlite://")
connection = engine.connect()


@sa.event.listens_for(engine, "reset")
def pressed(dbapi_connection, record, reset_state):
    raise KeyboardInterrupt


try:
    connection.close()
except KeyboardInterrupt:
    print("interrupted")
engine.dispose()
"""


def test_ctrl_c_in_a_connection_rollback_is_not_a_traceback() -> None:
    """SQLAlchemy's pool logs the interrupted rollback of a connection going back to it,
    with a traceback, before raising it on; the command then said `Error: interrupted`
    under a traceback."""
    result = subprocess.run(
        [sys.executable, "-c", CTRL_C_IN_A_ROLLBACK], capture_output=True, text=True, timeout=60
    )

    assert (result.returncode, result.stdout, result.stderr) == (0, "interrupted\n", "")


def test_the_console_script_loads_the_command_line_through_the_guard() -> None:
    from importlib.metadata import entry_points

    (script,) = entry_points(group="console_scripts", name="oai-pipeline")
    assert script.value == "oai_pipeline.console:main"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_json_on_a_full_disk_is_one_line_on_stderr() -> None:
    """Before, the error's JSON, written to the stdout that had just failed, failed again:
    a traceback after the error line."""
    with open("/dev/full", "wb") as full:
        result = subprocess.run(
            [CLI, "harvesters", "list", "--json"], stdout=full, stderr=subprocess.PIPE, text=True
        )

    assert result.returncode == 1
    assert result.stderr == "Error: [Errno 28] No space left on device\n"


@pytest.fixture
def sigterm_unhandled() -> Iterator[None]:
    """SIGTERM as a RuntimeError unless the command handles it (its default kills pytest)."""

    def unhandled(signum: int, frame: object) -> None:
        raise RuntimeError("SIGTERM was not handled")

    previous = signal.signal(signal.SIGTERM, unhandled)
    yield
    assert signal.getsignal(signal.SIGTERM) is unhandled  # the command put it back
    signal.signal(signal.SIGTERM, previous)


def test_sigterm_stops_a_harvest_like_ctrl_c(
    registered: str, monkeypatch: pytest.MonkeyPatch, sigterm_unhandled: None
) -> None:
    """Before, `kill` ended the process at once and left its run `running`."""

    def terminate(*args: object) -> None:
        signal.raise_signal(signal.SIGTERM)

    with monkeypatch.context() as patch:
        patch.setattr("oai_pipeline.pipeline.runner.transform", terminate)
        result = run("harvest", registered, "--json")

    assert_one_line_error(result, "terminated", 143)
    assert json.loads(result.stdout) == {"error": "terminated", "type": "terminated"}
    assert json.loads(run("status", "--json").stdout)["run"]["status"] == "stopped"
    assert json.loads(run("harvest", registered, "--json").stdout)["created"] == 8


def test_sigterm_a_library_turned_into_its_own_error_still_stops_the_harvest(
    registered: str, monkeypatch: pytest.MonkeyPatch, sigterm_unhandled: None
) -> None:
    """SIGTERM landing while polars called back into Python: polars swallowed the
    interrupt and raised a TypeError of its own; the harvest ended with a traceback and exit
    1, not as terminated."""

    def terminate(*args: object) -> None:
        try:
            signal.raise_signal(signal.SIGTERM)
        except KeyboardInterrupt:
            raise TypeError("'<unprintable str object>' is not a Polars data type") from None

    with monkeypatch.context() as patch:
        patch.setattr("oai_pipeline.pipeline.runner.transform", terminate)
        result = run("harvest", registered, "--json")

    assert_one_line_error(result, "terminated", 143)
    assert json.loads(result.stdout) == {"error": "terminated", "type": "terminated"}
    assert json.loads(run("harvest", registered, "--json").stdout)["created"] == 8


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("run_storage: [", "while parsing a flow node"),
        ("bogus_key: 1", 'Received unexpected config entry "bogus_key" at the root.'),
        ("run_storage: {module: nope, class: X}", "Couldn't import module nope"),
    ],
)
def test_a_dagster_yaml_that_does_not_load_is_a_one_line_error(
    registered: str, config: str, message: str
) -> None:
    home = Path(os.environ["DAGSTER_HOME"])
    (home / "dagster.yaml").write_text(config + "\n", encoding="utf-8")

    result = run("harvest", registered, "--use-job", "--json")

    assert_one_line_error(result, f"cannot open the Dagster instance in {home}: ")
    assert message in json.loads(result.stdout)["error"]


# -- Whole numbers beyond what a database column holds -----------------------------------------

HUGE = str(2**64)


@pytest.mark.parametrize(
    "args",
    [
        ["status", "--batch-id", HUGE],
        ["status", "--list-recent", "--limit", HUGE],
        ["status", "--stale-minutes", HUGE],
        ["records", "list", "--limit", HUGE],
        ["harvest", "sample", "--resume", HUGE],
        ["harvest", "sample", "--reset-stale-running-minutes", HUGE],
        ["harvesters", "update", "sample", "--rate-limit-per-minute", HUGE],
        [*create_args("big", "http://example.org/oai"), "--rate-limit-per-minute", HUGE],
    ],
)
def test_a_number_too_large_for_the_database_is_a_usage_error(
    registered: str, args: list[str]
) -> None:
    """Before, an OverflowError or sqlalchemy StatementError traceback."""
    result = run(*args, "--json")

    assert_one_line_error(result, "9223372036854775807", 2)
    assert json.loads(result.stdout)["type"] in ("bad_parameter", "validation_error")
    assert stored_harvester_ids() == [registered]


@pytest.mark.parametrize("cap", [2**31, 2**64])
def test_a_cap_beyond_what_postgresql_keeps_is_a_usage_error(
    backend: str, registered: str, cap: int
) -> None:
    """A run's cap is kept in a 32-bit column on PostgreSQL: before, 2**31 passed the check
    against SQLite's limit and failed the harvest with the database's 'integer out of range'
    (SQLite took it)."""
    result = run("harvest", registered, "--max-records", str(cap), "--json")

    assert_one_line_error(result, "invalid --max-records: ", 2)
    assert "2147483647" in result.stderr
    assert "no harvest runs yet" in run("status").stderr


def test_the_largest_cap_postgresql_keeps_is_taken(backend: str, registered: str) -> None:
    result = run("harvest", registered, "--max-records", str(2**31 - 1), "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(run("status", "--json").stdout)["run"]["max_records"] == 2**31 - 1


def test_the_largest_number_of_minutes_is_no_overflow(registered: str) -> None:
    """Longer ago than the calendar goes: nothing is that stale."""
    largest = str(2**63 - 1)
    assert run("harvest", registered, "--reset-stale-running-minutes", largest).exit_code == 0

    result = run("status", "--stale-minutes", largest, "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["stale_running"] == 0


# -- Input nested deeper than the parsers recurse ----------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("file", "content", "command", "message", "exit_code"),
    [
        ("h.yaml", f"- {DEEP}\n", ["harvesters", "load"], "nests too deeply", 2),
        ("record.json", DEEP, ["target", "deposit"], "is not valid JSON: depth limit exceeded", 2),
    ],
)
def test_a_deeply_nested_file_is_a_one_line_error(
    tmp_path: Path, file: str, content: str, command: list[str], message: str, exit_code: int
) -> None:
    """Before, a RecursionError traceback."""
    path = tmp_path / file
    path.write_text(content, encoding="utf-8")

    result = run(*command, str(path))

    assert_one_line_error(result, message, exit_code)
    assert stored_harvester_ids() == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"metadata": {"title": "x\\ud800"}}', "no low surrogate in string"),
        ('{"metadata": {"size": 1e999}}', "number is infinity"),
    ],
)
def test_a_deposit_the_target_cannot_store_is_a_one_line_error(
    tmp_path: Path, content: str, message: str
) -> None:
    """JSON the target's codec cannot write: a lone surrogate was a traceback from the
    database, an infinite number was stored as null."""
    path = tmp_path / "record.json"
    path.write_text(content, encoding="utf-8")

    result = run("target", "deposit", str(path))

    assert_one_line_error(result, f"is not valid JSON: {message}", 2)
    assert json.loads(run("target", "list", "--json").stdout) == []


LONG_DOI = "10.1234/" + "a" * 600


@pytest.mark.parametrize(
    ("record", "message", "exit_code"),
    [
        (
            {"pids": {"doi": {"identifier": LONG_DOI}}},
            "pids.doi: a DOI has at most 512 characters, not 608",
            2,
        ),
        ({"pids": {"doi": "10.1234/a\0b"}}, "pids.doi: '10.1234/a\\x00b' holds a NUL", 2),
        ({"parent": {"communities": {"ids": ["a\0b"]}}}, "community 'a\\x00b' does not", 2),
    ],
)
def test_a_deposit_postgresql_refuses_is_a_one_line_error(
    backend: str, tmp_path: Path, record: dict, message: str, exit_code: int
) -> None:
    """Before, on PostgreSQL, a traceback from the database (value too long for the DOI
    column; a NUL character in a query); SQLite stored the DOI."""
    path = tmp_path / "record.json"
    path.write_text(json.dumps({"metadata": {"title": "T"}} | record), encoding="utf-8")

    result = run("target", "deposit", str(path), "--publish")

    assert_one_line_error(result, message, exit_code)
    assert json.loads(run("target", "list", "--json").stdout) == []


@pytest.mark.parametrize(
    ("doi", "message"),
    [
        (LONG_DOI, "pids.doi: a DOI has at most 512 characters, not 608"),
        ('"10.1234/a\\u0000b"', "pids.doi: '10.1234/a\\x00b' holds a NUL"),
    ],
)
def test_an_edit_to_a_doi_postgresql_refuses_is_a_one_line_error(
    backend: str, tmp_path: Path, doi: str, message: str
) -> None:
    path = tmp_path / "record.json"
    path.write_text('{"metadata": {"title": "Old"}}', encoding="utf-8")
    record_id = run("target", "deposit", str(path), "--publish").stdout.strip()

    result = run("target", "edit", record_id, "--set", f"pids.doi={doi}")

    assert_one_line_error(result, message, 2)
    shown = json.loads(run("target", "show", record_id, "--json").stdout)
    assert shown["draft"] is None


def test_an_edit_value_the_target_cannot_store_as_json_is_a_plain_string(tmp_path: Path) -> None:
    """Before, `"x\\ud800"` parsed as JSON to a lone surrogate: a traceback from the database."""
    path = tmp_path / "record.json"
    path.write_text('{"metadata": {"title": "Old"}}', encoding="utf-8")
    record_id = run("target", "deposit", str(path)).stdout.strip()

    result = run("target", "edit", record_id, "--set", 'metadata.title="x\\ud800"')

    assert result.exit_code == 0, result.output
    shown = json.loads(run("target", "show", record_id, "--json").stdout)
    assert shown["draft"]["metadata"]["title"] == '"x\\ud800"'


def test_deeply_nested_plugin_options_are_a_validation_error() -> None:
    deep = "[" * 5_000 + "]" * 5_000
    result = run(
        *create_args("deep", "http://example.org/oai"), "--transformer", f"oai-import{{a:{deep}}}"
    )

    assert_one_line_error(result, "options of 'oai-import' do not parse as JSON5", 2)
    assert stored_harvester_ids() == []


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        (["harvestrs", "list", "--json"], "no_such_command"),
        (["harvesters", "lst", "--json"], "no_such_command"),
        (["target", "communities", "lst", "--json"], "no_such_command"),
        (["harvesters", "--json"], "no_such_option"),
        (["target", "deposit", "record.json", "--json"], "no_such_option"),
    ],
)
def test_json_errors_of_a_command_that_does_not_exist_or_has_no_json(
    args: list[str], kind: str
) -> None:
    """A typo in a script's command: before, no JSON on stdout (no command to own --json)."""
    result = run(*args)

    assert result.exit_code == 2, result.output
    assert json.loads(result.stdout)["type"] == kind


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_oai_identifier_is_refused(registered: str, blank: str) -> None:
    """Before: '' failed the run with the source's badArgument, '  ' became a harvest record."""
    result = run("harvest", registered, "oai:sample.oai-pipeline:dataset", blank, "--json")

    assert_one_line_error(result, "identifiers: an OAI identifier must not be blank", 2)
    assert json.loads(run("records", "list", "--json").stdout) == []
    assert "no harvest runs yet" in run("status").stderr


def test_an_oai_identifier_longer_than_the_state_store_keeps_is_refused(
    backend: str, registered: str
) -> None:
    """Before, the source's idDoesNotExist for it was staged under it: PostgreSQL refused the
    value (a DataError traceback, the run failed), SQLite kept it."""
    too_long = "oai:sample.oai-pipeline:" + "x" * 1000

    result = run("harvest", registered, "oai:sample.oai-pipeline:dataset", too_long, "--json")

    assert_one_line_error(result, "an OAI identifier has at most 1000 characters, not 1024", 2)
    assert json.loads(run("records", "list", "--json").stdout) == []
    assert "no harvest runs yet" in run("status").stderr


# -- harvest --use-job beyond today -----------------------------------------------------------


class _RecordingClient:
    """A Dagster GraphQL client that takes every run and remembers its tags; asked how the
    run stands, it answers `statuses` one after the other."""

    submitted: list[dict[str, str]] = []
    statuses: list[str] = []

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def submit_job_execution(self, job_name: str, **kwargs: object) -> str:
        self.submitted.append(kwargs["tags"])  # type: ignore[arg-type]
        return "run-1"

    def get_run_status(self, run_id: str) -> dg.DagsterRunStatus:
        assert run_id == "run-1"
        status = self.statuses.pop(0)
        if status == "ctrl-c":
            raise KeyboardInterrupt
        if status == "gone":  # the webserver stopped: how dagster-graphql says it
            from dagster_graphql import DagsterGraphQLClientError

            raise DagsterGraphQLClientError("refused") from ConnectionRefusedError(111, "no")
        return dg.DagsterRunStatus(status)


@pytest.fixture
def recording_client(monkeypatch: pytest.MonkeyPatch) -> type[_RecordingClient]:
    monkeypatch.setattr("dagster_graphql.DagsterGraphQLClient", _RecordingClient)
    monkeypatch.setattr(_RecordingClient, "submitted", [])
    monkeypatch.setattr(_RecordingClient, "statuses", [])
    monkeypatch.setattr("oai_pipeline.cli.submit.POLL_SECONDS", 0)
    return _RecordingClient


def _harvest_run_of_dagster_run(harvester_id: str, error: str | None) -> int:
    """The harvest run the Dagster run `run-1` worked on, succeeded or failed with `error`."""
    run_id = run_left_running(harvester_id, dagster_run_id="run-1")
    with StateStore(load_settings().state_db_url) as state:
        state.finish_run(run_id, "failed" if error else "succeeded", error)
    return run_id


def test_use_job_wait_follows_the_run_to_its_end(
    registered: str, recording_client: type[_RecordingClient]
) -> None:
    """Before, --use-job printed the submitted run and ended: a cron job or script could not
    learn whether the harvest it asked for succeeded."""
    harvest_run = _harvest_run_of_dagster_run(registered, None)
    recording_client.statuses = ["QUEUED", "QUEUED", "STARTED", "SUCCESS"]

    result = run("harvest", registered, "--use-job", "--wait", "--json")

    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["status"] == "SUCCESS"
    assert [r["id"] for r in payload["harvest_runs"]] == [harvest_run]
    assert payload["harvest_runs"][0]["status"] == "succeeded"
    # each status once, on stderr, as it changes
    assert [line for line in result.stderr.splitlines() if line.startswith("Dagster run")] == [
        "Dagster run run-1: QUEUED",
        "Dagster run run-1: STARTED",
        "Dagster run run-1: SUCCESS",
    ]
    assert recording_client.statuses == []


@pytest.mark.parametrize("status", ["FAILURE", "CANCELED"])
def test_use_job_wait_exits_1_naming_the_harvest_runs_error(
    registered: str, recording_client: type[_RecordingClient], status: str
) -> None:
    harvest_run = _harvest_run_of_dagster_run(registered, "HarvestProtocolError: HTTP 500")
    recording_client.statuses = ["STARTED", status]

    result = run("harvest", registered, "--use-job", "--wait")

    assert_one_line_error(
        result,
        f"Dagster run run-1 ended {status}: harvest run {harvest_run}: HarvestProtocolError: "
        "HTTP 500 (see http://127.0.0.1:3000/runs/run-1)",
    )


def test_use_job_wait_stopped_says_the_run_goes_on(
    registered: str, recording_client: type[_RecordingClient]
) -> None:
    recording_client.statuses = ["STARTED", "ctrl-c"]
    interrupted = run("harvest", registered, "--use-job", "--wait")
    recording_client.statuses = ["STARTED", "gone"]
    lost = run("harvest", registered, "--use-job", "--wait")

    assert interrupted.exit_code == 130, interrupted.output
    assert (
        "stopped waiting; Dagster run run-1 goes on: see http://127.0.0.1:3000/runs/run-1"
        in interrupted.stderr
    )
    assert_one_line_error(
        lost,
        "lost the Dagster webserver at http://127.0.0.1:3000 while waiting for run run-1 "
        "(ConnectionRefusedError); the run goes on: see http://127.0.0.1:3000/runs/run-1",
    )


def test_wait_without_use_job_is_a_usage_error(registered: str) -> None:
    result = run("harvest", registered, "--wait")

    assert result.exit_code == 2, result.output
    assert "--wait follows a Dagster run: add --use-job" in result.stderr


def test_use_job_until_the_future_ends_with_todays_window(
    registered: str, recording_client: type[_RecordingClient]
) -> None:
    """Before, the run's range went on to 2099: windows that are no partition of the grid,
    materialised (empty) before their day."""
    from oai_pipeline.defs.partitions import window_partitions

    today = window_partitions.get_last_partition_key()

    result = run("harvest", registered, "--until", "2099-01-01", "--use-job", "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["windows"] == ["2024-01-01", today]
    assert recording_client.submitted[0]["dagster/asset_partition_range_end"].endswith(today)
    # the run says what asked for it, as a schedule's does (the Runs page filters by it)
    assert recording_client.submitted[0]["oai_pipeline/trigger"] == "cli"


def test_use_job_with_hours_says_the_run_harvests_whole_windows(
    registered: str, recording_client: type[_RecordingClient]
) -> None:
    """A Dagster run's partitions are whole windows: hours given to --use-job were widened to
    the day without a word (a harvest in this process keeps to them)."""
    hours = ["--since", "2024-03-05T10:00:00Z", "--until", "2024-03-05T12:00:00Z"]

    result = run("harvest", registered, *hours, "--use-job")
    as_json = run("harvest", registered, *hours, "--use-job", "--json")
    whole_days = run(
        "harvest", registered, "--since", "2024-03-05", "--until", "2024-03-07", "--use-job"
    )

    assert result.exit_code == 0, result.output
    assert "note: the Dagster run harvests whole windows of the grid: 2024-03-05 .. 2024-03-05" in (
        result.stderr
    )
    assert "note" in json.loads(as_json.stdout)
    assert whole_days.exit_code == 0 and "note" not in whole_days.stderr
    assert len(recording_client.submitted) == 3


def test_use_job_of_a_disabled_harvester_says_it_is_disabled(
    registered: str, recording_client: type[_RecordingClient]
) -> None:
    """Before, the run was handed to Dagster without a word that no schedule harvests it."""
    assert run("harvesters", "update", registered, "--disabled").exit_code == 0

    result = run("harvest", registered, "--use-job")
    as_json = run("harvest", registered, "--use-job", "--json")

    note = f"harvester {registered} is disabled: schedules and sensors skip it"
    assert result.exit_code == 0, result.output
    assert f"note: {note}" in result.stderr
    [warning] = json.loads(as_json.stdout)["warnings"]
    assert warning.startswith(note)
    assert len(recording_client.submitted) == 2


def test_use_job_since_the_future_is_refused(
    registered: str, recording_client: type[_RecordingClient]
) -> None:
    result = run("harvest", registered, "--since", "2099-01-01", "--use-job", "--json")

    assert_one_line_error(result, "nothing to harvest yet")
    assert recording_client.submitted == []


@pytest.mark.parametrize("contact", ["jöe@example.org", "ops@example.org\nX-Evil: 1"])
def test_a_contact_no_http_header_can_carry_is_a_one_line_error(
    registered: str, monkeypatch: pytest.MonkeyPatch, contact: str
) -> None:
    """Before: a UnicodeEncodeError traceback, or every request refused and retried for ~1
    minute as if the source were down."""
    monkeypatch.setenv("OAI_PIPELINE_CONTACT", contact)

    result = run("harvest", registered, "--json")

    assert_one_line_error(result, "printable ASCII only (OAI_PIPELINE_CONTACT")
    assert json.loads(result.stdout)["type"] == "configuration_error"


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:99999"])
def test_a_webserver_url_that_is_not_a_url(
    registered: str, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """Before: a ValueError traceback, or `no Dagster webserver at …` for a bad port."""
    monkeypatch.setenv("DAGSTER_WEBSERVER_URL", url)

    result = run("harvest", registered, "--use-job", "--json")

    assert_one_line_error(result, f"DAGSTER_WEBSERVER_URL {url!r} is not a URL")


@pytest.mark.parametrize("cap", [["--max-records", "100"], ["--scale", "small"]])
def test_resume_with_another_cap(registered: str, cap: list[str]) -> None:
    """Before, the run's own cap silently won: the cap given was ignored."""
    first = json.loads(run("harvest", registered, "--max-records", "2", "--json").stdout)

    result = run("harvest", registered, "--resume", str(first["run_id"]), *cap)

    assert_one_line_error(result, "--resume continues a run with its own cap", 2)


@pytest.mark.parametrize("option", ["timeout: 1e10", "max_retry_wait: 1e300"])
def test_a_reader_wait_beyond_a_day_is_refused_at_registration(option: str) -> None:
    """Before, accepted; the harvest then failed with an OverflowError traceback."""
    result = run(*create_args("slow", "http://example.org/oai"), "--loader", f"oai-pmh{{{option}}}")

    assert_one_line_error(result, "Input should be less than or equal to 86400", 2)
    assert stored_harvester_ids() == []


@pytest.mark.parametrize(
    ("writer", "message"),
    [
        ('oai-service{pid_field: ""}', "'' is not a field path like pids.doi"),
        ('oai-service{pid_field: "pids..doi"}', "'pids..doi' is not a field path"),
        ('oai-service{community: ""}', "'' is not a community slug"),
        ('oai-service{community: "My Community"}', "'My Community' is not a community slug"),
    ],
)
def test_writer_options_no_record_could_follow_are_refused(writer: str, message: str) -> None:
    """Before, accepted: a pid_field that is no path found no pid in any record (no takeover,
    the same record created again by another harvester), a community no slug could name
    failed every record."""
    args = [*create_args("w", "http://example.org/oai")[:-2], "--transformer", "oai-import"]

    result = run(*args, "--writer", writer)

    assert_one_line_error(result, message, 2)
    assert stored_harvester_ids() == []


@pytest.mark.parametrize("slug", ["", "My Community"])
def test_a_set_community_no_slug_can_name_is_refused(slug: str) -> None:
    """Before, accepted: every record of the set failed with missing_community."""
    transformer = f'oai-import{{set_communities: {{"user-x": "{slug}"}}}}'
    args = [*create_args("t", "http://example.org/oai")[:-2], "--writer", "oai-service"]

    result = run(*args, "--transformer", transformer)

    assert_one_line_error(result, f"{slug!r} is not a community slug", 2)
    assert stored_harvester_ids() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-records", "-1"], "invalid --max-records: Input should be greater than or equal"),
        (["--progress-every", "0"], "invalid --progress-every: Input should be greater than 0"),
        (["--rate-limit-per-minute", "0"], "invalid --rate-limit-per-minute:"),
        # was `invalid input: give either a scale or max_records, not both`
        (["--scale", "small", "--max-records", "3"], "give either --scale or --max-records"),
    ],
)
def test_a_bad_harvest_option_is_named_as_the_option(
    registered: str, args: list[str], message: str
) -> None:
    """Before, the run option's field: `invalid max_records: …`."""
    result = run("harvest", registered, *args, "--json")

    assert_one_line_error(result, message, 2)
    assert json.loads(result.stdout)["type"] == "validation_error"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["create", "--id", "nourl"], "invalid --base-url: Field required; --metadata-prefix:"),
        (["create", "--id", "Bad id", "--base-url", "http://x/oai", "--metadata-prefix", "p"],
         "invalid --id: 'Bad id' is not a harvester id"),
        (["update", "h", "--batch-size", "0"], "invalid --batch-size: must be between"),
        (["update", "h", "--writer", "s3"], "invalid --writer: unknown writer 's3'"),
        (["update", "h", "--harvest-manager", "a\0b"], "invalid --harvest-manager: 'a\\x00b'"),
    ],
)  # fmt: skip
def test_harvester_errors_name_the_options_given(args: list[str], message: str) -> None:
    """Before, `harvesters create` and `update` named the model's fields (`invalid base_url:
    Field required`, `invalid batch_size: …`), not the flags the user typed, as `harvest` does."""
    assert run(*create_args("h", "http://example.org/oai")).exit_code == 0

    assert_one_line_error(run("harvesters", *args), message, exit_code=2)


@pytest.mark.parametrize(
    ("args", "note"),
    [
        (["harvesters", "list"], "no harvesters registered"),
        (["records", "list"], "no matching harvest records"),
        (["status", "--list-recent"], "no harvest runs yet"),
        (["target", "list"], "no records"),
        (["target", "communities", "list"], "no communities"),
    ],
)
def test_an_empty_listing_prints_no_row(args: list[str], note: str) -> None:
    """Before, the note went to stdout, where `… | cut -f1` read it as a row."""
    result = run(*args)

    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert result.stderr.strip() == note


# -- A harvester's metadata prefix the source lacks: the error names the ones it has ----------


@pytest.mark.parametrize("as_json", [False, True])
def test_a_metadata_prefix_the_source_lacks_names_those_it_offers(
    endpoint: OAIEndpoint, as_json: bool
) -> None:
    """Before, the error was the source's own `unknown metadataPrefix 'marc21x'` alone: the
    operator had to ask ListMetadataFormats by hand to find what to set instead."""
    args = create_args("sample", endpoint.base_url)
    args[args.index("oai_datacite")] = "marc21x"
    assert run(*args).exit_code == 0

    result = run("harvest", "sample", *(["--json"] if as_json else []))

    said = "the source offers oai_dc, oai_datacite, datacite: set one as the harvester's"
    assert_one_line_error(result, said)
    assert "--metadata-prefix" in result.stderr
    if as_json:
        error = json.loads(result.stdout)
        assert said in error["error"] and error["type"] == "unknown_metadata_format"


# -- status of a harvester: a typo in its id is not "no harvest runs yet" --------------------


def test_status_of_an_unknown_harvester_says_so(registered: str) -> None:
    """Before, `status --harvester samlpe` said "harvester 'samlpe' has no harvest runs yet",
    as if it were registered and only waiting for its first harvest."""
    assert_one_line_error(
        run("status", "--harvester", "samlpe"), "unknown harvester 'samlpe'", exit_code=2
    )
    assert_one_line_error(run("status", "--harvester", registered), "has no harvest runs yet")


@pytest.mark.parametrize(
    "listing",
    [
        ["records", "list"],
        ["status", "--list-recent"],
        ["target", "list"],
    ],
)
def test_a_listing_of_an_unknown_harvester_says_so(registered: str, listing: list[str]) -> None:
    """Before, `records list --harvester samlpe` (and the others) said "no matching harvest
    records" and exited 0: a typo read as a harvester with nothing to show."""
    assert run(*listing, "--harvester", registered).exit_code == 0  # registered, not harvested

    result = run(*listing, "--harvester", "samlpe", "--json")

    assert_one_line_error(result, "unknown harvester 'samlpe'", exit_code=2)
    assert json.loads(result.stdout)["type"] == "not_found"


def test_status_of_a_run_that_failed_on_its_first_page_prints_no_none(
    endpoint: OAIEndpoint,
) -> None:
    """Before, its discovery line read `cursor None, …, responseDate None`."""
    args = create_args("sample", endpoint.base_url)
    args[args.index("oai_datacite")] = "marc21x"
    assert run(*args).exit_code == 0
    assert run("harvest", "sample").exit_code == 1

    result = run("status", "--harvester", "sample")

    assert result.exit_code == 0, result.output
    assert "failed" in result.stdout and "None" not in result.stdout, result.stdout


# -- A base URL that is no OAI-PMH endpoint: the error says to check it ------------------------


def test_a_base_url_answering_a_web_page_says_to_check_the_base_url() -> None:
    """Before, the run gave up with the XML parser's complaint about the page's <br> tags
    ("Opening and ending tag mismatch: br line 2 and p"), not saying that the answer was a
    web page, nor where the mistake may be."""
    with OAIEndpoint(RECORDS_FOR_ERRORS, faults=Faults(html_error_on=set(range(1, 20)))) as web:
        args = create_args("web", web.base_url)
        assert run(*args, "--loader", "oai-pmh{max_retries: 1}").exit_code == 0
        result = run("harvest", "web")

    assert_one_line_error(result, "an HTML page, not OAI-PMH XML")
    assert (
        "check that the harvester's base URL is the source's OAI-PMH endpoint "
        "(`oai-pipeline harvesters update web --base-url URL`)"  # before: `update ID`
    ) in result.stderr


def test_a_new_harvesters_base_url_answering_a_web_page_fails_at_once() -> None:
    """A base URL that answers a web page with HTTP 200 (a home page, a login page) before
    it ever answered OAI-PMH is the wrong URL: before, Identify was retried 7 times (about a
    minute of waiting) before the error that says to check it."""
    with OAIEndpoint(RECORDS_FOR_ERRORS, faults=Faults(html_error_on=set(range(1, 20)))) as web:
        args = create_args("home-page", web.base_url)
        assert run(*args, "--loader", "oai-pmh{backoff_base: 0}").exit_code == 0
        result = run("harvest", "home-page")
        asked = web.request_count

    assert asked == 1
    assert_one_line_error(result, "never answered OAI-PMH")
    assert "check that the harvester's base URL is the source's OAI-PMH endpoint" in result.stderr
    assert "failed" in run("status", "--harvester", "home-page").stdout  # the run says why


def test_a_harvested_sources_maintenance_page_is_still_waited_out() -> None:
    """Once the base URL has answered OAI-PMH, a web page there is a proxy's maintenance
    page: retried as before, and the harvest goes on once it is gone. Identify, with the
    one saved last time standing by, is asked once; the list waits it out."""
    with OAIEndpoint(RECORDS_FOR_ERRORS) as source:
        args = create_args("maintained", source.base_url)
        assert run(*args, "--loader", "oai-pmh{backoff_base: 0}").exit_code == 0
        assert run("harvest", "maintained").exit_code == 0
        before = source.request_count
        source.faults = Faults(html_error_on={before + 1, before + 2})
        result = run("harvest", "maintained")
        verbs = [request.get("verb") for request in source.requests[before:]]

    assert result.exit_code == 0, result.output
    assert verbs[:3] == ["Identify", "ListRecords", "ListRecords"]


def test_a_web_page_after_a_new_sources_first_answer_is_waited_out() -> None:
    """A source whose Identify answered has proven its base URL: a web page in place of
    its first list page is a maintenance page, retried as for any harvested source."""
    with OAIEndpoint(RECORDS_FOR_ERRORS, faults=Faults(html_error_on={2})) as source:
        args = create_args("new-source", source.base_url)
        assert run(*args, "--loader", "oai-pmh{backoff_base: 0}").exit_code == 0
        result = run("harvest", "new-source")

    assert result.exit_code == 0, result.output


def test_a_base_url_answering_404_says_to_check_the_base_url(endpoint: OAIEndpoint) -> None:
    assert run(*create_args("typo", endpoint.base_url + "x")).exit_code == 0

    result = run("harvest", "typo")

    assert_one_line_error(result, "(Identify): HTTP 404 Not Found (")
    assert "check that the harvester's base URL is the source's OAI-PMH endpoint" in result.stderr
