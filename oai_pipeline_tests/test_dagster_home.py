"""Which Dagster home the commands that ask about Dagster runs read (`harvesters rekey`,
`harvesters update`): the one `./run.sh dev` and `harvest --use-job` queue runs in."""

from __future__ import annotations

from pathlib import Path

import pytest

from oai_pipeline import settings as settings_module
from oai_pipeline.settings import holds_dagster_instance


def test_an_unset_dagster_home_is_the_projects_folder_as_for_run_sh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, an unset DAGSTER_HOME meant no instance: rekey did not see the runs queued in
    the project's .dagster_home, which `./run.sh dev` and `harvest --use-job` use then."""
    monkeypatch.setattr(settings_module, "PROJECT_ROOT", tmp_path)
    assert not holds_dagster_instance({})  # never used: nothing to ask
    (tmp_path / ".dagster_home").mkdir()
    assert not holds_dagster_instance({})
    (tmp_path / ".dagster_home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    assert holds_dagster_instance({})

    empty = tmp_path / "elsewhere"
    empty.mkdir()
    assert not holds_dagster_instance({"DAGSTER_HOME": str(empty)})
    (empty / "history").mkdir()  # Dagster's default storage, without a dagster.yaml
    assert holds_dagster_instance({"DAGSTER_HOME": str(empty)})
