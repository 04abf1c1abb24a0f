"""Benchmark: the engine against a bare httpx loop (issue 15: throughput must not regress). A script:
`python tests/perf/bench_vs_httpx.py [--rounds N]`.

Both are whole processes, timed from exec to exit, against the same built-in mock model at zero latency:
  1. `nel eval run -b gsm8k --repeats 4 --max-concurrent 64`: 1,319 x 4 = 5,276 steps, each scored, persisted
     and ingested, artifacts written;
  2. a bare loop: 64 asyncio tasks, each with its own `httpx.AsyncClient` (one connection: httpx's fastest
     set-up here; one client with a 64-connection pool is several times slower), send the same 5,276 chat
     requests and keep nothing.
They alternate for ``--rounds`` rounds, so a change in the machine's load hits both; the ratio of the medians is
the figure (about 1.4x before issue 15).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from workbench.mock import mock_model

BARE_LOOP = textwrap.dedent("""\
    import asyncio, sys, httpx
    from workbench.environments import get_environment

    async def main(url, repeats, in_flight):
        env = get_environment("gsm8k")
        bodies = [{"model": "nel-mock", "messages": list(env.seed(i).messages)}
                  for i in range(len(env)) for _ in range(repeats)]
        queue = iter(bodies)

        async def worker():
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                for body in queue:
                    (await client.post("/chat/completions", json=body)).raise_for_status()

        await asyncio.gather(*(worker() for _ in range(in_flight)))
        print(len(bodies))

    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
""")


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{cmd[:4]} failed:\n{proc.stdout}\n{proc.stderr}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    steps = 1319 * 4
    print(f"machine: {len(os.sched_getaffinity(0))} cores, load average {os.getloadavg()[0]:.2f} at the start")
    nel, bare = [], []
    with tempfile.TemporaryDirectory() as tmp, mock_model() as mock:
        root = Path(tmp)
        for i in range(args.rounds):
            nel.append(timed([sys.executable, "-m", "workbench.cli", "eval", "run", "-b", "gsm8k", "--model-url",
                              mock.base_url, "--model-id", "nel-mock", "--repeats", "4", "--max-concurrent", "64",
                              "--no-progress", "--store", str(root / f"{i}" / "nel.duckdb"),
                              "--output-dir", str(root / f"{i}")]))
            bare.append(timed([sys.executable, "-c", BARE_LOOP, mock.base_url, "4", "64"]))
    n, b = statistics.median(nel), statistics.median(bare)
    print(f"nel eval run, {steps:,} steps (whole process): {n:.2f} s = {steps / n:,.0f} steps/s "
          f"(runs: {', '.join(f'{t:.2f}' for t in nel)} s)")
    print(f"bare httpx loop, same requests, stores nothing: {b:.2f} s = {steps / b:,.0f} requests/s "
          f"(runs: {', '.join(f'{t:.2f}' for t in bare)} s)")
    print(f"nel is {b / n:.2f}x the bare loop's throughput (about 1.4x before issue 15; must not regress)")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
