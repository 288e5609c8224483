"""`harvesters rekey`: a source of records without DOIs (a DSpace of handles) moves and lists
every record under a new identifier namespace. Rekeyed before the next harvest, its records
keep their target records: same ids, no new record, no tombstone.

Before, nothing said the new identifier was the old record: the next harvest created every
record anew (new target ids, links to the old ones broken) and the old ones became tombstones
once their deletion was harvested or a reconcile found them vanished.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.cli.output import pending_rekey_line
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
    before, endpoint = moved
    rekeyed = run_json("harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", NEW)
    assert rekeyed["state_records"] == rekeyed["target_records"] == RECORDS
    assert rekeyed["examples"][0] == {"from": f"{OLD}123456789/0", "to": f"{NEW}123456789/0"}
    assert rekeyed["stale_windows"] == []  # harvested by the CLI: no Dagster window

    # from the day of the first re-stamp (the day before, in the first two hours of a day)
    since = min(record.datestamp for record in endpoint.records()).date().isoformat()
    incremental = run_json("harvest", HARVESTER, "--since", since)
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
    assert "no Dagster window's Parquet holds the old identifiers" in text
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


def test_undoing_a_rekey_to_the_wrong_prefix_after_a_harvest_says_what_to_do(
    moved: tuple[dict[str, dict], OAIEndpoint],
) -> None:
    """Rekeyed to a wrong prefix, then harvested: the harvest created the source's records
    anew. Rekeyed back before a harvest, the records keep their target records; after it,
    the undo is refused, and the error says what cleans up (before, only that it was late)."""
    wrong = "oai:wrong.example.org:"
    run("harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", wrong)
    run("harvesters", "rekey", HARVESTER, "--from-prefix", wrong, "--to-prefix", OLD)
    run("harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", wrong)
    run("harvest", HARVESTER)

    error = refusal("harvesters", "rekey", HARVESTER, "--from-prefix", wrong, "--to-prefix", NEW)

    assert f"under {NEW!r} already" in error and "nothing was changed" in error
    assert f"oai-pipeline reconcile {HARVESTER}" in error and "--force" in error


def test_refused_while_a_harvest_or_reconcile_holds_the_harvesters_lease(
    moved: tuple[dict[str, dict], OAIEndpoint],
) -> None:
    from oai_pipeline.pipeline.services import Services
    from oai_pipeline.settings import load_settings
    from oai_pipeline.state.harvester_lock import new_owner

    before, _ = moved
    with Services(load_settings()) as services:
        owner = new_owner()  # a live process of this machine, as a running harvest's
        assert services.harvester_lock.try_acquire(HARVESTER, owner)
        try:
            error = refusal(
                "harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", NEW
            )
        finally:
            services.harvester_lock.release(HARVESTER, owner)

    assert "a harvest or reconcile of harvester dspace is running" in error
    assert target() == before
    assert all(i.startswith(OLD) for i in harvest_identifiers())


def _run_after_its_first_page(base_url: str, *, failed: bool = True, **run: Any) -> int:
    """A harvest run of the new host that read its first page (and, `failed`, then failed):
    the next harvest of its window resumes it from its resumption token. `run`: more of
    `create_run`'s arguments (a Dagster run's id, its worker)."""
    from oai_pipeline.oai.types import SweepCheckpoint
    from oai_pipeline.settings import load_settings
    from oai_pipeline.state.store import StateStore

    with StateStore(load_settings().state_db_url) as state:
        run_id = state.create_run(
            HARVESTER,
            window_from=None,
            window_until=None,
            scale=None,
            max_records=0,
            options={"base_url": base_url},
            **run,
        )
        state.save_checkpoint(
            run_id, SweepCheckpoint(None, None, None, "oai_dc", "token-2", pages_read=1)
        )
        if failed:
            state.finish_run(run_id, "failed", error="HarvestProtocolError: the source went away")
    return run_id


def test_refused_while_a_run_would_resume_from_the_old_identifiers_token_unless_superseded(
    moved: tuple[dict[str, dict], OAIEndpoint],
) -> None:
    from oai_pipeline.settings import load_settings
    from oai_pipeline.state.store import StateStore

    before, endpoint = moved
    run_id = _run_after_its_first_page(endpoint.base_url)
    args = ["harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", NEW]

    error = refusal(*args)
    assert f"{run_id} (failed)" in error
    assert f"oai-pipeline harvest {HARVESTER} --resume {run_id}" in error
    assert "--supersede-runs" in error
    assert target() == before

    rekeyed = run_json(*args, "--supersede-runs")
    assert rekeyed["superseded_runs"] == [run_id]
    with StateStore(load_settings().state_db_url) as state:
        run = state.get_run(run_id)
        assert run is not None and run["status"] == "stopped"
        assert state.find_resumable_run(HARVESTER, None, None) is None  # not resumed
    full = run_json("harvest", HARVESTER)
    assert full["run_id"] != run_id
    assert "create" not in full["actions"] and target().keys() == before.keys()


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize(
    "crash",
    [
        "rekey_target:1:before",  # nothing rewritten
        "rekey_target:1:after",  # the target rewritten, the state store not: between the two
        "rekey_state:1:after",  # both rewritten, no report printed
    ],
)
def test_killed_rekey_rerun_finishes_the_job_without_duplicates(
    moved: tuple[dict[str, dict], OAIEndpoint], crash: str
) -> None:
    """Killed (`os._exit`, as SIGKILL) at a point of the rewrite, the same command run again
    rewrites what is left; the next harvest then finds every record known."""
    from oai_pipeline_tests.resume import crash_sweep

    before, _ = moved
    home = crash_sweep.Home(Path(os.environ["OAI_PIPELINE_HOME"]), dict(os.environ))
    args = ["harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", NEW]
    killed = crash_sweep._cli(home, crash, args)
    assert killed.returncode == crash_sweep.EXIT_CODE, killed.stdout + killed.stderr
    if crash == "rekey_target:1:after":  # the two stores disagree until the rerun
        assert all(r["source_identifier"].startswith(NEW) for r in target().values())
        assert all(i.startswith(OLD) for i in harvest_identifiers())

    rerun = run_json(*args)
    done_before = {"rekey_target:1:before": 0, "rekey_target:1:after": 1, "rekey_state:1:after": 2}
    assert [rerun["target_records"], rerun["state_records"]] == {
        0: [RECORDS, RECORDS],
        1: [0, RECORDS],
        2: [0, 0],
    }[done_before[crash]]
    harvested = run_json("harvest", HARVESTER)

    assert harvested["actions"] == {"nothing": RECORDS} and harvested["errors"] == 0
    after = target()
    assert after.keys() == before.keys()
    assert all(r["source_identifier"].startswith(NEW) for r in after.values())
    assert [r["revision"] for r in after.values()] == [r["revision"] for r in before.values()]
    assert harvest_identifiers() == sorted(f"{NEW}123456789/{n}" for n in range(RECORDS))


def _killed_between_its_stores(args: list[str]) -> None:
    """`harvesters rekey ARGS` killed once the target's rewrite committed, before the state
    store's: the target holds the new identifiers, the state store the old ones."""
    from oai_pipeline_tests.resume import crash_sweep

    home = crash_sweep.Home(Path(os.environ["OAI_PIPELINE_HOME"]), dict(os.environ))
    killed = crash_sweep._cli(home, "rekey_target:1:after", args)
    assert killed.returncode == crash_sweep.EXIT_CODE, killed.stdout + killed.stderr


def failure(*args: str) -> str:
    """A command's one-line error (exit 1), without a traceback."""
    result = invoke(*args, "--json")
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    return json.loads(result.stdout)["error"]


@pytest.mark.usefixtures("backend")
def test_a_rekey_killed_between_its_stores_is_finished_before_anything_else(
    moved: tuple[dict[str, dict], OAIEndpoint],
) -> None:
    """Killed between its two stores, A→B is pending: A→C (before, it rewrote the state
    store to C while the target stayed under B, and nothing noticed), a harvest and a
    reconcile are refused, naming it and the commands that finish or undo it; rerun, it
    finishes, and the harvest after finds every record known."""
    before, _ = moved
    elsewhere = "oai:elsewhere.example.org:"
    args = ["harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", NEW]
    _killed_between_its_stores(args)

    other = refusal(
        "harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", elsewhere
    )
    harvest = failure("harvest", HARVESTER)
    reconcile = failure("reconcile", HARVESTER)

    pending = f"the rekey of harvester {HARVESTER} from {OLD!r} to {NEW!r} begun at "
    finish = f"oai-pipeline harvesters rekey {HARVESTER} --from-prefix {OLD} --to-prefix {NEW}"
    undo = f"oai-pipeline harvesters rekey {HARVESTER} --from-prefix {NEW} --to-prefix {OLD}"
    for error, what in ((other, f"the rekey from {OLD!r} to {elsewhere!r}"), (harvest, "harvest"),
                        (reconcile, "reconcile")):  # fmt: skip
        assert error.startswith(f"{what} refused: {pending}"), error
        assert f"finish it with `{finish}`" in error and f"undo it with `{undo}`" in error
        assert "\n" not in error
    assert all(i.startswith(OLD) for i in harvest_identifiers())  # nothing changed
    assert all(r["source_identifier"].startswith(NEW) for r in target().values())

    finished = run_json(*args)
    assert [finished["target_records"], finished["state_records"]] == [0, RECORDS]
    harvested = run_json("harvest", HARVESTER)
    assert harvested["actions"] == {"nothing": RECORDS} and harvested["errors"] == 0
    assert target().keys() == before.keys()
    assert harvest_identifiers() == sorted(f"{NEW}123456789/{n}" for n in range(RECORDS))


def test_status_and_show_tell_of_a_pending_rekey_and_how_to_end_it(
    moved: tuple[dict[str, dict], OAIEndpoint],
) -> None:
    """A rekey killed between its stores is shown by `status` and `harvesters show` (one
    line of text, a `pending_rekey` object in JSON) with the commands that finish or undo
    it; before, an operator learnt of it only when a harvest was refused."""
    args = ["harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", NEW]
    finish = f"oai-pipeline harvesters rekey {HARVESTER} --from-prefix {OLD} --to-prefix {NEW}"
    undo = f"oai-pipeline harvesters rekey {HARVESTER} --from-prefix {NEW} --to-prefix {OLD}"
    status_args = ["status", "--harvester", HARVESTER]
    show_args = ["harvesters", "show", HARVESTER]
    assert run_json(*status_args)["pending_rekey"] is None
    assert run_json(*show_args)["pending_rekey"] is None
    _killed_between_its_stores(args)

    for command in (status_args, show_args):
        pending = run_json(*command)["pending_rekey"]
        assert pending is not None, command
        assert pending["old_prefix"] == OLD and pending["new_prefix"] == NEW
        assert pending["finish_command"] == finish and pending["undo_command"] == undo
        lines = [line for line in run(*command).stdout.splitlines() if "rekey pending" in line]
        assert len(lines) == 1, command
        assert f"from {OLD!r} to {NEW!r} since {pending['started_at']}" in lines[0]
        assert f"finish it with `{finish}`" in lines[0] and f"undo it with `{undo}`" in lines[0]
    # the overview of every harvester says it too: the same object, the same text in the
    # harvester's row (its last column, the row still one line for `cut -f`)
    (row,) = run_json("status", "--each-harvester")
    assert row["pending_rekey"] == pending
    (line,) = run("status", "--each-harvester").stdout.splitlines()
    assert line.startswith(f"{HARVESTER}\t") and line.split("\t")[-1] == pending_rekey_line(pending)

    run_json(*args)  # finished: no longer shown
    assert run_json(*status_args)["pending_rekey"] is None
    assert "rekey pending" not in run(*show_args).stdout
    assert run_json("status", "--each-harvester")[0]["pending_rekey"] is None
    assert "rekey pending" not in run("status", "--each-harvester").stdout


def test_a_rekey_killed_between_its_stores_is_undone_by_its_reverse(
    moved: tuple[dict[str, dict], OAIEndpoint],
) -> None:
    """The reverse of a pending rekey (B→A after A→B was killed) brings the target back to A,
    where the state store is, and ends it: another rekey then runs."""
    before, _ = moved
    wrong = "oai:wrong.example.org:"
    _killed_between_its_stores(
        ["harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", wrong]
    )

    undone = run_json("harvesters", "rekey", HARVESTER, "--from-prefix", wrong, "--to-prefix", OLD)
    assert [undone["target_records"], undone["state_records"]] == [RECORDS, 0]
    assert target() == before

    rekeyed = run_json("harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", NEW)
    assert rekeyed["state_records"] == rekeyed["target_records"] == RECORDS
    harvested = run_json("harvest", HARVESTER)
    assert harvested["actions"] == {"nothing": RECORDS} and target().keys() == before.keys()


def _dagster_instance_in_home():  # noqa: ANN202 - a context manager of Dagster's instance
    """The instance under DAGSTER_HOME, as `harvest --use-job` and the daemon use it."""
    from oai_pipeline.defs.launch import dagster_instance
    from oai_pipeline.settings import ensure_dagster_home

    ensure_dagster_home()
    return dagster_instance()


def test_refused_while_a_dagster_run_of_the_harvester_is_queued_or_starting(
    moved: tuple[dict[str, dict], OAIEndpoint],
) -> None:
    """A run queued (`harvest --use-job`, a schedule) or launched in the UI has no harvest run
    yet: before, rekey went ahead and the run, started after it, harvested the records it was
    queued for as new ones. Terminated (canceled), it is out of the way."""
    import dagster as dg

    from oai_pipeline.defs.partitions import HARVESTER_TAG, PARTITION_TAG
    from oai_pipeline_tests.orchestration.dagster_runs import add_queued_run

    before, _ = moved
    args = ["harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", NEW]
    with _dagster_instance_in_home() as instance:
        queued = add_queued_run(instance, {HARVESTER_TAG: HARVESTER})
        launched = dg.DagsterRun(  # from the UI: names its partition only
            job_name="__ASSET_JOB",
            status=dg.DagsterRunStatus.STARTING,
            tags={PARTITION_TAG: f"{HARVESTER}|2024-01-01"},
        )
        others = add_queued_run(instance, {HARVESTER_TAG: "b"})
        instance.add_run(launched)

        error = refusal(*args)
        assert f"{queued.run_id} (QUEUED)" in error and f"{launched.run_id} (STARTING)" in error
        assert others.run_id not in error
        assert "dagster run delete" in error and "nothing was changed" in error
        assert target() == before
        assert all(i.startswith(OLD) for i in harvest_identifiers())

        instance.report_run_canceled(queued)  # Terminate in the UI
        instance.report_run_failed(launched)
        rekeyed = run_json(*args)

    assert rekeyed["state_records"] == rekeyed["target_records"] == RECORDS


def test_a_harvest_run_whose_dagster_run_was_killed_no_longer_counts_as_running(
    moved: tuple[dict[str, dict], OAIEndpoint],
) -> None:
    """A Dagster run killed outright (kill -9) leaves its harvest run `running` until the
    daemon's dead-run sensor fails it. Before, rekey refused it until then, even with
    --supersede-runs (and for good without a daemon). Now a run the sensor would fail (its
    process gone, quiet) counts as the failed run it is about to be; one alive still
    refuses, saying what ends it."""
    import socket

    import dagster as dg

    from oai_pipeline.defs.dead_runs import WORKER_TAG
    from oai_pipeline.defs.partitions import HARVESTER_TAG
    from oai_pipeline.settings import load_settings
    from oai_pipeline.state.store import StateStore
    from oai_pipeline_tests.cli.conftest import pid_of_no_process

    before, endpoint = moved
    args = ["harvesters", "rekey", HARVESTER, "--from-prefix", OLD, "--to-prefix", NEW]
    host = socket.gethostname()
    dagster_run = dg.DagsterRun(
        job_name="harvest_job",
        status=dg.DagsterRunStatus.STARTED,
        tags={HARVESTER_TAG: HARVESTER, WORKER_TAG: f"{host}:{os.getpid()}:nonce"},
    )
    run_id = _run_after_its_first_page(
        endpoint.base_url,
        failed=False,
        dagster_run_id=dagster_run.run_id,
        worker=f"{host}:{pid_of_no_process()}:gone",
    )

    # no instance to ask: running, and the error says what ends it
    error = refusal(*args, "--supersede-runs")
    assert f"harvest run {run_id}" in error and "no Dagster instance" in error
    assert "dead-run sensor" in error and "Terminate" in error

    with _dagster_instance_in_home() as instance:
        instance.add_run(dagster_run)
        error = refusal(*args, "--supersede-runs")  # its process is alive: running
        assert f"running in Dagster run {dagster_run.run_id}" in error
        assert target() == before

        # killed: the process its tag names is gone, and the run logged nothing since
        instance.add_run_tags(dagster_run.run_id, {WORKER_TAG: f"{host}:{pid_of_no_process()}:x"})
        error = refusal(*args)  # resumable from the old identifiers' token, as a failed run
        assert f"{run_id} (running)" in error and "--supersede-runs" in error
        rekeyed = run_json(*args, "--supersede-runs")

    assert rekeyed["superseded_runs"] == [run_id]
    assert rekeyed["state_records"] == rekeyed["target_records"] == RECORDS
    with StateStore(load_settings().state_db_url) as state:
        superseded = state.get_run(run_id)
        assert superseded is not None and superseded["status"] == "stopped"


def test_update_of_the_base_url_warns_of_the_runs_queued_for_the_old_one(
    moved: tuple[dict[str, dict], OAIEndpoint],
) -> None:
    """A run queued before `harvesters update --base-url` reads the harvester as it starts, so
    it harvests the new URL, and before, nothing said so: the operator who meant to rekey
    before the next harvest had a harvest of the new identifiers start under them."""
    from oai_pipeline.defs.launch import range_tags
    from oai_pipeline_tests.orchestration.dagster_runs import add_queued_run

    _, endpoint = moved
    with _dagster_instance_in_home() as instance:
        queued = add_queued_run(
            instance, range_tags(HARVESTER, "2024-01-01", "2024-01-31", endpoint.base_url)
        )
        moved_again = f"{endpoint.base_url}?moved=1"
        updated = run_json("harvesters", "update", HARVESTER, "--base-url", moved_again)
        unchanged_url = run_json("harvesters", "update", HARVESTER, "--name", "DSpace")

    [warning] = [w for w in updated["warnings"] if "queued" in w]
    assert f"{queued.run_id} (QUEUED)" in warning and "harvest the new base URL" in warning
    assert f"harvesters rekey {HARVESTER}" in warning
    assert not [w for w in unchanged_url["warnings"] if "queued" in w]  # the URL did not change
