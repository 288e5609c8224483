"""Benchmark: records per second and peak memory of a harvest, side by side with sickle.

    python -m oai_pipeline_tests.benchmark [--records N] [--rss-factor F] [--json-out PATH]

Serves N generated DataCite records (1-5 KB each, 2 % deleted) as `oai_datacite` from the
loopback endpoint (in this process, on its own thread) and measures, each in a child
process of its own so that every figure is that child's own time and peak RSS:

  a  sickle iterating ListRecords and reading each record's metadata (the hand-written baseline)
  b  httpx fetching the raw pages, lxml parsing each one (the floor)
  c  oai-pipeline's full harvest through all four stages into the embedded target, twice:
     as one Dagster run over the window range (materialize_windows on a real instance) and
     with `run_harvest` in-process (the same stages without Dagster)
  d  the same harvest again, nothing changed at the source
  e  an incremental harvest after 1 % of the records changed (new datestamp, revised title),
     over the window that holds the new datestamps, as the incremental schedule would
  f  peak RSS of c at N and at N x --rss-factor (fresh homes)

Every harvest starts in a fresh OAI_PIPELINE_HOME and DAGSTER_HOME (temp folders); d and e
reuse c's homes because they measure what a second run costs. Not a test; not run in CI.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import resource
import shutil
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from multiprocessing import get_context
from pathlib import Path
from typing import Any

PREFIX = "oai_datacite"
OAI = "{http://www.openarchives.org/OAI/2.0/}"
HARVESTER_ID = "bench"
CHANGED_FRACTION = 0.01
DEFAULT_RESULTS = Path("bench_results")


# ------------------------------------------------------------------ child processes


@dataclasses.dataclass
class Homes:
    home: str
    dagster_home: str


def _peak_rss_mb() -> float:
    """This process's own peak resident set size, in MB.

    Linux: VmHWM of /proc/self/status, the high-water mark of this process's own memory.
    Not ru_maxrss: Linux keeps that across fork and exec, so a child started by a parent
    holding the generated records would report the parent's size.
    """
    try:
        return round(_status_kb(Path("/proc/self"), "VmHWM") / 1024, 1)
    except (OSError, ValueError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


class WorkerMemory:
    """The peak of the summed RSS of this process's multiprocessing children (the transform
    workers), sampled ten times a second from /proc: their memory is the harvest's too."""

    def __init__(self, every: float = 0.1) -> None:
        self.every = every
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while True:
            self.peak_mb = max(self.peak_mb, _children_rss_mb(os.getpid()))
            if self._stop.wait(self.every):
                return


def _status_kb(proc: Path, field: str) -> int:
    """A memory field (kB) of /proc/<pid>/status; ValueError when it is missing."""
    for line in (proc / "status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise ValueError(f"no {field} in {proc}/status")


def _children_rss_mb(parent: int) -> float:
    """Summed RSS of `parent`'s multiprocessing children.

    The children come from /proc/<parent>/task/*/children, not from a scan of all of /proc:
    the sampler shares the harvest's interpreter, and reading every process's stat ten times
    a second took ~4 % of the harvest's samples in a profile.
    """
    total_kb = 0
    for children in Path(f"/proc/{parent}/task").glob("*/children"):
        try:
            pids = children.read_text().split()
        except OSError:
            continue  # the thread ended meanwhile
        for pid in pids:
            proc = Path("/proc", pid)
            try:
                if b"multiprocessing" not in (proc / "cmdline").read_bytes():
                    continue
                total_kb += _status_kb(proc, "VmRSS")
            except (OSError, ValueError):
                continue  # gone meanwhile
    return round(total_kb / 1024, 1)


def _memory(workers: WorkerMemory) -> dict[str, float]:
    """Peak RSS of the harvest: its own (VmHWM) plus its workers' peak (an upper bound)."""
    own = _peak_rss_mb()
    return {
        "rss_mb": round(own + workers.peak_mb, 1),
        "own_rss_mb": own,
        "workers_rss_mb": workers.peak_mb,
    }


def _use_homes(home: str, dagster_home: str) -> None:
    """Point this (child) process at the run's homes; Dagster's beta notices stay quiet."""
    warnings.filterwarnings("ignore", module="dagster")
    warnings.filterwarnings("ignore", category=UserWarning, message=".*(beta|preview).*")
    os.environ["OAI_PIPELINE_HOME"] = home
    os.environ["DAGSTER_HOME"] = dagster_home
    for name in ("OAI_PIPELINE_STATE_DB_URL", "OAI_PIPELINE_TARGET_DB_URL"):
        os.environ.pop(name, None)
    os.environ.pop("OAI_PIPELINE_STORAGE_URL", None)


def sickle_baseline(base_url: str) -> dict[str, Any]:
    """(a) What a user writes by hand: iterate ListRecords, read every record's metadata."""
    from sickle import Sickle

    started = time.perf_counter()
    records = deleted = fields = 0
    for record in Sickle(base_url).ListRecords(metadataPrefix=PREFIX, ignore_deleted=False):
        records += 1
        if record.deleted:
            deleted += 1
        else:
            fields += len(record.metadata)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "records": records, "deleted": deleted, "rss_mb": _peak_rss_mb()}


def lxml_floor(base_url: str) -> dict[str, Any]:
    """(b) The least any harvester must do: fetch every page and parse it once with lxml."""
    import httpx
    from lxml import etree

    started = time.perf_counter()
    records = pages = 0
    params: dict[str, str] = {"verb": "ListRecords", "metadataPrefix": PREFIX}
    with httpx.Client(timeout=60) as client:
        while True:
            response = client.get(base_url, params=params)
            response.raise_for_status()
            root = etree.fromstring(response.content)
            pages += 1
            records += sum(1 for _ in root.iter(f"{OAI}record"))
            token = root.findtext(f".//{OAI}resumptionToken")
            if not token:
                break
            params = {"verb": "ListRecords", "resumptionToken": token}
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "records": records, "pages": pages, "rss_mb": _peak_rss_mb()}


def register_harvester(
    homes: Homes, base_url: str, databases: dict[str, str] | None = None
) -> None:
    """Register the benchmark's harvester in a fresh home (no environment change needed);
    `databases`: the settings' database URLs (OAI_PIPELINE_STATE_DB_URL, …) if not SQLite."""
    from oai_pipeline.harvesters.model import Harvester
    from oai_pipeline.settings import load_settings
    from oai_pipeline_tests.support import register

    settings = load_settings({"OAI_PIPELINE_HOME": homes.home, **(databases or {})})
    settings.home.mkdir(parents=True, exist_ok=True)
    # The product's defaults (batch size included), not the tests' smaller batches.
    register(
        settings,
        base_url,
        harvester_id=HARVESTER_ID,
        metadata_prefix=PREFIX,
        batch_size=Harvester.model_fields["batch_size"].default,
    )


def harvest_dagster(
    home: str, dagster_home: str, first_window: str, last_window: str
) -> dict[str, Any]:
    """(c, d, e) One Dagster run materialising the four assets over the window range."""
    _use_homes(home, dagster_home)
    import dagster as dg

    from oai_pipeline.defs.launch import materialize_windows
    from oai_pipeline.settings import ensure_dagster_home
    from oai_pipeline_tests.dagster_results import run_totals

    ensure_dagster_home()  # our dagster.yaml in the fresh DAGSTER_HOME
    started = time.perf_counter()
    with dg.DagsterInstance.get() as instance, WorkerMemory() as workers:
        result = materialize_windows(
            instance, HARVESTER_ID, first_window, last_window, log_level="WARNING"
        )
        seconds = time.perf_counter() - started
        if not result.success:
            raise RuntimeError("the Dagster run failed")
        # the run's totals: its observation of written_records (see assets._run_result)
        metadata = run_totals(result, "written_records")
    actions = {
        name.removeprefix("run_action_"): int(value.value)
        for name, value in metadata.items()
        if name.startswith("run_action_")
    }
    return {
        "seconds": seconds,
        "records": sum(actions.values()),
        "actions": actions,
        "errors": int(metadata["run_error_count"].value) if "run_error_count" in metadata else None,
        **_memory(workers),
    }


def harvest_in_process(
    home: str, dagster_home: str, first_window: str, last_window: str
) -> dict[str, Any]:
    """(c, d, e) The same four stages as plain functions (`run_harvest`), no Dagster run."""
    _use_homes(home, dagster_home)
    import dagster as dg

    from oai_pipeline.defs.partitions import partition_key, scopes_for_keys, window_partitions
    from oai_pipeline.pipeline.options import RunOptions
    from oai_pipeline.pipeline.runner import run_harvest
    from oai_pipeline.pipeline.services import Services
    from oai_pipeline.settings import load_settings

    keys = window_partitions.get_partition_keys_in_range(
        dg.PartitionKeyRange(first_window, last_window)
    )
    (scope,) = scopes_for_keys([str(partition_key(HARVESTER_ID, key)) for key in keys])
    started = time.perf_counter()
    with Services(load_settings()) as services, WorkerMemory() as workers:
        report = run_harvest(services, scope, RunOptions(), progress=lambda _message: None)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "records": sum(report.actions.values()),
        "actions": report.actions,
        "errors": report.errors,
        **_memory(workers),
    }


def in_child(function: Callable[..., Any], *args: Any) -> Any:
    """Run `function(*args)` in a fresh spawned process (its own imports, its own peak RSS)."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        figure = pool.submit(function, *args).result()
    print(f"   {figure['seconds']:.2f} s, {figure['records']} records, {figure['rss_mb']} MB")
    return figure


def in_this_process(function: Callable[..., Any], *args: Any) -> Any:
    """For the smoke test only: no process start-up, but RSS is this process's own peak."""
    return function(*args)


# ------------------------------------------------------------------------ the run


def fresh_homes(root: Path, name: str) -> Homes:
    folder = root / name
    (folder / "dagster_home").mkdir(parents=True)
    return Homes(str(folder / "oai_home"), str(folder / "dagster_home"))


def discard(homes: Homes) -> None:
    """Remove a measured harvest's homes: at 10 N a harvest leaves ~15 GB of databases and
    Parquet, so only one may be on disk at a time."""
    shutil.rmtree(Path(homes.home).parent, ignore_errors=True)


def window_range(records: list) -> tuple[str, str]:
    days = sorted({r.datestamp.date() for r in records})
    return days[0].isoformat(), days[-1].isoformat()


def change_records(endpoint, records: list, fraction: float, day: datetime, seed: int = 1) -> int:
    """Give `fraction` of the live records a revised title and a datestamp on `day`."""
    rng = random.Random(seed)
    live = [r for r in records if not r.deleted]
    chosen = rng.sample(live, max(1, round(len(records) * fraction)))
    for record in chosen:
        revise(endpoint, record, day + timedelta(seconds=rng.randrange(86400)))
    return len(chosen)


def revise(endpoint, record, datestamp: datetime, prefix: str = PREFIX) -> None:
    """Serve `record` with a revised title (its `prefix` XML) and this datestamp."""
    xml = record.metadata[prefix].replace(b"</title>", b" (revised)</title>", 1)
    endpoint.upsert(
        dataclasses.replace(
            record, datestamp=datestamp, set_specs=list(record.set_specs), metadata={prefix: xml}
        )
    )


def _rate(figure: dict[str, Any], records: int) -> float:
    return round(records / figure["seconds"], 1) if figure["seconds"] > 0 else 0.0


def run(
    records_count: int,
    rss_factor: int,
    page_size: int,
    work_root: Path,
    *,
    dagster: bool = True,
    span_days: int = 365,
    isolate: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    from oai_pipeline.sample_endpoint.records import generate_datacite_records
    from oai_pipeline.sample_endpoint.server import OAIEndpoint

    measure = in_child if isolate else in_this_process
    started = time.perf_counter()
    log(f"generating {records_count} DataCite records …")
    records = generate_datacite_records(records_count, prefixes=(PREFIX,), span_days=span_days)
    first, last = window_range(records)
    harvests: dict[str, Callable[..., dict[str, Any]]] = {"in_process": harvest_in_process}
    if dagster:
        harvests = {"dagster": harvest_dagster, **harvests}
    figures: dict[str, Any] = {}
    with OAIEndpoint(records, page_size=page_size) as endpoint:
        log("a  sickle ListRecords …")
        figures["a_sickle"] = measure(sickle_baseline, endpoint.base_url)
        log("b  httpx + lxml …")
        figures["b_lxml_floor"] = measure(lxml_floor, endpoint.base_url)
        homes = {}
        for mode, harvest in harvests.items():
            homes[mode] = fresh_homes(work_root, f"c_{mode}")
            register_harvester(homes[mode], endpoint.base_url)
            log(f"c  full harvest ({mode}) …")
            figures[f"c_full_{mode}"] = measure(
                harvest, homes[mode].home, homes[mode].dagster_home, first, last
            )
        for mode, harvest in harvests.items():
            log(f"d  unchanged re-harvest ({mode}) …")
            figures[f"d_unchanged_{mode}"] = measure(
                harvest, homes[mode].home, homes[mode].dagster_home, first, last
            )
        change_day = datetime.fromisoformat(last).replace(tzinfo=UTC) + timedelta(days=2)
        changed = change_records(endpoint, records, CHANGED_FRACTION, change_day)
        day = change_day.date().isoformat()
        for mode, harvest in harvests.items():
            log(f"e  incremental after {changed} changes ({mode}) …")
            figures[f"e_incremental_{mode}"] = measure(
                harvest, homes[mode].home, homes[mode].dagster_home, day, day
            )
            discard(homes[mode])
    del records
    large = records_count * rss_factor
    if rss_factor > 1:
        log(f"f  full harvest of {large} records for peak RSS …")
        big = generate_datacite_records(large, prefixes=(PREFIX,), span_days=span_days)
        big_first, big_last = window_range(big)
        with OAIEndpoint(big, page_size=page_size) as endpoint:
            for mode, harvest in harvests.items():
                big_homes = fresh_homes(work_root, f"f_{mode}")
                register_harvester(big_homes, endpoint.base_url)
                figures[f"f_full_{mode}_x{rss_factor}"] = measure(
                    harvest, big_homes.home, big_homes.dagster_home, big_first, big_last
                )
                discard(big_homes)
        del big
    return summarise(
        figures, records_count, changed, rss_factor, page_size, list(harvests), started
    )


def summarise(
    figures: dict[str, Any],
    records_count: int,
    changed: int,
    rss_factor: int,
    page_size: int,
    modes: list[str],
    started: float,
) -> dict[str, Any]:
    baseline = _rate(figures["a_sickle"], records_count)
    rows = []

    def row(name: str, what: str, records: int) -> None:
        figure = figures[name]
        rate = _rate(figure, records)
        rows.append(
            {
                "name": name,
                "what": what,
                "records": records,
                "seconds": round(figure["seconds"], 2),
                "records_per_s": rate,
                "ratio_to_sickle": round(rate / baseline, 2) if baseline else None,
                "peak_rss_mb": figure["rss_mb"],
            }
        )

    row("a_sickle", "sickle ListRecords + record.metadata", records_count)
    row("b_lxml_floor", "httpx pages + lxml parse", records_count)
    for mode in modes:
        row(f"c_full_{mode}", f"full harvest, 4 stages ({mode})", records_count)
    for mode in modes:
        row(f"d_unchanged_{mode}", f"same harvest, nothing changed ({mode})", records_count)
    for mode in modes:
        row(f"e_incremental_{mode}", f"incremental, {changed} changed ({mode})", changed)
    for mode in modes:
        name = f"f_full_{mode}_x{rss_factor}"
        if name in figures:
            row(name, f"full harvest at {rss_factor} N ({mode})", records_count * rss_factor)
    targets = {}
    for mode in modes:
        c, d = figures[f"c_full_{mode}"], figures[f"d_unchanged_{mode}"]
        big = figures.get(f"f_full_{mode}_x{rss_factor}")
        targets[mode] = {
            "c_over_a": round(_rate(c, records_count) / baseline, 2) if baseline else None,
            "c_over_a_ok": baseline > 0 and _rate(c, records_count) >= baseline,
            "d_speedup_over_c": round(c["seconds"] / d["seconds"], 2),
            "d_speedup_ok": c["seconds"] >= 2 * d["seconds"],
            "rss_growth_at_factor": round(big["rss_mb"] / c["rss_mb"], 2) if big else None,
            "rss_growth_ok": (big["rss_mb"] <= 1.5 * c["rss_mb"]) if big else None,
        }
    wall_seconds = time.perf_counter() - started
    return {
        "started_at": (datetime.now(UTC) - timedelta(seconds=wall_seconds)).isoformat(
            timespec="seconds"
        ),
        "records": records_count,
        "changed": changed,
        "rss_factor": rss_factor,
        "page_size": page_size,
        "wall_seconds": round(wall_seconds, 1),
        "machine": machine(),
        "rows": rows,
        "targets": targets,
        "raw": figures,
    }


def machine() -> dict[str, Any]:
    memory_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_kb = int(line.split()[1])
    except OSError:
        pass
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gb": round(memory_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
    }


def table(results: dict[str, Any]) -> str:
    header = f"{'':26} {'what':44} {'records':>9} {'s':>8} {'rec/s':>9} {'÷ (a)':>6} {'RSS MB':>7}"
    lines = [header, "-" * len(header)]
    for r in results["rows"]:
        lines.append(
            f"{r['name']:26} {r['what']:44} {r['records']:>9} {r['seconds']:>8.2f} "
            f"{r['records_per_s']:>9.0f} {r['ratio_to_sickle']:>6.2f} {r['peak_rss_mb']:>7.0f}"
        )
    for mode, t in results["targets"].items():
        lines.append(
            f"targets ({mode}): (c)/(a) = {t['c_over_a']} (>= 1.0: {t['c_over_a_ok']}); "
            f"(d) {t['d_speedup_over_c']}x faster than (c) (>= 2: {t['d_speedup_ok']}); "
            f"RSS x{results['rss_factor']} / RSS x1 = {t['rss_growth_at_factor']} "
            f"(<= 1.5: {t['rss_growth_ok']})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m oai_pipeline_tests.benchmark", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--records", type=int, default=100_000, help="N (default 100,000)")
    parser.add_argument(
        "--rss-factor", type=int, default=10, help="peak RSS also at N x this (1 skips it)"
    )
    parser.add_argument("--page-size", type=int, default=500, help="records per OAI-PMH page")
    parser.add_argument(
        "--span-days", type=int, default=365, help="datestamps spread over this many daily windows"
    )
    parser.add_argument(
        "--no-dagster", action="store_true", help="measure the in-process harvest only"
    )
    parser.add_argument("--json-out", type=Path, help="default bench_results/bench-<time>.json")
    args = parser.parse_args(argv)
    if args.records < 100:
        parser.error("--records must be at least 100")
    if args.rss_factor < 1:
        parser.error("--rss-factor must be at least 1")
    json_out = args.json_out or DEFAULT_RESULTS / (
        f"bench-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    )
    work_root = Path(tempfile.mkdtemp(prefix="oai-bench-"))
    try:
        results = run(
            args.records,
            args.rss_factor,
            args.page_size,
            work_root,
            dagster=not args.no_dagster,
            span_days=args.span_days,
        )
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    print(table(results))
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"figures written to {json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
