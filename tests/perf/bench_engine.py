"""Benchmark: the spine's figures (issue 2). A script, not a test: run `make perf`.

Prints, for the whole `nel eval run` process (start to exit, every step persisted
and ingested) against the built-in mock model on loopback:
  1. GSM8K 1,319 problems x 4 repeats, 64 in flight, zero latency: steps/s (target >= 1,000);
  2. the same with 200 ms model latency: steps/s (target >= 90 % of 64 / 0.2 s = 288);
  3. peak RSS of a ~100,000-step run (target <= 200 MB);
  4. `nel --help` wall time (target < 0.5 s).
Pass --quick to skip the 100,000-step run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workbench.mock import mock_model

NEL = [sys.executable, "-m", "workbench.cli"]


def run_eval(base_url: str, store: Path, repeats: int, max_problems: int | None = None) -> tuple[float, int, int]:
    """Run `nel eval run` as a child process; return (wall seconds, steps, peak RSS in KiB)."""
    cmd = [*NEL, "eval", "run", "-b", "gsm8k", "--model-url", base_url, "--model-id", "nel-mock",
           "--repeats", str(repeats), "--max-concurrent", "64", "--store", str(store), "--no-progress",
           "--output-dir", str(store.parent)]
    if max_problems:
        cmd += ["--max-problems", str(max_problems)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    out = proc.stdout.read().decode() if proc.stdout else ""
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"nel eval run failed:\n{out}\n{err}")
    match = re.search(r"complete: (\d+) new steps", out)
    steps = int(match.group(1)) if match else 0
    return wall, steps, usage.ru_maxrss


def main() -> None:
    quick = "--quick" in sys.argv
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with mock_model() as mock:
            wall, steps, _ = run_eval(mock.base_url, root / "a" / "nel.duckdb", repeats=4)
            print(f"zero latency: {steps} steps in {wall:.2f} s = {steps / wall:,.0f} steps/s "
                  f"for the whole process (target >= 1,000)")
        with mock_model(latency_ms=200.0) as mock:
            wall, steps, _ = run_eval(mock.base_url, root / "b" / "nel.duckdb", repeats=4)
            print(f"200 ms latency, 64 in flight: {steps / wall:,.0f} steps/s for the whole process "
                  f"(target >= 288 = 90 % of 320)")
        if not quick:
            with mock_model() as mock:
                wall, steps, rss_kib = run_eval(mock.base_url, root / "c" / "nel.duckdb", repeats=76)
                print(f"{steps:,}-step run: peak RSS {rss_kib / 1024:.0f} MB (target <= 200 MB), "
                      f"{steps / wall:,.0f} steps/s")
    start = time.perf_counter()
    subprocess.run([*NEL, "--help"], check=True, capture_output=True)
    help_s = time.perf_counter() - start
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    bare = time.perf_counter() - start
    print(f"nel --help: {help_s:.3f} s (target < 0.5 s; a bare `python -c pass` takes {bare:.3f} s)")


if __name__ == "__main__":
    main()
