"""Reconcile a source that keeps no deletions (Identify's deletedRecord `no` or `transient`).

A full ListIdentifiers sweep lists what the source still has; harvested records that
vanished are treated as deleted at the source — only when the sweep completed without
errors. A sweep that failed part-way deletes nothing.
"""

from __future__ import annotations

import logging
import re
import shutil
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from oai_pipeline.errors import PipelineError, RecordError, add_notices
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.harvesters.plugins import build_reader, build_writers
from oai_pipeline.oai.client import ended_short, in_set
from oai_pipeline.oai.reader import Reader
from oai_pipeline.oai.types import HarvestedRecord
from oai_pipeline.pipeline.first_contact import saved_identify
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.reidentified import take_over_freed_pids
from oai_pipeline.pipeline.runner import run_harvest
from oai_pipeline.pipeline.scope import HarvestScope
from oai_pipeline.pipeline.services import Services
from oai_pipeline.state.harvester_lock import is_dead_local_process, new_owner
from oai_pipeline.state.store import ReconcileDeletions, StateStore, TakeOverRun, writer_keys
from oai_pipeline.sync.reconcile import (
    CONFIRM_BUDGET,
    check_order,
    implausible_loss,
    vanished_identifiers,
)
from oai_pipeline.sync.rules import (
    Action,
    HarvestMemory,
    LocalRecord,
    LocalState,
    SourceRecord,
    decide,
)
from oai_pipeline.targets.base import PlannedWrite, SourceKey

logger = logging.getLogger(__name__)

# Sources that page by offset shift the rest of a list when a record is dropped mid-sweep,
# so that one they still have slips past a page boundary unlisted. A sweep whose list size
# changed is repeated (this many sweeps at most) and whatever any of them listed is kept.
MAX_SWEEPS = 3


_PREFIX = "reconcile-"
_OWNER = "owner"  # the process that listed into the folder (harvester_lock.new_owner)


def _remove_left_over(folder: Path) -> None:
    """Scratch folders of reconciles whose process on this machine is gone (killed with
    `kill -9`, a lost machine's power): each held a copy of a source's identifiers, tens of
    MB for a large source, and stayed for good. A folder of a live process, or of another
    machine sharing the data folder, is left alone; one without its owner file (written
    right after the folder) too, unless an hour old: its process died between the two."""
    for leftover in folder.glob(f"{_PREFIX}*"):
        try:
            owner = (leftover / _OWNER).read_text()
        except FileNotFoundError:
            try:
                stale = time.time() - leftover.stat().st_mtime > 3600
            except FileNotFoundError:
                continue  # removed meanwhile
            if stale:
                shutil.rmtree(leftover, ignore_errors=True)
            continue
        except OSError:
            continue
        if is_dead_local_process(owner):
            shutil.rmtree(leftover, ignore_errors=True)


class ListedIdentifiers:
    """The identifiers a reconcile's sweeps listed, in a scratch SQLite file under the data
    folder: held as Python strings (and the harvested ones beside them), a source of a
    million records took some 300 MB, growing with the source."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        _remove_left_over(folder)
        self._folder = tempfile.TemporaryDirectory(prefix=_PREFIX, dir=folder)
        (Path(self._folder.name) / _OWNER).write_text(new_owner())
        self._db = sqlite3.connect(Path(self._folder.name) / "listed.sqlite")
        # a scratch file, gone with the run: no journal, no waiting for the disk
        self._db.execute("PRAGMA journal_mode=OFF")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute("CREATE TABLE listed (identifier TEXT PRIMARY KEY) WITHOUT ROWID")

    def add(self, identifiers: Iterable[str]) -> None:
        self._db.executemany(
            "INSERT OR IGNORE INTO listed VALUES (?)", ((i,) for i in identifiers if i)
        )

    def count(self) -> int:
        """How many distinct identifiers were listed (an empty one is none)."""
        return self._db.execute("SELECT count(*) FROM listed").fetchone()[0]

    def among(self, identifiers: list[str]) -> set[str]:
        """Those of ``identifiers`` that were listed."""
        found: set[str] = set()
        for start in range(0, len(identifiers), 500):  # below SQLite's bound on parameters
            chunk = identifiers[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT identifier FROM listed WHERE identifier IN ({marks})", chunk
            )
            found.update(row[0] for row in rows)
        return found

    def first(self) -> str | None:
        """One identifier that was listed (the least), None if none was."""
        row = self._db.execute("SELECT min(identifier) FROM listed").fetchone()
        return row[0] if row else None

    def close(self) -> None:
        self._db.close()
        self._folder.cleanup()

    def __enter__(self) -> ListedIdentifiers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# A target record's states a reconcile's deletion leaves.
_DELETED = (LocalState.TOMBSTONE, LocalState.HARD_DELETED)


def _draft_deleted_before(
    local: LocalRecord, memory: HarvestMemory | None, deleting_before: bool
) -> bool:
    """The draft of a record the store still takes for live at the source is gone, and the
    store saved a write that left no target record: a draft deletion, by an attempt of this
    reconcile that was deleting it (`deleting_before`) and was killed before it marked the
    record gone. Reported as that attempt did (before: `skip`)."""
    return (
        deleting_before
        and local.state is LocalState.MISSING
        and memory is not None
        and memory.local_id is None
        and memory.written_revision is not None
        and not memory.had_errors
    )


def _unheard_of(local: LocalRecord, memory: HarvestMemory | None) -> bool:
    """The target holds another revision of the record than the store remembers writing."""
    if local.local_id is None:
        return False
    return memory is None or (memory.local_id, memory.written_revision) != (
        local.local_id,
        local.revision,
    )


@dataclass
class ReconcileKept:
    """The vanished records a reconcile did not delete, GetRecord not confirming them gone:
    still served (the source's list hides them), an answer telling nothing of them (another
    record, none), or not asked for (past CONFIRM_BUDGET, or after a failed GetRecord)."""

    served: list[str] = field(default_factory=list)
    unconfirmed: list[str] = field(default_factory=list)
    unasked: int = 0

    def to_dict(self) -> dict:
        return {"served": self.served, "unconfirmed": self.unconfirmed, "unasked": self.unasked}


def kept_line(kept: dict | None) -> str | None:
    """The report's line (CLI text, the Dagster job's log) for the vanished records kept
    (`ReconcileKept.to_dict`), None when none was."""
    if not kept:
        return None
    parts = []
    if served := kept.get("served"):
        parts.append(f"{len(served)} still served by GetRecord (e.g. {served[0]})")
    if unconfirmed := kept.get("unconfirmed"):
        parts.append(f"{len(unconfirmed)} not confirmed gone by GetRecord (e.g. {unconfirmed[0]})")
    if unasked := kept.get("unasked"):
        parts.append(f"{unasked} not asked for")
    if not parts:
        return None
    return "kept (vanished from the list, not deleted): " + ", ".join(parts)


@dataclass
class ReconcileReport:
    harvester_id: str
    deleted_record: str
    source_identifiers: int
    harvested_live: int
    vanished: list[str]
    # records an earlier reconcile found vanished that the source lists again: harvested
    # again by identifier (their datestamp may be the same, which no incremental harvest
    # lists again), with that harvest's actions
    returned: list[str] = field(default_factory=list)
    returned_actions: Counter[str] = field(default_factory=Counter)
    # records an earlier harvest refused the DOI a vanished record held, written now that
    # its tombstone gave it up (the source re-identified them; see reidentified.py)
    reidentified: Counter[str] = field(default_factory=Counter)
    actions: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    # quirks of the source the sweeps met (Reader.notices), as a harvest's report has them
    notices: list[str] = field(default_factory=list)
    # the reconcile run (state store): a rerun of a killed reconcile reports the same one
    # with what the killed attempt did; a new one, after a reconcile that had closed its run
    run_id: int | None = None
    # vanished records not deleted: GetRecord did not confirm them gone (see ReconcileKept)
    kept: ReconcileKept = field(default_factory=ReconcileKept)

    def to_dict(self) -> dict:
        return {
            "harvester_id": self.harvester_id,
            "run_id": self.run_id,
            "deleted_record": self.deleted_record,
            "source_identifiers": self.source_identifiers,
            "harvested_live": self.harvested_live,
            "vanished": self.vanished,
            "returned": self.returned,
            "returned_actions": dict(self.returned_actions),
            "reidentified": dict(self.reidentified),
            "actions": dict(self.actions),
            "errors": self.errors,
            "notices": self.notices,
            "kept": self.kept.to_dict(),
        }


def reconcile(services: Services, harvester_id: str, *, force: bool = False) -> ReconcileReport:
    """`force`: act even on a sweep that would delete most of the harvester's records."""
    # Like a harvest: one run at a time writes for a harvester, and one lists from the
    # source's server. Held to the end, the harvest of the records listed again and the
    # closing of the reconcile run included (the harvest's own holds are reentrant): released
    # before, a reconcile started meanwhile (another shell, the weekly schedule) found this
    # one's run unfinished, resumed it and reported its deletions again as its own. One
    # killed leaves its lease to be taken over at once, and its rerun reports them.
    base_url = services.harvester(harvester_id).base_url
    with (
        services.harvester_lock.hold(harvester_id),
        services.harvester_lock.hold_source(base_url),
    ):
        services.state.refuse_while_rekey_pending(harvester_id, "reconcile")
        return _reconcile_holding_the_leases(services, harvester_id, force)


def _reconcile_holding_the_leases(
    services: Services, harvester_id: str, force: bool
) -> ReconcileReport:
    # First the harvest an earlier reconcile left unfinished (killed, failed): the records it
    # staged are no longer marked gone, so no sweep would find them listed again, and those
    # it had not written yet stayed deleted in the target while the source has them.
    resumed = _resume_unfinished_harvest(services, harvester_id)
    with ListedIdentifiers(services.settings.home / "tmp") as source_ids:
        run_id, earlier = services.state.start_reconcile_run(harvester_id)
        report = _reconcile(services, harvester_id, force, source_ids, run_id, earlier)
    # the records to harvest again are those this sweep found gone and listed
    listed_again = [i for i in report.returned if resumed is None or i not in resumed[0]]
    # Found listed again by a killed attempt, gone from the source again before they were
    # harvested (not listed by this sweep, or the resumed harvest's GetRecord answered
    # idDoesNotExist): still deleted, none of them came back. Before, they were reported
    # returned, those not resumed as `already_written`.
    gone_again = _gone_again(services, harvester_id, report, earlier, resumed)
    if earlier is not None:
        # An attempt of this run killed after it marked its deletions saved them on the run:
        # reported as that attempt would have, not as "nothing vanished".
        report.vanished = sorted({*earlier.vanished, *report.vanished})
        report.actions.update(earlier.actions)
        report.errors += earlier.errors
        # Those it found listed again that this sweep did not, nor a resumed harvest: its
        # harvest of them succeeded (then it was killed), as a resumed harvest reports them.
        harvested_before = set(earlier.returned) - set(report.returned)
        harvested_before -= set(resumed[0]) if resumed is not None else set()
        harvested_before -= gone_again
        if harvested_before:
            report.returned_actions["already_written"] += len(harvested_before)
        report.returned = sorted({*earlier.returned, *report.returned})
    if resumed is not None:
        identifiers, actions, notice = resumed
        report.returned = sorted({*identifiers, *report.returned})
        report.returned_actions.update(actions)
        report.notices += [notice] if notice else []
    if gone_again:
        report.returned = [i for i in report.returned if i not in gone_again]
        shown = ", ".join(sorted(gone_again)[:5]) + (", …" if len(gone_again) > 5 else "")
        report.notices.append(
            f"{len(gone_again)} records an earlier attempt found listed again are gone from "
            f"the source again, left deleted: {shown}"
        )
    if listed_again:
        scope = HarvestScope.adhoc(harvester_id, None, None)
        options = RunOptions(identifiers=listed_again, reconcile=True)
        try:
            harvested = run_harvest(services, scope, options, progress=logger.info)
        except PipelineError as error:  # what the reconcile did stands: said, not lost
            report.notices.append(
                f"harvesting again the {len(listed_again)} records listed again failed "
                f"({error}); the next reconcile tries again"
            )
        else:
            report.returned_actions.update(harvested.actions)
    # After the deletions, also those a killed attempt of this run saved: every reconcile
    # looks, so a rerun finishes what the killed one did not.
    writers = build_writers(services.harvester(harvester_id), services.settings)
    try:
        report.reidentified = take_over_freed_pids(
            services, harvester_id, writers, run=TakeOverRun("reconcile", run_id)
        )
    finally:
        for writer in writers:
            writer.close()
    services.state.finish_reconcile_run(run_id)
    return report


def _gone_again(
    services: Services,
    harvester_id: str,
    report: ReconcileReport,
    earlier: ReconcileDeletions | None,
    resumed: tuple[list[str], Counter[str], str | None] | None,
) -> set[str]:
    """The records a killed attempt of this run found listed again that stayed deleted in
    the store: this sweep did not list them (nor did an attempt of the run find them
    vanished: brought back, then dropped again) and the resumed harvest, if it succeeded,
    did not bring them back."""
    candidates = set(earlier.returned) if earlier is not None else set()
    if resumed is not None and resumed[2] is None:  # a failed resume tries them again later
        candidates |= set(resumed[0])
    candidates -= {*report.returned, *report.vanished}
    # found vanished by an attempt of this run: live then, brought back before it was killed
    candidates -= set(earlier.vanished) if earlier is not None else set()
    if not candidates:
        return set()
    copies = services.state.listed_copies(harvester_id, sorted(candidates))
    return {i for i in candidates if copies.get(i, ("", True))[1]}


def _resume_unfinished_harvest(
    services: Services, harvester_id: str
) -> tuple[list[str], Counter[str], str | None] | None:
    """Resume the last reconcile's harvest of the records listed again if it did not
    succeed: (its identifiers, the actions of the resumed run, a notice if it failed again),
    or None when there is none to resume."""
    run = services.state.latest_reconcile_run(harvester_id)
    if run is None or run["status"] == "succeeded":
        return None
    identifiers = list((run.get("options") or {}).get("identifiers") or [])
    scope = HarvestScope.adhoc(harvester_id, None, None)
    options = RunOptions(resume_batch_id=run["id"], reconcile=True)
    try:
        harvested = run_harvest(services, scope, options, progress=logger.info)
    except PipelineError as error:
        return (
            identifiers,
            Counter(),
            f"resuming harvest run {run['id']} of the {len(identifiers)} records an earlier "
            f"reconcile found listed again failed ({error}); the next reconcile tries again",
        )
    return identifiers, Counter(harvested.actions), None


def _refuse_another_format(state: StateStore, harvester: Harvester, vanished: set[str]) -> None:
    """Refuse to delete vanished records harvested before the harvester's metadata prefix
    changed: the list of the new prefix leaves out a record the source does not offer in
    that format (an item without DataCite metadata), which is no deletion at the source.
    Before, the next reconcile deleted every such record (unless more than half of all)."""
    found = state.harvested_before_prefix_change(harvester.id, vanished)
    if found is None:
        return
    formats, records = found
    # the prefixes they were harvested in, with how many when there are several
    if len(formats) == 1:
        before = repr(next(iter(formats)))
    else:
        before = " and ".join(f"{prefix!r} ({count})" for prefix, count in formats.items())
    now = harvester.metadata_prefix
    raise PipelineError(
        f"reconcile of {harvester.id} deletes nothing: {len(records)} of the {len(vanished)} "
        f"records it would delete (e.g. {records[0]}) were harvested as {before}, before "
        f"the harvester's metadata prefix became {now!r}: the source may just not offer them "
        f"as {now!r}; to delete them all the same, run reconcile again with --force"
    )


# The client's item error for a GetRecord answered with another record at every try (a proxy
# mixing answers up): after the retries, as a failed GetRecord is.
_ANOTHER_RECORD = "AnotherRecordAnswered"

# GetRecord's item errors that say the source does not serve the record (in the harvester's
# metadata prefix): its own word that the record is gone, as its list says.
_NOT_SERVED = frozenset({"idDoesNotExist", "cannotDisseminateFormat"})

# A badArgument to GetRecord refuses the identifier as written: the source issued it, so
# that says it cannot read it (an identifier with `/` or `+` decoded wrongly), not that the
# record is gone; it confirms the record gone only in the words some sources use for
# idDoesNotExist. Taken as gone, a record GetRecord could not fetch was deleted.
_NO_SUCH_RECORD = re.compile(
    r"n[o']t\s+exist|no\s+such|not\s+found|unknown\s+(?:identifier|id|record|item)"
    r"|no\s+(?:record|item|matching)",
    re.IGNORECASE,
)


def _says_gone(error: RecordError) -> bool:
    """Whether GetRecord's item error is the source's word that it does not serve the record."""
    if error.type == "badArgument":
        return bool(_NO_SUCH_RECORD.search(error.message or ""))
    return error.type in _NOT_SERVED


def _still_served(record: HarvestedRecord, set_spec: str | None) -> bool | None:
    """Whether GetRecord's answer shows the record live in the harvester's set: True (the
    list hid it), False (deleted header, not served, or in another set: the list is right),
    None (an answer saying nothing of it: another record, no record)."""
    if record.deleted:
        return False
    if record.error is not None and not record.datestamp:  # no header: an item error
        return False if _says_gone(record.error) else None
    # a record that left the set is served, but no longer the harvester's: gone from it
    return in_set(record.set_specs, set_spec)


@dataclass
class _Checked:
    """What GetRecord said of the vanished records a reconcile asked it for, one by one."""

    gone: set[str] = field(default_factory=set)  # confirmed gone: deleted
    served: list[str] = field(default_factory=list)  # still served: the list hides them
    unconfirmed: list[str] = field(default_factory=list)  # an answer telling nothing of it
    said: str = ""  # what the first unconfirmed one's answer said
    failed: str | None = None  # its GetRecord failed after others answered: asked no more
    failure: str = ""  # how it failed
    asked: list[str] = field(default_factory=list)  # in the order asked

    @property
    def kept(self) -> list[str]:
        """Asked for, and not confirmed gone: not deleted, asked for last next time."""
        return [i for i in self.asked if i not in self.gone]


def _records(count: int) -> str:
    return f"{count} record{'' if count == 1 else 's'}"


def _confirm_vanished(
    reader: Reader,
    harvester: Harvester,
    vanished: set[str],
    listed: ListedIdentifiers,
    kept_before: list[str],
    remember: Callable[[list[str]], None],
) -> tuple[set[str], ReconcileKept, list[str]]:
    """Ask GetRecord for each vanished record (at most CONFIRM_BUDGET, those never asked for
    first): (those to delete, those kept, the report's notes), the kept ones remembered
    (`remember`) for the next check to ask for last.

    Some sources' ListIdentifiers leaves out records their ListRecords and GetRecord still
    serve (DSpace's withdrawn or embargoed items, Invenio's stale identifier index, EPrints'
    per-verb caches): before, a reconcile deleted those from the target; then, one of a
    sample of 10, the same every run, held back every deletion until `--force` deleted it
    too. Each record is now deleted on GetRecord's word; past the budget, only when all
    those asked for were confirmed gone (the next reconcile asks for the rest otherwise).
    A GetRecord failing after the client's retries before any answered proves nothing
    either way: nothing is deleted (the source fails; asked for last next time)."""
    checked = _Checked()
    setless: list[str] = []  # taken as in no set any more: GetRecord names none
    sets_named: _SetsNamed | None = None
    for identifier in check_order(vanished, kept_before, CONFIRM_BUDGET):
        try:
            record = reader.get_record(identifier)
            failure = None
        except PipelineError as error:  # after the client's retries
            record, failure = None, str(error).splitlines()[0] if str(error) else "no answer"
        if record is not None and record.error and record.error.type == _ANOTHER_RECORD:
            failure = record.error.message  # the same on every try, as a failure is
        if failure is not None:
            if not checked.asked:  # the first asked for: the source, not just this record?
                others = (i for i in kept_before if i in vanished and i != identifier)
                remember([*others, identifier])
                raise _unconfirmed(harvester, vanished, identifier, failure, others_first=True)
            checked.asked.append(identifier)
            checked.failed, checked.failure = identifier, failure
            checked.unconfirmed.append(identifier)
            # each asked for with the client's retries, a source failing now took hours
            break
        checked.asked.append(identifier)
        answer = None if record is None else _still_served(record, harvester.setspec)
        if answer is None:
            if not checked.unconfirmed:
                checked.said = record.error.message if record and record.error else "no record"
            checked.unconfirmed.append(identifier)
            continue
        if answer is False and _names_no_set(record, harvester.setspec):
            # No setSpec at all: in no set, or a GetRecord that leaves sets out (some do)?
            # A record the set's list holds tells which, by whether its own names the set.
            sets_named = sets_named or _SetsNamed.ask(reader, harvester, vanished, listed)
            if not sets_named.named:
                reference = sets_named.reference
                compared = (
                    f"nor of {reference} which that list holds: the source's GetRecord does "
                    "not tell sets"
                    if reference
                    else "and that list holds no record to tell by"
                )
                raise PipelineError(
                    f"reconcile of {harvester.id} deletes nothing: {_harvested(vanished)} "
                    f"vanished from the list of the set {harvester.setspec}, and "
                    f"GetRecord names no set of {identifier}, {compared}, so whether they "
                    f"left the set {harvester.setspec} is not known; to delete them all the "
                    "same, run reconcile again with --force"
                )
            setless.append(identifier)
        if answer:
            checked.served.append(identifier)
        else:
            checked.gone.add(identifier)
    asked = set(checked.asked)
    # the records kept before and not asked for again lead, the least recently asked first
    remember([*(i for i in kept_before if i in vanished and i not in asked), *checked.kept])
    unasked = vanished - asked
    held = unasked & set(kept_before)  # kept before: never deleted without asking again
    fresh = unasked - held
    confirmed = not checked.kept  # every record asked for is gone
    deleting = checked.gone | (fresh if confirmed else set())
    kept = ReconcileKept(
        served=sorted(checked.served),
        unconfirmed=sorted(checked.unconfirmed),
        unasked=len(held) + (0 if confirmed else len(fresh)),
    )
    notices = _setless_notice(harvester, setless, sets_named)
    notices += _kept_notices(checked, len(fresh), len(held), confirmed)
    return deleting, kept, notices


def _kept_notices(checked: _Checked, fresh: int, held: int, confirmed: bool) -> list[str]:
    """What the report says of the vanished records GetRecord was asked for, or not."""
    notices: list[str] = []
    if served := checked.served:
        notices.append(
            f"GetRecord still serves {_records(len(served))} the source's list no longer holds "
            f"(e.g. {served[0]}): the list hides records the source has; kept, not deleted "
            "(reconcile --force deletes them all the same)"
        )
    if checked.failed is not None:
        notices.append(
            f"GetRecord of {checked.failed} failed ({checked.failure}) after the source answered "
            f"for {_records(len(checked.asked) - 1)}: kept, not deleted, and no other asked "
            "for; the next reconcile asks for it after the others"
        )
    if unconfirmed := [i for i in checked.unconfirmed if i != checked.failed]:
        notices.append(
            f"GetRecord's answer does not tell whether {_records(len(unconfirmed))} the "
            f"source's list no longer holds are gone (e.g. {unconfirmed[0]}: {checked.said}): "
            "kept, not deleted; the next reconcile asks for them after the others "
            "(reconcile --force deletes them all the same)"
        )
    why = (
        "GetRecord failed"
        if checked.failed is not None
        else f"a reconcile asks GetRecord for {CONFIRM_BUDGET} at most"
    )
    if fresh and confirmed:
        notices.append(
            f"GetRecord confirmed gone all {_records(len(checked.asked))} asked for ({why}): "
            f"the other {_records(fresh)} the source's list no longer holds were deleted "
            "without asking"
        )
    elif fresh:
        notices.append(
            f"{fresh} more record{'' if fresh == 1 else 's'} the source's list no longer holds "
            f"not asked for ({why}): kept, not deleted, since not all those asked for were "
            "confirmed gone; the next reconcile asks for them first"
        )
    if held:
        notices.append(
            f"{_records(held)} an earlier reconcile kept (GetRecord served them, or did not "
            f"tell) not asked for again ({why}): kept, not deleted; a later reconcile asks "
            "for them again"
        )
    return notices


def _setless_notice(
    harvester: Harvester, setless: list[str], sets_named: _SetsNamed | None
) -> list[str]:
    """The note for records taken as in no set any more: GetRecord names none of theirs."""
    if not setless or sets_named is None:
        return []
    more = f" and {len(setless) - 1} more vanished records" if len(setless) > 1 else ""
    which = f"{setless[0]} is" if len(setless) == 1 else "they are"
    return [
        f"GetRecord names no set of {setless[0]}{more}, and the sets of "
        f"{sets_named.reference}, which the set's list holds: {which} in no set any more, "
        f"taken as gone from the set {harvester.setspec}"
    ]


def _harvested(vanished: set[str]) -> str:
    """`1 harvested record`, `12 harvested records`: the vanished, as the refusals count them."""
    return f"{len(vanished)} harvested record{'' if len(vanished) == 1 else 's'}"


def _get_record(
    reader: Reader, harvester: Harvester, vanished: set[str], identifier: str
) -> HarvestedRecord | None:
    """GetRecord's answer for ``identifier``; a failure after the client's retries refuses
    the deletions (`_unconfirmed`)."""
    try:
        return reader.get_record(identifier)
    except PipelineError as error:  # after the client's retries
        raise _unconfirmed(harvester, vanished, identifier, str(error)) from error


def _names_no_set(record: HarvestedRecord, set_spec: str | None) -> bool:
    """Whether a live record's GetRecord header names no set at all, for a harvester of a
    set: unlike a header naming other sets, it does not show the record outside the set."""
    return bool(set_spec) and not record.deleted and not record.set_specs


@dataclass(frozen=True)
class _SetsNamed:
    """Whether the source's GetRecord names the sets of ``reference``, a record the set's
    list holds: if not, a header without sets says nothing of where a record is."""

    reference: str | None  # None: the set's list holds no record
    named: bool

    @classmethod
    def ask(
        cls, reader: Reader, harvester: Harvester, vanished: set[str], listed: ListedIdentifiers
    ) -> _SetsNamed:
        reference = listed.first()
        if reference is None:
            return cls(None, False)
        record = _get_record(reader, harvester, vanished, reference)
        named = (
            record is not None
            and record.error is None
            and not record.deleted
            and in_set(record.set_specs, harvester.setspec)
        )
        return cls(reference, named)


def _unconfirmed(
    harvester: Harvester,
    vanished: set[str],
    identifier: str,
    problem: str,
    *,
    others_first: bool = False,
) -> PipelineError:
    """The refusal of a reconcile whose GetRecord of ``identifier`` failed (after the
    client's retries). `others_first`: a vanished record asked for last next time
    (`_confirm_vanished`), so the next reconcile asks for the other vanished records
    first; otherwise, only a source answering for it tells more than this one did."""
    advice = (
        "the next reconcile asks GetRecord for the others first; to delete them all the same, "
        "run reconcile again with --force"
        if others_first and len(vanished) > 1
        else f"run reconcile again once the source answers GetRecord of {identifier}, or with "
        "--force to delete them all the same"
    )
    return PipelineError(
        f"reconcile of {harvester.id} deletes nothing: {_harvested(vanished)} "
        f"vanished from the source's list, and GetRecord of {identifier} failed "
        f"({problem.splitlines()[0] if problem else 'no answer'}): whether they are gone is "
        f"not confirmed; {advice}"
    )


def _reconcile(
    services: Services,
    harvester_id: str,
    force: bool,
    source_ids: ListedIdentifiers,
    run_id: int,
    earlier: ReconcileDeletions | None = None,
) -> ReconcileReport:
    """`earlier`: what killed attempts of this run saved (`mark_gone`), merged with what
    this one deletes when it saves its own."""
    # open to the end: the sweeps list with it, then it asks for vanished records by GetRecord
    harvester = services.harvester(harvester_id)
    with build_reader(harvester) as reader:
        return _sweep_and_delete(services, reader, harvester, force, source_ids, run_id, earlier)


def _sweep_and_delete(
    services: Services,
    reader: Reader,
    harvester: Harvester,
    force: bool,
    source_ids: ListedIdentifiers,
    run_id: int,
    earlier: ReconcileDeletions | None,
) -> ReconcileReport:
    harvester_id = harvester.id
    state = services.state
    changes: list[str] = []  # sweeps whose list changed while it was listed
    try:
        saved_identify(reader, state, harvester_id)  # a wrong URL fails at once
        identify = reader.identify()
        state.save_identify(harvester_id, identify)
        unidentified = 0  # the most live headers without identifier (whose?) a sweep listed
        for sweep in range(1, MAX_SWEEPS + 1):
            sizes: set[int] = set()
            listed, announced, without_identifier = 0, None, 0
            token_refused = False  # the list's end was a token refused (Page.token_refused)
            # Any failure propagates: an incomplete sweep must delete nothing.
            for page in reader.list_identifiers():
                source_ids.add(r.identifier for r in page.records if not r.deleted)
                without_identifier += sum(
                    1 for r in page.records if not (r.identifier or r.deleted)
                )
                token_refused = page.token_refused
                if page.list_records is not None:
                    # the client's count at the list's end: a page sent again, or read again
                    # after the list was redone, counted twice made a list ended short whole
                    listed = page.list_records
                else:
                    listed += len(page.records)
                if page.complete_list_size is not None:
                    sizes.add(page.complete_list_size)
                    announced = page.complete_list_size
                if page.size_ignores_set:
                    # the size counts the whole source: it tells neither where the set's
                    # list ends nor whether the set changed (the source's other records do)
                    sizes.clear()
                    announced = None
            unidentified = max(unidentified, without_identifier)
            if len(sizes) <= 1:
                break
            changes.append(
                f"the source's list changed while it was listed (completeListSize "
                f"{', '.join(map(str, sorted(sizes)))} in sweep {sweep})"
                + ("; listed again" if sweep < MAX_SWEEPS else "")
            )
            logger.warning("reconcile of %s: %s", harvester_id, changes[-1])
    except PipelineError as error:
        # A failed sweep's report is this error: it says what the source did meanwhile.
        add_notices(error, [*reader.notices, *changes])
        raise
    finally:
        notices = [*reader.notices, *changes]
    # The harvested records read a chunk at a time, against what the sweeps listed.
    deleting = state.reconcile_deleting(run_id)  # by an attempt of this run killed since
    live, vanished, listed_deleting = 0, set(), set()
    for chunk in state.live_identifier_chunks(harvester_id):
        live += len(chunk)
        still_listed = source_ids.among(chunk)
        vanished |= vanished_identifiers(set(chunk), still_listed, sweep_complete=True)
        listed_deleting |= still_listed & deleting
    returned: list[str] = []
    for chunk in state.gone_identifier_chunks(harvester_id):
        returned += sorted(source_ids.among(chunk))
    # Deleted by that attempt before it marked them gone, and listed again since: harvested
    # again as those marked gone are (before, they stayed tombstones while the source had
    # them: live in the store, neither vanished nor gone). Reported as that attempt's
    # deletions are once saved: vanished, deleted, and returned.
    undone = _deleted_in_target(services, harvester_id, listed_deleting)
    listed_ids = source_ids.count()
    report = ReconcileReport(
        harvester_id,
        identify.deleted_record,
        listed_ids,
        live,
        sorted(vanished | undone),
        returned=sorted({*returned, *undone}),
        notices=notices,
        run_id=run_id,
    )
    # (an attempt killed again before harvesting them saved them already: counted once)
    if counted := undone - set(earlier.vanished if earlier is not None else ()):
        report.actions[Action.DELETE.value] += len(counted)
    if not vanished:
        return _nothing_deleted(state, run_id, report, counted, earlier)
    ended_early = None  # the list ended short of the size it announced (as its notice says)
    if announced is not None and ended_short(listed, announced):
        ended_early = (listed, announced)
    doubt = implausible_loss(
        live,
        listed_ids,
        len(vanished),
        ended_early=ended_early,
        token_refused=token_refused,
        unidentified=unidentified,
    )
    if doubt is None and not force:
        _refuse_another_format(state, harvester, vanished)
    if doubt is not None and not force:
        raise PipelineError(
            f"reconcile of {harvester_id} deletes nothing: {doubt} would be deleted, which "
            "looks like a broken source rather than deletions; if the source really dropped "
            "them, run reconcile again with --force"
            # what the source did may be why (a list that ended early)
            + "".join(f"\n  note: {notice}" for notice in notices)
        )
    if not force:
        kept_before = state.reconcile_kept(harvester_id)
        try:
            vanished, report.kept, said = _confirm_vanished(
                reader,
                harvester,
                vanished,
                source_ids,
                kept_before,
                lambda kept: state.save_reconcile_kept(run_id, kept),
            )
        except PipelineError as error:  # said with what the source did (a list that changed)
            add_notices(error, [*reader.notices, *changes])
            raise
        notices += said
        notices += [notice for notice in reader.notices if notice not in notices]
        report.vanished = sorted(vanished | undone)
        if not vanished:  # GetRecord confirmed none gone: all kept
            return _nothing_deleted(state, run_id, report, counted, earlier)
    # Saved before the writes: killed after them, before `mark_gone`, this attempt leaves
    # tombstones of records still live in the store, which its rerun finds no other way.
    state.save_reconcile_deleting(run_id, vanished)
    records = {r: state.get_record(r, harvester_id) for r in vanished}
    for writer, owner in zip(
        build_writers(harvester, services.settings), writer_keys(harvester.writers), strict=True
    ):
        try:
            memories = state.get_memories(harvester_id, sorted(vanished), owner)
            keys = [SourceKey(identifier) for identifier in sorted(vanished)]
            local = writer.lookup(harvester_id, keys)
            writes = []
            unheard: set[str] = set()  # deleted already, by a write the store never heard of
            for key in keys:
                datestamp = (records.get(key.identifier) or {}).get("datestamp") or ""
                source = SourceRecord(key.identifier, datestamp, deleted=True)
                found, memory = local[key.identifier], memories.get(key.identifier)
                decision = decide(source, memory, found)
                action = decision.action
                if action in (Action.SKIP, Action.NOTHING) and not found.has_edit_draft:
                    if not _unheard_of(found, memory):
                        # Deleted by a write the store saved while it still takes the record
                        # for live at the source: by a reconcile killed before it marked them
                        # gone. This one finishes it: its deletion, as that one reported it.
                        if found.state in _DELETED:
                            action = Action.DELETE
                        elif _draft_deleted_before(found, memory, key.identifier in deleting):
                            action = Action.DELETE_DRAFT
                        report.actions[action.value] += 1
                        continue
                    # Left as the reconcile leaves it, maybe by a reconcile killed before the
                    # store saved its outcome: the writer reports the revision the target
                    # holds (left stale, the next plans compared the record with the one
                    # before), and whether that reconcile deleted it.
                    unheard.add(key.identifier)
                    action = Action.NOTHING
                else:
                    report.actions[action.value] += 1
                writes.append(
                    PlannedWrite(
                        key.identifier,
                        action,
                        "vanished from the source (reconcile)",
                        datestamp,
                        local_id=found.local_id,
                        # a revision made since the store's last write of the record is one it
                        # never heard of: the writer tells a deletion at the source from it
                        run_started=memory.written_at if memory else None,
                    )
                )
            outcomes = writer.apply(harvester_id, writes) if writes else []
            state.save_write_outcomes(
                harvester_id, outcomes, {w.identifier: w.datestamp for w in writes}, writer=owner
            )
            report.actions.update(o.action.value for o in outcomes if o.identifier in unheard)
            report.errors += sum(1 for o in outcomes if o.error is not None)
        finally:
            writer.close()
    # Marked gone only once every writer has deleted them: the next reconcile finds what is
    # vanished among the records still marked live, so marked first, a reconcile killed
    # before its writes left the target's records live for ever (no later run deleted them).
    state.mark_gone(harvester_id, vanished, _deletions(run_id, report, earlier))
    if report.errors:
        logger.warning("reconcile of %s: %d write errors", harvester_id, report.errors)
    return report


def _nothing_deleted(
    state: StateStore,
    run_id: int,
    report: ReconcileReport,
    counted: set[str],
    earlier: ReconcileDeletions | None,
) -> ReconcileReport:
    """The report of a reconcile that deletes nothing of what its sweep found vanished."""
    # Saved on the run (what the source lists again included: harvested after, so no
    # rerun's sweep finds them gone again), so that a rerun of an attempt killed after this
    # reports them as the vanished path's does. Before, only a reconcile that found
    # something vanished saved them: killed after harvesting them, its rerun said
    # `returned: []`.
    if counted or report.returned:
        state.mark_gone(report.harvester_id, set(), _deletions(run_id, report, earlier))
    return report


def _deletions(
    run_id: int, report: ReconcileReport, earlier: ReconcileDeletions | None
) -> ReconcileDeletions:
    """What the reconcile run deleted, as it saves it for a rerun to report: this attempt's
    and what killed attempts of the run saved before (the source dropped more records
    since). Before, this attempt's overwrote theirs, which no report told again."""
    if earlier is None:
        return ReconcileDeletions(
            run_id, list(report.vanished), report.actions, report.errors, report.returned
        )
    return ReconcileDeletions(
        run_id,
        sorted({*earlier.vanished, *report.vanished}),
        earlier.actions + report.actions,
        earlier.errors + report.errors,
        sorted({*earlier.returned, *report.returned}),
    )


def _deleted_in_target(services: Services, harvester_id: str, identifiers: set[str]) -> set[str]:
    """Those of `identifiers` whose record any of the harvester's writers holds deleted."""
    if not identifiers:
        return set()
    keys = [SourceKey(identifier) for identifier in sorted(identifiers)]
    deleted: set[str] = set()
    for writer in build_writers(services.harvester(harvester_id), services.settings):
        try:
            found = writer.lookup(harvester_id, keys)
        finally:
            writer.close()
        deleted |= {key.identifier for key in keys if found[key.identifier].state in _DELETED}
    return deleted
