"""The state store's tables (SQLAlchemy Core) and their creation/migration.

Times are stored as ISO-8601 UTC text (`2026-01-31T12:00:00Z`): portable between SQLite
and PostgreSQL, readable in JSON output, and ordered when compared as text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from oai_pipeline.errors import ConfigurationError, log_upgraded, schema_changed
from oai_pipeline.oai.types import MAX_DATESTAMP_LENGTH, MAX_IDENTIFIER_LENGTH

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 26

# The longest action a run record keeps: one, or each writer's (`update,skip`; see
# pipeline/write.py `_record_action`).
RUN_RECORD_ACTION_LENGTH = 40

# A resumed run's catch-up list (what the source changed since the run began listing), apart
# from the token sweep's counters: its pages and the records it listed (its last attempt's:
# each lists every change again), and of those the records new to the run and the newer
# copies of its own records staged (all attempts, each record once).
CATCH_UP_COUNTERS = (
    "catch_up_pages",
    "catch_up_listed",
    "catch_up_new_records",
    "catch_up_newer_copies",
)

# The id of a row written per record of a run (run_records) or per record error: a source
# of millions of records, harvested again and again, writes more than 2**31 of them in its
# life, past what PostgreSQL's integer (SERIAL) counts to (version 13: BIGINT). SQLite's
# INTEGER PRIMARY KEY is 64 bits already, and a BIGINT one would not be its rowid.
ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

metadata = sa.MetaData()

schema_version = sa.Table(
    "schema_version",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),  # always 1: a single row
    sa.Column("version", sa.Integer, nullable=False),
)

# The harvester registry: the pydantic model as JSON, plus what Identify said.
harvesters = sa.Table(
    "harvesters",
    metadata,
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("config", sa.JSON, nullable=False),
    sa.Column("identify", sa.JSON, nullable=True),
    sa.Column("deleted_record", sa.String(20), nullable=True),
    sa.Column("created_at", sa.String(32), nullable=False),
    sa.Column("updated_at", sa.String(32), nullable=False),
    # The harvester's last change of metadata prefix: {"before": prefix, "at": utc_now()}.
    # A record harvested before it that the new format's list leaves out is not deleted at
    # the source (version 24; see pipeline/reconcile.py).
    sa.Column("prefix_changed", sa.JSON, nullable=True),
)

# A harvester deleted with its harvest records kept: the metadata prefix they were harvested
# in and its `prefix_changed`, so that the harvester created again over them in another
# prefix records a change of prefix, as an update does (version 25).
deleted_harvesters = sa.Table(
    "deleted_harvesters",
    metadata,
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("metadata_prefix", sa.String(200), nullable=False),
    sa.Column("prefix_changed", sa.JSON, nullable=True),
    sa.Column("deleted_at", sa.String(32), nullable=False),
)

# Fixture files loaded when the definitions load: the content last applied, so a file is
# applied once per content and a harvester changed since (CLI, UI) keeps that change.
applied_fixtures = sa.Table(
    "applied_fixtures",
    metadata,
    sa.Column("path", sa.String(1000), primary_key=True),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("applied_at", sa.String(32), nullable=False),
)


def _write_memory() -> list[sa.Column]:
    """What a writer's last write of a record left (with when: `last_written_at`)."""
    return [
        sa.Column("local_id", sa.String(200), nullable=True),
        sa.Column("written_revision", sa.Integer, nullable=True),
        sa.Column("written_datestamp", sa.String(32), nullable=True),
        # The transform fingerprint of what was written: another chain (options, versions)
        # means the target may hold what the chain no longer makes, unchanged datestamp or not.
        sa.Column("written_fingerprint", sa.String(64), nullable=True),
    ]


# One harvest record per (harvester, OAI identifier).
harvest_records = sa.Table(
    "harvest_records",
    metadata,
    sa.Column("harvester_id", sa.String(200), primary_key=True),
    sa.Column("identifier", sa.String(MAX_IDENTIFIER_LENGTH), primary_key=True),
    sa.Column("datestamp", sa.String(MAX_DATESTAMP_LENGTH), nullable=True),
    sa.Column("deleted", sa.Boolean, nullable=False, default=False),
    sa.Column("set_specs", sa.JSON, nullable=True),
    sa.Column("pid", sa.String(1000), nullable=True),
    sa.Column("communities", sa.JSON, nullable=True),
    # The data (harvest_record_data), `pid` and `communities` came from the record at this
    # datestamp through the transformer chain of this fingerprint (none after a failed
    # transform): see reuse.
    sa.Column("transformed_datestamp", sa.String(32), nullable=True),
    sa.Column("transform_fingerprint", sa.String(64), nullable=True),
    # The memory of the last write (local id to `last_written_at`) of the writer named
    # `written_by` (see writer_key): the harvester's first writer's, its others' are in
    # writer_memories (v22; before, the last writer's, whichever it was).
    *_write_memory(),
    sa.Column("written_by", sa.String(200), nullable=True),
    sa.Column("last_harvested_at", sa.String(32), nullable=True),
    sa.Column("last_transformed_at", sa.String(32), nullable=True),
    sa.Column("last_written_at", sa.String(32), nullable=True),
    sa.Column("gone_at", sa.String(32), nullable=True),  # vanished at a source without deletions
    sa.Index("ix_harvest_records_identifier", "identifier"),
    # Covers `get_memories`: the plan's lookup reads the index, not rows with their XML.
    sa.Index(
        "ix_harvest_records_memory",
        "harvester_id",
        "identifier",
        "last_written_at",
        "written_datestamp",
        "local_id",
        "written_revision",
        "deleted",
        "written_fingerprint",
        "written_by",
    ),
)

# The memory of the last write of a record by each writer of its harvester but the one
# whose memory is on the harvest record (`written_by`): each writer's target is its own,
# edited apart; one memory for all compared each target with another's revision (v22).
writer_memories = sa.Table(
    "writer_memories",
    metadata,
    sa.Column("harvester_id", sa.String(200), primary_key=True),
    sa.Column("identifier", sa.String(MAX_IDENTIFIER_LENGTH), primary_key=True),
    sa.Column("writer", sa.String(200), primary_key=True),
    *_write_memory(),
    sa.Column("last_written_at", sa.String(32), nullable=False),
)


def writer_key(spec: str) -> str:
    """The writer a memory is of: its plug-in name (`name` of `name{options}`). A harvester
    gives a writer once, so the name stays the writer's when writers are added, removed or
    reordered, or its options change; a position would not."""
    return spec.split("{", 1)[0].strip()


# The few records a reconcile marked gone and no harvest listed since: each reconcile reads
# them back (`gone_identifier_chunks`), and without this index read every record of the
# harvester for them (PostgreSQL: every record of every harvester, a sequential scan) (v14).
# It covers the query (`deleted`, `gone_at`): SQLite, without statistics, otherwise took the
# memory index, ordered the same way, and read the rows of every record of the harvester.
gone_index = sa.Index(
    "ix_harvest_records_gone",
    harvest_records.c.harvester_id,
    harvest_records.c.identifier,
    harvest_records.c.deleted,
    harvest_records.c.gone_at,
    sqlite_where=harvest_records.c.gone_at.is_not(None),
    postgresql_where=harvest_records.c.gone_at.is_not(None),
)


# The XML and the transformed data of a harvest record live beside its row, one table each:
# the row changes at every stage (harvested again, transformed, written) and a database
# rewrites a whole row on each update, while the XML changes only when the source changes
# the record and the data only when it is transformed again. A record without XML (deleted)
# or without data (not transformed cleanly) has no row here.
def _beside_the_record(name: str, column: sa.Column) -> sa.Table:
    return sa.Table(
        name,
        metadata,
        sa.Column("harvester_id", sa.String(200), primary_key=True),
        sa.Column("identifier", sa.String(1000), primary_key=True),
        column,
    )


harvest_record_xml = _beside_the_record(
    "harvest_record_xml", sa.Column("xml", sa.LargeBinary, nullable=False)
)
harvest_record_data = _beside_the_record(
    "harvest_record_data", sa.Column("data", sa.JSON, nullable=False)
)

# Errors of a harvest record, by stage: `harvest` (parse), `transform`, `write` (last write).
record_errors = sa.Table(
    "record_errors",
    metadata,
    sa.Column("id", ROW_ID, primary_key=True, autoincrement=True),
    sa.Column("harvester_id", sa.String(200), nullable=False),
    sa.Column("identifier", sa.String(1000), nullable=False),
    sa.Column("stage", sa.String(20), nullable=False),
    sa.Column("type", sa.String(200), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("location", sa.Text, nullable=True),
    sa.Column("created_at", sa.String(32), nullable=False),
    sa.Index("ix_record_errors_record", "harvester_id", "identifier", "stage"),
    sa.Index("ix_record_errors_type", "type"),
)

# Harvest runs (batches): window, cap, counters, the saved discovery state, status.
harvest_runs = sa.Table(
    "harvest_runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("harvester_id", sa.String(200), nullable=False, index=True),
    sa.Column("dagster_run_id", sa.String(100), nullable=True),
    # The harvester lease's owner (host:pid:nonce) of the process that works on the run
    # last: a run without a Dagster run is alive only while that process holds the lease.
    sa.Column("worker", sa.String(200), nullable=True),
    sa.Column("window_from", sa.String(32), nullable=True),
    sa.Column("window_until", sa.String(32), nullable=True),
    sa.Column("scale", sa.String(20), nullable=True),
    sa.Column("max_records", sa.Integer, nullable=False, default=0),
    sa.Column("options", sa.JSON, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("pages_read", sa.Integer, nullable=False, default=0),
    sa.Column("discovered", sa.Integer, nullable=False, default=0),
    sa.Column("staged", sa.Integer, nullable=False, default=0),
    sa.Column("duplicates_skipped", sa.Integer, nullable=False, default=0),
    sa.Column("existing_skipped", sa.Integer, nullable=False, default=0),
    sa.Column("cap_reached", sa.Boolean, nullable=False, default=False),
    # A resumed run's catch-up list (what the source changed since the run began listing,
    # discover._catch_up_from; see CATCH_UP_COUNTERS): counted apart from the token sweep's
    # counters above, which count the source's records once (version 17).
    *(
        sa.Column(name, sa.Integer, nullable=False, default=0, server_default="0")
        for name in CATCH_UP_COUNTERS
    ),
    sa.Column("checkpoint", sa.JSON, nullable=True),
    sa.Column("response_date", sa.String(32), nullable=True),  # of the run's first page
    # the newest datestamp staged: shown in status, never a checkpoint (records are unordered)
    sa.Column("last_datestamp", sa.String(32), nullable=True),
    sa.Column("created_at", sa.String(32), nullable=False),
    sa.Column("updated_at", sa.String(32), nullable=False),
    sa.Column("finished_at", sa.String(32), nullable=True),
    # The run's record statuses and last failures, kept when its run_records are pruned.
    sa.Column("record_counts", sa.JSON, nullable=True),
    # Quirks of the source its attempts met (Reader.notices: the source refused dates in
    # seconds, its Identify names another base URL, it moved): a list of lines, kept across
    # resumed attempts, bounded (StateStore.add_run_notices); None: none met.
    sa.Column("notices", sa.JSON, nullable=True),
    # What the run's undo of local changes did (local_changes.py), by action, saved with
    # the outcomes of each batch: a resumed attempt finds those records settled and reports
    # what earlier attempts brought back from this. None: nothing undone yet.
    sa.Column("local_changes_undone", sa.JSON, nullable=True),
    # What the run's take-overs of freed pids did (reidentified.py), by action, saved with
    # the outcomes of each batch: a resumed attempt finds those records written and reports
    # what earlier attempts took over (version 18). None: nothing taken over yet.
    sa.Column("reidentified", sa.JSON, nullable=True),
)

# A reconcile's run: what it deleted, saved in the transaction that marks the records gone.
# A reconcile killed after that (while harvesting the records listed again, or before it
# printed its report) leaves no vanished record for its rerun to find: the rerun resumes
# this row and reports what the killed attempt did, as a harvest's rerun does (version 16).
reconcile_runs = sa.Table(
    "reconcile_runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("harvester_id", sa.String(200), nullable=False, index=True),
    sa.Column("status", sa.String(20), nullable=False),  # running, succeeded
    sa.Column("created_at", sa.String(32), nullable=False),
    sa.Column("finished_at", sa.String(32), nullable=True),
    # None until its deletions are saved; then the identifiers found vanished, the actions
    # taken on them, the write errors, and the gone records the source listed again
    sa.Column("vanished", sa.JSON, nullable=True),
    sa.Column("actions", sa.JSON, nullable=True),
    sa.Column("errors", sa.Integer, nullable=False, default=0),
    sa.Column("returned", sa.JSON, nullable=True),
    # its take-overs of freed pids, as harvest_runs.reidentified (version 18)
    sa.Column("reidentified", sa.JSON, nullable=True),
    # the records its attempts were about to delete, saved before each writes: one killed
    # before `vanished` was saved left tombstones its rerun knows of no other way; those the
    # source lists again meanwhile the rerun harvests again (version 19)
    sa.Column("deleting", sa.JSON, nullable=True),
    # the vanished records its GetRecord check kept (served, or an answer telling nothing),
    # the least recently asked for first: the next reconcile asks for those never asked for
    # first, so that one record a list hides no longer holds back every deletion (v26)
    sa.Column("kept", sa.JSON, nullable=True),
)

# The harvester's rekeys (`harvesters rekey`), saved in the transaction that rewrites its
# identifiers: the Parquet partitions of the runs up to `last_run_id` (listed before it) still
# hold the old identifiers, which a downstream step must not write as new records (version 20).
identifier_rekeys = sa.Table(
    "identifier_rekeys",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("harvester_id", sa.String(200), nullable=False, index=True),
    sa.Column("old_prefix", sa.String(MAX_IDENTIFIER_LENGTH), nullable=False),
    sa.Column("new_prefix", sa.String(MAX_IDENTIFIER_LENGTH), nullable=False),
    # the newest harvest run (of any harvester) when it was done; none: there was none yet
    sa.Column("last_run_id", sa.Integer, nullable=True),
    sa.Column("rekeyed_at", sa.String(32), nullable=False),
)

# A rekey begun and not finished: saved before it rewrites the targets, deleted in the
# transaction that rewrites the state store. Killed between the two, the target holds the
# new identifiers and the state store the old ones; while this row says so, only that rekey
# (which finishes it) or its reverse (which undoes it) may run for the harvester: another
# rekey, a harvest or a reconcile would leave or make them disagree (version 23).
pending_rekeys = sa.Table(
    "pending_rekeys",
    metadata,
    sa.Column("harvester_id", sa.String(200), primary_key=True),
    sa.Column("old_prefix", sa.String(MAX_IDENTIFIER_LENGTH), nullable=False),
    sa.Column("new_prefix", sa.String(MAX_IDENTIFIER_LENGTH), nullable=False),
    sa.Column("started_at", sa.String(32), nullable=False),
)

# What every harvest asks of the harvester's runs, answered without reading each run it ever
# had (a run an hour is 26,000 in three years): the runs a killed process left running,
# the last run of the window (to resume), and the succeeded runs whose rows are not pruned.
RUN_INDEXES = (
    # With the id: the harvester's latest run of a status (last_success) is the index's last
    # entry. SQLite's indexes end with the rowid anyway; PostgreSQL's do not, and without it
    # read every run newer than that one, from the newest (version 11).
    sa.Index(
        "ix_harvest_runs_status",
        harvest_runs.c.status,
        harvest_runs.c.harvester_id,
        harvest_runs.c.id,
    ),
    sa.Index(
        "ix_harvest_runs_window",
        harvest_runs.c.harvester_id,
        harvest_runs.c.window_from,
        harvest_runs.c.window_until,
    ),
    # A harvester's latest run (`status`) is the last entry of its range: on PostgreSQL the
    # harvester's index alone is in no id order, and the primary key from the newest run
    # back reads every run of other harvesters since (version 12).
    sa.Index("ix_harvest_runs_latest", harvest_runs.c.harvester_id, harvest_runs.c.id),
    # Only the runs that still have their per-record rows (the recent ones, and those that
    # did not succeed): a pruned run leaves the index.
    sa.Index(
        "ix_harvest_runs_unpruned",
        harvest_runs.c.harvester_id,
        harvest_runs.c.status,
        harvest_runs.c.finished_at,
        sqlite_where=harvest_runs.c.record_counts.is_(None),
        postgresql_where=harvest_runs.c.record_counts.is_(None),
    ),
)

# Every Dagster run that worked on a harvest run (harvest_runs.dagster_run_id is the latest):
# a downstream run may write part of a harvest run another Dagster run started, and the
# harvest run is running only while one of them is.
harvest_run_dagster_runs = sa.Table(
    "harvest_run_dagster_runs",
    metadata,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("harvest_runs.id"), primary_key=True),
    sa.Column("dagster_run_id", sa.String(100), primary_key=True, index=True),
)

# Per-record status within a run; unique (run, identifier) makes staging idempotent.
run_records = sa.Table(
    "run_records",
    metadata,
    sa.Column("id", ROW_ID, primary_key=True, autoincrement=True),  # staging order
    sa.Column("run_id", sa.Integer, sa.ForeignKey("harvest_runs.id"), nullable=False),
    sa.Column("harvester_id", sa.String(200), nullable=False),
    sa.Column("identifier", sa.String(1000), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    # What the write did to the record (sync.rules.Action, or write.SUPERSEDED), set with its
    # status: a resumed attempt reports the records an earlier one wrote by their action
    # (version 21; NULL on older rows: the status tells the kind).
    sa.Column("action", sa.String(RUN_RECORD_ACTION_LENGTH), nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("error_type", sa.String(200), nullable=True),
    sa.Column("error_message", sa.Text, nullable=True),
    sa.Column("error_location", sa.Text, nullable=True),
    sa.Column("claimed_at", sa.String(32), nullable=True),
    sa.Column("updated_at", sa.String(32), nullable=False),
    sa.UniqueConstraint("run_id", "identifier", name="uq_run_records_run_identifier"),
    sa.Index("ix_run_records_status", "run_id", "status"),
)


def _add_last_datestamp(connection: Connection) -> None:
    connection.execute(sa.text("ALTER TABLE harvest_runs ADD COLUMN last_datestamp VARCHAR(32)"))


def _add_transform_memory(connection: Connection) -> None:
    json_type = sa.JSON().compile(dialect=connection.dialect)
    for column, kind in (
        ("communities", json_type),
        ("transformed_datestamp", "VARCHAR(32)"),
        ("transform_fingerprint", "VARCHAR(64)"),
    ):
        connection.execute(sa.text(f"ALTER TABLE harvest_records ADD COLUMN {column} {kind}"))
    for index in harvest_records.indexes:
        # The memory index covers columns of later versions: version 5 makes it.
        if index.name != "ix_harvest_records_memory":
            index.create(connection, checkfirst=True)


def _move_payloads(connection: Connection) -> None:
    """XML and data move from harvest_records to their own tables (copied, then dropped)."""
    for table, column in ((harvest_record_xml, "xml"), (harvest_record_data, "data")):
        table.create(connection, checkfirst=True)
        # A JSON null (what an absent transform was stored as) is no data.
        present = f"{column} IS NOT NULL"
        if column == "data":
            present += " AND CAST(data AS TEXT) <> 'null'"
        connection.execute(
            sa.text(
                f"INSERT INTO {table.name} (harvester_id, identifier, {column}) "
                f"SELECT harvester_id, identifier, {column} FROM harvest_records WHERE {present}"
            )
        )
        connection.execute(sa.text(f"ALTER TABLE harvest_records DROP COLUMN {column}"))


def _add_written_fingerprint(connection: Connection) -> None:
    """What was written so far was made by the chain the record was last transformed with."""
    columns = {column["name"] for column in sa.inspect(connection).get_columns("harvest_records")}
    if "written_fingerprint" not in columns:  # (a database made by version 4 has not)
        connection.execute(
            sa.text("ALTER TABLE harvest_records ADD COLUMN written_fingerprint VARCHAR(64)")
        )
    connection.execute(
        sa.text(
            "UPDATE harvest_records SET written_fingerprint = transform_fingerprint "
            "WHERE last_written_at IS NOT NULL"
        )
    )
    (memory,) = (i for i in harvest_records.indexes if i.name == "ix_harvest_records_memory")
    memory.drop(connection, checkfirst=True)
    memory.create(connection)  # covering get_memories again, with the new columns


def _add_run_column(
    connection: Connection, name: str, kind: str, table: str = "harvest_runs"
) -> None:
    """A column of `table`, unless there (a database made by an older version that
    create_all made with the current columns, as the tests of older versions do)."""
    columns = {column["name"] for column in sa.inspect(connection).get_columns(table)}
    if name not in columns:
        connection.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN {name} {kind}"))


def _add_record_counts(connection: Connection) -> None:
    """Runs of an older version have all their per-record rows: no counts kept yet."""
    _add_run_column(connection, "record_counts", sa.JSON().compile(dialect=connection.dialect))


def _add_worker(connection: Connection) -> None:
    """Runs of an older version name no process: whether they are alive is not known."""
    _add_run_column(connection, "worker", "VARCHAR(200)")


def _link_dagster_runs(connection: Connection) -> None:
    """Of the Dagster runs that worked on a run, an older version kept the latest."""
    connection.execute(
        sa.text(
            "INSERT INTO harvest_run_dagster_runs (run_id, dagster_run_id) "
            "SELECT id, dagster_run_id FROM harvest_runs WHERE dagster_run_id IS NOT NULL"
        )
    )


def _add_notices(connection: Connection) -> None:
    """Runs of an older version kept no notices (their harvest report had them)."""
    _add_run_column(connection, "notices", sa.JSON().compile(dialect=connection.dialect))


def _add_local_changes_undone(connection: Connection) -> None:
    """Runs of an older version kept no undo counts (their harvest report had them)."""
    _add_run_column(
        connection, "local_changes_undone", sa.JSON().compile(dialect=connection.dialect)
    )


def _add_catch_up_counters(connection: Connection) -> None:
    """Runs of an older version counted their catch-up lists with the token sweep's."""
    for name in CATCH_UP_COUNTERS:
        _add_run_column(connection, name, "INTEGER NOT NULL DEFAULT 0")


def _index_runs(connection: Connection) -> None:
    for index in RUN_INDEXES:
        index.create(connection, checkfirst=True)


def _add_id_to_status_index(connection: Connection) -> None:
    """Version 10's status index had no id: made again with it."""
    (status,) = (index for index in RUN_INDEXES if index.name == "ix_harvest_runs_status")
    status.drop(connection, checkfirst=True)
    status.create(connection)


def _widen_row_ids(connection: Connection) -> None:
    """PostgreSQL's SERIAL ids of run_records and record_errors become BIGINT (column and
    sequence); SQLite's are 64 bits already."""
    if connection.dialect.name != "postgresql":
        return
    for table in (run_records, record_errors):
        connection.execute(sa.text(f"ALTER TABLE {table.name} ALTER COLUMN id TYPE BIGINT"))
        sequence = connection.execute(
            sa.text(f"SELECT pg_get_serial_sequence('{table.name}', 'id')")
        ).scalar_one()
        connection.execute(sa.text(f"ALTER SEQUENCE {sequence} AS BIGINT"))


def _index_gone_records(connection: Connection) -> None:
    gone_index.create(connection, checkfirst=True)


def _add_reconcile_runs(connection: Connection) -> None:
    """Reconciles of an older version kept no run (their report was all there was)."""
    reconcile_runs.create(connection, checkfirst=True)


def _add_reidentified(connection: Connection) -> None:
    """Runs of an older version kept no take-over counts (their report had them)."""
    kind = sa.JSON().compile(dialect=connection.dialect)
    _add_run_column(connection, "reidentified", kind)
    _add_run_column(connection, "reidentified", kind, table=reconcile_runs.name)


def _add_reconcile_deleting(connection: Connection) -> None:
    """Reconcile runs of an older version saved nothing before their deletions' writes."""
    kind = sa.JSON().compile(dialect=connection.dialect)
    _add_run_column(connection, "deleting", kind, table=reconcile_runs.name)


def _add_reconcile_kept(connection: Connection) -> None:
    """Reconcile runs of an older version asked GetRecord for a sample and kept no record:
    none is known kept (the next reconcile asks for every vanished record afresh)."""
    kind = sa.JSON().compile(dialect=connection.dialect)
    _add_run_column(connection, "kept", kind, table=reconcile_runs.name)


def _add_identifier_rekeys(connection: Connection) -> None:
    """Rekeys of an older version were not saved: their partitions are not told apart."""
    identifier_rekeys.create(connection, checkfirst=True)


def _add_pending_rekeys(connection: Connection) -> None:
    """An older version did not save a rekey before it began: none is known to be pending."""
    pending_rekeys.create(connection, checkfirst=True)


def _add_prefix_changed(connection: Connection) -> None:
    """An older version kept no prefix change: none is known (records are judged by the
    list of the prefix the harvester has now, as before)."""
    kind = sa.JSON().compile(dialect=connection.dialect)
    _add_run_column(connection, "prefix_changed", kind, table=harvesters.name)


def _add_deleted_harvesters(connection: Connection) -> None:
    """An older version kept nothing of a deleted harvester: one deleted before the upgrade
    and created again records no change of prefix, as before."""
    deleted_harvesters.create(connection, checkfirst=True)


def _add_run_record_action(connection: Connection) -> None:
    """Runs of an older version kept only each record's status, not its action."""
    _add_run_column(
        connection, "action", f"VARCHAR({RUN_RECORD_ACTION_LENGTH})", table=run_records.name
    )


def _add_writer_memories(connection: Connection) -> None:
    """The one memory of each written record was the last writer's; it is taken as the
    first writer's (with one writer, its own). The harvester's other writers remember no
    write yet: their next plan takes each record from their target's state (an update of
    a live record, which finds the data it holds), as a writer never written with."""
    _add_run_column(connection, "written_by", "VARCHAR(200)", table=harvest_records.name)
    writer_memories.create(connection, checkfirst=True)
    for harvester_id, config in connection.execute(sa.select(harvesters.c.id, harvesters.c.config)):
        specs = (config or {}).get("writers") or []
        if specs:
            connection.execute(
                harvest_records.update()
                .where(
                    harvest_records.c.harvester_id == harvester_id,
                    harvest_records.c.last_written_at.is_not(None),
                )
                .values(written_by=writer_key(specs[0]))
            )
    (memory,) = (i for i in harvest_records.indexes if i.name == "ix_harvest_records_memory")
    memory.drop(connection, checkfirst=True)
    memory.create(connection)  # covering get_memories again, with `written_by`


# version -> the step that brings the schema from version-1 to it (create_all covers the
# current version of a new database).
MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    2: _add_last_datestamp,
    3: _add_transform_memory,
    4: _move_payloads,
    5: _add_written_fingerprint,
    6: _add_record_counts,
    7: _add_worker,
    8: _link_dagster_runs,
    9: _add_notices,
    10: _index_runs,
    11: _add_id_to_status_index,
    12: _index_runs,  # the latest-run index
    13: _widen_row_ids,
    14: _index_gone_records,
    15: _add_local_changes_undone,
    16: _add_reconcile_runs,
    17: _add_catch_up_counters,
    18: _add_reidentified,
    19: _add_reconcile_deleting,
    20: _add_identifier_rekeys,
    21: _add_run_record_action,
    22: _add_writer_memories,
    23: _add_pending_rekeys,
    24: _add_prefix_changed,
    25: _add_deleted_harvesters,
    26: _add_reconcile_kept,
}


def _newer(current: int) -> ConfigurationError:
    return ConfigurationError(
        f"the state database has schema version {current}, newer than this "
        f"oai-pipeline ({SCHEMA_VERSION}); upgrade oai-pipeline"
    )


def check_version(connection: Connection) -> None:
    """What `migrate` checks, for a database this process may only read (a read-only home):
    one of another schema version cannot be read with these tables, nor upgraded here."""
    current = None
    if sa.inspect(connection).has_table(schema_version.name):
        current = connection.execute(
            sa.select(schema_version.c.version).where(schema_version.c.id == 1)
        ).scalar()
    if current is not None and current > SCHEMA_VERSION:
        raise _newer(current)
    if current != SCHEMA_VERSION:
        found = "no schema" if current is None else f"schema version {current}"
        raise ConfigurationError(
            f"the state database has {found}, older than this oai-pipeline "
            f"({SCHEMA_VERSION}), and is on a home this user cannot write: upgrade it by "
            "running any oai-pipeline command where it can be written (as its owner), then "
            "read it here"
        )


# PostgreSQL's advisory lock of the schema: a migration holds it alone, a write transaction
# shared (`refuse_if_changed`), so neither runs while the other is half done.
_LOCK_KEY = 7431002


def _stored_version(connection: Connection) -> int | None:
    if not sa.inspect(connection).has_table(schema_version.name):
        return None
    return connection.execute(
        sa.select(schema_version.c.version).where(schema_version.c.id == 1)
    ).scalar()


def is_up_to_date(connection: Connection) -> bool:
    """The store is at this release's schema: opening it writes nothing, so it need not wait
    behind a writer (a SQLite BEGIN IMMEDIATE waited up to 60 s behind a long transaction,
    and a sensor's tick timed out instead of doing its work)."""
    return _stored_version(connection) == SCHEMA_VERSION


def refuse_if_changed(connection: Connection) -> None:
    """At the start of a write transaction of a process that opened the store at
    SCHEMA_VERSION: refuse it if another process (a newer oai-pipeline) migrated the store
    since. An old process left running would otherwise write rows that miss what the new
    schema keeps. SQLite: the transaction holds the write lock already (BEGIN IMMEDIATE), so
    no migration can come between this check and the writes; PostgreSQL: the shared lock
    does the same."""
    if connection.dialect.name == "postgresql":
        connection.execute(sa.text(f"SELECT pg_advisory_xact_lock_shared({_LOCK_KEY})"))
    current = connection.execute(
        sa.select(schema_version.c.version).where(schema_version.c.id == 1)
    ).scalar()
    if current != SCHEMA_VERSION:
        raise schema_changed("state", current, SCHEMA_VERSION)


def migrate(connection: Connection) -> int:
    """Create missing tables and run pending migrations; safe to call from every process."""
    if connection.dialect.name == "postgresql":
        if is_up_to_date(connection):
            return SCHEMA_VERSION  # nothing to do: no lock to wait for behind writers
        # Two processes starting at once must not both create the tables; a migration must
        # not run beside a write of an older process (`refuse_if_changed`).
        connection.execute(sa.text(f"SELECT pg_advisory_xact_lock({_LOCK_KEY})"))
    metadata.create_all(connection, checkfirst=True)
    current = connection.execute(
        sa.select(schema_version.c.version).where(schema_version.c.id == 1)
    ).scalar()
    if current is None:
        connection.execute(schema_version.insert().values(id=1, version=SCHEMA_VERSION))
        return SCHEMA_VERSION
    if current > SCHEMA_VERSION:
        raise _newer(current)
    for version in range(current + 1, SCHEMA_VERSION + 1):
        MIGRATIONS[version](connection)
        connection.execute(
            schema_version.update().where(schema_version.c.id == 1).values(version=version)
        )
    if current < SCHEMA_VERSION:
        url = connection.engine.url.render_as_string(hide_password=True)
        log_upgraded(logger, "state", url, current, SCHEMA_VERSION)
    return SCHEMA_VERSION
