"""Every environment variable the project reads is one the README tells operators of."""

from __future__ import annotations

import re

from oai_pipeline.settings import PROJECT_ROOT

VARIABLE = re.compile(r"\b(?:OAI_PIPELINE|DAGSTER)_[A-Z0-9_]*[A-Z0-9]\b")


def _read_by_the_project() -> set[str]:
    sources = [*(PROJECT_ROOT / "oai_pipeline").rglob("*.py"), PROJECT_ROOT / "run.sh"]
    return {name for path in sources for name in VARIABLE.findall(path.read_text("utf-8"))}


def test_every_variable_the_code_reads_is_in_the_readme_and_none_it_names_is_gone() -> None:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    tests = {
        name
        for path in (PROJECT_ROOT / "oai_pipeline_tests").rglob("*.py")
        for name in VARIABLE.findall(path.read_text("utf-8"))
    }
    ours = _read_by_the_project()
    named = set(re.findall(r"`(OAI_PIPELINE_[A-Z0-9_]*[A-Z0-9])", readme))

    assert {name for name in ours if f"`{name}" not in readme} == set()
    # an OAI_PIPELINE_ variable the README names is read by the code (or by the test suite)
    assert named - ours - tests == set()


def test_the_schema_versions_the_readme_names_are_the_current_ones() -> None:
    """Before, its upgrade message said `… to 22` while the state store was at version 23."""
    from oai_pipeline.state.schema import SCHEMA_VERSION as STATE_VERSION
    from oai_pipeline.targets.embedded.schema import SCHEMA_VERSION as TARGET_VERSION

    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    upgraded_to = re.findall(r"upgraded from schema version \d+ to (\d+)", readme)
    target_schema = re.findall(r"target schema (\d+)", readme)

    assert upgraded_to and {int(v) for v in upgraded_to} == {STATE_VERSION}
    assert target_schema and {int(v) for v in target_schema} == {TARGET_VERSION}
