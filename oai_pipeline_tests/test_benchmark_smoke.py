"""The benchmark runs end to end on a few hundred records and reports every figure."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path

from oai_pipeline_tests import benchmark

FIGURES = [
    "a_sickle",
    "b_lxml_floor",
    "c_full_dagster",
    "c_full_in_process",
    "d_unchanged_dagster",
    "d_unchanged_in_process",
    "e_incremental_dagster",
    "e_incremental_in_process",
    "f_full_dagster_x2",
    "f_full_in_process_x2",
]


def test_benchmark_reports_every_figure(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(benchmark, "in_child", benchmark.in_this_process)
    out = tmp_path / "bench.json"

    assert (
        benchmark.main(
            ["--records", "200", "--rss-factor", "2", "--span-days", "2", "--json-out", str(out)]
        )
        == 0
    )

    results = json.loads(out.read_text())
    rows = {row["name"]: row for row in results["rows"]}
    assert list(rows) == FIGURES
    for name, row in rows.items():
        assert row["seconds"] > 0, name
        assert row["records_per_s"] > 0, name
        assert row["peak_rss_mb"] > 0, name
        assert row["ratio_to_sickle"] is not None, name
    assert rows["a_sickle"]["records"] == 200
    # every harvest saw every record: 200 at N, 400 at 2 N, the changed ones incrementally
    for mode in ("dagster", "in_process"):
        assert results["raw"][f"c_full_{mode}"]["records"] == 200
        assert results["raw"][f"d_unchanged_{mode}"]["records"] == 200
        assert results["raw"][f"f_full_{mode}_x2"]["records"] == 400
        assert results["raw"][f"e_incremental_{mode}"]["records"] == results["changed"] == 2
        assert results["raw"][f"c_full_{mode}"]["actions"]["create"] == 196
        assert set(results["raw"][f"d_unchanged_{mode}"]["actions"]) <= {"skip", "nothing"}
        assert results["raw"][f"e_incremental_{mode}"]["actions"] == {"update": 2}
        assert set(results["targets"][mode]) >= {
            "c_over_a",
            "d_speedup_over_c",
            "rss_growth_at_factor",
        }
    assert results["machine"]["cpus"] >= 1


def test_each_harvest_is_removed_once_measured(tmp_path: Path, monkeypatch) -> None:
    """At 10 N a harvest leaves ~15 GB on disk: the benchmark keeps one at a time."""
    monkeypatch.setattr(benchmark, "in_child", benchmark.in_this_process)
    work_root = tmp_path / "work"
    work_root.mkdir()
    alive: list[list[str]] = []
    measured = benchmark.harvest_in_process

    def harvest(home: str, dagster_home: str, first: str, last: str) -> dict:
        alive.append(sorted(p.name for p in work_root.iterdir()))
        return measured(home, dagster_home, first, last)

    monkeypatch.setattr(benchmark, "harvest_in_process", harvest)
    benchmark.run(100, 2, 500, work_root, dagster=False, span_days=2, log=lambda _m: None)

    # c, d and e share one harvest's homes; f gets fresh ones after those are gone
    assert alive == [["c_in_process"]] * 3 + [["f_in_process"]]
    assert list(work_root.iterdir()) == []


def _hold_memory(ready, done) -> None:  # two multiprocessing Events
    ballast = bytearray(64 * 1024 * 1024)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touch every page: resident, not reserved
    ready.set()
    done.wait(30)


def test_worker_memory_counts_multiprocessing_children() -> None:
    import multiprocessing
    import os

    context = multiprocessing.get_context("spawn")
    # other children of this test process (a forkserver an earlier test started) count too
    before = benchmark._children_rss_mb(os.getpid())
    ready, done = context.Event(), context.Event()
    child = context.Process(target=_hold_memory, args=(ready, done))
    child.start()
    try:
        assert ready.wait(60)
        assert benchmark._children_rss_mb(os.getpid()) >= before + 64
    finally:
        done.set()
        child.join(30)
    assert benchmark._children_rss_mb(os.getpid()) < before + 64


def test_started_at_is_when_the_benchmark_started_not_when_it_ended() -> None:
    """Before, `started_at` was taken as the figures were summed up: benchmarks/latest.json
    said 16:02 for a run that ended then, 49 minutes after it started."""
    from datetime import UTC, datetime

    figure = {"seconds": 1.0, "rss_mb": 1.0}
    an_hour_ago = time.perf_counter() - 3600

    results = benchmark.summarise(
        {"a_sickle": figure, "b_lxml_floor": figure}, 10, 0, 1, 500, [], an_hour_ago
    )

    started = datetime.fromisoformat(results["started_at"])
    assert results["wall_seconds"] >= 3600
    assert started <= datetime.now(UTC) - timedelta(seconds=3600)
    assert started > datetime.now(UTC) - timedelta(hours=2)
