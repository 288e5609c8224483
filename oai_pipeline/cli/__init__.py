"""`oai-pipeline …`: the operator's command line. Every listing has `--json`."""

from __future__ import annotations

import importlib
import sys
import warnings

import click
from pydantic import ValidationError

from oai_pipeline.errors import PipelineError

# Dagster's beta notices (backfill_policy, pools) are for developers, not operators.
warnings.filterwarnings("ignore", message=".*currently in (beta|preview).*")

# Each module defines one click command or group named like the module's last part.
_COMMAND_MODULES = (
    "demo",
    "harvest",
    "reconcile",
    "harvesters",
    "records",
    "status",
    "target",
    "sample_endpoint",
)


def format_validation_error(error: ValidationError) -> str:
    """One line naming the field(s), as an operator wants to read it."""
    parts = []
    for item in error.errors():
        field = ".".join(str(p) for p in item["loc"]) or "input"
        parts.append(f"{field}: {item['msg']}")
    return "invalid " + "; ".join(parts)


class _FriendlyGroup(click.Group):
    """Turns user mistakes into one-line errors instead of tracebacks."""

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except ValidationError as error:
            click.echo(f"error: {format_validation_error(error)}", err=True)
            sys.exit(2)
        except PipelineError as error:
            click.echo(f"error: {error}", err=True)
            sys.exit(1)


@click.group(cls=_FriendlyGroup)
@click.version_option(package_name="oai-pipeline")
def main() -> None:
    """Harvest OAI-PMH repositories into a target repository and keep it in sync."""


for _name in _COMMAND_MODULES:
    _module = importlib.import_module(f"oai_pipeline.cli.{_name}")
    main.add_command(getattr(_module, _name.replace("_", "-").replace("-", "_")))
