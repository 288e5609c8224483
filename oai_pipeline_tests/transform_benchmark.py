"""Micro-benchmark: CPU a transform worker spends per generated DataCite record.

    python -m oai_pipeline_tests.transform_benchmark [--records N] [--repeat R] [--profile PATH]
    python -m oai_pipeline_tests.transform_benchmark --against OLD_TREE [--records N] [--repeat R]

Runs the worker's own function (`_transform_chunk`, chunks of `CHUNK` records as the stage
sends them, after the worker's start-up) in this process over N records as the harvest
stores them (2 % deleted), and prints the CPU time of each repeat (CPU seconds per 1,000
records, µs per record, records per CPU second): no harvest, no endpoint, no other process,
so the figure holds steady on a loaded machine where wall-clock times do not. `--profile`
writes a cProfile of the last repeat (open with `python -m pstats PATH`).

`--against OLD_TREE` compares this code with another checkout's (a clone of main: the folder
holding its `oai_pipeline`): two child processes, one per tree, take turns, a repeat each, so
that both meet the same load; it prints the least of each and their ratio. (Another tree
given by PYTHONPATH alone is not enough: `python -m` and `-c` put the current folder first,
and a run from this clone would time this code twice.) Not a test; compare figures of one
machine, old code and new back to back.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import subprocess
import sys
import time
from pathlib import Path

from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.harvesters.plugins import RDM_MODEL
from oai_pipeline.pipeline import transform_workers
from oai_pipeline.sample_endpoint.records import generate_datacite_records
from oai_pipeline_tests.transform.records import wrap_metadata

PREFIX = "oai_datacite"


def worker_rows(count: int) -> list[transform_workers.ChainInput]:
    """What a worker is sent for `count` generated records (deleted ones as their header)."""
    rows: list[transform_workers.ChainInput] = []
    for record in generate_datacite_records(count, prefixes=(PREFIX,)):
        metadata = b"" if record.deleted else record.metadata[PREFIX]
        xml = wrap_metadata(
            metadata,
            identifier=record.identifier,
            set_specs=tuple(record.set_specs),
            deleted=record.deleted,
        )
        rows.append((record.identifier, "2024-01-01", list(record.set_specs), xml, []))
    return rows


def transform_all(rows: list[transform_workers.ChainInput]) -> int:
    """Every row through the worker function, chunk by chunk; how many came back with data."""
    made = 0
    for start in range(0, len(rows), transform_workers.CHUNK):
        results = transform_workers._transform_chunk(rows[start : start + transform_workers.CHUNK])
        made += sum(1 for text, *_ in results if text is not None)
    return made


def _start_chain() -> None:
    harvester = Harvester(
        id="bench",
        base_url="http://example.org/oai",
        metadata_prefix=PREFIX,
        transformers=[RDM_MODEL.transformer],
    )
    transform_workers._start_worker(harvester)  # the chain, as in a worker


def _report(label: str, count: int, seconds: float) -> str:
    return (
        f"{label}: {count} records in {seconds:.2f} CPU s, {1000 * seconds / count:.3f} CPU s "
        f"per 1,000 records, {1e6 * seconds / count:.0f} µs per record, "
        f"{count / seconds:.0f} records per CPU s"
    )


def serve(count: int) -> None:
    """A child of `--against`: one repeat per line read, its CPU seconds written back."""
    rows = worker_rows(count)
    _start_chain()
    transform_all(rows[:50])
    print(transform_workers.__file__, flush=True)
    for _ in sys.stdin:
        started = time.process_time()
        transform_all(rows)
        print(time.process_time() - started, flush=True)


# A child of `against`: this file loaded by its path, so that what it imports (the code timed)
# comes from the tree it runs in, whose oai_pipeline_tests may not have `serve` yet.
_CHILD = """
import importlib.util
spec = importlib.util.spec_from_file_location("transform_benchmark_child", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.serve({count})
"""


def against(old_tree: str, count: int, repeats: int) -> int:
    """This code and `old_tree`'s, a repeat each in turn (see the module's doc)."""
    here = str(Path(__file__).resolve().parents[1])
    children = {}
    for label, tree in (("old", str(Path(old_tree).resolve())), ("new", here)):
        env = dict(os.environ, PYTHONPATH=tree)
        children[label] = subprocess.Popen(
            [sys.executable, "-c", _CHILD.format(path=str(Path(__file__).resolve()), count=count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tree,  # first on sys.path
        )
        print(f"{label}: {children[label].stdout.readline().strip()}")  # type: ignore[union-attr]
    times: dict[str, list[float]] = {"old": [], "new": []}
    for repeat in range(repeats):
        order = ("old", "new") if repeat % 2 == 0 else ("new", "old")
        for label in order:
            child = children[label]
            child.stdin.write("go\n")  # type: ignore[union-attr]
            child.stdin.flush()  # type: ignore[union-attr]
            times[label].append(float(child.stdout.readline()))  # type: ignore[union-attr]
    for child in children.values():
        child.stdin.close()  # type: ignore[union-attr]
        child.wait()
    for label in ("old", "new"):
        print(_report(f"least of {label}", count, min(times[label])))
    ratios = sorted(new / old for old, new in zip(times["old"], times["new"], strict=True))
    print(
        f"new / old: {min(times['new']) / min(times['old']):.3f} (least), "
        f"{ratios[len(ratios) // 2]:.3f} (median of the {repeats} pairs)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", help="write a cProfile of the last repeat here")
    parser.add_argument("--against", help="compare with the code of this tree (see above)")
    args = parser.parse_args(argv)
    if args.against:
        return against(args.against, args.records, args.repeat)
    rows = worker_rows(args.records)
    _start_chain()
    transform_all(rows[:50])  # warm up: pydantic's and lxml's first calls
    per_thousand: list[float] = []
    for repeat in range(1, args.repeat + 1):
        profiler = cProfile.Profile() if args.profile and repeat == args.repeat else None
        started = time.process_time()
        if profiler is not None:
            profiler.enable()
        made = transform_all(rows)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
        seconds = time.process_time() - started
        per_thousand.append(1000 * seconds / len(rows))
        print(_report(f"repeat {repeat} ({made} with data)", len(rows), seconds))
    # The least is the steadiest figure on a shared machine: other load only adds to it.
    print(_report("least", len(rows), min(per_thousand) * len(rows) / 1000))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
