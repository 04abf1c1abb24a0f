"""Benchmark: the connection-pool design of the model client. A script: `make perf`.

64 requests in flight against the built-in mock model (its own process), GSM8K
chat requests. Prints the client's CPU time per request and requests/s for:
  1. one shared httpx.AsyncClient with a 64-connection pool (httpx's default transport);
  2. one httpx.AsyncClient per worker, one connection each (httpx's default transport);
  3. the workbench's ModelClient per worker (one connection, FastTransport underneath).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import httpx
import orjson

from workbench.environments import get_environment
from workbench.mock import mock_model
from workbench.model.client import ModelClient, prepare
from workbench.model.config import ModelConfig

IN_FLIGHT = 64
REQUESTS = 6000


def bodies() -> list[bytes]:
    env = get_environment("gsm8k")
    return [orjson.dumps({"model": "m", "messages": [{"role": "user", "content": env.seed(i).prompt}]})
            for i in range(200)]


async def measure(worker: Callable[[int], Awaitable[None]]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(k) for k in range(IN_FLIGHT)))
    return REQUESTS / (time.perf_counter() - wall), (time.process_time() - cpu) / REQUESTS * 1000


async def main(base_url: str) -> None:
    url = base_url + "/chat/completions"
    payloads = bodies()
    headers = {"Content-Type": "application/json"}

    shared = httpx.AsyncClient(limits=httpx.Limits(max_connections=IN_FLIGHT), timeout=60)

    async def shared_worker(k: int) -> None:
        for i in range(k, REQUESTS, IN_FLIGHT):
            (await shared.post(url, content=payloads[i % 200], headers=headers)).raise_for_status()

    async def own_worker(k: int) -> None:
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=1), timeout=60) as client:
            for i in range(k, REQUESTS, IN_FLIGHT):
                (await client.post(url, content=payloads[i % 200], headers=headers)).raise_for_status()

    config = ModelConfig(url=base_url, model_id="m")
    env = get_environment("gsm8k")
    seeds = [env.seed(i) for i in range(200)]

    async def model_client_worker(k: int) -> None:
        async with ModelClient(config) as client:
            for i in range(k, REQUESTS, IN_FLIGHT):
                seed = seeds[i % 200]
                out = await client.generate(prepare(config, seed.messages, seed.prompt, 0), 0)
                assert out.failure is None, out.error

    for label, worker in (
        ("shared AsyncClient, 64-connection pool", shared_worker),
        ("AsyncClient per worker, 1 connection   ", own_worker),
        ("ModelClient per worker (FastTransport) ", model_client_worker),
    ):
        rate, cpu_ms = await measure(worker)
        print(f"{label}: {cpu_ms:.2f} ms CPU per request, {rate:,.0f} requests/s")
    await shared.aclose()


if __name__ == "__main__":
    with mock_model() as mock:
        asyncio.run(main(mock.base_url))
