"""Records a source re-identified: the new identifier takes over the old one's target record.

A source that changes its OAI identifiers (a DSpace upgrade, a move to a new host) lists the
same works, with the same DOIs, under new identifiers, and deletes the old ones or lets them
vanish. A new identifier written while its old one is still live in the target is refused
its DOI (`duplicate_pid`: two live identifiers, one DOI); once the old one is deleted (its
deleted header, or a reconcile), its tombstone holds the DOI and the writer lets the new
identifier take it over. Nothing would list the refused record again, though (an incremental
harvest lists it only once the source changes it), so each write stage and each reconcile
writes those records again from their last transform: the old target record comes back under
the new identifier (same id, a new revision), not a new record, not a tombstone.

What a run took over is counted on it (harvest run or reconcile run) with each batch's
outcomes: a rerun of a killed run reports the take-overs of all its attempts, as its undo of
local changes, and a take-over the killed attempt wrote but never recorded (killed between
the target's commit and the store's) as `already_written`, as the write stage labels a record
an earlier attempt wrote.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from oai_pipeline.pipeline.rewrite import rewrite_batches
from oai_pipeline.pipeline.services import Services
from oai_pipeline.state.store import TakeOverRun, writer_keys
from oai_pipeline.sync.rules import Action, SourceRecord, decide
from oai_pipeline.targets.base import Writer

# write.ALREADY_WRITTEN (write imports this module): taken over by an earlier attempt
ALREADY_WRITTEN = "already_written"


def take_over_freed_pids(
    services: Services,
    harvester_id: str,
    writers: Sequence[Writer],
    run_started: datetime | None = None,
    run: TakeOverRun | None = None,
) -> Counter[str]:
    """Write again, from their last transform, the harvester's records refused their pid
    that the target now lets them have (a re-identified record's tombstone, a user's
    deposit); returns the actions taken, by `run` over all its attempts when given (counted
    on it with each batch). Records still refused are left as they are: no write, no new
    error.

    A record the target already holds under its identifier but the store does not know as
    written (a write killed before the store saved it) is written too: the writer finds it
    as this write would leave it, and the store forgets the old error; it counts as
    `already_written`."""
    state = services.state
    refused = state.refused_a_pid(harvester_id)
    actions: Counter[str] = Counter()
    owners = writer_keys(services.harvester(harvester_id).writers)
    for writer, owner in zip(writers, owners, strict=True):
        for rewrite in rewrite_batches(
            services, harvester_id, writer, owner, refused, live_only=True
        ):
            writes = []
            earlier: set[str] = set()  # taken over by a killed attempt, not recorded
            for key in rewrite.keys:
                # its own record, known: what this writer's memory holds
                found, memory = rewrite.local[key.identifier], rewrite.memories.get(key.identifier)
                known = memory is not None and memory.local_id == found.local_id
                if found.local_id is None or (known and not found.taken_over):
                    continue  # still refused (or its own record, written and known)
                if not found.taken_over:
                    earlier.add(key.identifier)
                last = rewrite.reported[key.identifier]
                source = SourceRecord(key.identifier, last.datestamp, False, key.pid)
                decision = decide(source, None, found, publishes=writer.options.publish)
                writes.append(
                    rewrite.planned(
                        key,
                        decision,
                        "its pid is free for it now",
                        found.local_id,
                        run_started,
                        data_json=rewrite.transforms[key.identifier].data_json,
                    )
                )
            if not writes:
                continue
            outcomes = writer.apply(harvester_id, writes)
            taken = Counter(
                Action.ERROR.value
                if o.error is not None
                else ALREADY_WRITTEN
                if o.identifier in earlier
                else o.action.value
                for o in outcomes
            )
            state.save_write_outcomes(
                harvester_id,
                outcomes,
                {w.identifier: w.datestamp for w in writes},
                # as the write stage does: a writer's options changed re-plan it no more
                rewrite.fingerprints(writer),
                reidentified=(run, taken) if run is not None else None,
                writer=owner,
            )
            actions.update(taken)
    return state.run_reidentified(run) if run is not None else actions
