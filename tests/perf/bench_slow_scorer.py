"""Benchmark: a slow scorer does not stall the run (issue 15). A script: `python tests/perf/bench_slow_scorer.py`.

The whole `nel eval run` process against the built-in mock model with 200 ms latency, 64 requests in flight, a BYOB
benchmark of 320 problems x 2 repeats, scored by:
  1. an instant scorer (the reference);
  2. a scorer that waits 50 ms per call (I/O, a sandbox, a service; ``scoring="thread"``, the BYOB default);
  3. a scorer that computes for 50 ms of CPU per call, holding the GIL (``scoring="process"``: one worker per core).
Prints steps/s for each and its ratio to the instant scorer (target >= 80 %). A scorer on the event loop would
serialise every verdict: 20 steps/s at most, 6 % of the 320 steps/s the latency allows.

The CPU-bound case has a floor no scheduling removes: N cores score at most N / 0.05 s = 20 N verdicts per second,
so 80 % of 320 steps/s needs 13 cores; the script prints that bound and how close the run came to it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workbench.mock import mock_model

NEL = [sys.executable, "-m", "workbench.cli"]
PROBLEMS, REPEATS, IN_FLIGHT, LATENCY_MS, SCORER_S = 320, 2, 64, 200.0, 0.05

SCORERS = {
    "instant": ("thread", "    pass\n"),
    "waits 50 ms": ("thread", f"    time.sleep({SCORER_S})\n"),
    "50 ms of CPU": ("process", f"    end = time.process_time() + {SCORER_S}\n"
                                "    while time.process_time() < end:\n        pass\n"),
}


def benchmark_file(root: Path, name: str, scoring: str, body: str) -> Path:
    slug = re.sub(r"\W+", "-", name).strip("-")
    path = root / f"{slug}.py"
    path.write_text(
        "import time\nfrom workbench.environments.byob import benchmark, scorer\n\n"
        f"@benchmark(name={slug!r}, dataset='rows.jsonl', prompt='{{question}}', scoring={scoring!r})\n"
        "@scorer\ndef score(sample):\n" + body + "    return sample.target in sample.response\n")
    return path


def run(url: str, file: Path, root: Path) -> float:
    cmd = [*NEL, "eval", "run", "-b", str(file), "--model-url", url, "--model-id", "nel-mock",
           "--repeats", str(REPEATS), "--max-concurrent", str(IN_FLIGHT), "--no-progress",
           "--store", str(root / f"{file.stem}.duckdb"), "--output-dir", str(root / file.stem)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"nel eval run failed:\n{proc.stdout}\n{proc.stderr}")
    return PROBLEMS * REPEATS / wall


def main() -> None:
    cores = len(os.sched_getaffinity(0))
    print(f"machine: {cores} cores, load average {os.getloadavg()[0]:.2f} at the start")
    with tempfile.TemporaryDirectory() as tmp, mock_model(latency_ms=LATENCY_MS) as mock:
        root = Path(tmp)
        with (root / "rows.jsonl").open("w") as rows:
            for i in range(PROBLEMS):
                rows.write(json.dumps({"question": f"What is {i} + 1?", "target": str(i + 1)}) + "\n")
        rates = {name: run(mock.base_url, benchmark_file(root, name, scoring, body), root)
                 for name, (scoring, body) in SCORERS.items()}
    reference = rates["instant"]
    print(f"{PROBLEMS} problems x {REPEATS} repeats, {LATENCY_MS:.0f} ms latency, {IN_FLIGHT} in flight "
          f"(at most {IN_FLIGHT / (LATENCY_MS / 1000):.0f} steps/s), whole process")
    for name, rate in rates.items():
        print(f"  scorer {name:>13}: {rate:6.1f} steps/s = {100 * rate / reference:5.1f} % of instant (target >= 80 %)")
    bound = cores / SCORER_S
    print(f"  50 ms of CPU per verdict on {cores} cores: at most {bound:.0f} verdicts/s; the run reached "
          f"{100 * rates['50 ms of CPU'] / min(bound, reference):.0f} % of min(that, instant)")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
