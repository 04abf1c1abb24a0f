"""Benchmark: the cache interceptor's figure (issue 20). A script, not a test: run
`PYTHONPATH=. python tests/perf/bench_cache.py`.

GSM8K 1,319 problems x 4 repeats against the built-in mock, through a config whose service has a ``cache``
interceptor: one run fills the cache, then ``--repeats`` cached re-runs, each a new run into a copy of the store as
the first run left it (so every re-run finds the same store). Prints, for the cached re-runs: the model requests
the mock answered during them (read from the mock's own response-id counter; target 0) and steps/s over the whole
`nel eval run` process wall time (target >= 5,000): the median and the best of the re-runs, with the load average
(a 2-core VM's wall times vary by 10-20 % from one minute to the next: the median is the figure).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from workbench.mock import mock_model

NEL = [sys.executable, "-m", "workbench.cli"]


def served(base_url: str) -> int:
    """Chat completions the mock has answered so far: its ids count up from 1 (``chatcmpl-PREFIX{n:016x}``), so
    one probe request reads the counter (the probe itself is not counted)."""
    reply = httpx.post(f"{base_url}/chat/completions", json={"model": "nel-mock", "messages": [
        {"role": "user", "content": "counter probe"}]}, timeout=10).json()
    return int(reply["id"][-16:], 16) - 1


def config(root: Path, base_url: str) -> Path:
    path = root / "cached.yaml"
    path.write_text(f"""services:
  main:
    type: api
    url: {base_url}
    model: nel-mock
    interceptors:
      - name: cache
benchmarks:
  - name: gsm8k
    repeats: 4
    max_concurrent: 64
output:
  dir: {root / 'out'}
""")
    return path


def run(path: Path, env: dict[str, str]) -> tuple[float, float, int, str]:
    """One `nel eval run` process: its wall time, its CPU time (user + system), its steps and its output."""
    start = time.perf_counter()
    proc = subprocess.Popen([*NEL, "eval", "run", str(path), "--no-progress"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"nel eval run failed:\n{out}\n{err}")
    match = re.search(r"complete: (\d+) new steps", out)
    return wall, usage.ru_utime + usage.ru_stime, int(match.group(1)) if match else 0, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="cached re-runs to time (default 7)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, mock_model() as mock:
        # As installed (pip compiles bytecode): the first run writes it, the measured one reads it, even where
        # PYTHONDONTWRITEBYTECODE is set for the tests.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        root = Path(tmp)
        path = config(root, mock.base_url)
        wall, _, steps, _ = run(path, env)
        before = served(mock.base_url)
        print(f"first run (fills the cache): {steps} steps in {wall:.2f} s, {before} model requests")
        shutil.copytree(root / "out", root / "after-first")
        load_before = os.getloadavg()
        walls, cpus, line = [], [], ""
        for _ in range(args.repeats):
            shutil.rmtree(root / "out")
            shutil.copytree(root / "after-first", root / "out")
            cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall, cpu_total, steps, out = run(path, env)
            walls.append(wall)
            cpus.append(cpu_total - cpu_before.ru_utime - cpu_before.ru_stime)
            line = next((x.strip() for x in out.splitlines() if x.strip().startswith("cache ")), "")
        during = served(mock.base_url) - before - 1  # less the probe that read `before`
        load = os.getloadavg()
        median, best = statistics.median(walls), min(walls)
        print(f"cached re-runs ({args.repeats}): {during} model requests in all (target 0); {steps} steps each; "
              f"whole process: median {median:.2f} s = {steps / median:,.0f} steps/s, best {best:.2f} s = "
              f"{steps / best:,.0f} steps/s (target >= 5,000); CPU median {statistics.median(cpus):.2f} s; {line}; "
              f"load average {load_before[0]:.2f} before, {load[0]:.2f} after, on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
