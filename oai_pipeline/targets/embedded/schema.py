"""Tables of the embedded target repository, and their creation/migration.

A record has a published version (`data`), at most one draft (a new record's draft or an
edit draft of a published record), and every published state kept as a revision, so a
hard-deleted record can be revived with the same id. The DOI is unique among records that
still count (not hard deleted, not marked for purge), so a harvested DOI takes over a user's
deposit instead of duplicating it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import sqlalchemy as sa

from oai_pipeline.doi import MAX_DOI_LENGTH, normal_doi
from oai_pipeline.errors import ConfigurationError, log_upgraded, schema_changed
from oai_pipeline.targets.base import pid_of
from oai_pipeline.targets.embedded.engine import READ_ONLY

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 12

metadata = sa.MetaData()


class Doi(sa.types.TypeDecorator):
    """A DOI column that stores, and compares, the normal form (`normal_doi`) of any value
    bound to it, so no query or write can miss a DOI by its case."""

    impl = sa.String(MAX_DOI_LENGTH)
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: sa.Dialect) -> str | None:
        return normal_doi(value)


schema_version = sa.Table(
    "schema_version",
    metadata,
    sa.Column("version", sa.Integer, nullable=False),
)

records = sa.Table(
    "target_records",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    # draft (never published) | live | tombstone (deleted) | deleted (hard deleted, gone)
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("data", sa.JSON(none_as_null=True), nullable=True),  # the published version
    sa.Column("revision", sa.Integer, nullable=False, default=0),
    sa.Column("doi", Doi(), nullable=True),
    sa.Column("source_harvester", sa.String(255), nullable=True),
    sa.Column("source_identifier", sa.String(1024), nullable=True),
    sa.Column("tombstone_note", sa.Text, nullable=True),
    sa.Column("purge", sa.Boolean, nullable=False, default=False),
    # A harvested record a user changed (edited, deleted, restored) since the harvest last
    # wrote it: the next harvest brings it back even if the source does not list it again.
    sa.Column(
        "changed_locally", sa.Boolean, nullable=False, default=False, server_default=sa.false()
    ),
    sa.Column("created", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated", sa.DateTime(timezone=True), nullable=False),
    sa.UniqueConstraint("source_harvester", "source_identifier", name="uq_target_records_source"),
)

# The DOI counts only while the record is not hard deleted and not marked for purge.
_DOI_COUNTS = sa.and_(records.c.doi.isnot(None), records.c.state != "deleted", ~records.c.purge)
sa.Index(
    "uq_target_records_doi",
    records.c.doi,
    unique=True,
    sqlite_where=_DOI_COUNTS,
    postgresql_where=_DOI_COUNTS,
)

# Covers the harvest's lookup by source (`local_records`): answered from the index alone,
# without reading a row and its record data.
lookup_index = sa.Index(
    "ix_target_records_lookup",
    records.c.source_harvester,
    records.c.source_identifier,
    records.c.id,
    records.c.state,
    records.c.revision,
    records.c.doi,
)

# The few records users changed, found without reading a harvester's every record.
changed_index = sa.Index(
    "ix_target_records_changed",
    records.c.source_harvester,
    records.c.source_identifier,
    sqlite_where=records.c.changed_locally,
    postgresql_where=records.c.changed_locally,
)

# `target list` pages its records oldest first, of all harvesters or of one: read from
# these in order and stopped at its limit, not a million records sorted first (version 8).
listing_indexes = (
    sa.Index("ix_target_records_created", records.c.created, records.c.id),
    sa.Index(
        "ix_target_records_harvester_created",
        records.c.source_harvester,
        records.c.created,
        records.c.id,
    ),
)

# `target list --state S` pages the records of one state oldest first: from the creation index
# it read every record of other states first, the whole target when none is in that state
# (0.25 s per 100,000 records to say "no deleted record"). Here they are read in order
# (version 9).
state_listing_index = sa.Index(
    "ix_target_records_state_created", records.c.state, records.c.created, records.c.id
)

# `target list --harvester h --state S` pages one harvester's records of one state: from the
# state index it read that state's records of every harvester to keep h's, all of them when h
# has none in that state (80 ms per million tombstones of other harvesters). Here they are
# read in order (version 10).
harvester_state_listing_index = sa.Index(
    "ix_target_records_harvester_state_created",
    records.c.source_harvester,
    records.c.state,
    records.c.created,
    records.c.id,
)

# What `stats` tells (on `status` and each `written_records` materialisation), per harvester
# ('': records of none, a user's deposits and released records): its records that are not
# hard deleted, and those of them with a source identifier. Counting them took a scan of
# the harvester's records each time (0.1 s per 500,000 records, growing with the target);
# the writes of version 11 keep these counts in their own transaction (`_count_records`).
counts = sa.Table(
    "target_counts",
    metadata,
    sa.Column("source_harvester", sa.String(255), primary_key=True),
    sa.Column("records", sa.BigInteger, nullable=False),
    sa.Column("source_identifiers", sa.BigInteger, nullable=False),
)

drafts = sa.Table(
    "target_drafts",
    metadata,
    sa.Column(
        "record_id",
        sa.String(32),
        sa.ForeignKey("target_records.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("kind", sa.String(8), nullable=False),  # new | edit
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("updated", sa.DateTime(timezone=True), nullable=False),
    # Left by a harvest whose writer does not publish, and untouched by a user since: the
    # harvested state of the record (the skip rule's), not a local edit.
    sa.Column("harvested", sa.Boolean, nullable=False, default=False, server_default=sa.false()),
    # The pid the draft names as whoever wrote it reads it (a harvest by its writer's
    # `pid_field`, a user by `pids.doi`): the one the record holds once the draft is published.
    sa.Column("doi", Doi(), nullable=True),
)

# The DOIs published records' harvested edit drafts name for their review: reserved, as a
# new record's draft reserves its DOI (`TargetTransaction.pid_holders(claimed=True)`); only
# these drafts are in it, so a check of a new DOI reads none of the others (version 12).
_UNDER_REVIEW = sa.and_(drafts.c.kind == "edit", drafts.c.harvested)
draft_claims_index = sa.Index(
    "ix_target_drafts_claims",
    drafts.c.doi,
    sqlite_where=_UNDER_REVIEW,
    postgresql_where=_UNDER_REVIEW,
)

revisions = sa.Table(
    "target_revisions",
    metadata,
    sa.Column(
        "record_id",
        sa.String(32),
        sa.ForeignKey("target_records.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("revision", sa.Integer, primary_key=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("data", sa.JSON(none_as_null=True), nullable=True),
    sa.Column("created", sa.DateTime(timezone=True), nullable=False),
)

communities = sa.Table(
    "target_communities",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("slug", sa.String(255), nullable=False, unique=True),
    sa.Column("parent_id", sa.String(36), sa.ForeignKey("target_communities.id"), nullable=True),
)

memberships = sa.Table(
    "target_memberships",
    metadata,
    sa.Column(
        "record_id",
        sa.String(32),
        sa.ForeignKey("target_records.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column(
        "community_id", sa.String(36), sa.ForeignKey("target_communities.id"), primary_key=True
    ),
    sa.Column("is_default", sa.Boolean, nullable=False, default=False),
    sa.Column("position", sa.Integer, nullable=False, default=0),
)

# Each step brings the schema from version n-1 to n; `migrate` runs the missing ones.
_TABLES_V1 = [records, drafts, revisions, communities, memberships]


def _create_v1(connection: sa.Connection) -> None:
    metadata.create_all(connection, tables=_TABLES_V1, checkfirst=True)


def _add_lookup_index(connection: sa.Connection) -> None:
    lookup_index.create(connection, checkfirst=True)


def _lower_dois(connection: sa.Connection) -> None:
    _normalise_dois(connection, lambda raw: raw != sa.func.lower(raw))


def _bare_dois(connection: sa.Connection) -> None:
    """DOIs a user typed with a resolver prefix (`https://doi.org/…`, `doi:…`)."""
    _normalise_dois(connection, lambda raw: sa.or_(raw.like("%doi%"), raw.like("% %")))


def _normalise_dois(
    connection: sa.Connection, needs_it: Callable[[sa.ColumnClause], sa.ColumnElement[bool]]
) -> None:
    """DOIs written before they were kept in normal form. One whose normal form another
    record holds already stays as it is (the unique index would refuse it): that duplicate
    predates the fix, and the harvest reports it as `duplicate_pid`."""
    # Read as plain text: the Doi type would normalise the values compared here.
    raw_doi = sa.column("doi", sa.String)
    table = sa.table("target_records", sa.column("id", sa.String), raw_doi)
    rows = connection.execute(
        sa.select(table.c.id, raw_doi).where(raw_doi.is_not(None), needs_it(raw_doi))
    ).all()
    for row in rows:
        normal = normal_doi(row.doi)
        if normal == row.doi:
            continue
        taken = connection.execute(
            sa.select(table.c.id).where(raw_doi == normal, table.c.id != row.id).limit(1)
        ).first()
        if taken is None:
            connection.execute(sa.update(table).where(table.c.id == row.id).values(doi=normal))


def _add_flag(connection: sa.Connection, table: sa.Table, name: str) -> None:
    """A boolean column, false for the rows there are (a version 1 made now has it already)."""
    columns = {column["name"] for column in sa.inspect(connection).get_columns(table.name)}
    if name not in columns:
        connection.execute(
            sa.text(f"ALTER TABLE {table.name} ADD COLUMN {name} BOOLEAN NOT NULL DEFAULT false")
        )


def _add_harvested_drafts(connection: sa.Connection) -> None:
    _add_flag(connection, drafts, "harvested")


def _add_changed_locally(connection: sa.Connection) -> None:
    _add_flag(connection, records, "changed_locally")
    changed_index.create(connection, checkfirst=True)


def _add_draft_dois(connection: sa.Connection) -> None:
    """Drafts keep their pid: a new record's is the one it reserved, an edit draft's the DOI
    of its data (as publishing read it before)."""
    columns = {column["name"] for column in sa.inspect(connection).get_columns(drafts.name)}
    if "doi" not in columns:
        connection.execute(sa.text(f"ALTER TABLE {drafts.name} ADD COLUMN doi VARCHAR(512)"))
    rows = connection.execute(
        sa.select(drafts.c.record_id, drafts.c.kind, drafts.c.data, records.c.doi).join(
            records, records.c.id == drafts.c.record_id
        )
    ).all()
    for row in rows:
        doi = row.doi if row.kind == "new" else pid_of(row.data)
        connection.execute(
            sa.update(drafts).where(drafts.c.record_id == row.record_id).values(doi=doi)
        )


def _add_listing_indexes(connection: sa.Connection) -> None:
    for index in listing_indexes:
        index.create(connection, checkfirst=True)


def _add_state_listing_index(connection: sa.Connection) -> None:
    state_listing_index.create(connection, checkfirst=True)


def _add_harvester_state_listing_index(connection: sa.Connection) -> None:
    harvester_state_listing_index.create(connection, checkfirst=True)


def _add_draft_claims_index(connection: sa.Connection) -> None:
    draft_claims_index.create(connection, checkfirst=True)


# A record counts while not hard deleted; its source while it has both harvester and
# identifier. The writes of records count the records they insert (TargetTransaction
# `_count_new`: a trigger per inserted row doubled SQLite's cost of an insert); these
# triggers count every change and deletion, whatever code makes it.
_SQLITE_COUNT = """
    INSERT INTO target_counts (source_harvester, records, source_identifiers)
        SELECT coalesce({row}.source_harvester, ''), {sign}1, {sign}(
            {row}.source_harvester IS NOT NULL AND {row}.source_identifier IS NOT NULL)
        WHERE {row}.state <> 'deleted'
    ON CONFLICT (source_harvester) DO UPDATE SET
        records = records + excluded.records,
        source_identifiers = source_identifiers + excluded.source_identifiers;
"""
_COUNTED_COLUMNS = "state, source_harvester, source_identifier"
_SQLITE_COUNT_TRIGGERS = (
    f"""CREATE TRIGGER IF NOT EXISTS tr_target_counts_delete AFTER DELETE ON target_records
    BEGIN {_SQLITE_COUNT.format(row="OLD", sign="-")} END""",
    f"""CREATE TRIGGER IF NOT EXISTS tr_target_counts_update
    AFTER UPDATE OF {_COUNTED_COLUMNS} ON target_records
    WHEN OLD.state IS NOT NEW.state OR OLD.source_harvester IS NOT NEW.source_harvester
        OR OLD.source_identifier IS NOT NEW.source_identifier
    BEGIN {_SQLITE_COUNT.format(row="OLD", sign="-")}
        {_SQLITE_COUNT.format(row="NEW", sign="+")} END""",
)
_POSTGRESQL_COUNT_TRIGGERS = (
    """CREATE OR REPLACE FUNCTION target_counts_follow() RETURNS trigger AS $$
    BEGIN
        IF OLD.state <> 'deleted' THEN
            UPDATE target_counts SET
                records = records - 1,
                source_identifiers = source_identifiers - (OLD.source_harvester IS NOT NULL
                    AND OLD.source_identifier IS NOT NULL)::int
            WHERE source_harvester = coalesce(OLD.source_harvester, '');
        END IF;
        IF TG_OP = 'UPDATE' AND NEW.state <> 'deleted' THEN
            INSERT INTO target_counts AS c (source_harvester, records, source_identifiers)
            VALUES (coalesce(NEW.source_harvester, ''), 1, (NEW.source_harvester IS NOT NULL
                AND NEW.source_identifier IS NOT NULL)::int)
            ON CONFLICT (source_harvester) DO UPDATE SET
                records = c.records + 1,
                source_identifiers = c.source_identifiers + EXCLUDED.source_identifiers;
        END IF;
        RETURN NULL;
    END $$ LANGUAGE plpgsql""",
    "DROP TRIGGER IF EXISTS tr_target_counts_delete ON target_records",
    """CREATE TRIGGER tr_target_counts_delete AFTER DELETE ON target_records
    FOR EACH ROW EXECUTE FUNCTION target_counts_follow()""",
    "DROP TRIGGER IF EXISTS tr_target_counts_update ON target_records",
    f"""CREATE TRIGGER tr_target_counts_update
    AFTER UPDATE OF {_COUNTED_COLUMNS} ON target_records
    FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state
        OR OLD.source_harvester IS DISTINCT FROM NEW.source_harvester
        OR OLD.source_identifier IS DISTINCT FROM NEW.source_identifier)
    EXECUTE FUNCTION target_counts_follow()""",
)


def _count_records(connection: sa.Connection) -> None:
    """The counts of `stats`, made from the records there are, then kept by the inserts
    (`_count_new`) and the triggers of changes and deletions.

    The triggers come first: on PostgreSQL creating one waits for the transactions writing
    records and holds off new ones until this one commits, so the counting that follows
    sees every record written before, and every later change goes through a trigger."""
    counts.create(connection, checkfirst=True)
    postgresql = connection.dialect.name == "postgresql"
    for statement in _POSTGRESQL_COUNT_TRIGGERS if postgresql else _SQLITE_COUNT_TRIGGERS:
        connection.execute(sa.text(statement))
    harvester = sa.func.coalesce(records.c.source_harvester, "")
    counted = sa.select(
        harvester,
        sa.func.count(),
        sa.func.count(records.c.source_harvester + "\x1f" + records.c.source_identifier),
    ).where(records.c.state != "deleted")
    connection.execute(sa.delete(counts))
    connection.execute(
        sa.insert(counts).from_select(
            ["source_harvester", "records", "source_identifiers"], counted.group_by(harvester)
        )
    )


_STEPS = {
    1: _create_v1,
    2: _add_lookup_index,
    3: _lower_dois,
    4: _add_harvested_drafts,
    5: _add_changed_locally,
    6: _bare_dois,
    7: _add_draft_dois,
    8: _add_listing_indexes,
    9: _add_state_listing_index,
    10: _add_harvester_state_listing_index,
    11: _count_records,
    12: _add_draft_claims_index,
}
_LOCK_KEY = 0x0A1_7A56E7  # the advisory lock that serialises migrations on PostgreSQL


def current_version(connection: sa.Connection) -> int:
    if not sa.inspect(connection).has_table(schema_version.name):
        return 0
    return connection.execute(sa.select(sa.func.max(schema_version.c.version))).scalar() or 0


def check_version(engine: sa.Engine) -> None:
    """What `migrate` checks, for a database this process may only read (a read-only home):
    one of another schema version cannot be read with these tables, nor upgraded here."""
    with engine.begin() as connection:
        version = current_version(connection)
    if version > SCHEMA_VERSION:
        raise _newer(version)
    if version < SCHEMA_VERSION:
        found = "no schema" if version == 0 else f"schema version {version}"
        raise ConfigurationError(
            f"the target database has {found}, older than this oai-pipeline "
            f"({SCHEMA_VERSION}), and is on a home this user cannot write: upgrade it by "
            "running any oai-pipeline command where it can be written (as its owner), then "
            "read it here"
        )


def _newer(version: int) -> ConfigurationError:
    return ConfigurationError(
        f"the target database has schema version {version}, newer than this "
        f"oai-pipeline ({SCHEMA_VERSION}); upgrade oai-pipeline"
    )


def refuse_if_changed(connection: sa.Connection) -> None:
    """At the start of a write transaction of a process that opened the target at
    SCHEMA_VERSION: refuse it if another process (a newer oai-pipeline) migrated the target
    since, as the state store does (`state.schema.refuse_if_changed`): an old process left
    running would write what the new schema does not expect (a record left out of the
    counts of version 11). SQLite: BEGIN IMMEDIATE holds the write lock already; PostgreSQL:
    the shared lock keeps a migration out until the transaction ends."""
    if connection.dialect.name == "postgresql":
        connection.execute(sa.text("SELECT pg_advisory_xact_lock_shared(:key)"), {"key": _LOCK_KEY})
    version = connection.execute(sa.select(sa.func.max(schema_version.c.version))).scalar()
    if version != SCHEMA_VERSION:
        raise schema_changed("target", version, SCHEMA_VERSION)


def migrate(engine: sa.Engine) -> int:
    """Create or upgrade the schema to SCHEMA_VERSION; running it again changes nothing.
    A target at SCHEMA_VERSION is only read: no lock to wait for behind writers (SQLite's
    BEGIN IMMEDIATE waited up to 60 s behind a long write transaction)."""
    with engine.execution_options(**{READ_ONLY: True}).begin() as connection:
        if current_version(connection) == SCHEMA_VERSION:
            return SCHEMA_VERSION
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            # Two processes starting at once: the second waits, then finds the schema current;
            # a migration waits for the writes of older processes (`refuse_if_changed`).
            connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
        schema_version.create(connection, checkfirst=True)
        version = current_version(connection)
        if version > SCHEMA_VERSION:  # its tables are not the ones this code writes
            raise _newer(version)
        found = version
        for step in range(version + 1, SCHEMA_VERSION + 1):
            _STEPS[step](connection)
            connection.execute(sa.delete(schema_version))
            connection.execute(sa.insert(schema_version).values(version=step))
            version = step
    if 0 < found < version:  # 0: created just now, not upgraded
        url = engine.url.render_as_string(hide_password=True)
        log_upgraded(logger, "target", url, found, version)
    return version
