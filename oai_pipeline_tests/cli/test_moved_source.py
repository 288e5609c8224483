"""`harvesters update ID --base-url NEW` after the source moved: the Identify saved for the
old base URL is not the new one's."""

from __future__ import annotations

from click.testing import CliRunner, Result

from oai_pipeline.cli import main
from oai_pipeline.sample_endpoint.faults import Faults
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline_tests.cli.conftest import create_args
from oai_pipeline_tests.support import shifted_sample_records

RECORDS = shifted_sample_records()


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_a_new_base_url_answering_a_web_page_fails_at_once_not_with_the_old_identify() -> None:
    """Moved to a wrong URL (a home page): before, the old endpoint's Identify stood in for
    the new one's, so the page was waited out as a maintenance page (7 tries of Identify),
    the harvest went on with the old Identify, and failed at the list."""
    with (
        OAIEndpoint(RECORDS) as old,
        OAIEndpoint(RECORDS, faults=Faults(html_error_on=set(range(1, 50)))) as web,
    ):
        args = [*create_args("moved", old.base_url), "--loader", "oai-pmh{backoff_base: 0}"]
        assert run(*args).exit_code == 0
        assert run("harvest", "moved").exit_code == 0
        assert run("harvesters", "update", "moved", "--base-url", web.base_url).exit_code == 0
        shown = run("harvesters", "show", "moved")
        result = run("harvest", "moved")
        asked = web.request_count

    assert "identify:" not in shown.stdout and old.base_url not in shown.output, shown.output
    assert result.exit_code == 1, result.output
    assert "never answered OAI-PMH" in result.stderr, result.stderr
    assert asked == 1


def test_the_identify_of_the_new_base_url_is_saved_and_shown() -> None:
    """A move to the right URL harvests as before, and `show` tells the new Identify."""
    with OAIEndpoint(RECORDS) as old, OAIEndpoint(RECORDS) as new:
        assert run(*create_args("moved", old.base_url)).exit_code == 0
        assert run("harvest", "moved").exit_code == 0
        assert run("harvesters", "update", "moved", "--base-url", new.base_url).exit_code == 0
        result = run("harvest", "moved")
        shown = run("harvesters", "show", "moved")

    assert result.exit_code == 0, result.output
    assert "identify:" in shown.stdout and "warning" not in shown.output.lower(), shown.output
    assert "\n  admin: oai-pipeline@example.org" in shown.stdout  # whom to write to
