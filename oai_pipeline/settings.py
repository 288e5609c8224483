"""Where everything lives. The CLI and the Dagster code location read the same settings."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

PROJECT_ROOT = Path(__file__).resolve().parent.parent


# A run keeps a row per record it staged (~200 bytes): a weekly full harvest of a million
# records would add ~10 GB a year to the state database.
DEFAULT_KEEP_RUN_RECORDS_DAYS = 30
MAX_KEEP_RUN_RECORDS_DAYS = 36_500


class Settings(BaseModel):
    home: Path
    state_db_url: str
    target_db_url: str
    storage_url: str
    # Processes that run the transformer chain of a large transform stage; 1 = in this one.
    transform_workers: int = 1
    # Days a succeeded run keeps its per-record statuses (then only their counts); 0 = always.
    keep_run_records_days: int = DEFAULT_KEEP_RUN_RECORDS_DAYS

    @property
    def fixture_file(self) -> Path:
        """A fixture in the data folder is loaded when the definitions load."""
        return self.home / "oai_harvesters.yaml"


def _sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def default_transform_workers() -> int:
    """One per core this process may use, at most 4: beyond that the stage's own reading
    and writing, on one core, is what takes the time."""
    if hasattr(os, "sched_getaffinity"):
        cores = len(os.sched_getaffinity(0))
    else:  # macOS, Windows
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


# Each worker is a process of ~70 MB that imports the transformers: a typo such as 1000
# would start that many (the stage gains nothing beyond the cores anyway).
MAX_TRANSFORM_WORKERS = 64


def _transform_workers(text: str | None) -> int:
    if not text:
        return default_transform_workers()
    try:
        workers = int(text)
    except ValueError:
        workers = 0
    if not 1 <= workers <= MAX_TRANSFORM_WORKERS:
        from oai_pipeline.errors import ConfigurationError

        raise ConfigurationError(
            "OAI_PIPELINE_TRANSFORM_WORKERS must be a whole number from 1 to "
            f"{MAX_TRANSFORM_WORKERS}, not {text!r}"
        )
    return workers


def _keep_days(text: str | None) -> int:
    if not text:
        return DEFAULT_KEEP_RUN_RECORDS_DAYS
    try:
        days = int(text)
    except ValueError:
        days = -1
    if not 0 <= days <= MAX_KEEP_RUN_RECORDS_DAYS:
        from oai_pipeline.errors import ConfigurationError

        raise ConfigurationError(
            "OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS must be a whole number of days from 0 "
            f"(keep them always) to {MAX_KEEP_RUN_RECORDS_DAYS}, not {text!r}"
        )
    return days


def load_settings(environ: dict[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    home = Path(env.get("OAI_PIPELINE_HOME") or PROJECT_ROOT / ".oai_pipeline_home").resolve()
    return Settings(
        home=home,
        state_db_url=env.get("OAI_PIPELINE_STATE_DB_URL") or _sqlite_url(home / "state.sqlite"),
        target_db_url=env.get("OAI_PIPELINE_TARGET_DB_URL") or _sqlite_url(home / "target.sqlite"),
        storage_url=env.get("OAI_PIPELINE_STORAGE_URL") or str(home / "storage"),
        transform_workers=_transform_workers(env.get("OAI_PIPELINE_TRANSFORM_WORKERS")),
        keep_run_records_days=_keep_days(env.get("OAI_PIPELINE_KEEP_RUN_RECORDS_DAYS")),
    )


def holds_dagster_instance(environ: dict[str, str] | None = None) -> bool:
    """Whether the Dagster home (`dagster_home`) holds an instance: its dagster.yaml, or the
    default storage a home without one gets. Not created for asking: a home never used has
    no runs to ask about."""
    home = dagster_home(environ)
    return (home / "dagster.yaml").is_file() or (home / "history").is_dir()


def dagster_home(environ: dict[str, str] | None = None) -> Path:
    """DAGSTER_HOME, or the project's folder that `./run.sh` and `harvest --use-job` use
    when it is unset."""
    env = os.environ if environ is None else environ
    return Path(env.get("DAGSTER_HOME") or PROJECT_ROOT / ".dagster_home").resolve()


def ensure_dagster_home(environ: dict[str, str] | None = None) -> Path:
    """DAGSTER_HOME, defaulting to a git-ignored folder of the project, with our dagster.yaml."""
    home = dagster_home(environ)
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    shipped = PROJECT_ROOT / "dagster.yaml"
    if not config.exists() and shipped.exists():
        config.write_text(shipped.read_text())
    if environ is None:
        os.environ["DAGSTER_HOME"] = str(home)
    return home
