"""`harvesters rekey`: a source that changed its identifier namespace keeps its records.

A DSpace that moves or upgrades may list every record under a new prefix
(`oai:old.example.org:123456789/42` becomes `oai:repo.example.org:123456789/42`). Records
without a DOI have nothing else that says the new identifier is the old record: harvested
as they are, they become new target records and the old ones tombstones. The operator, who
knows the mapping, rewrites the prefix in the state store and in the target before the first
harvest after the change; that harvest then finds every record known (same target id, a new
revision only if its data changed).

Two databases, so the order is what keeps a crash harmless: the targets first, then the
state store, each in one transaction. Killed between the two, the target holds the new
identifiers and the state store the old ones; a rerun of the same command finds nothing left
to rewrite in the target and rewrites the state store (a store whose identifiers are under
the new prefix already is done, not a clash: a clash is a new identifier held beside its old
one). Whether a rekey was killed half-way is the state store's to remember: the rekey is
saved there as pending before the targets are touched (`StateStore.begin_rekey`), and its
rewrite of the state store ends it in the same transaction. While it is pending,
only its rerun (which finishes it) or its reverse (which undoes it) runs: another rekey of
the harvester (A→C after A→B was killed would leave the target under B and the state store
under C), a harvest, a reconcile or a write of it are refused with the commands that end it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from oai_pipeline.errors import PipelineError
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.harvesters.plugins import build_writers
from oai_pipeline.identifier_prefix import (
    RekeyPlan,
    RekeyRefused,
    check_prefixes,
    taken_message,
    too_long_message,
)
from oai_pipeline.pipeline.discover import resumes_where_it_stopped
from oai_pipeline.pipeline.frames import (
    RAW_OAI_XML,
    SYNC_DECISIONS,
    TRANSFORMED_RECORDS,
    WRITTEN_RECORDS,
)
from oai_pipeline.pipeline.partitions import windows_holding
from oai_pipeline.pipeline.services import Services
from oai_pipeline.targets.base import Writer


class OrchestratorRuns(Protocol):
    """What the orchestrator (Dagster) knows of a harvester's runs that the state store does
    not: a run queued or starting has no harvest run yet, and whether a harvest run's
    orchestrator run is still alive is the orchestrator's to tell (its steps run in
    processes of their own, one after the other)."""

    def waiting(self, harvester_id: str) -> list[str]:
        """The harvester's runs that are queued, starting or running, and alive, each as
        "<run id> (<status>)"."""
        ...

    def ended(self, run_id: str) -> bool:
        """Whether that run is over although its harvest run says `running`: failed or
        canceled (not yet recorded on it), or its process gone (killed) and quiet."""
        ...

    def succeeded(self, run_id: str) -> bool:
        """Whether that run ended successfully: a harvest run it left `running` waits for the
        downstream steps of its windows (it materialised raw_oai_xml alone, say)."""
        ...


@dataclass
class RekeyReport:
    """What a rekey rewrote (or, `dry_run`, would rewrite), store by store, and the Dagster
    windows whose Parquet holds the old identifiers (`stale_windows`): their downstream steps
    are refused until raw_oai_xml of them is materialised again."""

    harvester_id: str
    from_prefix: str
    to_prefix: str
    dry_run: bool
    plans: list[RekeyPlan]
    rewritten: dict[str, int] = field(default_factory=dict)
    superseded_runs: list[int] = field(default_factory=list)
    stale_windows: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        state = self.plans[0]
        return {
            "harvester": self.harvester_id,
            "from_prefix": self.from_prefix,
            "to_prefix": self.to_prefix,
            "dry_run": self.dry_run,
            "state_records": state.count,
            "target_records": sum(plan.count for plan in self.plans[1:]),
            "examples": [
                {"from": old, "to": self.to_prefix + old[len(self.from_prefix) :]}
                for old in state.examples or next((p.examples for p in self.plans if p.count), [])
            ],
            "stores": [plan.to_dict() for plan in self.plans],
            "superseded_runs": self.superseded_runs,
            "stale_windows": self.stale_windows,
        }


def rekey(
    services: Services,
    harvester_id: str,
    old: str,
    new: str,
    *,
    dry_run: bool = False,
    supersede_runs: bool = False,
    orchestrator: OrchestratorRuns | None = None,
) -> RekeyReport:
    """Rewrite the harvester's identifiers beginning with `old` to begin with `new`, in the
    targets and then the state store (see the module's docstring); `dry_run` only says what
    it would rewrite. RekeyRefused (nothing changed) when it must not run now. Without an
    `orchestrator` (no Dagster instance), a harvest run of a Dagster run that says
    `running` is taken for running, and runs only queued are not seen."""
    check_prefixes(old, new)
    harvester = services.harvester(harvester_id)
    with _holding_the_lease(services, harvester_id):
        pending = services.state.pending_rekey(harvester_id)
        if pending is not None and not pending.allows(old, new):
            raise pending.refusal(f"the rekey from {old!r} to {new!r}")
        in_the_way = _runs_in_the_way(services, harvester, supersede_runs, orchestrator)
        if orchestrator is not None:
            _refuse_waiting_runs(harvester_id, orchestrator.waiting(harvester_id))
        writers = build_writers(harvester, services.settings)
        try:
            plans = [services.state.rekey_plan(harvester_id, old, new)]
            plans += [writer.plan_rekey(harvester_id, old, new) for writer in writers]
            _check(plans, harvester_id, old, new)
            report = RekeyReport(harvester_id, old, new, dry_run, plans)
            report.stale_windows = windows_holding(services.storage, harvester_id, old)
            if dry_run:
                report.superseded_runs = [run["id"] for run in in_the_way]
                return report
            for run in in_the_way:
                services.state.finish_run(
                    run["id"],
                    "stopped",
                    error=f"superseded: the harvester's identifiers were rekeyed from {old!r} "
                    f"to {new!r}; its resumption token lists the old ones",
                )
                report.superseded_runs.append(run["id"])
            report.rewritten = _rewrite(services, writers, harvester_id, old, new)
            return report
        finally:
            for writer in writers:
                writer.close()


def _rewrite(
    services: Services, writers: list[Writer], harvester_id: str, old: str, new: str
) -> dict[str, int]:
    """The targets first, then the state store: see the module's docstring. Saved as
    pending before the targets, until the state store's transaction ends it."""
    services.state.begin_rekey(harvester_id, old, new)
    rewritten = {"target": 0}
    for writer in writers:
        rewritten["target"] += writer.rekey(harvester_id, old, new)
    rewritten["state"] = services.state.rekey(harvester_id, old, new)
    return rewritten


@contextmanager
def _holding_the_lease(services: Services, harvester_id: str) -> Iterator[None]:
    """The harvester's lease, as a harvest or reconcile takes it: none of them writes while
    the identifiers change under it. Not waited for: the operator runs this between them."""
    with ExitStack() as stack:
        try:
            stack.enter_context(services.harvester_lock.hold(harvester_id, wait_seconds=0))
        except PipelineError:
            raise RekeyRefused(
                f"a harvest or reconcile of harvester {harvester_id} is running (it holds the "
                "harvester's lease): rekey once it has ended; nothing was changed"
            ) from None
        yield


def _runs_in_the_way(
    services: Services,
    harvester: Harvester,
    supersede: bool,
    orchestrator: OrchestratorRuns | None,
) -> list[dict[str, Any]]:
    """The harvester's runs a later harvest would resume from a resumption token of the old
    identifiers (its staged records are rewritten, but the rest of its list is not): refused,
    unless `supersede` (returned, to be marked superseded). A Dagster run still running one
    is refused either way; one the orchestrator finds over (failed, or its process killed:
    what the failure and dead-run sensors record on it at their next tick) is the failed
    run it is about to be, as a harvest then takes it. One whose Dagster run succeeded waits
    for the downstream steps of its windows: refused unless `supersede`, as those steps are
    refused after the rekey anyway (its partitions hold the old identifiers), so that
    nothing would finish it; superseded, a harvest of its windows lists them again."""
    resumable = []
    for run in services.state.unfinished_runs(harvester.id):
        dagster_run_id = run.get("dagster_run_id")
        running = run["status"] == "running" and dagster_run_id
        if running and orchestrator is not None and orchestrator.succeeded(dagster_run_id):
            if not supersede:
                raise RekeyRefused(_waiting_message(run, harvester.id))
            resumable.append(run)
            continue
        if running and (orchestrator is None or not orchestrator.ended(dagster_run_id)):
            raise RekeyRefused(_running_message(run, harvester.id, orchestrator is None))
        if resumes_where_it_stopped(run, harvester):
            resumable.append(run)
    if resumable and not supersede:
        runs = ", ".join(f"{run['id']} ({run['status']})" for run in resumable)
        first = resumable[0]["id"]
        raise RekeyRefused(
            f"harvester {harvester.id} has unfinished harvest runs that the next harvest "
            f"would resume from the old identifiers' resumption token: {runs}. Let them "
            f"finish first (`oai-pipeline harvest {harvester.id} --resume {first}`) if the "
            "source still lists the old identifiers, or supersede them (add "
            "--supersede-runs); nothing was changed"
        )
    return resumable


def _running_message(run: dict[str, Any], harvester_id: str, no_instance: bool) -> str:
    """Why a harvest run of a Dagster run counts as running, and what ends it."""
    dagster_run_id = run["dagster_run_id"]
    if no_instance:
        seen = "(no Dagster instance in DAGSTER_HOME to ask whether that run is still alive)"
    else:
        seen = "(neither failed nor canceled, nor its process found gone for 5 minutes)"
    return (
        f"harvest run {run['id']} of harvester {harvester_id} is running in Dagster run "
        f"{dagster_run_id} {seen}: rekey once it has ended. If its process was killed, the "
        "daemon's dead-run sensor marks it failed once it has been quiet for 5 minutes, or "
        "terminate it in the UI (Runs, Terminate); nothing was changed"
    )


def _waiting_message(run: dict[str, Any], harvester_id: str) -> str:
    """A harvest run whose Dagster run succeeded before its last step: what finishes it."""
    window = f"{run['window_from'] or '…'} .. {run['window_until'] or '…'}"
    return (
        f"harvest run {run['id']} of harvester {harvester_id} (window {window}) waits for the "
        f"steps after {RAW_OAI_XML}: its Dagster run {run['dagster_run_id']} succeeded without "
        f"them. Materialise {TRANSFORMED_RECORDS}, {SYNC_DECISIONS} and {WRITTEN_RECORDS} of "
        "its windows (or let automation do it), then rekey; or add --supersede-runs to "
        "supersede it: its windows hold the old identifiers, which the next harvest of them "
        "lists again under the new ones; nothing was changed"
    )


def _refuse_waiting_runs(harvester_id: str, waiting: list[str]) -> None:
    """Runs queued or starting have no harvest run yet: started after the rewrite, a run
    queued for the old source or old identifiers (selected ones, or Parquet partitions of
    them its steps read) would harvest or write them as new records."""
    if waiting:
        raise RekeyRefused(
            f"Dagster runs of harvester {harvester_id} are queued or in progress: "
            f"{', '.join(waiting)}. Rekey once they have ended, or terminate them in the UI "
            "(Runs, Terminate) or delete the queued ones (`dagster run delete RUN_ID`); "
            "nothing was changed"
        )


def _check(plans: list[RekeyPlan], harvester_id: str, old: str, new: str) -> None:
    for plan in plans:
        if plan.taken:
            raise RekeyRefused(taken_message(plan, harvester_id, old, new))
        if plan.limit is not None and plan.longest > plan.limit:
            raise RekeyRefused(too_long_message(plan, old, new))
