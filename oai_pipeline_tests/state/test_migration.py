"""A state database of an older oai-pipeline is migrated in place, data kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from oai_pipeline.errors import RecordError
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.oai.types import HarvestedRecord
from oai_pipeline.state.schema import CATCH_UP_COUNTERS, SCHEMA_VERSION
from oai_pipeline.state.store import StateStore, writer_keys
from oai_pipeline.sync.rules import Action
from oai_pipeline.targets.base import WriteOutcome
from oai_pipeline.transform.base import TransformItem


def _run(store: StateStore, dagster_run_id: str | None = None) -> int:
    return store.create_run(
        "h",
        window_from=None,
        window_until=None,
        scale=None,
        max_records=0,
        options={},
        dagster_run_id=dagster_run_id,
    )


def _as_version(store_url: str, version: int, *undo: str) -> None:
    """Make the database look as `version` left it: `undo` the later versions' changes."""
    engine = sa.create_engine(store_url)
    with engine.begin() as connection:
        for statement in undo:
            connection.execute(sa.text(statement))
        connection.execute(sa.text(f"UPDATE schema_version SET version = {version}"))
    engine.dispose()


def _payloads_in_the_row(connection: sa.Connection) -> None:
    """Version 3 kept the XML and the data in the harvest record's row."""
    binary = sa.LargeBinary().compile(dialect=connection.dialect)
    connection.execute(sa.text(f"ALTER TABLE harvest_records ADD COLUMN xml {binary}"))
    connection.execute(sa.text("ALTER TABLE harvest_records ADD COLUMN data JSON"))
    for table, column in (("harvest_record_xml", "xml"), ("harvest_record_data", "data")):
        connection.execute(
            sa.text(
                f"UPDATE harvest_records SET {column} = (SELECT {column} FROM {table} t "
                "WHERE t.harvester_id = harvest_records.harvester_id "
                "AND t.identifier = harvest_records.identifier)"
            )
        )
        connection.execute(sa.text(f"DROP TABLE {table}"))


def _drop_transform_memory(connection: sa.Connection) -> None:
    """Version 2: no transform memory, and none of what later versions added either."""
    _payloads_in_the_row(connection)
    connection.execute(sa.text("DROP INDEX ix_harvest_records_memory"))
    for column in (
        "communities",
        "transformed_datestamp",
        "transform_fingerprint",
        "written_fingerprint",
    ):
        connection.execute(sa.text(f"ALTER TABLE harvest_records DROP COLUMN {column}"))


def test_a_version_3_database_moves_xml_and_data_beside_the_rows(store_url: str) -> None:
    url = store_url
    day = "2024-01-03T00:00:00Z"
    with StateStore(url) as store:
        store.upsert_harvested(
            "h",
            [
                HarvestedRecord("oai:x:1", day, False, xml=b"<record>1</record>"),
                HarvestedRecord("oai:x:2", day, False, xml=b"<record>2</record>"),
                HarvestedRecord("oai:x:3", day, True),
            ],
        )
        clean = TransformItem("oai:x:1", day, [], b"<record>1</record>")
        clean.data, clean.pid = {"metadata": {"title": "T"}}, "10.1/x"
        store.save_transformed("h", [clean], fingerprint="f1")
    engine = sa.create_engine(url)
    with engine.begin() as connection:  # what version 3 looked like
        _payloads_in_the_row(connection)
        # version 3 stored a failed transform's absent data as a JSON null
        connection.execute(
            sa.text("UPDATE harvest_records SET data = 'null' WHERE identifier = 'oai:x:2'")
        )
        connection.execute(sa.text("UPDATE schema_version SET version = 3"))
    with StateStore(url) as store:
        first, second, gone = (store.get_record(f"oai:x:{n}", "h") for n in (1, 2, 3))
        assert (first["xml"], first["data"]) == ("<record>1</record>", {"metadata": {"title": "T"}})
        assert (second["xml"], second["data"]) == ("<record>2</record>", None)
        assert (gone["xml"], gone["data"]) == (None, None)
        assert store.stored_transforms("h", {"oai:x:1": day, "oai:x:2": day}, "f1").keys() == {
            "oai:x:1"
        }
    with engine.begin() as connection:
        version = connection.execute(sa.text("SELECT version FROM schema_version")).scalar()
        assert version == SCHEMA_VERSION
        columns = {c["name"] for c in sa.inspect(connection).get_columns("harvest_records")}
        assert not columns & {"xml", "data"}
        assert connection.execute(sa.text("SELECT count(*) FROM harvest_record_data")).scalar() == 1
    engine.dispose()


def test_a_version_2_database_gains_the_transform_memory(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    with StateStore(url) as store:
        store.upsert_harvested("h", [HarvestedRecord("oai:x:1", "2024-01-03T00:00:00Z", False)])
    engine = sa.create_engine(url)
    with engine.begin() as connection:  # what version 2 looked like
        _drop_transform_memory(connection)
        connection.execute(sa.text("UPDATE schema_version SET version = 2"))
    with StateStore(url) as store:
        item = TransformItem("oai:x:1", "2024-01-03T00:00:00Z", [], b"<record/>")
        item.data, item.pid, item.communities = {"metadata": {"title": "T"}}, "10.1/x", ["c"]
        store.save_transformed("h", [item], fingerprint="f1")
        stored = store.stored_transforms("h", {"oai:x:1": "2024-01-03T00:00:00Z"}, "f1")
        assert stored["oai:x:1"].pid == "10.1/x"
        assert store.get_record("oai:x:1", "h")["datestamp"] == "2024-01-03T00:00:00Z"
    with engine.begin() as connection:
        assert connection.execute(sa.text("SELECT version FROM schema_version")).scalar() == (
            SCHEMA_VERSION
        )
        indexes = {index["name"] for index in sa.inspect(connection).get_indexes("harvest_records")}
        assert "ix_harvest_records_memory" in indexes
    engine.dispose()


def test_a_version_1_database_gains_last_datestamp(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    with StateStore(url) as store:
        old_run = _run(store)
    engine = sa.create_engine(url)
    with engine.begin() as connection:  # what version 1 looked like
        connection.execute(sa.text("ALTER TABLE harvest_runs DROP COLUMN last_datestamp"))
        _drop_transform_memory(connection)
        connection.execute(sa.text("UPDATE schema_version SET version = 1"))

    with StateStore(url) as store:
        assert store.get_run(old_run)["last_datestamp"] is None
        run_id = _run(store)
        store.stage(
            run_id,
            "h",
            [
                HarvestedRecord("oai:x:2", "2024-01-03T00:00:00Z", False),
                HarvestedRecord("oai:x:1", "2024-01-05T10:00:00Z", False),
                HarvestedRecord("oai:x:3", "2024-01-04T00:00:00Z", False),
            ],
        )
        store.stage(run_id, "h", [HarvestedRecord("oai:x:4", "2024-01-01T00:00:00Z", False)])
        assert store.get_run(run_id)["last_datestamp"] == "2024-01-05T10:00:00Z"
    with engine.begin() as connection:
        assert connection.execute(sa.text("SELECT version FROM schema_version")).scalar() == (
            SCHEMA_VERSION
        )
    engine.dispose()


def test_a_version_4_database_remembers_the_chain_it_wrote_with(store_url: str) -> None:
    """What was written so far counts as made by the record's last transform chain."""
    day = "2024-01-03T00:00:00Z"
    with StateStore(store_url) as store:
        store.upsert_harvested("h", [HarvestedRecord("oai:x:1", day, False, xml=b"<r/>")])
        clean = TransformItem("oai:x:1", day, [], b"<r/>")
        clean.data = {"metadata": {"title": "T"}}
        store.save_transformed("h", [clean], fingerprint="f1")
        store.save_write_outcomes("h", [WriteOutcome("oai:x:1", Action.CREATE, "r1", 1)], {})
    _as_version(
        store_url,
        4,
        "DROP INDEX ix_harvest_records_memory",
        "ALTER TABLE harvest_records DROP COLUMN written_fingerprint",
    )
    with StateStore(store_url) as store:
        assert store.get_memories("h", ["oai:x:1"])["oai:x:1"].written_fingerprint == "f1"


def test_a_version_5_database_gains_the_kept_counts_of_pruned_runs(store_url: str) -> None:
    with StateStore(store_url) as store:
        run_id = _run(store)
    _as_version(
        store_url,
        5,
        "DROP INDEX ix_harvest_runs_unpruned",  # of version 10, on the column
        "ALTER TABLE harvest_runs DROP COLUMN record_counts",
    )
    with StateStore(store_url) as store:
        assert store.get_run(run_id)["record_counts"] is None  # its rows are all there
        assert store.run_status(run_id=run_id)["record_rows_pruned"] is False


def test_a_version_7_database_knows_the_dagster_run_of_each_run(store_url: str) -> None:
    """It kept the latest Dagster run on the run only: that one is linked."""
    with StateStore(store_url) as store:
        run_id = _run(store, dagster_run_id="the-dagster-run")
    _as_version(store_url, 7, "DROP TABLE harvest_run_dagster_runs")
    with StateStore(store_url) as store:
        [run] = store.runs_of_dagster_run("the-dagster-run")
    assert run["id"] == run_id and run["dagster_run_ids"] == ["the-dagster-run"]


def test_a_version_8_database_keeps_the_notices_of_runs(store_url: str) -> None:
    """Its runs kept none: they have none, and new ones are kept on them."""
    with StateStore(store_url) as store:
        run_id = _run(store)
    _as_version(store_url, 8, "ALTER TABLE harvest_runs DROP COLUMN notices")
    with StateStore(store_url) as store:
        assert store.get_run(run_id)["notices"] == []
        assert store.run_status(run_id=run_id)["notices"] == []
        assert store.add_run_notices(run_id, ["the source moved"]) == ["the source moved"]
        assert store.get_run(run_id)["notices"] == ["the source moved"]


_LARGEST_SERIAL = 2**31 - 1
# What version 12 made on PostgreSQL: SERIAL (32-bit) ids of the rows written per record.
_INTEGER_ROW_IDS = [
    statement
    for table in ("run_records", "record_errors")
    for statement in (
        f"ALTER TABLE {table} ALTER COLUMN id TYPE INTEGER",
        f"ALTER SEQUENCE {table}_id_seq AS INTEGER",
    )
]


def _next_row_ids_at_the_32_bit_limit(store_url: str, run_id: int) -> None:
    """The next id of run_records and record_errors is one past the largest a SERIAL gives:
    as after 2**31 rows staged and errors stored over the database's life."""
    engine = sa.create_engine(store_url)
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            for table in ("run_records", "record_errors"):
                connection.execute(sa.text(f"SELECT setval('{table}_id_seq', {_LARGEST_SERIAL})"))
        else:  # SQLite's next rowid is the largest one + 1
            now = "2024-01-01T00:00:00Z"
            connection.execute(
                sa.text(
                    "INSERT INTO run_records (id, run_id, harvester_id, identifier, status, "
                    f"attempts, updated_at) VALUES ({_LARGEST_SERIAL}, {run_id}, 'other', "
                    f"'oai:other:1', 'pending', 0, '{now}')"
                )
            )
            connection.execute(
                sa.text(
                    "INSERT INTO record_errors (id, harvester_id, identifier, stage, type, "
                    f"message, created_at) VALUES ({_LARGEST_SERIAL}, 'other', "
                    f"'oai:other:1', 'harvest', 'T', 'm', '{now}')"
                )
            )
    engine.dispose()


@pytest.mark.parametrize("made_by", ["version 12", "this version"])
def test_a_run_stages_past_the_32_bit_row_ids(store_url: str, made_by: str) -> None:
    """Before, on PostgreSQL, the per-record rows had SERIAL ids: after 2**31 of them (a
    source of millions of records harvested again and again) no page could be staged,
    every harvest failing with 'integer out of range'. SQLite's ids are 64 bits."""
    with StateStore(store_url) as store:
        run_id = _run(store)
    if made_by == "version 12":
        _as_version(store_url, 12, *(_INTEGER_ROW_IDS if "postgresql" in store_url else ()))
    _next_row_ids_at_the_32_bit_limit(store_url, run_id)
    failed = HarvestedRecord(
        "oai:x:2", "2024-01-01", False, error=RecordError(type="T", message="bad")
    )
    records = [HarvestedRecord("oai:x:1", "2024-01-01", False, xml=b"<r/>"), failed]

    with StateStore(store_url) as store:
        assert store.stage(run_id, "h", records) == (2, 0, 0)
        assert store.get_record("oai:x:2", "h")["errors"][0]["message"] == "bad"
    engine = sa.create_engine(store_url)
    with engine.connect() as connection:
        ids = connection.execute(
            sa.text("SELECT id FROM run_records WHERE harvester_id = 'h' ORDER BY id")
        ).scalars()
        assert list(ids) == [_LARGEST_SERIAL + 1, _LARGEST_SERIAL + 2]
    engine.dispose()


def test_an_upgrade_says_once_which_database_went_from_which_version(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An operator who upgrades in place learns that the database was migrated (and that the
    version they ran before cannot use it any more), once: not when it is made, not again."""
    with StateStore(store_url):
        pass
    assert "upgraded" not in caplog.text
    _as_version(store_url, 11)
    with StateStore(store_url):
        pass
    with StateStore(store_url):
        pass
    shown = sa.make_url(store_url).render_as_string(hide_password=True)
    upgrades = [r.getMessage() for r in caplog.records if "upgraded" in r.getMessage()]
    assert upgrades == [
        f"the state database {shown} was upgraded from schema version 11 to {SCHEMA_VERSION}; "
        "older oai-pipeline versions cannot use it any more"
    ]


def test_a_version_13_database_gains_the_index_of_gone_records(store_url: str) -> None:
    with StateStore(store_url) as store:
        store.upsert_harvested("h", [HarvestedRecord("oai:1", "2024-01-01", False, xml=b"<r/>")])
        store.mark_gone("h", {"oai:1"})
    _as_version(store_url, 13, "DROP INDEX ix_harvest_records_gone")
    with StateStore(store_url) as store:
        assert list(store.gone_identifier_chunks("h")) == [["oai:1"]]
        indexes = sa.inspect(store._engine).get_indexes("harvest_records")  # noqa: SLF001
    assert "ix_harvest_records_gone" in {index["name"] for index in indexes}


def test_a_version_16_database_counts_catch_up_lists_apart(store_url: str) -> None:
    """Its runs counted their catch-up lists with the token sweep's: none apart (0); a
    resumed one counts the next apart."""
    with StateStore(store_url) as store:
        run_id = _run(store)
    _as_version(
        store_url,
        16,
        *(f"ALTER TABLE harvest_runs DROP COLUMN {name}" for name in CATCH_UP_COUNTERS),
    )
    with StateStore(store_url) as store:
        counters = store.reconcile_counters(run_id)
        assert {name: counters[name] for name in CATCH_UP_COUNTERS} == dict.fromkeys(
            CATCH_UP_COUNTERS, 0
        )
        page = [HarvestedRecord("oai:x:1", "2024-01-01T00:00:00Z", False)]
        store.stage(run_id, "h", page, catch_up_listed=7)
        counters = store.reconcile_counters(run_id)
    assert (counters["catch_up_pages"], counters["catch_up_listed"]) == (1, 7)


def test_a_version_20_database_keeps_the_action_of_each_written_record(store_url: str) -> None:
    """Its runs kept each record's status only (the action unknown: None); a write after
    the upgrade keeps what it did, for a resumed attempt's report."""
    page = [HarvestedRecord(f"oai:x:{n}", "2024-01-01T00:00:00Z", False) for n in (1, 2)]
    with StateStore(store_url) as store:
        run_id = _run(store)
        store.stage(run_id, "h", page)
        store.set_record_status(run_id, {"oai:x:1": "imported"})
    _as_version(store_url, 20, "ALTER TABLE run_records DROP COLUMN action")
    with StateStore(store_url) as store:
        assert store.earlier_actions(run_id, ["oai:x:1"]) == {"oai:x:1": ("imported", None)}
        store.claim(run_id, identifiers=["oai:x:2"])
        outcome = WriteOutcome("oai:x:2", Action.RESTORE, "r2", 2)
        store.save_written(
            run_id,
            "h",
            {None: [outcome]},
            {},
            {},
            {"oai:x:2": "updated"},
            None,
            {"oai:x:2": "restore"},
        )
        assert store.earlier_actions(run_id, ["oai:x:2"]) == {"oai:x:2": ("updated", "restore")}


def test_a_version_21_database_keeps_the_one_memory_as_the_first_writers(store_url: str) -> None:
    """Version 21 kept one memory of each write, the last writer's: it becomes the first
    writer's (a harvester's only writer's: its own), and the others remember no write (their
    next plan takes each record from their target's state). Without a writer named on it,
    the memory was no writer's: every record of every harvester written anew."""
    day = "2024-01-03T00:00:00Z"
    page = [HarvestedRecord(f"oai:x:{n}", day, False) for n in (1, 2)]
    specs = {"one": ['oai-service{community:"c"}'], "two": ["oai-service", 'mirror{url:"x"}']}
    with StateStore(store_url) as store:
        for harvester_id, writers in specs.items():
            store.save_harvester(
                Harvester.model_construct(  # the mirror plug-in is not installed here
                    id=harvester_id,
                    base_url="https://example.org/oai",
                    metadata_prefix="oai_dc",
                    transformers=["oai_dc"],
                    writers=writers,
                )
            )
            store.upsert_harvested(harvester_id, page)
            outcome = WriteOutcome("oai:x:1", Action.CREATE, "r1", 1)
            store.save_write_outcomes(harvester_id, [outcome], {"oai:x:1": day})
    _as_version(
        store_url,
        21,
        "DROP INDEX ix_harvest_records_memory",
        "DROP TABLE writer_memories",
        "ALTER TABLE harvest_records DROP COLUMN written_by",
    )
    with StateStore(store_url) as store:
        for harvester_id, writers in specs.items():
            first, *others = writer_keys(writers)
            memories = store.get_memories(harvester_id, ["oai:x:1", "oai:x:2"], first)
            assert list(memories) == ["oai:x:1"]
            assert (memories["oai:x:1"].local_id, memories["oai:x:1"].datestamp) == ("r1", day)
            for other in others:
                assert store.get_memories(harvester_id, ["oai:x:1"], other) == {}
            # each writer's write after the upgrade is its own memory
            for index, key in enumerate(writer_keys(writers)):
                outcome = WriteOutcome("oai:x:2", Action.CREATE, f"r{index}", index + 5)
                store.save_write_outcomes(harvester_id, [outcome], {"oai:x:2": day}, writer=key)
            for index, key in enumerate(writer_keys(writers)):
                memory = store.get_memories(harvester_id, ["oai:x:2"], key)["oai:x:2"]
                assert (memory.local_id, memory.written_revision) == (f"r{index}", index + 5)


def _oai_dc_harvester() -> Harvester:
    """The harvester `h`, oai_dc, as stored (the writer plug-in is not installed here)."""
    return Harvester.model_construct(
        id="h",
        base_url="https://example.org/oai",
        metadata_prefix="oai_dc",
        transformers=["oai_dc"],
        writers=['oai-service{community:"c"}'],
    )


def test_a_version_23_database_knows_of_no_prefix_change_until_the_next(store_url: str) -> None:
    """Version 23 kept no change of metadata prefix: its records are judged as before (none
    held back from a reconcile, the staged copy of an unchanged record kept), and a change
    made after the upgrade holds back those harvested before it."""
    day = "2024-01-03T00:00:00Z"
    harvester = _oai_dc_harvester()
    with StateStore(store_url) as store:
        store.save_harvester(harvester)
        store.upsert_harvested("h", [HarvestedRecord("oai:x:1", day, False, xml=b"<r/>")])
    _as_version(store_url, 23, "ALTER TABLE harvesters DROP COLUMN prefix_changed")
    with StateStore(store_url) as store:
        assert store.harvested_before_prefix_change("h", ["oai:x:1"]) is None
        store.upsert_harvested("h", [HarvestedRecord("oai:x:1", day, False, xml=b"<r/>")])
        store.save_harvester(harvester.model_copy(update={"metadata_prefix": "oai_datacite"}))
        held_back = store.harvested_before_prefix_change("h", ["oai:x:1"])
        assert held_back == ({"oai_dc": 1}, ["oai:x:1"])
    with StateStore(store_url) as store:  # opened again: migrated once, nothing to redo
        assert store.get_harvester("h").metadata_prefix == "oai_datacite"
        held_back = store.harvested_before_prefix_change("h", ["oai:x:1"])
        assert held_back == ({"oai_dc": 1}, ["oai:x:1"])


def test_a_version_24_database_remembers_the_prefix_of_a_harvester_deleted_after(
    store_url: str,
) -> None:
    """Version 24 kept nothing of a deleted harvester: one deleted after the upgrade with its
    records kept, then created again in another prefix, holds those records back as an
    update of its prefix does."""
    harvester = _oai_dc_harvester()
    with StateStore(store_url) as store:
        store.save_harvester(harvester)
        store.upsert_harvested("h", [HarvestedRecord("oai:x:1", "2024-01-03", False, xml=b"<r/>")])
    _as_version(store_url, 24, "DROP TABLE deleted_harvesters")
    with StateStore(store_url) as store:
        store.delete_harvester("h")
        store.save_harvester(harvester.model_copy(update={"metadata_prefix": "oai_datacite"}))
        held_back = store.harvested_before_prefix_change("h", ["oai:x:1"])
        assert held_back == ({"oai_dc": 1}, ["oai:x:1"])


def test_a_version_25_database_knows_of_no_record_a_reconcile_kept_until_one_keeps_some(
    store_url: str,
) -> None:
    """Version 25's reconciles asked GetRecord for a sample and kept no record: after the
    upgrade none is known kept (the next reconcile asks for every vanished record afresh),
    and what a reconcile keeps then is remembered for the next one to ask for last."""
    with StateStore(store_url) as store:
        before, _ = store.start_reconcile_run("h")
        store.finish_reconcile_run(before)
    _as_version(store_url, 25, "ALTER TABLE reconcile_runs DROP COLUMN kept")
    with StateStore(store_url) as store:
        assert store.reconcile_kept("h") == []
        run_id, _ = store.start_reconcile_run("h")
        store.save_reconcile_kept(run_id, ["oai:x:2", "oai:x:1"])
        store.finish_reconcile_run(run_id)
    with StateStore(store_url) as store:  # opened again: migrated once, nothing to redo
        later, _ = store.start_reconcile_run("h")  # a new run, nothing kept yet: the last's
        assert later != run_id and store.reconcile_kept("h") == ["oai:x:2", "oai:x:1"]
        assert store.reconcile_kept("other") == []
