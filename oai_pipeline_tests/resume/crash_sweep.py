"""Crash sweep: kill a real CLI harvest at deterministic points, rerun it, compare the result.

Not a test (it takes minutes); `test_crash_points.py` runs a small deterministic slice of the
same fault points in CI. Run it by hand whenever the write path, the state store or the
Parquet storage changes:

    .venv/bin/python -m oai_pipeline_tests.resume.crash_sweep \\
        [--records 2000] [--page-size 100] [--batch-size 50] \\
        [--scenario first|incremental|prefix|reconcile|reidentify|rekey|both|all] \\
        [--backend sqlite|postgres|both] \\
        [--points all|NAME[,NAME…]] [--per-point 4] [--double] [--resumed] \\
        [--resumed-at discover,transform,plan,write,undo] [--dagster] [--source-moves-on]
        [--writers 1|2] [--failing-records] [--fails-first [source|target]] [--drafts]
        [--deposits] [--target-full-after K] [--json-out PATH]

How it works. The shipped OAI-PMH endpoint serves generated DataCite records (with
deletions) from this process. A reference home is harvested without interruption. Then, for
every fault point, a fresh home (a copy of the reference's starting state) is harvested by
`oai-pipeline harvest` in a child process that exits with `os._exit(137)` (no cleanup, no
`finally`, like SIGKILL) right before or right after the k-th call of one function: a state
store write, a target batch, a Parquet part or manifest write (`write_part:mid` leaves a
half-written temporary file), a page fetch, the lease, a transform batch. The harvest is
then rerun (with `--double`, killed once more at another point first) until it succeeds,
and the final target, harvest records, run status and `status --json` are compared with
the reference's: same live records with the same data and DOIs, same tombstones, no
duplicate, no record written twice (revisions), no run left `running`, no lease left, no
`.tmp` file under the storage root that the final run's partitions depend on.

`--dagster` harvests through in-process Dagster runs of the four assets over the grid's
daily windows (`materialize_windows`, as the demo does) instead of the CLI: the partitions
are then rewritten in place run after run, so a half-written part or manifest is in the
folder the rerun writes into; each grid partition's manifest and records are compared too.

Scenarios: `first` is the first full harvest of a fresh home; `incremental` is a second
harvest (`--since`) after the source changed (updates, new records, deletions, records moved
to other sets with and without a new datestamp) and users changed some of the target's
records (edited, deleted: the harvest brings them back) of a home that had harvested
everything before. `--resumed` sweeps each scenario once more with its harvest killed
first (INTERRUPTION): the harvest swept then resumes that run. The reference must also hold
the sets the source serves (a set change lost alike with and without a crash). `prefix` is
the harvest after `harvesters update --metadata-prefix` (oai_datacite to datacite, the source
serving both; some records only in the old format, some saying another title in the new:
`retitled_in_new_format`) of a home that harvested everything before: every record listed
again in the new format is staged again (state v24's `harvesters.prefix_changed`), those it
says otherwise written again (`prefix_problems`, the reference's too). `reconcile`
(CLI only) is `oai-pipeline reconcile` of a home in step with a source that keeps no
deletions: it deletes the records the source dropped and harvests again those an earlier
reconcile deleted that the source lists again. `reidentify` (CLI only) is a source that
listed every record (with a DOI) again under a new namespace, each new identifier refused
its DOI by the harvest after: swept, the harvest that lists the old identifiers' deletions
(a later day) and hands their target records to the new ones, and the reconcile that does
it for a source keeping no deletions (`reidentified_problems`: the same target ids under the
new identifiers, one live record per DOI, nothing failed; the report's `reidentified` is the
run's, a killed attempt's unrecorded take-overs `already_written`). `rekey` (CLI only) is a
DSpace of handles moved to a new host: `harvesters rekey` killed before, between and after
its two stores and rerun, then the harvest; and the first harvest after a rekey, swept
(`rekeyed_problems`: the same target ids, nothing created, no new revision). Backends:
SQLite files (default) or a throwaway PostgreSQL server (oai_pipeline_tests/postgres.py)
for the state store and the target.

`--writers 2` (not `reidentify` nor `rekey`) gives the harvester a second writer, the
embedded writer into a target database of its own (mirror_writer.py): both targets and each
writer's memory (`writer_memories`, and which writer's is on the harvest record) are compared
with the reference's, a kill may fall between the two writers' batches (`writer_apply`
counts both). `--failing-records` (same scenarios) sends the records of REFUSED_SET to a
community the last writer's target lacks, which refuses them (`missing_community`; with two
writers the first takes them): with the records no transformer reads (always there), their
errors, `failed` statuses, the report's errors and the run's status are compared, and every
home (the reference's too) must hold both kinds of failure (`variant_problems`).

`--fails-first` (`first` and `incremental`, CLI, either backend): the harvest
fails outright first, the source refusing its list from about half the pages an uninterrupted
harvest lists (HTTP 403, `Faults.refuse_list_from_cursor`; `what_fails_first`), then the
source recovers and the harvest is rerun. The reference is that uninterrupted fail-then-rerun.
Each point is swept in the failing run (`failing/NAME:K:MOMENT`: killed, rerun on the still
failing source, which must end its run as the uninterrupted failure did, then rerun on the
recovered one) and in the rerun (from the home the uninterrupted failure left).
`--fails-first target` (SQLite): the target's disk is full after half the target batches
(`target_full`, SQLITE_FULL); with `--writers 2` the mirror's file is on the same full disk,
capped at its size at that moment too (the writers write a group one after the other: half
the batches may be all the first writer's, the mirror then refused from its first batch).
`--target-full-after K`: the target's disk is full after its K-th batch instead, the mirror
on another disk with room: with K below the first writer's batches of a group, the FIRST
writer fails part-way, some of its batches committed, the mirror's none.

`--points` names fault points (see POINTS; `--list` prints them with their call counts):
each is tried at `--per-point` call numbers spread over the calls the uninterrupted harvest
makes (first, last, and between), before and after the call; NAME:K:MOMENT is one crash.

`--source-moves-on` (`first` and `incremental`, CLI or `--dagster` (the grid then of the
last weeks up to today's window, where the change is dated), either backend, with
`--resumed`: the run interrupted on the unchanged source, then killed at the point): after
each point's kill, before the rerun, the source changes (`SourceMove`: records of the run's
first page updated and deleted, records added before any resumption token, all dated now),
so that a resumed run's catch-up list (`discover._catch_up_from`) has to find them. The
rerun is compared, by the same code, with a harvest of the changed source from the same
starting home (what the killed attempt wrote of the changed records before the change is
written again, a deletion a tombstone: `moved_on_view`), and its report's catch-up counters
with those the change and the state the killed attempt left make (`expected_catch_up`); the
source is then changed back.

With `--scenario reconcile` (CLI, either backend) the change is `ReconcileMove`: records the
reconcile deletes listed again, records it harvests again dropped again, live ones dropped.
The rerun is compared with a fresh reconcile of the changed source from the same starting
home (the records the change touched written twice: revisions and written fields left out),
its report with the fresh one's plus what the killed attempt did, as the state it left says
(`expected_moved_on_reconcile`).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from oai_pipeline_tests import forked_python

HARVESTER = "gen"
PREFIX = "oai_datacite"
NEW_PREFIX = "datacite"  # `--scenario prefix`: the harvester's prefix after the change
NEW_FORMAT_SAYS = b" (as the new format says)"  # `retitled_in_new_format`
# `--writers 2`: the second writer (mirror_writer.py), a target database of its own
MIRROR, MIRROR_DB_URL_ENV = "mirror-service", "CRASH_SWEEP_MIRROR_DB_URL"
# `--failing-records`: the records of this set go to a community (the transformer's
# `set_communities`) that a writer's target lacks, which refuses them (missing_community):
# the target's with one writer, the mirror's with two (the first writer takes them)
REFUSED_SET, REFUSED_COMMUNITY = "user-hep", "hep"
EXIT_CODE = 137  # what a SIGKILLed process reports to its shell
# `--fails-first target`: the SQLite pages the target's disk holds (see `fill_target_at`),
# and the mirror's (`--writers 2`: both files on the one full disk)
TARGET_MAX_PAGES_ENV = "CRASH_SWEEP_TARGET_MAX_PAGES"
MIRROR_MAX_PAGES_ENV = "CRASH_SWEEP_MIRROR_MAX_PAGES"
# Where `--resumed` kills a scenario's harvest first: after its second target batch, the
# run half done (staged, transformed, partly written); the harvest swept resumes it.
INTERRUPTION = "writer_apply:2:after"
# `--resumed-at STAGE,…`: the stage the first harvest is killed in (the run then resumed).
INTERRUPTIONS: dict[str, str] = {
    "discover": "stage:2:after",  # two pages staged, the list not finished
    "transform": "save_transformed:1:after",  # the first transform batch saved
    "plan": "lookup:1:after",  # the plan's first lookup of the target's records
    "write": INTERRUPTION,
    "undo": "changed_locally:1:after",  # every batch written, the local changes not undone
}
# The incremental scenario harvests from here (the last day of the first harvest's records):
# it lists again the records of that day whose sets changed without a new datestamp.
RELISTED_SINCE = datetime(2024, 1, 7, tzinfo=UTC)

# name -> (module, attribute path): the function a crash is injected around.
POINTS: dict[str, tuple[str, str]] = {
    "identify": ("oai_pipeline.state.store", "StateStore.save_identify"),
    "create_run": ("oai_pipeline.state.store", "StateStore.create_run"),
    "resume_run": ("oai_pipeline.state.store", "StateStore.resume_run"),
    "save_checkpoint": ("oai_pipeline.state.store", "StateStore.save_checkpoint"),
    "save_response_date": ("oai_pipeline.state.store", "StateStore.save_response_date"),
    "list_page": ("oai_pipeline.oai.client", "OAIClient.list_page"),
    "stage": ("oai_pipeline.state.store", "StateStore.stage"),
    "update_counters": ("oai_pipeline.state.store", "StateStore.update_counters"),
    "reconcile_counters": ("oai_pipeline.state.store", "StateStore.reconcile_counters"),
    "storage_begin": ("oai_pipeline.storage", "PartitionStore.begin"),
    "write_part": ("oai_pipeline.storage", "PartitionStore.write_part"),
    "storage_finish": ("oai_pipeline.storage", "PartitionStore.finish"),
    "write_manifest": ("oai_pipeline.storage", "PartitionStore.write_manifest"),
    "transform_chain": ("oai_pipeline.pipeline.transform_workers", "ChainBatch.result"),
    "save_transformed": ("oai_pipeline.state.store", "StateStore.save_transformed"),
    "claim": ("oai_pipeline.state.store", "StateStore.claim"),
    "writer_apply": ("oai_pipeline.targets.embedded.writer", "EmbeddedWriter.apply"),
    "save_written": ("oai_pipeline.state.store", "StateStore.save_written"),
    "save_write_outcomes": ("oai_pipeline.state.store", "StateStore.save_write_outcomes"),
    "mark_gone": ("oai_pipeline.state.store", "StateStore.mark_gone"),
    "changed_locally": ("oai_pipeline.targets.embedded.writer", "EmbeddedWriter.changed_locally"),
    "lookup": ("oai_pipeline.targets.embedded.writer", "EmbeddedWriter.lookup"),
    # the records refused a DOI that a re-identified record's tombstone may now give them
    # (pipeline/reidentified.py; their writes are writer_apply and save_write_outcomes)
    "refused_a_pid": ("oai_pipeline.state.store", "StateStore.refused_a_pid"),
    "finish_run": ("oai_pipeline.state.store", "StateStore.finish_run"),
    # `harvesters rekey`: the target's rewrite of a prefix, then the state store's
    # (pipeline/rekey.py); killed between them, a rerun finishes the job
    "rekey_target": ("oai_pipeline.targets.embedded.writer", "EmbeddedWriter.rekey"),
    "rekey_state": ("oai_pipeline.state.store", "StateStore.rekey"),
    "start_reconcile_run": ("oai_pipeline.state.store", "StateStore.start_reconcile_run"),
    "finish_reconcile_run": ("oai_pipeline.state.store", "StateStore.finish_reconcile_run"),
    # the vanished records GetRecord did not confirm gone, for the next reconcile's order
    "save_reconcile_kept": ("oai_pipeline.state.store", "StateStore.save_reconcile_kept"),
    "prune_run_records": ("oai_pipeline.state.store", "StateStore.prune_run_records"),
    "lock_acquire": ("oai_pipeline.state.harvester_lock", "HarvesterLock.try_acquire"),
    "lock_release": ("oai_pipeline.state.harvester_lock", "HarvesterLock.release"),
}
# Points with a third moment, "mid": the call is cut half way (see `_mid`).
MID_POINTS = {"write_part", "write_manifest"}
# SQL statements (any engine) a crash is injected around, by what their text says.
SQL_POINTS: dict[str, Callable[[str], bool]] = {
    # the write stage's per-record run statuses (not a claim, which sets claimed_at)
    "sql_run_status": lambda sql: sql.startswith("UPDATE run_records") and "claimed_at" not in sql,
    # the write stage's outcomes on the harvest records
    "sql_written_outcome": lambda sql: (
        sql.startswith("UPDATE harvest_records") and "last_written_at" in sql
    ),
}


# ------------------------------------------------------------------ the child's fault hook


def _resolve(module_name: str, path: str) -> tuple[Any, str]:
    import importlib

    owner: Any = importlib.import_module(module_name)
    *parents, name = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    return owner, name


def _die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_CODE)


def _mid(point: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """The call cut half way: a part or manifest whose temporary file holds half its bytes,
    the file it replaces already renamed away (what `_write_local` leaves when killed)."""
    from oai_pipeline import storage as storage_module

    def cut(self: Any, asset: str, harvester_id: str, window: str, *rest: Any) -> Any:
        real = storage_module.os.replace

        def replace(src: str, dst: str) -> None:
            with open(src, "r+b") as handle:
                size = len(handle.read())
                handle.truncate(size // 2)
            _die()

        storage_module.os.replace = replace  # type: ignore[attr-defined]
        try:
            return original(self, asset, harvester_id, window, *rest)
        finally:
            storage_module.os.replace = real  # type: ignore[attr-defined]

    return cut


def _install_sql_fault(name: str, k: int) -> None:
    """Die before the k-th statement SQL_POINTS[name] matches (its transaction uncommitted)."""
    import sqlalchemy as sa

    matches = SQL_POINTS[name]
    calls = 0

    def before(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        nonlocal calls
        if matches(statement.lstrip()):
            calls += 1
            if calls == k:
                _die()

    sa.event.listen(sa.Engine, "before_cursor_execute", before)


def install_fault(spec: str) -> None:
    """`spec` = name:k:moment (moment: before, after, mid): die at the k-th call of POINTS[name]
    (for SQL_POINTS, before the k-th matching statement)."""
    name, k_text, moment = spec.split(":")
    k = int(k_text)
    if name in SQL_POINTS:
        _install_sql_fault(name, k)
        return
    owner, attribute = _resolve(*POINTS[name])
    original = getattr(owner, attribute)
    calls = 0
    cut = _mid(name, original) if moment == "mid" else None

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls != k:
            return original(*args, **kwargs)
        if moment == "before":
            _die()
        if cut is not None:
            return cut(*args, **kwargs)
        result = original(*args, **kwargs)
        _die()
        return result

    setattr(owner, attribute, wrapper)


def install_counters(path: str) -> None:
    """Count the calls of every fault point; written to `path` (JSON) at exit."""
    import atexit

    counts: Counter[str] = Counter()
    for name, (module_name, attribute_path) in POINTS.items():
        owner, attribute = _resolve(module_name, attribute_path)
        original = getattr(owner, attribute)

        def wrapper(*args: Any, _o: Any = original, _n: str = name, **kwargs: Any) -> Any:
            counts[_n] += 1
            return _o(*args, **kwargs)

        setattr(owner, attribute, wrapper)
    import sqlalchemy as sa

    def count_sql(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        for name, matches in SQL_POINTS.items():
            if matches(statement.lstrip()):
                counts[name] += 1

    sa.event.listen(sa.Engine, "before_cursor_execute", count_sql)
    atexit.register(lambda: Path(path).write_text(json.dumps(counts)))


def dagster_child(argv: list[str]) -> None:
    """`crash_sweep dagster-child SPEC FIRST_WINDOW LAST_WINDOW`: one in-process Dagster run
    of the four assets (and checks) over the windows, with a fault installed."""
    spec, first, last = argv
    prepare_child(spec)
    import dagster as dg

    from oai_pipeline.defs.launch import materialize_windows
    from oai_pipeline.settings import ensure_dagster_home

    ensure_dagster_home()
    with dg.DagsterInstance.get() as instance:
        result = materialize_windows(
            instance, HARVESTER, first, last, raise_on_error=False, log_level="WARNING"
        )
        if result.success:
            print(json.dumps(dagster_report(result)))
    sys.exit(0 if result.success else 1)


def dagster_report(result: Any) -> dict[str, Any]:
    """What a user reads of a Dagster run, as the CLI's `--json` report tells it: the run
    totals each asset observes (`RUN_TOTALS`): discovery's records, deletions and cap; the
    written records' actions and errors, the local changes undone, and the harvest run's
    records per status (`status_records_…`)."""

    from oai_pipeline.defs.assets import RUN_TOTALS
    from oai_pipeline.state.schema import CATCH_UP_COUNTERS

    totals: dict[str, dict[str, Any]] = {}
    for event in result.all_events:
        if not event.is_asset_observation:
            continue
        observation = event.asset_observation_data.asset_observation
        if observation.description == RUN_TOTALS:
            totals[observation.asset_key.to_user_string()] = {
                key: value.value
                for key, value in observation.metadata.items()
                if isinstance(value.value, int | float | str | bool)
            }
    raw, written = totals.get("raw_oai_xml", {}), totals.get("written_records", {})

    def prefixed(prefix: str) -> dict[str, int]:
        return {k.removeprefix(prefix): v for k, v in written.items() if k.startswith(prefix)}

    actions = Counter(prefixed("run_action_"))
    return {
        "dagster": True,
        "harvest_runs": written.get("harvest_runs"),
        "harvested": raw.get("run_record_count"),
        "deleted_at_source": raw.get("run_deleted_at_source"),
        "cap_reached": raw.get("cap_reached"),
        "created": actions["create"],
        "updated": sum(actions[a] for a in ("update", "publish_draft", "restore", "revive")),
        "deleted": actions["delete"] + actions["delete_draft"],
        "unchanged": actions["skip"] + actions["nothing"],
        "actions": dict(actions),
        "errors": written.get("run_error_count"),
        "error_types": prefixed("run_errors_"),
        "local_changes_undone": written.get("run_local_changes_undone"),
        # the harvest run's take-overs of freed DOIs (reidentified.py), all its attempts
        "reidentified": written.get("reidentified"),
        # a resumed run's catch-up list, as the harvest report counts it
        **{name: raw.get(f"run_{name}") for name in CATCH_UP_COUNTERS},
        "run_records": prefixed("status_records_"),
        "harvest_run_status": written.get("status_harvest_run_status"),
    }


def fill_target_at(max_pages: int, mirror_max_pages: int | None = None) -> None:
    """`--fails-first target`: the target's SQLite file may grow to `max_pages` pages, then
    SQLite itself refuses the write (SQLITE_FULL, `database or disk is full`), as a full
    disk does: the project's own handling of it (`explain_refused_writes`) is what runs.
    `mirror_max_pages` (`--writers 2`): the mirror's file is on the same full disk."""
    import sqlalchemy as sa

    from oai_pipeline.settings import load_settings
    from oai_pipeline_tests.support import cap_sqlite_file

    target = sa.make_url(load_settings().target_db_url).database
    if target:
        cap_sqlite_file(Path(target), max_pages)
    mirror = sa.make_url(os.environ[MIRROR_DB_URL_ENV]).database
    if mirror_max_pages is not None and mirror:
        cap_sqlite_file(Path(mirror), mirror_max_pages)


def prepare_child(spec: str) -> None:
    """A child's fault (or its counters) installed, and the target's disk full at
    TARGET_MAX_PAGES_ENV pages when set (a CLI or a Dagster child alike)."""
    if max_pages := os.environ.get(TARGET_MAX_PAGES_ENV):
        mirror_pages = os.environ.get(MIRROR_MAX_PAGES_ENV)
        fill_target_at(int(max_pages), int(mirror_pages) if mirror_pages else None)
    if spec.startswith("count:"):
        install_counters(spec.removeprefix("count:"))
    elif spec != "none":
        install_fault(spec)


def child(argv: list[str]) -> None:
    """`crash_sweep child SPEC|count:PATH|none -- CLI ARGS…`: the CLI with a fault installed
    (and the target's disk full at TARGET_MAX_PAGES_ENV pages, when set)."""
    spec, cli_args = argv[0], argv[2:]
    prepare_child(spec)
    from oai_pipeline.cli import main

    main(cli_args, prog_name="oai-pipeline")


# ------------------------------------------------------------------------ the parent


@dataclasses.dataclass
class Home:
    path: Path
    env: dict[str, str]


class Backend:
    """Where a home's state store and target live: SQLite files, or PostgreSQL databases."""

    name = "sqlite"

    def new_home(self, root: Path, name: str, template: Home | None = None) -> Home:
        path = root / name
        if template is not None:
            shutil.copytree(template.path, path)
        else:
            path.mkdir(parents=True)
        return Home(path, _base_env(path))

    def close(self) -> None:
        pass


class PostgresBackend(Backend):
    name = "postgres"

    def __init__(self) -> None:
        from oai_pipeline_tests.postgres import throwaway_postgres

        self._context = throwaway_postgres()
        url = self._context.__enter__()
        self.server = url.rsplit("/", 1)[0]
        import sqlalchemy as sa

        self._admin = sa.create_engine(f"{self.server}/postgres", isolation_level="AUTOCOMMIT")

    def _database(self, name: str, template: str | None) -> str:
        with self._admin.connect() as connection:
            # a template must have no connection: end those a killed child left behind
            if template:
                connection.exec_driver_sql(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    f"WHERE datname = '{template}'"
                )
            extra = f" TEMPLATE {template}" if template else ""
            connection.exec_driver_sql(f"CREATE DATABASE {name}{extra}")
        return f"{self.server}/{name}"

    def new_home(self, root: Path, name: str, template: Home | None = None) -> Home:
        home = super().new_home(root, name, template)
        safe = name.replace("-", "_").replace(":", "_").lower()
        env = dict(home.env)
        for kind, variable in _DATABASES.items():
            source = None
            if template is not None:
                source = template.env[variable].rsplit("/", 1)[1]
            env[variable] = self._database(f"{kind}_{safe}", source)
        return Home(home.path, env)

    def close(self) -> None:
        self._admin.dispose()
        self._context.__exit__(None, None, None)


# Each home's databases, by the environment variable naming them.
_DATABASES = {
    "state": "OAI_PIPELINE_STATE_DB_URL",
    "target": "OAI_PIPELINE_TARGET_DB_URL",
    "mirror": MIRROR_DB_URL_ENV,
}


def _base_env(path: Path) -> dict[str, str]:
    """A home's environment: its own state, target and mirror (`--writers 2`), and the
    mirror's plug-in (installed in the home, so a copy has it)."""
    from oai_pipeline_tests.resume.mirror_writer import install_mirror

    env = {k: v for k, v in os.environ.items() if not k.startswith("OAI_PIPELINE_")}
    env["OAI_PIPELINE_HOME"] = str(path)
    site = path / "plugins"
    if not site.exists():
        install_mirror(site)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    env[MIRROR_DB_URL_ENV] = f"sqlite:///{path / 'mirror.sqlite'}"
    env["DAGSTER_HOME"] = str(path / "dagster_home")
    env["OAI_PIPELINE_CONTACT"] = "crash-sweep@example.org"
    return env


def _cli(home: Home, spec: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    """`oai-pipeline ARGS` with the fault SPEC; ARGS `dagster FIRST LAST`: a Dagster run."""
    if args[0] == "dagster":
        child_args = ["dagster-child", spec, *args[1:]]
    else:
        child_args = ["child", spec, "--", *args]
    return forked_python.run_module(
        "oai_pipeline_tests.resume.crash_sweep", child_args, home.env, timeout=900
    )


def _settings(home: Home) -> Any:
    from oai_pipeline.settings import load_settings

    return load_settings({k: v for k, v in home.env.items() if k.startswith("OAI_PIPELINE_")})


def query(url: str, sql: str) -> list[Any]:
    """The rows of one SQL statement against a home's database (its state or its target)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(sql)))
    finally:
        engine.dispose()


def register_harvester(
    home: Home,
    base_url: str,
    batch_size: int,
    metadata_prefix: str = PREFIX,
    *,
    writers: int = 1,
    failing_records: bool = False,
    drafts: bool = False,
) -> None:
    """The swept harvester; `writers=2`: the mirror (mirror_writer.py) its second writer;
    `failing_records`: the records of REFUSED_SET refused by its last writer; `drafts`: its
    writer leaves drafts (`publish: false`)."""
    from oai_pipeline.harvesters.plugins import RDM_MODEL
    from oai_pipeline.pipeline.services import Services
    from oai_pipeline.targets.embedded.repository import EmbeddedRepository
    from oai_pipeline_tests.support import register

    settings = _settings(home)
    transformer = RDM_MODEL.transformer
    if failing_records:
        communities = json.dumps({REFUSED_SET: REFUSED_COMMUNITY})
        transformer = f'oai-import{{model:"rdm",set_communities:{communities}}}'
    harvester = register(
        settings,
        base_url,
        harvester_id=HARVESTER,
        metadata_prefix=metadata_prefix,
        batch_size=batch_size,
        transformer=transformer,
        writer='oai-service{model:"rdm", publish:false}' if drafts else None,
    )
    if writers == 2:
        with Services(settings) as services:
            mirrored = [*harvester.writers, f'{MIRROR}{{model:"rdm"}}']
            services.state.save_harvester(harvester.model_copy(update={"writers": mirrored}))
        if failing_records:  # the first writer's target takes them, the mirror refuses them
            repository = EmbeddedRepository(settings.target_db_url)
            try:
                repository.create_community(REFUSED_COMMUNITY)
            finally:
                repository.close()


DOI_IN_DATACITE = re.compile(rb'identifierType="DOI">([^<]+)<')


def deposit_dois(home: Home, records: list[Any], every: int = 3) -> None:
    """Users' published deposits of every `every`-th live record's DOI, before the first
    harvest: the harvest takes them over (each deposit becomes the harvested record)."""
    from oai_pipeline.targets.embedded.repository import EmbeddedRepository

    repository = EmbeddedRepository(_settings(home).target_db_url)
    try:
        for number, record in enumerate(records):
            if record.deleted or number % every or PREFIX not in record.metadata:
                continue
            if (found := DOI_IN_DATACITE.search(record.metadata[PREFIX])) is None:
                continue
            doi = found.group(1).decode()
            deposit = {"metadata": {"title": f"Deposit of {doi}"}}
            deposit["pids"] = {"doi": {"identifier": doi, "provider": "external"}}
            repository.deposit(deposit, publish=True)
    finally:
        repository.close()


def snapshot(home: Home, run_id: int | None = None) -> dict[str, Any]:
    """Everything a crash must not change, free of ids and clocks; `run_id`: the run whose
    per-record statuses count (default: the latest; a crash after a run succeeded makes the
    rerun a new run, all unchanged)."""
    import sqlalchemy as sa

    settings = _settings(home)
    target, by_id = _target_rows(settings.target_db_url)
    mirror, mirror_by_id = _target_rows(home.env[MIRROR_DB_URL_ENV])
    state = sa.create_engine(settings.state_db_url)
    try:
        with state.connect() as conn:
            harvest_records = [
                dict(r._mapping) for r in conn.execute(sa.text("SELECT * FROM harvest_records"))
            ]
            stored_xml = {
                r[0]: hashlib.sha1(bytes(r[1])).hexdigest()[:12]
                for r in conn.execute(sa.text("SELECT identifier, xml FROM harvest_record_xml"))
            }
            errors = sorted(
                tuple(r)
                for r in conn.execute(sa.text("SELECT identifier, stage, type FROM record_errors"))
            )
            runs = [
                dict(r._mapping)
                for r in conn.execute(sa.text("SELECT * FROM harvest_runs ORDER BY id"))
            ]
            last = runs[-1]["id"] if run_id is None else run_id
            run_statuses = Counter(
                r[0]
                for r in conn.execute(
                    sa.text("SELECT status FROM run_records WHERE run_id = :r"), {"r": last}
                )
            )
            locks = conn.execute(sa.text("SELECT count(*) FROM harvester_locks")).scalar_one()
            memories = [
                dict(r._mapping) for r in conn.execute(sa.text("SELECT * FROM writer_memories"))
            ]
    finally:
        state.dispose()

    def source_of(local_id: str | None, records: dict[str, dict[str, Any]]) -> str:
        """A target id as the OAI identifier it holds (ids differ from home to home)."""
        return (records[local_id]["source_identifier"] if local_id in records else local_id) or ""

    state_rows = sorted(
        (
            r["identifier"],
            r["datestamp"],
            bool(r["deleted"]),
            r["pid"] or "",
            source_of(r["local_id"], by_id),
            r["written_revision"] or 0,
            r["written_datestamp"] or "",
            r["written_fingerprint"] or "",
            # what staging keeps of a record listed again as stored (its sets, whether it
            # vanished, its XML) and whether any harvest stamped it
            _digest(r["set_specs"]),
            r["gone_at"] is None,
            r["last_harvested_at"] is None,
            stored_xml.get(r["identifier"], ""),
            r["transformed_datestamp"] or "",
        )
        for r in harvest_records
    )
    storage = Path(settings.storage_url)
    tmp_files = sorted(str(p.relative_to(storage)) for p in storage.rglob("*.tmp"))
    partitions = _partitions(settings.storage_url)
    # the memories of the writers but the one whose memory is on the harvest record, and
    # which one that is
    writer_memories = sorted(
        [
            *(
                (
                    r["identifier"],
                    r["writer"],
                    source_of(r["local_id"], mirror_by_id if r["writer"] == MIRROR else by_id),
                    r["written_revision"] or 0,
                    r["written_datestamp"] or "",
                    r["written_fingerprint"] or "",
                )
                for r in memories
            ),
            *(
                (r["identifier"], "on the harvest record", r["written_by"] or "")
                for r in harvest_records
            ),
        ]
    )
    return {
        "target": target,
        "mirror": mirror,
        "duplicates": _duplicates(by_id) + _duplicates(mirror_by_id),
        "harvest_records": state_rows,
        "writer_memories": writer_memories,
        "errors": errors,
        "last_run_status": runs[-1]["status"],
        "unfinished_runs": [r["id"] for r in runs if r["status"] == "running"],
        "run_record_statuses": dict(sorted(run_statuses.items())),
        "locks": int(locks),
        "tmp_files": tmp_files,
        "partitions": partitions,
        "last_run_id": last,
    }


def _target_rows(url: str) -> tuple[list[tuple[Any, ...]], dict[str, dict[str, Any]]]:
    """A target's records as `snapshot` compares them (none in a target never written, e.g.
    a mirror without `--writers 2`), and the records by target id."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        if not sa.inspect(engine).has_table("target_records"):
            return [], {}
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT * FROM target_records"))
            records = [dict(r._mapping) for r in rows]
            revisions = Counter(
                r[0] for r in conn.execute(sa.text("SELECT record_id FROM target_revisions"))
            )
            rows = conn.execute(sa.text("SELECT record_id, kind, data FROM target_drafts"))
            drafts = {r[0]: f"{r[1]} {_digest(r[2])}" for r in rows}
    finally:
        engine.dispose()
    target_rows = sorted(
        (
            r["source_identifier"] or "",
            r["state"],
            r["doi"] or "",
            int(r["revision"]),
            revisions[r["id"]],
            _digest(r["data"]),
            r["tombstone_note"] or "",
            bool(r["purge"]),
            drafts.get(r["id"], ""),
        )
        for r in records
    )
    return target_rows, {r["id"]: r for r in records}


def _duplicates(records: dict[str, dict[str, Any]]) -> list[str]:
    """The source records a target holds more than once."""
    sources = Counter((r["source_harvester"], r["source_identifier"]) for r in records.values())
    return sorted(f"{k}" for k, n in sources.items() if n > 1)


def variant_problems(writers: int, failing_records: bool) -> Callable[[Home], list[str]] | None:
    """What `--writers 2` and `--failing-records` must leave in a home after its harvest
    (the reference's too, so that a sweep cannot pass without the path it is for): the
    mirror written and its writer's memory kept; records failed in the transform stage and
    refused by the last writer (missing_community), each error on its harvest record."""
    if writers == 1 and not failing_records:
        return None

    def check(home: Home) -> list[str]:
        got = snapshot(home)
        problems = []
        if writers == 2 and not any(row[1] == "live" for row in got["mirror"]):
            problems.append("the mirror holds no live record")
        if writers == 2 and not any(row[1] == MIRROR for row in got["writer_memories"]):
            problems.append(f"no memory of the {MIRROR} writer's writes")
        stages = Counter((stage, kind == "missing_community") for _, stage, kind in got["errors"])
        if failing_records and not (stages[("transform", False)] and stages[("write", True)]):
            problems.append(f"not both a transform and a write failure: {dict(stages)}")
        return problems

    return check


def _partitions(storage_url: str) -> dict[str, Any]:
    """Each grid partition (not an ad-hoc CLI run's, whose key is new every run) as a reader
    sees it: whether it has a manifest, and the identifiers and actions its parts hold."""
    from oai_pipeline.storage import PartitionStore

    store = PartitionStore(storage_url)
    found: dict[str, Any] = {}
    root = Path(storage_url)
    for folder in sorted(root.glob("*/*/*")):
        asset, harvester, window = folder.parts[-3:]
        if window.startswith("adhoc-"):
            continue
        frame = store.read_partition(asset, harvester, window)
        manifest = store.read_manifest(asset, harvester, window)
        rows: list[str] = []
        if frame is not None:
            # not the actions: a rerun plans against the target as the crash left it, and
            # labels what an earlier attempt wrote `already_written`
            columns = [c for c in ("identifier", "writer", "deleted") if c in frame.columns]
            rows = sorted(str(row) for row in frame.select(columns).iter_rows())
        found[f"{asset}/{window}"] = {
            # present or not (its run id: a crash after the run succeeded makes the rerun
            # a harvest run of its own)
            "manifest": manifest is not None,
            "rows": _digest(rows),
            "count": len(rows),
        }
    return found


def _digest(data: Any) -> str:
    if data is None:
        return ""
    if isinstance(data, str):
        data = json.loads(data)
    return hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


def status_json(home: Home, run_id: int) -> dict[str, Any]:
    """`status --json` of the run (a crash after it succeeded makes the rerun another run)."""
    result = _cli(home, "none", ["status", "--batch-id", str(run_id), "--json"])
    if result.returncode != 0:
        return {"error": result.stdout + result.stderr}
    return json.loads(result.stdout)


def compare(reference: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """What differs from the reference (empty: the crash left no trace)."""
    problems = []
    if got["duplicates"]:
        problems.append(f"duplicate target records: {got['duplicates'][:3]}")
    for key in ("target", "mirror"):  # each writer's target (`--writers 2`)
        if got[key] != reference[key]:
            ref, new = set(reference[key]), set(got[key])
            problems.append(
                f"{key} differs: {len(ref - new)} missing/changed, {len(new - ref)} "
                f"extra/changed; e.g. missing {sorted(ref - new)[:2]} extra {sorted(new - ref)[:2]}"
            )
    for key in ("harvest_records", "writer_memories"):
        if got[key] != reference[key]:
            ref, new = set(reference[key]), set(got[key])
            problems.append(
                f"{key.replace('_', ' ')} differ: e.g. expected "
                f"{sorted(ref - new)[:2]} got {sorted(new - ref)[:2]}"
            )
    if got["errors"] != reference["errors"]:
        problems.append(f"record errors differ: {got['errors'][:3]} vs {reference['errors'][:3]}")
    if got["last_run_status"] != "succeeded":
        problems.append(f"last run {got['last_run_status']}")
    if got["unfinished_runs"]:
        problems.append(f"runs left running: {got['unfinished_runs']}")
    if got["run_record_statuses"] != reference["run_record_statuses"]:
        problems.append(
            f"run record statuses {got['run_record_statuses']} "
            f"vs {reference['run_record_statuses']}"
        )
    if got["locks"]:
        problems.append(f"{got['locks']} leases left")
    if got["partitions"] != reference["partitions"]:
        differ = sorted(
            key
            for key in set(got["partitions"]) | set(reference["partitions"])
            if got["partitions"].get(key) != reference["partitions"].get(key)
        )
        shown = [(k, got["partitions"].get(k), reference["partitions"].get(k)) for k in differ]
        problems.append(f"partitions differ: {shown[:3]}")
    grid_tmp = [f for f in got["tmp_files"] if "/adhoc-" not in f]
    if grid_tmp:
        problems.append(f"temporary files left in partitions: {grid_tmp[:3]}")
    return problems


def compare_status(reference: dict[str, Any], got: dict[str, Any]) -> list[str]:
    if "error" in got:
        return [f"status --json failed: {got['error'][:200]}"]
    problems = []
    for key in ("records", "total_records", "stale_running", "harvest_records", "target"):
        if got.get(key) != reference.get(key):
            problems.append(f"status {key}: {got.get(key)} vs {reference.get(key)}")
    counters, ref_counters = got["counters"], reference["counters"]
    if counters["staged"] != ref_counters["staged"]:
        problems.append(f"status staged {counters['staged']} vs {ref_counters['staged']}")
    return problems


def report_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any] | None:
    """The `--json` report a successful harvest or reconcile printed (its last line)."""
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return None
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        return json.loads(lines[-1])


# What a harvest report counts once per run (discovery's totals, what it undid "by this run
# or an earlier attempt of it"): a resumed run reports the run's, as an uncrashed one does.
_RUN_TOTALS = (
    "harvested",
    "deleted_at_source",
    "cap_reached",
    "local_changes_undone",
    "local_changes_undone_actions",
    "unknown_identifiers",
)
# A reconcile's report: what it found vanished and deleted, what it harvested again, the
# records it handed their former identifier's target record (all attempts of its run).
_RECONCILE = ("vanished", "returned", "actions", "errors", "reidentified")
_EARLIER = ("already_written", "failed_before")
FAILED_EARLIER_ACTION = "failed_before"  # a resumed write's action for a record failed before


def _union_differs(got: dict[str, int], reference: dict[str, int]) -> bool:
    """A resumed run's actions against an uncrashed one's: each at most the reference's
    (those an earlier attempt took counted under `_EARLIER`), the same total."""
    actions, ref_actions = Counter(got), Counter(reference)
    more = any(n > ref_actions[a] for a, n in actions.items() if a not in _EARLIER)
    return more or actions.total() != ref_actions.total()


def _compare_reconcile_reports(reference: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """A reconcile's rerun reports what the uncrashed one does: the records found vanished
    and deleted (an attempt killed after marking them gone saved them on its reconcile run,
    which the rerun resumes), and those listed again; its harvest of these is a run that
    the rerun resumes (`already_written`). A rerun after the killed attempt had closed its
    reconcile run is a new reconcile of an unchanged source: it must find and do nothing."""
    if got["run_id"] != reference["run_id"]:
        acted = {key: got[key] for key in _RECONCILE if got.get(key)}
        return [f"the new reconcile reports: {acted}"] if acted else []
    keys = [key for key in _RECONCILE if key != "reidentified"]
    problems = [
        f"reconcile {key}: {got.get(key)} vs {reference.get(key)}"
        for key in keys
        if got.get(key) != reference.get(key)
    ]
    problems += _reidentified_differs(reference, got)
    if _union_differs(got["returned_actions"], reference["returned_actions"]):
        problems.append(
            f"reconcile returned_actions: {got['returned_actions']} "
            f"vs {reference['returned_actions']}"
        )
    return problems


def _reidentified_differs(reference: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """A rerun of the same run reports its take-overs of freed DOIs (reidentified.py) over
    all its attempts: those a killed attempt wrote but never recorded as `already_written`,
    the union as the uncrashed run's (`_union_differs`)."""
    taken, ref_taken = got.get("reidentified") or {}, reference.get("reidentified") or {}
    if _union_differs(taken, ref_taken):
        return [f"report reidentified: {taken} vs {ref_taken}"]
    return []


def _new_run_writes(got: dict[str, Any]) -> list[str]:
    """A rerun that started a new harvest run (the killed attempt had finished its own) has
    nothing left to write: any write or undo it reports is a problem."""
    wrote = {k: got[k] for k in ("created", "updated", "deleted", "reidentified") if got.get(k)}
    undone = got["local_changes_undone"]
    return [f"the new run reports writes: {wrote}, undone {undone}"] if wrote or undone else []


def _compare_dagster_reports(reference: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """A Dagster rerun's run totals (`dagster_report`) against the uncrashed run's, by the
    rules of `compare_reports`: the same harvest run reports the same discovery totals,
    undo and records per status, its actions' union and its errors (with those failed
    before); a new harvest run (the killed attempt had finished it) reports no write."""
    if got["harvest_runs"] != reference["harvest_runs"]:
        return _new_run_writes(got)
    problems = [
        f"report {key}: {got.get(key)} vs {reference.get(key)}"
        for key in (
            "harvested",
            "deleted_at_source",
            "cap_reached",
            "local_changes_undone",
            "run_records",
            "harvest_run_status",
        )
        if got.get(key) != reference.get(key)
    ]
    if _union_differs(got["actions"], reference["actions"]):
        problems.append(f"report actions {got['actions']} vs {reference['actions']}")
    errors = got["errors"] + got["actions"].get(FAILED_EARLIER_ACTION, 0)
    if errors != reference["errors"] + reference["actions"].get(FAILED_EARLIER_ACTION, 0):
        problems.append(
            f"report errors {got['errors']} ({got['actions']}) vs {reference['errors']}"
        )
    return problems


def compare_reports(reference: dict[str, Any] | None, got: dict[str, Any] | None) -> list[str]:
    """What the rerun's report says differently from the uncrashed run's, beyond what a
    rerun legitimately reports differently: a resumed run counts the records an earlier
    attempt wrote (or failed, not tried again) as `already_written` (`failed_before`), not
    under the action that attempt took; the union (each action at most the reference's,
    the same total) must match. A rerun after the killed attempt had finished the run is a
    new run of unchanged records: it must report no write."""
    if reference is None or got is None:
        return [] if reference is got else [f"no report: {got} vs {reference}"]
    if reference.get("dagster"):
        return _compare_dagster_reports(reference, got)
    if "vanished" in reference:
        return _compare_reconcile_reports(reference, got)
    if got["run_id"] != reference["run_id"]:
        return _new_run_writes(got)
    problems = [
        f"report {key}: {got.get(key)} vs {reference.get(key)}"
        for key in _RUN_TOTALS
        if got.get(key) != reference.get(key)
    ]
    problems += _reidentified_differs(reference, got)
    if len(got["windows"]) != len(reference["windows"]):  # a CLI run's key is new each run
        problems.append(f"report windows {got['windows']} vs {reference['windows']}")
    if _union_differs(got["actions"], reference["actions"]):
        problems.append(f"report actions {got['actions']} vs {reference['actions']}")
    errors = got["errors"] + got["failed_earlier"]
    if errors != reference["errors"] + reference["failed_earlier"]:
        problems.append(
            f"report errors {got['errors']} (+{got['failed_earlier']} earlier) "
            f"vs {reference['errors']}"
        )
    return problems


@dataclasses.dataclass
class Scenario:
    name: str
    args: list[str]
    template: Home | None  # the home as it is before this harvest
    # the spec of a crash of the scenario's harvest in the template first: the harvest
    # (the reference's too) then resumes the run it left (`resume_run` is called only so)
    interrupted_by: str | None = None
    endpoint: Any = None  # the source, to check the reference's sets against
    # what the scenario's own rules say of a home after its harvest (the reference's too),
    # beyond `compare`: e.g. `reidentified_problems`
    check: Callable[[Home], list[str]] | None = None
    # `reconcile`: what the template's source did since its last reconcile
    reconciled: ReconcileSource | None = None
    # `--fails-first`: the endpoint's Faults under which the harvest fails outright first
    # (the reference's too); the source then recovers and the harvest is rerun
    fails_first: Any = None


@contextmanager
def endpoint_for(records: list, page_size: int) -> Iterator[Any]:
    from oai_pipeline.sample_endpoint.server import OAIEndpoint

    with OAIEndpoint(records, page_size=page_size) as endpoint:
        yield endpoint


def change_source(
    endpoint: Any,
    records: list,
    day: datetime,
    seed: int = 3,
    relisted_since: datetime | None = None,
) -> dict[str, int]:
    """Updates (5 %), deletions (3 %), new records (2 %), all datestamped on `day`; records
    moved to other sets (2 %) with a new datestamp (`day`) and, when `relisted_since` is
    given, records datestamped since then moved to other sets without one (2 % of all: real
    DSpace and InvenioRDM servers do both; only a harvest from `relisted_since` lists the
    latter again)."""
    from oai_pipeline.sample_endpoint.records import generate_datacite_records
    from oai_pipeline_tests.benchmark import revise

    rng = random.Random(seed)
    live = [r for r in records if not r.deleted]
    chosen = rng.sample(live, round(len(live) * 0.08))
    updated, deleted = chosen[: round(len(live) * 0.05)], chosen[round(len(live) * 0.05) :]
    for record in updated:
        revise(endpoint, record, day + timedelta(seconds=rng.randrange(3600)), PREFIX)
    for record in deleted:
        endpoint.mark_deleted(record.identifier, day + timedelta(seconds=rng.randrange(3600)))
    untouched = [r for r in live if r not in chosen]
    moved = rng.sample(untouched, round(len(live) * 0.02))
    for record in moved:
        at = day + timedelta(seconds=rng.randrange(3600))
        endpoint.upsert(dataclasses.replace(record, datestamp=at, set_specs=_moved(record)))
    relabelled = []
    if relisted_since is not None:
        recent = [r for r in untouched if r not in moved and r.datestamp >= relisted_since]
        relabelled = rng.sample(recent, min(len(recent), round(len(records) * 0.02)))
        for record in relabelled:
            endpoint.upsert(dataclasses.replace(record, set_specs=_moved(record)))
    new = generate_datacite_records(
        round(len(records) * 0.02),
        seed=seed + 100,
        start=day,
        span_days=1,
        prefixes=(PREFIX,),
        deleted_fraction=0.0,
    )
    for index, record in enumerate(new):
        endpoint.upsert(
            dataclasses.replace(record, identifier=f"oai:generated.oai-pipeline:new-{index}")
        )
    return {
        "updated": len(updated),
        "deleted": len(deleted),
        "new": len(new),
        "moved_with_datestamp": len(moved),
        "moved_without_datestamp": len(relabelled),
    }


@dataclasses.dataclass
class ReconcileSource:
    """What the source did since the reconcile template's last reconcile: `returning`, the
    records it deleted, listed again; `dropped`, live records the source no longer lists
    (the records themselves, for `--source-moves-on` to list some of them again)."""

    returning: list[str]
    dropped: dict[str, Any]


def reconcile_template(
    backend: Backend, root: Path, full: Home, endpoint: Any, log: Callable[[str], None]
) -> tuple[Home, ReconcileSource]:
    """A home in step with the source (`full` harvested again: what users changed is brought
    back), whose last reconcile deleted records the source now lists again, and the source
    dropped others since (no deletion kept): the reconcile swept deletes these and harvests
    those again (`returned`)."""
    home = backend.new_home(root, f"{backend.name}-reconciled", full)

    def run(args: list[str]) -> None:
        done = _cli(home, "none", args)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {done.stderr[-2000:]}")

    run(["harvest", HARVESTER, "--since", RELISTED_SINCE.date().isoformat()])
    rng = random.Random(5)
    live = {r.identifier: r for r in endpoint.records() if not r.deleted}
    returning = rng.sample(sorted(live), max(1, len(live) // 100))
    for identifier in returning:
        endpoint.remove(identifier)
    run(["reconcile", HARVESTER])
    for identifier in returning:
        endpoint.upsert(live[identifier])
    dropped = rng.sample(sorted(set(live) - set(returning)), max(1, len(live) * 3 // 100))
    for identifier in dropped:
        endpoint.remove(identifier)
    log(
        f"[{backend.name}] reconcile: {len(returning)} records deleted by the last reconcile "
        f"listed again, {len(dropped)} dropped by the source"
    )
    return home, ReconcileSource(returning, {i: live[i] for i in dropped})


# `reidentify`: the source lists every record again under a new namespace (same DOIs) on
# REIDENTIFIED_ON, and deletes (or drops) the old identifiers on OLD_ONES_DELETED_ON.
OLD_NAMESPACE = "oai:generated.oai-pipeline:"
NEW_NAMESPACE = "oai:repo.example.org:"
REIDENTIFIED_ON = datetime(2024, 1, 15, 12, tzinfo=UTC)
OLD_ONES_DELETED_ON = datetime(2024, 1, 18, 12, tzinfo=UTC)


def reidentify_records(count: int) -> list:
    """Records with DOIs and no deletion: each must keep its target record when re-identified."""
    from oai_pipeline.sample_endpoint.records import generate_datacite_records

    return generate_datacite_records(
        count,
        seed=23,
        start=datetime(2024, 1, 5, tzinfo=UTC),
        span_days=3,
        prefixes=(PREFIX,),
        deleted_fraction=0.0,
    )


def reidentify_template(
    backend: Backend,
    root: Path,
    endpoint: Any,
    batch_size: int,
    log: Callable[[str], None],
) -> tuple[Home, list[str]]:
    """A home that harvested everything, then the source's new identifiers, each refused its
    DOI (`duplicate_pid`: the old identifier is live in the target); the source then deletes
    the old ones (persistent deletions, dated later) or drops them (`deletedRecord=no`).
    Returns the home and what the swept command is: a harvest of the deletions' day, which
    deletes the old records and hands them to the new identifiers, or a reconcile."""
    persistent = endpoint.provider.deleted_record == "persistent"
    name = "reidentify" if persistent else "reidentify-reconcile"
    home = backend.new_home(root, f"{backend.name}-{name}-start")
    register_harvester(home, endpoint.base_url, batch_size)

    def run(args: list[str]) -> dict[str, Any]:
        done = _cli(home, "none", [*args, "--json"])
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {done.stderr[-2000:]}")
        return json.loads(done.stdout)

    run(["harvest", HARVESTER])
    old = [r for r in endpoint.records() if r.identifier.startswith(OLD_NAMESPACE)]
    for record in old:
        new = record.identifier.replace(OLD_NAMESPACE, NEW_NAMESPACE)
        endpoint.upsert(dataclasses.replace(record, identifier=new, datestamp=REIDENTIFIED_ON))
        if not persistent:
            endpoint.remove(record.identifier)
    day = REIDENTIFIED_ON.date().isoformat()
    refused = run(["harvest", HARVESTER, "--since", day])
    if refused["error_types"] != {"duplicate_pid": len(old)}:
        raise RuntimeError(f"the new identifiers were not all refused their DOI: {refused}")
    if persistent:
        for record in old:
            endpoint.mark_deleted(record.identifier, OLD_ONES_DELETED_ON)
        args = ["harvest", HARVESTER, "--since", OLD_ONES_DELETED_ON.date().isoformat()]
    else:
        args = ["reconcile", HARVESTER]
    log(f"[{backend.name}] {name}: {len(old)} records re-identified, swept: {' '.join(args)}")
    return home, [*args, "--json"]


def reidentified_problems(template: Home) -> Callable[[Home], list[str]]:
    """What a harvest or reconcile that hands re-identified records their target records
    must leave, crashed or not: each target record of an old identifier live under the new
    one (same id, same DOI), one live record per DOI, no record failed."""
    import sqlalchemy as sa

    def target_rows(home: Home) -> list[Any]:
        engine = sa.create_engine(_settings(home).target_db_url)
        try:
            with engine.connect() as conn:
                return list(
                    conn.execute(
                        sa.text("SELECT id, source_identifier, state, doi FROM target_records")
                    )
                )
        finally:
            engine.dispose()

    before = {row.id: row for row in target_rows(template)}

    def check(home: Home) -> list[str]:
        rows = target_rows(home)
        problems = []
        if len(rows) != len(before):
            problems.append(f"{len(rows)} target records, {len(before)} before")
        for row in rows:
            was = before.get(row.id)
            expected = was and was.source_identifier.replace(OLD_NAMESPACE, NEW_NAMESPACE)
            if was is None or row.state != "live" or row.source_identifier != expected:
                problems.append(
                    f"target record {row.id} is {row.state} {row.source_identifier}, "
                    f"expected live {expected}"
                )
                break
        dois = Counter(row.doi for row in rows if row.state == "live")
        if shared := [doi for doi, n in dois.items() if n > 1]:
            problems.append(f"DOIs of more than one live record: {shared[:3]}")
        failed = query(_settings(home).state_db_url, "SELECT count(*) FROM record_errors")
        if failed[0][0]:
            problems.append(f"{failed[0][0]} record errors left")
        return problems

    return check


# `rekey`: a DSpace of handles (no DOIs) moves to a new host, which lists every record under
# a new prefix, re-stamped; the operator points the harvester there and rekeys it.
OLD_HOST = "oai:old.example.org:"
NEW_HOST = "oai:repo.example.org:"
REKEY = ["harvesters", "rekey", HARVESTER, "--from-prefix", OLD_HOST, "--to-prefix", NEW_HOST]
# where `harvesters rekey` is killed: before, between and after its two stores' rewrites
REKEY_KILLS = [f"{p}:1:{m}" for p in ("rekey_target", "rekey_state") for m in ("before", "after")]


def handle_records(prefix: str, count: int, stamp: datetime) -> list:
    """Records without a DOI (the target mints none), identified by handle."""
    from oai_pipeline.sample_endpoint.records import EndpointRecord
    from oai_pipeline_tests.support import oai_dc

    return [
        EndpointRecord(
            identifier=f"{prefix}123456789/{n}",
            datestamp=stamp + timedelta(minutes=n),
            metadata={"oai_dc": oai_dc(f"Thesis {n}", date_text="2019-05-01").encode()},
        )
        for n in range(count)
    ]


def _run_ok(home: Home, args: list[str]) -> subprocess.CompletedProcess[str]:
    done = _cli(home, "none", args)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {done.stdout[-500:]}{done.stderr[-2000:]}")
    return done


def rekeyed_problems(template: Home) -> Callable[[Home], list[str]]:
    """What the first harvest after a rekey must leave, crashed or not: each target record of
    `template` (harvested from the old host) live under its new identifier, with the same id
    and no new revision (its data did not change), and no other target record."""
    import sqlalchemy as sa

    def target_rows(home: Home) -> dict[str, Any]:
        engine = sa.create_engine(_settings(home).target_db_url)
        try:
            with engine.connect() as conn:
                rows = conn.execute(
                    sa.text("SELECT id, source_identifier, state, revision FROM target_records")
                )
                return {row.id: row for row in rows}
        finally:
            engine.dispose()

    before = target_rows(template)

    def check(home: Home) -> list[str]:
        after = target_rows(home)
        problems = []
        if after.keys() != before.keys():
            new = sorted(set(after) - set(before))
            problems.append(f"target ids differ: {len(new)} new, e.g. {new[:2]}")
        for record_id in sorted(set(after) & set(before)):
            row, was = after[record_id], before[record_id]
            expected = was.source_identifier.replace(OLD_HOST, NEW_HOST)
            if (row.state, row.source_identifier, row.revision) != ("live", expected, was.revision):
                problems.append(f"target record {record_id}: {tuple(row)}, was {tuple(was)}")
                break
        return problems

    return check


def sweep_rekey(
    backend: Backend,
    root: Path,
    args: argparse.Namespace,
    points: list[str],
    results: dict[str, Any],
    log: Callable[[str], None],
    rekey_kills: list[str] = REKEY_KILLS,
    detour: list[str] | None = None,
) -> int:
    """`rekey`: a home that harvested a DSpace of handles from its old host, the harvester
    pointed at the new host (every identifier under a new prefix). `harvesters rekey` killed
    before, between and after its two stores' rewrites, rerun, then the harvest; and the
    first harvest after an uninterrupted rekey swept at every point. Each must end as an
    uninterrupted rekey and harvest: the same target ids, nothing created, no new revision.
    `detour`: commands run between the kill and the rerun (another rekey, a harvest), each
    to be refused (exit 1 or 2) as a rekey begun and not finished is pending: kill points
    before the state store's commit."""
    from oai_pipeline.sample_endpoint.server import OAIEndpoint

    count = max(20, args.records // 10)
    moved_on = datetime.now(UTC).replace(microsecond=0)
    home = backend.new_home(root, f"{backend.name}-rekey-start")
    old = handle_records(OLD_HOST, count, moved_on - timedelta(days=5))
    with OAIEndpoint(old, page_size=args.page_size) as old_host:
        register_harvester(home, old_host.base_url, args.batch_size, metadata_prefix="oai_dc")
        _run_ok(home, ["harvest", HARVESTER])
    new = handle_records(NEW_HOST, count, moved_on - timedelta(hours=2))
    harvest = ["harvest", HARVESTER, "--json"]
    check = rekeyed_problems(home)
    failures = 0
    with OAIEndpoint(new, page_size=args.page_size, deleted_record="no") as new_host:
        _run_ok(home, ["harvesters", "update", HARVESTER, "--base-url", new_host.base_url])
        rekeyed = backend.new_home(root, f"{backend.name}-rekey-rekeyed", home)
        _run_ok(rekeyed, REKEY)
        reference = backend.new_home(root, f"{backend.name}-rekey-then-harvest", rekeyed)
        ref_report = report_of(_run_ok(reference, harvest))
        ref_snapshot = snapshot(reference)
        log(f"[{backend.name}] rekey: {count} records; reference harvest {ref_report}")
        outcomes = []
        for index, spec in enumerate(rekey_kills):
            killed = backend.new_home(root, f"{backend.name}-rekey-killed-{index}", home)
            problems = []
            if (done := _cli(killed, spec, REKEY)).returncode != EXIT_CODE:
                problems.append(f"the rekey was not killed: {done.returncode} {done.stderr[-300:]}")
            for command in detour or []:
                refused = _cli(killed, "none", command)
                if refused.returncode not in (1, 2) or "did not finish" not in refused.stderr:
                    problems.append(
                        f"{' '.join(command)} was not refused as a rekey is pending: "
                        f"{refused.returncode} {refused.stdout[-300:]}{refused.stderr[-300:]}"
                    )
            if (again := _cli(killed, "none", REKEY)).returncode != 0:
                problems.append(f"its rerun exited {again.returncode}: {again.stdout[-300:]}")
            final = _cli(killed, "none", harvest)
            problems += compare(ref_snapshot, snapshot(killed, ref_snapshot["last_run_id"]))
            problems += compare_reports(ref_report, report_of(final))
            problems += check(killed)
            outcomes.append({"spec": f"rekey {spec}", "problems": problems})
            log(f"  rekey {spec}: {'FAIL ' + '; '.join(problems) if problems else 'ok'}")
        name = f"{backend.name}-rekey-harvest"
        scenario = Scenario(name, harvest, rekeyed, endpoint=new_host, check=check)
        outcomes += run_scenario(
            backend, root, new_host.base_url, scenario, points, args.per_point, args.double, log
        )
    results[name] = outcomes
    failures += sum(1 for o in outcomes if o["problems"])
    return failures


def _moved(record: Any) -> list[str]:
    """The record's sets after a move: its first set left, another one joined."""
    return [*record.set_specs[1:], "moved-collection"]


def edit_target_locally(home: Home, count: int = 3) -> dict[str, int]:
    """Users change harvested records in the target: `count` each edited (a draft left),
    edited and published, and deleted. The next harvest brings them back (`undo_local_changes`:
    its writes, then `save_write_outcomes`)."""
    import sqlalchemy as sa

    from oai_pipeline.targets.embedded.repository import EmbeddedRepository

    repository = EmbeddedRepository(_settings(home).target_db_url)
    try:
        with repository.engine.connect() as conn:
            ids = list(
                conn.execute(
                    sa.text(
                        "SELECT id FROM target_records WHERE state = 'live' "
                        "AND source_harvester = :h ORDER BY source_identifier"
                    ),
                    {"h": HARVESTER},
                ).scalars()
            )
        drafted, published, deleted = ids[:count], ids[count : 2 * count], ids[-count:]
        for record_id in drafted + published:
            repository.edit(record_id, {"metadata.title": "Edited by a user"})
        for record_id in published:
            repository.publish(record_id)
        for record_id in deleted:
            repository.delete(record_id, note="deleted by a user")
    finally:
        repository.engine.dispose()
    return {"drafted": len(drafted), "published": len(published), "deleted": len(deleted)}


def source_sets_mismatch(home: Home, endpoint: Any) -> list[str]:
    """Live source records whose harvest record does not hold the sets the source serves
    (a harvest that lists every changed record must leave none): a set change the harvest
    lost is the same in the reference and in a crashed home, and only this check sees it."""
    import sqlalchemy as sa

    engine = sa.create_engine(_settings(home).state_db_url)
    try:
        with engine.connect() as conn:
            stored = {
                row[0]: json.loads(row[1]) if isinstance(row[1], str) else row[1]
                for row in conn.execute(
                    sa.text("SELECT identifier, set_specs FROM harvest_records WHERE NOT deleted")
                )
            }
    finally:
        engine.dispose()
    return sorted(
        record.identifier
        for record in endpoint.records()
        if not record.deleted
        and record.identifier in stored
        and list(stored[record.identifier] or []) != list(record.set_specs)
    )


@dataclasses.dataclass
class SourceMove:
    """`--source-moves-on`: what the source changes between a killed attempt and its rerun,
    dated when it is applied (after the attempt began listing, as a real source dates a
    change). The same records every time, chosen so that only the rerun's catch-up list
    (`discover._catch_up_from`) can see them once its token sweep is past the first page:
    records of the run's first page updated and deleted, and new records whose place in the
    list (`order_key`) is before every other record's, i.e. before any saved token."""

    updated: list[str]
    deleted: list[str]
    new: list[Any]  # EndpointRecord, their datestamps set by `apply`
    originals: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def changed(self) -> int:
        return len(self.updated) + len(self.deleted) + len(self.new)

    def apply(self, endpoint: Any) -> datetime:
        """Change the source (the caller undoes it with `undo`); returns the change's date."""
        from oai_pipeline_tests.benchmark import revise

        now = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
        current = {record.identifier: record for record in endpoint.records()}
        self.originals = {i: current[i] for i in [*self.updated, *self.deleted]}
        for identifier in self.updated:
            revise(endpoint, current[identifier], now, PREFIX)
        for identifier in self.deleted:
            endpoint.mark_deleted(identifier, now)
        for record in self.new:
            endpoint.upsert(dataclasses.replace(record, datestamp=now))
        return now

    def undo(self, endpoint: Any) -> None:
        """The source as it was before `apply`: the next crash point starts from it."""
        for record in self.originals.values():
            endpoint.upsert(record)
        for record in self.new:
            endpoint.remove(record.identifier)


def source_move(
    endpoint: Any, first_page: list[str], updated: int = 4, deleted: int = 2, new: int = 3
) -> SourceMove:
    """The change `--source-moves-on` applies: `updated` and `deleted` live records of the
    run's `first_page` (its first identifiers listed), `new` records listed before all."""
    from oai_pipeline.sample_endpoint.provider import order_key
    from oai_pipeline.sample_endpoint.records import generate_datacite_records

    current = {record.identifier: record for record in endpoint.records()}
    live = [i for i in first_page if i in current and not current[i].deleted]
    if len(live) < updated + deleted:
        raise RuntimeError(f"the run's first page has {len(live)} live records: too few")
    first_key = min(order_key(identifier) for identifier in current)
    names: list[str] = []
    candidate = 0
    while len(names) < new:
        identifier = f"oai:generated.oai-pipeline:moved-on-{candidate}"
        if order_key(identifier) < first_key:
            names.append(identifier)
        candidate += 1
    records = generate_datacite_records(new, seed=17, prefixes=(PREFIX,), deleted_fraction=0.0)
    return SourceMove(
        updated=live[:updated],
        deleted=live[updated : updated + deleted],
        new=[dataclasses.replace(r, identifier=n) for r, n in zip(records, names, strict=True)],
    )


def _first_page(home: Home, run_id: int, page_size: int) -> list[str]:
    """The identifiers a run staged first (its first page, in list order)."""
    rows = query(
        _settings(home).state_db_url,
        f"SELECT identifier FROM run_records WHERE run_id = {int(run_id)} ORDER BY id "
        f"LIMIT {int(page_size)}",
    )
    return [row[0] for row in rows]


def _last_finished_run(home: Home) -> int | None:
    """The id of the home's last harvest run that is not left `running` (None: none). A run
    after it is the one a harvest from this home creates, or resumes (`--resumed`: the
    interrupted run the template holds, which the killed attempt may not have reached)."""
    rows = query(
        _settings(home).state_db_url,
        "SELECT max(id) FROM harvest_runs WHERE status <> 'running'",
    )
    return rows[0][0] if rows else None


def _killed_run(killed: Home, template_run: int | None) -> Any:
    """The harvest run the killed attempt created or resumed, the last after `template_run`
    (`_last_finished_run` of the template; None: it was killed before creating one)."""
    from oai_pipeline.state.schema import CATCH_UP_COUNTERS

    rows = query(
        _settings(killed).state_db_url,
        "SELECT id, status, response_date, checkpoint, "
        f"{', '.join(CATCH_UP_COUNTERS)} FROM harvest_runs ORDER BY id",
    )
    return rows[-1] if rows and rows[-1].id != template_run else None


def expected_catch_up(
    killed: Home, template_run: int | None, move: SourceMove, page_size: int
) -> dict[str, int]:
    """What the rerun's report must count of its catch-up list, from the state the killed
    attempt left and the change: a run left `running` that had begun listing lists again
    the `changed` records (one list); of them it takes the new records and the newer copies
    of the records its token sweep had passed (the first page, once a token is saved). A
    killed attempt that had not begun listing, or had finished its run, leaves none. The
    pages and records listed are the rerun's list's (each attempt lists every change again,
    and the last one's counts); the records taken add to what the run took before the
    change: an attempt that resumed it (`--resumed`) made a catch-up list of its own (a
    page, of nothing changed yet), also when it then finished the run (the rerun is a new
    run, which leaves that one's counters alone)."""
    from oai_pipeline.state.schema import CATCH_UP_COUNTERS

    run = _killed_run(killed, template_run)
    if run is None:
        return dict.fromkeys(CATCH_UP_COUNTERS, 0)
    expected = {name: int(getattr(run, name) or 0) for name in CATCH_UP_COUNTERS}
    if run.status != "running":
        return expected
    checkpoint = json.loads(run.checkpoint) if isinstance(run.checkpoint, str) else run.checkpoint
    if not run.response_date or not checkpoint:
        return expected
    expected["catch_up_pages"] = max(1, -(-move.changed // page_size))  # an empty list: 1
    expected["catch_up_listed"] = move.changed
    if checkpoint.get("resumption_token"):  # past the first page: it is not listed again
        expected["catch_up_new_records"] += len(move.new)
        expected["catch_up_newer_copies"] += len(move.updated) + len(move.deleted)
    return expected


def _target_by_record(home: Home | None) -> dict[str, tuple]:
    """The home's target rows (`snapshot`'s) by OAI identifier; none in a home that never
    harvested (no target yet, or only the community `--failing-records` made: no run, which
    `snapshot` wants)."""
    if home is None:
        return {}
    return {row[0]: row for row in _target_rows(_settings(home).target_db_url)[0]}


def _leaves_drafts(home: Home) -> bool:
    """Whether the home's harvester writes drafts (`register_harvester(drafts=True)`)."""
    rows = query(_settings(home).state_db_url, "SELECT config FROM harvesters")
    configs = [json.loads(c) if isinstance(c, str) else c for (c,) in rows]
    return any("publish:false" in spec for c in configs for spec in c.get("writers") or [])


def moved_on_view(
    got: dict[str, Any], move: SourceMove, rewritten: set[str], transformed: set[str]
) -> dict[str, Any]:
    """A snapshot as `compare` reads it, but for what the sync rules make of a change that
    came after the killed attempt wrote the old copies (`rewritten`: the changed records
    whose target row that attempt wrote): written twice, their revisions and written
    fields are left out, and a deleted one (a tombstone, checked by `moved_on_problems`;
    a fresh harvest never writes it) is left out. A deleted record the killed attempt had
    transformed keeps the DOI and transform datestamp of its old copy, as a record deleted
    after an earlier harvest does: left out too."""
    gone = rewritten & set(move.deleted)
    known_gone = transformed & set(move.deleted)
    view = _written_again_view(got, rewritten, gone)
    # each writer's memory of a tombstone it wrote, where a fresh harvest wrote nothing
    view["writer_memories"] = sorted(
        (*row[:2], "", *row[3:]) if row[0] in gone and len(row) > 3 else row
        for row in view["writer_memories"]
    )
    rows = []
    for row in got["harvest_records"]:
        if row[0] in rewritten:
            row = (*row[:4], "", -1, "", "", *row[8:])
        if row[0] in known_gone:
            row = (*row[:3], "", *row[4:12], "")
        rows.append(row)
    view["harvest_records"] = sorted(rows)
    return view


def _reported_otherwise(move: SourceMove, drafts: bool) -> set[str]:
    """The changed records a rerun reports otherwise than a fresh harvest does, when the
    killed attempt had created them: updated and deleted ones; with a writer that leaves
    drafts, deleted ones only (a draft the run created is reported created still)."""
    return set(move.deleted) if drafts else set(move.updated) | set(move.deleted)


def moved_on_statuses(
    statuses: dict[str, int], move: SourceMove, created: set[str], drafts: bool = False
) -> dict[str, int]:
    """The fresh run's records per status as the rerun's must read: a changed record the
    killed attempt had created is `updated` (its newer copy) or `gone` (deleted at the
    source), where the fresh harvest imports it or leaves it `unchanged`. A draft the killed
    attempt created (`drafts`: the writer leaves drafts) is `imported` still, as the run
    reports a draft it created (its newer copy written over it)."""
    counts = Counter(statuses)
    changed = _reported_otherwise(move, drafts)
    for identifier in created & changed:
        fresh, now = (
            ("imported", "updated") if identifier in move.updated else ("unchanged", "gone")
        )
        counts[fresh] -= 1
        counts[now] += 1
    keep = set(statuses)
    return {k: n for k, n in sorted(counts.items()) if n or k in keep}


def moved_on_status(
    status: dict[str, Any], move: SourceMove, created: set[str], drafts: bool = False
) -> dict[str, Any]:
    """`status --json` of the fresh run as the rerun's must read (`moved_on_statuses`; the
    tombstones of the records created then deleted at the source are target records, where
    drafts are discarded)."""
    if "error" in status:
        return status
    tombstones = 0 if drafts else len(created & set(move.deleted))
    target = dict(status["target"])
    target.update({k: target[k] + tombstones for k in ("records", "source_identifiers")})
    return {
        **status,
        "records": moved_on_statuses(status["records"], move, created, drafts),
        "target": target,
    }


def moved_on_problems(
    got: dict[str, Any],
    move: SourceMove,
    rewritten: set[str],
    was: dict[str, tuple] | None = None,
    drafts: bool = False,
) -> list[str]:
    """The records the killed attempt wrote and the source changed since: each written once
    more (its newer copy, or its deletion: a tombstone; a draft never published, discarded:
    no target record), never more; `was`: the starting home's target rows
    (`_target_by_record`), whose revisions a record had before the run (an incremental
    harvest's records were written by the first one)."""
    was = was or {}
    rows = {row[0]: row for row in got["target"]}
    problems = []
    for identifier in sorted(rewritten):
        row = rows.get(identifier)
        before = was[identifier][4] if identifier in was else 0  # its revisions then
        discarded = drafts and identifier in move.deleted and identifier not in was
        if discarded:
            if row is not None:
                problems.append(f"{identifier} (a draft deleted at the source) is {row[1]}")
        elif row is None:
            problems.append(f"{identifier} (written before the change) has no target record")
        elif identifier in move.deleted and row[1] != "tombstone":
            problems.append(f"{identifier} deleted at the source is {row[1]} in the target")
        elif row[4] - before > 2:
            problems.append(f"{identifier} written {row[4] - before} times by the run")
    return problems


def new_run_of_the_change_problems(
    report: dict[str, Any], move: SourceMove, writers: int, double: bool
) -> list[str]:
    """The rerun after a killed attempt that had finished its run is a new run of the
    change: it writes each changed record once per writer (the report counts each writer's
    writes); killed once more (`double`), some of them by an attempt it resumed."""
    wrote = {k: report[k] for k in ("created", "updated", "deleted")}
    change = {
        "created": len(move.new) * writers,
        "updated": len(move.updated) * writers,
        "deleted": len(move.deleted) * writers,
    }
    if (wrote != change and not double) or sum(wrote.values()) != move.changed * writers:
        return [f"the new run wrote {wrote}, the change is {change}"]
    return []


def moved_on_report(
    reference: dict[str, Any] | None,
    move: SourceMove,
    created: set[str],
    created_by_mirror: set[str] = frozenset(),
    drafts: bool = False,
) -> dict[str, Any] | None:
    """The fresh harvest's report as the rerun's must read (`compare_reports`): a changed
    record the killed attempt had created is updated or deleted by the rerun where the
    fresh harvest creates it or leaves it out (`nothing`); the report's actions are each
    writer's, so once more for those the mirror (`--writers 2`) had created. A draft
    (`drafts`) the killed attempt created is reported created still, and its deletion
    `delete_draft`."""
    if reference is None:
        return None
    actions = Counter(reference["actions"])
    changed = _reported_otherwise(move, drafts)
    deleted = "delete_draft" if drafts else "delete"
    for identifier in [*(created & changed), *(created_by_mirror & changed)]:
        fresh, now = ("create", "update") if identifier in move.updated else ("nothing", deleted)
        actions[fresh] -= 1
        actions[now] += 1
    moved = {**reference, "actions": {a: n for a, n in actions.items() if n}}
    if reference.get("run_records") is not None:  # a Dagster run's records per status
        moved["run_records"] = moved_on_statuses(reference["run_records"], move, created, drafts)
    return moved


def compare_catch_up(
    expected: dict[str, int], got: dict[str, Any] | None, double: bool
) -> list[str]:
    """The run counts its catch-up list (`got`: its counters in `status --json`, which the
    rerun's report repeats) as derived from the change (once killed twice, each new record
    and newer copy is still counted once, and the change listed at least once: the pages
    and records listed are the last attempt's list's)."""
    if got is None:
        return []
    counted = {name: got.get(name) for name in expected}
    if not double:
        return [] if counted == expected else [f"catch-up {counted} vs {expected}"]
    taken = ("catch_up_new_records", "catch_up_newer_copies")
    problems = []
    if sum(counted[n] or 0 for n in taken) != sum(expected[n] for n in taken):
        problems.append(f"catch-up {counted} vs {expected} (each taken once)")
    if (counted["catch_up_listed"] or 0) < expected["catch_up_listed"]:
        problems.append(f"catch-up listed {counted['catch_up_listed']} vs {expected}")
    return problems


def choose_calls(count: int, per_point: int) -> list[int]:
    if count <= 0:
        return []
    picks = {1, count}
    for i in range(1, per_point - 1):
        picks.add(max(1, round(count * i / (per_point - 1))))
    return sorted(picks)[: max(per_point, 2)]


def crash_specs(points: list[str], counts: dict[str, int], per_point: int) -> list[str]:
    """The crashes (NAME:K:MOMENT) to try of `points`, given the calls an uninterrupted
    harvest makes (`counts`)."""
    specs = []
    for name in points:
        if name.count(":") == 2:  # one crash: NAME:K:MOMENT
            specs.append(name)
            continue
        if name in SQL_POINTS:
            moments = ["before"]
        else:
            moments = ["before", "after"] + (["mid"] if name in MID_POINTS else [])
        for k in choose_calls(counts.get(name, 0), per_point):
            specs.extend(f"{name}:{k}:{moment}" for moment in moments)
    return specs


@dataclasses.dataclass(frozen=True)
class TargetFull:
    """`--fails-first target`: the target's disk holds `max_pages` SQLite pages, reached
    part-way through the write stage, until the operator frees space (`fill_target_at`);
    `--writers 2`: the mirror's file, on the same disk, holds `mirror_max_pages` (both
    stop growing the moment the disk is full, whichever writes next is refused)."""

    max_pages: int
    mirror_max_pages: int | None = None


@contextmanager
def failing(scenario: Scenario, home: Home) -> Iterator[Home]:
    """`--fails-first`: the home as its harvest sees it while the harvest fails outright
    (the endpoint misbehaving as `scenario.fails_first` says, or its target's disk full),
    then the source or the target recovers."""
    if isinstance(scenario.fails_first, TargetFull):
        full = scenario.fails_first
        env = {**home.env, TARGET_MAX_PAGES_ENV: str(full.max_pages)}
        if full.mirror_max_pages is not None:
            env[MIRROR_MAX_PAGES_ENV] = str(full.mirror_max_pages)
        yield Home(home.path, env)
        return
    before = scenario.endpoint.faults
    scenario.endpoint.faults = scenario.fails_first
    try:
        yield home
    finally:
        scenario.endpoint.faults = before


def _failed_run_end(home: Home) -> tuple[Any, ...] | None:
    """How the home's last harvest run ended, its error free of the home's path (a full
    target's error names its file)."""
    rows = query(
        _settings(home).state_db_url,
        "SELECT status, error FROM harvest_runs ORDER BY id DESC LIMIT 1",
    )
    if not rows:
        return None
    status, error = rows[0]
    return status, (error or "").replace(str(home.path), "HOME")


def failed_run_problems(home: Home, expected: tuple[Any, ...]) -> list[str]:
    """`--fails-first`: the home's last harvest run ended as the reference's failing one."""
    got = _failed_run_end(home)
    return [] if got == expected else [f"the failing run ended {got}, not {expected}"]


def _fail_first(
    backend: Backend, root: Path, scenario: Scenario, template: Home | None
) -> tuple[Home, dict[str, int], tuple[Any, ...]]:
    """`--fails-first`: the harvest failing outright uninterrupted from `template`: the home
    it leaves (which the reference and the rerun's crashes start from), its calls, and how
    its run ended."""
    failed = backend.new_home(root, f"{scenario.name}-failed", template)
    counts_file = root / f"{scenario.name}-failing-counts.json"
    with failing(scenario, failed) as home:
        result = _cli(home, f"count:{counts_file}", scenario.args)
    if result.returncode in (0, EXIT_CODE):
        raise RuntimeError(f"the failing harvest did not fail: {result.stderr[-2000:]}")
    end = _failed_run_end(failed)
    assert end is not None, "the failing harvest left no run"
    return failed, json.loads(counts_file.read_text()), end


def _crash_failing(
    home: Home, spec: str, scenario: Scenario, failed_end: tuple[Any, ...]
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """`--fails-first`: the failing harvest killed at `spec`, then rerun on the still failing
    source or target (it must fail as the uninterrupted one did); they then recover."""
    with failing(scenario, home) as failing_home:
        first = _cli(failing_home, spec, scenario.args)
        if first.returncode == 0:
            return first, ["the failing harvest succeeded"]
        again = _cli(failing_home, "none", scenario.args)
    if again.returncode in (0, EXIT_CODE):
        return first, [f"its rerun on the failing source exited {again.returncode}"]
    return first, failed_run_problems(home, failed_end)


def run_scenario(
    backend: Backend,
    root: Path,
    base_url: str,
    scenario: Scenario,
    points: list[str],
    per_point: int,
    double: bool,
    log: Callable[[str], None],
    moves_on_pages: int | None = None,
) -> list[dict[str, Any]]:
    """`moves_on_pages` (`--source-moves-on`: the source's page size): after each kill the
    source changes (`SourceMove`) before the rerun, which is compared with a fresh harvest
    of the changed source from the same starting home instead of the reference."""
    template = scenario.template
    if scenario.interrupted_by is not None:
        template = backend.new_home(root, f"{scenario.name}-interrupted", template)
        killed = _cli(template, scenario.interrupted_by, scenario.args)
        if killed.returncode != EXIT_CODE:
            problem = f"{scenario.interrupted_by} did not kill the harvest: {killed.stderr[-600:]}"
            log(f"[{backend.name}/{scenario.name}] {problem}")
            return [{"spec": "interruption", "problems": [problem]}]
    start, failing_specs, failed_end = template, [], ()
    if scenario.fails_first is not None:
        template, failing_counts, failed_end = _fail_first(backend, root, scenario, template)
        log(f"[{backend.name}/{scenario.name}] failing run: {failed_end}, calls {failing_counts}")
        failing_specs = crash_specs(points, failing_counts, per_point)
    reference = backend.new_home(root, f"{scenario.name}-ref", template)
    counts_file = root / f"{scenario.name}-counts.json"
    result = _cli(reference, f"count:{counts_file}", scenario.args)
    if result.returncode != 0:
        raise RuntimeError(f"reference harvest failed: {result.stderr[-2000:]}")
    counts = json.loads(counts_file.read_text())
    ref_report = report_of(result)
    log(f"[{backend.name}/{scenario.name}] calls: {counts}")
    log(f"[{backend.name}/{scenario.name}] reference report: {ref_report}")
    ref_snapshot = snapshot(reference)
    outcomes = []
    lost = source_sets_mismatch(reference, scenario.endpoint) if scenario.endpoint else []
    if lost:
        problem = f"the reference keeps other sets than the source's: {len(lost)}, {lost[:3]}"
        outcomes.append({"spec": "reference", "problems": [problem]})
        log(f"  reference: FAIL {problem}")
    if scenario.check is not None and (wrong := scenario.check(reference)):
        outcomes.append({"spec": "reference", "problems": wrong})
        log(f"  reference: FAIL {wrong}")
    ref_status = status_json(reference, ref_snapshot["last_run_id"])
    log(
        f"[{backend.name}/{scenario.name}] reference: {len(ref_snapshot['target'])} target "
        f"records, run statuses {ref_snapshot['run_record_statuses']}"
    )
    specs = crash_specs(points, counts, per_point)
    move = None
    reconcile_move = None
    if moves_on_pages and scenario.reconciled is not None:
        reconcile_move = ReconcileMove.of(scenario.endpoint, scenario.reconciled)
        log(f"[{backend.name}/{scenario.name}] after each kill the source {reconcile_move}")
    elif moves_on_pages:
        template_run = _last_finished_run(template)
        first_page = _first_page(reference, ref_snapshot["last_run_id"], moves_on_pages)
        move = source_move(scenario.endpoint, first_page)
        log(
            f"[{backend.name}/{scenario.name}] after each kill the source moves on: updates "
            f"{move.updated}, deletes {move.deleted}, adds {[r.identifier for r in move.new]}"
        )
    rng = random.Random(11)
    # `--fails-first`: crashes of the failing harvest (from the starting home), then of its
    # rerun (from the home the uninterrupted failure left)
    crashes = [(f"failing/{spec}", spec) for spec in failing_specs] + [(c, c) for c in specs]
    for index, (label, spec) in enumerate(crashes):
        started = time.monotonic()
        attempts = [label]
        if label != spec:
            home = backend.new_home(root, f"{scenario.name}-{index}", start)
            first, failing_problems = _crash_failing(home, spec, scenario, failed_end)
        else:
            home = backend.new_home(root, f"{scenario.name}-{index}", template)
            first, failing_problems = _cli(home, spec, scenario.args), []
        reached = first.returncode == EXIT_CODE
        if failing_problems or (label == spec and first.returncode not in (0, EXIT_CODE)):
            problems = failing_problems or [
                f"crashed run exited {first.returncode}: {first.stderr[-600:]}"
            ]
            outcome = {"spec": label, "problems": problems}
            outcomes.append(outcome)
            log(f"  {label}: {outcome['problems']}")
            continue
        catch_up: dict[str, int] = {}
        if reconcile_move is not None:
            got, problems = _rerun_reconcile_moved_on(
                backend,
                root,
                f"{scenario.name}-{index}",
                template,
                home,
                scenario,
                reconcile_move,
                (specs, double and reached, rng, attempts),
            )
        elif move is None:
            final, problems = _rerun(home, specs, scenario.args, double and reached, rng, attempts)
            got = snapshot(home, ref_snapshot["last_run_id"])
            problems += compare(ref_snapshot, got)
            problems += compare_status(ref_status, status_json(home, ref_snapshot["last_run_id"]))
            problems += compare_reports(ref_report, report_of(final))
            problems += scenario.check(home) if scenario.check is not None else []
        else:
            got, problems, catch_up = _rerun_moved_on(
                backend,
                root,
                f"{scenario.name}-{index}",
                template,
                template_run,
                home,
                scenario,
                move,
                moves_on_pages,
                (specs, double and reached, rng, attempts),
                (ref_snapshot, ref_status),
            )
        outcome = {
            "spec": label,
            "attempts": attempts,
            "reached": reached,
            "seconds": round(time.monotonic() - started, 1),
            "problems": problems,
            "leftover_tmp_files": got["tmp_files"],
            **({"catch_up_expected": catch_up} if move is not None else {}),
        }
        outcomes.append(outcome)
        flag = "FAIL" if problems else "ok"
        log(f"  {' → '.join(attempts)}: {flag} {'; '.join(problems)}")
        if not problems:
            shutil.rmtree(home.path, ignore_errors=True)
    return outcomes


def _rerun(
    home: Home,
    specs: list[str],
    args: list[str],
    double: bool,
    rng: random.Random,
    attempts: list[str],
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """After the kill: with `double`, a rerun killed once more first; then the rerun (and a
    second one if it fails). Returns the last rerun and the problems seen."""
    if double:
        second = rng.choice(specs)
        attempts.append(second)
        again = _cli(home, second, args)
        if again.returncode not in (0, EXIT_CODE):
            attempts.append(f"exit {again.returncode}: {again.stderr[-600:]}")
    final = _cli(home, "none", args)
    problems = []
    if final.returncode != 0:
        problems.append(f"rerun exited {final.returncode}: {final.stderr[-800:]}")
        final = _cli(home, "none", args)  # does a second rerun recover?
        if final.returncode != 0:
            problems.append("a second rerun fails too")
    return final, problems


def _rerun_moved_on(
    backend: Backend,
    root: Path,
    name: str,
    template: Home | None,
    template_run: int | None,
    home: Home,
    scenario: Scenario,
    move: SourceMove,
    page_size: int,
    rerun: tuple[list[str], bool, random.Random, list[str]],
    unchanged: tuple[dict[str, Any], dict[str, Any]],
) -> tuple[dict[str, Any], list[str], dict[str, int]]:
    """The source moves on after the kill; the rerun is compared with a harvest of the
    changed source from the starting home (fresh: no kill), by the sync rules for what the
    killed attempt wrote before the change (`moved_on_view`), and its catch-up counters
    with those the change and the killed attempt's state make (`expected_catch_up`)."""
    specs, double, rng, attempts = rerun
    was = _target_by_record(template)
    killed = _target_by_record(home)
    drafts = _leaves_drafts(home)
    changed = set(move.updated) | set(move.deleted)
    rewritten = {i for i, row in killed.items() if was.get(i) != row} & changed
    created = {i for i in rewritten if i not in was}
    # those the mirror (`--writers 2`) had created too (it writes after the first writer)
    mirrored = {row[0] for row in _target_rows(home.env[MIRROR_DB_URL_ENV])[0]} & created
    transformed = changed & {
        row[0]
        for row in query(
            _settings(home).state_db_url,
            "SELECT identifier FROM harvest_records WHERE transformed_datestamp IS NOT NULL",
        )
    }
    catch_up = expected_catch_up(home, template_run, move, page_size)
    killed_run = _killed_run(home, template_run)
    # the killed attempt had finished its run (on the unchanged source): the rerun is a new
    # run of the change, and that run's records are the uncrashed reference's
    finished = killed_run is not None and killed_run.status != "running"
    move.apply(scenario.endpoint)
    try:
        final, problems = _rerun(home, specs, scenario.args, double, rng, attempts)
        fresh = backend.new_home(root, f"{name}-fresh", template)
        done = _cli(fresh, "none", scenario.args)
        if done.returncode != 0:
            raise RuntimeError(f"the fresh harvest failed: {done.stderr[-2000:]}")
    finally:
        move.undo(scenario.endpoint)
    expected = snapshot(fresh)
    got = snapshot(home, expected["last_run_id"])
    reference, reference_status = unchanged
    expected["run_record_statuses"] = (
        reference["run_record_statuses"]
        if finished
        else moved_on_statuses(expected["run_record_statuses"], move, created, drafts)
    )
    problems += compare(
        moved_on_view(expected, move, rewritten, transformed),
        moved_on_view(got, move, rewritten, transformed),
    )
    problems += moved_on_problems(got, move, rewritten, was, drafts)
    run_id = expected["last_run_id"]
    expected_status = moved_on_status(status_json(fresh, run_id), move, created, drafts)
    if finished and "error" not in expected_status:
        run_keys = ("records", "total_records", "counters")
        expected_status.update({k: reference_status[k] for k in run_keys})
    got_status = status_json(home, run_id)
    problems += compare_status(expected_status, got_status)
    report = report_of(final)
    fresh_report = moved_on_report(report_of(done), move, created, mirrored, drafts)
    if report is None or fresh_report is None or _run_of(report) == _run_of(fresh_report):
        problems += compare_reports(fresh_report, report)
    elif not finished:
        # an attempt after the change (`--double`) finished the run: the rerun is a new run
        # of a source it holds already
        problems += _new_run_writes(report)
    elif _run_of(report) != str(killed_run.id + 1):
        # the killed attempt had finished its run, and an attempt after the change
        # (`--double`: its kill point never reached) finished the new run of the change: the
        # rerun is one more new run, of a source it holds already
        problems += _new_run_writes(report)
    else:
        # the killed attempt had finished its run: the rerun's is the new one, of the change
        # (resumed after `--double` killed it: what that attempt wrote is counted too, by
        # what it did)
        writers = 2 if _target_rows(home.env[MIRROR_DB_URL_ENV])[0] else 1
        problems += new_run_of_the_change_problems(report, move, writers, double)
    # the run's own counters (all its attempts), whichever run the last rerun was; the
    # rerun's report of that run says the same
    counters = got_status.get("counters")
    problems += compare_catch_up(catch_up, counters, double)
    if report is not None and counters is not None and _run_of(report) == str(run_id):
        reported = {name: report.get(name) for name in catch_up}
        if reported != {name: counters[name] for name in catch_up}:
            problems.append(f"the report counts the catch-up {reported}, status {counters}")
    if not problems:  # kept with the crashed home otherwise, to look into
        shutil.rmtree(fresh.path, ignore_errors=True)
    return got, problems, catch_up


@dataclasses.dataclass
class ReconcileMove:
    """`--source-moves-on --scenario reconcile`: what the source does between a killed
    reconcile and its rerun. It lists again records the template's source had dropped
    (`relisted`: the killed attempt may have deleted them), drops again records an earlier
    reconcile deleted that it listed again (`gone_again`: the killed attempt may have
    harvested them again, or be about to), and drops live records (`dropped`)."""

    relisted: dict[str, Any]  # identifier -> the record listed again
    gone_again: list[str]
    dropped: list[str]
    originals: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, endpoint: Any, source: ReconcileSource, count: int = 2) -> ReconcileMove:
        listed = {r.identifier for r in endpoint.records() if not r.deleted}
        untouched = sorted(listed - set(source.returning))
        relisted = sorted(source.dropped)[:count]
        return cls(
            relisted={i: source.dropped[i] for i in relisted},
            gone_again=sorted(source.returning)[:count],
            dropped=untouched[:: max(1, len(untouched) // count)][:count],
        )

    def apply(self, endpoint: Any) -> None:
        current = {record.identifier: record for record in endpoint.records()}
        self.originals = {i: current[i] for i in [*self.gone_again, *self.dropped]}
        for record in self.relisted.values():
            endpoint.upsert(record)
        for identifier in self.originals:
            endpoint.remove(identifier)

    def undo(self, endpoint: Any) -> None:
        for identifier in self.relisted:
            endpoint.remove(identifier)
        for record in self.originals.values():
            endpoint.upsert(record)

    def __str__(self) -> str:
        return (
            f"lists again {sorted(self.relisted)}, drops again {self.gone_again}, "
            f"drops {self.dropped}"
        )


def _last_run(home: Home) -> int | None:
    """The id of the home's last harvest run, whatever its status (None: none)."""
    rows = query(_settings(home).state_db_url, "SELECT max(id) FROM harvest_runs")
    return rows[0][0] if rows else None


def _reconcile_runs(home: Home) -> list[Any]:
    return query(_settings(home).state_db_url, "SELECT id, status FROM reconcile_runs ORDER BY id")


def expected_moved_on_reconcile(
    fresh: dict[str, Any],
    move: ReconcileMove,
    undone: set[str],
    back_then_gone: set[str],
    new_run: bool,
    harvest_resumed: bool = False,
) -> dict[str, Any]:
    """The rerun's report, from the fresh reconcile's of the changed source (`fresh`) and
    what the killed attempt did (`undone`: records it deleted that the source lists again;
    `back_then_gone`: records it harvested again that the source dropped again). The same
    reconcile run reports its killed attempt's deletions: those too (vanished, deleted and
    returned, where the fresh one never saw them vanish). A new run (the killed attempt had
    closed its own on the unchanged source) finds what the change made only: the records
    dropped (and those harvested again, dropped again) vanished, those listed again
    returned. With `harvest_resumed` (the killed attempt left its harvest of the records
    listed again unfinished), the resumed harvest deletes those dropped again itself
    (GetRecord: idDoesNotExist; its actions), and no sweep finds them vanished."""
    extra = undone | (set() if harvest_resumed else back_then_gone)
    if new_run:
        vanished = set(move.dropped) | back_then_gone
        return {
            "vanished": sorted(vanished),
            "actions": {"delete": len(vanished)} if vanished else {},
            "errors": 0,
            "returned": sorted(undone),
            "returned_actions": {"restore": len(undone)} if undone else {},
        }
    actions = Counter(fresh["actions"])
    actions["delete"] += len(extra)
    returned_actions = Counter(fresh["returned_actions"])
    returned_actions["restore"] += len(extra)
    return {
        "vanished": sorted({*fresh["vanished"], *extra}),
        "actions": {a: n for a, n in actions.items() if n},
        "errors": fresh["errors"],
        "returned": sorted({*fresh["returned"], *extra}),
        "returned_actions": {a: n for a, n in returned_actions.items() if n},
    }


def compare_moved_on_reconcile(
    expected: dict[str, Any], got: dict[str, Any] | None, move: ReconcileMove
) -> list[str]:
    """The rerun's report against `expected_moved_on_reconcile`: vanished, deletions and
    returned exactly; the harvest's actions as a resumed one reports them (`_union_differs`),
    less a `skip` or `delete` of each record dropped again that a resumed harvest asked for
    (deleted at once, or a tombstone already)."""
    if got is None:
        return ["no report from the rerun"]
    problems = [
        f"reconcile {key}: {got.get(key)} vs {expected[key]}"
        for key in ("vanished", "actions", "errors", "returned")
        if got.get(key) != expected[key]
    ]
    actions = Counter(got["returned_actions"])
    asked = len(move.gone_again)
    for action in ("skip", "delete"):
        taken = min(actions[action], asked)
        actions[action] -= taken
        asked -= taken
    if _union_differs(+actions, expected["returned_actions"]):
        problems.append(
            f"reconcile returned_actions {got['returned_actions']} "
            f"vs {expected['returned_actions']}"
        )
    return problems


def _rerun_reconcile_moved_on(
    backend: Backend,
    root: Path,
    name: str,
    template: Home | None,
    home: Home,
    scenario: Scenario,
    move: ReconcileMove,
    rerun: tuple[list[str], bool, random.Random, list[str]],
) -> tuple[dict[str, Any], list[str]]:
    """The source moves on after the reconcile's kill; the rerun is compared with a fresh
    reconcile of the changed source from the same starting home: the same target and harvest
    records, but for the records the killed attempt wrote that the change touched (written
    twice: their revisions and written fields left out), and the report
    `expected_moved_on_reconcile` derives from the change and what the killed attempt did."""
    specs, double, rng, attempts = rerun
    was, killed = _target_by_record(template), _target_by_record(home)
    undone = {i for i in move.relisted if was[i][1] == "live" and killed[i][1] != "live"}
    back_then_gone = {i for i in move.gone_again if was[i][1] != "live" and killed[i][1] == "live"}
    template_runs = len(_reconcile_runs(template)) if template else 0
    killed_runs = _reconcile_runs(home)[template_runs:]
    # the killed attempt's harvest of the records listed again, left unfinished: resumed
    harvest_resumed = _last_finished_run(home) != _last_run(home)
    new_run = bool(killed_runs) and killed_runs[-1].status == "succeeded"
    expected_run = (killed_runs[-1].id + 1) if new_run else None
    move.apply(scenario.endpoint)
    try:
        final, problems = _rerun(home, specs, scenario.args, double, rng, attempts)
        fresh = backend.new_home(root, f"{name}-fresh", template)
        done = _cli(fresh, "none", scenario.args)
        if done.returncode != 0:
            raise RuntimeError(f"the fresh reconcile failed: {done.stderr[-2000:]}")
    finally:
        move.undo(scenario.endpoint)
    fresh_report, report = report_of(done), report_of(final)
    expected = snapshot(fresh)
    got = snapshot(home)
    # written twice (deleted and restored, restored and deleted) or by another harvest run
    rewritten = undone | back_then_gone | set(move.relisted) | set(move.gone_again)
    views = (_rewritten_view(s, rewritten, set(move.gone_again)) for s in (expected, got))
    problems += compare(*views)
    if expected_run is None:
        expected_run = fresh_report["run_id"]
    if report is not None and report["run_id"] != expected_run and double:
        # the attempt killed after the change closed the run: the rerun is a new one, of a
        # source the target holds already
        acted = {k: report[k] for k in _RECONCILE if report[k]}
        problems += [f"the new reconcile reports: {acted}"] if acted else []
    else:
        if report is not None and report["run_id"] != expected_run:
            problems.append(f"the rerun is reconcile run {report['run_id']}, not {expected_run}")
        wanted = expected_moved_on_reconcile(
            fresh_report, move, undone, back_then_gone, new_run, harvest_resumed
        )
        problems += compare_moved_on_reconcile(wanted, report, move)
    if not problems:
        shutil.rmtree(fresh.path, ignore_errors=True)
    return got, problems


def _rewritten_view(
    got: dict[str, Any], rewritten: set[str], gone_again: set[str]
) -> dict[str, Any]:
    """A snapshot as `compare` reads it for a reconcile whose source moved on: the revisions
    and written fields of `rewritten` records left out, and the last harvest run's statuses
    (which run that is, and what it holds, depends on where the kill was: the report's
    returned and actions say what it harvested). Of the records dropped again (`gone_again`)
    the sets and XML kept are left out too: a resumed harvest that deletes one (GetRecord:
    idDoesNotExist) keeps none, a reconcile marking it gone keeps the last copy."""
    view = _written_again_view(got, rewritten)
    rows = []
    for row in got["harvest_records"]:
        if row[0] in rewritten:
            row = (*row[:5], -1, "", "", *row[8:])
        if row[0] in gone_again:
            row = (*row[:8], "", *row[9:11], "", *row[12:])
        rows.append(row)
    view["harvest_records"] = sorted(rows)
    view["run_record_statuses"] = {}
    return view


def _written_again_view(
    got: dict[str, Any], rewritten: set[str], left_out: set[str] = frozenset()
) -> dict[str, Any]:
    """A snapshot with the revisions of the `rewritten` records left out of each target and
    of each writer's memory (written twice, by a killed attempt and after the source moved
    on), and the `left_out` records left out of the targets."""
    view = dict(got)
    for key in ("target", "mirror"):
        view[key] = sorted(
            (*row[:3], -1, -1, *row[5:]) if row[0] in rewritten else row
            for row in got[key]
            if row[0] not in left_out
        )
    view["writer_memories"] = sorted(
        (*row[:3], -1, "", "") if row[0] in rewritten and len(row) > 3 else row
        for row in got["writer_memories"]
    )
    return view


def _run_of(report: dict[str, Any]) -> str:
    """The harvest run a report tells of (a Dagster run's: the runs its assets worked on)."""
    return str(report["harvest_runs"] if report.get("dagster") else report["run_id"])


def sweep_reidentified(
    backend: Backend,
    root: Path,
    args: argparse.Namespace,
    points: list[str],
    results: dict[str, Any],
    log: Callable[[str], None],
) -> int:
    """The `reidentify` scenarios (see `reidentify_template`), each with a source of its
    own: the harvest of the old identifiers' deletions, and the reconcile of a source that
    keeps none. Returns how many points had problems."""
    from oai_pipeline.sample_endpoint.server import OAIEndpoint

    failures = 0
    count = max(20, args.records // 10)
    for policy in ("persistent", "no"):
        records = reidentify_records(count)
        with OAIEndpoint(records, page_size=args.page_size, deleted_record=policy) as endpoint:
            template, swept = reidentify_template(backend, root, endpoint, args.batch_size, log)
            name = template.path.name.removesuffix("-start")
            scenario = Scenario(name, swept, template, check=reidentified_problems(template))
            outcomes = run_scenario(
                backend,
                root,
                endpoint.base_url,
                scenario,
                points,
                args.per_point,
                args.double,
                log,
            )
        results[name] = outcomes
        failures += sum(1 for o in outcomes if o["problems"])
    return failures


def unreadable(records: list, step: int) -> None:
    """Every `step`-th record (from the second) made one no transformer can read: per-record
    errors (transform stage), `failed` in the run, which goes on."""
    records[1::step] = [
        dataclasses.replace(r, metadata={PREFIX: b"<broken xmlns='urn:x:broken'/>"})
        for r in records[1::step]
    ]


def fails_first(records: int, page_size: int) -> Any:
    """`--fails-first`: the source refuses its list from about half way (a page boundary
    past the first page), every time until it recovers."""
    from oai_pipeline.sample_endpoint.faults import Faults

    return Faults(refuse_list_from_cursor=max(page_size, records // 2 // page_size * page_size))


def target_full(
    backend: Backend,
    root: Path,
    template: Home,
    args: list[str],
    after_batches: int | None = None,
    label: str = "target-full",
) -> TargetFull:
    """`--fails-first target`: the target's disk full after about half the harvest's target
    batches: the pages its target holds when a harvest from `template` is killed after
    that batch (a scratch home), so that every failing run refuses at the same size; with
    a mirror (`--writers 2`, `writer_apply` counting both writers' batches) the pages its
    file holds then too, the one disk full for both.

    `after_batches` (`--target-full-after K`): full after the K-th batch instead, and the
    mirror's file on another disk with room: with K below the first writer's batches of a
    group (the writers write a group one after the other) the first writer fails part-way,
    some of its batches committed, the mirror's none yet."""
    name = label if after_batches is None else f"{label}-after-{after_batches}"
    counted = backend.new_home(root, f"{name}-counted", template)
    counts_file = root / f"{name}-counts.json"
    if _cli(counted, f"count:{counts_file}", args).returncode != 0:
        raise RuntimeError("the harvest measuring the target's batches failed")
    batches = json.loads(counts_file.read_text()).get("writer_apply", 0)
    full_after = batches // 2 if after_batches is None else after_batches
    if not 1 <= full_after < batches:
        raise RuntimeError(f"{batches} target batch(es): full after {full_after} is not part-way")
    full = backend.new_home(root, name, template)
    _cli(full, f"writer_apply:{full_after}:after", args)
    if after_batches is not None and _target_rows(full.env[MIRROR_DB_URL_ENV])[0]:
        raise RuntimeError(f"batch {after_batches} is past the first writer's: mirror written")
    url = _settings(full).target_db_url
    [(pages,)] = query(url, "PRAGMA page_count")
    [(all_pages,)] = query(_settings(counted).target_db_url, "PRAGMA page_count")
    mirror_pages = all_mirror_pages = None
    if after_batches is None and _target_rows(counted.env[MIRROR_DB_URL_ENV])[0]:
        # a file not yet created may hold one page (0 would lift SQLite's cap)
        [(mirror_pages,)] = query(full.env[MIRROR_DB_URL_ENV], "PRAGMA page_count")
        mirror_pages = max(1, mirror_pages)
        [(all_mirror_pages,)] = query(counted.env[MIRROR_DB_URL_ENV], "PRAGMA page_count")
    if pages + (mirror_pages or 0) >= all_pages + (all_mirror_pages or 0):
        raise RuntimeError(f"the targets hold {pages}, {mirror_pages} pages part-way")
    return TargetFull(pages, mirror_pages)


def what_fails_first(
    kind: str,
    backend: Backend,
    root: Path,
    scenario: Scenario,
    page_size: int,
    full_after: int | None = None,
) -> Any:
    """`--fails-first KIND` of the scenario's harvest from its template: the source refusing
    its list from about half the pages an uninterrupted harvest lists (an incremental list
    is shorter than the source), or the target's disk full (`target_full`)."""
    assert scenario.template is not None
    if kind == "target":
        return target_full(
            backend, root, scenario.template, scenario.args, full_after, f"{scenario.name}-full"
        )
    counted = backend.new_home(root, f"{scenario.name}-list-counted", scenario.template)
    counts_file = root / f"{scenario.name}-list-counts.json"
    if _cli(counted, f"count:{counts_file}", scenario.args).returncode != 0:
        raise RuntimeError("the harvest measuring the source's list failed")
    pages = json.loads(counts_file.read_text()).get("list_page", 0)
    if pages < 2:
        raise RuntimeError(f"{pages} page(s) listed: nothing to refuse part-way")
    return fails_first(pages * page_size, page_size)


def prefix_changed_template(backend: Backend, root: Path, full: Home) -> Home:
    """`prefix`: the fully harvested home whose harvester was then given another metadata
    prefix (`harvesters update --metadata-prefix`): the harvest swept lists every record
    again in the new format, and re-stages and re-writes those last harvested before the
    change (`harvesters.prefix_changed`); those the new format leaves out keep their copy."""
    home = backend.new_home(root, f"{backend.name}-prefix-changed", full)
    done = _cli(home, "none", ["harvesters", "update", HARVESTER, "--metadata-prefix", NEW_PREFIX])
    if done.returncode != 0:
        raise RuntimeError(f"the prefix change failed: {done.stderr[-2000:]}")
    return home


def retitled_in_new_format(records: list, step: int) -> None:
    """`prefix`: every `step`-th record's copy in the new format says another title than its
    copy in the old one (NEW_FORMAT_SAYS), as formats of one record may: the harvest after
    the change must write it again (the others' transform is the same, nothing to write)."""
    for index in range(0, len(records), step):
        record = records[index]
        if NEW_PREFIX not in record.metadata:
            continue
        new = record.metadata[NEW_PREFIX].replace(b"</title>", NEW_FORMAT_SAYS + b"</title>", 1)
        metadata = {PREFIX: record.metadata[PREFIX], NEW_PREFIX: new}
        records[index] = dataclasses.replace(record, metadata=metadata)


def prefix_problems(
    template: Home, also: Callable[[Home], list[str]] | None = None
) -> Callable[[Home], list[str]]:
    """`prefix`: what the harvest after the change must leave (the reference's too, so that a
    sweep cannot pass without the path it is for): records listed in the new format, their
    XML the new format's (not the template's copy) and written again (a newer revision; a
    writer that leaves drafts, whose drafts keep revision 0: a write since the change),
    unless their transform or write failed; and what `also` (the variant's check) says."""

    def records(home: Home) -> dict[str, tuple[Any, ...]]:
        rows = query(
            _settings(home).state_db_url,
            "SELECT r.identifier, r.last_harvested_at, r.written_revision, x.xml, "
            "(SELECT count(*) FROM record_errors e WHERE e.harvester_id = r.harvester_id "
            "AND e.identifier = r.identifier), r.last_written_at "
            "FROM harvest_records r JOIN harvest_record_xml x "
            "ON x.harvester_id = r.harvester_id AND x.identifier = r.identifier "
            "WHERE NOT r.deleted",
        )
        return {row[0]: tuple(row[1:]) for row in rows}

    def check(home: Home) -> list[str]:
        [(change,)] = query(_settings(home).state_db_url, "SELECT prefix_changed FROM harvesters")
        changed_at = (json.loads(change) if isinstance(change, str) else change)["at"]
        before, after = records(template), records(home)
        again = [i for i, (seen, *_) in after.items() if seen and seen >= changed_at]
        retitled = [i for i in again if NEW_FORMAT_SAYS in bytes(after[i][2])]
        problems = [] if retitled else ["no record harvested again saying what the new format does"]
        for identifier in again:
            _, revision, xml, errors, written_at = after[identifier]
            _, old_revision, old_xml, *_ = before.get(identifier, (None, 0, None, 0, None))
            newer = (revision or 0) > (old_revision or 0) or (
                revision == 0 and (written_at or "") >= changed_at
            )
            if bytes(xml) == bytes(old_xml or b""):
                problems.append(f"{identifier} kept the old format's XML")
            elif identifier in retitled and not errors and not newer:
                problems.append(f"{identifier} not written again ({revision}, {old_revision})")
        return problems[:5] + (also(home) if also is not None else [])

    return check


def _suffix(stage: str) -> str:
    return "" if stage == "write" else f"-{stage}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "child":
        child(argv[1:])
        return 0
    if argv and argv[0] == "dagster-child":
        dagster_child(argv[1:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--page-size", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument(
        "--scenario",
        choices=(
            "first",
            "incremental",
            "prefix",
            "reconcile",
            "reidentify",
            "rekey",
            "both",
            "all",
        ),
        default="both",
        help="both: first and incremental; all: and prefix (the harvest after `harvesters "
        f"update --metadata-prefix {NEW_PREFIX}`) and reconcile and reidentify (a source that "
        "re-identified every record: the harvest that deletes the old identifiers, and the "
        "reconcile that finds them vanished, hand their target records to the new ones) and "
        "rekey (harvesters rekey killed, and the first harvest after it)",
    )
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="sqlite")
    parser.add_argument("--points", default="all")
    parser.add_argument("--per-point", type=int, default=4)
    parser.add_argument("--double", action="store_true", help="kill the rerun once more too")
    parser.add_argument(
        "--resumed",
        action="store_true",
        help=f"also sweep each scenario's harvest resuming a run killed at {INTERRUPTION}",
    )
    parser.add_argument(
        "--resumed-at",
        default="",
        help=f"with --resumed: the stages the first harvest is killed in, comma-separated "
        f"(default write): {', '.join(f'{k}={v}' for k, v in INTERRUPTIONS.items())}",
    )
    parser.add_argument(
        "--source-moves-on",
        action="store_true",
        help="after each kill, change the source (update, delete, add records, dated now) "
        "before the rerun, and compare it with a fresh harvest of the changed source "
        "(the resumed run's catch-up list); for reconcile: records it deleted listed again, "
        "records it harvests again and others dropped (see ReconcileMove)",
    )
    parser.add_argument(
        "--writers",
        type=int,
        choices=(1, 2),
        default=1,
        help="2: the harvester writes to a mirror too (mirror_writer.py, a target database of "
        "its own), compared with the reference's as the target is, and each writer's memory",
    )
    parser.add_argument(
        "--failing-records",
        action="store_true",
        help=f"the records of the set {REFUSED_SET} go to a community the last writer's "
        "target lacks, which refuses them (besides the records no transformer reads); "
        "their errors, failed statuses and the run's status are compared",
    )
    parser.add_argument(
        "--fails-first",
        nargs="?",
        const="source",
        choices=("source", "target"),
        help="(first and incremental scenarios, CLI) the harvest fails outright first, then "
        "what failed recovers and it is rerun: `source` (the default) refuses its list half "
        "way (HTTP 403); `target` (SQLite) is a target whose disk is full after half its batches "
        "(SQLITE_FULL). Kills in the failing run (rerun while it fails, then once "
        "recovered) and in the rerun, compared with an uninterrupted fail-then-rerun",
    )
    parser.add_argument(
        "--target-full-after",
        type=int,
        metavar="K",
        help="(--fails-first target) the target's disk is full after its K-th batch instead "
        "of half of them, a mirror (--writers 2) on another disk with room: with K below "
        "the first writer's batches of a group, the FIRST writer fails part-way",
    )
    parser.add_argument(
        "--drafts",
        action="store_true",
        help="(first and incremental scenarios) the writer leaves drafts (publish: false): "
        "the drafts' data are compared too",
    )
    parser.add_argument(
        "--deposits",
        action="store_true",
        help="(first scenario) users deposited every third record's DOI in the target before "
        "the first harvest, which takes the deposits over (a migration)",
    )
    parser.add_argument("--list", action="store_true", help="print the fault points")
    parser.add_argument(
        "--dagster", action="store_true", help="in-process Dagster runs instead of the CLI"
    )
    parser.add_argument("--json-out")
    parser.add_argument("--keep", action="store_true", help="keep the homes of passing points")
    args = parser.parse_args(argv)
    if args.list:
        for name, (module, path) in POINTS.items():
            print(f"{name:20} {module}:{path}{' (+mid)' if name in MID_POINTS else ''}")
        for name in SQL_POINTS:
            print(f"{name:20} a SQL statement (see SQL_POINTS)")
        return 0
    # SIGTERM ends the sweep through its `finally`s: a PostgreSQL server it started stops.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    points = [*POINTS, *SQL_POINTS] if args.points == "all" else args.points.split(",")
    unknown = {p.split(":")[0] for p in points} - set(POINTS) - set(SQL_POINTS)
    if unknown:
        parser.error(f"unknown points: {sorted(unknown)}")
    stages = args.resumed_at.split(",") if args.resumed_at else ["write"]
    if set(stages) - set(INTERRUPTIONS):
        parser.error(f"unknown stages: {sorted(set(stages) - set(INTERRUPTIONS))}")
    args.resumed = args.resumed or bool(args.resumed_at)
    if args.source_moves_on and args.scenario in ("prefix", "reidentify", "rekey", "all"):
        parser.error("--source-moves-on sweeps the first, incremental and reconcile scenarios only")
    swept_failing = ("first", "incremental", "both")
    if args.fails_first and (
        args.dagster or args.source_moves_on or args.scenario not in swept_failing
    ):
        parser.error(
            "--fails-first sweeps the CLI's first and incremental scenarios, the source not "
            "moving on"
        )
    if args.target_full_after is not None and args.fails_first != "target":
        parser.error("--target-full-after K is when the target fills: --fails-first target")
    if args.fails_first == "target" and args.backend != "sqlite":
        parser.error("--fails-first target fills a SQLite target's disk: --backend sqlite")
    if args.dagster and args.scenario in ("reidentify", "rekey"):
        parser.error(f"--scenario {args.scenario} sweeps CLI commands only")
    if (args.writers == 2 or args.failing_records) and args.scenario in ("reidentify", "rekey"):
        parser.error(f"--scenario {args.scenario} sweeps one writer, every record written")

    from oai_pipeline.sample_endpoint.records import generate_datacite_records

    first_day = datetime(2024, 1, 5, tzinfo=UTC)
    # The Dagster grid's windows end before a change dated now, which no run of them lists
    # (nor its catch-up list): moving on, the records are of the last weeks, and the grid
    # reaches today's window, as a run of the latest days a sensor requests does.
    today = datetime.now(UTC).date().isoformat()
    if args.dagster and args.source_moves_on:
        first_day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        first_day -= timedelta(days=20)
    # `prefix`: the source serves both formats, the harvester changes from one to the other
    served = (PREFIX, NEW_PREFIX) if args.scenario in ("prefix", "all") else (PREFIX,)
    records = generate_datacite_records(
        args.records, seed=7, start=first_day, span_days=3, prefixes=served
    )
    unreadable(records, 97)
    if NEW_PREFIX in served:
        retitled_in_new_format(records, 7)
    root = Path(tempfile.mkdtemp(prefix="crash-sweep-", dir=os.environ.get("CRASH_SWEEP_TMP")))
    results: dict[str, Any] = {}
    failures = 0

    def log(line: str) -> None:
        print(line, flush=True)

    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    for backend_name in backends:
        backend = PostgresBackend() if backend_name == "postgres" else Backend()
        wanted = {
            "both": {"first", "incremental"},
            "all": {"first", "incremental", "prefix", "reconcile", "reidentify", "rekey"},
        }.get(args.scenario, {args.scenario})
        if args.dagster:  # a reconcile is a CLI command, no Dagster run of the assets
            wanted -= {"reconcile", "reidentify", "rekey"}
        try:
            if "reidentify" in wanted:
                failures += sweep_reidentified(backend, root, args, points, results, log)
            if "rekey" in wanted:
                failures += sweep_rekey(backend, root, args, points, results, log)
            if not wanted - {"reidentify", "rekey"}:
                continue
            with endpoint_for(records, args.page_size) as endpoint:
                base = backend.new_home(root, f"{backend_name}-empty")
                register_harvester(
                    base,
                    endpoint.base_url,
                    args.batch_size,
                    writers=args.writers,
                    failing_records=args.failing_records,
                    drafts=args.drafts,
                )
                if args.deposits:
                    deposit_dois(base, records)
                check = variant_problems(args.writers, args.failing_records)
                first_args = ["harvest", HARVESTER, "--json"]
                if args.dagster:
                    last = today if args.source_moves_on else "2024-01-08"
                    first_args = ["dagster", first_day.date().isoformat(), last]
                full = backend.new_home(root, f"{backend_name}-full", base)
                done = _cli(full, "none", first_args)
                if done.returncode != 0:
                    raise RuntimeError(done.stderr[-2000:])
                scenarios = []
                if "first" in wanted:
                    scenarios.append(
                        Scenario("first", first_args, base, endpoint=endpoint, check=check)
                    )
                # `prefix` before `incremental`, which changes the source and `full`'s target
                for phase in ("first", "prefix", "incremental", "reconcile"):
                    if phase != "first" and phase not in wanted:
                        continue
                    if phase == "prefix":
                        template = prefix_changed_template(backend, root, full)
                        scenarios = [
                            Scenario(
                                "prefix",
                                first_args,
                                template,
                                endpoint=endpoint,
                                check=prefix_problems(template, check),
                            )
                        ]
                    if phase == "reconcile":
                        template, reconciled = reconcile_template(
                            backend, root, full, endpoint, log
                        )
                        scenarios = [
                            Scenario(
                                "reconcile",
                                ["reconcile", HARVESTER, "--json"],
                                template,
                                endpoint=endpoint,
                                check=check,
                                reconciled=reconciled,
                            )
                        ]
                    if phase == "incremental":
                        day = first_day + timedelta(days=10)
                        # the Dagster grid harvests the change's day only: no record moved
                        # without a new datestamp would be listed again
                        relisted = None if args.dagster else RELISTED_SINCE
                        changed = change_source(endpoint, records, day, relisted_since=relisted)
                        log(f"[{backend_name}] source changed: {changed}")
                        edited = edit_target_locally(full)
                        log(f"[{backend_name}] target records changed by users: {edited}")
                        since = RELISTED_SINCE.date().isoformat()
                        again = ["harvest", HARVESTER, "--since", since, "--json"]
                        if args.dagster:
                            last = today if args.source_moves_on else day.date().isoformat()
                            again = ["dagster", day.date().isoformat(), last]
                        scenarios = [
                            Scenario("incremental", again, full, endpoint=endpoint, check=check)
                        ]
                    if args.resumed:
                        scenarios += [
                            dataclasses.replace(
                                s,
                                name=f"{s.name}-resumed{_suffix(stage)}",
                                interrupted_by=INTERRUPTIONS[stage],
                            )
                            for s in scenarios
                            for stage in stages
                        ]
                    for scenario in scenarios:
                        scenario.name = f"{backend_name}-{scenario.name}"
                        if args.fails_first:
                            scenario.fails_first = what_fails_first(
                                args.fails_first,
                                backend,
                                root,
                                scenario,
                                args.page_size,
                                args.target_full_after,
                            )
                        outcomes = run_scenario(
                            backend,
                            root,
                            endpoint.base_url,
                            scenario,
                            points,
                            args.per_point,
                            args.double,
                            log,
                            moves_on_pages=args.page_size if args.source_moves_on else None,
                        )
                        results[scenario.name] = outcomes
                        failures += sum(1 for o in outcomes if o["problems"])
                    scenarios = []
        finally:
            backend.close()
    total = sum(len(v) for v in results.values())
    log(f"{total} crash points, {failures} with problems; homes under {root}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=1))
    if not failures and not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
