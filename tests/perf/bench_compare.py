"""Benchmark: comparing two runs read from the store (issue 4). A script, not a test: run it with the venv's python.

Writes two stores, each one 14,000-task x 8-repeat run (112,000 steps; each task with a category and a skill
from a U-shaped distribution, the candidate's skill nudged per task, 1 % transport errors), straight into
DuckDB (no model needed). Then times, in this process, best of three:
  1. `load_run` of both runs;
  2. `compare_runs`: the paired interval, the bootstrap (10,000 resamples), McNemar (n/a here), paired t,
     Wilcoxon, the sign-flip permutation test (10,000 flips), Mann-Whitney U, power, categories, runtime,
     flips and the verdict;
  3. their sum (target < 2 s);
  4. the TUI compare screen's worker, ``run_comparison``, and its findings screen's, ``diagnose_runs``, cold and
     as the compare screen opens it (with the two runs compare read; both runs in one store; target <= 1 s each
     at 50,000 tasks: pass --tasks 50000 --repeats 5).
The imports (scipy.stats among them, most of a second) are reported apart, and so is the wall time of the
whole `nel compare` process, imports included. Pass --tasks N / --repeats R for another size.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workbench.store.database import connect_rw


def make_store(path: Path, run_id: str, n_tasks: int, repeats: int, *, shift: float, seed: float) -> None:
    """One complete run written with a few INSERT ... SELECT statements. A task's skill depends only on its
    index (the same tasks are easy in both stores); ``shift`` nudges it, per task, for the candidate."""
    con = connect_rw(path)
    try:
        con.execute("SET threads = 4")
        con.execute(
            """INSERT INTO runs VALUES (?, 'bench', 'mock', 'http://localhost/v1', 'chat_completions', ?, '{}',
               '{"primary_metric": "numeric", "metrics": ["numeric"]}', ?, ?, 0, ?, 1, 'complete',
               now()::TIMESTAMP, now()::TIMESTAMP, 'bench')""",
            [run_id, "ab" * 32, n_tasks, repeats, n_tasks],
        )
        con.execute(
            """INSERT INTO tasks SELECT 't' || i, 'bench', 'prompt ' || i, '1',
                   json_object('idx', i, 'category', 'c' || (i % 20)) FROM range(?) r(i)""",
            [n_tasks],
        )
        con.execute("INSERT INTO run_tasks SELECT ?, i, 't' || i FROM range(?) r(i)", [run_id, n_tasks])
        con.execute(f"SELECT setseed({seed})")
        con.execute(
            f"""INSERT INTO steps (run_id, task_idx, repeat, task_id, shard_idx, started_at, reward, passed,
                   failure_category, prompt_tokens, completion_tokens, total_tokens, latency_ms, metadata)
               WITH base AS (SELECT i, (hash(i) % 1000003) / 1000003.0 AS a, (hash(i + 7) % 1000003) / 1000003.0 AS b,
                                    (hash(i + 13) % 1000003) / 1000003.0 AS s FROM range({n_tasks}) r(i)),
               skill AS (SELECT i, greatest(0.0, least(1.0,
                                   CASE WHEN a < 0.5 THEN power(b, 3) ELSE 1 - power(b, 3) END
                                   + CASE WHEN s < 0.1 THEN {shift} * 10 ELSE 0 END)) AS p FROM base),
               draws AS (SELECT i, j, p, random() AS u, random() AS e FROM skill, range({repeats}) s(j))
               SELECT ?, i, j, 't' || i, 0, now()::TIMESTAMP, CASE WHEN e >= 0.01 AND u < p THEN 1.0 ELSE 0.0 END,
                      e >= 0.01 AND u < p, CASE WHEN e < 0.01 THEN 'timeout' END, 100, 50 + (u * 100)::INT,
                      150 + (u * 100)::INT, 20 + u * 30, json_object('idx', i, 'category', 'c' || (i % 20))
               FROM draws""",
            [run_id],
        )
    finally:
        con.close()


def main() -> None:
    n_tasks = int(sys.argv[sys.argv.index("--tasks") + 1]) if "--tasks" in sys.argv else 14_000
    repeats = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 8
    start = time.perf_counter()
    import scipy.stats  # noqa: F401  (the comparison imports it on first use: Wilcoxon, Mann-Whitney)

    from workbench.analysis.compare import compare_runs
    from workbench.analysis.sources import load_run

    imports = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        make_store(root / "base" / "nel.duckdb", "base", n_tasks, repeats, shift=0.0, seed=0.11)
        make_store(root / "cand" / "nel.duckdb", "cand", n_tasks, repeats, shift=-0.004, seed=0.23)
        made = time.perf_counter() - start
        print(f"stores: 2 x {n_tasks:,} tasks x {repeats} repeats = {2 * n_tasks * repeats:,} steps written in "
              f"{made:.2f} s (imports incl. scipy.stats: {imports:.2f} s, not counted below)")
        best = None
        for _ in range(3):
            t0 = time.perf_counter()
            base = load_run("base", store=root / "base" / "nel.duckdb")
            cand = load_run("cand", store=root / "cand" / "nel.duckdb")
            t1 = time.perf_counter()
            result = compare_runs(base, cand, max_drop=0.05, seed=0)
            t2 = time.perf_counter()
            if best is None or t2 - t0 < best[0] + best[1]:
                best = (t1 - t0, t2 - t1)
        assert best is not None
        load_s, compare_s = best
        s = result.score
        print(f"load_run x 2 {load_s:.3f} s, compare_runs {compare_s:.3f} s, total {load_s + compare_s:.3f} s "
              f"(target < 2 s), best of 3")
        print(f"  {s.n_tasks:,} paired tasks: delta {s.delta:+.4f} [{s.low:+.4f}, {s.high:+.4f}], "
              f"{len(result.flips.regressions):,} regressions, {len(result.flips.improvements):,} improvements, "
              f"{len(result.categories)} categories, verdict {result.verdict}")
        from workbench.analysis.diagnosis.attribution import attribute
        from workbench.analysis.triage.compare import MOVED_SHOWN, attribution_frame

        timings = []
        for _ in range(3):
            t0 = time.perf_counter()
            groups = attribute(attribution_frame(base, cand), keep=MOVED_SHOWN).groups
            timings.append(time.perf_counter() - t0)
        print(f"attribution (the compare screen's transition groups, Fisher p-values, {MOVED_SHOWN} ranked tasks "
              f"per group; in run_comparison beside the above): {min(timings):.3f} s, {len(groups)} groups, best of 3")
        cmd = [sys.executable, "-c", "import sys; from workbench.cli import main; sys.exit(main(sys.argv[1:]))",
               "compare", "base", "cand", "--store", str(root / "base" / "nel.duckdb")]
        # The CLI reads both runs from one store: copy the candidate's run into the baseline's store first.
        con = connect_rw(root / "base" / "nel.duckdb")
        try:
            con.execute(f"ATTACH '{root / 'cand' / 'nel.duckdb'}' AS cand (READ_ONLY)")
            for table in ("runs", "run_tasks", "steps"):
                con.execute(f"INSERT INTO {table} SELECT * FROM cand.{table}")
        finally:
            con.close()
        import os

        from workbench.analysis.triage.compare import run_comparison
        from workbench.store import open_store

        store = open_store(root / "base" / "nel.duckdb")
        run_comparison(store, "base", "cand")  # first call: the readers' and the statistics' warm-up
        timings = []
        for _ in range(3):
            t0 = time.perf_counter()
            run_comparison(store, "base", "cand")
            timings.append(time.perf_counter() - t0)
        print(f"the TUI's compare (run_comparison: both runs read at once, the statistics the screen shows, the "
              f"attribution): {min(timings):.3f} s, best of 3 (target <= 1 s; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
        from workbench.analysis.triage.compare import diagnose_runs

        timings = []
        for _ in range(3):
            t0 = time.perf_counter()
            diagnose_runs(store, "base", "cand")
            timings.append(time.perf_counter() - t0)
        print(f"the TUI's findings read cold (diagnose_runs: both runs read, the diagnosis with evidence from the "
              f"store): {min(timings):.3f} s, best of 3 (load average {os.getloadavg()[0]:.1f})")
        runs = run_comparison(store, "base", "cand").reusable_runs
        assert runs is not None, "both runs are finished: the findings screen reuses what compare read"
        timings = []
        for _ in range(3):
            t0 = time.perf_counter()
            diagnose_runs(store, "base", "cand", runs=runs)
            timings.append(time.perf_counter() - t0)
        print(f"the TUI's findings as the compare screen opens them (f: the runs compare read, the diagnosis with "
              f"evidence from the store): {min(timings):.3f} s, best of 3 (target <= 1 s; load average "
              f"{os.getloadavg()[0]:.1f})")
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"nel compare failed:\n{proc.stdout}\n{proc.stderr}")
        print(f"nel compare base cand (a whole process: Python, imports, both loads, the comparison, the text): "
              f"{wall:.2f} s")


if __name__ == "__main__":
    main()
