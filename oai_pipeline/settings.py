"""Where everything lives. The CLI and the Dagster code location read the same settings."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class Settings(BaseModel):
    home: Path
    state_db_url: str
    target_db_url: str
    storage_url: str

    @property
    def fixture_file(self) -> Path:
        """A fixture in the data folder is loaded when the definitions load."""
        return self.home / "oai_harvesters.yaml"


def _sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def load_settings(environ: dict[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    home = Path(env.get("OAI_PIPELINE_HOME") or PROJECT_ROOT / ".oai_pipeline_home").resolve()
    return Settings(
        home=home,
        state_db_url=env.get("OAI_PIPELINE_STATE_DB_URL") or _sqlite_url(home / "state.sqlite"),
        target_db_url=env.get("OAI_PIPELINE_TARGET_DB_URL") or _sqlite_url(home / "target.sqlite"),
        storage_url=env.get("OAI_PIPELINE_STORAGE_URL") or str(home / "storage"),
    )


def ensure_dagster_home(environ: dict[str, str] | None = None) -> Path:
    """DAGSTER_HOME, defaulting to a git-ignored folder of the project, with our dagster.yaml."""
    env = os.environ if environ is None else environ
    home = Path(env.get("DAGSTER_HOME") or PROJECT_ROOT / ".dagster_home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    shipped = PROJECT_ROOT / "dagster.yaml"
    if not config.exists() and shipped.exists():
        config.write_text(shipped.read_text())
    if environ is None:
        os.environ["DAGSTER_HOME"] = str(home)
    return home
