"""Profile one full harvest (and optionally an unchanged re-harvest) of N generated records.

    py-spy record --format raw -o harvest.txt -- \
        .venv/bin/python benchmarks/profile_harvest.py --records 20000

The endpoint serves from a child process, so the profile holds the harvest alone. Then
`benchmarks/top_frames.py harvest.txt` sums the samples by function and by stage.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from oai_pipeline_tests.benchmark import (  # noqa: E402
    PREFIX,
    fresh_homes,
    harvest_dagster,
    harvest_in_process,
    register_harvester,
    window_range,
)


def serve(count: int, page_size: int, urls: multiprocessing.Queue, stop) -> None:
    from oai_pipeline.sample_endpoint.records import generate_datacite_records
    from oai_pipeline.sample_endpoint.server import OAIEndpoint

    records = generate_datacite_records(count, prefixes=(PREFIX,))
    with OAIEndpoint(records, page_size=page_size) as endpoint:
        urls.put((endpoint.base_url, *window_range(records)))
        stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--dagster", action="store_true")
    parser.add_argument("--again", action="store_true", help="also the unchanged re-harvest")
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    urls, stop = context.Queue(), context.Event()
    server = context.Process(target=serve, args=(args.records, args.page_size, urls, stop))
    server.start()
    try:
        base_url, first, last = urls.get(timeout=600)
        homes = fresh_homes(Path(tempfile.mkdtemp(prefix="oai-profile-")), "run")
        register_harvester(homes.home, homes.dagster_home, base_url)
        harvest = harvest_dagster if args.dagster else harvest_in_process
        for attempt in range(2 if args.again else 1):
            started = time.perf_counter()
            figure = harvest(homes.home, homes.dagster_home, first, last)
            print(attempt, round(time.perf_counter() - started, 2), figure["actions"])
    finally:
        stop.set()
        server.join()


if __name__ == "__main__":
    main()
