"""Benchmark: exporting a run's seed-compatible artifacts. A script, not a test: run `make perf`.

Makes a GSM8K 1,319 x 4 run against the built-in mock model (zero latency), then prints, for
`export_run` in a fresh process: steps/s written (results.jsonl and trajectories.jsonl together, plus
the bundle, runtime stats and failure analysis), the wall time, the bytes written and the peak RSS of
the process; and the wall time of `nel eval report RUN` from the store.
Pass --repeats N for a larger run (76 gives ~100,000 steps).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workbench.mock import mock_model

NEL = [sys.executable, "-m", "workbench.cli"]

# Peak RSS is read in the child from /proc/self/status (VmHWM): rusage's ru_maxrss of a child carries
# the parent's RSS at fork over the exec, which would report this script's own memory.
_PEAK = "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1), file=sys.stderr)"
_EXPORT = f"""
import re, sys, time
from workbench.export.artifacts import export_run
start = time.perf_counter()
result = export_run(sys.argv[1], sys.argv[2], sys.argv[3])
print(result.n_results, time.perf_counter() - start)
{_PEAK}
"""
_NEL = f"""
import re, sys
from workbench.cli import main
rc = main(sys.argv[1:])
{_PEAK}
sys.exit(rc)
"""


def make_run(base_url: str, store: Path, repeats: int) -> str:
    cmd = [*NEL, "eval", "run", "-b", "gsm8k", "--model-url", base_url, "--model-id", "nel-mock",
           "--repeats", str(repeats), "--max-concurrent", "64", "--store", str(store), "--no-progress",
           "--output-dir", str(store.parent)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    match = re.search(r"run (\S+) complete", proc.stdout)
    if proc.returncode != 0 or not match:
        sys.exit(f"nel eval run failed:\n{proc.stdout}\n{proc.stderr}")
    return match.group(1)


def timed_child(code: str, *args: str) -> tuple[float, int, str]:
    """Run ``python -c code args``; return (wall seconds, peak RSS in KiB, stdout)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{args} failed:\n{proc.stdout}\n{proc.stderr}")
    return wall, int(proc.stderr.strip().splitlines()[-1]), proc.stdout


def main() -> None:
    repeats = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 4
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = root / "nel.duckdb"
        with mock_model() as mock:
            run_id = make_run(mock.base_url, store, repeats)
        out = root / "export"
        wall, rss_kib, text = timed_child(_EXPORT, str(store), run_id, str(out))
        steps, inside = text.split()
        n = int(steps)
        size = sum(p.stat().st_size for p in out.iterdir())
        print(f"export of {n:,} steps: {float(inside):.2f} s inside export_run = {n / float(inside):,.0f} steps/s "
              f"({wall:.2f} s for the whole process); {size / 1e6:.1f} MB written; peak RSS {rss_kib / 1024:.0f} MB")
        wall, rss_kib, _ = timed_child(_NEL, "eval", "report", run_id, "--store", str(store))
        print(f"nel eval report RUN (from the store): {wall:.2f} s, peak RSS {rss_kib / 1024:.0f} MB")
        wall, rss_kib, _ = timed_child(_NEL, "eval", "report", str(out), "--all-formats", "-o", str(root / "r"))
        print(f"nel eval report DIR --all-formats: {wall:.2f} s, peak RSS {rss_kib / 1024:.0f} MB")


if __name__ == "__main__":
    main()
