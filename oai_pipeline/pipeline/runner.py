"""All four stages in this process: what `oai-pipeline harvest` does without `--use-job`."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from oai_pipeline.pipeline.discover import discover
from oai_pipeline.pipeline.local_changes import brought_back
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.plan import plan
from oai_pipeline.pipeline.scope import HarvestScope
from oai_pipeline.pipeline.services import Services
from oai_pipeline.pipeline.transform_stage import transform
from oai_pipeline.pipeline.write import ALREADY_WRITTEN, FAILED_BEFORE, all_attempts, write
from oai_pipeline.state.schema import CATCH_UP_COUNTERS

logger = logging.getLogger(__name__)


@dataclass
class HarvestReport:
    harvester_id: str
    run_id: int
    windows: list[str]
    harvested: int
    deleted_at_source: int
    created: int
    updated: int
    deleted: int
    unchanged: int
    errors: int
    cap_reached: bool
    actions: dict[str, int] = field(default_factory=dict)
    error_types: dict[str, int] = field(default_factory=dict)
    # records the source did not list, brought back from a user's change (local_changes.py),
    # by this run or an earlier attempt of it; and every action taken on the records a user
    # changed, by name (`nothing`: found as the source reports them; `error`: not brought back)
    local_changes_undone: int = 0
    local_changes_undone_actions: dict[str, int] = field(default_factory=dict)
    # records refused a DOI their former identifier held, written once it gave it up
    # (a source that re-identified them; see reidentified.py), by action
    reidentified: dict[str, int] = field(default_factory=dict)
    # A resumed run: records an earlier attempt wrote (counted above by what it did to them:
    # the counts above are the run's, all its attempts), and those it failed that this one
    # did not try again (without retry_failed; not in the counts above).
    written_earlier: int = 0
    failed_earlier: int = 0
    # A resumed run's catch-up list (discover._catch_up_from): pages read and records listed
    # by its last attempt's (each lists every change again), and staged of them, all
    # attempts, the records new to the run and the newer copies of its own records (written
    # again); `harvested` counts each record once, whichever list.
    catch_up_pages: int = 0
    catch_up_listed: int = 0
    catch_up_new_records: int = 0
    catch_up_newer_copies: int = 0
    # quirks of the source the operator should know of (DiscoveryResult.notices)
    notices: list[str] = field(default_factory=list)
    # selected identifiers the source has no record of (idDoesNotExist): each is one of
    # `errors`, and no harvest record is kept for it
    unknown_identifiers: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def summarise(
    harvester_id: str,
    run_id: int,
    windows: list[str],
    harvested: int,
    deleted_at_source: int,
    cap_reached: bool,
    actions: Counter[str],
    errors: Counter[str],
    undone: Counter[str] | None = None,
    notices: list[str] | None = None,
    unknown: list[str] | None = None,
    catch_up: dict[str, int] | None = None,
    reidentified: Counter[str] | None = None,
    earlier: Counter[str] | None = None,
    failed_earlier: int | None = None,
) -> HarvestReport:
    """`actions`: this attempt's, with the records earlier attempts wrote `already_written`;
    `earlier`: what those attempts did to them, by action (WriteSummary.earlier), counted
    in the run's totals instead. `failed_earlier`: the failures among the records earlier
    attempts failed (WriteSummary.failed_earlier; None: one per `failed_before`)."""
    written_earlier = actions[ALREADY_WRITTEN]
    if earlier is not None:
        actions = all_attempts(actions, earlier)
    if unknown:  # failed at discovery, never planned: an error like those of the write
        errors = errors + Counter({"idDoesNotExist": len(unknown)})
        actions = actions + Counter({"error": len(unknown)})
    return HarvestReport(
        harvester_id=harvester_id,
        run_id=run_id,
        windows=windows,
        harvested=harvested,
        deleted_at_source=deleted_at_source,
        created=actions["create"],
        updated=sum(actions[a] for a in ("update", "publish_draft", "restore", "revive")),
        deleted=actions["delete"] + actions["delete_draft"],
        unchanged=actions["skip"] + actions["nothing"],
        errors=sum(errors.values()),
        cap_reached=cap_reached,
        actions=dict(actions),
        error_types=dict(errors),
        local_changes_undone=brought_back(undone or Counter()),
        local_changes_undone_actions=dict(undone or {}),
        reidentified=dict(reidentified or {}),
        written_earlier=written_earlier,
        failed_earlier=actions[FAILED_BEFORE] if failed_earlier is None else failed_earlier,
        notices=list(notices or []),
        unknown_identifiers=list(unknown or []),
        **{name: int((catch_up or {}).get(name, 0)) for name in CATCH_UP_COUNTERS},
    )


def run_harvest(
    services: Services,
    scope: HarvestScope,
    options: RunOptions,
    *,
    progress: Callable[[str], None] = logger.info,
) -> HarvestReport:
    # The lease for the whole run, not stage by stage: another harvest of the harvester
    # started meanwhile would otherwise continue this run (not succeeded yet) between them.
    with services.harvester_lock.hold(scope.harvester_id):
        discovery = discover(services, scope, options, progress=progress)
        try:
            transform(services, scope)
            plan(services, scope, options)
            written = write(services, scope, options, progress=progress)
        except BaseException as error:
            # Whatever stage failed, and wherever in it (the write's writers not opening,
            # before it writes), the run is not left `running` after its process ended:
            # `status` said it was killed. One the write ended already keeps that end.
            services.record_failure(discovery.run_id, error)
            raise
    return summarise(
        scope.harvester_id,
        discovery.run_id,
        scope.keys,
        discovery.records,
        discovery.deleted,
        discovery.cap_reached,
        written.actions,
        written.errors,
        written.undone,
        discovery.notices,
        discovery.unknown,
        discovery.counters,
        written.reidentified,
        written.earlier,
        written.failed_earlier,
    )
