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
one). The targets go first because a harvest that runs before that rerun then finds each
record in the target under its new identifier and takes it up (no duplicate); the state
store first would have left harvest records naming target records that the target no longer
finds by identifier. (That rerun is then refused, the new identifiers being harvested; the
old harvest records stay, to be found vanished by a reconcile, which leaves the target
records alone: none holds their identifiers any more.)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

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
from oai_pipeline.pipeline.services import Services
from oai_pipeline.targets.base import Writer


@dataclass
class RekeyReport:
    """What a rekey rewrote (or, `dry_run`, would rewrite), store by store."""

    harvester_id: str
    from_prefix: str
    to_prefix: str
    dry_run: bool
    plans: list[RekeyPlan]
    rewritten: dict[str, int] = field(default_factory=dict)
    superseded_runs: list[int] = field(default_factory=list)

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
        }


def rekey(
    services: Services,
    harvester_id: str,
    old: str,
    new: str,
    *,
    dry_run: bool = False,
    supersede_runs: bool = False,
) -> RekeyReport:
    """Rewrite the harvester's identifiers beginning with `old` to begin with `new`, in the
    targets and then the state store (see the module's docstring); `dry_run` only says what
    it would rewrite. RekeyRefused (nothing changed) when it must not run now."""
    check_prefixes(old, new)
    harvester = services.harvester(harvester_id)
    with _holding_the_lease(services, harvester_id):
        in_the_way = _runs_in_the_way(services, harvester, supersede_runs)
        writers = build_writers(harvester, services.settings)
        try:
            plans = [services.state.rekey_plan(harvester_id, old, new)]
            plans += [writer.plan_rekey(harvester_id, old, new) for writer in writers]
            _check(plans, harvester_id, old, new)
            report = RekeyReport(harvester_id, old, new, dry_run, plans)
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
    """The targets first, then the state store: see the module's docstring."""
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
    services: Services, harvester: Harvester, supersede: bool
) -> list[dict[str, Any]]:
    """The harvester's runs a later harvest would resume from a resumption token of the old
    identifiers (its staged records are rewritten, but the rest of its list is not): refused,
    unless `supersede` (returned, to be marked superseded). A Dagster run still running one
    is refused either way."""
    resumable = []
    for run in services.state.unfinished_runs(harvester.id):
        if run["status"] == "running" and run.get("dagster_run_id"):
            raise RekeyRefused(
                f"harvest run {run['id']} of harvester {harvester.id} is running in Dagster "
                f"run {run['dagster_run_id']}: rekey once it has ended; nothing was changed"
            )
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


def _check(plans: list[RekeyPlan], harvester_id: str, old: str, new: str) -> None:
    for plan in plans:
        if plan.taken:
            raise RekeyRefused(taken_message(plan, harvester_id, old, new))
        if plan.limit is not None and plan.longest > plan.limit:
            raise RekeyRefused(too_long_message(plan, old, new))
