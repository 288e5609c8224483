"""Errors shared by every stage: a record's error is data, a run's error is an exception."""

from __future__ import annotations

import errno
import logging
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

from pydantic import BaseModel

if TYPE_CHECKING:
    from pydantic import ValidationError


class RecordError(BaseModel):
    """What went wrong with one record; stored on its harvest record, never raised."""

    type: str
    message: str
    location: str | None = None


class PipelineError(Exception):
    """A user-facing failure of a whole run or command: printed as one line, no traceback."""

    def __reduce__(self) -> tuple[object, ...]:
        # Rebuilt without calling __init__: the default calls the class with ``args`` alone,
        # which fails for an error with a required keyword argument (RefusedRequest's
        # status), so one raised in a worker process could not cross back.
        return (_rebuilt, (type(self), self.args), self.__dict__)


def _rebuilt(kind: type[PipelineError], args: tuple[object, ...]) -> PipelineError:
    """An error of ``kind`` with ``args``, its attributes set by pickle afterwards."""
    error = kind.__new__(kind)
    error.args = args
    return error


class NotFound(PipelineError):
    """What the user named (a harvester, run, record, community) does not exist: a mistake in
    an argument, exit 2 in the command line as other argument mistakes (it was 1)."""


class AlreadyExists(PipelineError):
    """What the user asked to create exists already: exit 2 in the command line, as the
    command's other mistakes (`harvesters create` of an id taken exited 1)."""


class ConfigurationError(PipelineError):
    """The harvester, option or argument is wrong; retrying cannot help."""


class InvalidArgument(ConfigurationError):
    """An argument wrong in itself, whatever is stored (a slug with a space, a field path
    `a..b`): the command line's validation error (exit 2), as for a bad option value."""


class SchemaChanged(ConfigurationError):
    """Another process migrated the database to another schema version after this process
    opened it (an in-place upgrade while it ran): its writes are refused, since they would
    miss what the new schema keeps. Restarting it with the new version is the cure."""


def schema_changed(database: str, found: int | None, known: int) -> SchemaChanged:
    """The error of a write refused by `SchemaChanged`, in one line."""
    if found is not None and found > known:
        return SchemaChanged(
            f"the {database} database was upgraded to schema version {found} by a newer "
            f"oai-pipeline while this process (schema version {known}) ran: nothing was "
            "written; restart this process with the upgraded oai-pipeline"
        )
    now = "no schema version" if found is None else f"schema version {found}"
    return SchemaChanged(
        f"the {database} database has {now} now, not the {known} it had when this process "
        "opened it (replaced by an older copy?): nothing was written; restart this process"
    )


def add_notices(error: BaseException, notices: list[str]) -> None:
    """What the source did before a run failed (Reader.notices), carried on its error as
    notes: the failure may be the source's doing, and the run makes no report to say it.
    The command line prints them under the error; a traceback (Dagster) shows them too."""
    for notice in notices:
        error.add_note(notice)


def database_error_text(error: BaseException) -> str:
    """A database's error as one line: PostgreSQL's span lines, indented with tabs. A URL
    naming a driver that is not installed also says which one is."""
    text = " ".join(str(error).split())
    if isinstance(error, ImportError) and error.name == "psycopg":
        # SQLAlchemy 2.1 reads a plain postgresql:// as psycopg 3; we ship psycopg2.
        text += "; the PostgreSQL driver installed is psycopg2: postgresql+psycopg2://…"
    return text


# What the operator does when the machine refuses a write (errno of the OSError).
_FULL = (errno.ENOSPC, errno.EDQUOT)
_NOT_WRITABLE = (errno.EACCES, errno.EPERM)
RESUME_ADVICE = "then run again: a harvest resumes where it stopped"


def user_name() -> str:
    """Who this process runs as, as an advice names them."""
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):  # Windows, or a uid without a name (a container)
        return "this user"


def disk_advice(error_number: int | None) -> str | None:
    """What to do about a full or unwritable disk, said beside the error: the bare
    `No space left on device` named neither the cure nor that nothing was lost."""
    if error_number in _FULL:
        return f"free space on that file system (or move the data folder), {RESUME_ADVICE}"
    if error_number == errno.EROFS:  # no user may write it: its owner neither
        return f"mount it read-write (or move the data folder), {RESUME_ADVICE}"
    if error_number in _NOT_WRITABLE:
        return f"make it writable for {user_name()} (or run as its owner), {RESUME_ADVICE}"
    return None


def refused_by_disk(error: BaseException) -> bool:
    """Whether the error (or the database error it was made from) is a disk that is full or
    not writable, as `disk_advice` words it: a command that only reads may go on without,
    and a retry a minute later meets the same disk."""
    if isinstance(error, OSError) and disk_advice(error.errno) is not None:
        return True
    return RESUME_ADVICE in str(error)


# PostgreSQL's read_only_sql_transaction and insufficient_privilege.
_READ_ONLY_SQLSTATE = "25006"
_PRIVILEGE_SQLSTATE = "42501"


def refused_as_read_only(error: BaseException) -> bool:
    """A database's error (SQLAlchemy's, with `orig`) refusing a write: read-only, or a role
    lacking the privilege (`refused_write_text` tells them apart for the operator)."""
    original = getattr(error, "orig", error)
    if getattr(original, "pgcode", None) in (_READ_ONLY_SQLSTATE, _PRIVILEGE_SQLSTATE):
        return True
    return "readonly database" in str(original)  # SQLite's "attempt to write a readonly …"


def database_role(url: str) -> str:
    """The role a database URL logs in as: its user, else libpq's (PGUSER, this user)."""
    try:
        parts = urlsplit(url)
        # percent-encoded in the URL (`jo%40lab@host`), as SQLAlchemy decodes it to log in
        named = unquote(parts.username or "") or _query_value(parts.query, "user")
    except ValueError:
        named = None
    return named or os.environ.get("PGUSER") or user_name()


# libpq's `options` setting the search path (`?options=-csearch_path%3Dharvest`)
_SEARCH_PATH = re.compile(r"-c\s*search_path\s*=\s*([^\s,]+)")


def database_schema(url: str) -> str:
    """The schema a database URL's tables are created in: the first of the search path its
    `options` set, else PostgreSQL's default, `public`."""
    try:
        options = _query_value(urlsplit(url).query, "options") or ""
    except ValueError:
        options = ""
    found = _SEARCH_PATH.search(options)
    schema = found[1].strip('"') if found else ""
    return schema if schema and schema != "$user" else "public"


def _query_value(query: str, name: str) -> str | None:
    """The last `name=` value of a URL's query (libpq's `?user=…`), decoded; None if absent."""
    values = parse_qs(query).get(name)
    return values[-1] if values else None


def _quoted(role: str) -> str:
    return role if re.fullmatch(r"[a-z_][a-z0-9_$]*", role) else '"' + role.replace('"', '""') + '"'


_DENIED = re.compile(r"permission denied for (schema|table|sequence|view|relation) (\S+)")


def _grant(message: str, role: str | None, schema: str = "public") -> str:
    """The GRANT that lets `role` (None: not known, a placeholder) do what PostgreSQL's
    `message` (42501) refused on the tables of `schema`."""
    grantee = "<its role>" if role is None else _quoted(role)
    refused = _DENIED.match(message)
    if refused is None:  # "must be owner of table …": a migration altering a table
        return f"run it as the owner of the database's tables (or make {grantee} their owner)"
    if refused[1] == "schema":
        return f"grant it `GRANT USAGE, CREATE ON SCHEMA {refused[2]} TO {grantee}`"
    schema = _quoted(schema)
    return (
        "grant it (as the owner of its tables) "
        f"`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {grantee}` "
        f"and `GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {grantee}`"
    )


def refused_write_text(
    error: BaseException, where: str, role: str | None, schema: str = "public"
) -> str | None:
    """The one line for PostgreSQL refusing a write as read-only (25006) or for the role's
    lack of a privilege (42501): each has its own cure. `where` names the database (the
    target or the state store, its URL), `role` the role refused (None: not known), `schema`
    the one its tables are in. None for other errors."""
    original = getattr(error, "orig", error)
    code = getattr(original, "pgcode", None)
    if code not in (_READ_ONLY_SQLSTATE, _PRIVILEGE_SQLSTATE):
        return None
    # PostgreSQL's own line, without the statement it quotes (LINE 2: CREATE TABLE … ^)
    text = getattr(getattr(original, "diag", None), "message_primary", None)
    text = text or database_error_text(original)
    if code == _READ_ONLY_SQLSTATE:
        cure = (
            "takes only reads (a read-only default transaction, a standby, a role that may "
            "only read): let it take writes"
        )
    else:
        who = "its role" if role is None else f"role {role}"
        cure = f"refuses {who} this: {_grant(text, role, schema)}"
    return f"{text}; {where} {cure}, {RESUME_ADVICE}"


def cannot_open_text(database: str, url: str, error: BaseException) -> str:
    """The line of a store (`database`: state, target) that failed to open (migrate) at `url`."""
    where = f"the {database} database {without_password(url)}"
    reason = refused_write_text(error, "it", database_role(url), database_schema(url))
    return f"cannot open {where}: {reason or database_error_text(getattr(error, 'orig', error))}"


# An attribute of a database error: which database it came from (`name_database_in_errors`).
_DATABASE = "oai_pipeline_database"


def name_database_in_errors(engine: Any, database: str) -> None:
    """Every error of the engine's statements (a SQLAlchemy Engine) carries which database
    (`database`: state, target) and URL it came from, and its role: a write refused in the
    middle of a harvest then says which of the two refused, as `database_refused_in` tells."""
    from sqlalchemy import event

    url = engine.url.render_as_string(hide_password=False)
    named = (
        f"the {database} database {without_password(url)}",
        database_role(url),
        database_schema(url),
    )

    @event.listens_for(engine, "handle_error")
    def _name(context: Any) -> None:
        if context.sqlalchemy_exception is not None:
            setattr(context.sqlalchemy_exception, _DATABASE, named)


def database_refused_in(error: BaseException) -> tuple[str, str | None, str]:
    """(the database, its role, the schema of its tables) an error came from
    (`name_database_in_errors`); one no engine named (Dagster's own storage) is "the
    database", its role not known."""
    return getattr(error, _DATABASE, ("the database", None, "public"))


def refused_write_line(error: BaseException) -> str | None:
    """The one line of a database error (SQLAlchemy's) refusing a write as read-only or for
    the role's privileges, naming which database refused (`database_refused_in`): what the
    command line prints and a Dagster run's failure and its harvest run's error say. None
    for other errors."""
    refused = refused_write_text(error, *database_refused_in(error))
    return None if refused is None else f"database error: {refused}"


def refused_as_full(error: BaseException) -> bool:
    """A database's error refusing a write on a full disk (SQLite), or PostgreSQL's disk_full."""
    original = getattr(error, "orig", error)
    return getattr(original, "pgcode", None) == "53100" or "disk is full" in str(original)


def log_unsaved(log: logging.Logger, what: str, error: BaseException) -> None:
    """One warning line for a write a database refused after the work it records was done or
    failed (its server gone or restarting): the error that matters is the work's, and a
    traceback logged here buried it under the database's."""
    log.warning("could not %s: %s", what, database_error_text(getattr(error, "orig", error)))


def log_upgraded(log: logging.Logger, database: str, url: str, found: int, version: int) -> None:
    """Say once that a migration upgraded a database: an operator who upgraded in place
    learns here that the version before cannot use it any more (`url` without password)."""
    log.warning(
        "the %s database %s was upgraded from schema version %d to %d; "
        "older oai-pipeline versions cannot use it any more",
        database,
        url,
        found,
        version,
    )


def without_password(url: str) -> str:
    """A database or storage URL as an error may print it: `s3://key:secret@bucket` and
    `postgresql://user:secret@host/db` show `:***@`, libpq's `?password=secret` shows
    `password=***`."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    if password:
        url = urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{password}@", ":***@", 1)))
    query = "&".join(_hide_password_parameter(part) for part in parts.query.split("&"))
    # replaced as written: urlunsplit drops the `//` of an empty host (`postgresql:///db?…`)
    return url.replace(f"?{parts.query}", f"?{query}", 1) if query != parts.query else url


def _hide_password_parameter(parameter: str) -> str:
    name, equals, _ = parameter.partition("=")
    return f"{name}=***" if equals and unquote(name).lower() == "password" else parameter


def has_lone_surrogate(text: str) -> bool:
    """Python's stand-in for bytes that are not UTF-8 (in argv) or a YAML `"\\ud800"`: no
    database or JSON writer takes it."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def describe_validation_error(
    error: ValidationError, name: Callable[[str], str] = lambda field: field
) -> str:
    """One line naming the field(s), the way the CLI prints a ValidationError; `name` says
    what the user called a field (a command-line option)."""
    parts = []
    for item in error.errors():
        field = name(".".join(str(p) for p in item["loc"])) if item["loc"] else "input"
        message = item["msg"].removeprefix("Value error, ")
        parts.append(f"{field}: {message}")
    return "invalid " + "; ".join(parts)
