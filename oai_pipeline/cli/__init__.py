"""`oai-pipeline …`: the operator's command line. Every listing has `--json`."""

from __future__ import annotations

import importlib
import warnings

import click

from oai_pipeline.cli.output import FriendlyGroup
from oai_pipeline.harvesters.model import describe_validation_error

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
    "prune",
    "target",
    "sample_endpoint",
)


# Kept for callers of this contract; the one formatter lives with the Harvester model.
format_validation_error = describe_validation_error


@click.group(cls=FriendlyGroup)
@click.version_option(package_name="oai-pipeline")
def main() -> None:
    """Harvest OAI-PMH repositories into a target repository and keep it in sync."""


for _name in _COMMAND_MODULES:
    _module = importlib.import_module(f"oai_pipeline.cli.{_name}")
    main.add_command(getattr(_module, _name.replace("_", "-").replace("-", "_")))
