"""How commands print: a table-ish text for people, JSON for machines."""

from __future__ import annotations

import json
from typing import Any

import click


def emit(payload: Any, *, as_json: bool, text: str | None = None) -> None:
    if as_json:
        click.echo(json.dumps(payload, indent=2, sort_keys=True, default=str))
    else:
        click.echo(text if text is not None else json.dumps(payload, indent=2, default=str))


def report_text(report: dict[str, Any]) -> str:
    lines = [
        f"harvester {report['harvester_id']}, harvest run {report['run_id']}",
        f"  harvested: {report['harvested']} (deleted at source: {report['deleted_at_source']})",
        f"  created:   {report['created']}",
        f"  updated:   {report['updated']}",
        f"  deleted:   {report['deleted']}",
        f"  unchanged: {report['unchanged']}",
        f"  errors:    {report['errors']}",
    ]
    if report.get("error_types"):
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(report["error_types"].items()))
        lines.append(f"  error types: {kinds}")
    if report.get("cap_reached"):
        lines.append("  the cap was reached; run again to harvest more")
    return "\n".join(lines)
