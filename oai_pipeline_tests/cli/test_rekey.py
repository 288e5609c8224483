"""`harvesters rekey`: a source of records without DOIs (a DSpace of handles) moves and lists
every record under a new identifier namespace. Rekeyed before the next harvest, its records
keep their target records: same ids, no new record, no tombstone.

Before, nothing said the new identifier was the old record: the next harvest created every
record anew (new target ids, links to the old ones broken) and the old ones became tombstones
once their deletion was harvested or a reconcile found them vanished.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.sample_endpoint.records import EndpointRecord
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline_tests.support import oai_dc

OLD = "oai:old.example.org:"
NEW = "oai:repo.example.org:"
RECORDS = 30
HARVESTER = "dspace"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def run(*args: str) -> Result:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return result


def run_json(*args: str) -> dict | list:
    return json.loads(run(*args, "--json").stdout)


def create_args(base_url: str) -> list[str]:
    return [
        "harvesters", "create", "--id", HARVESTER, "--base-url", base_url,
        "--metadata-prefix", "oai_dc", "--model", "rdm",
    ]  # fmt: skip


def handle_records(prefix: str, stamp: datetime) -> list[EndpointRecord]:
    """Records without a DOI (the target mints none), identified by handle."""
    return [
        EndpointRecord(
            identifier=f"{prefix}123456789/{n}",
            datestamp=stamp + timedelta(minutes=n),
            metadata={"oai_dc": oai_dc(f"Thesis {n}", date_text="2019-05-01").encode()},
        )
        for n in range(RECORDS)
    ]


def target() -> dict[str, dict]:
    """The harvester's target records by id."""
    listed = run_json("target", "list", "--harvester", HARVESTER, "--limit", "1000")
    return {r["id"]: r for r in listed}


def harvest_identifiers() -> list[str]:
    listed = run_json("records", "list", "--harvester", HARVESTER, "--limit", "1000")
    return sorted(r["identifier"] for r in listed)


@pytest.fixture
def moved() -> Iterator[tuple[dict[str, dict], OAIEndpoint]]:
    """The harvester harvested all 30 records from the old host; the source has moved to a
    new one, which lists them under the new prefix, re-stamped by the migration, and
    `harvesters update --base-url` points the harvester there. Yields the target before."""
    now = datetime.now(UTC).replace(microsecond=0)
    with OAIEndpoint(handle_records(OLD, now - timedelta(days=5)), page_size=7) as old_host:
        run(*create_args(old_host.base_url))
        first = run_json("harvest", HARVESTER)
        assert first["actions"] == {"create": RECORDS}
    before = target()
    restamped = handle_records(NEW, now - timedelta(hours=2))
    with OAIEndpoint(restamped, page_size=7, deleted_record="no") as new_host:
        run("harvesters", "update", HARVESTER, "--base-url", new_host.base_url)
        yield before, new_host


@pytest.mark.usefixtures("backend")
def test_rekeyed_before_the_next_harvest_the_records_keep_their_target_records(
    moved: tuple[dict[str, dict], OAIEndpoint],
) -> None:
    before, _ = moved
    rekeyed = run_json("harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", NEW)
    assert rekeyed["state_records"] == rekeyed["target_records"] == RECORDS
    assert rekeyed["examples"][0] == {"from": f"{OLD}123456789/0", "to": f"{NEW}123456789/0"}

    incremental = run_json("harvest", HARVESTER, "--since", datetime.now(UTC).date().isoformat())
    full = run_json("harvest", HARVESTER)
    reconciled = run_json("reconcile", HARVESTER)

    # the re-stamped records are listed again and found unchanged, then skipped
    assert incremental["actions"] == {"nothing": RECORDS} and incremental["errors"] == 0
    assert full["actions"] == {"skip": RECORDS} and full["errors"] == 0
    assert reconciled["vanished"] == [] and reconciled["actions"] == {}
    after = target()
    assert after.keys() == before.keys()  # the same target records, none new
    for record_id, record in after.items():
        old = before[record_id]
        assert record["state"] == "live"
        assert record["source_identifier"] == old["source_identifier"].replace(OLD, NEW)
        assert record["revision"] == old["revision"]  # the same data: no new revision
    assert harvest_identifiers() == sorted(f"{NEW}123456789/{n}" for n in range(RECORDS))
    # a rerun finds nothing left to rewrite
    again = run_json("harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", NEW)
    assert again["state_records"] == again["target_records"] == 0


def test_a_dry_run_says_what_it_would_rewrite_and_changes_nothing(
    moved: tuple[dict[str, dict], OAIEndpoint],
) -> None:
    before, _ = moved
    args = ["harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", NEW]
    planned = run_json(*args, "--dry-run")
    text = run(*args, "--dry-run").stdout

    assert planned["dry_run"] is True
    assert planned["state_records"] == planned["target_records"] == RECORDS
    assert len(planned["examples"]) == 5
    assert f"would rewrite {OLD}… to {NEW}… in 30 harvest records and 30 target records" in text
    assert f"{OLD}123456789/0 -> {NEW}123456789/0" in text
    assert "nothing was changed" in text
    assert target() == before
    assert all(i.startswith(OLD) for i in harvest_identifiers())


def refusal(*args: str) -> str:
    """The command's one-line error: exit 2, JSON with --json, type `refused`."""
    result = invoke(*args, "--json")
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)
    assert error["type"] in ("refused", "not_found"), error
    return error["error"]


def test_refusals_change_nothing(moved: tuple[dict[str, dict], OAIEndpoint]) -> None:
    before, _ = moved
    rekey = ["harvesters", "rekey", HARVESTER]

    assert "unknown harvester 'nope'" in refusal(
        "harvesters", "rekey", "nope", "--from-prefix", OLD, "--to-prefix", NEW
    )
    assert "--from-prefix is empty" in refusal(*rekey, "--from-prefix", "", "--to-prefix", NEW)
    assert "are the same" in refusal(*rekey, "--from-prefix", OLD, "--to-prefix", OLD)
    assert "begins with the other" in refusal(*rekey, "--from-prefix", "oai:", "--to-prefix", NEW)
    assert target() == before
    assert all(i.startswith(OLD) for i in harvest_identifiers())


def test_refused_once_the_new_identifiers_were_harvested(
    moved: tuple[dict[str, dict], OAIEndpoint],
) -> None:
    """Too late: the harvest created the new identifiers' records beside the old ones."""
    run("harvest", HARVESTER)
    created = target()

    error = refusal("harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", NEW)

    assert f"under {NEW!r} already" in error and "nothing was changed" in error
    assert f"{OLD}123456789/0 -> {NEW}123456789/0" in error
    assert target() == created
