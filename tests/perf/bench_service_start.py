"""Benchmark: what nel adds to a started server's start-up (issue 20's figure: <= 0.2 s). A script.

The server is our own mock as a ``type: command`` service. Its own start-up is measured outside nel: the time
from spawning it to the ready line it prints once it listens, plus one request. nel's is the time from asking
the fleet for the service (port pick, spawn, health wait) to the first model request answered. The overhead is
the difference of the medians (and the median of each round's difference), over alternating rounds.

    PYTHONPATH=. .venv/bin/python tests/perf/bench_service_start.py
"""

from __future__ import annotations

import http.client
import os
import statistics
import subprocess
import sys
import time

from workbench.mock.cli import READY_PREFIX
from workbench.services import ServiceFleet
from workbench.services.ports import free_port
from workbench.spec import validate

ROUNDS = 10
MOCK = [sys.executable, "-m", "workbench.cli", "model", "mock", "--port", "{port}"]
BUDGET_S = 0.2


def first_request(port: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10.0)
    conn.request("POST", "/v1/chat/completions", body=b'{"model": "mock", "messages": [{"role": "user", '
                 b'"content": "What is 1 + 1?"}]}', headers={"Content-Type": "application/json"})
    assert conn.getresponse().status == 200
    conn.close()


def server_alone() -> float:
    """Spawn to its own ready line (``nel mock model listening on ...``, read from its log: no polling to compete
    with its start-up), then the first request: the server's own start-up."""
    port = free_port("127.0.0.1")
    t0 = time.perf_counter()
    proc = subprocess.Popen([a.replace("{port}", str(port)) for a in MOCK], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(READY_PREFIX):
                break
        first_request(port)
        return time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait()


def through_nel() -> float:
    """The fleet asked for the service, to the first model request answered."""
    spec = validate({"services": {"m": {"type": "command", "model": "mock", "command": MOCK}},
                     "benchmarks": [{"name": "gsm8k"}]})
    with ServiceFleet(spec, announce=False) as fleet:
        t0 = time.perf_counter()
        fleet.start_for(0)
        first_request(fleet.running["m"].port)
        return time.perf_counter() - t0


def main() -> None:
    alone, nel = [], []
    for _ in range(ROUNDS):
        alone.append(server_alone())
        nel.append(through_nel())
    a, n = statistics.median(alone), statistics.median(nel)
    paired = statistics.median(x - y for x, y in zip(nel, alone, strict=True))
    load = os.getloadavg()
    print(f"server alone (spawn to ready line + 1 request)  : median {a * 1000:.0f} ms over {ROUNDS} rounds")
    print(f"through nel (fleet start to first answer):       median {n * 1000:.0f} ms over {ROUNDS} rounds")
    print(f"overhead: {(n - a) * 1000:.0f} ms (difference of medians), {paired * 1000:.0f} ms (median of paired "
          f"rounds) (budget {BUDGET_S * 1000:.0f} ms)   "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    if max(n - a, paired) > BUDGET_S:
        sys.exit(1)


if __name__ == "__main__":
    main()
