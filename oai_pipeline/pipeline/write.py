"""Stage 4, `written_records`: apply the plan through the harvester's writers, in batches.

Per-record failures become outcomes stored on the harvest record; the run goes on.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from oai_pipeline import json_codec
from oai_pipeline.errors import PipelineError, RecordError, log_unsaved
from oai_pipeline.harvesters.plugins import (
    build_writers,
    transform_fingerprint,
    written_fingerprint,
)
from oai_pipeline.pipeline.frames import (
    SYNC_DECISIONS,
    TRANSFORMED_RECORDS,
    WRITTEN_RECORDS,
    WRITTEN_SCHEMA,
    error_columns,
    error_from_row,
    frame,
)
from oai_pipeline.pipeline.groups import PartRef, map_partition_groups, read_group
from oai_pipeline.pipeline.local_changes import undo_local_changes
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.partitions import planned_run_id
from oai_pipeline.pipeline.reidentified import take_over_freed_pids
from oai_pipeline.pipeline.retention import prune
from oai_pipeline.pipeline.scope import HarvestScope
from oai_pipeline.pipeline.services import Services
from oai_pipeline.pipeline.transform_stage import no_data_error
from oai_pipeline.state.schema import RUN_RECORD_ACTION_LENGTH
from oai_pipeline.state.store import (
    TakeOverRun,
    WriterKey,
    is_later_copy,
    writer_keys,
)
from oai_pipeline.sync.rules import Action
from oai_pipeline.targets.base import PlannedWrite, WriteOutcome, Writer

logger = logging.getLogger(__name__)

# Per-record run status of each outcome (DESIGN.md: harvest runs).
RUN_STATUS = {
    Action.CREATE: "imported",
    Action.UPDATE: "updated",
    Action.PUBLISH_DRAFT: "updated",
    Action.RESTORE: "updated",
    Action.REVIVE: "updated",
    Action.SKIP: "unchanged",
    Action.NOTHING: "unchanged",
    Action.DELETE: "gone",
    Action.DELETE_DRAFT: "gone",
    Action.ERROR: "failed",
}


# A resumed run's records an earlier attempt settled, by what it did: written (not written
# again), failed (retried with --retry-failed only) or still held by another attempt.
ALREADY_WRITTEN = "already_written"
FAILED_BEFORE = "failed_before"
HELD_ELSEWHERE = "held_by_another_attempt"
_EARLIER = {"failed": FAILED_BEFORE, "running": HELD_ELSEWHERE, "pending": HELD_ELSEWHERE}
# What an earlier attempt did to a record it wrote before version 21 kept the action (see
# StateStore.earlier_actions): told by its run status, which has one kind per status.
_ACTION_OF_STATUS = {
    "imported": Action.CREATE.value,
    "updated": Action.UPDATE.value,
    "gone": Action.DELETE.value,
    "unchanged": Action.NOTHING.value,
}
# A record a later harvest listed anew (a newer datestamp, or deleted since): this run's copy
# is not written (`unchanged` in the run); the later harvest's run writes the newer one.
SUPERSEDED = "superseded_by_a_later_harvest"


@dataclass
class WriteSummary:
    run_id: int
    actions: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    error_rows: list[dict] = field(default_factory=list)
    undone: Counter[str] = field(default_factory=Counter)  # see local_changes.py
    reidentified: Counter[str] = field(default_factory=Counter)  # see reidentified.py
    # what the earlier attempts of a resumed run did to the records this one found written
    # (counted `already_written` in `actions`), by action
    earlier: Counter[str] = field(default_factory=Counter)
    # of the records an earlier attempt failed (`failed_before` in `actions`, one per writer),
    # how many failures: a failed transform is the record's, once, as in `errors`
    failed_earlier: int = 0


def all_attempts(actions: Counter[str], earlier: Counter[str]) -> Counter[str]:
    """What the run did to the records, all its attempts: `actions` (an attempt's) with those
    an earlier attempt wrote counted by what it did (`earlier`), not as `already_written`:
    a run killed at 9,000 of 10,000 records reports 10,000 created, not 1,000."""
    mine = Counter({a: n for a, n in actions.items() if a != ALREADY_WRITTEN})
    return mine + earlier


def write(
    services: Services,
    scope: HarvestScope,
    options: RunOptions,
    *,
    progress: Callable[[str], None] = logger.info,
) -> WriteSummary:
    state = services.state
    harvester = services.harvester(scope.harvester_id)
    writers = build_writers(harvester, services.settings)
    owners = writer_keys(harvester.writers)
    transform = transform_fingerprint(harvester)  # of the data this stage writes
    # what each writer remembers writing: the transform's and its options that change it
    fingerprints = {
        owner: written_fingerprint(transform, writer)
        for owner, writer in zip(owners, writers, strict=True)
    }
    run_id = planned_run_id(services.storage, scope, harvester)
    run = state.get_run(run_id)
    run_started = datetime.fromisoformat(run["created_at"]) if run is not None else None
    summary = WriteSummary(run_id=run_id)
    if not writers:  # registered before a writer was required
        raise PipelineError(
            f"harvester {scope.harvester_id} has no writer: nothing can be written; give it "
            f"one (`oai-pipeline harvesters update {scope.harvester_id} --model rdm`) and "
            "rerun"
        )
    written = 0
    waiting = 0  # records of the scope another attempt still holds
    next_progress = options.progress_every

    def write_group(parts: list[PartRef], decisions: pl.DataFrame) -> pl.DataFrame:
        nonlocal written, next_progress, waiting
        # Successful records of a resumed run are never written again; failed ones on
        # request. Holding the lease proves no other attempt is still writing, so records a
        # dead attempt left `running` are reclaimed (after N minutes, if asked). Claimed group
        # by group: memory stays bounded by the group, not the run.
        stale_minutes = options.reset_stale_running_minutes
        # Records every writer skips are claimed and marked unchanged in one step.
        acting = set(decisions.filter(pl.col("action") != Action.SKIP.value)["identifier"])

        def claim(identifiers: set[str], *, unchanged: bool) -> set[str]:
            return set(
                state.claim(
                    run_id,
                    reclaim_stale_minutes=0 if stale_minutes is None else stale_minutes,
                    retry_failed=options.retry_failed,
                    identifiers=sorted(identifiers),
                    unchanged=unchanged,
                )
            )

        settled = claim(set(decisions["identifier"]) - acting, unchanged=True)
        claimed = settled | claim(acting, unchanged=False)
        is_claimed = pl.col("identifier").is_in(list(claimed))
        done_earlier = decisions.filter(~is_claimed)
        decisions = decisions.filter(is_claimed)
        to_act_on = decisions.filter(pl.col("identifier").is_in(list(acting)))
        listed = state.listed_copies(scope.harvester_id, to_act_on["identifier"].to_list())
        stale = _listed_anew(listed, to_act_on)
        superseded = decisions.filter(pl.col("identifier").is_in(list(stale)))
        decisions = decisions.filter(~pl.col("identifier").is_in(list(stale)))
        # The transformed rows (with the record data) only of records something happens to.
        needed = (acting & claimed) - stale
        by_id: dict[str, dict] = {}
        if needed:
            transformed = read_group(
                services.storage, TRANSFORMED_RECORDS, scope.harvester_id, parts
            ).filter(pl.col("identifier").is_in(list(needed)))
            by_id = {row["identifier"]: row for row in transformed.iter_rows(named=True)}
        rows: list[dict] = []
        # each writer's outcomes, saved to its own memory
        written_outcomes: dict[WriterKey, list[WriteOutcome]] = {}
        statuses: dict[str, str] = dict.fromkeys(stale, "unchanged")
        # what was done to each record, kept with its status for a later attempt's report
        record_actions: dict[str, str] = dict.fromkeys(stale, SUPERSEDED)
        errors: dict[str, RecordError] = {}
        by_writer: dict[str, list[str]] = {}  # each writer's action on each record, in order
        for row in superseded.iter_rows(named=True):
            summary.actions[SUPERSEDED] += 1
            rows.append(_not_written(row, SUPERSEDED))

        def take_outcomes(
            index: int, mine: pl.DataFrame, outcomes: list[WriteOutcome], failed_before: set[str]
        ) -> None:
            """Writer `index`'s outcomes of its decisions `mine`: into its memory, the
            records' statuses and errors, the summary and the written frame."""
            planned = {row["identifier"]: row["action"] for row in mine.iter_rows(named=True)}
            written_outcomes[owners[index]] = list(
                dataclasses.replace(o, error=None) if o.identifier in failed_before else o
                for o in outcomes
                if o.action is not Action.SKIP
            )
            for outcome in outcomes:
                # A record fails when any writer failed it; its first error is the run's.
                # Written by one writer, it is not `unchanged` for another's skip.
                if outcome.error is not None:
                    statuses[outcome.identifier] = "failed"
                    # a failed transform is the record's error, not a writer's: counted once
                    counted = outcome.identifier in errors and outcome.identifier in failed_before
                    errors.setdefault(outcome.identifier, outcome.error)
                    if not counted:
                        summary.errors[outcome.error.type] += 1
                    if not counted and len(summary.error_rows) < 100:
                        summary.error_rows.append(
                            {"identifier": outcome.identifier, **error_columns(outcome.error)}
                        )
                elif statuses.get(outcome.identifier, "unchanged") == "unchanged":
                    statuses[outcome.identifier] = RUN_STATUS[outcome.action]
                by_writer.setdefault(outcome.identifier, []).append(outcome.action.value)
                summary.actions[outcome.action.value] += 1
                rows.append(
                    {
                        "identifier": outcome.identifier,
                        "writer": index,
                        "planned_action": planned[outcome.identifier],
                        "action": outcome.action.value,
                        "local_id": outcome.local_id,
                        "revision": outcome.revision,
                        **error_columns(outcome.error),
                    }
                )

        def save(finished: set[str] | None = None) -> None:
            """The group's outcomes and the statuses of its records (only of those
            `finished`, when given), in one transaction: a crash between the two left
            records remembered as written but still `running` (see StateStore.save_written).
            Once for all writers: the errors of every writer stay on the harvest record."""
            for identifier, actions in by_writer.items():
                record_actions[identifier] = _record_action(actions, statuses[identifier])
            settling = {i: status for i, status in statuses.items() if i not in settled}
            kept_actions, outcomes_of = record_actions, written_outcomes
            if finished is not None:
                settling = {i: status for i, status in settling.items() if i in finished}
                kept_actions = {i: a for i, a in record_actions.items() if i in finished}
                outcomes_of = {
                    owner: [o for o in outcomes if o.identifier in finished]
                    for owner, outcomes in written_outcomes.items()
                }
            state.save_written(
                run_id,
                scope.harvester_id,
                outcomes_of,
                {
                    o.identifier: by_id[o.identifier]["datestamp"]
                    for outcomes in outcomes_of.values()
                    for o in outcomes
                },
                fingerprints,
                settling,
                errors,
                kept_actions,
                # Harvest records just read (with a datestamp: never dropped as unknown to
                # the source): saving their memory need not look for them again.
                known={identifier for identifier, (datestamp, _) in listed.items() if datestamp},
            )

        def save_committed(
            index: int, mine: pl.DataFrame, outcomes: list[WriteOutcome], failed_before: set[str]
        ) -> None:
            """Writer `index` failed a batch (its target full, read-only, gone), which its
            target rolled back: the records the batches committed before it finished (every
            writer has their outcome) are saved as a completed group's are. The others (the
            failed batch's, a later writer's, those refused a pid to be tried again) are
            left as a killed run leaves them, `running` and unknown to every writer's
            memory: the rerun writes them with each writer again, and reports what an
            uninterrupted run does (a writer's memory saved alone made its rerun skip, and
            report unchanged, what the failed attempt had created). A failure to save (the
            state store on the same full disk) is logged: the batch's error is the run's."""
            try:
                take_outcomes(index, mine, [o for o in outcomes if not o.again], failed_before)
                counts = decisions["identifier"].value_counts().iter_rows()
                writers_of = dict(counts)  # each record's writers in the plan
                save(stale | {i for i, done in by_writer.items() if len(done) == writers_of[i]})
            except Exception as unsaved:
                log_unsaved(logger, f"save the written batches of harvest run {run_id}", unsaved)

        for index, writer in enumerate(writers):
            mine = decisions.filter(pl.col("writer") == index)
            outcomes: list[WriteOutcome] = []
            pending: list[PlannedWrite] = []
            failed_before: set[str] = set()  # their error is stored by an earlier stage
            for row in mine.iter_rows(named=True):
                action = Action(row["action"])
                source = by_id.get(row["identifier"], {})
                if action is Action.ERROR:
                    error = error_from_row(source) or no_data_error()
                    outcomes.append(WriteOutcome(row["identifier"], action, None, None, error))
                    failed_before.add(row["identifier"])
                elif action is Action.SKIP:
                    outcomes.append(WriteOutcome(row["identifier"], action, row["local_id"], None))
                else:
                    pending.append(
                        PlannedWrite(
                            identifier=row["identifier"],
                            action=action,
                            reason=row["reason"],
                            datestamp=row["datestamp"],
                            # parsed batch by batch (`_apply_batch`), not for the whole group
                            data_json=source["data"] or None,
                            # The writer's pid, as the plan read it (its `pid_field`): the
                            # transform's is the DOI, which the writer would take over by.
                            pid=row["pid"],
                            communities=list(source["communities"] or []),
                            local_id=row["local_id"],
                            run_started=run_started,
                        )
                    )
            batch_size = max(1, harvester.batch_size)
            try:
                for start in range(0, len(pending), batch_size):
                    batch = pending[start : start + batch_size]
                    outcomes.extend(_apply_batch(writer, scope.harvester_id, batch))
                if len(pending) > batch_size:
                    outcomes = _refused_pids_again(writer, scope.harvester_id, pending, outcomes)
            except BaseException:
                save_committed(index, mine, outcomes, failed_before)
                raise
            take_outcomes(index, mine, outcomes, failed_before)
        save()
        earlier = (
            state.earlier_actions(run_id, done_earlier["identifier"].to_list())
            if done_earlier.height
            else {}
        )
        untransformed: set[str] = set()  # failed their transform: one failure each
        for row in done_earlier.iter_rows(named=True):
            status, action = earlier.get(row["identifier"], ("", None))
            action = _writer_action(action, row["writer"])
            label = _EARLIER.get(status, ALREADY_WRITTEN)
            if label == FAILED_BEFORE and action not in (None, Action.ERROR.value):
                label = ALREADY_WRITTEN  # another writer failed the record; this one wrote it
            summary.actions[label] += 1
            if label == FAILED_BEFORE and (
                row["action"] != Action.ERROR.value or row["identifier"] not in untransformed
            ):
                summary.failed_earlier += 1
                if row["action"] == Action.ERROR.value:
                    untransformed.add(row["identifier"])
            if label == ALREADY_WRITTEN:
                summary.earlier[action or _ACTION_OF_STATUS.get(status, ALREADY_WRITTEN)] += 1
            rows.append(_not_written(row, label))
        written += len(claimed)
        # Records of the run in windows outside the scope (a later run harvested them again)
        # are not this stage's: only the scope's own are counted. Known without reading the
        # statuses again: the group's records this attempt claimed and gave no status, and
        # those another attempt holds (`earlier`), read once above.
        waiting += len(claimed - settled - statuses.keys()) + sum(
            earlier.get(identifier, ("", None))[0] in ("pending", "running")
            for identifier in set(done_earlier["identifier"])
        )
        if written >= next_progress:
            progress(f"harvest run {run_id}: {written} records written")
            next_progress = (written // options.progress_every + 1) * options.progress_every
        return frame(rows, WRITTEN_SCHEMA)

    try:
        with services.harvester_lock.hold(scope.harvester_id):
            services.state.refuse_while_rekey_pending(scope.harvester_id, "write")
            map_partition_groups(
                services.storage, scope, SYNC_DECISIONS, WRITTEN_RECORDS, write_group
            )
            summary.undone = undo_local_changes(
                services, scope.harvester_id, writers, run_started, run_id
            )
            # After the deletions this run wrote: records an earlier write refused the DOI
            # that their former identifier held take its record over now.
            summary.reidentified = take_over_freed_pids(
                services, scope.harvester_id, writers, run_started, TakeOverRun("harvest", run_id)
            )
            _require_all_settled(waiting, run_id, options)
    except BaseException as error:
        services.record_failure(run_id, error)
        raise
    finally:
        for writer in writers:
            writer.close()
    if owed := state.records_owed(run_id):
        # Its other windows' records are still to be written (this scope is part of the run:
        # e.g. a backfill overlapping its windows wrote these with its own): not done yet.
        progress(f"harvest run {run_id}: {owed} records of its other windows still to write")
    else:
        state.finish_run(run_id, "succeeded")
    prune(services, scope.harvester_id, keep=scope.keys, every_key=False)
    return summary


def _listed_anew(listed: dict[str, tuple[str, bool]], decisions: pl.DataFrame) -> set[str]:
    """Records of the plan a later harvest listed anew: a newer datestamp, or deleted since
    (`listed`: each record's copy as the source listed it last, `StateStore.listed_copies`).
    Their copy in this run is out of date (its plan was made, or its run re-executed from
    failure, after another run harvested and maybe wrote them); written, it would roll the
    target back to it, and the store would take the older datestamp for the written one."""
    planned = {
        row["identifier"]: (row["datestamp"], bool(row["deleted"]))
        for row in decisions.select("identifier", "datestamp", "deleted").iter_rows(named=True)
    }
    return {
        identifier
        for identifier, copy in planned.items()
        if identifier in listed and is_later_copy(listed[identifier], copy)
    }


def _record_action(actions: list[str], status: str) -> str:
    """What the writers did to a record, kept on its run record for a resumed attempt's
    report: the action, when every writer did the same; else each writer's, in order
    (`update,skip`; `update,error` for a record only the second writer failed), so that
    each writer's is counted as an uninterrupted run counts it.
    Too long for the column (many writers doing different things): the action its run
    status tells."""
    if len(set(actions)) == 1:
        return actions[0]
    joined = ",".join(actions)
    if len(joined) <= RUN_RECORD_ACTION_LENGTH:
        return joined
    return next(a for a in actions if RUN_STATUS[Action(a)] == status)


def _writer_action(stored: str | None, writer: int) -> str | None:
    """Writer `writer`'s action in what `_record_action` kept."""
    if stored is None or "," not in stored:
        return stored
    actions = stored.split(",")
    return actions[writer] if writer < len(actions) else None


def _not_written(row: dict, label: str) -> dict:
    """A row of the written frame for a planned record this run did not write, and why."""
    return {
        "identifier": row["identifier"],
        "writer": row["writer"],
        "planned_action": row["action"],
        "action": label,
        "local_id": row["local_id"],
        "revision": None,
        **error_columns(None),
    }


def _apply_batch(
    writer: Writer, harvester_id: str, batch: list[PlannedWrite]
) -> list[WriteOutcome]:
    """`writer.apply` of the batch, each record's data parsed from its JSON text for this
    batch only. Parsed for the whole group up front, a group's 5,000 records of nested dicts
    lived until its last batch was written, and every young-generation collection of the
    garbage collector walked them: a batch's die with it, mostly before one comes."""
    return writer.apply(
        harvester_id,
        [
            dataclasses.replace(write, data=json_codec.loads(write.data_json))
            if write.data_json
            else write
            for write in batch
        ],
    )


def _refused_pids_again(
    writer: Writer, harvester_id: str, pending: list[PlannedWrite], outcomes: list[WriteOutcome]
) -> list[WriteOutcome]:
    """Records refused a pid another record of the harvester held (`WriteOutcome.again`) are
    written once more, in one batch: records of different batches that swap DOIs can only
    exchange them together."""
    refused = {o.identifier for o in outcomes if o.again}
    if not refused:
        return outcomes
    again = _apply_batch(writer, harvester_id, [w for w in pending if w.identifier in refused])
    by_id = {o.identifier: o for o in again}
    return [by_id.get(o.identifier, o) for o in outcomes]


def _require_all_settled(waiting: int, run_id: int, options: RunOptions) -> None:
    """A run succeeds only when none of its records waits: records an earlier attempt left
    `running` less than --reset-stale-running-minutes ago were not written by this one."""
    if not waiting:
        return
    minutes = options.reset_stale_running_minutes
    held = (
        f"less than {minutes} minutes ago (--reset-stale-running-minutes)"
        if minutes is not None
        else "that still holds them"
    )
    raise PipelineError(
        f"{waiting} records of harvest run {run_id} were left running by an earlier attempt "
        f"{held} and are not written; the run stays unfinished: rerun it later, or without "
        "that option, to write them"
    )
