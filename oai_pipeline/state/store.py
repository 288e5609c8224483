"""The state store: harvester registry, harvest records, harvest runs and per-record run status.

SQLAlchemy Core on one URL: a SQLite file by default (WAL, busy timeout, writes serialised
with BEGIN IMMEDIATE so concurrent processes wait instead of failing), PostgreSQL
(`postgresql+psycopg2://…`) in production. Every method is one transaction, so a crash
leaves either all of its rows or none.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.pool import NullPool, StaticPool

from oai_pipeline.compiled_statements import new_engine
from oai_pipeline.errors import (
    ConfigurationError,
    NotFound,
    PipelineError,
    RecordError,
    cannot_open_text,
    database_error_text,
    log_unsaved,
    name_database_in_errors,
    without_password,
)
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.identifier_prefix import (
    PendingRekey,
    RekeyPlan,
    RekeyRefused,
    jsonable_pending_rekey,
    plan_rekey,
    replaced,
    starts_with,
    taken_message,
)
from oai_pipeline.json_codec import ENGINE_JSON, Encoded
from oai_pipeline.lock_waits import (
    StoreBusy,
    explain_lock_timeouts,
    is_lock_timeout,
    wait_for_writers,
)
from oai_pipeline.oai.base_url import same_endpoint
from oai_pipeline.oai.types import (
    HarvestedRecord,
    IdentifyInfo,
    SweepCheckpoint,
)
from oai_pipeline.oai.windows import read_datestamp
from oai_pipeline.schema_guard import refuse_writes_after_a_migration
from oai_pipeline.sqlite_tuning import (
    explain_refused_writes,
    read_only_connector,
    release_lock_on_interrupt,
    tune_wal,
    unwritable_sqlite_file,
    use_wal,
)
from oai_pipeline.state.schema import (
    CATCH_UP_COUNTERS,
    applied_fixtures,
    check_version,
    deleted_harvesters,
    harvest_record_data,
    harvest_record_xml,
    harvest_records,
    harvest_run_dagster_runs,
    harvest_runs,
    harvesters,
    identifier_rekeys,
    is_up_to_date,
    migrate,
    pending_rekeys,
    reconcile_runs,
    record_errors,
    refuse_if_changed,
    run_records,
    writer_key,
    writer_memories,
)
from oai_pipeline.sync.rules import Action, HarvestMemory
from oai_pipeline.targets.base import DUPLICATE, WriteOutcome
from oai_pipeline.transform.base import TransformItem

if TYPE_CHECKING:
    import polars as pl

# Caps by scale; 0 = uncapped.
SCALES: dict[str, int] = {"smoke": 10, "small": 100, "medium": 1000, "large": 10000, "full": 0}

logger = logging.getLogger(__name__)

# How the error of a run a later one replaced begins: no harvest resumes it (discover).
SUPERSEDED = "superseded"
RUN_STATUSES = ("running", "succeeded", "failed", "stopped")


class RunSuperseded(PipelineError):
    """A step or harvest would take up a harvest run that a later harvest, a move of the
    source or a rekey superseded (see `superseded_because`)."""


def superseded_because(run: Mapping[str, Any]) -> str | None:
    """Why the run was superseded (its error, "superseded…"), or None if it was not. Stopped
    with that error, it stays so: its resumption token, and the records it staged, are of
    what replaced it (another server, prefix, set, cap or identifiers)."""
    error = run.get("error") or ""
    if run.get("status") == "stopped" and error.startswith(SUPERSEDED):
        return error
    return None


RECORD_STATUSES = ("pending", "running", "imported", "updated", "unchanged", "gone", "failed")
COUNTERS = ("pages_read", "discovered", "staged", "duplicates_skipped", "existing_skipped")
DEFAULT_STALE_MINUTES = 30
# What a run keeps of the notices its attempts met (add_run_notices): this many lines of at
# most this many characters (a notice quotes the source's own error message).
MAX_RUN_NOTICES = 20
MAX_NOTICE_LENGTH = 1000
NOTICES_LEFT_OUT = "(more notices than a run keeps: the others are in the harvest's log)"

_READ_ONLY = "oai_pipeline_read_only"
# How long a write to a SQLite file waits for another writer's transaction (a harvest commits
# a batch at a time) before failing: long, for a harvest. On PostgreSQL a harvest's write
# waits for a row as long as it is held. A sensor's tick waits less (PipelineResource).
DEFAULT_LOCK_WAIT_SECONDS = 60.0
_CHUNK = 500  # identifiers per IN (...) clause, well below every database's limit


@dataclasses.dataclass(frozen=True)
class TakeOverRun:
    """The run a batch of take-overs of freed pids (reidentified.py) counts on: a harvest
    run's write stage, or a reconcile run. Saved with the batch's outcomes, so that a rerun
    reports what a killed attempt took over (`StateStore.run_reidentified`)."""

    kind: Literal["harvest", "reconcile"]
    run_id: int

    @property
    def table(self) -> sa.Table:
        return harvest_runs if self.kind == "harvest" else reconcile_runs


@dataclasses.dataclass
class ReconcileDeletions:
    """What a reconcile run deleted (saved by `mark_gone`): the identifiers it found
    vanished, the actions taken on them, its write errors, and the gone records the
    source listed again that it harvests after."""

    run_id: int
    vanished: list[str]
    actions: Counter[str]
    errors: int
    returned: list[str]


@dataclasses.dataclass(frozen=True)
class StoredTransform:
    """A record's remembered transform: the data as JSON text, its pid and communities, and
    the fingerprint of the chain that made them (None: not known): what a writer writing
    them again remembers writing, not the chain's of the day."""

    data_json: str
    pid: str | None
    communities: list[str]
    fingerprint: str | None = None


# What a writer wrote a record from (`written_fingerprint`): one for all its records, or
# each record's (records left out, or None: the fingerprint written before stays).
WrittenFingerprint = str | Mapping[str, str] | None


@dataclasses.dataclass(frozen=True)
class ReportedRecord:
    """What the source last reported of a record: its datestamp, whether it is deleted, and
    its last transform (None when there is none to write, e.g. the transform failed)."""

    datestamp: str
    deleted: bool
    transform: StoredTransform | None


_NO_ERROR = {"error_type": None, "error_message": None, "error_location": None}


# Changes of a harvester's metadata prefix kept (`prefix_changed` and its `earlier` ones):
# a record harvested before the oldest is counted in that one's prefix before.
_PREFIX_CHANGES_KEPT = 10


def _kept_changes(change: dict[str, Any] | None) -> dict[str, Any] | None:
    """The chain of prefix changes `change` begins, at most _PREFIX_CHANGES_KEPT - 1 deep:
    the `earlier` of a new change."""
    if change is None:
        return None
    chain = [change]
    while isinstance(chain[-1].get("earlier"), dict) and len(chain) < _PREFIX_CHANGES_KEPT - 1:
        chain.append(chain[-1]["earlier"])
    kept = None
    for older in reversed(chain):
        kept = {**older, "earlier": kept}
    return kept


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _minutes_ago(minutes: int) -> str:
    try:
        moment = datetime.now(UTC) - timedelta(minutes=minutes)
    except OverflowError:  # longer ago than the calendar goes: nothing is that old
        moment = datetime.min
    return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _encoded(data_json: Mapping[str, str], item: TransformItem) -> Encoded | None:
    """The item's data as the JSON text made of it, for the JSON column to store unchanged."""
    text = data_json.get(item.identifier)
    return None if text is None else Encoded(text)


def writers_wait(url: str, lock_wait_seconds: float | None) -> float | None:
    """How long a write to the state database at `url` waits for another writer: the wait
    given, else a harvest's (DEFAULT_LOCK_WAIT_SECONDS on SQLite, none on PostgreSQL)."""
    if lock_wait_seconds is None and make_url(url).get_backend_name() == "sqlite":
        return DEFAULT_LOCK_WAIT_SECONDS
    return lock_wait_seconds


def _create_engine(
    url: str,
    *,
    read_only_file: Path | None = None,
    lock_wait_seconds: float | None = None,
) -> Engine:
    """The store's engine; `read_only_file`: the SQLite file, opened read-only
    (`read_only_connector`) by a command that only reads a home it cannot write;
    `lock_wait_seconds`: how long a write waits for another writer's transaction before it
    fails (`lock_waits.is_lock_timeout`). None: a harvest's wait, DEFAULT_LOCK_WAIT_SECONDS
    on SQLite; none on PostgreSQL, which locks rows: a write there waits only for one
    writing the same rows, as long as it takes."""
    parsed = make_url(url)
    lock_wait_seconds = writers_wait(url, lock_wait_seconds)
    if parsed.get_backend_name() != "sqlite":
        engine = new_engine(url, pool_pre_ping=True, **ENGINE_JSON)
        wait_for_writers(engine, lock_wait_seconds)
        name_database_in_errors(engine, "state")
        return engine
    assert lock_wait_seconds is not None
    in_memory = parsed.database in (None, "", ":memory:")
    if read_only_file is not None:
        creator = read_only_connector(read_only_file, timeout=lock_wait_seconds)
        engine = new_engine(url, creator=creator, poolclass=NullPool, **ENGINE_JSON)
    else:
        # A URI filename (file:...?mode=ro&uri=true) names a database that exists; as a
        # path it would create a folder called "file:" in the working directory.
        if not in_memory and not parsed.database.startswith("file:"):
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = new_engine(
            url,
            connect_args={"timeout": lock_wait_seconds, "check_same_thread": False},
            **ENGINE_JSON,
            **({"poolclass": StaticPool} if in_memory else {}),
        )
    wal = not in_memory and read_only_file is None

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {round(lock_wait_seconds * 1000)}")
        if wal:
            use_wal(cursor, lock_wait_seconds)
            tune_wal(cursor)
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        # Writers take the lock up front (no deadlock on upgrade); readers never wait.
        if read_only_file is not None or connection.get_execution_options().get(_READ_ONLY):
            connection.exec_driver_sql("BEGIN")
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    release_lock_on_interrupt(engine)
    explain_refused_writes(engine)
    explain_lock_timeouts(engine, lock_wait_seconds)
    name_database_in_errors(engine, "state")
    return engine


def _add_actions(
    conn: Connection, column: sa.Column, run_id: int, actions: Mapping[str, int]
) -> None:
    """Add a batch's actions to the run's counts kept in `column` (action -> count), in the
    batch's transaction: a resumed attempt reports what the killed ones did."""
    table = column.table
    stored = conn.execute(sa.select(column).where(table.c.id == run_id)).scalar()
    total = Counter(stored or {})
    total.update(actions)
    conn.execute(table.update().where(table.c.id == run_id).values({column.name: dict(total)}))


def _unknown_to_source(rr: sa.Table) -> sa.ColumnElement[bool]:
    """A run row `fail_unknown` made for an identifier the source never had: a failed record
    of the run, but nothing was staged for it (no harvest record), so not one of `staged`."""
    # (coalesce: a failed row without an error type is no such row, and NOT NULL is NULL)
    error_type = sa.func.coalesce(rr.c.error_type, "")
    return sa.and_(rr.c.status == "failed", error_type == "idDoesNotExist")


def _staged_in_run(conn: Connection, run_id: int, identifiers: list[str]) -> set[str]:
    """Which of these records (a chunk: `_chunks`) the run has staged."""
    rr = run_records
    query = sa.select(rr.c.identifier).where(
        rr.c.run_id == run_id, rr.c.identifier.in_(identifiers)
    )
    return set(conn.execute(query).scalars())


class StagedPage(NamedTuple):
    """What `StateStore.stage` did with a page."""

    new: int  # newly staged
    duplicates: int  # records the run had already: skipped, or replaced by a newer copy
    newer: int = 0  # of the duplicates, the newer copies that replaced the staged ones


@dataclasses.dataclass
class _Relisted:
    """What staging learns of records listed again (`StateStore._unchanged`)."""

    unchanged: set[str] = dataclasses.field(default_factory=set)  # same datestamp, XML kept
    # same datestamp, other XML: changed later on the day of its datestamp
    changed_within_day: set[str] = dataclasses.field(default_factory=set)
    # unchanged, with the same sets, not vanished: only its harvest time is new
    as_stored: set[str] = dataclasses.field(default_factory=set)
    # same datestamp, other sets: moved to another collection (DSpace, InvenioRDM do so
    # without a new datestamp), which a transform may map to a community
    sets_changed: set[str] = dataclasses.field(default_factory=set)
    # same datestamp, stored in the metadata format the harvester asked for before its
    # prefix changed (`harvesters.prefix_changed`): its XML is the old format's
    other_format: set[str] = dataclasses.field(default_factory=set)
    existing: set[str] = dataclasses.field(default_factory=set)  # harvest records found


def _of_record(table: sa.Table) -> sa.ColumnElement[bool]:
    """Join condition: the row of `table` (XML or data) that belongs to the harvest record."""
    return sa.and_(
        table.c.harvester_id == harvest_records.c.harvester_id,
        table.c.identifier == harvest_records.c.identifier,
    )


def _equal_or_null(column: sa.ColumnElement[Any], value: Any) -> sa.ColumnElement[bool]:
    """`column IS NOT DISTINCT FROM value` as an index can answer it (PostgreSQL's cannot)."""
    return column.is_(None) if value is None else column == value


def _error_dict(row: Any) -> dict[str, Any]:
    return {"stage": row.stage, "type": row.type, "message": row.message, "location": row.location}


def _checkpoint_from_json(data: dict[str, Any] | None) -> SweepCheckpoint | None:
    if not data:
        return None
    names = {f.name for f in dataclasses.fields(SweepCheckpoint)}
    return SweepCheckpoint(**{k: v for k, v in data.items() if k in names})


# The columns of a listed harvest record (and of `records show`, before its errors, XML, data).
LISTED_RECORD_FIELDS = (
    "harvester_id",
    "identifier",
    "datestamp",
    "deleted",
    "set_specs",
    "pid",
    "local_id",
    "written_revision",
    "written_datestamp",
    "last_harvested_at",
    "last_transformed_at",
    "last_written_at",
    "gone_at",
)


@dataclasses.dataclass(frozen=True)
class WriterKey:
    """Whose memory of a write: a harvester's writer, by its plug-in name (`writer_key`).
    The first writer's memory is on the harvest record (`written_by`), the others' in
    writer_memories: a harvester with one writer (`alone`) reads and writes no other table."""

    name: str
    first: bool = True
    alone: bool = True


def writer_keys(specs: Sequence[str]) -> list[WriterKey]:
    """The keys of a harvester's writers (its `writers` specs), in their order."""
    return [
        WriterKey(writer_key(spec), first=index == 0, alone=len(specs) == 1)
        for index, spec in enumerate(specs)
    ]


def _memory(written: Any, listed: Any, had_errors: bool) -> HarvestMemory:
    """A writer's memory of a record from its `written` row and the record's `listed`."""
    return HarvestMemory(
        datestamp=written.written_datestamp,
        had_errors=had_errors,
        local_id=written.local_id,
        written_revision=written.written_revision,
        deleted=bool(listed.deleted),
        written_fingerprint=written.written_fingerprint,
        listed_datestamp=listed.datestamp,
        written_at=datetime.fromisoformat(written.last_written_at),
    )


def supersedes(record: HarvestedRecord, datestamp: str, deleted: bool) -> bool:
    """Whether `record`, listed again in the same sweep, replaces the copy staged before
    (`datestamp`, `deleted`): a later datestamp, or the same one with the other status (the
    source's later word). A redone page lists the very same copies and replaces nothing."""
    return is_later_copy((record.datestamp, record.deleted), (datestamp, deleted))


def is_later_copy(copy: tuple[str, bool], than: tuple[str, bool]) -> bool:
    """Whether a record's copy (datestamp, deleted), listed after `than`, replaces it.

    Compared as moments: as text, `10:00:00Z` is later than `10:00:00.500Z` and
    `12:30:00+02:00` than `11:00:00Z`. Text that is no datestamp is compared as text."""
    if copy[0] != than[0]:
        later, earlier = _moment(copy[0]), _moment(than[0])
        if later is None or earlier is None:
            return copy[0] > than[0]
        if later != earlier:
            return later > earlier
    return copy[1] != than[1]


# A source may stamp the days of its own time zone: a copy harvested up to a day after the
# UTC day of its datestamp may still be older than the record's last change on that day.
_DAY_STAMP_SLACK = timedelta(days=2)


def _listed_within_its_day(datestamp: str | None, listed_at: datetime) -> bool:
    """Whether a record with a day's datestamp (`YYYY-MM-DD`), listed at `listed_at`, may have
    changed since its stored copy under the same datestamp: its day (and the slack) is not
    over yet, so the stored copy, harvested earlier still, may predate a later change."""
    if datestamp is None or len(datestamp.strip()) != len("YYYY-MM-DD"):
        return False
    day = _moment(datestamp)
    return day is not None and listed_at < day + _DAY_STAMP_SLACK


def _listing_moment(response_date: str | None) -> datetime:
    """When the source listed a page, by its own clock (the page's responseDate, the clock its
    datestamps follow), or by ours when it gave none that reads as a date."""
    moment = _moment(response_date) if response_date else None
    return moment if moment is not None else datetime.now(UTC)


def _moment(datestamp: str) -> datetime | None:
    return read_datestamp(datestamp)


def read_base_urls(
    url: str, harvester_ids: Iterable[str], *, timeout_seconds: float
) -> dict[str, str]:
    """The base URLs of these harvesters, read in one query that waits at most
    `timeout_seconds` for a lock or a connection.

    For callers that must not stall, such as the run coordinator inside the webserver's launch
    of a run: opening a `StateStore` checks the schema in a write transaction, which waits up
    to 60 s while a harvest writes on SQLite. This only reads (no schema check, no file
    created), so a harvest's write transaction does not hold it up in WAL mode."""
    wanted = set(harvester_ids)
    if not wanted:
        return {}
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database.startswith("file:"):  # a URI filename: sqlite3 reads its mode itself
            connect_args: dict[str, Any] = {"timeout": timeout_seconds, "uri": True}
        elif database in ("", ":memory:") or not Path(database).expanduser().exists():
            return {}  # no store yet: no harvester has a URL
        else:
            connect_args = {"timeout": timeout_seconds}
    elif parsed.get_backend_name() == "postgresql":
        milliseconds = max(1, int(timeout_seconds * 1000))
        connect_args = {
            "connect_timeout": max(1, round(timeout_seconds)),
            "options": f"-c statement_timeout={milliseconds}",
        }
    else:
        connect_args = {}
    engine = new_engine(url, connect_args=connect_args, poolclass=NullPool, **ENGINE_JSON)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                sa.select(harvesters.c.id, harvesters.c.config).where(
                    harvesters.c.id.in_(sorted(wanted))
                )
            ).all()
    except sa.exc.DBAPIError as error:  # locked, no such table, not a database, timed out
        shown, reason = without_password(url), database_error_text(error.orig)
        raise PipelineError(f"cannot read the state database {shown}: {reason}") from None
    finally:
        engine.dispose()
    return {
        row.id: row.config["base_url"]
        for row in rows
        if isinstance(row.config, dict) and row.config.get("base_url")
    }


class Rekey(NamedTuple):
    """A saved `harvesters rekey` of a harvester's identifiers."""

    old_prefix: str
    new_prefix: str
    rekeyed_at: str


class PrunedRuns(NamedTuple):
    """What `StateStore.prune_run_records` dropped."""

    runs: int  # runs whose per-record rows went now
    rows: int


class StateStore:
    """Everything the pipeline remembers between runs, in one database."""

    def __init__(
        self,
        url: str,
        *,
        only_reads: bool = False,
        lock_wait_seconds: float | None = None,
    ) -> None:
        """`only_reads`: opened by a command that only reads (status, the listings). On a
        SQLite file this process cannot write (a read-only home) it is then opened read-only,
        without the schema upgrade and without the writes those commands would make; the
        store's writing methods fail with the line saying the file is not writable.
        `lock_wait_seconds`: how long a write waits for another writer's transaction before
        it fails (`lock_waits.is_lock_timeout`), on SQLite and PostgreSQL: a sensor's tick
        waits a few seconds, not what a harvest may (None: a minute on SQLite, as long as
        the lock is held on PostgreSQL), which held Dagster's daemon thread."""
        self.url = url
        shown = without_password(url)
        read_only_file = unwritable_sqlite_file(url) if only_reads else None
        self.read_only = read_only_file is not None
        try:
            self._engine = _create_engine(
                url, read_only_file=read_only_file, lock_wait_seconds=lock_wait_seconds
            )
        except (OSError, ImportError, ValueError, sa.exc.ArgumentError) as error:
            # ImportError: a URL of a database whose driver is not installed (mysql://)
            reason = database_error_text(error)
            raise ConfigurationError(f"cannot open the state database {shown}: {reason}") from None
        try:
            if self.read_only:
                with self._engine.begin() as connection:
                    check_version(connection)
            else:
                with self._read() as connection:  # SQLite: waits for no writer
                    up_to_date = is_up_to_date(connection)
                if not up_to_date:
                    with self._engine.begin() as connection:
                        migrate(connection)
        except sa.exc.DatabaseError as error:  # also a file that is no database (garbage)
            self._engine.dispose()
            reason = database_error_text(error.orig)
            message = cannot_open_text("state", url, error)
            if is_lock_timeout(error):  # a migration waiting behind a harvest's writes
                raise StoreBusy(message, reason) from None
            raise PipelineError(message) from None
        if not self.read_only:
            refuse_writes_after_a_migration(self._engine, refuse_if_changed, _READ_ONLY)

    def close(self) -> None:
        self._engine.dispose()

    def _read(self) -> Any:
        """A transaction that only reads: on SQLite it does not wait for writers."""
        return self._engine.execution_options(**{_READ_ONLY: True}).begin()

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- registry ------------------------------------------------------------------------

    def save_harvester(self, harvester: Harvester) -> None:
        self.save_harvesters([harvester])

    def save_harvesters(self, many: list[Harvester]) -> None:
        """Create or replace several harvesters in one transaction: all or none.

        A harvester given another base URL (the source moved) drops the Identify saved for
        the old one: it is not the new endpoint's, so it must neither stand in for an
        Identify the new URL fails (a wrong URL harvested with the old source's
        granularity) nor count as the new URL having answered OAI-PMH (`_identify`).

        A harvester given another metadata prefix keeps when (`prefix_changed`): a record
        harvested before that the new format's list leaves out may just not be offered in
        it, which a reconcile must not take for a deletion (`harvested_before_prefix_change`).
        One created again over the records it kept when deleted (`deleted_harvesters`) is
        judged against the prefix they were harvested in, as an update."""
        now = utc_now()
        with self._engine.begin() as conn:
            for harvester in many:
                config = harvester.model_dump(mode="json")
                values: dict[str, Any] = {"config": config, "updated_at": now}
                stored = conn.execute(
                    sa.select(harvesters.c.config, harvesters.c.prefix_changed).where(
                        harvesters.c.id == harvester.id
                    )
                ).first()
                before = stored.config if stored and isinstance(stored.config, dict) else {}
                old_url = before.get("base_url")
                if old_url and not same_endpoint(old_url, harvester.base_url):
                    values |= {"identify": None, "deleted_record": None}
                old_prefix, last_change = before.get("metadata_prefix"), None
                if stored is not None:
                    last_change = stored.prefix_changed
                elif kept := self._kept_of_deleted(conn, harvester.id):
                    old_prefix, last_change = kept.metadata_prefix, kept.prefix_changed
                    values["prefix_changed"] = last_change  # created again in that prefix
                if old_prefix and old_prefix != harvester.metadata_prefix:
                    values["prefix_changed"] = self._prefix_change(
                        conn, harvester, old_prefix, last_change, now
                    )
                updated = conn.execute(
                    harvesters.update().where(harvesters.c.id == harvester.id).values(**values)
                ).rowcount
                if not updated:
                    conn.execute(
                        harvesters.insert().values(id=harvester.id, created_at=now, **values)
                    )

    def deleted_harvester_prefix(self, harvester_id: str) -> str | None:
        """The metadata prefix of the harvester deleted with its records kept (None: none)."""
        table = deleted_harvesters
        with self._read() as conn:
            return conn.execute(
                sa.select(table.c.metadata_prefix).where(table.c.id == harvester_id)
            ).scalar()

    @staticmethod
    def _kept_of_deleted(conn: Connection, harvester_id: str) -> sa.Row[Any] | None:
        """What a harvester deleted with its records kept left of its prefix (taken: the
        harvester is registered again), else None."""
        table = deleted_harvesters
        kept = conn.execute(
            sa.select(table.c.metadata_prefix, table.c.prefix_changed).where(
                table.c.id == harvester_id
            )
        ).first()
        if kept is not None:
            conn.execute(table.delete().where(table.c.id == harvester_id))
        return kept

    @staticmethod
    def _prefix_change(
        conn: Connection, harvester: Harvester, old_prefix: str, last: Any, now: str
    ) -> dict[str, Any] | None:
        """`prefix_changed` once `harvester` asks for its prefix instead of `old_prefix`:
        when, and the prefix before; the change before it kept (`earlier`, one deep). A change
        undone before any record was harvested in the prefix it undoes (a typo put right) was
        none: the change before it stands again. Before, every record was taken for the
        mistyped format's, held back from each reconcile and written anew."""
        last = last if isinstance(last, dict) else None
        if last is not None and last.get("before") == harvester.metadata_prefix:
            harvested_since = conn.execute(
                sa.select(harvest_records.c.identifier)
                .where(
                    harvest_records.c.harvester_id == harvester.id,
                    harvest_records.c.last_harvested_at >= last["at"],
                )
                .limit(1)
            ).first()
            if harvested_since is None:
                return last.get("earlier")
        return {"before": old_prefix, "at": now, "earlier": _kept_changes(last)}

    def get_harvester(self, harvester_id: str) -> Harvester | None:
        with self._read() as conn:
            config = conn.execute(
                sa.select(harvesters.c.config).where(harvesters.c.id == harvester_id)
            ).scalar()
        return None if config is None else Harvester.from_stored(config)

    def list_harvesters(self) -> list[Harvester]:
        with self._read() as conn:
            configs = conn.execute(
                sa.select(harvesters.c.config).order_by(harvesters.c.id)
            ).scalars()
            return [Harvester.from_stored(config) for config in configs]

    def applied_fixture(self, path: str) -> str | None:
        """The sha256 of the content of the fixture file `path` applied last (None: never)."""
        with self._read() as conn:
            return conn.execute(
                sa.select(applied_fixtures.c.sha256).where(applied_fixtures.c.path == path)
            ).scalar()

    def mark_fixture_applied(self, path: str, sha256: str) -> None:
        now = utc_now()
        with self._engine.begin() as conn:
            updated = conn.execute(
                applied_fixtures.update()
                .where(applied_fixtures.c.path == path)
                .values(sha256=sha256, applied_at=now)
            ).rowcount
            if not updated:
                conn.execute(
                    applied_fixtures.insert().values(path=path, sha256=sha256, applied_at=now)
                )

    def delete_harvester(self, harvester_id: str, *, delete_records: bool = False) -> bool:
        """Remove from the registry; its harvest records and runs stay unless asked, and
        then the prefix they were harvested in (`deleted_harvesters`, see save_harvesters)."""
        with self._engine.begin() as conn:
            stored = conn.execute(
                sa.select(harvesters.c.config, harvesters.c.prefix_changed).where(
                    harvesters.c.id == harvester_id
                )
            ).first()
            existed = bool(
                conn.execute(harvesters.delete().where(harvesters.c.id == harvester_id)).rowcount
            )
            kept = deleted_harvesters
            conn.execute(kept.delete().where(kept.c.id == harvester_id))
            prefix = (stored.config or {}).get("metadata_prefix") if stored else None
            if prefix and not delete_records:
                conn.execute(
                    kept.insert().values(
                        id=harvester_id,
                        metadata_prefix=prefix,
                        prefix_changed=stored.prefix_changed,
                        deleted_at=utc_now(),
                    )
                )
            if delete_records:
                for table in (
                    record_errors,
                    harvest_record_xml,
                    harvest_record_data,
                    harvest_records,
                    writer_memories,
                    run_records,
                    reconcile_runs,
                    identifier_rekeys,
                    pending_rekeys,
                ):
                    conn.execute(table.delete().where(table.c.harvester_id == harvester_id))
                links = harvest_run_dagster_runs
                conn.execute(
                    links.delete().where(
                        links.c.run_id.in_(
                            sa.select(harvest_runs.c.id).where(
                                harvest_runs.c.harvester_id == harvester_id
                            )
                        )
                    )
                )
                conn.execute(
                    harvest_runs.delete().where(harvest_runs.c.harvester_id == harvester_id)
                )
        return existed

    def save_identify(self, harvester_id: str, info: IdentifyInfo) -> None:
        with self._engine.begin() as conn:
            updated = conn.execute(
                harvesters.update()
                .where(harvesters.c.id == harvester_id)
                .values(
                    identify=dataclasses.asdict(info),
                    deleted_record=info.deleted_record,
                    updated_at=utc_now(),
                )
            ).rowcount
        if not updated:
            raise PipelineError(f"unknown harvester {harvester_id!r}")

    def harvested_before_prefix_change(
        self, harvester_id: str, identifiers: Iterable[str]
    ) -> tuple[dict[str, int], list[str]] | None:
        """(how many of them were harvested in each prefix before, the latest first; these
        records last harvested before the harvester's last change of metadata prefix), or
        None when none of them was: only their absence from the list of the prefix it has
        since is known, not whether the source still has them. A record harvested before the
        oldest change kept counts under that change's prefix before. One harvested in the
        prefix the harvester has again (A, then B, then A) is not counted: its absence from
        that prefix's list says what it says of the others."""
        hr = harvest_records
        seen = hr.c.last_harvested_at
        with self._read() as conn:
            stored = conn.execute(
                sa.select(harvesters.c.prefix_changed, harvesters.c.config).where(
                    harvesters.c.id == harvester_id
                )
            ).first()
            change = None if stored is None else stored.prefix_changed
            if not isinstance(change, dict):
                return None
            prefix_now = Harvester.from_stored(stored.config).metadata_prefix
            found: dict[str, str] = {}  # identifier -> when last harvested
            for chunk in _chunks(sorted(set(identifiers))):
                rows = conn.execute(
                    sa.select(hr.c.identifier, seen).where(
                        hr.c.harvester_id == harvester_id,
                        hr.c.identifier.in_(chunk),
                        sa.or_(seen.is_(None), seen < change["at"]),
                    )
                )
                found |= {identifier: harvested_at for identifier, harvested_at in rows}
        changes = [change]  # the latest first, each change's `earlier` the one before it
        while isinstance(changes[-1].get("earlier"), dict):
            changes.append(changes[-1]["earlier"])
        formats: dict[str, int] = {c["before"]: 0 for c in changes}
        other_format: list[str] = []
        for identifier, harvested_at in found.items():
            # the prefix before the oldest change made after the record was harvested
            after = [c for c in changes if (harvested_at or "") < c["at"]]
            prefix = after[-1]["before"]
            if prefix != prefix_now:
                formats[prefix] += 1
                other_format.append(identifier)
        if not other_format:
            return None
        return {p: n for p, n in formats.items() if n}, sorted(other_format)

    def get_identify(self, harvester_id: str) -> IdentifyInfo | None:
        with self._read() as conn:
            data = conn.execute(
                sa.select(harvesters.c.identify).where(harvesters.c.id == harvester_id)
            ).scalar()
        if data is None:
            return None
        return IdentifyInfo(**{**data, "admin_emails": tuple(data.get("admin_emails", ()))})

    # -- harvest records -----------------------------------------------------------------

    def _existing(
        self,
        conn: Connection,
        harvester_id: str,
        identifiers: Sequence[str],
        table: sa.Table = harvest_records,
        **key: str,
    ) -> set[str]:
        """Which of these records have a row in `table` (of the harvester, and `key`)."""
        found: set[str] = set()
        of_key = [table.c[name] == value for name, value in key.items()]
        for chunk in _chunks(identifiers):
            found.update(
                conn.execute(
                    sa.select(table.c.identifier).where(
                        table.c.harvester_id == harvester_id,
                        table.c.identifier.in_(chunk),
                        *of_key,
                    )
                ).scalars()
            )
        return found

    def _upsert_records(
        self,
        conn: Connection,
        harvester_id: str,
        rows: dict[str, dict[str, Any]],
        known: set[str] | frozenset[str] = frozenset(),
        table: sa.Table = harvest_records,
        **key: str,
    ) -> None:
        """Update the harvest records that exist, insert the others (same columns each);
        `known`: records the caller has just read, which exist. `table`: another table of
        rows by (harvester, identifier, `key`), as writer_memories."""
        if not rows:
            return
        existing = set(known) | self._existing(
            conn, harvester_id, [i for i in rows if i not in known], table, **key
        )
        by_columns: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for identifier, values in rows.items():
            if identifier in existing:
                columns = tuple(sorted(values))
                params = {f"b_{k}": v for k, v in values.items()}
                by_columns.setdefault(columns, []).append({"b_identifier": identifier, **params})
        for columns, params in by_columns.items():
            statement = (
                table.update()
                .where(
                    table.c.harvester_id == harvester_id,
                    table.c.identifier == sa.bindparam("b_identifier"),
                    *(table.c[name] == value for name, value in key.items()),
                )
                .values({c: sa.bindparam(f"b_{c}") for c in columns})
            )
            conn.execute(statement, params)
        defaults = {"deleted": False} if table is harvest_records else {}
        new = [
            {"harvester_id": harvester_id, "identifier": identifier, **key, **defaults, **values}
            for identifier, values in rows.items()
            if identifier not in existing
        ]
        if new:
            for columns_group in _group_by_keys(new):
                conn.execute(table.insert(), columns_group)

    @staticmethod
    def _replace_payloads(
        conn: Connection,
        table: sa.Table,
        harvester_id: str,
        payloads: dict[str, Any],
    ) -> None:
        """Set the XML or data of these records (`table`'s one value column); None: none."""
        if not payloads:
            return
        (column,) = (c.name for c in table.columns if not c.primary_key)
        for chunk in _chunks(list(payloads)):
            conn.execute(
                table.delete().where(
                    table.c.harvester_id == harvester_id, table.c.identifier.in_(chunk)
                )
            )
        rows = [
            {"harvester_id": harvester_id, "identifier": identifier, column: value}
            for identifier, value in payloads.items()
            if value is not None
        ]
        if rows:
            conn.execute(table.insert(), rows)

    def _replace_errors(
        self,
        conn: Connection,
        harvester_id: str,
        stage: str,
        errors: dict[str, list[RecordError]],
    ) -> None:
        identifiers = list(errors)
        for chunk in _chunks(identifiers):
            conn.execute(
                record_errors.delete().where(
                    record_errors.c.harvester_id == harvester_id,
                    record_errors.c.stage == stage,
                    record_errors.c.identifier.in_(chunk),
                )
            )
        now = utc_now()
        rows = [
            {
                "harvester_id": harvester_id,
                "identifier": identifier,
                "stage": stage,
                "type": error.type,
                "message": error.message,
                "location": error.location,
                "created_at": now,
            }
            for identifier, record_list in errors.items()
            for error in record_list
        ]
        if rows:
            conn.execute(record_errors.insert(), rows)

    def _upsert_harvested(
        self,
        conn: Connection,
        harvester_id: str,
        records: Iterable[HarvestedRecord],
        *,
        rewrite: bool = False,
        listed_at: str | None = None,
    ) -> None:
        now = utc_now()
        latest = {record.identifier: record for record in records}
        relisted = (
            _Relisted()
            if rewrite
            else self._unchanged(conn, harvester_id, latest, _listing_moment(listed_at))
        )
        unchanged, changed_within_day = relisted.unchanged, relisted.changed_within_day
        # Listed again as stored, sets and all: one statement for them all, not one each (an
        # unchanged re-harvest stages every record of the source).
        for chunk in _chunks(list(relisted.as_stored)):
            conn.execute(
                harvest_records.update()
                .where(
                    harvest_records.c.harvester_id == harvester_id,
                    harvest_records.c.identifier.in_(chunk),
                )
                .values(last_harvested_at=now)
            )
        rows: dict[str, dict[str, Any]] = {}
        xml: dict[str, bytes | None] = {}
        # Answered without the record (a GetRecord refused): the copy last harvested stays,
        # its datestamp, sets and XML; only the error is new. Before, they were wiped until
        # the source listed it again, and `records show` had no XML of a record written.
        empty = [r.identifier for r in latest.values() if r.holds_no_copy]
        kept = self._existing(conn, harvester_id, empty) if empty else set()
        restated = changed_within_day | relisted.sets_changed | relisted.other_format
        for r in latest.values():
            if r.identifier in relisted.as_stored:
                continue
            if r.identifier in kept:
                rows[r.identifier] = {"last_harvested_at": now}
                continue
            values: dict[str, Any] = {
                "set_specs": list(r.set_specs),
                "last_harvested_at": now,
                "gone_at": now if r.vanished else None,
            }
            if r.identifier not in unchanged:
                values.update(datestamp=r.datestamp, deleted=r.deleted)
                # Gone without a deleted header (GetRecord's idDoesNotExist): the source sent
                # nothing newer, so the copy last harvested stays, beside the data transformed
                # from it, as a reconcile's `mark_gone` leaves it. Before, it was dropped.
                if not r.vanished:
                    xml[r.identifier] = r.xml
            # Its stored transform and written datestamp no longer describe the copy, whose
            # datestamp may be the one they bear: its content, sets or format changed under
            # it (`restated`), or it is a copy without a transform (a deleted header, one
            # that did not parse: listed live again with the same datestamp, a day's, the
            # transform of the copy before was written in its place, or the write skipped).
            untransformed = not r.vanished and (r.deleted or r.error is not None or r.xml is None)
            if untransformed or r.identifier in restated:
                values.update(transformed_datestamp=None)
                if not r.deleted:  # a deletion's write stands: the tombstone is the target's
                    values.update(written_datestamp=None)
            rows[r.identifier] = values
        self._upsert_records(conn, harvester_id, rows, relisted.existing)
        self._replace_payloads(conn, harvest_record_xml, harvester_id, xml)
        self._replace_errors(
            conn,
            harvester_id,
            "harvest",
            {r.identifier: [r.error] if r.error else [] for r in latest.values()},
        )

    def _unchanged(
        self,
        conn: Connection,
        harvester_id: str,
        records: dict[str, HarvestedRecord],
        listed_at: datetime,
    ) -> _Relisted:
        """Records harvested again as they were: same datestamp, live, the XML stored
        and its last harvest without an error. Their XML is not written again (a source
        changes the datestamp when it changes a record; a re-harvest of a large source would
        otherwise rewrite all of its XML). A record whose last harvest failed at any stage
        (a parse, transform or write error) is retried from what the source lists now: a
        source that fixes a record without a new datestamp must not get the old XML
        transformed again. Nor is one listed in other sets (`sets_changed`): it is written
        again for the move, so from the XML listed with it.

        A day's datestamp says on which day a record last changed, not when: a copy
        harvested during that day may have changed later that day. Such a record, listed
        again before its day (and the slack) is over by the source's clock, counts as
        unchanged only if its XML is the stored one (`changed_within_day` when not, a
        failed one too: before, a staged copy that failed its transform was kept when the
        source fixed it later that day).

        A record last harvested before the harvester asked for another metadata prefix is
        not unchanged either (`other_format`): its stored XML is the old format's. Before,
        the new format's copy was dropped as unchanged and the target kept the old one's."""
        candidates = [
            r.identifier
            for r in records.values()
            if not r.deleted and r.error is None and r.xml is not None
        ]
        hr, stored_xml = harvest_records, harvest_record_xml
        relisted = _Relisted()
        same: set[str] = set()
        # the sets and whether it had vanished, as stored: unchanged too, or not
        kept_as_is: set[str] = set()
        to_compare: list[str] = []
        # same datestamp, its last harvest failed: never unchanged, but changed within its
        # day all the same when its XML is not the stored one (a staged copy is replaced)
        failed: set[str] = set()
        prefix_changed = conn.execute(
            sa.select(harvesters.c.prefix_changed).where(harvesters.c.id == harvester_id)
        ).scalar()
        format_since = prefix_changed.get("at") if isinstance(prefix_changed, dict) else None
        for chunk in _chunks(candidates):
            for row in conn.execute(
                sa.select(
                    hr.c.identifier,
                    hr.c.datestamp,
                    hr.c.set_specs,
                    hr.c.gone_at,
                    hr.c.last_harvested_at,
                )
                .join(stored_xml, _of_record(stored_xml))
                .where(
                    hr.c.harvester_id == harvester_id,
                    hr.c.identifier.in_(chunk),
                    ~hr.c.deleted,
                )
            ):
                relisted.existing.add(row.identifier)
                record = records[row.identifier]
                if format_since is not None and (row.last_harvested_at or "") < format_since:
                    relisted.other_format.add(row.identifier)
                elif row.datestamp == record.datestamp:
                    same.add(row.identifier)
                    if list(row.set_specs or []) != list(record.set_specs):
                        relisted.sets_changed.add(row.identifier)
                    elif row.gone_at is None:
                        kept_as_is.add(row.identifier)
                    if _listed_within_its_day(row.datestamp, listed_at):
                        to_compare.append(row.identifier)
            if same:
                with_errors = self._with_errors(conn, harvester_id, None, chunk)
                failed |= same & with_errors
                same -= with_errors
        for chunk in _chunks([i for i in to_compare if i in same or i in failed]):
            for row in conn.execute(
                sa.select(stored_xml.c.identifier, stored_xml.c.xml).where(
                    stored_xml.c.harvester_id == harvester_id,
                    stored_xml.c.identifier.in_(chunk),
                )
            ):
                if bytes(row.xml) != records[row.identifier].xml:
                    relisted.changed_within_day.add(row.identifier)
        # Moved to other sets, a record is transformed and written again: from the copy the
        # source lists now, not the stored one (before, a record also changed on the day of
        # its datestamp got its old data written under its new sets, a copy the source never
        # had).
        relisted.unchanged = same - relisted.changed_within_day - relisted.sets_changed
        relisted.as_stored = relisted.unchanged & kept_as_is
        return relisted

    @staticmethod
    def _with_errors(
        conn: Connection, harvester_id: str, stage: str | None, identifiers: Sequence[str]
    ) -> set[str]:
        """Which of these records (one chunk) have an error of this stage (None: any)."""
        query = sa.select(record_errors.c.identifier).where(
            record_errors.c.harvester_id == harvester_id,
            record_errors.c.identifier.in_(identifiers),
        )
        if stage is not None:
            query = query.where(record_errors.c.stage == stage)
        return set(conn.execute(query.distinct()).scalars())

    def failed_identifiers(self, harvester_id: str) -> list[str]:
        """The harvester's records whose last harvest failed at any stage, in order."""
        query = (
            sa.select(record_errors.c.identifier)
            .where(record_errors.c.harvester_id == harvester_id)
            .distinct()
            .order_by(record_errors.c.identifier)
        )
        with self._read() as conn:
            return list(conn.execute(query).scalars())

    def refused_a_pid(self, harvester_id: str) -> list[str]:
        """The harvester's records live at the source whose last write was refused their pid
        (`duplicate_pid`), in order: a source that re-identified a record deletes the old
        identifier after, or in another window than, the new one was refused its DOI."""
        hr = harvest_records
        query = (
            sa.select(record_errors.c.identifier)
            .join(
                hr,
                (hr.c.harvester_id == record_errors.c.harvester_id)
                & (hr.c.identifier == record_errors.c.identifier),
            )
            .where(
                record_errors.c.harvester_id == harvester_id,
                record_errors.c.type == DUPLICATE,
                hr.c.deleted.is_(False),
            )
            .distinct()
            .order_by(record_errors.c.identifier)
        )
        with self._read() as conn:
            return list(conn.execute(query).scalars())

    def fail_unknown(
        self, run_id: int, harvester_id: str, errors: dict[str, RecordError]
    ) -> list[str]:
        """Record identifiers the source says it never had (GetRecord's idDoesNotExist) as
        failed records of the run, with no harvest record: a harvest record stands for a
        record the source has or had, and one kept for a typo counted as live. A harvest
        record the source never gave a datestamp (an earlier such answer, or an error) is
        dropped with its errors. Returns the identifiers new to the run (not staged before)."""
        now = utc_now()
        hr, rr = harvest_records, run_records
        with self._engine.begin() as conn:
            known: set[str] = set()
            for chunk in _chunks(list(errors)):
                known |= _staged_in_run(conn, run_id, chunk)
                never_listed = sa.select(hr.c.identifier).where(
                    hr.c.harvester_id == harvester_id,
                    hr.c.identifier.in_(chunk),
                    sa.or_(hr.c.datestamp.is_(None), hr.c.datestamp == ""),
                    # never one linked to a target record: that one would be nobody's
                    hr.c.local_id.is_(None),
                    ~sa.exists().where(
                        writer_memories.c.harvester_id == hr.c.harvester_id,
                        writer_memories.c.identifier == hr.c.identifier,
                        writer_memories.c.local_id.is_not(None),
                    ),
                )
                leftovers = list(conn.execute(never_listed).scalars())
                if leftovers:
                    dropped = (record_errors, harvest_record_xml, harvest_record_data, hr)
                    for table in (*dropped, writer_memories):
                        conn.execute(
                            table.delete().where(
                                table.c.harvester_id == harvester_id,
                                table.c.identifier.in_(leftovers),
                            )
                        )
            new = [identifier for identifier in errors if identifier not in known]
            if new:
                conn.execute(
                    rr.insert(),
                    [
                        {
                            "run_id": run_id,
                            "harvester_id": harvester_id,
                            "identifier": identifier,
                            "status": "failed",
                            "attempts": 1,
                            "error_type": errors[identifier].type,
                            "error_message": errors[identifier].message,
                            "error_location": errors[identifier].location,
                            "updated_at": now,
                        }
                        for identifier in new
                    ],
                )
        return new

    def upsert_harvested(self, harvester_id: str, records: list[HarvestedRecord]) -> None:
        """What the source said of each record: datestamp, deleted, setSpecs, XML, parse error."""
        with self._engine.begin() as conn:
            self._upsert_harvested(conn, harvester_id, records)

    def save_transformed(
        self,
        harvester_id: str,
        items: list[TransformItem],
        *,
        fingerprint: str | None = None,
        data_json: Mapping[str, str] | None = None,
    ) -> None:
        """The transformers' output (data, pid, communities) and their error, if any, per
        record; a clean output is remembered with its datestamp and the chain's fingerprint
        so that an unchanged record need not be transformed again (`stored_transforms`).

        `data_json`: the records' data as JSON text by identifier (what `TransformChain.run`
        returns), stored as it is instead of each item's `data`; a record without is one
        without data."""
        if not items:
            return
        now = utc_now()
        with self._engine.begin() as conn:
            # A copy a later harvest listed anew (a run re-executed after another one) is
            # out of date: its transform must not replace the newer copy's.
            listed = self._listed_copies(conn, harvester_id, [i.identifier for i in items])
            items = [
                item
                for item in items
                if item.identifier not in listed
                or not is_later_copy(
                    listed[item.identifier],
                    (item.datestamp, item.xml is None and listed[item.identifier][1]),
                )
            ]
            parse_errors = self._errors_of(conn, harvester_id, [i.identifier for i in items])
            rows: dict[str, dict[str, Any]] = {}
            data: dict[str, Any] = {}
            errors: dict[str, list[RecordError]] = {}
            for item in items:
                values: dict[str, Any] = {"last_transformed_at": now}
                harvest_error = [
                    (e["type"], e["message"])
                    for e in parse_errors.get(item.identifier, [])
                    if e["stage"] == "harvest"
                ]
                own = item.error is not None and (item.error.type, item.error.message) not in (
                    harvest_error
                )
                # A live record the chain was given: its data is what the chain made. One
                # whose harvest failed was given none; the data transformed before stays
                # beside the copy it was made from (see `_upsert_harvested`).
                harvest_failed = item.error is not None and not own
                if item.xml is not None and not harvest_failed:
                    made = item.data if data_json is None else _encoded(data_json, item)
                    clean = item.error is None and made is not None
                    data[item.identifier] = made
                    values.update(
                        pid=item.pid,
                        communities=item.communities,
                        transformed_datestamp=item.datestamp if clean else None,
                        transform_fingerprint=fingerprint if clean else None,
                    )
                rows[item.identifier] = values
                errors[item.identifier] = [item.error] if own and item.error else []
            self._upsert_records(conn, harvester_id, rows)
            self._replace_payloads(conn, harvest_record_data, harvester_id, data)
            self._replace_errors(conn, harvester_id, "transform", errors)

    def stored_transforms(
        self, harvester_id: str, datestamps: dict[str, str], fingerprint: str
    ) -> dict[str, StoredTransform]:
        """The remembered clean transform of each record whose datestamp is still the one
        it was made from, by a chain of the same fingerprint (the data as JSON text).

        Not for a record whose last harvest failed at any stage (e.g. its write, for a
        missing community): it is transformed again from what the source lists now, which
        may be fixed without a new datestamp (or, at a day's granularity, on the same day)."""
        found: dict[str, StoredTransform] = {}
        hr, stored_data = harvest_records, harvest_record_data
        with self._read() as conn:
            for chunk in _chunks(list(datestamps)):
                failed = self._with_errors(conn, harvester_id, None, chunk)
                rows = conn.execute(
                    sa.select(
                        hr.c.identifier,
                        hr.c.transformed_datestamp,
                        sa.cast(stored_data.c.data, sa.Text).label("data_json"),
                        hr.c.pid,
                        hr.c.communities,
                    )
                    .join(stored_data, _of_record(stored_data))
                    .where(
                        hr.c.harvester_id == harvester_id,
                        hr.c.identifier.in_(chunk),
                        hr.c.transform_fingerprint == fingerprint,
                    )
                )
                for row in rows:
                    if (
                        row.transformed_datestamp == datestamps[row.identifier]
                        and row.identifier not in failed
                    ):
                        found[row.identifier] = StoredTransform(
                            row.data_json, row.pid, list(row.communities or []), fingerprint
                        )
        return found

    def _errors_of(
        self, conn: Connection, harvester_id: str, identifiers: Sequence[str]
    ) -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {}
        for chunk in _chunks(list(identifiers)):
            rows = conn.execute(
                sa.select(record_errors)
                .where(
                    record_errors.c.harvester_id == harvester_id,
                    record_errors.c.identifier.in_(chunk),
                )
                .order_by(record_errors.c.id)
            )
            for row in rows:
                found.setdefault(row.identifier, []).append(_error_dict(row))
        return found

    def last_reported(self, harvester_id: str, identifiers: list[str]) -> dict[str, ReportedRecord]:
        """Each harvested record as the source last reported it (records never harvested are
        left out)."""
        found: dict[str, ReportedRecord] = {}
        hr, stored_data = harvest_records, harvest_record_data
        with self._read() as conn:
            for chunk in _chunks(list(dict.fromkeys(identifiers))):
                rows = conn.execute(
                    sa.select(
                        hr.c.identifier,
                        hr.c.datestamp,
                        hr.c.deleted,
                        sa.cast(stored_data.c.data, sa.Text).label("data_json"),
                        hr.c.pid,
                        hr.c.communities,
                        hr.c.transform_fingerprint,
                    )
                    .select_from(hr.outerjoin(stored_data, _of_record(stored_data)))
                    .where(hr.c.harvester_id == harvester_id, hr.c.identifier.in_(chunk))
                )
                for row in rows:
                    transform = None
                    if row.data_json is not None and row.data_json != "null":
                        transform = StoredTransform(
                            row.data_json,
                            row.pid,
                            list(row.communities or []),
                            row.transform_fingerprint,
                        )
                    found[row.identifier] = ReportedRecord(
                        row.datestamp, bool(row.deleted), transform
                    )
        return found

    def listed_copies(
        self, harvester_id: str, identifiers: list[str]
    ) -> dict[str, tuple[str, bool]]:
        """Each record's (datestamp, deleted) as the source listed it last, whichever run
        listed it (records never harvested are left out)."""
        with self._read() as conn:
            return self._listed_copies(conn, harvester_id, identifiers)

    @staticmethod
    def _listed_copies(
        conn: Connection, harvester_id: str, identifiers: list[str]
    ) -> dict[str, tuple[str, bool]]:
        found: dict[str, tuple[str, bool]] = {}
        hr = harvest_records
        for chunk in _chunks(list(dict.fromkeys(identifiers))):
            rows = conn.execute(
                sa.select(hr.c.identifier, hr.c.datestamp, hr.c.deleted).where(
                    hr.c.harvester_id == harvester_id, hr.c.identifier.in_(chunk)
                )
            )
            found.update((row.identifier, (row.datestamp, bool(row.deleted))) for row in rows)
        return found

    def get_memories(
        self, harvester_id: str, identifiers: list[str], writer: WriterKey | None = None
    ) -> dict[str, HarvestMemory]:
        """What the last write of each record left behind (only records written before):
        `writer`'s write (None: the one on the harvest record, any writer's)."""
        hr, wm = harvest_records, writer_memories
        others = writer is not None and not writer.alone
        memories: dict[str, HarvestMemory] = {}
        with self._read() as conn:
            for chunk in _chunks(list(dict.fromkeys(identifiers))):
                # An error of any stage: a record the writer never got (its harvest or
                # transform failed) keeps that error only, not a copy as a write error.
                failed = self._with_errors(conn, harvester_id, None, chunk)
                where = [hr.c.harvester_id == harvester_id, hr.c.identifier.in_(chunk)]
                if not others:  # only what is on the harvest record is read
                    where.append(hr.c.last_written_at.is_not(None))
                listed = {
                    row.identifier: row
                    for row in conn.execute(
                        sa.select(
                            hr.c.identifier,
                            hr.c.written_datestamp,
                            hr.c.local_id,
                            hr.c.written_revision,
                            hr.c.deleted,
                            hr.c.written_fingerprint,
                            hr.c.datestamp,
                            hr.c.last_written_at,
                            hr.c.written_by,
                        ).where(*where)
                    )
                }
                for row in listed.values():
                    if row.last_written_at is not None and (
                        writer is None or row.written_by == writer.name
                    ):
                        memories[row.identifier] = _memory(row, row, row.identifier in failed)
                if not others:
                    continue
                assert writer is not None
                # The first writer's is on the harvest record, unless another writer was
                # first when it was written (writers reordered): then, as the others', here.
                # (a part of this chunk: no chunks of its own)
                wanted = [i for i in listed if not (writer.first and i in memories)]
                for row in conn.execute(
                    sa.select(wm).where(
                        wm.c.harvester_id == harvester_id,
                        wm.c.writer == writer.name,
                        wm.c.identifier.in_(wanted),
                    )
                ):
                    known = memories.get(row.identifier)
                    if known is None or known.written_at < datetime.fromisoformat(
                        row.last_written_at
                    ):
                        memories[row.identifier] = _memory(
                            row, listed[row.identifier], row.identifier in failed
                        )
        return memories

    def save_write_outcomes(
        self,
        harvester_id: str,
        outcomes: list[WriteOutcome],
        datestamps: dict[str, str],
        fingerprint: WrittenFingerprint = None,
        *,
        undone: tuple[int, Mapping[str, int]] | None = None,
        reidentified: tuple[TakeOverRun, Mapping[str, int]] | None = None,
        writer: WriterKey | None = None,
    ) -> None:
        """The last write of each record: local id, revision, datestamp written, errors, and
        the `fingerprint` of what was written (`written_fingerprint`; per record, a
        mapping); `writer`: whose
        write (None: on the harvest record, of no writer named). `undone`: (run id,
        actions) of a batch of the run's undo of local changes, added to the run's in the
        same transaction (see `run_local_changes_undone`); `reidentified`: (run, actions) of
        a batch of take-overs of freed pids, likewise (see `run_reidentified`)."""
        if not outcomes and not (undone and undone[1]):
            return
        with self._engine.begin() as conn:
            if outcomes:
                self._save_write_outcomes(
                    conn, harvester_id, {writer: outcomes}, datestamps, {writer: fingerprint}
                )
            if reidentified and reidentified[1]:
                run, actions = reidentified
                _add_actions(conn, run.table.c.reidentified, run.run_id, actions)
            if undone and undone[1]:
                run_id, actions = undone
                _add_actions(conn, harvest_runs.c.local_changes_undone, run_id, actions)

    def run_reidentified(self, run: TakeOverRun) -> Counter[str]:
        """What the run's take-overs of freed pids did, by action, over all its attempts."""
        return self._run_actions(run.table.c.reidentified, run.run_id)

    def run_local_changes_undone(self, run_id: int) -> Counter[str]:
        """What the run's undo of local changes did, by action, over all its attempts."""
        return self._run_actions(harvest_runs.c.local_changes_undone, run_id)

    def _run_actions(self, column: sa.Column, run_id: int) -> Counter[str]:
        with self._engine.connect() as conn:
            stored = conn.execute(sa.select(column).where(column.table.c.id == run_id)).scalar()
        return Counter(stored or {})

    def save_written(
        self,
        run_id: int,
        harvester_id: str,
        outcomes: Mapping[WriterKey | None, list[WriteOutcome]],
        datestamps: dict[str, str],
        fingerprints: Mapping[WriterKey | None, str],
        statuses: dict[str, str],
        errors: dict[str, RecordError] | None = None,
        actions: dict[str, str] | None = None,
        *,
        known: set[str] | frozenset[str] = frozenset(),
    ) -> None:
        """`save_write_outcomes` (each writer's `outcomes` and written `fingerprints`, the
        errors of all) and
        `set_record_status` of a written group in one transaction. Apart, a crash between
        the two left records remembered as written but `running` in the run: the resumed run
        planned them as unchanged and reported them so (`imported`, `updated` and `gone`
        went missing from the run's counts). `actions`:
        what the write did to each record, kept with its status (see `earlier_actions`).
        `known`: records whose harvest record the caller has just read (not looked for again)."""
        self._check_statuses(statuses)
        with self._engine.begin() as conn:
            if any(outcomes.values()):
                self._save_write_outcomes(
                    conn, harvester_id, outcomes, datestamps, fingerprints, known
                )
            self._set_record_status(conn, run_id, statuses, errors or {}, actions or {})

    def _save_write_outcomes(
        self,
        conn: Connection,
        harvester_id: str,
        outcomes: Mapping[WriterKey | None, list[WriteOutcome]],
        datestamps: dict[str, str],
        fingerprints: Mapping[WriterKey | None, WrittenFingerprint],
        known: set[str] | frozenset[str] = frozenset(),
    ) -> None:
        """Each writer's memory of its outcomes, with the fingerprint of what it wrote
        (`fingerprints`: none given, the one written before stays); the errors of every
        writer, on the record. `known`: records with a harvest record (see `_upsert_records`)."""
        now = utc_now()
        errors: dict[str, list[RecordError]] = {}
        for writer, written in outcomes.items():
            given = fingerprints.get(writer)
            rows: dict[str, dict[str, Any]] = {}
            for outcome in written:
                fingerprint = given.get(outcome.identifier) if isinstance(given, Mapping) else given
                values: dict[str, Any] = {"last_written_at": now}
                if outcome.action is not Action.ERROR:
                    # A failed write wrote nothing of this datestamp: the skip rule must not
                    # take the target for what it would have left (the source may fix the
                    # record without a new datestamp, and the error is cleared on the
                    # retry's transform, before its plan reads this memory).
                    values["written_datestamp"] = datestamps.get(outcome.identifier)
                if fingerprint is not None:  # None: the one written before stays
                    values["written_fingerprint"] = fingerprint
                # A deleted draft leaves no local record behind: forget its id.
                if outcome.local_id is not None or outcome.action is Action.DELETE_DRAFT:
                    values["local_id"] = outcome.local_id
                if outcome.revision is not None:
                    values["written_revision"] = outcome.revision
                rows.setdefault(outcome.identifier, {}).update(values)
                errors.setdefault(outcome.identifier, [])
                if outcome.error:
                    errors[outcome.identifier].append(outcome.error)
            if writer is None or writer.first:
                if writer is not None:
                    for values in rows.values():
                        values["written_by"] = writer.name
                self._upsert_records(conn, harvester_id, rows, known)
            else:
                self._upsert_records(
                    conn, harvester_id, rows, table=writer_memories, writer=writer.name
                )
        self._replace_errors(conn, harvester_id, "write", errors)

    def mark_gone(
        self,
        harvester_id: str,
        identifiers: set[str],
        reconcile_run: ReconcileDeletions | None = None,
    ) -> None:
        """Reconcile: records that vanished from a source keeping no deletions are deleted.

        What their last harvest, transform or write failed with no longer applies (a deleted
        header clears it the same way): left, the record would count as failed for good.
        `reconcile_run`: what the reconcile did, saved on its run in the same transaction
        (marked gone, the records are no longer found vanished: the run alone remembers)."""
        now = utc_now()
        with self._engine.begin() as conn:
            if reconcile_run is not None:
                conn.execute(
                    reconcile_runs.update()
                    .where(reconcile_runs.c.id == reconcile_run.run_id)
                    .values(
                        vanished=sorted(reconcile_run.vanished),
                        actions=dict(reconcile_run.actions),
                        errors=reconcile_run.errors,
                        returned=list(reconcile_run.returned),
                    )
                )
            for stage in ("harvest", "transform", "write"):
                self._replace_errors(conn, harvester_id, stage, dict.fromkeys(identifiers, []))
            for chunk in _chunks(sorted(identifiers)):
                conn.execute(
                    harvest_records.update()
                    .where(
                        harvest_records.c.harvester_id == harvester_id,
                        harvest_records.c.identifier.in_(chunk),
                    )
                    .values(deleted=True, gone_at=now)
                )

    def live_identifiers(self, harvester_id: str) -> set[str]:
        with self._read() as conn:
            return set(
                conn.execute(
                    sa.select(harvest_records.c.identifier).where(
                        harvest_records.c.harvester_id == harvester_id,
                        harvest_records.c.deleted.is_(False),
                    )
                ).scalars()
            )

    def live_identifier_chunks(self, harvester_id: str, size: int = 5_000) -> Iterator[list[str]]:
        """The harvester's live identifiers in order, `size` at a time: a reconcile of a source
        of millions reads them without holding them all (see live_identifiers)."""
        live = harvest_records.c.deleted.is_(False)
        return self._identifier_chunks(harvester_id, live, size)

    def gone_identifier_chunks(self, harvester_id: str, size: int = 5_000) -> Iterator[list[str]]:
        """The identifiers a reconcile marked gone (vanished from the list, no deleted header)
        and no harvest listed since, in order, `size` at a time."""
        gone = harvest_records.c.deleted.is_(True) & harvest_records.c.gone_at.is_not(None)
        return self._identifier_chunks(harvester_id, gone, size)

    def _identifier_chunks(
        self, harvester_id: str, condition: sa.ColumnElement[bool], size: int
    ) -> Iterator[list[str]]:
        after: str | None = None
        while True:
            query = sa.select(harvest_records.c.identifier).where(
                harvest_records.c.harvester_id == harvester_id, condition
            )
            if after is not None:
                query = query.where(harvest_records.c.identifier > after)
            with self._read() as conn:
                chunk = list(
                    conn.execute(query.order_by(harvest_records.c.identifier).limit(size)).scalars()
                )
            if not chunk:
                return
            yield chunk
            after = chunk[-1]

    # -- a source's new identifier namespace (`harvesters rekey`) --------------------------

    def unfinished_runs(self, harvester_id: str) -> list[dict[str, Any]]:
        """The harvester's harvest runs that did not succeed and were not superseded: a later
        harvest may resume them (or they run still)."""
        query = (
            sa.select(harvest_runs)
            .where(
                harvest_runs.c.harvester_id == harvester_id,
                harvest_runs.c.status != "succeeded",
                sa.or_(
                    harvest_runs.c.error.is_(None),
                    ~harvest_runs.c.error.startswith(SUPERSEDED, autoescape=True),
                ),
            )
            .order_by(harvest_runs.c.id)
        )
        with self._read() as conn:
            return [self._run_dict(row) for row in conn.execute(query)]

    def rekey_plan(self, harvester_id: str, old: str, new: str) -> RekeyPlan:
        """What `rekey` would rewrite (read only)."""
        with self._read() as conn:
            return self._rekey_plan(conn, harvester_id, old, new)

    @staticmethod
    def _rekey_plan(conn: Connection, harvester_id: str, old: str, new: str) -> RekeyPlan:
        hr = harvest_records
        return plan_rekey(conn, "state", hr.c.harvester_id, hr.c.identifier, harvester_id, old, new)

    def begin_rekey(self, harvester_id: str, old: str, new: str) -> None:
        """Save the harvester's rekey from `old` to `new` as pending, before it rewrites the
        targets (replacing a pending one it finishes or undoes): `rekey` ends it."""
        with self._engine.begin() as conn:
            self._end_pending_rekey(conn, harvester_id)
            conn.execute(
                pending_rekeys.insert().values(
                    harvester_id=harvester_id,
                    old_prefix=old,
                    new_prefix=new,
                    started_at=utc_now(),
                )
            )

    @staticmethod
    def _end_pending_rekey(conn: Connection, harvester_id: str) -> None:
        conn.execute(pending_rekeys.delete().where(pending_rekeys.c.harvester_id == harvester_id))

    def pending_rekey(self, harvester_id: str) -> PendingRekey | None:
        """The harvester's rekey that began and whose state store's rewrite did not commit."""
        return self.pending_rekeys(harvester_id).get(harvester_id)

    def pending_rekeys(self, harvester_id: str | None = None) -> dict[str, PendingRekey]:
        """Each harvester's pending rekey (`pending_rekey`), or only the one's, in one query:
        `status --each-harvester` shows those of a registry of hundreds."""
        p = pending_rekeys
        query = sa.select(p.c.harvester_id, p.c.old_prefix, p.c.new_prefix, p.c.started_at)
        if harvester_id is not None:
            query = query.where(p.c.harvester_id == harvester_id)
        with self._read() as conn:
            return {row.harvester_id: PendingRekey(*row) for row in conn.execute(query)}

    def refuse_while_rekey_pending(self, harvester_id: str, what: str) -> None:
        """RekeyPending, naming `what` (a harvest, a reconcile), if the harvester's rekey is
        pending: its target and state store may disagree on its identifiers, and `what`
        would find records of one missing from the other (duplicates, tombstones)."""
        pending = self.pending_rekey(harvester_id)
        if pending is not None:
            raise pending.refusal(what)

    def rekey(self, harvester_id: str, old: str, new: str) -> int:
        """Rewrite the harvester's identifiers that begin with `old` to begin with `new`, in
        every table that names a record by (harvester, identifier), in one transaction: its
        harvest records with their XML, data and errors, its runs' per-record rows and its
        reconcile runs' lists; the harvester's pending rekey (`begin_rekey`) ends with it.
        Returns how many harvest records; RekeyRefused (nothing changed) if one's new
        identifier is taken. Run again, it finds nothing to rewrite."""
        with self._engine.begin() as conn:
            plan = self._rekey_plan(conn, harvester_id, old, new)
            if plan.taken:
                raise RekeyRefused(taken_message(plan, harvester_id, old, new))
            for table in (
                record_errors,
                harvest_record_xml,
                harvest_record_data,
                run_records,
                harvest_records,
                writer_memories,
            ):
                conn.execute(
                    table.update()
                    .where(
                        table.c.harvester_id == harvester_id,
                        starts_with(table.c.identifier, old),
                    )
                    .values(identifier=replaced(table.c.identifier, old, new))
                )
            self._rekey_reconcile_runs(conn, harvester_id, old, new)
            self._end_pending_rekey(conn, harvester_id)
            if plan.count:  # a rerun that found nothing left to rewrite saved its rekey before
                last_run_id = conn.execute(sa.select(sa.func.max(harvest_runs.c.id))).scalar()
                conn.execute(
                    identifier_rekeys.insert().values(
                        harvester_id=harvester_id,
                        old_prefix=old,
                        new_prefix=new,
                        last_run_id=last_run_id,
                        rekeyed_at=utc_now(),
                    )
                )
        return plan.count

    def rekeys_after_run(self, harvester_id: str, run_id: int) -> list[Rekey]:
        """The harvester's rekeys done after harvest run `run_id` was created, oldest first:
        the Parquet partitions that run made may hold identifiers they rewrote."""
        r = identifier_rekeys
        with self._read() as conn:
            rows = conn.execute(
                sa.select(r.c.old_prefix, r.c.new_prefix, r.c.rekeyed_at)
                .where(r.c.harvester_id == harvester_id, r.c.last_run_id >= run_id)
                .order_by(r.c.id)
            ).all()
        return [Rekey(*row) for row in rows]

    @staticmethod
    def _rekey_reconcile_runs(conn: Connection, harvester_id: str, old: str, new: str) -> None:
        """The identifiers a reconcile run saved (found vanished, listed again, kept): a killed
        reconcile's rerun reports them, and harvests again those listed again; the next
        check asks for the kept ones last."""

        def rewritten(identifiers: list[str] | None) -> list[str] | None:
            if identifiers is None:
                return None
            return [new + i[len(old) :] if i.startswith(old) else i for i in identifiers]

        rows = conn.execute(
            sa.select(
                reconcile_runs.c.id,
                reconcile_runs.c.vanished,
                reconcile_runs.c.returned,
                reconcile_runs.c.kept,
            ).where(reconcile_runs.c.harvester_id == harvester_id)
        ).all()
        for row in rows:
            saved = (row.vanished, row.returned, row.kept)
            vanished, returned, kept = (rewritten(identifiers) for identifiers in saved)
            if (vanished, returned, kept) != saved:
                conn.execute(
                    reconcile_runs.update()
                    .where(reconcile_runs.c.id == row.id)
                    .values(vanished=vanished, returned=returned, kept=kept)
                )

    def list_records(
        self,
        *,
        harvester_id: str | None = None,
        deleted: bool | None = None,
        error_type: str | None = None,
        message: str | None = None,
        location: str | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        """Harvest records, filtered; an error filter matches any stage's error (message and
        location as case-insensitive substrings, all given filters on the same error)."""
        r = harvest_records
        query = sa.select(*(r.c[name] for name in LISTED_RECORD_FIELDS))
        if harvester_id is not None:
            query = query.where(r.c.harvester_id == harvester_id)
        if deleted is not None:
            query = query.where(r.c.deleted.is_(deleted))
        if error_type is not None or message is not None or location is not None:
            # The records are those of the matching errors, read once: a correlated EXISTS
            # made SQLite look each record's errors up by type (the type index), reading all
            # errors of that type per record (a million records: 24 s for a rare type).
            e = record_errors
            conditions = []
            if harvester_id is not None:
                conditions.append(e.c.harvester_id == harvester_id)
            if error_type is not None:
                conditions.append(e.c.type == error_type)
            if message is not None:
                conditions.append(e.c.message.ilike(f"%{_escape_like(message)}%", escape="\\"))
            if location is not None:
                conditions.append(e.c.location.ilike(f"%{_escape_like(location)}%", escape="\\"))
            matching = sa.select(e.c.harvester_id, e.c.identifier).where(*conditions)
            query = query.where(sa.tuple_(r.c.harvester_id, r.c.identifier).in_(matching))
        query = query.order_by(r.c.harvester_id, r.c.identifier).limit(max(0, limit))
        with self._read() as conn:
            records = [dict(row._mapping) for row in conn.execute(query)]
            by_harvester: dict[str, list[str]] = {}
            for record in records:
                by_harvester.setdefault(record["harvester_id"], []).append(record["identifier"])
            errors = {
                (h, identifier): found
                for h, identifiers in by_harvester.items()
                for identifier, found in self._errors_of(conn, h, identifiers).items()
            }
        for record in records:
            record["errors"] = errors.get((record["harvester_id"], record["identifier"]), [])
        return records

    def get_record(
        self, oai_identifier: str, harvester_id: str | None = None
    ) -> dict[str, Any] | None:
        """One harvest record with its XML and data; ambiguous without a harvester -> error."""
        hr, stored_xml, stored_data = harvest_records, harvest_record_xml, harvest_record_data
        query = (
            sa.select(hr, stored_xml.c.xml, stored_data.c.data)
            .select_from(
                hr.outerjoin(
                    stored_xml,
                    _of_record(stored_xml),
                ).outerjoin(
                    stored_data,
                    _of_record(stored_data),
                )
            )
            .where(hr.c.identifier == oai_identifier)
        )
        if harvester_id is not None:
            query = query.where(hr.c.harvester_id == harvester_id)
        with self._read() as conn:
            rows = conn.execute(query.order_by(harvest_records.c.harvester_id)).all()
            if not rows:
                return None
            if len(rows) > 1:
                holders = ", ".join(row.harvester_id for row in rows)
                raise PipelineError(
                    f"{oai_identifier!r} was harvested by several harvesters ({holders}); "
                    "name one with --harvester"
                )
            record = dict(rows[0]._mapping)
            record["errors"] = self._errors_of(conn, record["harvester_id"], [oai_identifier]).get(
                oai_identifier, []
            )
        xml = record.pop("xml")
        record["xml"] = None if xml is None else bytes(xml).decode("utf-8", errors="replace")
        return record

    def record_totals(self, harvester_id: str) -> dict[str, int]:
        """How many harvest records a harvester has: all, deleted, with errors."""
        r = harvest_records
        with self._read() as conn:
            total, deleted = conn.execute(
                sa.select(
                    sa.func.count(),
                    sa.func.coalesce(sa.func.sum(sa.case((r.c.deleted, 1), else_=0)), 0),
                ).where(r.c.harvester_id == harvester_id)
            ).one()
            with_errors = conn.execute(
                sa.select(sa.func.count(sa.distinct(record_errors.c.identifier))).where(
                    record_errors.c.harvester_id == harvester_id
                )
            ).scalar()
        return {
            "total": int(total),
            "live": int(total) - int(deleted),
            "deleted": int(deleted),
            "with_errors": int(with_errors or 0),
        }

    # -- harvest runs --------------------------------------------------------------------

    def create_run(
        self,
        harvester_id: str,
        *,
        window_from: str | None,
        window_until: str | None,
        scale: str | None,
        max_records: int,
        options: dict[str, Any],
        dagster_run_id: str | None = None,
        worker: str | None = None,
    ) -> int:
        """A new run, `running`; `worker` is the harvester lease's owner of the process."""
        if scale is not None and scale not in SCALES:
            raise PipelineError(f"unknown scale {scale!r} (known: {', '.join(SCALES)})")
        if max_records < 0:
            raise PipelineError("max_records must be 0 (uncapped) or more")
        now = utc_now()
        with self._engine.begin() as conn:
            result = conn.execute(
                harvest_runs.insert().values(
                    harvester_id=harvester_id,
                    dagster_run_id=dagster_run_id,
                    worker=worker,
                    window_from=window_from,
                    window_until=window_until,
                    scale=scale,
                    max_records=max_records,
                    options=options,
                    status="running",
                    pages_read=0,
                    discovered=0,
                    staged=0,
                    duplicates_skipped=0,
                    existing_skipped=0,
                    cap_reached=False,
                    created_at=now,
                    updated_at=now,
                )
            )
            run_id = int(result.inserted_primary_key[0])
            self._link_dagster_run(conn, run_id, dagster_run_id)
            return run_id

    @staticmethod
    def _link_dagster_run(conn: Connection, run_id: int, dagster_run_id: str | None) -> None:
        """Remember that the Dagster run works on the run (see `dagster_runs_of`)."""
        if dagster_run_id is None:
            return
        links = harvest_run_dagster_runs
        known = conn.execute(
            sa.select(links.c.run_id).where(
                links.c.run_id == run_id, links.c.dagster_run_id == dagster_run_id
            )
        ).first()
        if known is None:
            conn.execute(links.insert().values(run_id=run_id, dagster_run_id=dagster_run_id))

    @staticmethod
    def _run_dict(row: Any) -> dict[str, Any]:
        run = dict(row._mapping)
        run["cap_reached"] = bool(run["cap_reached"])
        run["checkpoint"] = _checkpoint_from_json(run["checkpoint"])
        run["notices"] = list(run.get("notices") or [])
        return run

    def get_run(self, run_id: int) -> dict[str, Any] | None:
        """The run as a dict; `checkpoint` is a SweepCheckpoint (None before the first page)."""
        with self._read() as conn:
            row = conn.execute(sa.select(harvest_runs).where(harvest_runs.c.id == run_id)).first()
        return None if row is None else self._run_dict(row)

    def _require_run(self, run_id: int) -> dict[str, Any]:
        run = self.get_run(run_id)
        if run is None:
            raise NotFound(f"no harvest run {run_id}")
        return run

    def knows_harvester(self, harvester_id: str) -> bool:
        """Whether the id names a harvester: a registered one, or a deleted one whose harvest
        runs or records were kept. A listing filtered by an id that is neither (a typo) says
        so instead of answering "nothing found"."""
        with self._read() as conn:
            return any(
                conn.execute(
                    sa.select(table.c[column]).where(table.c[column] == harvester_id).limit(1)
                ).first()
                is not None
                for table, column in (
                    (harvesters, "id"),
                    (harvest_runs, "harvester_id"),
                    (harvest_records, "harvester_id"),
                )
            )

    def harvesters_with_runs(self) -> list[str]:
        """Every harvester id some harvest run names: the registered ones harvested, and the
        deleted ones whose harvest records were kept (`delete_harvester`)."""
        query = sa.select(harvest_runs.c.harvester_id).distinct()
        with self._read() as conn:
            return sorted(conn.execute(query).scalars())

    def list_runs(
        self, *, harvester_id: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        query = sa.select(harvest_runs).order_by(harvest_runs.c.id.desc()).limit(max(0, limit))
        if harvester_id is not None:
            query = query.where(harvest_runs.c.harvester_id == harvester_id)
        with self._read() as conn:
            return [self._run_dict(row) for row in conn.execute(query)]

    def latest_runs(self) -> dict[str, dict[str, Any]]:
        """Each harvester's latest harvest run, in one query: the overview of a registry of
        hundreds, where `list_runs` shows the few harvesters of the last hour's runs."""
        latest = (
            sa.select(sa.func.max(harvest_runs.c.id))
            .group_by(harvest_runs.c.harvester_id)
            .scalar_subquery()
        )
        query = sa.select(harvest_runs).where(harvest_runs.c.id.in_(latest))
        with self._read() as conn:
            return {row.harvester_id: self._run_dict(row) for row in conn.execute(query)}

    # What `sweep_histories` reads of a run: enough to tell whether it was a complete sweep.
    _SWEEP_COLUMNS = (
        "id",
        "harvester_id",
        "status",
        "cap_reached",
        "options",
        "window_from",
        "window_until",
        "response_date",
    )

    def sweep_histories(
        self, harvester_ids: Sequence[str], *, limit: int
    ) -> dict[str, list[dict[str, Any]]]:
        """Each harvester's latest `limit` runs, newest first, with only the columns that say
        whether a run was a complete sweep (`_SWEEP_COLUMNS`): in one query for all of them.
        The hourly schedule read `list_runs` per harvester, whole rows with their JSON
        counters: 300 harvesters with a month of hourly runs took ~12 s a tick."""
        histories: dict[str, list[dict[str, Any]]] = {h: [] for h in harvester_ids}
        columns = [harvest_runs.c[name] for name in self._SWEEP_COLUMNS]
        with self._read() as conn:
            rank = (
                sa.func.row_number()
                .over(partition_by=harvest_runs.c.harvester_id, order_by=harvest_runs.c.id.desc())
                .label("rank")
            )
            for chunk in _chunks(list(histories)):
                ranked = (
                    sa.select(*columns, rank)
                    .where(harvest_runs.c.harvester_id.in_(chunk))
                    .subquery()
                )
                query = (
                    sa.select(*(ranked.c[name] for name in self._SWEEP_COLUMNS))
                    .where(ranked.c.rank <= limit)
                    .order_by(ranked.c.harvester_id, ranked.c.id.desc())
                )
                for row in conn.execute(query):
                    run = dict(zip(self._SWEEP_COLUMNS, row, strict=True))  # not row._mapping's
                    run["cap_reached"] = bool(run["cap_reached"])
                    histories[run["harvester_id"]].append(run)
        return histories

    def resume_run(
        self, run_id: int, dagster_run_id: str | None = None, worker: str | None = None
    ) -> None:
        """Another attempt works on the run: a failed or stopped one is running again, and
        the Dagster run (if any) is the one whose failure the failure sensor records on it;
        `worker` (if given) the process that works on it now (see `create_run`). A worker
        without a Dagster run (the CLI resuming a run a Dagster run began) leaves no Dagster
        run on it: whether the run is alive is then the worker's to tell."""
        values: dict[str, Any] = {"updated_at": utc_now()}
        if dagster_run_id is not None or worker is not None:
            values["dagster_run_id"] = dagster_run_id
        if worker is not None:
            values["worker"] = worker
        with self._engine.begin() as conn:
            found = conn.execute(
                sa.select(harvest_runs.c.status, harvest_runs.c.error).where(
                    harvest_runs.c.id == run_id
                )
            ).first()
            why = None if found is None else superseded_because(found._mapping)
            if why is not None:
                raise RunSuperseded(f"harvest run {run_id} was {why}: no attempt takes it up again")
            conn.execute(harvest_runs.update().where(harvest_runs.c.id == run_id).values(values))
            self._link_dagster_run(conn, run_id, dagster_run_id)
            conn.execute(
                harvest_runs.update()
                .where(
                    harvest_runs.c.id == run_id, harvest_runs.c.status.in_(("failed", "stopped"))
                )
                .values(status="running", error=None, finished_at=None)
            )

    def settle_interrupted_runs(
        self, harvester_id: str | None, lease_of: Callable[[str, str], str]
    ) -> list[dict[str, Any]]:
        """Runs started outside Dagster (the CLI) still `running` although their process no
        longer works on them (`lease_of(harvester_id, worker)`, HarvesterLock.lease_of, is
        not `held`) are failed, as what they are: interrupted, resumable, by a process that
        was killed (`lost` its lease) or that ended without recording the run's end
        (`released` it: its writes refused, say by a store a newer version migrated). Returns
        them, failed.

        A Dagster run's harvest runs are not judged here: its steps run in processes of
        their own, one after the other, and the dead-run sensor tells when it died."""
        query = sa.select(harvest_runs).where(
            harvest_runs.c.status == "running",
            harvest_runs.c.dagster_run_id.is_(None),
            harvest_runs.c.worker.is_not(None),
        )
        if harvester_id is not None:
            query = query.where(harvest_runs.c.harvester_id == harvester_id)
        with self._read() as conn:
            running = [self._run_dict(row) for row in conn.execute(query)]
        settled = []
        for run in running:
            lease = lease_of(run["harvester_id"], run["worker"])
            if lease == "held":
                continue
            process = run["worker"].rsplit(":", 1)[0]
            ended = (
                "ended without recording the run's end (it released its lease: it was not "
                "killed; its error said why)"
                if lease == "released"
                else "is gone (killed?)"
            )
            error = (
                f"interrupted: its process ({process}) {ended}; harvesting the "
                f"same window again, or `oai-pipeline harvest {run['harvester_id']} "
                f"--resume {run['id']}`, resumes it"
            )
            now = utc_now()
            with self._engine.begin() as conn:
                # Only if still so: the process may have finished it meanwhile, or another
                # attempt resumed it.
                failed = conn.execute(
                    harvest_runs.update()
                    .where(
                        harvest_runs.c.id == run["id"],
                        harvest_runs.c.status == "running",
                        harvest_runs.c.worker == run["worker"],
                        harvest_runs.c.dagster_run_id.is_(None),
                    )
                    .values(status="failed", error=error, finished_at=now, updated_at=now)
                ).rowcount
            if failed:
                settled.append(run | {"status": "failed", "error": error, "finished_at": now})
        return settled

    def runs_of_dagster_run(self, dagster_run_id: str) -> list[dict[str, Any]]:
        """The harvest runs a Dagster run worked on (a range run may work on several), also
        those a later Dagster run worked on since, each with its `dagster_run_ids`."""
        links = harvest_run_dagster_runs
        return self._runs_with_dagster_runs(
            harvest_runs.c.id.in_(
                sa.select(links.c.run_id).where(links.c.dagster_run_id == dagster_run_id)
            )
        )

    def running_dagster_runs(self, run_ids: Sequence[int]) -> list[dict[str, Any]]:
        """Those of the runs still `running` that Dagster runs worked on, each with its
        `dagster_run_ids`."""
        return self._runs_with_dagster_runs(
            harvest_runs.c.id.in_(run_ids),
            harvest_runs.c.status == "running",
            harvest_runs.c.dagster_run_id.is_not(None),
        )

    def _runs_with_dagster_runs(self, *where: sa.ColumnElement[bool]) -> list[dict[str, Any]]:
        links = harvest_run_dagster_runs
        with self._read() as conn:
            runs = [
                self._run_dict(row)
                for row in conn.execute(
                    sa.select(harvest_runs).where(*where).order_by(harvest_runs.c.id)
                )
            ]
            worked_on: dict[int, list[str]] = {}
            for chunk in _chunks([run["id"] for run in runs]):
                for run_id, dagster_run_id in conn.execute(
                    sa.select(links.c.run_id, links.c.dagster_run_id).where(
                        links.c.run_id.in_(chunk)
                    )
                ):
                    worked_on.setdefault(run_id, []).append(dagster_run_id)
        return [run | {"dagster_run_ids": sorted(worked_on.get(run["id"], []))} for run in runs]

    def latest_run(self, harvester_id: str, *, status: str | None = None) -> dict[str, Any] | None:
        query = (
            sa.select(harvest_runs)
            .where(harvest_runs.c.harvester_id == harvester_id)
            .order_by(harvest_runs.c.id.desc())
            .limit(1)
        )
        if status is not None:
            query = query.where(harvest_runs.c.status == status)
        with self._read() as conn:
            row = conn.execute(query).first()
        return None if row is None else self._run_dict(row)

    def start_reconcile_run(self, harvester_id: str) -> tuple[int, ReconcileDeletions | None]:
        """The harvester's reconcile run that did not finish (killed, failed), resumed, or a
        new one; with what that run deleted before, if it saved it (`mark_gone`)."""
        with self._engine.begin() as conn:
            row = conn.execute(
                sa.select(reconcile_runs)
                .where(
                    reconcile_runs.c.harvester_id == harvester_id,
                    reconcile_runs.c.status == "running",
                )
                .order_by(reconcile_runs.c.id.desc())
                .limit(1)
            ).first()
            if row is None:
                run_id = conn.execute(
                    reconcile_runs.insert().values(
                        harvester_id=harvester_id, status="running", created_at=utc_now(), errors=0
                    )
                ).inserted_primary_key[0]
                return int(run_id), None
        if row.vanished is None:
            return int(row.id), None
        return int(row.id), ReconcileDeletions(
            int(row.id),
            list(row.vanished),
            Counter(row.actions or {}),
            int(row.errors or 0),
            list(row.returned or []),
        )

    def save_reconcile_deleting(self, run_id: int, identifiers: Iterable[str]) -> None:
        """Before a reconcile writes its deletions: the records it deletes, added to those an
        earlier attempt of the run was deleting (see `reconcile_deleting`)."""
        with self._engine.begin() as conn:
            saved = conn.execute(
                sa.select(reconcile_runs.c.deleting).where(reconcile_runs.c.id == run_id)
            ).scalar_one_or_none()
            merged = sorted({*(saved or []), *identifiers})
            conn.execute(
                reconcile_runs.update().where(reconcile_runs.c.id == run_id).values(deleting=merged)
            )

    def reconcile_deleting(self, run_id: int) -> set[str]:
        """The records the run's attempts were about to delete (a killed attempt's target may
        hold their tombstones, though it saved no deletion on the run nor on the records)."""
        with self._read() as conn:
            saved = conn.execute(
                sa.select(reconcile_runs.c.deleting).where(reconcile_runs.c.id == run_id)
            ).scalar_one_or_none()
        return set(saved or [])

    def save_reconcile_kept(self, run_id: int, identifiers: list[str]) -> None:
        """The vanished records the run's GetRecord check kept, the least recently asked for
        first (see `reconcile_kept`)."""
        with self._engine.begin() as conn:
            conn.execute(
                reconcile_runs.update()
                .where(reconcile_runs.c.id == run_id)
                .values(kept=list(identifiers))
            )

    def reconcile_kept(self, harvester_id: str) -> list[str]:
        """The vanished records the harvester's latest reconcile that checked any kept (served
        by GetRecord, or not told of), in its order: the next check asks for them last, so
        that each reconcile asks for records not asked for yet."""
        with self._read() as conn:
            saved = conn.execute(
                sa.select(reconcile_runs.c.kept)
                .where(
                    reconcile_runs.c.harvester_id == harvester_id,
                    reconcile_runs.c.kept.is_not(None),
                )
                .order_by(reconcile_runs.c.id.desc())
                .limit(1)
            ).scalar_one_or_none()
        return list(saved or [])

    def finish_reconcile_run(self, run_id: int) -> None:
        with self._engine.begin() as conn:
            conn.execute(
                reconcile_runs.update()
                .where(reconcile_runs.c.id == run_id)
                .values(status="succeeded", finished_at=utc_now())
            )

    def latest_reconcile_run(self, harvester_id: str) -> dict[str, Any] | None:
        """The latest run a reconcile started to harvest again the records the source listed
        again (`RunOptions.reconcile`), or None."""
        query = (
            sa.select(harvest_runs)
            .where(harvest_runs.c.harvester_id == harvester_id)
            .order_by(harvest_runs.c.id.desc())
        )
        with self._read() as conn:
            for row in conn.execute(query):
                run = self._run_dict(row)
                if (run.get("options") or {}).get("reconcile"):
                    return run
        return None

    def find_resumable_run(
        self, harvester_id: str, window_from: str | None, window_until: str | None
    ) -> dict[str, Any] | None:
        """The latest run of exactly this window, if it did not succeed (crashed, failed,
        stopped) and no later harvest or rekey superseded it: a new attempt resumes it
        instead of starting over."""
        query = (
            sa.select(harvest_runs)
            .where(
                harvest_runs.c.harvester_id == harvester_id,
                _equal_or_null(harvest_runs.c.window_from, window_from),
                _equal_or_null(harvest_runs.c.window_until, window_until),
            )
            .order_by(harvest_runs.c.id.desc())
            .limit(1)
        )
        with self._read() as conn:
            row = conn.execute(query).first()
        if row is None or row.status == "succeeded":
            return None
        if superseded_because(row._mapping) is not None:
            return None
        return self._run_dict(row)

    def save_checkpoint(self, run_id: int, checkpoint: SweepCheckpoint) -> None:
        """Durable discovery state, saved before the page it names is fetched."""
        values: dict[str, Any] = {
            "checkpoint": dataclasses.asdict(checkpoint),
            "updated_at": utc_now(),
        }
        with self._engine.begin() as conn:
            conn.execute(harvest_runs.update().where(harvest_runs.c.id == run_id).values(values))

    def add_run_notices(self, run_id: int, notices: Iterable[str]) -> list[str]:
        """Keep the quirks of the source an attempt of the run met (Reader.notices) with
        those earlier attempts kept: each line once, in the order met, at most
        MAX_RUN_NOTICES of them (the last saying that others were left out) of at most
        MAX_NOTICE_LENGTH characters. Returns the run's notices."""
        with self._engine.begin() as conn:
            stored = conn.execute(
                sa.select(harvest_runs.c.notices).where(harvest_runs.c.id == run_id)
            ).scalar()
            kept = list(stored or [])
            merged = _bounded_notices(kept, notices)
            if merged != kept:
                conn.execute(
                    harvest_runs.update()
                    .where(harvest_runs.c.id == run_id)
                    .values(notices=merged or None, updated_at=utc_now())
                )
        return merged

    def save_response_date(self, run_id: int, response_date: str) -> None:
        """The run's first page's responseDate, where the next incremental harvest starts
        (kept when a resumed attempt reads later pages)."""
        with self._engine.begin() as conn:
            conn.execute(
                harvest_runs.update()
                .where(harvest_runs.c.id == run_id, harvest_runs.c.response_date.is_(None))
                .values(response_date=response_date)
            )

    def stage(
        self,
        run_id: int,
        harvester_id: str,
        records: list[HarvestedRecord],
        *,
        rewrite: bool = False,
        listed_at: str | None = None,
        room: int | None = None,
        catch_up_listed: int | None = None,
        catch_up_begins: bool = False,
    ) -> StagedPage:
        """Stage a page (`listed_at`: its responseDate): new records become `pending` run
        rows and harvest records, in one transaction. A record listed again in the same run
        (a redone page, or a source that changed it mid-sweep) counts as a duplicate; the
        newer copy replaces the staged one (see `supersedes`). Returns (newly staged,
        duplicates skipped), and of those duplicates the newer copies taken (`StagedPage`).

        `room` (a capped run): at most this many new records, the first listed; records the
        run already has use none of it, so their newer copies are always taken. (Cut to the
        room before, a resumed run's list of what the source changed since it began lost
        the newer copies of its records, and new records with them, to the cap.)

        `rewrite` (update_all) stores the XML of records whose datestamp did not change too:
        a source may change a record without changing its datestamp.

        `catch_up_listed` (a page of a resumed run's catch-up list: how many records the
        source listed on it): the page is counted in the run's CATCH_UP_COUNTERS in the same
        transaction. Counted after, a run killed in between lost the page's new records and
        newer copies from its report: its rerun found them staged and took them for
        duplicates. `catch_up_begins` (its first page): the pages and records listed by an
        earlier attempt's catch-up list are replaced, not added to (each attempt lists every
        change again: the run's list is its last attempt's, as the token sweep's counters
        count the source's pages once); the records it staged still add up, each staged
        once."""
        unique: dict[str, HarvestedRecord] = {}
        for record in records:
            kept = unique.get(record.identifier)
            if kept is None or supersedes(record, kept.datestamp, kept.deleted):
                unique[record.identifier] = record
        duplicates = len(records) - len(unique)
        now = utc_now()
        with self._engine.begin() as conn:
            unique = self._deletions_dated_as_stored(conn, harvester_id, unique)
            already: dict[str, tuple[str, bool]] = {}
            rr, hr = run_records, harvest_records
            for chunk in _chunks(list(unique)):
                already.update(
                    (row.identifier, (row.datestamp, bool(row.deleted)))
                    for row in conn.execute(
                        sa.select(rr.c.identifier, hr.c.datestamp, hr.c.deleted)
                        .join(
                            hr,
                            sa.and_(
                                hr.c.harvester_id == rr.c.harvester_id,
                                hr.c.identifier == rr.c.identifier,
                            ),
                        )
                        .where(rr.c.run_id == run_id, rr.c.identifier.in_(chunk))
                    )
                )
            new = [record for identifier, record in unique.items() if identifier not in already]
            if room is not None:
                new = new[: max(0, room)]
            newer = [
                record
                for identifier, record in unique.items()
                if identifier in already and supersedes(record, *already[identifier])
            ]
            newer += self._changed_within_day(
                conn, harvester_id, unique, already, _listing_moment(listed_at)
            )
            duplicates += len(already)
            if newer:
                self._upsert_harvested(
                    conn, harvester_id, newer, rewrite=rewrite, listed_at=listed_at
                )
                # A newer copy of a record an earlier attempt of the run already wrote (the
                # source changed it since) is the run's to write again: before, it kept its
                # old copy in the target until the next incremental harvest.
                for chunk in _chunks([record.identifier for record in newer]):
                    conn.execute(
                        run_records.update()
                        .where(
                            run_records.c.run_id == run_id,
                            run_records.c.identifier.in_(chunk),
                            run_records.c.status.not_in(("pending", "running")),
                        )
                        .values(
                            status="pending",
                            attempts=0,
                            claimed_at=None,
                            error_type=None,
                            error_message=None,
                            error_location=None,
                            updated_at=now,
                        )
                    )
            if new:
                conn.execute(
                    run_records.insert(),
                    [
                        {
                            "run_id": run_id,
                            "harvester_id": harvester_id,
                            "identifier": record.identifier,
                            "status": "pending",
                            "attempts": 0,
                            "updated_at": now,
                        }
                        for record in new
                    ],
                )
                self._upsert_harvested(
                    conn, harvester_id, new, rewrite=rewrite, listed_at=listed_at
                )
            if new or newer:
                # the newest datestamp the run staged (`status`): a newer copy of a record it
                # had (a resumed run's catch-up list) counts too; a responseDate that dated a
                # deletion without a datestamp does not (the source dated no record then)
                dated = [r.datestamp for r in (*new, *newer) if not r.undated_deletion]
                last = harvest_runs.c.last_datestamp
                newest = max(dated) if dated else None
                conn.execute(
                    harvest_runs.update()
                    .where(harvest_runs.c.id == run_id)
                    .values(
                        staged=harvest_runs.c.staged + len(new),
                        last_datestamp=last
                        if newest is None
                        else sa.case((sa.or_(last.is_(None), last < newest), newest), else_=last),
                        updated_at=now,
                    )
                )
            if catch_up_listed is not None:
                runs = harvest_runs.c
                conn.execute(
                    harvest_runs.update()
                    .where(runs.id == run_id)
                    .values(
                        catch_up_pages=1 if catch_up_begins else runs.catch_up_pages + 1,
                        catch_up_listed=catch_up_listed
                        if catch_up_begins
                        else runs.catch_up_listed + catch_up_listed,
                        catch_up_new_records=runs.catch_up_new_records + len(new),
                        catch_up_newer_copies=runs.catch_up_newer_copies + len(newer),
                        updated_at=now,
                    )
                )
        return StagedPage(len(new), duplicates, len(newer))

    def _deletions_dated_as_stored(
        self, conn: Connection, harvester_id: str, records: dict[str, HarvestedRecord]
    ) -> dict[str, HarvestedRecord]:
        """Deletions without a datestamp of their own (dated by their page's responseDate,
        see pages._date_deletions) of records stored as deleted already keep the stored
        date: the source said nothing new. Dated anew, a redone page (a resumed run, its
        catch-up list) and every later harvest listing the tombstone made the same deletion
        a newer copy, planned and written again."""
        undated = [i for i, r in records.items() if r.undated_deletion]
        hr = harvest_records
        for chunk in _chunks(undated):
            for row in conn.execute(
                sa.select(hr.c.identifier, hr.c.datestamp).where(
                    hr.c.harvester_id == harvester_id,
                    hr.c.identifier.in_(chunk),
                    hr.c.deleted,
                    hr.c.datestamp != "",
                )
            ):
                records[row.identifier] = dataclasses.replace(
                    records[row.identifier], datestamp=row.datestamp
                )
        return records

    def in_run(self, run_id: int, identifiers: Sequence[str]) -> set[str]:
        """Which of these records the run has staged."""
        found: set[str] = set()
        with self._read() as conn:
            for chunk in _chunks(list(identifiers)):
                found |= _staged_in_run(conn, run_id, chunk)
        return found

    def _changed_within_day(
        self,
        conn: Connection,
        harvester_id: str,
        listed: dict[str, HarvestedRecord],
        staged: dict[str, tuple[str, bool]],
        listed_at: datetime,
    ) -> list[HarvestedRecord]:
        """Records the run staged, listed again with the same day's datestamp before that
        day is over, whose XML is not the one staged: a source dating records by day
        changed them later that day (after an earlier attempt of the run staged them; a
        resumed run's catch-up list has the new copy). Before, the same datestamp made the
        new copy a duplicate, and the run wrote the old one."""
        same_day = {
            identifier: record
            for identifier, record in listed.items()
            if identifier in staged
            and (record.datestamp, record.deleted) == staged[identifier]
            and _listed_within_its_day(record.datestamp, listed_at)
        }
        if not same_day:
            return []
        changed = self._unchanged(conn, harvester_id, same_day, listed_at).changed_within_day
        return [same_day[identifier] for identifier in changed]

    def iter_staged(
        self,
        run_id: int,
        *,
        batch_size: int = 5000,
        group_of: Callable[[str], int] | None = None,
        moved_out: Callable[[str], bool] | None = None,
    ) -> Iterator[HarvestedRecord]:
        """The run's staged records, as harvested (latest version), in staging order.

        `group_of` (datestamp -> a group number, e.g. the record's window) yields the
        records group by group instead, in staging order within a group: sources list
        records in no datestamp order, and a writer of per-window files wants each window's
        records together. Only the run's row ids are held for that, never the records.
        The XML is looked up without an ORDER BY, so the database never sorts it.

        `moved_out` (datestamp -> whether it lies outside what the caller covers) leaves out
        the records a later run of the harvester listed again with such a datestamp: the
        source moved them to a later window, which that run harvested (re-exporting an old
        run's windows would count them twice, there and here).
        """
        run = self._require_run(run_id)
        harvester_id = run["harvester_id"]
        order = self._staged_order(run_id, harvester_id, group_of, moved_out)
        decoded: dict[str, list[str]] = {}

        def set_specs(stored: Any) -> list[str]:
            """A new list: JSON text (SQLite) decoded once per distinct text, or the list the
            driver decoded (PostgreSQL)."""
            if not isinstance(stored, str):
                return list(stored or [])
            specs = decoded.get(stored)
            if specs is None:
                specs = decoded[stored] = list(json.loads(stored) or [])
            return list(specs)

        for start in range(0, len(order), batch_size):
            ids = order[start : start + batch_size].to_list()
            with self._read() as conn:
                batch = conn.execute(
                    sa.select(run_records.c.id, run_records.c.identifier).where(
                        run_records.c.id.in_(ids)
                    )
                ).all()
                identifier_of = {row.id: row.identifier for row in batch}
                in_batch = list(identifier_of.values())
                # setSpecs as stored: the same few JSON texts repeat, decoded once each below.
                records: dict[str, Any] = {}
                errors: dict[str, RecordError] = {}
                for chunk in _chunks(in_batch):
                    records.update(
                        (row.identifier, row)
                        for row in conn.execute(
                            sa.select(
                                harvest_records.c.identifier,
                                harvest_records.c.datestamp,
                                harvest_records.c.deleted,
                                sa.type_coerce(harvest_records.c.set_specs, sa.Text).label(
                                    "set_specs"
                                ),
                                harvest_record_xml.c.xml,
                            )
                            .outerjoin(harvest_record_xml, _of_record(harvest_record_xml))
                            .where(
                                harvest_records.c.harvester_id == harvester_id,
                                harvest_records.c.identifier.in_(chunk),
                            )
                        )
                    )
                    # The parse errors (the first per record, as written).
                    for error in conn.execute(
                        sa.select(
                            record_errors.c.identifier,
                            record_errors.c.type,
                            record_errors.c.message,
                            record_errors.c.location,
                        )
                        .where(
                            record_errors.c.harvester_id == harvester_id,
                            record_errors.c.stage == "harvest",
                            record_errors.c.identifier.in_(chunk),
                        )
                        .order_by(record_errors.c.id)
                    ):
                        if error.identifier not in errors:
                            errors[error.identifier] = RecordError(
                                type=error.type, message=error.message, location=error.location
                            )
            for row_id in ids:
                identifier = identifier_of.get(row_id)
                row = records.get(identifier) if identifier is not None else None
                if row is None:
                    continue
                yield HarvestedRecord(
                    identifier=identifier,
                    datestamp=row.datestamp,
                    deleted=bool(row.deleted),
                    set_specs=set_specs(row.set_specs),
                    xml=None if row.xml is None else bytes(row.xml),
                    error=errors.get(identifier),
                )

    def _staged_order(
        self,
        run_id: int,
        harvester_id: str,
        group_of: Callable[[str], int] | None,
        moved_out: Callable[[str], bool] | None = None,
    ) -> pl.Series:
        """The run's row ids in the order `iter_staged` yields them (compact: int64). polars
        is imported here, for the run that writes, not by every command opening the store."""
        import polars as pl

        rr, hr = run_records, harvest_records
        with self._read() as conn:
            if group_of is None and moved_out is None:
                ids = conn.execute(
                    sa.select(rr.c.id).where(rr.c.run_id == run_id).order_by(rr.c.id)
                ).scalars()
                return pl.Series("id", list(ids), dtype=pl.Int64)
            listed_later = (
                rr.c.identifier.in_(_listed_later(conn, harvester_id, run_id))
                if moved_out is not None
                else sa.false()
            )
            rows = conn.execute(
                sa.select(rr.c.id, hr.c.datestamp, listed_later.label("listed_later"))
                .join(
                    hr,
                    sa.and_(hr.c.harvester_id == harvester_id, hr.c.identifier == rr.c.identifier),
                )
                .where(rr.c.run_id == run_id)
            )
            ids: list[int] = []
            groups: list[int] = []
            group_cache: dict[str, int] = {}
            for row_id, datestamp, later in rows:
                if later and moved_out is not None and moved_out(datestamp):
                    continue
                group = group_cache.get(datestamp)
                if group is None:
                    group = group_cache[datestamp] = group_of(datestamp) if group_of else 0
                    if len(group_cache) > 100_000:
                        group_cache.clear()
                ids.append(row_id)
                groups.append(group)
        order = pl.DataFrame(
            {"id": ids, "group": groups}, schema={"id": pl.Int64, "group": pl.Int64}
        ).sort(["group", "id"])
        return order["id"]

    @staticmethod
    def _counters(run: dict[str, Any]) -> dict[str, Any]:
        counters: dict[str, Any] = {name: int(run[name]) for name in COUNTERS}
        counters["cap_reached"] = bool(run["cap_reached"])
        counters.update((name, int(run[name] or 0)) for name in CATCH_UP_COUNTERS)
        return counters

    def reconcile_counters(self, run_id: int) -> dict[str, Any]:
        """Recount from the durable rows (a crash may have come between rows and counters)
        and store the result; call before fetching the next page of a resumed run."""
        with self._engine.begin() as conn:
            row = conn.execute(sa.select(harvest_runs).where(harvest_runs.c.id == run_id)).first()
            if row is None:
                raise PipelineError(f"no harvest run {run_id}")
            staged = conn.execute(
                sa.select(sa.func.count()).where(
                    run_records.c.run_id == run_id, ~_unknown_to_source(run_records)
                )
            ).scalar_one()
            discovered = max(int(row.discovered), staged)
            cap_reached = bool(row.cap_reached) or bool(
                row.max_records and staged >= row.max_records
            )
            conn.execute(
                harvest_runs.update()
                .where(harvest_runs.c.id == run_id)
                .values(
                    staged=staged,
                    discovered=discovered,
                    cap_reached=cap_reached,
                    updated_at=utc_now(),
                )
            )
            run = dict(row._mapping) | {
                "staged": staged,
                "discovered": discovered,
                "cap_reached": cap_reached,
            }
        return self._counters(run)

    def update_counters(self, run_id: int, **deltas_or_values: int | bool) -> None:
        """Integer counters (pages_read, discovered, staged, duplicates_skipped,
        existing_skipped) are incremented by the value given; `cap_reached` is set. (The
        catch-up list's are counted by `stage`, in its transaction.)"""
        values: dict[str, Any] = {"updated_at": utc_now()}
        for name, value in deltas_or_values.items():
            if name == "cap_reached":
                values[name] = bool(value)
            elif name in COUNTERS:
                if value:
                    values[name] = harvest_runs.c[name] + int(value)
            else:
                raise ValueError(f"unknown run counter {name!r}")
        with self._engine.begin() as conn:
            conn.execute(harvest_runs.update().where(harvest_runs.c.id == run_id).values(values))

    def set_cap_reached(self, run_id: int) -> None:
        self.update_counters(run_id, cap_reached=True)

    def set_record_status(
        self,
        run_id: int,
        statuses: dict[str, str],
        errors: dict[str, RecordError] | None = None,
    ) -> None:
        """Per-record run status (pending, running, imported, updated, unchanged, gone,
        failed) and the record's last error in this run (cleared when none is given)."""
        self._check_statuses(statuses)
        if not statuses:
            return
        with self._engine.begin() as conn:
            self._set_record_status(conn, run_id, statuses, errors or {})

    @staticmethod
    def _check_statuses(statuses: dict[str, str]) -> None:
        unknown = set(statuses.values()) - set(RECORD_STATUSES)
        if unknown:
            raise ValueError(f"unknown record status(es): {', '.join(sorted(unknown))}")

    @staticmethod
    def _set_record_status(
        conn: Connection,
        run_id: int,
        statuses: dict[str, str],
        errors: dict[str, RecordError],
        actions: Mapping[str, str] | None = None,
    ) -> None:
        if not statuses:
            return
        actions = actions or {}
        now = utc_now()
        # Records without an error share one UPDATE per status and action (a part of
        # unchanged records is one statement per chunk); records with an error carry their
        # own values.
        clean: dict[tuple[str, str | None], list[str]] = {}
        params = []
        for identifier, status in statuses.items():
            error = errors.get(identifier)
            action = actions.get(identifier)
            if error is None:
                clean.setdefault((status, action), []).append(identifier)
                continue
            params.append(
                {
                    "b_identifier": identifier,
                    "b_status": status,
                    "b_action": action,
                    "b_error_type": error.type,
                    "b_error_message": error.message,
                    "b_error_location": error.location,
                    "b_updated_at": now,
                }
            )
        statement = (
            run_records.update()
            .where(
                run_records.c.run_id == run_id,
                run_records.c.identifier == sa.bindparam("b_identifier"),
            )
            .values(
                status=sa.bindparam("b_status"),
                action=sa.bindparam("b_action"),
                error_type=sa.bindparam("b_error_type"),
                error_message=sa.bindparam("b_error_message"),
                error_location=sa.bindparam("b_error_location"),
                updated_at=sa.bindparam("b_updated_at"),
            )
        )
        for (status, action), identifiers in clean.items():
            for chunk in _chunks(identifiers):
                conn.execute(
                    run_records.update()
                    .where(run_records.c.run_id == run_id, run_records.c.identifier.in_(chunk))
                    .values(
                        status=status,
                        action=action,
                        error_type=None,
                        error_message=None,
                        error_location=None,
                        updated_at=now,
                    )
                )
        if params:
            conn.execute(statement, params)

    def claim(
        self,
        run_id: int,
        *,
        limit: int | None = None,
        reclaim_stale_minutes: int | None = None,
        retry_failed: bool = False,
        identifiers: Sequence[str] | None = None,
        unchanged: bool = False,
    ) -> list[str]:
        """Mark records `running` and return them: pending ones, plus those left running
        longer than `reclaim_stale_minutes`, plus failed ones if `retry_failed`. Records
        that succeeded (imported, updated, unchanged, gone) are never claimed again.

        `identifiers` limits the claim to those records (one part at a time, so the writer
        never holds the whole run's identifiers). `unchanged` claims records there is
        nothing to write for and marks them `unchanged` at once (one statement, not two)."""
        if identifiers is not None and not identifiers:
            return []
        # One transaction for all of them: one per chunk of 500 cost a commit each (a group
        # of 5,000 records, ten), and the claim of a group is all or nothing.
        with self._engine.begin() as conn:
            if identifiers is None:
                return self._claim(
                    conn, run_id, limit, reclaim_stale_minutes, retry_failed, None, unchanged
                )
            claimed: list[str] = []
            for chunk in _chunks(list(identifiers)):
                remaining = None if limit is None else limit - len(claimed)
                if remaining is not None and remaining <= 0:
                    break
                claimed += self._claim(
                    conn, run_id, remaining, reclaim_stale_minutes, retry_failed, chunk, unchanged
                )
            return claimed

    @staticmethod
    def _claim(
        conn: Connection,
        run_id: int,
        limit: int | None,
        reclaim_stale_minutes: int | None,
        retry_failed: bool,
        identifiers: Sequence[str] | None,
        unchanged: bool = False,
    ) -> list[str]:
        rr = run_records
        eligible = [rr.c.status == "pending"]
        if reclaim_stale_minutes is not None:
            cutoff = _minutes_ago(reclaim_stale_minutes)
            eligible.append(
                sa.and_(
                    rr.c.status == "running",
                    sa.or_(rr.c.claimed_at.is_(None), rr.c.claimed_at <= cutoff),
                )
            )
        if retry_failed:
            eligible.append(rr.c.status == "failed")
        query = (
            sa.select(rr.c.id, rr.c.identifier)
            .where(rr.c.run_id == run_id, sa.or_(*eligible))
            .order_by(rr.c.id)
        )
        if identifiers is not None:
            query = query.where(rr.c.identifier.in_(identifiers))
        if limit is not None:
            query = query.limit(max(0, limit))
        now = utc_now()
        if conn.dialect.name == "postgresql":
            query = query.with_for_update(skip_locked=True)
        rows = conn.execute(query).all()
        ids = [row.id for row in rows]
        for chunk in _chunks(ids):
            conn.execute(
                rr.update()
                .where(rr.c.id.in_(chunk))
                .values(
                    status="unchanged" if unchanged else "running",
                    action=Action.SKIP.value if unchanged else None,
                    claimed_at=now,
                    updated_at=now,
                    attempts=rr.c.attempts + 1,
                    **(_NO_ERROR if unchanged else {}),
                )
            )
        return [row.identifier for row in rows]

    def record_statuses(self, run_id: int, identifiers: Iterable[str]) -> dict[str, str]:
        """The run status of each of these records of the run."""
        found = self.earlier_actions(run_id, identifiers)
        return {identifier: status for identifier, (status, _) in found.items()}

    def earlier_actions(
        self, run_id: int, identifiers: Iterable[str]
    ) -> dict[str, tuple[str, str | None]]:
        """The run status of each of these records of the run and what its write did (the
        action; None for a record not written yet, or written before version 21)."""
        rr = run_records
        found: dict[str, tuple[str, str | None]] = {}
        with self._read() as conn:
            for chunk in _chunks(list(identifiers)):
                rows = conn.execute(
                    sa.select(rr.c.identifier, rr.c.status, rr.c.action).where(
                        rr.c.run_id == run_id, rr.c.identifier.in_(chunk)
                    )
                )
                found.update({row.identifier: (row.status, row.action) for row in rows})
        return found

    def refresh_run_statistics(self) -> None:
        """PostgreSQL: gather the statistics of run_records once a run's records are staged.

        A run made since the last ANALYZE is estimated at a row or so: the write's claims,
        status counts and updates of a chunk of its records (`run_id = ? AND identifier IN
        (...)`) then searched the run by run_id alone and filtered every one of its rows,
        per chunk (27 ms per 500 of a 200,000-record run: the write grew with its square).
        Autovacuum analyzes a large table only after a tenth of it changed. SQLite's planner
        needs no statistics for this."""
        if self._engine.dialect.name != "postgresql":
            return
        try:
            with self._engine.connect() as conn:
                conn.execute(sa.text(f"ANALYZE {run_records.name}"))
                conn.commit()
        except sa.exc.DBAPIError as error:  # a hint to the planner: the run goes on without
            log_unsaved(logger, "gather the statistics of run_records", error)

    def records_owed(self, run_id: int) -> int:
        """How many of the run's records still wait to be written, not counting those a
        later run of the harvester listed again (that run writes them)."""
        rr = run_records
        harvester_id = self._require_run(run_id)["harvester_id"]
        with self._read() as conn:
            return conn.execute(
                sa.select(sa.func.count()).where(
                    rr.c.run_id == run_id,
                    rr.c.status.in_(("pending", "running")),
                    rr.c.identifier.not_in(_listed_later(conn, harvester_id, run_id)),
                )
            ).scalar_one()

    def finish_run(
        self,
        run_id: int,
        status: Literal["succeeded", "failed", "stopped"],
        error: str | None = None,
        *,
        if_running: bool = False,
    ) -> None:
        """End the run. `if_running`: only if nothing ended it yet (a process ending its run
        on an error after the run succeeded, e.g. in the pruning that follows, or after
        another process settled it, leaves that end as it is)."""
        if status not in ("succeeded", "failed", "stopped"):
            raise ValueError(f"a run finishes as succeeded, failed or stopped, not {status!r}")
        now = utc_now()
        which = [harvest_runs.c.id == run_id]
        if if_running:
            which.append(harvest_runs.c.status == "running")
        with self._engine.begin() as conn:
            conn.execute(
                harvest_runs.update()
                .where(*which)
                .values(status=status, error=error, finished_at=now, updated_at=now)
            )

    def note_failed_attempt(self, run_id: int, error: str) -> None:
        """A failed attempt of a run still `running` because another attempt follows (a
        Dagster step's retry): its error, for `status`, until the run ends."""
        now = utc_now()
        with self._engine.begin() as conn:
            conn.execute(
                harvest_runs.update()
                .where(harvest_runs.c.id == run_id, harvest_runs.c.status == "running")
                .values(error=error, updated_at=now)
            )

    def prune_run_records(self, harvester_id: str, *, keep_days: int) -> PrunedRuns:
        """Drop the per-record rows of the harvester's runs that succeeded more than
        `keep_days` ago (0: never), keeping their counts and last failures on the run, which
        `run_status` shows. The latest succeeded run keeps its rows. Returns how many runs
        and rows it dropped.

        A run keeps a row per record it staged: a full harvest of a large source adds that
        many every time, and a succeeded run's rows answer nothing but its status."""
        if keep_days <= 0:
            return PrunedRuns(0, 0)
        cutoff = _minutes_ago(keep_days * 24 * 60)
        runs = harvest_runs.c
        latest = self.last_success(harvester_id)
        with self._engine.begin() as conn:
            old = conn.execute(
                sa.select(runs.id).where(
                    runs.harvester_id == harvester_id,
                    runs.status == "succeeded",
                    runs.finished_at < cutoff,
                    runs.record_counts.is_(None),
                    runs.id != (latest["id"] if latest else -1),
                )
            ).scalars()
            old_runs = list(old)
            dropped = 0
            for run_id in old_runs:
                conn.execute(
                    harvest_runs.update()
                    .where(runs.id == run_id)
                    .values(record_counts=_record_counts(conn, run_id, _KEPT_FAILURES))
                )
                dropped += conn.execute(
                    run_records.delete().where(run_records.c.run_id == run_id)
                ).rowcount
        return PrunedRuns(len(old_runs), dropped)

    def pruned_runs(self, run_ids: Iterable[int]) -> set[int]:
        """Those of the runs whose per-record rows were pruned (see `prune_run_records`):
        nothing resumes them, nor writes their records again."""
        pruned: set[int] = set()
        with self._read() as conn:
            for chunk in _chunks(sorted(set(run_ids))):
                pruned.update(
                    conn.execute(
                        sa.select(harvest_runs.c.id).where(
                            harvest_runs.c.id.in_(chunk), harvest_runs.c.record_counts.is_not(None)
                        )
                    ).scalars()
                )
        return pruned

    def last_success(self, harvester_id: str) -> dict[str, Any] | None:
        """The latest succeeded run, with `response_date` (its first page's responseDate)."""
        return self.latest_run(harvester_id, status="succeeded")

    def run_status(
        self,
        *,
        run_id: int | None = None,
        harvester_id: str | None = None,
        target_stats: dict[str, Any] | None = None,
        stale_minutes: int = DEFAULT_STALE_MINUTES,
        failures: int = 10,
    ) -> dict[str, Any]:
        """Everything an operator asks about a run (the given one, else the harvester's
        latest, else the latest of all), as JSON-ready data."""
        if run_id is not None:
            run = self._require_run(run_id)
        elif harvester_id is not None:
            run = self.latest_run(harvester_id)
            if run is None:
                # A typo in the id said "has no harvest runs yet", as if it were registered.
                if self.get_harvester(harvester_id) is None:
                    raise NotFound(f"unknown harvester {harvester_id!r}")
                raise PipelineError(f"harvester {harvester_id!r} has no harvest runs yet")
        else:
            runs = self.list_runs(limit=1)
            if not runs:
                raise PipelineError("no harvest runs yet")
            run = runs[0]
        rr = run_records
        cutoff = _minutes_ago(stale_minutes)
        with self._read() as conn:
            kept = run.get("record_counts") or _record_counts(conn, run["id"], failures)
            stale = conn.execute(
                sa.select(sa.func.count()).where(
                    rr.c.run_id == run["id"],
                    rr.c.status == "running",
                    sa.or_(rr.c.claimed_at.is_(None), rr.c.claimed_at <= cutoff),
                )
            ).scalar_one()
        counts = kept["records"]
        recent_failures = kept["recent_failures"][:failures]
        checkpoint = run["checkpoint"]
        pending = self.pending_rekey(run["harvester_id"])
        return {
            "run": jsonable_run(run),
            "counters": self._counters(run),
            "records": {status: counts.get(status, 0) for status in RECORD_STATUSES},
            "total_records": sum(counts.values()),
            "record_rows_pruned": run.get("record_counts") is not None,
            "stale_running": int(stale),
            "stale_after_minutes": stale_minutes,
            "recent_failures": recent_failures,
            "notices": run["notices"],
            # `complete`: the run succeeded, its sweep listed the window to the end; its
            # last checkpoint (a token, the pages before the last) is no state to resume from
            "discovery_state": None
            if checkpoint is None
            else {
                **dataclasses.asdict(checkpoint),
                "last_datestamp": run.get("last_datestamp"),
                "complete": run["status"] == "succeeded",
            },
            "harvest_records": self.record_totals(run["harvester_id"]),
            "target": target_stats,
            # a rekey killed half-way: harvests of the harvester are refused until it ends
            "pending_rekey": jsonable_pending_rekey(pending),
        }


def _bounded_notices(kept: list[str], met: Iterable[str]) -> list[str]:
    """The notices `kept` so far and those `met` since, as add_run_notices keeps them."""
    left_out = NOTICES_LEFT_OUT in kept
    lines: dict[str, None] = {}
    for notice in (*(n for n in kept if n != NOTICES_LEFT_OUT), *met):
        notice = " ".join(str(notice).split())  # one line each, as text and logs show them
        if len(notice) > MAX_NOTICE_LENGTH:
            notice = notice[: MAX_NOTICE_LENGTH - 1] + "…"
        if notice:
            lines[notice] = None
    merged = list(lines)
    if left_out or len(merged) > MAX_RUN_NOTICES:
        merged = [*merged[: MAX_RUN_NOTICES - 1], NOTICES_LEFT_OUT]
    return merged


def _listed_later(conn: Connection, harvester_id: str, run_id: int) -> sa.Select:
    """The identifiers later runs of the harvester listed. Uncorrelated: the database reads
    them once, not per record of the run.

    By the harvester's later runs, named (ix_harvest_runs_latest), then run by run: by
    `run_id >` alone, SQLite read the rows of every later run of every harvester (another
    harvester's full harvest staged beside it: a million rows) to keep the harvester's; with
    those runs as a subquery, PostgreSQL (which estimates the runs after the last ANALYZE as
    many) hashed every row of run_records instead."""
    runs = harvest_runs
    later_runs = list(
        conn.execute(
            sa.select(runs.c.id).where(runs.c.harvester_id == harvester_id, runs.c.id > run_id)
        ).scalars()
    )
    rr = run_records
    return sa.select(rr.c.identifier).where(
        rr.c.run_id.in_(later_runs), rr.c.harvester_id == harvester_id
    )


# The last failures a pruned run keeps (what `status` shows of it).
_KEPT_FAILURES = 10


def _record_counts(conn: Connection, run_id: int, failures: int) -> dict[str, Any]:
    """The run's records per status and its `failures` last failures."""
    rr = run_records
    counts = {
        status: int(count)
        for status, count in conn.execute(
            sa.select(rr.c.status, sa.func.count())
            .where(rr.c.run_id == run_id)
            .group_by(rr.c.status)
        )
    }
    recent = [
        {
            "identifier": row.identifier,
            "attempts": int(row.attempts),
            "error": {
                "type": row.error_type,
                "message": row.error_message,
                "location": row.error_location,
            },
            "updated_at": row.updated_at,
        }
        for row in conn.execute(
            sa.select(rr)
            .where(rr.c.run_id == run_id, rr.c.status == "failed")
            .order_by(rr.c.updated_at.desc(), rr.c.id.desc())
            .limit(failures)
        )
    ]
    return {"records": counts, "recent_failures": recent}


def jsonable_run(run: dict[str, Any]) -> dict[str, Any]:
    """A run dict as JSON-ready data (the checkpoint as a plain dict)."""
    checkpoint = run.get("checkpoint")
    return run | {
        "checkpoint": None if checkpoint is None else dataclasses.asdict(checkpoint),
    }


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _group_by_keys(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """executemany needs the same keys in every row."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(sorted(row)), []).append(row)
    return list(groups.values())
