"""Micro-benchmark: CPU seconds a transform worker spends per 1,000 generated DataCite records.

    python -m oai_pipeline_tests.transform_benchmark [--records N] [--repeat R] [--profile PATH]

Runs the worker's own function (`_transform_chunk`, chunks of `CHUNK` records as the stage
sends them, after the worker's start-up) in this process over N records as the harvest
stores them (2 % deleted), and prints the CPU time of each repeat: no harvest, no endpoint,
no other process, so the figure holds steady on a loaded machine where wall-clock times do
not. `--profile` writes a cProfile of the last repeat (open with `python -m pstats PATH`).
Not a test; compare figures of one machine, old code and new back to back.
"""

from __future__ import annotations

import argparse
import cProfile
import time

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", help="write a cProfile of the last repeat here")
    args = parser.parse_args(argv)
    rows = worker_rows(args.records)
    harvester = Harvester(
        id="bench",
        base_url="http://example.org/oai",
        metadata_prefix=PREFIX,
        transformers=[RDM_MODEL.transformer],
    )
    transform_workers._start_worker(harvester)  # the chain, as in a worker
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
        print(
            f"repeat {repeat}: {len(rows)} records ({made} with data) in {seconds:.2f} CPU s, "
            f"{1000 * seconds / len(rows):.3f} CPU s per 1,000 records"
        )
    # The least is the steadiest figure on a shared machine: other load only adds to it.
    print(f"least: {min(per_thousand):.3f} CPU s per 1,000 records")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
