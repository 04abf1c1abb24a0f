"""``nel serve`` under hostile load: is ``/health`` still answered at once, and are slow clients cut off?

Run: ``.venv/bin/python tests/perf/bench_serve_hostile.py [--only big,bound,slow] [--size 7000000]``.
Prints figures, asserts nothing (the functional tests in tests/functional/test_serve_hostile.py do).
Every scenario starts its own ``nel serve -b gsm8k --port 0`` and, meanwhile, a prober asks ``/health``
every 20 ms on a keep-alive connection and records how long each answer took.

1. **big**: 8 clients each post one ``--size``-character response (``"- "`` repeated: the numeric
   scorer's slow case, about 5 s of CPU for 7 MB) to ``/verify``, three ways: the old server (scoring in
   threads, no bound on the scored length), threads with the bound, and the default (process pool + bound).
2. **bound**: 8 clients keep posting responses exactly at the bound (524288 characters of ``"$ "``,
   about 0.8 s of scoring each): every one is scored for real, in threads, then in the process pool.
3. **slow**: ``--slow`` connections (default 1000), half sending their headers a byte a second, half
   sending complete headers and then their body a byte a second. Prints when each was cut off (and
   whether it got its 408), and ``/health`` meanwhile. Server defaults (30 s headers, 60 s body) unless
   ``--header-timeout`` / ``--body-timeout`` say otherwise.

Compare the figures within one run (the load generator shares the machine); the load average before
each scenario is printed with it.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import resource
import selectors
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import cast
from urllib.parse import urlsplit

import orjson

from workbench.serve.process import serve_process

BOUND = 524_288


class Prober(threading.Thread):
    """``GET /health`` every ``interval`` s until stopped; each latency in seconds (a failure counts as ∞)."""

    def __init__(self, url: str, interval: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.host, self.port = _address(url)
        self.interval, self.stop = interval, threading.Event()
        self.latencies: list[float] = []

    def run(self) -> None:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        while not self.stop.is_set():
            t0 = time.perf_counter()
            try:
                conn.request("GET", "/health")
                conn.getresponse().read()
                self.latencies.append(time.perf_counter() - t0)
            except (OSError, http.client.HTTPException):
                self.latencies.append(float("inf"))
                conn.close()
                conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
            self.stop.wait(self.interval)
        conn.close()


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def _figures(latencies: Sequence[float]) -> str:
    ordered = sorted(latencies)
    if not ordered:
        return "no probes"
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (f"/health p50 {statistics.median(ordered) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
            f"max {ordered[-1] * 1000:.1f} ms over {len(ordered)} probes")


def _post_loop(url: str, body: bytes, until: Callable[[], bool], out: list[tuple[float, float, str]]) -> None:
    """Post ``body`` to /verify until ``until()``; append (seconds, reward, method) per answer."""
    host, port = _address(url)
    conn = http.client.HTTPConnection(host, port, timeout=600)
    while True:
        t0 = time.perf_counter()
        conn.request("POST", "/verify", body=body, headers={"content-type": "application/json"})
        reply = orjson.loads(conn.getresponse().read())
        out.append((time.perf_counter() - t0, reply.get("reward", -1.0),
                    reply.get("scoring_details", {}).get("method", str(reply.get("error")))))
        if until():
            break
    conn.close()


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def _scenario(title: str, serve_args: list[str], body: bytes, clients: int, rounds: int | None,
              seconds: float | None) -> None:
    print(f"  {title}  [{_load()}]", flush=True)
    with serve_process(["-b", "gsm8k", "--port", "0", "--max-body-bytes", str(16 << 20), *serve_args]) as server:
        prober = Prober(server.url)
        prober.start()
        time.sleep(0.5)  # a few idle probes first
        results: list[tuple[float, float, str]] = []
        started = time.perf_counter()
        counts = [0] * clients

        def worker(k: int) -> None:
            def until() -> bool:
                counts[k] += 1
                if seconds is not None:
                    return time.perf_counter() - started >= seconds
                return counts[k] >= (rounds or 1)
            _post_loop(server.url, body, until, results)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        prober.stop.set()
        prober.join()
    took = sorted(r[0] for r in results)
    methods = sorted({f"{m}" for _, _, m in results})
    print(f"    {len(results)} verifies in {elapsed:.1f} s (each {took[0]:.2f}..{took[-1]:.2f} s, "
          f"method {', '.join(methods)}); {_figures(prober.latencies)}", flush=True)


def big(size: int) -> None:
    text = ("- " * (size // 2 + 1))[:size]
    body = orjson.dumps({"response": text, "expected": "5"})
    print(f"big: 8 clients post one {size}-character response each ({len(body) / 1e6:.1f} MB bodies)")
    _scenario("old server: threads, no bound", ["--scoring-workers", "0", "--max-response-chars", str(size)],
              body, 8, 1, None)
    _scenario("threads + bound (default 524288)", ["--scoring-workers", "0"], body, 8, 1, None)
    _scenario("default: process pool + bound", [], body, 8, 1, None)


def bound(seconds: float) -> None:
    text = ("$ " * BOUND)[:BOUND]
    body = orjson.dumps({"response": text, "expected": "5"})
    print(f"bound: 8 clients keep posting {BOUND}-character responses (scored for real) for {seconds:g} s")
    _scenario("threads", ["--scoring-workers", "0"], body, 8, None, seconds)
    _scenario("default: process pool", [], body, 8, None, seconds)


def slow(connections: int, header_timeout: float | None, body_timeout: float | None) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, connections * 2 + 256)), hard))
    args = [*(["--header-timeout", str(header_timeout)] if header_timeout else []),
            *(["--body-timeout", str(body_timeout)] if body_timeout else [])]
    print(f"slow: {connections} connections trickling a byte a second ({_load()}); nel serve {' '.join(args)}",
          flush=True)
    with serve_process(["-b", "gsm8k", "--port", "0", *args]) as server:
        prober = Prober(server.url)
        prober.start()
        time.sleep(0.5)
        cut = _slowloris(*_address(server.url), connections)
        prober.stop.set()
        prober.join()
    for kind in ("headers", "body"):
        times = sorted(t for k, t, _ in cut if k == kind)
        got_408 = sum(1 for k, _, answer in cut if k == kind and answer.startswith(b"HTTP/1.1 408"))
        if times:
            print(f"    slow {kind}: {len(times)} cut off after {times[0]:.1f} .. {statistics.median(times):.1f} "
                  f".. {times[-1]:.1f} s (min .. median .. max), {got_408} answered 408")
    print(f"    {_figures(prober.latencies)}", flush=True)


def _slowloris(host: str, port: int, connections: int) -> list[tuple[str, float, bytes]]:
    """Open ``connections`` sockets and trickle; return (kind, seconds until the server closed it, what it sent)."""
    selector = selectors.DefaultSelector()
    state: dict[socket.socket, dict[str, object]] = {}
    for i in range(connections):
        sock = socket.create_connection((host, port))
        sock.setblocking(False)
        kind = "headers" if i % 2 == 0 else "body"
        head = b"POST /verify HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
        if kind == "body":
            head += b"content-length: 100000\r\n\r\n"
        sock.send(head)
        state[sock] = {"kind": kind, "t0": time.perf_counter(), "got": b""}
        selector.register(sock, selectors.EVENT_READ)
    done: list[tuple[str, float, bytes]] = []
    next_tick = time.perf_counter() + 1.0
    while state:
        for key, _ in selector.select(timeout=max(0.0, next_tick - time.perf_counter())):
            sock = cast(socket.socket, key.fileobj)
            assert isinstance(sock, socket.socket)
            info = state[sock]
            try:
                chunk = sock.recv(65536)
            except ConnectionError:
                chunk = b""
            if chunk:
                info["got"] = info["got"] + chunk  # type: ignore[operator]
                continue
            selector.unregister(sock)
            sock.close()
            del state[sock]
            done.append((str(info["kind"]), time.perf_counter() - float(info["t0"]), bytes(info["got"])))  # type: ignore[arg-type, call-overload]
        if time.perf_counter() >= next_tick:
            next_tick += 1.0
            for sock, info in state.items():
                with contextlib.suppress(OSError):
                    sock.send(b"X" if info["kind"] == "headers" else b" ")
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="big,bound,slow", help="scenarios to run, comma-separated")
    parser.add_argument("--size", type=int, default=7_000_000, help="characters per response in 'big'")
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of 'bound'")
    parser.add_argument("--slow", type=int, default=1000, help="slow connections in 'slow'")
    parser.add_argument("--header-timeout", type=float, help="nel serve --header-timeout for 'slow'")
    parser.add_argument("--body-timeout", type=float, help="nel serve --body-timeout for 'slow'")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if "big" in only:
        big(args.size)
    if "bound" in only:
        bound(args.seconds)
    if "slow" in only:
        slow(args.slow, args.header_timeout, args.body_timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
