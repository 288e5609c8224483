"""Profile one full harvest (and optionally an unchanged re-harvest) of N generated records.

    py-spy record --format raw -o harvest.txt -- \
        .venv/bin/python benchmarks/profile_harvest.py --records 20000

The endpoint serves from a child process, so the profile holds the harvest alone. Then
`benchmarks/top_frames.py harvest.txt` sums the samples by function and by stage.

`--postgres` puts the state store and the target on a throwaway PostgreSQL server (each
stage timed), reached through a proxy that counts round trips and adds `--network-ms` to
each, as a server across a network would:

    .venv/bin/python benchmarks/profile_harvest.py --records 20000 --again --postgres \
        --network-ms 0.5
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import shutil
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


def harvest_by_stage(
    homes, first: str, last: str, databases: dict[str, str] | None = None
) -> dict[str, float]:
    """The four stages one after the other, each timed (what `run_harvest` does)."""
    import dagster as dg

    from oai_pipeline.defs.partitions import partition_key, scopes_for_keys, window_partitions
    from oai_pipeline.pipeline.discover import discover
    from oai_pipeline.pipeline.options import RunOptions
    from oai_pipeline.pipeline.plan import plan
    from oai_pipeline.pipeline.services import Services
    from oai_pipeline.pipeline.transform_stage import transform
    from oai_pipeline.pipeline.write import write
    from oai_pipeline.settings import load_settings

    keys = window_partitions.get_partition_keys_in_range(dg.PartitionKeyRange(first, last))
    (scope,) = scopes_for_keys([str(partition_key("bench", key)) for key in keys])
    options = RunOptions()
    seconds: dict[str, float] = {}
    environ = {"OAI_PIPELINE_HOME": homes.home, **(databases or {})}
    with Services(load_settings(environ)) as services:
        for name, stage in (
            ("discover", lambda: discover(services, scope, options, progress=lambda _m: None)),
            ("transform", lambda: transform(services, scope)),
            ("plan", lambda: plan(services, scope, options)),
            ("write", lambda: write(services, scope, options, progress=lambda _m: None)),
        ):
            started = time.perf_counter()
            stage()
            seconds[name] = round(time.perf_counter() - started, 2)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--dagster", action="store_true")
    parser.add_argument("--again", action="store_true", help="also the unchanged re-harvest")
    parser.add_argument("--stages", action="store_true", help="time each stage (in-process)")
    parser.add_argument(
        "--postgres", action="store_true", help="state and target on PostgreSQL (with --stages)"
    )
    parser.add_argument(
        "--network-ms", type=float, default=0.0, help="with --postgres: ms added per round trip"
    )
    args = parser.parse_args()
    args.stages = args.stages or args.postgres
    context = multiprocessing.get_context("spawn")
    urls, stop = context.Queue(), context.Event()
    server = context.Process(target=serve, args=(args.records, args.page_size, urls, stop))
    server.start()
    stack = contextlib.ExitStack()
    try:
        base_url, first, last = urls.get(timeout=600)
        work_root = Path(tempfile.mkdtemp(prefix="oai-profile-"))
        homes = fresh_homes(work_root, "run")
        proxy, databases = None, None
        if args.postgres:
            from oai_pipeline_tests.network_proxy import postgres_behind_network

            proxy, databases = stack.enter_context(postgres_behind_network(args.network_ms / 1000))
        register_harvester(homes, base_url, databases)
        harvest = harvest_dagster if args.dagster else harvest_in_process
        for attempt in range(2 if args.again else 1):
            started = time.perf_counter()
            if args.stages:
                trips = proxy.round_trips if proxy else 0
                seconds = harvest_by_stage(homes, first, last, databases)
                total = round(sum(seconds.values()), 2)
                print(attempt, seconds, total, "s", end="")
                print(f", {proxy.round_trips - trips} round trips" if proxy else "")
                continue
            figure = harvest(homes.home, homes.dagster_home, first, last)
            print(attempt, round(time.perf_counter() - started, 2), figure["actions"])
    finally:
        stack.close()
        stop.set()
        server.join()
        if "work_root" in locals():
            shutil.rmtree(work_root, ignore_errors=True)


if __name__ == "__main__":
    main()
