"""Stage 1, `raw_oai_xml`: list the source's records of a scope into the harvest-record store.

Every page is staged durably (with its checkpoint saved before it is handed over), so a stopped
or crashed run resumes where it stopped; the Parquet partition is written from the staged
rows at the end, which also covers pages staged before a crash.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from typing import Any

import sqlalchemy as sa

from oai_pipeline.errors import (
    InvalidArgument,
    NotFound,
    PipelineError,
    RecordError,
    add_notices,
    log_unsaved,
)
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.harvesters.plugins import build_reader
from oai_pipeline.oai.base_url import same_endpoint, shown
from oai_pipeline.oai.client import in_set
from oai_pipeline.oai.errors import (
    HarvestProtocolError,
    MalformedResponse,
    OAIError,
    OversizedResponse,
    PersistentProtocolError,
    SourceFailure,
)
from oai_pipeline.oai.reader import Reader
from oai_pipeline.oai.types import Granularity, HarvestedRecord, IdentifyInfo, SweepCheckpoint
from oai_pipeline.oai.windows import (
    INDEXING_OVERLAP,
    format_datestamp,
    parse_datestamp,
    read_datestamp,
    read_response_date,
)
from oai_pipeline.pipeline.collector import bulk_allocation
from oai_pipeline.pipeline.first_contact import saved_identify
from oai_pipeline.pipeline.frames import RAW_OAI_XML, RAW_SCHEMA, error_columns, frame
from oai_pipeline.pipeline.listed_dates import ListedDates
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.partition_summary import WindowCounts
from oai_pipeline.pipeline.partitions import run_updates_all
from oai_pipeline.pipeline.scope import HarvestScope
from oai_pipeline.pipeline.services import Services
from oai_pipeline.state.store import StateStore, superseded_because

logger = logging.getLogger(__name__)

PART_SIZE = 5000
# Answers to GetRecord of selected identifiers staged in one transaction, at most; and the
# longest a slow source's answers wait to be (lost with the process if it is killed).
ANSWERS_PER_COMMIT = 100
SECONDS_PER_COMMIT = 10.0
# Selected identifiers whose GetRecord the source refuses with an HTTP status, one after
# the other with no answer between, before the run takes it for the source refusing the
# harvest (a firewall, a backend down) and fails as a protocol failure (see _Refusals).
REFUSALS_IN_A_ROW = 5


@dataclass
class DiscoveryResult:
    run_id: int
    from_: str | None
    until: str | None
    counters: dict[str, int] = field(default_factory=dict)
    records: int = 0
    deleted: int = 0
    parse_errors: dict[str, int] = field(default_factory=dict)
    cap_reached: bool = False
    # quirks of the source the run met, in this attempt and earlier ones (Reader.notices)
    notices: list[str] = field(default_factory=list)
    # selected identifiers the source has no record of (idDoesNotExist) and never had: failed
    # records of the run, without a harvest record (see _answered_unknown)
    unknown: list[str] = field(default_factory=list)
    # records listed only because the source was asked for the whole days of a range that
    # starts or ends within a day (see HarvestScope.listed_for_whole_day), in this attempt
    outside_range: int = 0


@dataclass
class RunToFetch:
    """The harvest run discover fetches for, new or resumed, and what it resumes from."""

    run_id: int
    checkpoint: SweepCheckpoint | None
    from_: str | None
    until: str | None
    cap: int  # the run's own cap, kept across resumes; 0 = uncapped
    asked: HarvestScope  # the range the run was asked for, hours and all


def _run_for(
    services: Services,
    scope: HarvestScope,
    options: RunOptions,
    from_: str | None,
    until: str | None,
    dagster_run_id: str | None,
    progress: Callable[[str], None],
) -> RunToFetch:
    """The run to continue (same window, not succeeded; or the one asked for) or a new one.

    Runs of the harvester a killed process left `running` are failed first (under the
    lease: no live process works on them), and what becomes of them is said."""
    state = services.state
    harvester = services.harvester(scope.harvester_id)
    worker = services.harvester_lock.owner(scope.harvester_id)
    interrupted = state.settle_interrupted_runs(
        scope.harvester_id, services.harvester_lock.lease_of
    )
    run = None
    if options.resume_batch_id is not None:
        run = _run_to_resume(
            state, scope.harvester_id, options.resume_batch_id, retry_failed=options.retry_failed
        )
    elif not options.identifiers:
        run = state.find_resumable_run(scope.harvester_id, from_, until)
        if run is not None and _options_of(run).get("hours_asked") != scope.hours_asked:
            # the same days at a source listing by day, other hours: the pages it read left
            # out records this harvest asks for (or staged some it does not); it starts over
            run = None
    if run is not None:
        checkpoint = run.get("checkpoint")
        checkpoint = checkpoint if isinstance(checkpoint, SweepCheckpoint) else None
        changed = _changed_request(run, checkpoint, harvester)
        if changed is None and options.resume_batch_id is None:
            changed = _asked_otherwise(run, options)
        if changed is None:
            state.resume_run(run["id"], dagster_run_id, worker)
            _tell_interrupted(interrupted, run["id"], None, progress)
            return RunToFetch(
                run["id"],
                checkpoint,
                run["window_from"],
                run["window_until"],
                run["max_records"] or 0,
                scope.with_hours_asked(_options_of(run).get("hours_asked")),
            )
        if options.resume_batch_id is not None:
            raise PipelineError(
                f"harvest run {run['id']} cannot be resumed: {changed}. Harvest without "
                "--resume to start a new run."
            )
        # The operator changed the harvester (e.g. fixed the prefix after a configuration
        # error): the old run's token lists something else; a new run starts over.
        state.finish_run(run["id"], "stopped", error=f"superseded: {changed}")
        progress(
            f"harvest run {run['id']} of this window ({run['status']}) is not resumed: "
            f"{changed}; a new run starts"
        )
    run_id = state.create_run(
        scope.harvester_id,
        window_from=from_,
        window_until=until,
        scale=options.scale,
        max_records=options.cap,
        options=_run_options(options, scope, harvester.base_url),
        dagster_run_id=dagster_run_id,
        worker=worker,
    )
    # Only a sweep of the whole window lists all of its records again (not a capped run,
    # nor one of selected identifiers).
    lists_all = not options.identifiers and not options.cap
    superseded = [r for r in interrupted if lists_all and _covers(from_, until, r)]
    for old in superseded:
        state.finish_run(
            old["id"],
            "stopped",
            error=f"superseded by harvest run {run_id}, which lists its window again "
            "(it was interrupted: its process is gone)",
        )
    _tell_interrupted(interrupted, None, (run_id, {r["id"] for r in superseded}), progress)
    return RunToFetch(run_id, None, from_, until, options.cap, scope)


def _run_options(options: RunOptions, scope: HarvestScope, base_url: str) -> dict[str, Any]:
    """What a new run keeps of how it was asked for: its options, the hours of its range
    (`HarvestScope.hours_asked`), which its `from`/`until` by day do not hold, and the base
    URL it lists from: its resumption token and the sets it confirms are that endpoint's
    (`_base_url_changed`)."""
    kept = options.model_dump(mode="json")
    if scope.hours_asked:
        kept["hours_asked"] = scope.hours_asked
    kept["base_url"] = shown(base_url)  # its password, shown by `status`, as `***`
    return kept


def _options_of(run: dict[str, Any]) -> dict[str, Any]:
    return run.get("options") or {}


def _covers(from_: str | None, until: str | None, run: dict) -> bool:
    """Whether the window from_ .. until (None: open) holds all of the run's window."""
    return _bound(from_, run["window_from"], later=False) and _bound(
        until, run["window_until"], later=True
    )


def _bound(ours: str | None, theirs: str | None, *, later: bool) -> bool:
    """Whether our bound reaches as far as theirs (an upper one if `later`): compared as
    moments, since the two may be at different granularities."""
    if ours is None:
        return True
    if theirs is None:
        return False
    try:
        mine, other = parse_datestamp(ours), parse_datestamp(theirs)
    except ValueError:
        return False
    return mine >= other if later else mine <= other


def _tell_interrupted(
    interrupted: list[dict],
    resumed: int | None,
    new: tuple[int, set[int]] | None,
    progress: Callable[[str], None],
) -> None:
    """Say what becomes of each run a killed process left: resumed by this run, superseded
    by it (its window is within this one's), or failed and resumable."""
    for run in interrupted:
        what = (
            f"harvest run {run['id']} of {run['harvester_id']} (window "
            f"{run['window_from'] or '…'} .. {run['window_until'] or '…'}) was interrupted: "
            f"its process ({run['worker'].rsplit(':', 1)[0]}) is gone"
        )
        if run["id"] == resumed:
            progress(f"{what}; resuming it")
        elif new is not None and run["id"] in new[1]:
            progress(f"{what}; superseded by harvest run {new[0]}, which lists its window again")
        else:
            progress(
                f"{what}; marked failed: `oai-pipeline harvest {run['harvester_id']} "
                f"--resume {run['id']}` resumes it"
            )


def _asked_otherwise(run: dict[str, Any], options: RunOptions) -> str | None:
    """What this harvest asks for that the run to resume would not do: another cap, or
    `update_all` it was started without. Resumed, the run keeps its own (so that a cap holds
    across attempts): the harvest would silently do something else than asked, e.g. list
    millions of records for `--max-records 5` after an uncapped run was stopped."""
    own_cap = run["max_records"] or 0
    changes = []
    if options.cap_given and options.cap != own_cap:
        changes.append(
            f"it was started {_cap_text(own_cap)} and this harvest is {_cap_text(options.cap)}"
        )
    if options.update_all and not _options_of(run).get("update_all"):
        changes.append("it was started without update_all")
    return " and ".join(changes) or None


def _cap_text(cap: int) -> str:
    return f"capped at {cap} records" if cap else "uncapped"


def _changed_request(
    run: dict[str, Any], checkpoint: SweepCheckpoint | None, harvester: Harvester
) -> str | None:
    """What the harvester now asks the source for that the run's checkpoint did not, or
    where: the resumption token of a run of the old base URL is the old server's."""
    if checkpoint is None:
        return None
    asked = [
        ("metadata prefix", checkpoint.metadata_prefix, harvester.metadata_prefix),
        ("set", checkpoint.set_spec, harvester.setspec),
    ]
    if _base_url_changed(run, harvester):
        listed_from = shown(_options_of(run)["base_url"])
        asked.insert(0, ("base URL", listed_from, shown(harvester.base_url)))
    changes = [
        f"the {name} changed from {before!r} to {now!r}"
        for name, before, now in asked
        if before != now
    ]
    return " and ".join(changes) or None


def resumes_where_it_stopped(run: dict[str, Any], harvester: Harvester) -> bool:
    """Whether a harvest would resume this unfinished run from its saved resumption token
    (a run that saved none has listed nothing; one asking another endpoint, prefix or set
    is superseded instead)."""
    checkpoint = run.get("checkpoint")
    if not isinstance(checkpoint, SweepCheckpoint):
        return False
    return _changed_request(run, checkpoint, harvester) is None


def _base_url_changed(run: dict[str, Any], harvester: Harvester) -> bool:
    """Whether the run listed from another base URL than the harvester's now (the source
    moved). A run an older version made does not say: taken as listed from this one."""
    listed_from = _options_of(run).get("base_url")
    return listed_from is not None and not same_endpoint(listed_from, harvester.base_url)


def discover(
    services: Services,
    scope: HarvestScope,
    options: RunOptions,
    *,
    dagster_run_id: str | None = None,
    progress: Callable[[str], None] = logger.info,
) -> DiscoveryResult:
    state = services.state
    harvester = services.harvester(scope.harvester_id)
    if options.resume_batch_id is not None:  # a typo is told before the source is asked
        _run_to_resume(
            state, scope.harvester_id, options.resume_batch_id, retry_failed=options.retry_failed
        )
    reader = build_reader(harvester)
    try:
        if options.rate_limit_per_minute and hasattr(reader, "set_rate_limit"):
            reader.set_rate_limit(options.rate_limit_per_minute)
        # One run at a time writes for a harvester; the run to resume is chosen under the
        # lease, so two attempts never continue the same harvest run. Inside it (always in
        # this order, no two runs wait for each other), one harvest at a time lists from
        # the source's server: harvesters of one server take turns.
        with (
            services.harvester_lock.hold(harvester.id),
            services.harvester_lock.hold_source(harvester.base_url),
        ):
            state.refuse_while_rekey_pending(harvester.id, "harvest")
            unidentified: PipelineError | None = None
            try:
                granularity = _identify(reader, services, harvester).granularity
            except (HarvestProtocolError, OAIError) as error:
                # Never identified (a first harvest) and the source cannot say what it is.
                # Listed by days (every source takes those) when it answers at all; else the
                # failure is still a run's, its window in days, so that `status` tells why.
                if not _answers_but_not_identify(error):
                    from_, until = scope.oai_range("day")
                    run = _run_for(services, scope, options, from_, until, dagster_run_id, progress)
                    services.record_failure(run.run_id, error)
                    raise
                granularity, unidentified = "day", error
            from_, until = scope.oai_range(granularity)
            run = _run_for(services, scope, options, from_, until, dagster_run_id, progress)
            run_id = run.run_id
            result = DiscoveryResult(run_id=run_id, from_=run.from_, until=run.until)
            if unidentified is not None:
                result.notices.append(_unidentified_notice(unidentified))
            try:
                options = _with_identifiers_left(state, run_id, options)
                if _set_listed_before(state, harvester, run):
                    reader.know_set(harvester.setspec or "")
                _fetch(services, scope, options, reader, run, result, progress, granularity)
                _tell_whole_days(run.asked, granularity, run, result)
                # the run's notices: this attempt's and those an earlier one of it met (a
                # full disk refusing them fails the run, as one refusing a page does)
                result.notices = state.add_run_notices(run_id, [*reader.notices, *result.notices])
            except BaseException as error:
                # what the source did before the run failed is kept for its status (the
                # failure may be its doing), as is the failure itself: the reader's quirks
                # and the run's own notices (a record deleted as at the source), as a
                # successful run keeps them
                notices = [*reader.notices, *result.notices]
                _save_on_failure(run_id, "notices", lambda: state.add_run_notices(run_id, notices))
                services.record_failure(run_id, error)
                add_notices(error, notices)
                raise
    finally:
        reader.close()
    try:
        result.counters = state.reconcile_counters(run_id)
        state.refresh_run_statistics()  # the write searches this run's records by chunk
        result.cap_reached = bool(result.counters.get("cap_reached"))
        _export(services, scope, run_id, result)
    except BaseException as error:
        # as a failed sweep: a run whose staged records could not be exported (a full
        # disk, Ctrl-C) ends failed or stopped, not `running` after its process ended
        services.record_failure(run_id, error)
        raise
    return result


def _set_listed_before(state: StateStore, harvester: Harvester, run: RunToFetch) -> bool:
    """Whether a dated list of the harvester's set (an incremental harvest) follows a
    succeeded run whose list confirmed that set (its pages held records, or ListSets listed
    it): an empty list of it is a quiet day, not a mistyped set to check (one ListSets
    request per harvest that finds nothing). A run that only succeeded (its ListSets failed,
    or an older version made no check) confirms nothing: the next empty list is checked."""
    if not harvester.setspec or not (run.from_ or run.until):
        return False
    last = state.last_success(harvester.id)
    checkpoint = (last or {}).get("checkpoint")
    return (
        isinstance(checkpoint, SweepCheckpoint)
        and not _base_url_changed(last or {}, harvester)  # the old endpoint's set, maybe
        and checkpoint.set_spec == harvester.setspec
        and checkpoint.set_confirmed
    )


def _tell_whole_days(
    scope: HarvestScope, granularity: Granularity, run: RunToFetch, result: DiscoveryResult
) -> None:
    """Say that a range with hours was listed by whole days, and how many records listed
    outside it were left out: a user asking for two hours of a day-granular source otherwise
    wonders why the whole day was asked for, or why fewer records came than it listed."""
    if not scope.within_days or not (granularity == "day" or result.outside_range):
        return
    asked = " .. ".join(
        format_datestamp(moment, "seconds") if moment is not None else "…"
        for moment in (scope.start, scope.end)
    )
    days = " .. ".join(_day_of(bound) for bound in (run.from_, run.until))
    left_out = (
        "1 record dated outside the hours asked was"
        if result.outside_range == 1
        else f"{result.outside_range} records dated outside the hours asked were"
    )
    result.notices.append(
        f"the source lists by day: {asked} (until exclusive) was asked for as the whole days "
        f"{days}; {left_out} left out (not harvested, not counted against the cap), "
        "records dated by day only are harvested"
    )


def _day_of(bound: str | None) -> str:
    """An OAI bound as the day it falls on ('…' for none): a source refusing seconds is
    asked for that day (see OAIClient._dates_as)."""
    moment = read_datestamp(bound) if bound else None
    return format_datestamp(moment, "day") if moment is not None else "…"


def _with_identifiers_left(state: StateStore, run_id: int, options: RunOptions) -> RunOptions:
    """A resumed run of selected identifiers asks for those it has not staged yet. Before,
    `--resume` of one (it failed or was stopped mid-list) swept the whole source into it.
    With `retry_failed`, also for its failed ones (a GetRecord the source refused, an
    HTTPError, is retried only by a new answer), not for every identifier of the run."""
    run = state.get_run(run_id)
    asked = (run or {}).get("options", {}).get("identifiers") or []
    if options.identifiers or not asked:
        return options
    staged = state.record_statuses(run_id, asked)
    left = [
        identifier
        for identifier in asked
        if identifier not in staged or (options.retry_failed and staged[identifier] == "failed")
    ]
    # none left: every identifier is asked for again, the catch-up a resumed window run makes
    # with its list of the changes since its first attempt (a record dropped or changed
    # since it was staged is written as the source has it now, not as staged)
    return options.model_copy(update={"identifiers": left or asked})


def _save_on_failure(run_id: int, what: str, save: Callable[[], object]) -> None:
    """Save what a failing run had (its notices, its answers); a failure to save it is
    logged, and the run's own failure is what is raised. The state database refusing (its
    server gone: often the run's failure itself) is one line, as `Services.record_failure`
    says it: the CLI prints a logged traceback, which buried the run's one-line error under
    the database's."""
    try:
        save()
    except sa.exc.DBAPIError as error:
        log_unsaved(logger, f"save the {what} of harvest run {run_id}", error)
    except Exception:  # noqa: BLE001 - the run's failure matters more
        logger.warning("the %s of harvest run %s could not be saved", what, run_id, exc_info=True)


def _run_to_resume(
    state: StateStore, harvester_id: str, run_id: int, *, retry_failed: bool
) -> dict[str, Any]:
    """The run `--resume` names. A superseded one is refused: its resumption token is of what
    replaced it (the old server, prefix or identifiers), and resumed, its error (what says
    it was superseded) was gone, a later failure leaving it resumable again. A succeeded one
    too, unless asked to retry its failed records (`retry_failed`), all it has left to do:
    before, it was reopened and its window listed again under its number."""
    run = state.get_run(run_id)
    if run is None or run["harvester_id"] != harvester_id:
        raise NotFound(f"no harvest run {run_id} for harvester {harvester_id!r}")
    if run["status"] == "succeeded" and not retry_failed:
        raise InvalidArgument(
            f"harvest run {run_id} cannot be resumed: it succeeded. Harvest without --resume "
            "to harvest its window again (--retry-failed retries the records it failed)"
        )
    why = superseded_because(run)
    if why is not None:
        raise InvalidArgument(
            f"harvest run {run_id} cannot be resumed: it was {why}. Harvest without "
            "--resume to start a new run"
        )
    return run


def _identify(reader: Reader, services: Services, harvester: Harvester) -> IdentifyInfo:
    """The source's Identify, saved; if it cannot be had (the source down, a broken
    Identify, an OAI-PMH error in its place), the one saved last time, so that the harvest
    runs on and a failure is that run's (its status shows it; before, no run saw it).
    Never identified, the source's base URL is untried: a web page there is told at once
    (Reader.first_contact), not retried as a maintenance page."""
    saved = saved_identify(reader, services.state, harvester.id)
    try:
        if saved is None:
            identify = _first_identify(reader, services.state, harvester)
        else:
            # Asked once when the saved one stands by: the list's own retries wait out a
            # source down, and a broken Identify was waited out at every harvest.
            identify = reader.identify_once()
    except (HarvestProtocolError, OAIError) as error:
        if saved is None:
            raise
        logger.warning("%s; harvesting with the Identify saved before", error)
        return saved
    services.state.save_identify(harvester.id, identify)
    return identify


def _first_identify(reader: Reader, state: StateStore, harvester: Harvester) -> IdentifyInfo:
    """Identify of a source never identified, waited out through the client's retries,
    unless the harvester's last run found it broken with the source answering (and so
    listed by days, `_unidentified_notice`): then asked once, and failing so again, the
    list goes on by days at once, where every harvest of it waited a minute for an answer
    that did not come. With no answer at all, it is waited out as before."""
    last = state.latest_run(harvester.id)
    if (
        last is None
        or _base_url_changed(last, harvester)
        or not any(notice.startswith(_UNIDENTIFIED) for notice in last.get("notices") or ())
    ):
        return reader.identify()
    try:
        return reader.identify_once()
    except (HarvestProtocolError, OAIError) as error:
        if _answers_but_not_identify(error) or isinstance(error, PersistentProtocolError):
            raise
    return reader.identify()


def _answers_but_not_identify(error: HarvestProtocolError | OAIError) -> bool:
    """Whether a never-identified source's failed Identify still came from a server that
    answers (an OAI-PMH error, of the protocol's or its own, a page that does not parse, an
    HTTP error status after the retries): some keep a broken Identify (a 500 from the query
    of its earliest datestamp) beside lists that work, and the harvest needs of it only the
    granularity, for which whole days, which every source takes, stand in. Not a wrong
    address (UnprovenEndpoint: a web page, a 404, an unknown host), an answer the same at
    every try (XML of another kind or protocol version) nor no answer at all (a host down,
    TLS refused): asking for the list would only meet it again."""
    if isinstance(error, OAIError | SourceFailure):
        return True
    if isinstance(error, PersistentProtocolError):
        return False
    return isinstance(error, MalformedResponse) or error.status is not None


_UNIDENTIFIED = "the source's Identify failed"  # how `_unidentified_notice` begins


def _unidentified_notice(error: PipelineError) -> str:
    return (
        f"{_UNIDENTIFIED} ({error}): listed by whole days, which every source "
        "takes; its deletion policy stays unknown, so no reconcile is scheduled for it "
        "until it answers Identify (asked again at each harvest)"
    )


# The sweep and the export stage thousands of records as the other stages do: the collector's
# full collections of the process's heap (a Dagster run's holds its definitions and events;
# 0.5-2 s each on a busy 2 vCPU machine, one or two per discovery) found little.
@bulk_allocation()
def _fetch(
    services: Services,
    scope: HarvestScope,
    options: RunOptions,
    reader,
    run: RunToFetch,
    result: DiscoveryResult,
    progress: Callable[[str], None],
    granularity: Granularity,
) -> None:
    state = services.state
    run_id = run.run_id
    # When an earlier attempt of this run began listing: a resumed run lists again what the
    # source changed since (see _catch_up_from).
    first_listed_at = (state.get_run(run_id) or {}).get("response_date")
    # Resuming: trust the durable rows, not a counter that may predate a crash; the cap is
    # the run's own, whatever this attempt was started with.
    counters = state.reconcile_counters(run_id)
    staged = int(counters.get("staged", 0))
    cap = run.cap
    # A source that lists by day (its granularity, or one refusing seconds) lists the whole
    # days of `--since`/`--until` with hours: those it lists outside them are left out.
    asked_within_days = run.asked.within_days and not options.identifiers
    catch_up = None if options.identifiers else _catch_up_from(run, first_listed_at, granularity)
    cap_reached = bool(cap) and staged >= cap
    if cap_reached:
        state.set_cap_reached(run_id)
        if catch_up is None:
            return
    next_progress = (staged // options.progress_every + 1) * options.progress_every
    rewrite = options.update_all or run_updates_all(
        state.get_run(run_id), services.harvester(scope.harvester_id)
    )

    def stage(
        records: list[HarvestedRecord],
        listed_at: str | None = None,
        discovered: int = 0,
        catching_up: bool = False,
        catch_up_begins: bool = False,
    ) -> bool:
        """Stage one page (`listed_at`: its responseDate; `discovered`: how many the source
        answered, if more than `records`; `catching_up`: a page of the catch-up list, counted
        apart, `catch_up_begins` its first); True when the cap is reached."""
        nonlocal staged, next_progress
        discovered = max(discovered, len(records))
        if asked_within_days:
            asked = [r for r in records if not run.asked.listed_for_whole_day(r.datestamp)]
            result.outside_range += len(records) - len(asked)
            records = asked
        existing = 0
        if cap and not options.include_existing and records:
            records, existing = _drop_existing(
                services, run_id, scope.harvester_id, records, options.retry_failed
            )
        page = state.stage(
            run_id,
            scope.harvester_id,
            records,
            rewrite=rewrite,
            listed_at=listed_at,
            room=cap - staged if cap else None,
            # Records the token sweep counted already, or changed since: counted apart (with
            # the page, in its transaction), so that `discovered` stays what the source has
            # and the second list is told.
            catch_up_listed=discovered if catching_up else None,
            catch_up_begins=catch_up_begins,
        )
        staged += page.new
        if not catching_up:
            state.update_counters(
                run_id,
                pages_read=1,
                discovered=discovered,
                duplicates_skipped=page.duplicates,
                existing_skipped=existing,
            )
        if staged >= next_progress:
            progress(f"harvest run {run_id}: {staged} records staged")
            next_progress = (staged // options.progress_every + 1) * options.progress_every
        if cap and staged >= cap:
            state.set_cap_reached(run_id)
            return True
        return False

    if options.identifiers:
        _stage_answers_of(services, scope, options, reader, run_id, result, stage)
        return

    def save_checkpoint(new_checkpoint: SweepCheckpoint) -> None:
        state.save_checkpoint(run_id, new_checkpoint)

    response_date_saved = False
    # A source whose responseDate is no date, or one to come: the next incremental harvest
    # starts at our clock before the first request instead (see _listing_start).
    asked_at = datetime.now(UTC)
    # A capped run that reached its cap in an earlier attempt has no room to sweep on for.
    sweep = (
        ()
        if cap_reached
        else reader.sweep(
            from_=run.from_,
            until=run.until,
            checkpoint=run.checkpoint,
            save_checkpoint=save_checkpoint,
        )
    )
    listed_dates = ListedDates.asked_for(run.from_, run.until)
    try:
        for page in sweep:
            listed_dates.look_at(page.records)
            if not response_date_saved:
                # Also for a sweep of one page or noRecordsMatch, the usual incremental harvest.
                state.save_response_date(
                    run_id, _listing_start(page.response_date, asked_at, result)
                )
                response_date_saved = True
            if stage(page.records, page.response_date):
                break
        if catch_up is not None:
            # Not checkpointed: killed during it, the next attempt resumes the token sweep's
            # checkpoint and lists the changes again (staging a copy twice replaces nothing).
            # Also once the cap is reached: the newer copies of the run's own records use no
            # room (StateStore.stage), so a capped run writes them, not its pre-crash copies.
            progress(
                f"run {run_id} began listing at {first_listed_at}: listing again what the source "
                f"changed since {catch_up}"
            )
            pages = reader.sweep(
                from_=catch_up, until=run.until, checkpoint=None, save_checkpoint=lambda _: None
            )
            for number, page in enumerate(pages):
                listed_dates.look_at(page.records)
                stage(
                    page.records, page.response_date, catching_up=True, catch_up_begins=not number
                )
    finally:  # also of a run that fails: its status tells what the source did
        if (notice := listed_dates.notice()) is not None:
            result.notices.append(notice)


# How far ahead of our clock a responseDate may be before it is told as the source's clock
# running ahead (less is a skew the indexing overlap covers, replaced without a word).
_CLOCK_AHEAD_TOLD = timedelta(minutes=1)


def _listing_start(response_date: str, asked_at: datetime, result: DiscoveryResult) -> str:
    """Where the next incremental harvest starts: the first page's responseDate, by the
    source's clock as its datestamps are. One that is no date, or a moment that has not
    come yet (a clock set ahead, local time written with `Z`), is replaced by our clock
    before the first request: kept, the next harvest started after changes it never
    listed (the windows between the real moment and that one were skipped)."""
    answered = read_response_date(response_date)
    now = datetime.now(UTC)
    if answered is not None and answered <= now:
        return response_date
    if answered is not None and answered - now > _CLOCK_AHEAD_TOLD:
        result.notices.append(
            f"the source's responseDate {response_date} is ahead of this machine's clock "
            f"({format_datestamp(now, 'seconds')}): the next incremental harvest starts from "
            "this machine's clock instead (check the source's clock or time zone)"
        )
    return format_datestamp(asked_at, "seconds")


def _catch_up_from(
    run: RunToFetch, first_listed_at: str | None, granularity: Granularity
) -> str | None:
    """The `from` of the list a resumed run makes after its token sweep, or None (a new run,
    or a window that ended before the run began listing).

    The source may have changed, hours or days ago, records an earlier attempt of the run
    staged (or wrote) before it was killed: updated, deleted, added before the saved token.
    The token sweep goes on past them, so without this list the rerun wrote their old copies
    and left out records added before the token, where a harvest of the source as it is now
    has the new ones; only the next incremental harvest caught up."""
    if run.checkpoint is None or not first_listed_at:
        return None
    moment = read_datestamp(first_listed_at)
    if moment is None:
        return None
    moment -= INDEXING_OVERLAP  # sources index late
    start = read_datestamp(run.from_) if run.from_ else None
    if start is not None and start > moment:
        moment = start
    if run.until:
        end = read_datestamp(run.until)
        if end is not None and len(run.until.strip()) == len("YYYY-MM-DD"):
            end += timedelta(days=1)  # a day's `until` holds the whole day
            if moment >= end:
                return None
        elif end is not None and moment > end:
            return None
    return format_datestamp(moment, granularity)


def _stage_answers_of(
    services: Services,
    scope: HarvestScope,
    options: RunOptions,
    reader: Reader,
    run_id: int,
    result: DiscoveryResult,
    stage: Callable[..., bool],
) -> None:
    """GetRecord each selected identifier and stage the answers, ANSWERS_PER_COMMIT at a
    time or every SECONDS_PER_COMMIT of a slow source, and those answered before a failure
    (retries run out, Ctrl-C) when it comes: `--resume` then asks from the identifier that
    failed on. Before, up to 100 answers were lost with the failure and asked for again.
    (A commit per answer, ten statements, took 5 times the rest of a GetRecord's work.)"""
    state = services.state
    set_spec = services.harvester(scope.harvester_id).setspec
    outside: list[str] = []  # staged answers outside the harvester's set

    def stage_answers(answers: list[HarvestedRecord]) -> bool:
        """Stage the answers; True when the cap is reached."""
        settled = _answered_unknown(state, scope.harvester_id, run_id, answers, result)
        capped = stage(settled, discovered=len(answers))
        outside.extend(r.identifier for r in settled if _outside_set(r, set_spec))
        return capped

    answered: list[HarvestedRecord] = []
    first_answer_at = 0.0
    refusals = _Refusals(scope.harvester_id, reader.answers_now)
    try:
        for identifier in options.identifiers:
            # One at a time (Reader.get_record): a refusal is that identifier's.
            try:
                record = reader.get_record(identifier)
            except HarvestProtocolError as error:
                if options.reconcile:
                    # A reconcile's harvest of records listed again: failed, they stay marked
                    # gone and the next reconcile tries again; a record's error would unmark
                    # them, leaving them deleted in the target until `--failed`.
                    raise
                # raises it again unless an HTTP refusal of this record (see _Refusals)
                answered.extend(refusals.add(identifier, error))
                continue
            if record is None:
                continue
            if not answered:
                first_answer_at = time.monotonic()
            answered.extend(refusals.settled())
            answered.append(record)
            if (
                len(answered) >= ANSWERS_PER_COMMIT
                or time.monotonic() - first_answer_at >= SECONDS_PER_COMMIT
            ):
                batch, answered = answered, []
                if stage_answers(batch):
                    return
    except BaseException:
        if answered:
            _save_on_failure(run_id, "answers", lambda: stage_answers(answered))
        raise
    else:
        answered.extend(refusals.at_end())
        if answered:
            stage_answers(answered)
    finally:
        if outside:
            result.notices.append(_outside_set_notice(set_spec, outside))


class _Refusals:
    """GetRecord refusals with an HTTP status (401, 403, 404, 410, ...; a 5xx that outlasted
    the client's retries) or an answer that is no whole OAI-PMH document at any of the
    client's tries (cut short, not well-formed, an error page: a record the source fails to
    render) or over the reader's size bound, judged by what the source does around them.

    Rule: a refusal is that record's error (HTTPError, or the answer's `_UNREADABLE_ANSWERS`
    kind; the harvest goes on) once the source
    answers another identifier of this attempt, before or after it. REFUSALS_IN_A_ROW of them
    without an answer between, or only refusals to the end, ask the source for a fresh
    Identify (`Reader.answers_now`): answered, the source refuses those records (embargoed,
    withdrawn: a stretch of them, or `--failed` asking for such records again) and they are
    records' errors; refused too, the source refuses the harvest (a firewall, a backend
    down): the run fails as a protocol failure (transient, not stored on N records), and
    `--resume` asks from the first of them. No HTTP answer at all (connection refused,
    timeout) always fails the run, and so does a base URL that never answered OAI-PMH, at
    once (UnprovenEndpoint), and a 429 (the harvest asked too fast, not one record). A list's
    page that cannot be read fails its run (which records it held is unknown); a GetRecord
    answer is one record's, as a listed copy that does not parse is (MalformedRecord)."""

    def __init__(self, harvester_id: str, answers_now: Callable[[], bool]) -> None:
        self.harvester_id = harvester_id
        self.answers_now = answers_now
        self.answered = False  # whether the source answered a GetRecord of this attempt
        self.pending: list[tuple[str, HarvestProtocolError]] = []

    def add(self, identifier: str, error: HarvestProtocolError) -> list[HarvestedRecord]:
        """Hold a refusal until the source's next answer (the records' errors settled now,
        if any); fail on one that is not the record's (`_of_the_record`), or when
        REFUSALS_IN_A_ROW of them come and the source refuses Identify too."""
        if not _of_the_record(error):
            raise error
        self.pending.append((identifier, error))
        if len(self.pending) < REFUSALS_IN_A_ROW:
            return []
        if not self.answers_now():
            raise self._failure("in a row, with no answer between")
        return self._settle()

    def settled(self) -> list[HarvestedRecord]:
        """The source answered: the refusals held are their records' errors."""
        self.answered = True
        return self._settle()

    def at_end(self) -> list[HarvestedRecord]:
        """The last refusals: records' errors if the source answered another identifier of
        this attempt, or answers Identify now; else the run fails."""
        if not self.pending:
            return []
        if not self.answered and not self.answers_now():
            if len(self.pending) == 1:
                raise self.pending[0][1]
            raise self._failure("and answered none of this attempt's")
        return self._settle()

    def _settle(self) -> list[HarvestedRecord]:
        errors = [
            _refused_record(self.harvester_id, identifier, error)
            for identifier, error in self.pending
        ]
        self.pending.clear()
        return errors

    def _failure(self, how: str) -> HarvestProtocolError:
        first, error = self.pending[0]
        count = len(self.pending)
        failure = HarvestProtocolError(
            f"{error}; the source refused GetRecord of {count} identifiers {how} ({first} "
            f"to {self.pending[-1][0]}), and Identify too: taken as refusing the harvest, not "
            "single records"
        )
        failure.__cause__ = self.pending[-1][1]
        return failure


# Statuses that say "too many requests" or "too slow", of the harvest, not of one record.
_NOT_ITEM_STATUSES = frozenset({408, 425, 429})


# A GetRecord answer that is no whole OAI-PMH document, or is over the size bound, by the
# record error it becomes (see _Refusals): the record's answer, as a listed copy's is.
_UNREADABLE_ANSWERS: dict[type[HarvestProtocolError], str] = {
    OversizedResponse: "OversizedResponse",
    MalformedResponse: "MalformedResponse",  # NotOAIResponse too
}


def _unreadable_kind(error: HarvestProtocolError) -> str | None:
    return next((k for t, k in _UNREADABLE_ANSWERS.items() if isinstance(error, t)), None)


def _of_the_record(error: HarvestProtocolError) -> bool:
    """Whether a failed GetRecord may be its record's (see _Refusals): an HTTP refusal, an
    unreadable answer or one over the size bound; not no answer at all, nor a base URL that
    never answered OAI-PMH, nor a source asking the harvest to slow down."""
    if _unreadable_kind(error) is not None:
        return True
    status = error.status
    return (
        not isinstance(error, PersistentProtocolError)
        and status is not None
        and status >= 400
        and status not in _NOT_ITEM_STATUSES
    )


def _refused_record(
    harvester_id: str, identifier: str, error: HarvestProtocolError
) -> HarvestedRecord:
    """A GetRecord refused while the source answered other requests: that record's error."""
    fix = f"`oai-pipeline harvest {harvester_id} --failed` asks for it again"
    kind = _unreadable_kind(error)
    if kind is not None:
        message = (
            f"GetRecord of {identifier}: {error.detail or error}; the source answered other "
            f"requests of the run, so this is the record's answer, not the harvest's: {fix}"
        )
    else:
        status = error.status or 0
        try:
            named = f"HTTP {status} {HTTPStatus(status).phrase}"
        except ValueError:  # a status of the source's own
            named = f"HTTP {status}"
        detail = f": {error.detail}" if error.detail else ""
        kind = "HTTPError"
        message = (
            f"{named} for GetRecord of {identifier}{detail}; the source answered other "
            f"requests of the run, so the record is refused, not the harvest: {fix}"
        )
    return HarvestedRecord(
        identifier=identifier,
        datestamp="",
        deleted=False,
        error=RecordError(type=kind, message=message, location=identifier),
    )


def _outside_set(record: HarvestedRecord, set_spec: str | None) -> bool:
    """Whether a live GetRecord answer is outside the harvester's set. A header without any
    setSpec says nothing of its sets: not judged."""
    return not record.deleted and bool(record.set_specs) and not in_set(record.set_specs, set_spec)


def _outside_set_notice(set_spec: str | None, identifiers: list[str]) -> str:
    """The run's one line for the records it fetched by identifier outside the harvester's
    set: harvested as asked, while a reconcile (which lists the set) deletes them again."""
    count = len(identifiers)
    them = "them" if count > 1 else "it"
    return (
        f"{count} record{'s' if count > 1 else ''} fetched by identifier "
        f"{'are' if count > 1 else 'is'} outside the harvester's set {set_spec!r} (e.g. "
        f"{identifiers[0]}): harvested, but the next reconcile of the set deletes {them} "
        "(the target mirrors the set)"
    )


def _answered_unknown(
    state: StateStore,
    harvester_id: str,
    run_id: int,
    records: list[HarvestedRecord],
    result: DiscoveryResult,
) -> list[HarvestedRecord]:
    """The records of GetRecord answers to stage, after settling those the source answered
    `idDoesNotExist` (it has no such record):

    - one it listed before (a harvest record with a datestamp) was deleted at the source
      without a deleted header (hard deleted, or a source that keeps no deletions): it is
      staged as deleted, as a reconcile treats a record that vanished from the full list;
      the target record is deleted (a tombstone; harvested again, it is restored). Before,
      the harvest record lost its datestamp and stayed live, and so did the target record.
      Staged gone (`vanished`): listed again, the next reconcile harvests it again.
    - one it never had (a typo) is a failed record of the run with no harvest record, so
      that it is counted nowhere as live (`status`, `records list --live`, reconcile)."""
    unknown = [r for r in records if r.error is not None and r.error.type == "idDoesNotExist"]
    if not unknown:
        return records
    listed = state.listed_copies(harvester_id, [r.identifier for r in unknown])
    # A record written to the target whose datestamp an error answer wiped (GetRecord's
    # cannotDisseminateFormat, staged before such answers kept the copy last harvested) was
    # listed too: the datestamp it was written with stands.
    wiped = [r.identifier for r in unknown if not listed.get(r.identifier, ("", False))[0]]
    written = state.get_memories(harvester_id, wiped) if wiped else {}
    deleted: dict[str, HarvestedRecord] = {}
    never: dict[str, HarvestedRecord] = {}
    for record in unknown:
        datestamp, was_deleted = listed.get(record.identifier, ("", False))
        if not datestamp and (memory := written.get(record.identifier)) is not None:
            datestamp = memory.datestamp or ""
        if datestamp:
            deleted[record.identifier] = HarvestedRecord(
                identifier=record.identifier, datestamp=datestamp, deleted=True, vanished=True
            )
            if not was_deleted:  # (a deleted one's tombstone may go: deletedRecord transient)
                result.notices.append(
                    f"{record.identifier}: the source no longer has this record (idDoesNotExist) "
                    "and sent no deleted header; deleted as at the source"
                )
        else:
            never[record.identifier] = record
    if never:
        errors = {i: r.error for i, r in never.items() if r.error is not None}
        result.unknown.extend(state.fail_unknown(run_id, harvester_id, errors))
    return [deleted.get(r.identifier, r) for r in records if r.identifier not in never]


def _drop_existing(
    services: Services,
    run_id: int,
    harvester_id: str,
    records: list[HarvestedRecord],
    retry_failed: bool,
) -> tuple[list[HarvestedRecord], int]:
    """In a capped run, records already written with the same datestamp and status don't
    use the cap: live ones that have their local record, deleted ones (which may never have
    had one), and failed ones unless asked to retry them. The next capped run gets further
    instead of listing them again. (The same datestamp with the other status is the
    source's later word: kept.)

    The run's own records (a resumed run listing a page again, or its catch-up list) use no
    room either: staging counts them as the run's duplicates, or takes a copy the source
    changed the same day. Before, those an earlier attempt wrote counted as existing."""
    identifiers = [r.identifier for r in records]
    memories = services.state.get_memories(harvester_id, identifiers)
    own = services.state.in_run(run_id, [i for i in identifiers if i in memories])
    kept = []
    for record in records:
        memory = None if record.identifier in own else memories.get(record.identifier)
        if memory is not None and memory.deleted in (None, record.deleted):
            # A failed record's write left no datestamp written: the one listed last counts.
            if memory.had_errors and memory.listed_datestamp == record.datestamp:
                if not retry_failed:
                    continue
            elif (
                not memory.had_errors
                and memory.datestamp == record.datestamp
                and (memory.local_id or record.deleted)
            ):
                continue
        kept.append(record)
    return kept, len(records) - len(kept)


@bulk_allocation()
def _export(services: Services, scope: HarvestScope, run_id: int, result: DiscoveryResult) -> None:
    """Write the run's staged records as the raw_oai_xml partitions, in bounded parts."""
    storage = services.storage
    manifest = {"run_id": run_id, "from": result.from_, "until": result.until}
    for key in scope.keys:
        storage.begin(RAW_OAI_XML, scope.harvester_id, key)
    # Window by window (the source lists records in no datestamp order): a window's
    # records make one part per PART_SIZE, not one part per PART_SIZE of the whole run.
    position = {key: index for index, key in enumerate(scope.keys)}
    buffer: list[dict] = []
    window: str | None = None
    parts: dict[str, int] = defaultdict(int)
    counts = WindowCounts()

    def flush() -> None:
        if window is not None and buffer:
            part = frame(buffer, RAW_SCHEMA)
            storage.write_part(RAW_OAI_XML, scope.harvester_id, window, parts[window], part)
            counts.add_part(window, part)
            parts[window] += 1
        buffer.clear()

    staged = services.state.iter_staged(
        run_id,
        batch_size=PART_SIZE,
        group_of=lambda datestamp: position[scope.window_key_for(datestamp)],
        # A resumed or re-executed old run: records the source moved out of its windows
        # since, harvested again by a later run, are that run's windows' now.
        moved_out=lambda datestamp: not scope.holds(datestamp),
    )
    for record in staged:
        key = scope.window_key_for(record.datestamp)
        if key != window or len(buffer) >= PART_SIZE:
            flush()
            window = key
        buffer.append(
            {
                "identifier": record.identifier,
                "datestamp": record.datestamp,
                "deleted": record.deleted,
                "set_specs": record.set_specs,
                "xml": record.xml,
                **error_columns(record.error),
            }
        )
        result.records += 1
        result.deleted += int(record.deleted)
        if record.error is not None:
            result.parse_errors[record.error.type] = (
                result.parse_errors.get(record.error.type, 0) + 1
            )
    flush()
    for key in scope.keys:
        storage.finish(
            RAW_OAI_XML,
            scope.harvester_id,
            key,
            parts[key],
            counts.manifest(key, manifest),
            empty=RAW_SCHEMA.to_frame(),
        )
