"""Benchmark: start-up (issue 15). A script, not a test: `python tests/perf/bench_startup.py [--runs N]`.

``--tree DIR`` (repeatable) times another checkout too, taking turns with this one, so a ratio between them
holds on a loaded machine. Prints, each as the median of N fresh processes, wall time and CPU time (user +
system: less sensitive to a loaded machine than wall time, so compare the two):
  1. the whole `nel eval run -b gsm8k --max-problems 1 --repeats 1` process against the built-in mock model, from
     exec to exit, into the store of the runs before it (the usual case), then creating a fresh store each time
     (target <= 0.5 s on a quiet machine);
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
from collections.abc import Callable
from pathlib import Path

import numpy as np

from workbench.mock import mock_model

PYTHON = sys.executable


# As installed by pip, which compiles every module: bytecode is written on the warm-up run and read afterwards
# (with PYTHONDONTWRITEBYTECODE set, each process would compile ~70 modules from source: 70 ms more).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str], cwd: Path, tree: Path | None = None) -> tuple[float, float]:
    """Wall and CPU seconds (the child's user + system time) of one process, on ``tree``'s code if given."""
    env = ENV if tree is None else {**ENV, "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr.read().decode() if proc.stderr else ''}")
    return wall, usage.ru_utime + usage.ru_stime


def medians(runs: int, make_cmd: Callable[[int], list[str]], cwd: Path,
            trees: list[Path | None]) -> list[tuple[float, float]]:
    """The median wall and CPU time of ``runs`` processes on each tree, the trees taking turns."""
    samples: list[list[tuple[float, float]]] = [[] for _ in trees]
    for i in range(runs):
        for k, tree in enumerate(trees):
            samples[k].append(timed(make_cmd(i * len(trees) + k), cwd, tree))
    return [(statistics.median(w for w, _ in got), statistics.median(c for _, c in got)) for got in samples]


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
    parser.add_argument("--tree", type=Path, action="append", default=[],
                        help="also time the processes on another checkout (e.g. a worktree of an older commit), "
                             "interleaved with this one's: a ratio in one run survives a loaded machine")
    args = parser.parse_args()
    trees: list[Path | None] = [None, *(t.resolve() for t in args.tree)]
    names = ["this checkout", *(str(t) for t in args.tree)]
    print(f"machine: {len(os.sched_getaffinity(0))} cores, load average {os.getloadavg()[0]:.2f} at the start")
    with tempfile.TemporaryDirectory() as tmp, mock_model() as mock:
        root = Path(tmp)

        def run_cmd(i: int, store: str | None = None) -> list[str]:
            return [PYTHON, "-m", "workbench.cli", "eval", "run", "-b", "gsm8k", "--max-problems", "1", "--repeats",
                    "1", "--model-url", mock.base_url, "--model-id", "nel-mock", "--no-progress",
                    "--store", str(root / (store or f"s{i}") / "nel.duckdb"), "--output-dir", str(root / f"o{i}")]

        def again(i: int) -> list[str]:  # the usual case: the store of the runs before (one per checkout)
            return run_cmd(i, f"shared-{i % len(trees)}")

        for k, tree in enumerate(trees):  # the warm-up: bytecode written, the page cache and the mock warm
            timed(again(k), root, tree)
        figures = [
            ("nel eval run --max-problems 1 --repeats 1 (whole process), into its store", "<= 0.5 s", again),
            ("the same, creating a fresh store", "<= 0.5 s", run_cmd),
            ("import workbench.engine", "<= 0.3 s", lambda i: [PYTHON, "-c", "import workbench.engine"]),
        ]
        for label, target, make_cmd in figures:
            for name, (wall, cpu) in zip(names, medians(args.runs, make_cmd, root, trees), strict=True):
                print(f"{label}: {wall:.3f} s wall, {cpu:.3f} s CPU (target {target}) [{name}]")
        (wall, cpu), = medians(args.runs, lambda i: [PYTHON, "-c", "pass"], root, [None])
        print(f"  (python itself: {wall:.3f} s wall, {cpu:.3f} s CPU)")
    print(f"end-of-run summary, 200 tasks x 4 repeats: {summary_ms():.1f} ms (target: milliseconds)")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
