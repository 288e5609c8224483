"""`oai-pipeline reconcile ID`: find records the source dropped without a deletion mark."""

from __future__ import annotations

import click

from oai_pipeline.cli.harvesters import disabled_warning
from oai_pipeline.cli.output import (
    FriendlyCommand,
    emit,
    json_option,
    note_lines,
    progress_line,
    reidentified_line,
)
from oai_pipeline.pipeline.reconcile import kept_line
from oai_pipeline.pipeline.reconcile import reconcile as reconcile_source
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import load_settings


@click.command(name="reconcile", cls=FriendlyCommand)
@click.argument("harvester_id")
@click.option(
    "--force",
    is_flag=True,
    help="delete the vanished records even when the source lists none, lost most of them, or "
    "GetRecord still serves some or does not tell (asking it for none of them)",
)
@json_option
def reconcile(harvester_id: str, force: bool, as_json: bool) -> None:
    """List every identifier the source still has; delete harvested records that vanished."""
    with Services(load_settings()) as services:
        # Run: the operator named it. But they hear why the weekly reconcile leaves it out.
        warning = disabled_warning(services.harvester(harvester_id))
        warnings = [warning] if warning else []
        for line in warnings:
            progress_line(f"note: {line}")
        report = {
            **reconcile_source(services, harvester_id, force=force).to_dict(),
            "warnings": warnings,
        }
    text = (
        f"harvester {harvester_id} (deletedRecord={report['deleted_record']}): "
        f"{report['source_identifiers']} identifiers at the source, "
        f"{report['harvested_live']} harvested live, {len(report['vanished'])} vanished"
        + "".join(f"\n  {action}: {n}" for action, n in sorted(report["actions"].items()))
        + (f"\n{kept}" if (kept := kept_line(report["kept"])) else "")
        + (
            f"\n{len(report['returned'])} vanished before and listed again, harvested again:"
            + "".join(
                f"\n  {action}: {n}" for action, n in sorted(report["returned_actions"].items())
            )
            if report["returned"]
            else ""
        )
        + (f"\n{taken.strip()}" if (taken := reidentified_line(report["reidentified"])) else "")
        + "".join(f"\n{line}" for line in note_lines(report["notices"]))
    )
    emit(report, as_json=as_json, text=text)
