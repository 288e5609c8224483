"""Long-horizon soak: does the target stay in step with a source that changes for months?

Not a test (it takes minutes to hours); `test_soak.py` runs it for a few simulated days.

    .venv/bin/python -m oai_pipeline_tests.resume.soak \\
        [--days 200] [--records 500] [--seed 1] [--deleted-record persistent|transient|no] \\
        [--crash-rate 0.2] [--crash-points NAME,…] [--crash-calls 3] [--check-every 14] \\
        [--keep-days 7] [--dagster] [--backend sqlite|postgres] [--work DIR] [--keep-work]

How it works. The shipped OAI-PMH endpoint serves generated DataCite records from this
process. Time is simulated: every process (this one, which serves the source, and each CLI
child) sees `datetime.now()` shifted by an offset this driver sets, so run stamps, leases,
responseDates and retention all follow the simulated calendar. Each simulated day the source
creates, updates, deletes (a deleted header, or for `no`/`transient` sources a record that
vanishes) and re-adds a few records, each dated the moment it changed in that day (a few
dated back into the overlap, as sources that index late do). Then the day's incremental
harvest runs as the schedule would ask it: `oai-pipeline harvest gen --since` the last
complete sweep's responseDate minus the overlap (`schedules.last_complete_sweep`), the very
first day a full harvest; with `--dagster`, an in-process Dagster run of the range of daily
windows the schedule requests (`schedules.incremental_window_range`). Some days it is killed
at a random fault point (crash_sweep's POINTS), the source sometimes moves on, and the
harvest is rerun until it succeeds. Weekly a
`reconcile`, monthly a `prune --keep-days`. Every `--check-every` days (a reconcile day) and
at the end, the target is compared with a fresh full harvest of the source as it is then
into a fresh home: the same live records with the same DOI and data, no duplicate, and no
live record the source does not serve live; and the sizes of the state store and the target
are printed. Exit status 1 if any check found a divergence.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import shutil
import sys
import tempfile
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# The child's clock offset (seconds added to the real clock), set by the driver.
CLOCK_ENV = "OAI_SOAK_CLOCK_OFFSET_SECONDS"
HARVESTER = "gen"
PREFIX = "oai_datacite"
IDENTIFIER = "oai:generated.oai-pipeline:{}"
# Where a day's harvest may be killed (crash_sweep POINTS / SQL_POINTS), each at a call
# number from 1 to 3, before or after the call.
CRASH_POINTS = (
    "create_run",
    "save_checkpoint",
    "save_response_date",
    "list_page",
    "stage",
    "update_counters",
    "write_part",
    "storage_finish",
    "write_manifest",
    "save_transformed",
    "claim",
    "writer_apply",
    "save_written",
    "save_write_outcomes",
    "mark_gone",
    "changed_locally",
    "lookup",
    "finish_run",
    "prune_run_records",
    "lock_release",
    "sql_run_status",
    "sql_written_outcome",
)
RECONCILE_CRASH_POINTS = ("mark_gone", "writer_apply", "save_written", "finish_run")


_REAL_DATETIME = datetime


class _AnyDatetime(type):
    """Every datetime is an instance of the shifted class, as every instance it makes is a
    plain datetime."""

    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, _REAL_DATETIME)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, _REAL_DATETIME)


class ShiftedDatetime(datetime, metaclass=_AnyDatetime):
    """`datetime` whose `now()` is the real clock plus `offset`. What it builds
    (`fromisoformat`, `strptime`, a constructor call) is a plain datetime, so nothing that
    pickles, serialises or compares types (Dagster does) ever meets the subclass."""

    offset = timedelta(0)

    def __new__(cls, *args: Any, **kwargs: Any) -> datetime:  # type: ignore[misc]
        return _REAL_DATETIME(*args, **kwargs)

    @classmethod
    def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
        return _REAL_DATETIME.now(tz) + cls.offset

    @classmethod
    def utcnow(cls) -> datetime:  # type: ignore[override]
        return _REAL_DATETIME.now(UTC).replace(tzinfo=None) + cls.offset


def install_shifted_clock() -> None:
    """`datetime.datetime` the shifted class, before the project is imported, so every
    `from datetime import datetime` takes it (a forked child's parent calls it first)."""
    import datetime as datetime_module

    # code Dagster generates from annotations names the class: name it as the real one
    ShiftedDatetime.__name__ = ShiftedDatetime.__qualname__ = "datetime"
    ShiftedDatetime.__module__ = "datetime"
    datetime_module.datetime = ShiftedDatetime  # type: ignore[misc]


def child(argv: list[str]) -> None:
    """`soak child …`: crash_sweep's child (a fault, the CLI) under the shifted clock, at
    the offset its environment says (CLOCK_ENV)."""
    import datetime as datetime_module

    if not hasattr(datetime_module.datetime, "offset"):  # a fresh interpreter
        install_shifted_clock()
    offset = timedelta(seconds=float(os.environ.get(CLOCK_ENV, "0")))
    datetime_module.datetime.offset = offset  # type: ignore[attr-defined]
    from oai_pipeline_tests.resume import crash_sweep

    spec, args = argv[0], argv[2:]
    if args[0] == "dagster":  # dagster FIRST_WINDOW LAST_WINDOW: an in-process Dagster run
        crash_sweep.dagster_child([spec, *args[1:]])
    else:
        crash_sweep.child(argv)


# ------------------------------------------------------------------------- the driver


class Clock:
    """The simulated clock: real time shifted, the shift moved to a chosen moment."""

    def __init__(self, start: datetime) -> None:
        self.offset = start - datetime.now(UTC)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def set(self, moment: datetime) -> None:
        """From now on the simulated clock reads `moment` (and goes on from there); it never
        goes back, or a change could be dated before a harvest that already listed."""
        self.offset = max(self.offset, moment - datetime.now(UTC))


@dataclasses.dataclass
class Source:
    """The endpoint and what the driver knows of it: each identifier's first metadata (to
    revise and re-add it) and how many times it was revised."""

    endpoint: Any
    policy: str
    originals: dict[str, Any]
    revisions: Counter[str] = dataclasses.field(default_factory=Counter)
    next_number: int = 0

    def live(self) -> list[str]:
        return sorted(r.identifier for r in self.endpoint.records() if not r.deleted)

    def gone(self) -> list[str]:
        """Identifiers once served that are now deleted or vanished."""
        served = {r.identifier: r for r in self.endpoint.records()}
        return sorted(i for i in self.originals if i not in served or served[i].deleted)

    def serve(self, identifier: str, moment: datetime) -> None:
        """Serve the record live with a new revision of its title, dated `moment`."""
        self.revisions[identifier] += 1
        record = self.originals[identifier]
        tag = f" (rev {self.revisions[identifier]})</title>"
        xml = record.metadata[PREFIX].replace(b"</title>", tag.encode(), 1)
        self.endpoint.upsert(
            dataclasses.replace(record, datestamp=moment, deleted=False, metadata={PREFIX: xml})
        )

    def delete(self, identifier: str, moment: datetime, rng: random.Random) -> str:
        """A deleted header where the source keeps deletions (and sometimes for `transient`),
        else the record vanishes."""
        if self.policy == "persistent" or (self.policy == "transient" and rng.random() < 0.5):
            self.endpoint.mark_deleted(identifier, moment)
            return "deleted"
        self.endpoint.remove(identifier)
        return "removed"

    def create(self, moment: datetime, seed: int) -> str:
        from oai_pipeline.sample_endpoint.records import generate_datacite_records

        (record,) = generate_datacite_records(
            1, seed=seed, start=moment, span_days=1, prefixes=(PREFIX,), deleted_fraction=0
        )
        identifier = IDENTIFIER.format(f"soak-{self.next_number}")
        self.next_number += 1
        self.originals[identifier] = dataclasses.replace(record, identifier=identifier)
        self.serve(identifier, moment)
        return identifier


def change_source(
    source: Source,
    clock: Clock,
    start: datetime,
    rng: random.Random,
    scale: int,
    span: timedelta = timedelta(hours=20),
) -> Counter[str]:
    """Up to `scale` changes at random moments of `span` from `start`, in time order; about
    one in ten dated up to an hour before the moment it is made (indexed late)."""
    changes = Counter[str]()
    count = rng.randint(1, max(2, scale))
    seconds = int(span.total_seconds())
    moments = sorted(start + timedelta(seconds=rng.randint(1, seconds)) for _ in range(count))
    for moment in moments:
        clock.set(moment)
        dated = moment - timedelta(minutes=rng.randint(1, 60)) if rng.random() < 0.1 else moment
        live, gone = source.live(), source.gone()
        kind = rng.choices(["create", "update", "delete", "readd"], [3, 5, 2, 1])[0]
        if kind == "readd" and not gone:
            kind = "update"
        if kind in ("update", "delete") and not live:
            kind = "create"
        if kind == "create":
            source.create(dated, seed=rng.randrange(10**9))
        elif kind == "update":
            source.serve(rng.choice(live), dated)
        elif kind == "readd":
            source.serve(rng.choice(gone), dated)
        else:
            kind = source.delete(rng.choice(live), dated, rng)
        changes[kind] += 1
    return changes


def _run(home: Any, args: list[str], spec: str = "none") -> Any:
    from oai_pipeline_tests import forked_python

    return forked_python.run_module(
        "oai_pipeline_tests.resume.soak:main",
        ["child", spec, "--", *args],
        home.env,
        timeout=900,
        prelude="oai_pipeline_tests.resume.soak:install_shifted_clock",
    )


class Soak:
    def __init__(self, options: argparse.Namespace, work: Path) -> None:
        from oai_pipeline_tests.resume import crash_sweep

        self.options = options
        self.work = work
        self.rng = random.Random(options.seed)
        # the simulated calendar ends before the real today (no date in the future)
        self.day_zero = (datetime.now(UTC) - timedelta(days=options.days + 2)).replace(
            hour=0, minute=0, second=0, microsecond=0
        )
        self.clock = Clock(self.day_zero)
        self.backend = (
            crash_sweep.PostgresBackend()
            if options.backend == "postgres"
            else crash_sweep.Backend()
        )
        self.problems: list[str] = []
        self.crashes = Counter[str]()
        self.last_harvest_at: datetime | None = None

    def log(self, text: str) -> None:
        print(f"[{self.clock.now():%Y-%m-%d %H:%M}] {text}", flush=True)

    def cli(self, home: Any, args: list[str], spec: str = "none") -> Any:
        """The CLI in a child under the simulated clock; a kill exits 137."""
        home.env[CLOCK_ENV] = str(self.clock.offset.total_seconds())
        return _run(home, args, spec)

    def until_done(self, home: Any, args: list[str], what: str, points: tuple[str, ...]) -> None:
        """Run `args`, sometimes killed first at a random fault point (the source sometimes
        moving on before the rerun), then rerun until it succeeds."""
        from oai_pipeline_tests.resume.crash_sweep import EXIT_CODE

        spec = "none"
        if self.rng.random() < self.options.crash_rate:
            moment = self.rng.choice(["before", "after"])
            chosen = self.options.crash_points.split(",") if self.options.crash_points else points
            calls = self.rng.randint(1, self.options.crash_calls)
            spec = f"{self.rng.choice(chosen)}:{calls}:{moment}"
        for _attempt in range(5):
            done = self.cli(home, args, spec)
            if done.returncode == 0:
                return
            if done.returncode != EXIT_CODE:
                self.problems.append(f"{what} {args} failed: {done.stderr[-1500:]}")
                self.log(self.problems[-1])
                return
            self.crashes[spec.split(":")[0]] += 1
            self.log(f"{what} killed at {spec}; rerun")
            if what == "harvest" and self.rng.random() < 0.5:
                # the source moves on before the rerun (which must list that too); not before
                # a reconcile's: it harvests no update, and the check follows it
                self.clock.set(self.clock.now() + timedelta(minutes=self.rng.randint(5, 90)))
                moved = change_source(
                    self.source, self.clock, self.clock.now(), self.rng, 3, timedelta(minutes=20)
                )
                self.log(f"the source moved on: {dict(moved)}")
            self.clock.set(self.clock.now() + timedelta(minutes=5))
            spec = "none"
        self.problems.append(f"{what} {args} never succeeded")

    def harvest_args(self) -> list[str]:
        """The day's incremental harvest as the schedule asks it: since the last complete
        sweep's responseDate minus the overlap (its `--since` to the second, where the
        schedule rounds down to the day's window)."""
        from oai_pipeline.defs.schedules import (
            incremental_window_range,
            last_complete_sweep,
            overlap,
        )
        from oai_pipeline.oai.windows import read_response_date
        from oai_pipeline.pipeline.services import Services
        from oai_pipeline_tests.resume.crash_sweep import _settings

        with Services(_settings(self.home)) as services:
            run = last_complete_sweep(services.state, HARVESTER)
        if self.options.dagster:  # the schedule's run request: its range of daily windows
            last_response = run["response_date"] if run else None
            first, last = incremental_window_range(
                last_response, self.clock.now(), overlap=overlap()
            )
            return ["dagster", first, last]
        response = read_response_date(run["response_date"]) if run else None
        if response is None:
            return ["harvest", HARVESTER]
        since = response - overlap()
        return ["harvest", HARVESTER, "--since", since.strftime("%Y-%m-%dT%H:%M:%SZ")]

    def run(self) -> int:
        from oai_pipeline.sample_endpoint import provider as provider_module

        clock = self.clock

        class SourceClock(datetime):  # the endpoint's responseDate and token expiry
            @classmethod
            def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
                return datetime.now(tz) + clock.offset

        real_datetime = provider_module.datetime
        provider_module.datetime = SourceClock  # type: ignore[misc]
        try:
            return self._run(self.day_zero)
        finally:
            provider_module.datetime = real_datetime  # type: ignore[misc]

    def _run(self, day_zero: datetime) -> int:
        from oai_pipeline.sample_endpoint.records import generate_datacite_records
        from oai_pipeline.sample_endpoint.server import OAIEndpoint
        from oai_pipeline_tests.resume import crash_sweep

        options = self.options
        records = generate_datacite_records(
            options.records,
            seed=options.seed,
            start=day_zero - timedelta(days=60),
            span_days=60,
            prefixes=(PREFIX,),
            deleted_fraction=0.03 if options.deleted_record == "persistent" else 0.0,
        )
        endpoint = OAIEndpoint(
            records, page_size=options.page_size, deleted_record=options.deleted_record
        )
        with endpoint:
            self.source = Source(
                endpoint, options.deleted_record, {r.identifier: r for r in records}
            )
            self.empty = self.backend.new_home(self.work, "empty")
            crash_sweep.register_harvester(self.empty, endpoint.base_url, options.batch_size)
            self.home = self.backend.new_home(self.work, "home", self.empty)
            try:
                self.days(day_zero)
            finally:
                self.backend.close()
        print(f"crashes: {dict(sorted(self.crashes.items()))}")
        if self.problems:
            print(f"{len(self.problems)} PROBLEM(S):")
            for problem in self.problems:
                print(f"  - {problem[:2000]}")
            return 1
        print("OK: the target stayed in step with the source")
        return 0

    def days(self, day_zero: datetime) -> None:
        options = self.options
        for day in range(1, options.days + 1):
            day_start = day_zero + timedelta(days=day)
            changes = Counter[str]()
            if day > 1:
                changes = change_source(
                    self.source, self.clock, day_start, self.rng, options.changes
                )
            self.clock.set(day_start + timedelta(hours=21, minutes=self.rng.randint(0, 59)))
            args = self.harvest_args()
            self.log(f"day {day}: {dict(changes)}; {' '.join(args[1:])}")
            self.until_done(self.home, args, "harvest", CRASH_POINTS)
            if day % 7 == 0 or day == options.days:
                self.clock.set(self.clock.now() + timedelta(minutes=30))
                self.until_done(
                    self.home, ["reconcile", HARVESTER], "reconcile", RECONCILE_CRASH_POINTS
                )
            if day % 30 == 0:
                self.clock.set(self.clock.now() + timedelta(minutes=10))
                done = self.cli(self.home, ["prune", "--keep-days", str(options.keep_days)])
                if done.returncode != 0:
                    self.problems.append(f"prune failed: {done.stderr[-1500:]}")
            if day == options.days or (day % options.check_every == 0 and day % 7 == 0):
                self.check(day)

    def check(self, day: int) -> None:
        """The home against a fresh full harvest of the source as it is now; no run left
        running, no lease left; sizes."""
        from oai_pipeline_tests.resume import crash_sweep

        fresh = self.backend.new_home(self.work, f"fresh-{day}", self.empty)
        done = self.cli(fresh, ["harvest", HARVESTER])
        if done.returncode != 0:
            self.problems.append(f"day {day}: the fresh harvest failed: {done.stderr[-1500:]}")
            return
        got, expected = target_view(self.home), target_view(fresh)
        source_live = set(self.source.live())
        problems = []
        if got["duplicates"]:
            problems.append(f"duplicate target records {got['duplicates'][:3]}")
        if set(expected["live"]) != source_live:
            problems.append(
                f"the fresh harvest is not the source: {len(set(expected['live']) ^ source_live)}"
            )
        missing = sorted(set(expected["live"]) - set(got["live"]))
        extra = sorted(set(got["live"]) - set(expected["live"]))
        changed = sorted(
            i
            for i in set(got["live"]) & set(expected["live"])
            if got["live"][i] != expected["live"][i]
        )
        if missing or extra or changed:
            problems.append(
                f"target differs: missing {len(missing)} {missing[:3]}, extra (live, "
                f"deleted at the source) {len(extra)} {extra[:3]}, changed {len(changed)} "
                f"{changed[:3]}"
            )
        settings = crash_sweep._settings(self.home)
        running = crash_sweep.query(
            settings.state_db_url, "SELECT id FROM harvest_runs WHERE status = 'running'"
        )
        if running:
            problems.append(f"runs left running: {[r[0] for r in running]}")
        leases = crash_sweep.query(settings.state_db_url, "SELECT count(*) FROM harvester_locks")[
            0
        ][0]
        if leases:
            problems.append(f"{leases} leases left")
        for problem in problems:
            self.problems.append(f"day {day}: {problem}")
        sizes = home_sizes(self.home)
        self.log(
            f"check day {day}: {'OK' if not problems else 'DIVERGED: ' + '; '.join(problems)}"
            f" | source live {len(source_live)}, target live {len(got['live'])}, "
            f"tombstones {got['tombstones']} | {sizes}"
        )
        if not self.options.keep_work:
            shutil.rmtree(fresh.path, ignore_errors=True)


def target_view(home: Any) -> dict[str, Any]:
    """Live harvested records (DOI, data digest) by OAI identifier, tombstone count,
    identifiers held by more than one target record."""
    from oai_pipeline_tests.resume.crash_sweep import _digest, _settings, query

    rows = query(_settings(home).target_db_url, "SELECT * FROM target_records")
    sources = Counter(r.source_identifier for r in rows if r.source_identifier)
    return {
        "live": {
            r.source_identifier: (r.doi, _digest(r.data))
            for r in rows
            if r.state not in ("tombstone", "deleted")
        },
        "tombstones": sum(1 for r in rows if r.state in ("tombstone", "deleted")),
        "duplicates": sorted(i for i, n in sources.items() if n > 1),
    }


def home_sizes(home: Any) -> str:
    """Row counts of the tables that could grow run after run, and the bytes on disk."""
    from oai_pipeline_tests.resume.crash_sweep import _settings, query

    settings = _settings(home)
    state_tables = ("harvest_records", "harvest_record_xml", "harvest_runs", "run_records")
    counts = {
        t: query(settings.state_db_url, f"SELECT count(*) FROM {t}")[0][0] for t in state_tables
    }
    for table in ("target_records", "target_revisions", "target_drafts"):
        counts[table] = query(settings.target_db_url, f"SELECT count(*) FROM {table}")[0][0]
    storage = Path(settings.storage_url)
    storage_bytes = sum(p.stat().st_size for p in storage.rglob("*") if p.is_file())
    partitions = len(list(storage.glob("*/*/*")))
    files = {
        name: path.stat().st_size // 1024
        for name, path in (
            ("state", home.path / "state.sqlite"),
            ("target", home.path / "target.sqlite"),
        )
        if path.exists()
    }
    dagster_home = Path(home.env["DAGSTER_HOME"])
    if dagster_home.exists():  # the Dagster instance's runs and event log
        files["dagster"] = sum(p.stat().st_size for p in dagster_home.rglob("*") if p.is_file())
        files["dagster"] //= 1024
    rows = " ".join(f"{k}={v}" for k, v in counts.items())
    return f"{rows} storage={storage_bytes // 1024}KiB/{partitions} partitions files_KiB={files}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["child"]:
        child(argv[1:])
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m oai_pipeline_tests.resume.soak",
        description="Long-horizon soak of incremental harvests, reconciles, prunes and crashes "
        "against a changing source, checked against fresh full harvests.",
    )
    parser.add_argument("--days", type=int, default=200, help="simulated days (default 200)")
    parser.add_argument("--records", type=int, default=500, help="records at the start")
    parser.add_argument("--changes", type=int, default=12, help="at most this many changes a day")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--deleted-record", choices=["persistent", "transient", "no"], default="persistent"
    )
    parser.add_argument("--crash-rate", type=float, default=0.2, help="share of killed runs")
    parser.add_argument(
        "--crash-points", help="kill only at these (comma-separated crash_sweep POINTS)"
    )
    parser.add_argument(
        "--crash-calls", type=int, default=3, help="kill at call 1 to this of the point"
    )
    parser.add_argument("--check-every", type=int, default=14, help="days between checks")
    parser.add_argument("--keep-days", type=int, default=7, help="the monthly prune's")
    parser.add_argument("--page-size", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=25)
    parser.add_argument(
        "--dagster",
        action="store_true",
        help="harvest by in-process Dagster runs of the schedule's window range, not the CLI",
    )
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--work", type=Path, help="folder for the homes (default: a temp dir)")
    parser.add_argument("--keep-work", action="store_true", help="keep the homes afterwards")
    options = parser.parse_args(argv)
    work = options.work or Path(tempfile.mkdtemp(prefix="oai-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return Soak(options, work).run()
    finally:
        if not options.keep_work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
