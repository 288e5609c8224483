"""The harvest always wins, also over records the source did not list this time.

An incremental harvest lists only what changed at the source. A harvested record a user
edited, deleted or restored since the last write would keep that change until the source
changed it again, so each harvest of a harvester also brings back the records its writers
report as changed locally, to the state the source last reported (the data of their last
transform), through the same sync rules and the same writers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from oai_pipeline.pipeline.rewrite import rewrite_batches
from oai_pipeline.pipeline.services import Services
from oai_pipeline.state.store import writer_keys
from oai_pipeline.sync.rules import Action, SourceRecord, decide
from oai_pipeline.targets.base import Writer


def undo_local_changes(
    services: Services,
    harvester_id: str,
    writers: Sequence[Writer],
    run_started: datetime | None = None,
    run_id: int | None = None,
) -> Counter[str]:
    """Bring the harvester's locally changed records back; returns the actions taken, with
    those earlier attempts of run `run_id` took (saved with each batch's outcomes: a rerun
    finds those records settled, or its sync rules skip them, and would report none).

    `run_started`: when the harvest run started. A record an earlier attempt of the run
    brought back, killed before the state store saved it, is still marked changed locally:
    the writer tells it by its revision made since then (a harvested draft, by when it was
    saved) and reports what that attempt did (without it, `nothing`: the record already held
    the data)."""
    state = services.state
    actions: Counter[str] = Counter()
    owners = writer_keys(services.harvester(harvester_id).writers)
    for writer, owner in zip(writers, owners, strict=True):
        changed = writer.changed_locally(harvester_id)
        for rewrite in rewrite_batches(
            services, harvester_id, writer, owner, changed, live_only=False
        ):
            writes = []
            for key in rewrite.keys:
                last = rewrite.reported[key.identifier]
                if not last.deleted and last.transform is None:
                    continue  # no data the source reported to bring back
                source = SourceRecord(key.identifier, last.datestamp, last.deleted, key.pid)
                found = rewrite.local[key.identifier]
                decision = decide(
                    source,
                    rewrite.memories.get(key.identifier),
                    found,
                    publishes=writer.options.publish,
                )
                writes.append(
                    rewrite.planned(
                        key,
                        decision,
                        "changed locally",
                        found.local_id,
                        run_started,
                        undoes_local_change=True,
                    )
                )
            # Skips go to the writer too: it finds them as the harvest leaves them.
            outcomes = writer.apply(harvester_id, writes) if writes else []
            written = [o for o in outcomes if o.action is not Action.SKIP]
            batch = Counter(o.action.value if o.error is None else "error" for o in written)
            state.save_write_outcomes(
                harvester_id,
                written,
                {w.identifier: w.datestamp for w in writes},
                # as the write stage does: a writer's options changed re-plan it no more
                rewrite.fingerprints(writer),
                undone=(run_id, batch) if run_id is not None else None,
                writer=owner,
            )
            # Only now, remembered: killed before, the rerun finds them changed locally again
            # (and the writer finds them as it left them, no new revision).
            writer.settle_local_changes(
                harvester_id, [o.local_id for o in outcomes if o.local_id and o.error is None]
            )
            actions.update(batch)
    return state.run_local_changes_undone(run_id) if run_id is not None else actions


def brought_back(actions: Counter[str]) -> int:
    """How many records the actions `undo_local_changes` returned brought back: not those
    it found as the source reports them (`nothing`), nor those it failed to."""
    return sum(n for action, n in actions.items() if action not in ("nothing", "error"))
