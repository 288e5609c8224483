"""What users of the embedded repository do, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from oai_pipeline import json_codec
from oai_pipeline.errors import ConfigurationError, PipelineError
from oai_pipeline.sync.rules import LocalState
from oai_pipeline.targets.base import SourceKey
from oai_pipeline.targets.embedded.engine import create_target_engine
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline.targets.embedded.schema import (
    SCHEMA_VERSION,
    current_version,
    records,
    revisions,
)
from oai_pipeline.targets.embedded.transaction import NewRecord
from oai_pipeline_tests.support import listening


def record(title: str = "A title", doi: str | None = None, communities: list[str] | None = None):
    data: dict[str, Any] = {"metadata": {"title": title, "creators": [{"name": "Doe"}]}}
    if doi:
        data["pids"] = {"doi": {"identifier": doi, "provider": "external"}}
    if communities is not None:
        data["parent"] = {"communities": {"ids": communities}}
    return data


@pytest.fixture
def repo(target_url: str) -> Iterator[EmbeddedRepository]:
    with EmbeddedRepository(target_url) as repository:
        yield repository


def test_schema_is_created_once_and_reopening_changes_nothing(
    repo: EmbeddedRepository, target_url: str
) -> None:
    record_id = repo.deposit(record(), publish=True)
    with EmbeddedRepository(target_url) as again:
        assert again.show(record_id)["state"] == "live"
        with again.engine.connect() as connection:
            assert current_version(connection) == SCHEMA_VERSION


def as_version(repository: EmbeddedRepository, version: int, *statements: str) -> None:
    """Make the target look as it did at schema `version` (`statements` undo the later steps),
    from another engine: the repository's own refuses writes once the version changed. Before
    version 12 the drafts' claims index was not there (its columns could not be dropped)."""
    if version < 12:
        statements = ("DROP INDEX IF EXISTS ix_target_drafts_claims", *statements)
    as_older = older_version_engine(repository)
    try:
        with as_older.begin() as connection:
            for statement in statements:
                connection.execute(sa.text(statement))
            connection.execute(sa.text("UPDATE schema_version SET version = :v"), {"v": version})
    finally:
        as_older.dispose()


def older_version_engine(repository: EmbeddedRepository) -> sa.Engine:
    """An engine on the repository's database, as a process of an older version opens it."""
    return create_target_engine(repository.url)


def test_a_version_1_target_gains_the_lookup_index(target_url: str) -> None:
    with EmbeddedRepository(target_url) as first:
        record_id = first.deposit(record(), publish=True)
        as_version(first, 1, "DROP INDEX ix_target_records_lookup")
    with EmbeddedRepository(target_url) as again:
        assert again.show(record_id)["state"] == "live"
        with again.engine.connect() as connection:
            assert current_version(connection) == SCHEMA_VERSION
            indexes = sa.inspect(connection).get_indexes("target_records")
        assert "ix_target_records_lookup" in {index["name"] for index in indexes}


def test_a_doi_is_one_doi_whatever_its_case(repo: EmbeddedRepository) -> None:
    record_id = repo.deposit(record(doi="10.1234/ABC-Def"), publish=True)
    assert repo.show(record_id)["doi"] == "10.1234/abc-def"
    with pytest.raises(PipelineError, match="already used"):
        repo.deposit(record(doi="10.1234/abc-DEF"), publish=True)
    found = repo.lookup("h", [SourceKey("oai:x:1", "10.1234/ABC-DEF")])
    assert found["oai:x:1"].local_id == record_id and found["oai:x:1"].taken_over


@pytest.mark.parametrize(
    "typed", ["https://doi.org/10.1234/ABC-Def", "doi:10.1234/abc-def", "info:doi/10.1234/ABC-DEF"]
)
def test_a_doi_is_one_doi_whatever_the_form_a_user_typed(
    repo: EmbeddedRepository, typed: str
) -> None:
    record_id = repo.deposit(record(doi=typed), publish=True)
    assert repo.show(record_id)["doi"] == "10.1234/abc-def"
    found = repo.lookup("h", [SourceKey("oai:x:1", "10.1234/abc-def")])
    assert found["oai:x:1"].local_id == record_id and found["oai:x:1"].taken_over


def test_a_version_5_target_keeps_its_dois_bare(target_url: str) -> None:
    with EmbeddedRepository(target_url) as first:
        url = first.deposit(record(doi="10.1234/a"), publish=True)
        prefixed = first.deposit(record(doi="10.1234/b"), publish=True)
        twin = first.deposit(record(doi="10.1234/c"), publish=True)
        other = first.deposit(record(), publish=True)
        as_version(  # DOIs as version 5 stored them: lower case, resolver prefix kept
            first,
            5,
            f"UPDATE target_records SET doi = 'https://doi.org/10.1234/a' WHERE id = '{url}'",
            f"UPDATE target_records SET doi = 'doi:10.1234/b' WHERE id = '{prefixed}'",
            f"UPDATE target_records SET doi = 'doi:10.1234/c' WHERE id = '{other}'",
        )
    with EmbeddedRepository(target_url) as again, again.engine.connect() as connection:
        assert current_version(connection) == SCHEMA_VERSION
        stored = dict(connection.execute(sa.text("SELECT id, doi FROM target_records")).all())
    # Made bare where that is free; a duplicate that predates the fix stays as it was.
    assert stored == {
        url: "10.1234/a",
        prefixed: "10.1234/b",
        twin: "10.1234/c",
        other: "doi:10.1234/c",
    }


def test_a_version_6_target_keeps_the_pids_of_its_drafts(target_url: str) -> None:
    with EmbeddedRepository(target_url) as first:
        new = first.deposit(record(doi="10.1234/a"))
        edited = first.deposit(record(doi="10.1234/b"), publish=True)
        first.edit(edited, {"metadata.title": "Edited"})
        as_version(first, 6, "ALTER TABLE target_drafts DROP COLUMN doi")
    with EmbeddedRepository(target_url) as again:
        again.publish(new)
        again.publish(edited)
        assert [again.show(i)["doi"] for i in (new, edited)] == ["10.1234/a", "10.1234/b"]


def test_a_version_2_target_keeps_its_dois_in_normal_form(target_url: str) -> None:
    with EmbeddedRepository(target_url) as first:
        upper = first.deposit(record(doi="10.1234/a"), publish=True)
        twin = first.deposit(record(doi="10.1234/b"), publish=True)
        other = first.deposit(record(), publish=True)
        as_version(  # DOIs as version 2 stored them, as typed
            first,
            2,
            f"UPDATE target_records SET doi = '10.1234/A' WHERE id = '{upper}'",
            f"UPDATE target_records SET doi = '10.1234/B' WHERE id = '{other}'",
        )
    with EmbeddedRepository(target_url) as again, again.engine.connect() as connection:
        assert current_version(connection) == SCHEMA_VERSION
        stored = dict(connection.execute(sa.text("SELECT id, doi FROM target_records")).all())
    # Lowered where that is free; a duplicate that predates the fix stays as it was.
    assert stored == {upper: "10.1234/a", twin: "10.1234/b", other: "10.1234/B"}


@pytest.mark.parametrize(
    ("version", "table", "flag", "index"),
    [
        (3, "target_drafts", "harvested", None),
        (4, "target_records", "changed_locally", "ix_target_records_changed"),
    ],
)
def test_an_older_target_gains_a_flag_false_for_its_rows(
    target_url: str, version: int, table: str, flag: str, index: str | None
) -> None:
    with EmbeddedRepository(target_url) as first:
        record_id = first.deposit(record())
        undo = [f"DROP INDEX {index}"] if index else []
        as_version(first, version, *undo, f"ALTER TABLE {table} DROP COLUMN {flag}")
    with EmbeddedRepository(target_url) as again:
        assert again.show(record_id)["draft_kind"] == "new"
        with again.engine.connect() as connection:
            assert current_version(connection) == SCHEMA_VERSION
            flags = connection.execute(sa.text(f"SELECT {flag} FROM {table}")).scalars()
            assert [bool(value) for value in flags] == [False]
            names = {i["name"] for i in sa.inspect(connection).get_indexes(table)}
            assert index is None or index in names


def test_an_upgrade_says_once_which_target_went_from_which_version(
    target_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Said once, when it happens: not when the target is made, not at the next opening."""
    with EmbeddedRepository(target_url) as first:
        record_id = first.deposit(record(), publish=True)
        assert "upgraded" not in caplog.text
        as_version(first, 5)
    with EmbeddedRepository(target_url), EmbeddedRepository(target_url) as again:
        assert again.show(record_id)["state"] == "live"
    shown = sa.make_url(target_url).render_as_string(hide_password=True)
    upgrades = [r.getMessage() for r in caplog.records if "upgraded" in r.getMessage()]
    assert upgrades == [
        f"the target database {shown} was upgraded from schema version 5 to {SCHEMA_VERSION}; "
        "older oai-pipeline versions cannot use it any more"
    ]


def test_deposit_a_draft_then_publish(repo: EmbeddedRepository) -> None:
    record_id = repo.deposit(record(doi="10.1234/a"))
    shown = repo.show(record_id)
    assert (shown["state"], shown["revision"], shown["data"]) == ("draft", 0, None)
    assert shown["draft"]["metadata"]["title"] == "A title"
    assert shown["draft_kind"] == "new"
    assert shown["doi"] == "10.1234/a"
    repo.publish(record_id)
    shown = repo.show(record_id)
    assert (shown["state"], shown["revision"], shown["draft"]) == ("live", 1, None)
    assert shown["data"]["metadata"]["title"] == "A title"
    with pytest.raises(PipelineError, match="no draft to publish"):
        repo.publish(record_id)


def test_edit_makes_an_edit_draft_until_published(repo: EmbeddedRepository) -> None:
    record_id = repo.deposit(record(), publish=True)
    repo.edit(record_id, {"metadata.title": "Edited", "metadata.creators.0.name": "Roe"})
    shown = repo.show(record_id)
    assert shown["data"]["metadata"]["title"] == "A title"
    assert shown["draft_kind"] == "edit"
    assert shown["draft"]["metadata"] == {"title": "Edited", "creators": [{"name": "Roe"}]}
    repo.edit(record_id, {"metadata.version": "v2"})  # the same draft, edited further
    assert repo.show(record_id)["draft"]["metadata"]["title"] == "Edited"
    repo.publish(record_id)
    shown = repo.show(record_id)
    assert shown["revision"] == 2
    assert shown["data"]["metadata"]["version"] == "v2"


def test_edit_a_new_draft_and_bad_field_paths(repo: EmbeddedRepository) -> None:
    record_id = repo.deposit(record())
    repo.edit(record_id, {"pids.doi.identifier": "10.1234/new"})
    assert repo.show(record_id)["doi"] == "10.1234/new"
    with pytest.raises(PipelineError, match="not an object"):
        repo.edit(record_id, {"metadata.title.x": 1})
    with pytest.raises(PipelineError, match="not an item"):
        repo.edit(record_id, {"metadata.creators.5.name": "x"})
    with pytest.raises(PipelineError, match="field path"):
        repo.edit(record_id, {"metadata..title": "x"})


def test_delete_makes_a_tombstone_and_restore_brings_it_back(repo: EmbeddedRepository) -> None:
    record_id = repo.deposit(record(), publish=True)
    repo.delete(record_id, note="spam")
    shown = repo.show(record_id)
    assert (shown["state"], shown["tombstone_note"], shown["purge"]) == ("tombstone", "spam", False)
    repo.delete(record_id, purge=True)  # marking a tombstone for purge keeps its note
    shown = repo.show(record_id)
    assert (shown["tombstone_note"], shown["purge"]) == ("spam", True)
    with pytest.raises(PipelineError, match="restore it before editing"):
        repo.edit(record_id, {"metadata.title": "x"})
    repo.restore(record_id)
    shown = repo.show(record_id)
    assert (shown["state"], shown["tombstone_note"], shown["purge"]) == ("live", None, False)
    assert shown["data"]["metadata"]["title"] == "A title"


def test_deleting_a_draft_discards_it(repo: EmbeddedRepository) -> None:
    record_id = repo.deposit(record())
    repo.delete(record_id)
    with pytest.raises(PipelineError, match="no record"):
        repo.show(record_id)


def test_hard_delete_keeps_revisions_and_restore_revives_the_same_id(
    repo: EmbeddedRepository,
) -> None:
    record_id = repo.deposit(record(doi="10.1234/h"), publish=True)
    repo.edit(record_id, {"metadata.title": "Second"})
    repo.publish(record_id)
    repo.hard_delete(record_id)
    shown = repo.show(record_id)
    assert (shown["state"], shown["data"], shown["draft"]) == ("deleted", None, None)
    assert repo.list(state="deleted")[0]["id"] == record_id
    assert repo.stats() == {"records": 0, "source_identifiers": 0}
    with pytest.raises(PipelineError, match="already hard deleted"):
        repo.hard_delete(record_id)
    repo.restore(record_id)
    shown = repo.show(record_id)
    assert (shown["id"], shown["state"]) == (record_id, "live")
    assert shown["data"]["metadata"]["title"] == "Second"
    assert shown["doi"] == "10.1234/h"


def test_the_doi_is_unique_among_records_that_count(repo: EmbeddedRepository) -> None:
    first = repo.deposit(record(doi="10.1234/u"), publish=True)
    with pytest.raises(PipelineError, match=f"already used by record {first}"):
        repo.deposit(record(doi="10.1234/u"))
    repo.delete(first, purge=True)  # a record marked for purge holds its DOI no more
    second = repo.deposit(record(doi="10.1234/u"), publish=True)
    with pytest.raises(PipelineError, match=f"already used by record {second}"):
        repo.restore(first)
    repo.hard_delete(second)
    repo.restore(first)
    assert repo.show(first)["state"] == "live"


def test_unknown_ids_and_states_are_one_line_errors(repo: EmbeddedRepository) -> None:
    for operation in (repo.show, repo.publish, repo.delete, repo.hard_delete, repo.restore):
        with pytest.raises(PipelineError, match="no record 'nope'"):
            operation("nope")
    with pytest.raises(PipelineError, match="unknown state"):
        repo.list(state="gone")
    live = repo.deposit(record(), publish=True)
    with pytest.raises(PipelineError, match="not deleted"):
        repo.restore(live)


def test_communities_and_memberships(repo: EmbeddedRepository) -> None:
    parent = repo.create_community("cesnet")
    child = repo.create_community("cesnet-data", parent="cesnet")
    assert child["parent"] == parent["id"]
    assert {c["slug"] for c in repo.list_communities()} == {"cesnet", "cesnet-data"}
    with pytest.raises(PipelineError, match="already exists"):
        repo.create_community("cesnet")
    with pytest.raises(PipelineError, match="parent community 'nope' does not exist"):
        repo.create_community("x", parent="nope")
    record_id = repo.deposit(record(communities=[child["id"]]), publish=True)
    shown = repo.show(record_id)
    assert shown["communities"] == ["cesnet-data", "cesnet"]
    assert shown["default_community"] == "cesnet-data"
    with pytest.raises(PipelineError, match="community 'nope' does not exist"):
        repo.deposit(record(communities=["nope"]))
    assert len(repo.list()) == 1


def test_list_filters_and_stats(repo: EmbeddedRepository) -> None:
    drafted = repo.deposit(record("Draft"))
    live = repo.deposit(record("Live"), publish=True)
    gone = repo.deposit(record("Gone"), publish=True)
    repo.delete(gone)
    assert [r["id"] for r in repo.list()] == [drafted, live, gone]
    assert [r["title"] for r in repo.list(state="live")] == ["Live"]
    assert [r["id"] for r in repo.list(state="draft")] == [drafted]
    assert [r["id"] for r in repo.list(state="tombstone")] == [gone]
    assert repo.list(harvester="h") == []
    assert repo.stats() == {"records": 3, "source_identifiers": 0}
    assert repo.stats("h") == {"records": 0, "source_identifiers": 0}


@contextmanager
def _statements(
    repo: EmbeddedRepository, wanted: Callable[[str], bool]
) -> Iterator[list[tuple[str, Any]]]:
    """The statements (and their parameters) sent to the target within, those `wanted`."""
    sent: list[tuple[str, Any]] = []

    def grab(_conn, _cursor, statement, parameters, _context, _many) -> None:  # noqa: ANN001
        if wanted(statement):
            sent.append((statement, parameters))

    with listening(repo.engine, "before_cursor_execute", grab):
        yield sent


def _reads_records(statement: str) -> bool:
    return statement.startswith("SELECT") and "FROM target_records" in statement


def _plan(repo: EmbeddedRepository, statement: str, parameters: Any) -> str:
    """SQLite's query plan of a statement sent (`_statements`), its steps joined by ` | `."""
    with repo.engine.connect() as connection:
        return " | ".join(
            row[3]
            for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
        )


def _harvested(repo: EmbeddedRepository, harvester: str, identifier: str, doi: str | None) -> str:
    with repo.transaction() as tx:
        record_id = tx.create(
            record(doi=doi), doi=doi, harvester_id=harvester, source_identifier=identifier
        )
        tx.publish(record_id)
    return record_id


def test_lookup_by_source_identifier_then_by_pid(repo: EmbeddedRepository) -> None:
    mine = _harvested(repo, "h", "oai:x:1", "10.1234/mine")
    _harvested(repo, "other", "oai:y:1", "10.1234/other")
    users = repo.deposit(record(doi="10.1234/user"), publish=True)
    found = repo.lookup(
        "h",
        [
            SourceKey("oai:x:1", "10.1234/mine"),
            SourceKey("oai:x:2", "10.1234/user"),
            SourceKey("oai:x:3", "10.1234/other"),  # another harvester's record: not taken
            SourceKey("oai:x:4"),
        ],
    )
    assert (found["oai:x:1"].local_id, found["oai:x:1"].taken_over) == (mine, False)
    assert found["oai:x:1"].state is LocalState.LIVE
    assert found["oai:x:1"].revision == 1
    assert (found["oai:x:2"].local_id, found["oai:x:2"].taken_over) == (users, True)
    assert found["oai:x:3"].state is LocalState.MISSING
    assert found["oai:x:4"].state is LocalState.MISSING
    repo.edit(mine, {"metadata.title": "x"})
    assert repo.lookup("h", [SourceKey("oai:x:1")])["oai:x:1"].has_edit_draft
    assert repo.stats("h") == {"records": 1, "source_identifiers": 1}
    assert repo.stats() == {"records": 3, "source_identifiers": 2}


def test_lookup_of_many_keys_at_once(repo: EmbeddedRepository) -> None:
    keys = [SourceKey(f"oai:x:{i}", f"10.1234/{i}") for i in range(1200)]
    found = repo.lookup("h", keys)
    assert len(found) == 1200
    assert {r.state for r in found.values()} == {LocalState.MISSING}


def test_a_lookup_searches_the_batchs_keys_not_the_harvesters_records(tmp_path) -> None:
    """The lookup by DOI (of records missing by source identifier: all of a first harvest)
    read every record of the harvester, by source_harvester, once per batch: a harvest's
    write grew with the square of its records (30,000: a third of the write stage). Each
    query now searches the batch's identifiers or DOIs in an index (SQLite's plan)."""
    with EmbeddedRepository(f"sqlite:///{tmp_path / 'target.sqlite'}") as repo:
        for n in range(3):
            _harvested(repo, "h", f"oai:{n}", f"10.1234/{n}")
        # A batch's worth of DOIs: SQLite searches the DOI index for a few of them anyway.
        keys = [SourceKey("oai:0", "10.1234/0")]
        keys += [SourceKey(f"oai:new:{n}", f"10.1234/new.{n}") for n in range(500)]
        with _statements(repo, _reads_records) as sent:
            found = repo.lookup("h", keys)
        assert found["oai:new:0"].state is LocalState.MISSING
        assert any("doi IN" in statement for statement, _ in sent)
        for statement, parameters in sent:
            plan = _plan(repo, statement, parameters)
            assert "(source_harvester=?)" not in plan, plan
            assert "SCAN target_records" not in plan, plan


def test_records_changed_locally_are_found_from_their_partial_index(tmp_path) -> None:
    """Each write stage asks which of the harvester's records a user changed: the query named
    the flag as `changed_locally = 1`, which SQLite does not match to the partial index's
    `WHERE changed_locally`, and read every record of the harvester instead."""
    with EmbeddedRepository(f"sqlite:///{tmp_path / 'target.sqlite'}") as repo:
        ids = [_harvested(repo, "h", f"oai:{n}", None) for n in range(3)]
        repo.edit(ids[1], {"metadata.title": "changed"})
        with _statements(repo, _reads_records) as sent, repo.transaction(read_only=True) as tx:
            assert tx.changed_locally("h") == ["oai:1"]
        [(statement, parameters)] = [(s, p) for s, p in sent if "changed_locally" in s]
        plan = _plan(repo, statement, parameters)
        assert "ix_target_records_changed" in plan, plan


def test_a_bad_url_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="not usable"):
        EmbeddedRepository("nosuchdb://x")


def test_sqlite_file_uses_wal_and_foreign_keys(tmp_path) -> None:
    repository = EmbeddedRepository(f"sqlite:///{tmp_path / 'sub' / 't.sqlite'}")
    with repository, repository.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        tables = set(sa.inspect(connection).get_table_names())
    assert {"target_records", "target_drafts", "target_revisions"} <= tables


def test_reading_does_not_wait_for_a_writer(repo: EmbeddedRepository) -> None:
    record_id = repo.deposit(record(), publish=True)
    with repo.transaction() as writing:  # a harvest batch holds the write lock
        writing.tombstone(record_id, note=None, purge=False)
        assert repo.show(record_id)["state"] == "live"  # readers see the last commit
        assert repo.stats() == {"records": 1, "source_identifiers": 0}
    assert repo.show(record_id)["state"] == "tombstone"


@pytest.mark.postgres
def test_a_restarted_postgresql_is_used_again_at_once(postgres_url: str) -> None:
    """Its pooled connections are dead after it: the next write (a harvest's batch) failed
    with 'server closed the connection unexpectedly' although the server was back."""
    from oai_pipeline_tests.postgres import drop_connections, fresh_database

    url = fresh_database(postgres_url, "target")
    with EmbeddedRepository(url) as repository:
        first = repository.deposit(record("Before"), publish=True)
        drop_connections(url)
        second = repository.deposit(record("After"), publish=True)
        assert [repository.show(r)["data"]["metadata"]["title"] for r in (first, second)] == [
            "Before",
            "After",
        ]


def test_a_listing_is_a_page_oldest_first(repo: EmbeddedRepository) -> None:
    first, second, third = (repo.deposit(record(f"R{n}"), publish=True) for n in range(3))
    assert [r["id"] for r in repo.list(limit=2)] == [first, second]
    assert [r["id"] for r in repo.list(state="live", limit=1)] == [first]
    assert [r["id"] for r in repo.list(limit=5)] == [first, second, third]


@pytest.mark.parametrize(
    "filters",
    [
        pytest.param({}, id="all"),
        pytest.param({"harvester": "h"}, id="harvester"),
        pytest.param({"harvester": "h", "state": "tombstone"}, id="harvester-state"),
    ],
)
def test_a_listing_page_is_read_in_index_order_and_stops_at_its_limit(
    tmp_path, filters: dict[str, str]
) -> None:
    """`target list` of a target of a million records read every record into memory (37 s,
    2.3 GB) and sorted them by creation: it reads its page from an index, in order, and the
    query stops at the limit (SQLite's plan: no sort of the whole table)."""
    with EmbeddedRepository(f"sqlite:///{tmp_path / 'target.sqlite'}") as repo:
        for n in range(3):
            _harvested(repo, "h", f"oai:{n}", None)
        with _statements(repo, _reads_records) as sent:
            assert len(repo.list(limit=2, **filters)) == (0 if "state" in filters else 2)
        [(statement, parameters)] = sent
        assert "LIMIT" in statement
        plan = _plan(repo, statement, parameters)
        assert "TEMP B-TREE" not in plan, plan
        assert "ix_target_records_" in plan and "created" in plan, plan


def test_a_version_7_target_gains_the_listing_indexes(target_url: str) -> None:
    with EmbeddedRepository(target_url) as first:
        record_id = first.deposit(record(), publish=True)
        as_version(
            first,
            7,
            "DROP INDEX ix_target_records_created",
            "DROP INDEX ix_target_records_harvester_created",
        )
    with EmbeddedRepository(target_url) as again:
        assert [r["id"] for r in again.list(limit=1)] == [record_id]
        with again.engine.connect() as connection:
            assert current_version(connection) == SCHEMA_VERSION
            indexes = sa.inspect(connection).get_indexes("target_records")
        names = {index["name"] for index in indexes}
        assert {"ix_target_records_created", "ix_target_records_harvester_created"} <= names


@pytest.mark.parametrize(
    "filters",
    [
        pytest.param({"state": "deleted"}, id="state"),
        pytest.param({"harvester": "h", "state": "tombstone"}, id="harvester-state"),
    ],
)
def test_a_listing_of_a_state_reads_that_states_records(tmp_path, filters: dict) -> None:
    """`target list --state deleted` read the creation index from the first record and kept
    those of the state: with none in it, every record of the target (0.46 s at 100,000
    records). It reads the state's records, in order, from their own index (version 9)."""
    with EmbeddedRepository(f"sqlite:///{tmp_path / 'target.sqlite'}") as repo:
        ids = [_harvested(repo, "h", f"oai:{n}", None) for n in range(3)]
        with repo.transaction() as tx:
            tx.tombstone(ids[1], note=None, purge=False)
        with _statements(repo, lambda s: s.startswith("SELECT") and "LIMIT" in s) as sent:
            listed = repo.list(limit=2, **filters)
        assert [r["id"] for r in listed] == ([ids[1]] if filters["state"] == "tombstone" else [])
        [(statement, parameters)] = [(s, p) for s, p in sent if "ORDER BY" in s]
        plan = _plan(repo, statement, parameters)
        assert "TEMP B-TREE" not in plan, plan
        if "harvester" in filters:  # that harvester's, not the state's of every harvester
            index = "ix_target_records_harvester_state_created (source_harvester=? AND state=?)"
        else:
            index = "ix_target_records_state_created (state=?)"
        assert index in plan, plan


@pytest.mark.parametrize(
    ("version", "table", "index"),
    [
        (8, "target_records", "ix_target_records_state_created"),
        (9, "target_records", "ix_target_records_harvester_state_created"),
        (11, "target_drafts", "ix_target_drafts_claims"),
    ],
)
def test_an_older_target_gains_the_index_of_the_next_version(
    target_url: str, version: int, table: str, index: str
) -> None:
    with EmbeddedRepository(target_url) as first:
        record_id = first.deposit(record(), publish=True)
        as_version(first, version, f"DROP INDEX IF EXISTS {index}")
    with EmbeddedRepository(target_url) as again:
        assert [r["id"] for r in again.list(state="live", limit=1)] == [record_id]
        with again.engine.connect() as connection:
            assert current_version(connection) == SCHEMA_VERSION
            indexes = sa.inspect(connection).get_indexes(table)
        assert index in {i["name"] for i in indexes}


def test_a_check_of_the_dois_drafts_under_review_name_reads_only_those_drafts(
    tmp_path,
) -> None:
    """A harvested draft's new DOI is checked against the DOIs published records' harvested
    edit drafts name (`draft_claims`): from their own index (version 12), not by reading
    every draft of a target that leaves the harvest as drafts."""
    with EmbeddedRepository(f"sqlite:///{tmp_path / 'target.sqlite'}") as repo:
        published = _harvested(repo, "h", "oai:0", "10.1/held")
        with repo.transaction() as tx:
            tx.save_draft(published, record(doi="10.1/new"), doi="10.1/new", harvested=True)
        claims = _statements(repo, lambda s: "target_drafts.kind" in s)
        with claims as sent, repo.transaction(read_only=True) as tx:
            assert tx.draft_claims(["10.1/new", "10.1/other"]) == {"10.1/new": published}
            assert tx.draft_claims(["10.1/new"], besides=published) == {}
        assert len(sent) == 2
        for statement, parameters in sent:
            plan = _plan(repo, statement, parameters)
            assert "ix_target_drafts_claims (doi=?)" in plan, plan


def test_a_harvesters_listing_of_a_state_skips_other_harvesters_records(tmp_path) -> None:
    """`target list --harvester h --state tombstone` read the tombstones of every harvester
    from the state index to keep h's: all of them when h has none (77 ms at a million
    records). It reads h's records of the state from their own index (version 10)."""
    with EmbeddedRepository(f"sqlite:///{tmp_path / 'target.sqlite'}") as repo:
        others = [_harvested(repo, "other", f"oai:{n}", None) for n in range(3)]
        mine = _harvested(repo, "h", "oai:0", None)
        with repo.transaction() as tx:
            for record_id in others:
                tx.tombstone(record_id, note=None, purge=False)
        with _statements(repo, lambda s: s.startswith("SELECT") and "ORDER BY" in s) as sent:
            assert repo.list(harvester="h", state="tombstone", limit=2) == []
            assert [r["id"] for r in repo.list(harvester="h", state="live", limit=2)] == [mine]
        for statement, parameters in sent:
            plan = _plan(repo, statement, parameters)
            assert "(source_harvester=? AND state=?)" in plan, plan
            assert "TEMP B-TREE" not in plan, plan


def _counted(repo: EmbeddedRepository, harvester: str | None) -> dict[str, int]:
    """The stats as counted from the records themselves (what `stats` answered before)."""
    query = sa.select(
        sa.func.count(),
        sa.func.count(
            sa.func.nullif(sa.func.coalesce(records.c.source_harvester, ""), "")
            + records.c.source_identifier
        ),
    ).where(records.c.state != "deleted")
    if harvester is not None:
        query = query.where(records.c.source_harvester == harvester)
    with repo.engine.connect() as connection:
        count, sources = connection.execute(query).one()
    return {"records": count, "source_identifiers": sources}


@pytest.mark.parametrize("harvester", [None, "h"])
def test_stats_are_read_from_counts_not_counted_from_the_records(
    tmp_path, harvester: str | None
) -> None:
    """`status` and every `written_records` materialisation ask for the stats: counted from
    the harvester's records, they took 0.1 s per 500,000 of them. They are read from the
    counts the database keeps as records are written: a row per harvester."""
    with EmbeddedRepository(f"sqlite:///{tmp_path / 'target.sqlite'}") as repo:
        _harvested(repo, "h", "oai:1", None)
        _harvested(repo, "h", "oai:2", None)
        repo.deposit(record(), publish=True)  # a user's: no source
        with _statements(repo, lambda s: s.startswith("SELECT")) as sent:
            stats = repo.stats(harvester)
        assert stats == {"records": 2 if harvester else 3, "source_identifiers": 2}
        [(statement, parameters)] = [(s, p) for s, p in sent if "target_counts" in s]
        assert "target_records" not in statement
        assert "target_counts" in _plan(repo, statement, parameters)


def test_stats_follow_every_kind_of_write(target_url: str) -> None:
    """The kept counts agree with the records after each way a record is made, changed,
    deleted, revived, taken over, released or discarded (the triggers of version 11)."""
    with EmbeddedRepository(target_url) as repo:

        def agree() -> None:
            for harvester in (None, "h", "other"):
                assert repo.stats(harvester) == _counted(repo, harvester), harvester

        a = _harvested(repo, "h", "oai:a", "10.1234/a")
        b = _harvested(repo, "h", "oai:b", None)
        users = repo.deposit(record(doi="10.1234/user"), publish=True)
        drafted = repo.deposit(record())
        with repo.transaction() as tx:
            tx.create_many(
                [NewRecord(f"oai:m{n}", '{"metadata": {}}', None) for n in range(3)],
                harvester_id="other",
            )
            tx.create_published(record(), doi=None, harvester_id="other", source_identifier="x")
        agree()
        repo.delete(a, purge=True)
        repo.hard_delete(b)
        repo.hard_delete(drafted)  # a draft never published is discarded
        agree()
        repo.restore(a)
        repo.restore(b)  # revived
        agree()
        with repo.transaction() as tx:
            tx.claim(users, "h", "oai:user")  # PID takeover
        agree()
        repo.hard_delete(users)
        with repo.transaction() as tx:
            assert tx.release("h") == 3  # its harvester deleted
            tx.claim(a, "other", "oai:a")  # taken over by a harvester of the same source
        agree()
        assert repo.stats() == {"records": 6, "source_identifiers": 5}


def test_a_version_10_target_counts_its_records(target_url: str) -> None:
    with EmbeddedRepository(target_url) as first:
        _harvested(first, "h", "oai:1", None)
        gone = _harvested(first, "h", "oai:2", None)
        first.hard_delete(gone)
        first.deposit(record(), publish=True)
        as_version(first, 10, "DROP TABLE target_counts")
        on = "" if first.engine.dialect.name == "sqlite" else " ON target_records"
        for name in ("update", "delete"):
            as_version(first, 10, f"DROP TRIGGER tr_target_counts_{name}{on}")
        as_older = older_version_engine(first)
        with as_older.begin() as connection:  # written by version 10: not counted
            connection.execute(sa.text("UPDATE target_records SET state = 'tombstone'"))
        as_older.dispose()
    with EmbeddedRepository(target_url) as again:
        with again.engine.connect() as connection:
            assert current_version(connection) == SCHEMA_VERSION
        assert again.stats("h") == {"records": 2, "source_identifiers": 2}
        assert again.stats() == {"records": 3, "source_identifiers": 2}
        _harvested(again, "h", "oai:3", None)
        assert again.stats("h") == {"records": 3, "source_identifiers": 3}


def test_records_created_together_are_stored_as_one_created_alone(target_url: str) -> None:
    """`create_many` writes its rows past SQLAlchemy's per-row conversion on
    SQLite: every column reads back as `create_published` leaves it (timestamps, flags,
    the DOI in its normal form, the data and its revision)."""
    data = record(doi="10.1234/ABC")
    with EmbeddedRepository(target_url) as repo:
        with repo.transaction() as tx:
            alone = tx.create_published(
                data, doi="10.1234/abc", harvester_id="h", source_identifier="oai:alone"
            )
            (together,) = tx.create_many(
                [
                    NewRecord(
                        "oai:together", json_codec.dumps(record(doi="10.1234/DEF")), "10.1234/DEF"
                    )
                ],
                harvester_id="h",
            )
        with repo.transaction(read_only=True) as tx:
            rows = {row.id: row._asdict() for row in tx.connection.execute(sa.select(records))}
            saved = {
                row.record_id: row._asdict() for row in tx.connection.execute(sa.select(revisions))
            }
    first, second = rows[alone], rows[together]
    assert second["doi"] == "10.1234/def" and second["data"] == record(doi="10.1234/DEF")
    assert second["created"] == second["updated"]
    assert type(second["created"]) is type(first["created"])
    different = {"id", "doi", "data", "source_identifier", "created", "updated"}
    assert {k: v for k, v in second.items() if k not in different} == {
        k: v for k, v in first.items() if k not in different
    }
    assert saved[together]["data"] == second["data"]
    assert {
        k: v for k, v in saved[together].items() if k not in {"record_id", "data", "created"}
    } == {k: v for k, v in saved[alone].items() if k not in {"record_id", "data", "created"}}
    assert saved[together]["created"] == second["created"]
