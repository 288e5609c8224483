"""`StateStore.rekey`: a harvester's identifiers under one prefix move to another in every
table that names a record by (harvester, identifier), in one transaction; on SQLite and
PostgreSQL (see conftest)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from oai_pipeline.errors import RecordError
from oai_pipeline.identifier_prefix import RekeyPending, RekeyRefused
from oai_pipeline.oai.types import HarvestedRecord
from oai_pipeline.state.schema import (
    harvest_record_data,
    harvest_record_xml,
    harvest_records,
    reconcile_runs,
    record_errors,
    run_records,
)
from oai_pipeline.state.store import StateStore
from oai_pipeline.sync.rules import Action, HarvestMemory
from oai_pipeline.targets.base import WriteOutcome
from oai_pipeline.transform.base import TransformItem

OLD = "oai:old.example.org:"
NEW = "oai:repo.example.org:"


def record(identifier: str) -> HarvestedRecord:
    return HarvestedRecord(
        identifier=identifier,
        datestamp="2024-01-01",
        deleted=False,
        set_specs=["s"],
        xml=f"<record id='{identifier}'/>".encode(),
    )


def identifiers(store: StateStore, table: sa.Table, harvester_id: str = "h") -> list[str]:
    with store._engine.connect() as conn:
        query = sa.select(table.c.identifier).where(table.c.harvester_id == harvester_id)
        return sorted(conn.execute(query).scalars())


def harvested(store: StateStore) -> int:
    """Harvester h: three records under OLD (written, one failed, staged in a run, found
    vanished by a reconcile), one under another prefix whose LIKE pattern OLD's would match
    on SQLite (case, `_` and `%` are no wildcards here); harvester `other` under OLD too."""
    names = [f"{OLD}1", f"{OLD}2", f"{OLD}3", "OAI:OLD.EXAMPLE.ORG:4", "oai:oldXexample.org:5"]
    store.upsert_harvested("h", [record(i) for i in names])
    store.upsert_harvested("other", [record(f"{OLD}1")])
    store.save_transformed(
        "h", [TransformItem(f"{OLD}1", "2024-01-01", [], b"<r/>", data={"title": "one"})]
    )
    failure = RecordError(type="missing_community", message="no community 'x'")
    store.save_write_outcomes(
        "h",
        [
            WriteOutcome(f"{OLD}1", Action.CREATE, "abcde-12345", 1),
            WriteOutcome(f"{OLD}2", Action.CREATE, None, None, error=failure),
        ],
        {f"{OLD}1": "2024-01-01", f"{OLD}2": "2024-01-01"},
    )
    run_id = store.create_run(
        "h", window_from=None, window_until=None, scale=None, max_records=0, options={}
    )
    store.stage(run_id, "h", [record(f"{OLD}1"), record(f"{OLD}2")])
    store.finish_run(run_id, "succeeded")
    reconcile_id, _ = store.start_reconcile_run("h")
    with store._engine.begin() as conn:
        conn.execute(
            reconcile_runs.update()
            .where(reconcile_runs.c.id == reconcile_id)
            .values(vanished=[f"{OLD}3"], actions={"delete": 1}, returned=[f"{OLD}2"])
        )
    return reconcile_id


def test_every_table_of_the_harvester_is_rewritten_and_nothing_else(store: StateStore) -> None:
    reconcile_id = harvested(store)
    planned = store.rekey_plan("h", OLD, NEW)
    assert (planned.count, planned.examples, planned.taken) == (
        3,
        [f"{OLD}1", f"{OLD}2", f"{OLD}3"],
        [],
    )

    assert store.rekey("h", OLD, NEW) == 3

    others = ["OAI:OLD.EXAMPLE.ORG:4", "oai:oldXexample.org:5"]
    assert identifiers(store, harvest_records) == [*others, f"{NEW}1", f"{NEW}2", f"{NEW}3"]
    assert identifiers(store, harvest_record_xml) == [*others, f"{NEW}1", f"{NEW}2", f"{NEW}3"]
    assert identifiers(store, harvest_record_data) == [f"{NEW}1"]
    assert identifiers(store, record_errors) == [f"{NEW}2"]
    assert identifiers(store, run_records) == [f"{NEW}1", f"{NEW}2"]
    assert identifiers(store, harvest_records, "other") == [f"{OLD}1"]
    # what the next harvest of the new identifiers finds: the record, its write, its error
    assert store.get_memories("h", [f"{NEW}1"]) == {
        f"{NEW}1": HarvestMemory("2024-01-01", False, "abcde-12345", 1, deleted=False)
    }
    assert store.get_record(f"{NEW}1", harvester_id="h")["data"] == {"title": "one"}
    assert store.failed_identifiers("h") == [f"{NEW}2"]
    with store._engine.connect() as conn:
        saved = conn.execute(
            sa.select(reconcile_runs).where(reconcile_runs.c.id == reconcile_id)
        ).one()
    assert (saved.vanished, saved.returned) == ([f"{NEW}3"], [f"{NEW}2"])
    # run again: nothing left to rewrite
    assert store.rekey_plan("h", OLD, NEW).count == 0
    assert store.rekey("h", OLD, NEW) == 0


def test_the_records_a_reconcile_kept_are_rekeyed(store: StateStore) -> None:
    """The vanished records a reconcile kept (GetRecord still served them) are asked for
    last by the next: under their old identifiers, they were asked for first again."""
    reconcile_id = harvested(store)
    store.save_reconcile_kept(reconcile_id, [f"{OLD}3", "OAI:OLD.EXAMPLE.ORG:4"])

    store.rekey("h", OLD, NEW)

    assert store.reconcile_kept("h") == [f"{NEW}3", "OAI:OLD.EXAMPLE.ORG:4"]


def test_refused_when_a_new_identifier_is_harvested_already(store: StateStore) -> None:
    harvested(store)
    store.upsert_harvested("h", [record(f"{NEW}2")])  # the moved source, harvested already

    assert store.rekey_plan("h", OLD, NEW).taken == [f"{OLD}2"]
    with pytest.raises(RekeyRefused, match="under 'oai:repo.example.org:' already"):
        store.rekey("h", OLD, NEW)
    assert identifiers(store, harvest_records) == sorted(
        ["OAI:OLD.EXAMPLE.ORG:4", "oai:oldXexample.org:5", f"{OLD}1", f"{OLD}2", f"{OLD}3"]
        + [f"{NEW}2"]
    )


def _new_run(store: StateStore) -> int:
    return store.create_run(
        "h", window_from=None, window_until=None, scale=None, max_records=0, options={}
    )


def test_a_rekey_is_saved_for_the_runs_that_listed_before_it(store: StateStore) -> None:
    """The runs harvested before a rekey made Parquet partitions of the old identifiers: the
    rekey is saved with them (in its transaction), and not for a run created after it; a rerun
    that finds nothing left to rewrite saves none again."""
    harvested(store)
    before = _new_run(store)
    assert store.rekeys_after_run("h", before) == []

    store.rekey("h", OLD, NEW)
    store.rekey("h", OLD, NEW)  # a rerun (of a rekey killed after the state store's rewrite)
    after = _new_run(store)

    [saved] = store.rekeys_after_run("h", before)
    assert (saved.old_prefix, saved.new_prefix) == (OLD, NEW)
    assert store.rekeys_after_run("h", after) == []
    assert store.rekeys_after_run("other", before) == []


def _as_version(store_url: str, version: int, table: str) -> None:
    """Make the database look as `version` left it: without `table`, which came after."""
    engine = sa.create_engine(store_url)
    with engine.begin() as connection:
        connection.execute(sa.text(f"DROP TABLE {table}"))
        connection.execute(sa.text(f"UPDATE schema_version SET version = {version}"))
    engine.dispose()


def test_a_version_19_database_gains_the_table_of_rekeys(store_url: str) -> None:
    with StateStore(store_url) as store:
        harvested(store)
        before = _new_run(store)
    _as_version(store_url, 19, "identifier_rekeys")
    with StateStore(store_url) as store:
        store.rekey("h", OLD, NEW)
        assert [r.new_prefix for r in store.rekeys_after_run("h", before)] == [NEW]


def test_a_rekey_is_pending_from_its_beginning_until_the_state_stores_rewrite(
    store: StateStore,
) -> None:
    """Saved before the targets are rewritten, a rekey is pending until the state store's
    rewrite, which ends it in its transaction; a harvest of the harvester is refused while it
    is pending, another harvester's is not. A harvester deleted with its records ends it."""
    harvested(store)
    store.begin_rekey("h", OLD, NEW)

    pending = store.pending_rekey("h")
    assert pending is not None and (pending.old_prefix, pending.new_prefix) == (OLD, NEW)
    assert pending.allows(OLD, NEW) and pending.allows(NEW, OLD)
    assert not pending.allows(OLD, "oai:elsewhere.example.org:")
    with pytest.raises(RekeyPending, match=r"^harvest refused: the rekey of harvester h from"):
        store.refuse_while_rekey_pending("h", "harvest")
    store.refuse_while_rekey_pending("other", "harvest")

    store.rekey("h", OLD, NEW)
    assert store.pending_rekey("h") is None
    store.refuse_while_rekey_pending("h", "harvest")

    store.begin_rekey("h", NEW, OLD)
    store.delete_harvester("h", delete_records=True)
    assert store.pending_rekey("h") is None


def test_a_version_22_database_gains_the_table_of_pending_rekeys(store_url: str) -> None:
    with StateStore(store_url) as store:
        harvested(store)
    _as_version(store_url, 22, "pending_rekeys")
    with StateStore(store_url) as store:
        assert store.pending_rekey("h") is None
        store.begin_rekey("h", OLD, NEW)
        assert store.pending_rekey("h") is not None
        store.rekey("h", OLD, NEW)
        assert store.pending_rekey("h") is None
