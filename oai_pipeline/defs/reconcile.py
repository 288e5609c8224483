"""Reconcile in Dagster: the deletions of sources that keep none, found on a schedule.

A source whose Identify says `deletedRecord` `no` or `transient` (Zenodo) never lists a
deletion: only a sweep of every identifier it still has finds the records it dropped
(`oai-pipeline reconcile`). Left to an operator's memory, an unattended deployment kept those
records live for good; the `reconcile_sources` job runs that sweep for every such harvester,
and its schedule weekly once started. It never forces: a sweep the core refuses to act on
(the source listed nothing, most records vanished, its list ended far short of its size)
fails the run naming the harvester and why, for an operator to look at.
"""

import dagster as dg
from pydantic import Field

from oai_pipeline.defs.partitions import TRIGGER_TAG
from oai_pipeline.defs.resources import PipelineResource
from oai_pipeline.defs.schedules import NAMED_IN_SKIP_REASON, job_busy
from oai_pipeline.errors import PipelineError
from oai_pipeline.oai.base_url import shown
from oai_pipeline.pipeline.reconcile import kept_line, reconcile
from oai_pipeline.pipeline.services import Services

# What Identify's deletedRecord says of sources whose deletions only a sweep finds.
KEEPS_NO_DELETIONS = ("no", "transient")


class ReconcileConfig(dg.Config):
    harvesters: list[str] = Field(
        default_factory=list,
        description="Harvester ids to reconcile; empty: every enabled harvester whose source "
        "keeps no deletions (Identify's deletedRecord is no or transient).",
    )


def reconcile_selection(services: Services, asked: list[str]) -> tuple[list[str], dict[str, str]]:
    """(the harvesters to reconcile, those that wait with why). Asked for: those. Else the
    enabled ones whose source, as last identified, keeps no deletions; one whose source has
    not answered Identify yet waits for its next harvest: never harvested, or moved
    (`harvesters update --base-url` drops the old URL's Identify, which says nothing of the
    new one, and the identifiers there may differ: rekey first, see the README). Before,
    such a harvester was passed over in silence: after a move, a week without reconcile."""
    if asked:
        known = {harvester.id for harvester in services.state.list_harvesters()}
        unknown = sorted(set(asked) - known)
        if unknown:
            raise dg.Failure(f"no such harvester: {', '.join(unknown)}")
        return list(dict.fromkeys(asked)), {}
    chosen: list[str] = []
    waiting: dict[str, str] = {}
    for harvester in services.state.list_harvesters():
        if not harvester.enabled:
            continue
        identify = services.state.get_identify(harvester.id)
        if identify is None:
            waiting[harvester.id] = (
                f"its source {shown(harvester.base_url)} has not answered Identify yet (never "
                "harvested, or its base URL changed since its last harvest): whether it "
                "keeps deletions is unknown, reconciled after its next harvest"
            )
        elif identify.deleted_record in KEEPS_NO_DELETIONS:
            chosen.append(harvester.id)
    return chosen, waiting


def waiting_lines(waiting: dict[str, str]) -> list[str]:
    """Why the first NAMED_IN_SKIP_REASON waiting harvesters wait, and how many more do: a
    fleet registered but not harvested yet logged a warning per harvester (300 in one run),
    each of them also in the run's `waiting` metadata."""
    named = sorted(waiting.items())[:NAMED_IN_SKIP_REASON]
    lines = [f"harvester {harvester_id} waits: {why}" for harvester_id, why in named]
    if len(waiting) > len(named):
        lines.append(f"and {len(waiting) - len(named)} more harvesters waiting")
    return lines


@dg.op(description="Reconcile each harvester: a sweep of the identifiers its source still has.")
def reconcile_harvesters(
    context: dg.OpExecutionContext, config: ReconcileConfig, pipeline: PipelineResource
) -> dict[str, dict]:
    reports: dict[str, dict] = {}
    failures: dict[str, str] = {}
    with pipeline.services() as services:
        chosen, waiting = reconcile_selection(services, config.harvesters)
        for line in waiting_lines(waiting):
            context.log.warning(f"reconcile: {line}")
        for harvester_id in chosen:
            try:
                report = reconcile(services, harvester_id)
            except PipelineError as error:  # refused or failed: the others still go
                failures[harvester_id] = str(error).splitlines()[0]
                context.log.error(f"reconcile of {harvester_id}: {failures[harvester_id]}")
                continue
            reports[harvester_id] = report.to_dict()
            context.log.info(
                f"reconcile of {harvester_id}: {report.source_identifiers} listed, "
                f"{len(report.vanished)} vanished, {len(report.returned)} back at the source"
            )
            if kept := kept_line(reports[harvester_id]["kept"]):
                # an operator hears of the records a source's list hides, as the CLI says
                context.log.warning(f"reconcile of {harvester_id}: {kept}")
    context.add_output_metadata(
        {
            "harvesters": len(reports) + len(failures),
            "vanished": sum(len(r["vanished"]) for r in reports.values()),
            "returned": sum(len(r["returned"]) for r in reports.values()),
            # vanished, not deleted: GetRecord still serves them, did not tell, or not asked
            "kept": sum(
                len(r["kept"]["served"]) + len(r["kept"]["unconfirmed"]) + r["kept"]["unasked"]
                for r in reports.values()
            ),
            "failed": dg.MetadataValue.json(failures),
            "waiting": dg.MetadataValue.json(waiting),
        }
    )
    if failures:
        raise dg.Failure(
            f"{len(failures)} of {len(reports) + len(failures)} reconciles failed or were "
            "refused (see `oai-pipeline reconcile ID --force` for one to act on anyway): "
            + "; ".join(f"{harvester}: {why}" for harvester, why in sorted(failures.items()))
        )
    return reports


@dg.job(
    description="Reconcile the harvesters whose sources keep no deletions (or those given in "
    "the config): tombstones for the records they no longer list. Launched weekly by the "
    "reconcile_schedule once started."
)
def reconcile_sources() -> None:
    reconcile_harvesters()


@dg.schedule(
    cron_schedule="0 5 * * 0",
    job=reconcile_sources,
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Weekly (when started): reconcile every enabled harvester whose source keeps "
    "no deletions.",
)
def reconcile_schedule(
    context: dg.ScheduleEvaluationContext, pipeline: PipelineResource
) -> dg.RunRequest | dg.SkipReason:
    # A slow source's sweep still going: weekly runs would pile up behind it.
    if job_busy(context.instance, reconcile_sources.name):
        return dg.SkipReason("the last reconcile is still queued or going")
    with pipeline.services() as services:
        chosen, waiting = reconcile_selection(services, [])
    if chosen:  # those waiting are named in the run's log and metadata
        return dg.RunRequest(tags={TRIGGER_TAG: "reconcile"})
    return dg.SkipReason(
        "no enabled harvester's source is known to keep no deletions (Identify's "
        "deletedRecord no or transient)" + "".join(f"; {line}" for line in waiting_lines(waiting))
    )
