"""`oai-pipeline sample-endpoint …`: run the OAI-PMH endpoint the project ships."""

from __future__ import annotations

import click

from oai_pipeline.cli.output import FriendlyGroup
from oai_pipeline.sample_endpoint.records import generate_datacite_records
from oai_pipeline.sample_endpoint.server import (
    DEFAULT_SAMPLE_PORT,
    SAMPLE_PORT_ENV,
    serve_forever,
)

_SAMPLE_PAGE_SIZE = 4
_GENERATED_PAGE_SIZE = 100


@click.group(name="sample-endpoint", cls=FriendlyGroup)
def sample_endpoint() -> None:
    """The sample OAI-PMH endpoint: a real HTTP source for the demo, tests and benchmarks."""


@sample_endpoint.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option(
    "--port",
    default=DEFAULT_SAMPLE_PORT,
    show_default=True,
    envvar=SAMPLE_PORT_ENV,
    show_envvar=True,
    type=click.IntRange(0, 65535),
    help="0: any. The demo's harvester `sample` harvests the one on this port.",
)
@click.option(
    "--page-size",
    type=click.IntRange(min=1),
    default=None,
    help=f"Records per list page [default: {_SAMPLE_PAGE_SIZE} for the sample set, "
    f"{_GENERATED_PAGE_SIZE} with --generated].",
)
@click.option(
    "--granularity",
    type=click.Choice(["day", "seconds"]),
    default="seconds",
    show_default=True,
    help="Datestamp granularity announced by Identify.",
)
@click.option(
    "--generated",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Serve N generated DataCite records (2 % deleted) instead of the sample set.",
)
@click.option(
    "--exit-with-parent",
    is_flag=True,
    help="Also stop when the process that started this one ends (./run.sh dev).",
)
def serve(
    host: str,
    port: int,
    page_size: int | None,
    granularity: str,
    generated: int | None,
    exit_with_parent: bool,
) -> None:
    """Serve until Ctrl-C; prints the base URL to harvest."""
    records = None
    if generated is not None:
        click.echo(f"generating {generated} DataCite records …", err=True)
        records = generate_datacite_records(generated)
    if page_size is None:
        page_size = _SAMPLE_PAGE_SIZE if generated is None else _GENERATED_PAGE_SIZE

    def announce(base_url: str) -> None:
        click.echo(base_url)
        click.echo("serving; press Ctrl-C to stop", err=True)

    try:
        serve_forever(
            records,
            on_ready=announce,
            host=host,
            port=port,
            page_size=page_size,
            granularity=granularity,
            exit_with_parent=exit_with_parent,
        )
    except OSError as error:  # port taken, unknown host: a one-line error, not a traceback
        message = f"cannot serve on {host}:{port}: {error.strerror or error}"
        raise click.ClickException(message) from None
    click.echo("stopped", err=True)
