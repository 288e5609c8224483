"""How commands print: a table-ish text for people, JSON for machines, one line for mistakes."""

from __future__ import annotations

import json
import logging
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext, suppress
from typing import IO, Any

import click
from pydantic import ValidationError

from oai_pipeline.console import error_document, json_flag_given
from oai_pipeline.errors import (
    AlreadyExists,
    InvalidArgument,
    NotFound,
    PipelineError,
    database_error_text,
    describe_validation_error,
    disk_advice,
    has_lone_surrogate,
    refused_write_line,
)
from oai_pipeline.state.limits import MAX_INTEGER

json_option = click.option(
    "--json", "as_json", is_flag=True, help="print JSON for machines (errors too) instead of text"
)


def limit_option(default: int, what: str) -> Callable[[Callable], Callable]:
    """`--limit N` of a listing: at most N of `what`."""
    return click.option(
        "--limit",
        type=click.IntRange(1, MAX_INTEGER),
        default=default,
        show_default=True,
        help=f"at most this many {what}",
    )


# ctx.meta key (shared by a command's whole context tree): the command was given --json.
JSON_ERRORS = "oai_pipeline.json_errors"


class CommandError(click.ClickException):
    """A user mistake as one `Error: …` line on stderr; with --json also a JSON object on
    stdout, so a script reading stdout always gets JSON, for success and failure alike."""

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        exit_code: int = 1,
        as_json: bool = False,
        shown: click.ClickException | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.exit_code = exit_code
        self.as_json = as_json
        self.shown = shown  # a click usage error keeps its own stderr text (usage, hint)

    def show(self, file: IO[Any] | None = None) -> None:
        if self.shown is not None:
            self.shown.show(file)
        else:
            super().show(file)
        if self.as_json:
            with suppress(OSError):  # stdout itself failed (a full disk): the line above says so
                click.echo(error_document(self.message, self.kind))


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`, a supervisor stopping the service) raised where the command is, so it
    stops as on Ctrl-C: a harvest run is marked stopped with its checkpoint, the sample
    endpoint shuts down. Left to the default action, the process just vanished."""


# Set once SIGTERM arrived: a library that runs Python code from its own (polars, calling
# back while it builds a frame) may swallow the Terminated and raise an error of its own.
_terminating = threading.Event()


def _terminate(signum: int, frame: object) -> None:
    _terminating.set()
    raise Terminated("SIGTERM")


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the command runs, SIGTERM is a Terminated interrupt (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _terminating.clear()
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class InvalidInput(CommandError):
    """A ValidationError as one line naming the field; exit code 2, like click's usage errors."""

    def __init__(self, message: str, *, as_json: bool = False) -> None:
        super().__init__(message, kind="validation_error", exit_code=2, as_json=as_json)


def argument_or_option(
    argument: str | None, option: str | None, flag: str, what: str, *, as_json: bool = False
) -> str | None:
    """A value an operator may give as an argument or as its flag (`status zenodo` or
    `status --harvester zenodo`); both, differing, is a one-line error naming `what`."""
    if argument is not None and option is not None and argument != option:
        raise InvalidInput(
            f"two {what}: {argument!r} and {flag} {option!r}; give one", as_json=as_json
        )
    return option if argument is None else argument


def _kind(error: BaseException) -> str:
    """The error's class in snake_case (`OAIError` -> `oai_error`): stable for scripts."""
    name = type(error).__name__
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _command_error(error: Exception, as_json: bool) -> CommandError | None:
    """The user mistake (or the machine's fault) `error` as a CommandError; None for anything
    else (a bug: traceback)."""
    if isinstance(error, CommandError):  # raised by a command: --json still asks for JSON
        error.as_json = error.as_json or as_json
        return error
    if isinstance(error, ValidationError):
        return InvalidInput(describe_validation_error(error), as_json=as_json)
    if isinstance(error, InvalidArgument):
        return InvalidInput(str(error), as_json=as_json)
    if isinstance(error, NotFound | AlreadyExists):  # a mistake in what the user named
        return CommandError(str(error), kind=_kind(error), exit_code=2, as_json=as_json)
    if isinstance(error, PipelineError):
        # notes added on the way up (Reader.notices of a failed sweep) belong to the message
        message = "\n".join([str(error), *note_lines(getattr(error, "__notes__", None))])
        return CommandError(message, kind=_kind(error), as_json=as_json)
    if isinstance(error, OSError):  # the machine's fault (disk full, no permission), not ours
        return CommandError(_os_error_text(error), kind=_kind(error), as_json=as_json)
    if _is_database_unavailable(error):  # its server gone or restarting mid-command
        text = database_error_text(getattr(error, "orig", None) or error)
        return CommandError(f"database error: {text}", kind="database_error", as_json=as_json)
    refused = _write_refused_line(error)  # read-only (25006), a role lacking a privilege (42501)
    if refused is not None:
        return CommandError(refused, kind="database_error", as_json=as_json)
    if isinstance(error, click.ClickException) and as_json:
        return CommandError(
            error.format_message(),
            kind=_kind(error),
            exit_code=error.exit_code,
            as_json=True,
            shown=error,
        )
    return None


def _is_database_unavailable(error: Exception) -> bool:
    """The database's fault, not ours: SQLAlchemy's OperationalError (a server that went
    away, refused the connection, shut down; SQLite's locked or read-only file) or its
    InterfaceError (a connection closed under it). SQLAlchemy is looked up only once
    imported: a command that never opened a database can't have met one of its errors."""
    exc = sys.modules.get("sqlalchemy.exc")
    return exc is not None and isinstance(error, exc.OperationalError | exc.InterfaceError)


def _write_refused_line(error: Exception) -> str | None:
    """`refused_write_line` of a database's error (an InternalError, a ProgrammingError:
    not OperationalErrors): the operator's to fix, not a bug. None for other errors."""
    exc = sys.modules.get("sqlalchemy.exc")
    if exc is None or not isinstance(error, exc.DBAPIError):
        return None
    return refused_write_line(error)


def _os_error_text(error: OSError) -> str:
    if not (error.strerror and error.filename is not None):
        return str(error) or type(error).__name__  # stdout itself, say: no file to name
    advice = disk_advice(error.errno)  # a full or read-only disk: what to do about it
    text = f"{error.strerror}: {error.filename}"
    return f"{text}; {advice}" if advice else text


def _asked(as_json: bool | Callable[[], bool]) -> bool:
    return as_json() if callable(as_json) else as_json


@contextmanager
def one_line_errors(as_json: bool | Callable[[], bool] = False) -> Iterator[None]:
    """User mistakes end the command with one `Error: …` line, never a traceback:
    ValidationError, click usage errors and a named thing not found (or already there)
    exit 2, another PipelineError exits 1, Ctrl-C 130 and
    SIGTERM 143 (the shell's 128 + the signal). With `as_json` (a flag, or asked only when
    an error happens) the error is also JSON on stdout."""
    try:
        yield
    except KeyboardInterrupt as interrupt:  # click's `Aborted!` leaves stdout without JSON
        kind, exit_code = (
            ("terminated", 143) if isinstance(interrupt, Terminated) else ("interrupted", 130)
        )
        raise CommandError(kind, kind=kind, exit_code=exit_code, as_json=_asked(as_json)) from None
    except Exception as error:
        if _terminating.is_set():  # SIGTERM's interrupt, turned into another error
            raise CommandError(
                "terminated", kind="terminated", exit_code=143, as_json=_asked(as_json)
            ) from None
        reported = _command_error(error, _asked(as_json))
        if reported is None or reported is error:
            raise
        raise reported from None


def _asks_for_json(command: click.Command, args: Sequence[str]) -> bool:
    """Whether the command line gives this command's --json flag. Read apart from the real
    parse, so that a usage error in another option is reported as JSON too. A group (whose
    subcommand may not exist: a typo) or a command without the flag look for the flag
    itself; the subcommand that has it decides once it parses."""
    args = list(args)
    flag_given = json_flag_given(args)
    if not any(param.name == "as_json" for param in command.params):
        return flag_given
    try:  # the parser consumes the list it is given: it gets a copy
        opts, _, _ = command.make_parser(click.Context(command)).parse_args(args=list(args))
    except click.UsageError:  # e.g. an unknown option: look for the flag itself
        return flag_given
    return opts.get("as_json") is True


class _OneLineErrors:
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # meta is shared: the parent's invoke sees it; a subcommand corrects its group's guess
        ctx.meta[JSON_ERRORS] = _asks_for_json(self, args)  # type: ignore[arg-type]
        return super().parse_args(ctx, args)  # type: ignore[misc]

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        """The top command parses its own arguments before any invoke: its usage errors
        are caught here (a subcommand's reach its parent's invoke)."""
        if parent is not None:
            return super().make_context(info_name, args, parent, **extra)  # type: ignore[misc]
        # Asked before the parse, which consumes `args`.
        as_json = _asks_for_json(self, args)  # type: ignore[arg-type]
        with one_line_errors(as_json):
            return super().make_context(info_name, args, parent, **extra)  # type: ignore[misc]

    def invoke(self, ctx: click.Context) -> Any:
        top = sigterm_as_interrupt() if ctx.parent is None else nullcontext()
        with top, one_line_errors(lambda: bool(ctx.meta.get(JSON_ERRORS))):
            _refuse_text_not_utf8(ctx)
            return super().invoke(ctx)  # type: ignore[misc]


def _refuse_text_not_utf8(ctx: click.Context) -> None:
    """Python hands command-line bytes that are not UTF-8 (a Latin-1 terminal, a name pasted
    from such a file) over as lone surrogates, which no database or JSON writer takes: a
    traceback where it was stored or looked up. Paths are exempt: a file name may be any bytes."""
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        for text in value if isinstance(value, tuple | list) else (value,):
            if isinstance(text, str) and has_lone_surrogate(text):
                shown = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
                raise InvalidInput(
                    f"{param.get_error_hint(ctx)}: {shown!r} is not UTF-8 text "
                    "(is the terminal's locale UTF-8?)"
                )


class FriendlyCommand(_OneLineErrors, click.Command):
    """A command whose user mistakes are one line, also when it runs on its own."""


class FriendlyGroup(_OneLineErrors, click.Group):
    """A group whose subcommands' (and subgroups') user mistakes are one line."""

    command_class = FriendlyCommand  # so a subcommand's --json is seen before it parses
    group_class = type  # subgroups are FriendlyGroups too


def setup_cli_logging() -> None:
    """Our progress and info lines on stderr; httpx's `HTTP Request: GET …` line for every
    request is noise there, so the HTTP libraries log only warnings and errors."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(without_interruptions)
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)


def without_interruptions(record: logging.LogRecord) -> bool:
    """Drops a library's log of Ctrl-C or SIGTERM met in its cleanup, with its traceback
    (SQLAlchemy's pool logs "Exception during reset or similar" when a connection's
    rollback is interrupted, then raises it on): the command reports the interruption in
    one line (`one_line_errors`)."""
    kind = record.exc_info[0] if record.exc_info else None
    return kind is None or issubclass(kind, Exception)


def progress_line(line: str) -> None:
    """Progress goes to stderr: stdout holds only the result (one JSON document with --json)."""
    click.echo(line, err=True)


def emit(payload: Any, *, as_json: bool, text: str | None = None, empty: str = "") -> None:
    """`empty`: what an empty listing (`text` "") says, on stderr: on stdout it was read as
    a row (`records list … | cut -f2` gave `no matching harvest records`)."""
    if as_json:
        click.echo(json.dumps(payload, indent=2, sort_keys=True, default=str))
    elif text == "" and empty:
        click.echo(empty, err=True)
    else:
        click.echo(text if text is not None else json.dumps(payload, indent=2, default=str))


# What would split a listing's row (a line break of any kind) or shift its columns (a tab).
_BREAKS_A_ROW = re.compile(r"[\t\n\v\f\r\x1c-\x1e\x85\u2028\u2029]+")


def listing_text(rows: Iterable[Sequence[object]]) -> str:
    """A listing for people and for `cut -f`: one line a row, its columns separated by tabs,
    trailing empty columns left out ("" when there are none: `emit`'s `empty` says so). A
    tab or a line break inside a value (a title or name pasted with one) is shown as a space."""
    lines = ["\t".join(map(one_line, row)).rstrip() for row in rows]
    return "\n".join(lines)


def one_line(value: object) -> str:
    """`value` as text that stays on its line: a tab or line break in it (an identifier or
    an error message sent with one) is shown as a space."""
    return _BREAKS_A_ROW.sub(" ", str(value))


def note_lines(notices: list[str] | None) -> list[str]:
    """The quirks of the source a run met (Reader.notices), one `note:` line each, as every
    report and status says them."""
    return [f"  note: {notice}" for notice in notices or []]


def pending_rekey_line(pending: dict[str, str]) -> str:
    """A pending rekey (`PendingRekey.to_dict`) in one line of text, as `status` and
    `harvesters show` say it: an operator learns of it before a harvest is refused."""
    return (
        f"rekey pending: from {pending['old_prefix']!r} to {pending['new_prefix']!r} since "
        f"{pending['started_at']}, not finished (harvests, reconciles and other rekeys are "
        f"refused); finish it with `{pending['finish_command']}` or undo it with "
        f"`{pending['undo_command']}`"
    )


# What the operator does about a record error that fails every record until they do: the
# report named only its type (`missing_community 12`), not the fix.
FIX_OF_ERROR = {
    "missing_community": "create the community each names (`oai-pipeline records list "
    "--harvester {h} --error-type missing_community` shows them) with `oai-pipeline target "
    "communities create SLUG`, then `oai-pipeline harvest {h} --failed`",
    "HTTPError": "the source refused GetRecord of these records while it answered others; "
    "once it serves them, `oai-pipeline harvest {h} --failed` asks for them again",
    "MalformedResponse": "the source answered GetRecord of these records with what is no "
    "whole OAI-PMH document, at every try, while it answered others; once it serves them, "
    "`oai-pipeline harvest {h} --failed` asks for them again",
    "OversizedResponse": "the source's answers to GetRecord of these records are larger than "
    "the reader's max_response_mb; raise it (`oai-pipeline harvesters update {h} --loader "
    "'oai-pmh{{max_response_mb: N}}'`), then `oai-pipeline harvest {h} --failed`",
}


def catch_up_line(counts: dict[str, Any]) -> str:
    """A resumed run's catch-up list(s), told apart from the token sweep's counts."""
    return (
        "  catch-up list (what the source changed since the run began): "
        f"pages {counts['catch_up_pages']}, records listed {counts['catch_up_listed']}; "
        f"staged {counts['catch_up_new_records']} new records and "
        f"{counts['catch_up_newer_copies']} newer copies of the run's own"
    )


def report_text(report: dict[str, Any]) -> str:
    lines = [
        f"harvester {report['harvester_id']}, harvest run {report['run_id']}",
        f"  harvested: {report['harvested']} (deleted at source: {report['deleted_at_source']})",
        f"  created:   {report['created']}",
        f"  updated:   {report['updated']}",
        f"  deleted:   {report['deleted']}",
        f"  unchanged: {report['unchanged']}",
        f"  errors:    {report['errors']}",
    ]
    if report.get("error_types"):
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(report["error_types"].items()))
        lines.append(f"  error types: {kinds}")
        for kind in sorted(report["error_types"]):
            if kind in FIX_OF_ERROR:
                lines.append(f"  {kind}: {FIX_OF_ERROR[kind].format(h=report['harvester_id'])}")
    if unknown := report.get("unknown_identifiers"):
        shown = ", ".join(unknown[:10]) + (
            f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        )
        lines.append(f"  not at the source (idDoesNotExist), no harvest record kept: {shown}")
    if report.get("written_earlier"):
        lines.append(
            f"  written by an earlier attempt of this run: {report['written_earlier']} "
            "(counted above, by what it did)"
        )
    if report.get("failed_earlier"):
        lines.append(
            f"  failed in an earlier attempt of this run: {report['failed_earlier']} "
            "(not tried again; --retry-failed does)"
        )
    if report.get("catch_up_pages"):
        lines.append(catch_up_line(report))
    if report.get("local_changes_undone"):
        lines.append(
            f"  local changes undone: {report['local_changes_undone']} "
            "(records changed in the target, not listed by the source)"
        )
    if taken := reidentified_line(report.get("reidentified")):
        lines.append(taken)
    if report.get("cap_reached"):
        lines.append("  the cap was reached; run again to harvest more")
    lines.extend(note_lines(report.get("notices")))
    return "\n".join(lines)


def reidentified_line(actions: dict[str, int] | None) -> str | None:
    """The line of a harvest's or reconcile's report for the records that took over the
    target record their former identifier left (a source that changed its identifiers)."""
    taken = sum(n for action, n in (actions or {}).items() if action != "error")
    if not taken:
        return None
    return (
        f"  re-identified: {taken} (records refused a DOI their former identifier held, "
        "now on its target record)"
    )
