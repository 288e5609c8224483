"""A succeeded run's per-record rows are dropped after OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS; its
counts and last failures stay on the run."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.errors import ConfigurationError
from oai_pipeline.pipeline.frames import RAW_OAI_XML, STAGE_ASSETS
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.runner import run_harvest
from oai_pipeline.pipeline.scope import HarvestScope, Window
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import DEFAULT_KEEP_RUN_RECORDS_DAYS, Settings, load_settings
from oai_pipeline.state.schema import harvest_runs, run_records
from oai_pipeline_tests.oai.fake_source import FakeSource, make_records
from oai_pipeline_tests.support import harvest_fake_source

EVERYTHING = HarvestScope("sample", (Window("all", None, None),))
STAMP = "%Y-%m-%dT%H:%M:%S.%fZ"  # as the state store writes times


@pytest.fixture
def source(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> FakeSource:
    """Ten oai_dc records without creators: each fails the rdm model (a failure to keep)."""
    return harvest_fake_source(settings, monkeypatch, FakeSource(make_records(10), page_size=3))


def _harvest(services: Services) -> int:
    return run_harvest(services, EVERYTHING, RunOptions(), progress=lambda _m: None).run_id


def _age(services: Services, run_id: int) -> None:
    """The run finished in 2020."""
    with services.state._engine.begin() as conn:  # noqa: SLF001
        conn.execute(
            harvest_runs.update()
            .where(harvest_runs.c.id == run_id)
            .values(finished_at="2020-01-01T00:00:00.000000Z")
        )


def _rows(services: Services, run_id: int) -> int:
    with services.state._engine.begin() as conn:  # noqa: SLF001
        return conn.execute(
            sa.select(sa.func.count()).where(run_records.c.run_id == run_id)
        ).scalar_one()


def test_old_succeeded_runs_keep_their_counts_not_their_rows(
    source: FakeSource, settings: Settings
) -> None:
    with Services(settings) as services:
        old, recent = _harvest(services), _harvest(services)
        before = services.state.run_status(run_id=old)
        _age(services, old)
        latest = _harvest(services)  # a run that succeeds prunes the harvester's old runs
        assert _rows(services, old) == 0
        assert _rows(services, recent) == _rows(services, latest) == 10  # not old enough
        after = services.state.run_status(run_id=old)
    assert after["records"] == before["records"] and after["total_records"] == 10
    assert after["recent_failures"] == before["recent_failures"]
    assert len(after["recent_failures"]) == 10  # every record failed: no creator
    assert after["record_rows_pruned"] and not before["record_rows_pruned"]


def test_the_latest_succeeded_run_keeps_its_rows_however_old(
    source: FakeSource, settings: Settings
) -> None:
    with Services(settings) as services:
        only = _harvest(services)
        _age(services, only)
        assert services.state.prune_run_records("sample", keep_days=30).rows == 0
        assert _rows(services, only) == 10


def test_keeping_them_always(source: FakeSource, settings: Settings) -> None:
    with Services(settings.model_copy(update={"keep_run_records_days": 0})) as services:
        old = _harvest(services)
        _age(services, old)
        _harvest(services)
        assert _rows(services, old) == 10


def test_the_setting() -> None:
    home = {"OAI_PIPELINE_HOME": "/tmp/oai-home"}
    assert load_settings(home).keep_run_records_days == DEFAULT_KEEP_RUN_RECORDS_DAYS
    days = {**home, "OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS": "0"}
    assert load_settings(days).keep_run_records_days == 0
    for bad in ("-1", "a month", "100000"):
        with pytest.raises(ConfigurationError, match="OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS"):
            load_settings({**home, "OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS": bad})


def _adhoc_keys(services: Services) -> dict[str, list[str]]:
    return {
        asset: sorted(k for k in services.storage.windows(asset, "sample") if k.startswith("adhoc"))
        for asset in STAGE_ASSETS
    }


def test_a_cli_harvest_drops_the_parquet_of_old_cli_harvests(
    source: FakeSource, settings: Settings
) -> None:
    """Each CLI harvest writes its four assets under a key of its own: without retention
    every full harvest added all of its XML to the storage for good."""
    with Services(settings) as services:
        old = HarvestScope.adhoc("sample")
        run_harvest(services, old, RunOptions(), progress=lambda _m: None)
        recent = HarvestScope.adhoc("sample")
        run_harvest(services, recent, RunOptions(), progress=lambda _m: None)
        # the first one started in 2020: its keys, renamed as such
        stale = "adhoc-20200101T000000000000Z"
        for asset in STAGE_ASSETS:
            base = f"{services.storage.root}/{asset}/sample"
            (Path(base) / old.keys[0]).rename(Path(base) / stale)
        assert _adhoc_keys(services)[RAW_OAI_XML] == sorted([stale, *recent.keys])

        latest = HarvestScope.adhoc("sample")
        run_harvest(services, latest, RunOptions(), progress=lambda _m: None)

        kept = sorted([*recent.keys, *latest.keys])
        assert _adhoc_keys(services) == dict.fromkeys(STAGE_ASSETS, kept)
        # the Dagster grid's partitions are not the CLI's to drop
        run_harvest(services, EVERYTHING, RunOptions(), progress=lambda _m: None)
        assert "all" in services.storage.windows(RAW_OAI_XML, "sample")


def test_keeping_everything_keeps_the_parquet_of_old_cli_harvests(
    source: FakeSource, settings: Settings
) -> None:
    settings = load_settings(
        {"OAI_PIPELINE_HOME": str(settings.home), "OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS": "0"}
    )
    with Services(settings) as services:
        stale = "adhoc-20200101T000000000000Z"
        services.storage.write_part(
            RAW_OAI_XML, "sample", stale, 0, pl.DataFrame({"identifier": ["x"]})
        )
        run_harvest(services, HarvestScope.adhoc("sample"), RunOptions(), progress=lambda _m: None)
        assert stale in services.storage.windows(RAW_OAI_XML, "sample")


def _keys(services: Services) -> dict[str, list[str]]:
    return {asset: sorted(services.storage.windows(asset, "sample")) for asset in STAGE_ASSETS}


def _grid(key: str) -> HarvestScope:
    """A scope of the Dagster grid's keys (no `adhoc-` key), all of the source each."""
    return HarvestScope("sample", (Window(key, None, None),))


def test_the_grid_partitions_of_runs_whose_rows_were_pruned_are_dropped(
    source: FakeSource, settings: Settings
) -> None:
    """A daily incremental harvest adds a key of the grid a day (the first full harvest one
    per day of the grid), each kept for good: three years left ~1,500 partitions per asset."""
    with Services(settings) as services:
        old = run_harvest(services, _grid("2024-01-01"), RunOptions(), progress=lambda _m: None)
        run_harvest(services, _grid("2024-01-02"), RunOptions(), progress=lambda _m: None)
        # a partition being written (no manifest yet) of a key no run is known for
        services.storage.write_part(
            RAW_OAI_XML, "sample", "2024-01-05", 0, pl.DataFrame({"identifier": ["x"]})
        )
        _age(services, old.run_id)
        # a key whose upstream the old run wrote, and its downstream a run still needed
        recent = services.state.latest_run("sample")["id"]
        for asset, run_id in zip(STAGE_ASSETS, (old.run_id, recent, recent, recent), strict=True):
            services.storage.write_manifest(asset, "sample", "2024-01-07", {"run_id": run_id})
        run_harvest(services, _grid("2024-01-03"), RunOptions(), progress=lambda _m: None)
        assert services.state.get_run(old.run_id)["record_counts"] is not None  # rows pruned
        kept = _keys(services)
    assert kept == {
        **dict.fromkeys(STAGE_ASSETS, ["2024-01-02", "2024-01-03", "2024-01-07"]),
        RAW_OAI_XML: ["2024-01-02", "2024-01-03", "2024-01-05", "2024-01-07"],
    }


def test_the_partitions_of_the_latest_success_and_of_unfinished_runs_stay(
    source: FakeSource, settings: Settings
) -> None:
    """A run that failed (resumable) or the latest success keep their Parquet however old:
    a resume or a Dagster re-execution reads it."""
    with Services(settings) as services:
        first = run_harvest(services, _grid("2024-01-01"), RunOptions(), progress=lambda _m: None)
        _age(services, first.run_id)
        run_harvest(services, _grid("2024-01-01"), RunOptions(), progress=lambda _m: None)
        assert _keys(services) == dict.fromkeys(STAGE_ASSETS, ["2024-01-01"])  # rewritten
        services.state.finish_run(first.run_id + 1, "failed", error="a crash")
        _age(services, first.run_id + 1)
        run_harvest(services, _grid("2024-01-02"), RunOptions(), progress=lambda _m: None)
        assert _keys(services) == dict.fromkeys(STAGE_ASSETS, ["2024-01-01", "2024-01-02"])


def test_keeping_everything_keeps_the_grid_partitions(
    source: FakeSource, settings: Settings
) -> None:
    with Services(settings.model_copy(update={"keep_run_records_days": 0})) as services:
        old = run_harvest(services, _grid("2024-01-01"), RunOptions(), progress=lambda _m: None)
        _age(services, old.run_id)
        run_harvest(services, _grid("2024-01-02"), RunOptions(), progress=lambda _m: None)
        services.state.prune_run_records("sample", keep_days=30)  # pruned under another setting
        run_harvest(services, _grid("2024-01-03"), RunOptions(), progress=lambda _m: None)
        assert _keys(services)[RAW_OAI_XML] == ["2024-01-01", "2024-01-02", "2024-01-03"]


def _prune(*args: str) -> Result:
    return CliRunner().invoke(main, ["prune", *args])


def test_prune_drops_now_what_a_harvest_would_with_fewer_days(
    source: FakeSource, settings: Settings
) -> None:
    """A harvester no longer harvested (or a shorter retention) is pruned on demand."""
    with Services(settings) as services:
        old = run_harvest(services, _grid("2024-01-01"), RunOptions(), progress=lambda _m: None)
        run_harvest(services, _grid("2024-01-02"), RunOptions(), progress=lambda _m: None)
        # ten days ago: within the default 30, not within 5
        with services.state._engine.begin() as conn:  # noqa: SLF001
            conn.execute(
                harvest_runs.update()
                .where(harvest_runs.c.id == old.run_id)
                .values(finished_at=(datetime.now(UTC) - timedelta(days=10)).strftime(STAMP))
            )
    assert json.loads(_prune("--json").stdout)["pruned"] == [
        {"harvester_id": "sample", "run_records": 0, "partitions": []}
    ]
    result = _prune("sample", "--keep-days", "5", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "keep_days": 5,
        "pruned": [{"harvester_id": "sample", "run_records": 10, "partitions": ["2024-01-01"]}],
        "skipped": [],
        "dagster_runs_deleted": {"sample": 0},  # the CLI's harvests make no Dagster runs
        "dagster_job_runs_deleted": None,  # other jobs' runs: only when no harvester is named
    }
    with Services(settings) as services:
        assert _keys(services) == dict.fromkeys(STAGE_ASSETS, ["2024-01-02"])
        assert services.state.run_status(run_id=old.run_id)["total_records"] == 10


@pytest.mark.parametrize("named", [True, False])
def test_prune_reaches_a_deleted_harvester_whose_records_were_kept(
    source: FakeSource, settings: Settings, named: bool
) -> None:
    """`harvesters delete ID` keeps its harvest records and runs, and nothing harvests it
    again to prune them: before, `prune ID` refused it ("unknown harvester") and `prune`
    left it out, so its runs' per-record rows and Parquet partitions stayed for ever."""
    with Services(settings) as services:
        old = run_harvest(services, _grid("2024-01-01"), RunOptions(), progress=lambda _m: None)
        run_harvest(services, _grid("2024-01-02"), RunOptions(), progress=lambda _m: None)
        _age(services, old.run_id)
    assert CliRunner().invoke(main, ["harvesters", "delete", "sample"]).exit_code == 0

    result = _prune(*(["sample"] if named else []), "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["pruned"] == [
        {"harvester_id": "sample", "run_records": 10, "partitions": ["2024-01-01"]}
    ]
    with Services(settings) as services:
        assert _keys(services) == dict.fromkeys(STAGE_ASSETS, ["2024-01-02"])


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["--keep-days", "0"], "--keep-days must be a whole number of days from 1", 2),
        (["--keep-days", "-3"], "--keep-days must be a whole number of days from 1", 2),
        (["--keep-days", "many"], "'many' is not a valid integer", 2),
        (["nope"], "unknown harvester 'nope'", 2),  # a user mistake, as the others
    ],
)
def test_prune_refuses_a_mistake_in_one_line(
    source: FakeSource, args: list[str], message: str, code: int
) -> None:
    result = _prune(*args, "--json")
    assert result.exit_code == code, result.output
    assert message in json.loads(result.stdout)["error"]
    assert "Traceback" not in result.output


def test_prune_when_everything_is_kept_says_how_to(
    source: FakeSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS", "0")
    result = _prune()
    assert result.exit_code == 2
    assert "give --keep-days to prune" in result.stderr


def test_a_harvest_that_prunes_no_run_reads_no_manifest_of_other_keys(
    source: FakeSource, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partitions go only as their runs' rows go: looking for them costs a manifest read per
    key (a request each on an object store), wasted on the many harvests that prune no run."""
    from oai_pipeline.pipeline import retention

    scans: list[str] = []
    scan = retention.prune_partitions

    def counted(services: Services, harvester_id: str, keep=()) -> list[str]:
        scans.append(harvester_id)
        return scan(services, harvester_id, keep)

    monkeypatch.setattr(retention, "prune_partitions", counted)
    with Services(settings) as services:
        old = run_harvest(services, _grid("2024-01-01"), RunOptions(), progress=lambda _m: None)
        run_harvest(services, _grid("2024-01-02"), RunOptions(), progress=lambda _m: None)
        assert scans == []
        _age(services, old.run_id)
        run_harvest(services, _grid("2024-01-03"), RunOptions(), progress=lambda _m: None)
        assert scans == ["sample"]
        assert "2024-01-01" not in services.storage.windows(RAW_OAI_XML, "sample")


def test_prune_with_a_damaged_dagster_instance_drops_nothing(
    source: FakeSource, settings: Settings
) -> None:
    """The state store's rows and Parquet were dropped first, then the instance failed to
    open: the error, without the cure, hid what had been dropped. The instance is now
    opened first, and its damage named with what to do."""
    with Services(settings) as services:
        old = run_harvest(services, _grid("2024-01-01"), RunOptions(), progress=lambda _m: None)
        run_harvest(services, _grid("2024-01-02"), RunOptions(), progress=lambda _m: None)
        _age(services, old.run_id)
    home = Path(os.environ["DAGSTER_HOME"])
    (home / "history").mkdir(parents=True)
    (home / "history" / "runs.db").write_bytes(b"not a database, " * 1024)

    result = _prune("--json")

    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "error": f"cannot open the Dagster instance in {home}: file is not a database: a "
        f"database in {home} is damaged; restore the folder from a backup, or move it aside "
        "for a new, empty instance (its run history is then lost)",
        "type": "dagster_storage_error",
    }
    with Services(settings) as services:
        assert _keys(services) == dict.fromkeys(STAGE_ASSETS, ["2024-01-01", "2024-01-02"])
        assert _rows(services, old.run_id) == 10
