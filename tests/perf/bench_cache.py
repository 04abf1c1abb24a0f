"""Benchmark: the cache interceptor's figure (issue 20). A script, not a test: run
`PYTHONPATH=. python tests/perf/bench_cache.py`.

GSM8K 1,319 problems x 4 repeats against the built-in mock, through a config whose service has a ``cache``
interceptor, twice. Prints, for the second (cached) run: the model requests the mock answered during it (read from
the mock's own response-id counter; target 0) and steps/s over the whole `nel eval run` process wall time (target
>= 5,000), with the load average.
"""

from __future__ import annotations

import os
import re
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


def run(path: Path) -> tuple[float, int, str]:
    start = time.perf_counter()
    proc = subprocess.run([*NEL, "eval", "run", str(path), "--no-progress"], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"nel eval run failed:\n{proc.stdout}\n{proc.stderr}")
    match = re.search(r"complete: (\d+) new steps", proc.stdout)
    return wall, int(match.group(1)) if match else 0, proc.stdout


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, mock_model() as mock:
        path = config(Path(tmp), mock.base_url)
        wall, steps, _ = run(path)
        before = served(mock.base_url)
        print(f"first run (fills the cache): {steps} steps in {wall:.2f} s, {before} model requests")
        wall, steps, out = run(path)
        during = served(mock.base_url) - before - 1  # less the probe that read `before`
        load = os.getloadavg()
        line = next((x.strip() for x in out.splitlines() if x.strip().startswith("cache ")), "")
        print(f"cached re-run: {during} model requests (target 0); {steps} steps in {wall:.2f} s = "
              f"{steps / wall:,.0f} steps/s for the whole process (target >= 5,000); {line}; "
              f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
