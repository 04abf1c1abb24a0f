"""``nel serve`` under load: /verify requests per second for gsm8k with 64 concurrent clients (target ≥ 500).

Run: ``.venv/bin/python tests/perf/bench_serve.py [--clients 64] [--seconds 10]``. Starts ``nel serve -b
gsm8k --port 0``, seeds every problem once, then keeps ``--clients`` connections each posting
Responses-API verify requests (half right, half wrong answers) and prints throughput and latency.
``--serve-args=--scoring-workers=0`` measures scoring in the server's threads instead of its process pool.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from typing import Any

import httpx
import orjson

from workbench.model.transport import FastTransport
from workbench.serve.process import serve_process

TARGET_RPS = 500


def _body(idx: int, seed: dict[str, Any], right: bool) -> dict[str, Any]:
    answer = seed["expected_answer"] if right else "-1"
    text = f"Let me work it out.\nThe answer is: {answer}"
    return {"responses_create_params": seed["responses_create_params"], "expected_answer": seed["expected_answer"],
            "metadata": seed["metadata"],
            "response": {"object": "response", "output": [
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]}}


async def _load(url: str, clients: int, seconds: float, problems: int) -> tuple[int, list[float], int]:
    async with httpx.AsyncClient(base_url=url, timeout=30.0) as client:
        seeds = [(await client.post("/seed_session", json={"idx": i})).json() for i in range(problems)]
    bodies = [orjson.dumps(_body(i, s, i % 2 == 0)) for i, s in enumerate(seeds)]
    headers = {"content-type": "application/json"}
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def worker(k: int) -> None:
        # one keep-alive connection per client, over the project's lean transport (httpx's own
        # stack costs ~0.85 ms of CPU per request, which would measure the client, not the server)
        nonlocal errors
        async with httpx.AsyncClient(base_url=url, transport=FastTransport(), timeout=30.0) as client:
            i = k
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                reply = await client.post("/verify", content=bodies[i % len(bodies)], headers=headers)
                latencies.append(time.perf_counter() - t0)
                errors += reply.status_code != 200
                i += clients

    await asyncio.gather(*(worker(k) for k in range(clients)))
    return len(latencies), latencies, errors


def _run(coro: Any) -> Any:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument("--serve-args", nargs="*", default=[], metavar="ARG",
                        help="more nel serve arguments, e.g. --serve-args=--scoring-workers=0 (score in threads)")
    args = parser.parse_args()
    with serve_process(["-b", "gsm8k", "--port", "0", *args.serve_args]) as server:
        t0 = time.perf_counter()
        n, latencies, errors = _run(_load(server.url, args.clients, args.seconds, args.problems))
    elapsed = args.seconds
    rps = n / elapsed
    ordered = sorted(latencies)
    p50 = statistics.median(ordered) * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    print(f"nel serve /verify gsm8k: {rps:.0f} requests/s with {args.clients} clients over {elapsed:g} s "
          f"({n} requests, {errors} errors); latency p50 {p50:.1f} ms, p99 {p99:.1f} ms; target ≥ {TARGET_RPS}/s "
          f"{'OK' if rps >= TARGET_RPS and not errors else 'MISSED'} (wall {time.perf_counter() - t0:.1f} s)")
    return 0 if rps >= TARGET_RPS and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
