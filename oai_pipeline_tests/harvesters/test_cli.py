"""`oai-pipeline harvesters …` through click's CliRunner (the data folder is a tmp dir)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from oai_pipeline.cli.harvesters import harvesters
from oai_pipeline.harvesters.plugins import parse_spec
from oai_pipeline.oai.types import HarvestedRecord
from oai_pipeline.settings import load_settings
from oai_pipeline.state.store import StateStore
from oai_pipeline_tests.support import stored_harvester_ids

CREATE = [
    "create",
    "--id",
    "zenodo",
    "--name",
    "Zenodo",
    "--comment",
    "the CESNET community",
    "--base-url",
    "https://zenodo.org/oai2d",
    "--metadata-prefix",
    "oai_datacite",
    "--setspec",
    "user-cesnet",
    "--model",
    "rdm",
    "--community",
    "cesnet",
    "--harvest-manager",
    "a@example.org",
    "--harvest-manager",
    "b@example.org",
    "--rate-limit-per-minute",
    "30",
]


def run(*args: str, ok: bool = True):
    result = CliRunner().invoke(harvesters, list(args))
    if ok:
        assert result.exit_code == 0, result.output
    return result


def test_round_trip_create_list_update_show_delete():
    created = run(*CREATE)
    assert "created zenodo" in created.output

    [listed] = json.loads(run("list", "--json").output)
    assert listed["id"] == "zenodo" and listed["setspec"] == "user-cesnet"
    assert listed["harvest_managers"] == ["a@example.org", "b@example.org"]
    assert listed["rate_limit_per_minute"] == 30
    assert parse_spec(listed["writers"][0]).options == {"model": "rdm", "community": "cesnet"}
    assert parse_spec(listed["transformers"][0]).options == {"model": "rdm"}

    run(
        "update",
        "zenodo",
        "--name",
        "Zenodo (CESNET)",
        "--batch-size",
        "25",
        "--writer",
        "oai-service{publish: false}",
        "--transformer",
        "oai-import",
        "--transformer",
        "upper-title",
    )
    shown = json.loads(run("show", "zenodo", "--json").output)
    assert shown["name"] == "Zenodo (CESNET)" and shown["batch_size"] == 25
    assert shown["writers"] == ["oai-service{publish: false}"]
    assert shown["transformers"] == ["oai-import", "upper-title"]
    assert shown["comment"] == "the CESNET community"  # untouched fields stay
    assert shown["identify"] is None

    text = run("show", "zenodo").output
    assert "base-url: https://zenodo.org/oai2d" in text

    run("update", "zenodo", "--disabled")
    assert json.loads(run("show", "zenodo", "--json").output)["enabled"] is False

    assert "harvest records kept" in run("delete", "zenodo").output
    assert json.loads(run("list", "--json").output) == []
    assert "no harvesters registered" in run("list").output


INVALID = [
    (["--id", "Bad|Id"], "--id"),
    (["--base-url", "ftp://zenodo.org/oai2d"], "--base-url"),
    (["--loader", "ftp-reader"], "--loader"),
    (["--transformer", "nope"], "--transformer"),
    (["--writer", "s3"], "--writer"),
    (["--writer", "oai-service{model:"], "--writer"),
    (["--transformer", "oai-import{model: 1, extra: true}"], "--transformer"),
    (["--writer", "oai-service{publish: 'maybe'}"], "--writer"),
    (["--model", "nope"], "--model"),
    (["--harvest-manager", "nobody"], "--harvest-manager"),
    (["--rate-limit-per-minute", "0"], "--rate-limit-per-minute"),
    (["--batch-size", "0"], "--batch-size"),
]


def _with(flags: list[str]) -> list[str]:
    """CREATE with the given flags replacing (or adding to) its own."""
    args = list(CREATE)
    for index in range(0, len(flags), 2):
        flag, value = flags[index], flags[index + 1]
        if flag in args and flag not in ("--harvest-manager",):
            args[args.index(flag) + 1] = value
        else:
            if flag in ("--transformer", "--writer"):  # explicit plug-ins instead of the model
                args.remove("--community")
                args.remove("cesnet")
            args += [flag, value]
    return args


@pytest.mark.parametrize(("flags", "field"), INVALID)
def test_invalid_create_fails_with_one_line_naming_the_field(flags, field):
    # named as the flag given (was the model's field: `base_url`, `writers.0`)
    result = run(*_with(flags), ok=False)
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith(f"Error: invalid {field}: "), lines[0]
    assert stored_harvester_ids() == []


@pytest.mark.parametrize(("flags", "field"), INVALID[1:])
def test_invalid_update_fails_and_keeps_the_harvester(flags, field):
    run(*CREATE)
    before = run("show", "zenodo", "--json").output
    args = ["update", "zenodo", *flags]
    result = run(*args, ok=False)
    assert result.exit_code != 0
    assert len(result.output.strip().splitlines()) == 1
    assert f"invalid {field}: " in result.output
    assert run("show", "zenodo", "--json").output == before


def test_duplicate_and_unknown_ids_are_one_line_errors():
    run(*CREATE)
    result = run(*CREATE, ok=False)
    # exit 2 as the command's other mistakes (an invalid option); it was 1
    assert result.exit_code == 2
    assert result.output.strip() == "Error: harvester 'zenodo' already exists (use update)"
    for args in (["show", "nope"], ["update", "nope", "--name", "x"], ["delete", "nope"]):
        result = run(*args, ok=False)
        assert result.exit_code == 2
        assert result.output.strip() == "Error: unknown harvester 'nope'"


def test_load_fixture_file_twice(tmp_path):
    path = tmp_path / "oai_harvesters.yaml"
    path.write_text(
        "- id: zenodo\n"
        "  base-url: https://zenodo.org/oai2d\n"
        "  metadata-prefix: oai_datacite\n"
        "  model: rdm\n"
        "  community: cesnet\n"
        "  harvest-manager: a@example.org\n"
    )
    first = json.loads(run("load", str(path), "--json").output)
    assert first == [{"id": "zenodo", "result": "created", "warnings": []}]
    assert run("load", str(path)).output.strip() == "zenodo: unchanged"
    path.write_text(path.read_text() + "- id: Bad\n  base-url: x\n  metadata-prefix: y\n")
    result = run("load", str(path), ok=False)
    assert result.exit_code != 0 and len(result.output.strip().splitlines()) == 1
    assert "harvester 'Bad'" in result.output and "invalid id" in result.output
    assert stored_harvester_ids() == ["zenodo"]


@pytest.mark.parametrize(
    "content",
    [
        "- id: zenodo\n  base-url: https://zenodo.org/oai2d\n",  # no metadata-prefix
        "- id: [\n",  # not YAML
    ],
)
def test_a_bad_fixture_file_exits_2_as_a_bad_create_does(tmp_path, content):
    """The README: 2 for a usage or validation error. The file is the user's input, as
    `create`'s options are; a missing field there exits 2, so it does in a file."""
    path = tmp_path / "oai_harvesters.yaml"
    path.write_text(content)
    assert run("create", "--id", "zenodo", "--json", ok=False).exit_code == 2

    result = run("load", str(path), "--json", ok=False)

    assert result.exit_code == 2, result.output
    assert json.loads(result.stdout)["type"] == "validation_error"
    assert stored_harvester_ids() == []


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (
            "id: zenodo\nbase-url: https://zenodo.org/oai2d\nmetadata-prefix: oai_dc\n",
            "not a single harvester's keys: put `- ` before its first key",
        ),
        ("zenodo\n", "not a YAML str ('zenodo')"),
    ],
)
def test_a_fixture_file_that_is_no_list_says_how_to_write_one(tmp_path, content, said):
    """A harvester written without its leading `- ` said `invalid harvesters: Field required;
    id: Extra inputs are not permitted; base-url: …`, as if the keys were wrong."""
    path = tmp_path / "oai_harvesters.yaml"
    path.write_text(content)

    result = run("load", str(path), ok=False)

    assert result.exit_code == 2, result.output
    assert "a fixture file is a list of harvesters, each entry starting with `- `" in result.stderr
    assert said in result.stderr and "Extra inputs" not in result.stderr
    assert stored_harvester_ids() == []


def test_delete_with_records():
    run(*CREATE)
    store = StateStore(load_settings().state_db_url)
    try:
        store.upsert_harvested("zenodo", [HarvestedRecord("oai:zenodo.org:1", "2024-01-01", False)])
        assert "harvest records deleted" in run("delete", "zenodo", "--delete-records").output
        assert store.get_record("oai:zenodo.org:1") is None
    finally:
        store.close()


PASTED = "https://repo.example.org/index.php?verb=Identify&q=oai&metadataPrefix=oai_dc"
ENDPOINT = "https://repo.example.org/index.php?q=oai"


def test_a_request_url_given_as_base_url_is_registered_as_its_endpoint():
    """Before, `--base-url '…?verb=Identify&metadataPrefix=…'` was stored as typed: requests
    worked (the client leaves the arguments out) but `show` and the Dagster UI named one
    request, not the endpoint. The endpoint's own query stays."""
    args = [a if a != "https://zenodo.org/oai2d" else PASTED for a in CREATE]
    created = run(*args, "--json")

    assert json.loads(created.stdout)["base_url"] == ENDPOINT
    [warning] = json.loads(created.stdout)["warnings"][:1]
    assert f"registered as {ENDPOINT}" in warning and "(verb, metadataPrefix)" in warning
    assert f"warning: base URL {PASTED}" in created.stderr
    assert json.loads(run("show", "zenodo", "--json").stdout)["base_url"] == ENDPOINT

    updated = run("update", "zenodo", "--base-url", PASTED.replace("repo.", "oai."), "--json")
    assert json.loads(updated.stdout)["base_url"] == ENDPOINT.replace("repo.", "oai.")
    assert "registered as" in updated.stderr


def test_a_harvester_stored_with_a_request_url_keeps_it_until_updated():
    """Stored before the arguments were left out: read back as is (its runs harvest the
    same endpoint), and the next update stores the endpoint, saying so."""
    from oai_pipeline.harvesters.model import Harvester

    run(*CREATE)
    store = StateStore(load_settings().state_db_url)
    try:
        stored = store.get_harvester("zenodo").model_dump()
        store.save_harvester(Harvester.from_stored({**stored, "base_url": PASTED}))
        assert store.get_harvester("zenodo").base_url == PASTED
    finally:
        store.close()

    updated = run("update", "zenodo", "--name", "Renamed", "--json")

    assert json.loads(updated.stdout)["base_url"] == ENDPOINT
    assert f"registered as {ENDPOINT}" in updated.stderr


def test_a_fixture_entrys_request_url_is_registered_as_its_endpoint(tmp_path):
    fixture = tmp_path / "oai_harvesters.yaml"
    fixture.write_text(
        f"- id: pasted\n  base-url: '{PASTED}'\n  metadata-prefix: oai_dc\n  model: rdm\n"
    )

    for result in ("created", "unchanged"):  # told each time, until the file is changed
        [loaded] = json.loads(run("load", str(fixture), "--json").stdout)
        assert loaded["result"] == result
        assert any(f"registered as {ENDPOINT}" in w for w in loaded["warnings"])
    assert json.loads(run("show", "pasted", "--json").stdout)["base_url"] == ENDPOINT


def test_the_text_listing_says_which_harvesters_the_schedules_skip():
    """Among hundreds of harvesters, the disabled ones were told only by `--json`."""
    for harvester_id, enabled in (("on", "--enabled"), ("off", "--disabled")):
        url = f"https://{harvester_id}.example.org/oai"
        run("create", "--id", harvester_id, "--base-url", url, "--metadata-prefix", "dc", enabled)

    rows = [line.split("\t") for line in run("list").output.splitlines()]

    assert {row[0]: row[5] for row in rows} == {"on": "enabled", "off": "disabled"}


def _update_warnings(*flags: str) -> list[str]:
    return json.loads(run("update", "zenodo", *flags, "--json").stdout)["warnings"]


def test_update_says_what_a_change_of_chain_or_writer_reaches_and_what_changes_nothing():
    """A new transformer chain or writer content option reaches a record at the next
    harvest that lists it; before, `update` said nothing, and an operator who ran the usual
    incremental harvest found most records as they were. Options of how, not what, say
    nothing."""
    run(*CREATE)

    chain_flags = ["--transformer", 'oai-import{model: "rdm"}', "--transformer", "upper-title"]
    [chain] = [w for w in _update_warnings(*chain_flags) if "transform" in w]
    assert "the transformers changed" in chain and "harvest them all again" in chain

    [community] = [w for w in _update_warnings("--community", "other") if "writer" in w]
    assert "writer 'oai-service' writes otherwise" in community
    assert "harvest them all again" in community

    for flags in (
        ["--writer", 'oai-service{model: "rdm", community: "other", direct_update: true}'],
        ["--batch-size", "7"],
        ["--rate-limit-per-minute", "5"],
        ["--loader", "oai-pmh{page_size: 10}"],
        ["--name", "Z", "--comment", "c", "--harvest-manager", "c@example.org"],
        ["--disabled"],
    ):
        assert not [w for w in _update_warnings(*flags) if "again" in w], flags


def test_a_harvester_created_again_over_its_kept_records_in_another_prefix_warns_as_update(
    tmp_path,
):
    """Deleted with its records kept, created again (`create`, or a fixture file) in another
    metadata prefix: the update's warning of a new prefix, since the records it kept were
    harvested in the old one; in the same prefix, no warning."""
    run(*CREATE)
    run("delete", "zenodo")
    dc = [
        *CREATE[: CREATE.index("oai_datacite")],
        "oai_dc",
        *CREATE[CREATE.index("oai_datacite") + 1 :],
    ]

    created = run(*dc, "--json")

    [warning] = [w for w in json.loads(created.stdout)["warnings"] if "prefix" in w]
    assert warning.startswith(
        "the metadata prefix changed from 'oai_datacite' to 'oai_dc': a reconcile deletes no "
        "record harvested as 'oai_datacite'"
    )
    assert f"warning: {warning}" in created.stderr
    run("delete", "zenodo")
    fixture = tmp_path / "oai_harvesters.yaml"
    fixture.write_text(
        "- id: zenodo\n  base_url: https://zenodo.org/oai2d\n  metadata_prefix: oai_datacite\n"
    )
    loaded = run("load", str(fixture), "--json")
    assert "the metadata prefix changed from 'oai_dc' to 'oai_datacite'" in loaded.stdout
    run("delete", "zenodo")
    assert not [w for w in json.loads(run(*CREATE, "--json").stdout)["warnings"] if "prefix" in w]
