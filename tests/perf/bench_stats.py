"""Benchmark: a run's statistics from the store (issue 4). A script, not a test: `python tests/perf/bench_stats.py`.

Writes a 14,000-task x 8-repeat run (112,000 steps; each task has a category and a skill drawn from a
U-shaped distribution; 1 % of attempts are transport errors) straight into a fresh store with DuckDB (no
model needed), then times, in this process:
  1. `load_run` from the store (target: well under 0.5 s);
  2. `run_statistics` with 10,000-resample bootstrap intervals: pass@1..pass@8 and mean reward with analytic
     and bootstrap intervals, counts, buckets, the variance split and the per-task table;
  3. their sum (target < 1 s); also with 20 category slices and category clusters, and for a second run
     whose rewards are continuous (every task's mean reward distinct: the bootstrap's slow path).
The first call is reported, then the best of three. scipy is imported before the clock starts (a process
pays for that import once; it is reported apart). Pass --tasks N / --repeats R for another size.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

from workbench.store.database import connect_rw

RUN = "bench-stats"
CONTINUOUS = "bench-stats-continuous"
_STEPS = """
INSERT INTO steps (run_id, task_idx, repeat, task_id, shard_idx, started_at, reward, passed, failure_category,
                   prompt_tokens, completion_tokens, total_tokens, latency_ms, metadata)
WITH skill AS (SELECT i, CASE WHEN random() < 0.5 THEN power(random(), 3) ELSE 1 - power(random(), 3) END AS p
               FROM range({n_tasks}) r(i)),
     draws AS (SELECT i, j, p, random() AS u, random() AS e FROM skill, range({repeats}) s(j))
SELECT $run, i, j, 't' || i, 0, now()::TIMESTAMP, {reward}, e >= 0.01 AND u < p,
       CASE WHEN e < 0.01 THEN 'timeout' END, 100, 50 + (u * 100)::INT, 150 + (u * 100)::INT, 20 + u * 30,
       json_object('idx', i, 'category', 'c' || (i % 20))
FROM draws
"""


def make_store(path: Path, n_tasks: int, repeats: int) -> None:
    """Two complete runs, written with a few INSERT ... SELECT statements: ``RUN`` with pass/fail rewards and
    ``CONTINUOUS`` with rewards in [0, 1]."""
    con = connect_rw(path)
    try:
        con.execute("SET threads = 4")
        con.execute("SELECT setseed(0.42)")
        con.execute("INSERT INTO tasks SELECT 't' || i, 'bench', 'prompt ' || i, '1', "
                    "json_object('idx', i, 'category', 'c' || (i % 20)) FROM range(?) r(i)", [n_tasks])
        _write_run(con, RUN, n_tasks, repeats, "CASE WHEN e >= 0.01 AND u < p THEN 1.0 ELSE 0.0 END")
        _write_run(con, CONTINUOUS, n_tasks, repeats, "CASE WHEN e >= 0.01 THEN u * p ELSE 0.0 END")
    finally:
        con.close()


def _write_run(con: duckdb.DuckDBPyConnection, run_id: str, n_tasks: int, repeats: int, reward: str) -> None:
    con.execute(
        """INSERT INTO runs VALUES ($run, 'bench', 'mock', 'http://localhost/v1', 'chat_completions', $hash, '{}',
           '{"primary_metric": "numeric", "metrics": ["numeric"]}', $n, $r, 0, $n, 1, 'complete',
           now()::TIMESTAMP, now()::TIMESTAMP, 'bench')""",
        {"run": run_id, "hash": "ab" * 32, "n": n_tasks, "r": repeats},
    )
    con.execute("INSERT INTO run_tasks SELECT $run, i, 't' || i FROM range($n) r(i)", {"run": run_id, "n": n_tasks})
    con.execute(_STEPS.format(n_tasks=n_tasks, repeats=repeats, reward=reward), {"run": run_id})


def timed(run_id: str, store: Path, **kwargs: Any) -> str:
    from workbench.analysis.run_stats import run_statistics
    from workbench.analysis.sources import load_run

    times = []
    for _ in range(4):
        t0 = time.perf_counter()
        data = load_run(run_id, store=store)
        t1 = time.perf_counter()
        stats = run_statistics(data, bootstrap=10_000, seed=0, **kwargs)
        times.append((t1 - t0, time.perf_counter() - t1))
    first, best = times[0], min(times[1:], key=sum)
    p1 = stats.overall.pass_at_k[1]
    return (f"load_run {first[0]:.3f} s / {best[0]:.3f} s, run_statistics {first[1]:.3f} s / {best[1]:.3f} s, "
            f"total {sum(first):.3f} s / {sum(best):.3f} s (first call / best of 3); "
            f"pass@1 {p1.value:.4f} [{p1.low:.4f}, {p1.high:.4f}], bootstrap [{p1.boot_low:.4f}, {p1.boot_high:.4f}]")


def main() -> None:
    n_tasks = int(sys.argv[sys.argv.index("--tasks") + 1]) if "--tasks" in sys.argv else 14_000
    repeats = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 8
    start = time.perf_counter()
    import scipy.special  # noqa: F401  (the statistics import it on first use)

    import workbench.analysis.run_stats  # noqa: F401

    imports = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "nel.duckdb"
        start = time.perf_counter()
        make_store(store, n_tasks, repeats)
        print(f"store: 2 runs of {n_tasks:,} tasks x {repeats} repeats = {n_tasks * repeats:,} steps each, written "
              f"in {time.perf_counter() - start:.2f} s; imports incl. scipy.special {imports:.2f} s (not counted)")
        print(f"all run metrics, 10,000 resamples (target: load well under 0.5 s, total < 1 s):\n  "
              f"{timed(RUN, store)}")
        print(f"with 20 category slices, clustered by category:\n  "
              f"{timed(RUN, store, by=['category'], cluster='category')}")
        print(f"continuous rewards (every task mean distinct):\n  {timed(CONTINUOUS, store)}")


if __name__ == "__main__":
    main()
