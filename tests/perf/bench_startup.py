"""Benchmark: start-up (issue 15). A script, not a test: `python tests/perf/bench_startup.py [--runs N]`.

Prints, each as the median of N fresh processes, wall time and CPU time (user + system: less sensitive to a
loaded machine than wall time, so compare the two):
  1. the whole `nel eval run -b gsm8k --max-problems 1 --repeats 1` process against the built-in mock model, from
     exec to exit, a fresh store each time (target <= 0.5 s on a quiet machine);
  2. `python -c "import workbench.engine"` (target <= 0.3 s);
  3. the end-of-run summary (pass@1..4 with intervals) of 200 tasks x 4 repeats, in process (milliseconds).
and the machine's load average before and after, since these are wall-clock figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from workbench.mock import mock_model

PYTHON = sys.executable


# As installed by pip, which compiles every module: bytecode is written on the warm-up run and read afterwards
# (with PYTHONDONTWRITEBYTECODE set, each process would compile ~70 modules from source: 70 ms more).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds (the child's user + system time) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr.read().decode() if proc.stderr else ''}")
    return wall, usage.ru_utime + usage.ru_stime


def median_of(runs: int, make_cmd, cwd: Path) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    walls, cpus = zip(*(timed(make_cmd(i), cwd) for i in range(runs)), strict=True)
    return statistics.median(walls), statistics.median(cpus)


def summary_ms() -> float:
    from workbench.analysis.run_summary import summarize

    rng = np.random.default_rng(0)
    n, k = 200, 4
    start = time.perf_counter()
    summarize("r", n_tasks=n, n_repeats=k, attempts=np.full(n, k), passes=rng.integers(0, k + 1, n),
              latency_ms=rng.random(n * k) * 100, failures={}, tokens={}, errors=np.zeros(n, dtype=np.int64))
    return 1000 * (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    print(f"machine: {len(os.sched_getaffinity(0))} cores, load average {os.getloadavg()[0]:.2f} at the start")
    with tempfile.TemporaryDirectory() as tmp, mock_model() as mock:
        root = Path(tmp)
        timed([PYTHON, "-m", "workbench.cli", "--help"], root)  # warm the page cache first

        def run_cmd(i: int) -> list[str]:
            return [PYTHON, "-m", "workbench.cli", "eval", "run", "-b", "gsm8k", "--max-problems", "1", "--repeats",
                    "1", "--model-url", mock.base_url, "--model-id", "nel-mock", "--no-progress",
                    "--store", str(root / f"s{i}" / "nel.duckdb"), "--output-dir", str(root / f"o{i}")]

        timed(run_cmd(-1), root)  # the warm-up: bytecode written, the mock's first answer made
        wall, cpu = median_of(args.runs, run_cmd, root)
        print(f"nel eval run --max-problems 1 --repeats 1 (whole process): {wall:.3f} s wall, {cpu:.3f} s CPU "
              f"(target <= 0.5 s)")
        wall, cpu = median_of(args.runs, lambda i: [PYTHON, "-c", "import workbench.engine"], root)
        print(f"import workbench.engine: {wall:.3f} s wall, {cpu:.3f} s CPU (target <= 0.3 s)")
        wall, cpu = median_of(args.runs, lambda i: [PYTHON, "-c", "pass"], root)
        print(f"  (python itself: {wall:.3f} s wall, {cpu:.3f} s CPU)")
    print(f"end-of-run summary, 200 tasks x 4 repeats: {summary_ms():.1f} ms (target: milliseconds)")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
