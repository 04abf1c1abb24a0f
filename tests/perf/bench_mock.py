"""Throughput of the built-in mock model on one core: ``python tests/perf/bench_mock.py``.

The server runs as a subprocess pinned to one CPU; the load generator runs in
this process pinned to another, as a raw asyncio client: ~32 keep-alive
connections, each sending prebuilt request bytes (real GSM8K prompts, cycling
through attempts) one at a time and parsing replies with
``httptools.HttpResponseParser``, so the client is not the bottleneck.
Target: >= 5,000 requests/s at zero latency.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import dataclass
from itertools import cycle
from pathlib import Path

import httptools
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a source checkout

from workbench.environments import get_environment
from workbench.mock import mock_model
from workbench.mock.server import new_event_loop

TARGET = 5000


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def build_requests(port: int, n_prompts: int, attempts: int) -> list[bytes]:
    env = get_environment("gsm8k")
    requests = []
    for attempt in range(attempts):
        for i in range(min(n_prompts, len(env))):
            body = orjson.dumps(
                {"model": "nel-mock", "messages": [{"role": "user", "content": env.seed(i).prompt}]}
            )
            head = (
                f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                f"X-Nel-Attempt: {attempt}\r\n\r\n"
            ).encode()
            requests.append(head + body)
    return requests


class _Client(asyncio.Protocol):
    """One keep-alive connection with one request in flight at a time."""

    def __init__(self, requests: cycle[bytes], counts: dict[str, int]) -> None:
        self.requests = requests
        self.counts = counts
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.running = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(next(self.requests))  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_complete(self) -> None:
        key = "ok" if self.parser.get_status_code() == 200 else "errors"
        self.counts[key] += 1
        if self.running and self.transport is not None:
            self.transport.write(next(self.requests))


@dataclass
class Measurement:
    ok: int
    errors: int
    seconds: float
    server_cpu_s: float
    client_cpu_s: float


async def _load(
    pid: int, port: int, requests: list[bytes], connections: int, warmup: float, seconds: float
) -> Measurement:
    """Keep ``connections`` requests in flight for ``warmup`` + ``seconds``; measure the last ``seconds``."""
    loop = asyncio.get_running_loop()
    counts = {"ok": 0, "errors": 0}
    source = cycle(requests)
    clients = []
    for _ in range(connections):
        _, proto = await loop.create_connection(lambda: _Client(source, counts), "127.0.0.1", port)
        clients.append(proto)
    await asyncio.sleep(warmup)
    ok, errors = counts["ok"], counts["errors"]
    server_cpu, client_cpu, start = _cpu_seconds(pid), _cpu_seconds(os.getpid()), time.perf_counter()
    await asyncio.sleep(seconds)
    result = Measurement(
        ok=counts["ok"] - ok,
        errors=counts["errors"] - errors,
        seconds=time.perf_counter() - start,
        server_cpu_s=_cpu_seconds(pid) - server_cpu,
        client_cpu_s=_cpu_seconds(os.getpid()) - client_cpu,
    )
    for client in clients:
        client.running = False
        if client.transport is not None:
            client.transport.close()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    args = parser.parse_args()

    # The server inherits this process's affinity when it is spawned (what `taskset` does);
    # then this process, the load generator, moves to its own CPU.
    os.sched_setaffinity(0, {args.server_cpu})
    started = time.perf_counter()
    with mock_model() as mock:
        startup = time.perf_counter() - started
        os.sched_setaffinity(0, {args.client_cpu})
        assert os.sched_getaffinity(mock.process.pid) == {args.server_cpu}
        requests = build_requests(mock.port, 1319, 4)
        loop = new_event_loop()
        try:
            m = loop.run_until_complete(
                _load(mock.process.pid, mock.port, requests, args.connections, 0.5, args.seconds)
            )
        finally:
            loop.close()
    rate = m.ok / m.seconds
    print(f"mock model start-up (spawn to ready line): {startup * 1000:.0f} ms")
    print(
        f"{m.ok} ok / {m.errors} non-200 responses in {m.seconds:.2f} s over {args.connections} connections"
    )
    print(
        f"CPU busy: server {100 * m.server_cpu_s / m.seconds:.0f}% of CPU {args.server_cpu}, "
        f"load generator {100 * m.client_cpu_s / m.seconds:.0f}% of CPU {args.client_cpu}"
    )
    print(f"mock model: {rate:,.0f} requests/s on one core (target >= {TARGET})")
    return 0 if rate >= TARGET and m.errors == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
