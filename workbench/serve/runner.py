"""Run the app under uvicorn on a socket bound here, so the ready line can carry the real port.

Binding first (rather than letting uvicorn bind) is what makes ``--port 0`` usable: the line
``nel serve: gsm8k (1319 problems) at http://127.0.0.1:PORT`` is printed once the server accepts
connections, and tests and other processes wait for it. uvicorn handles SIGINT/SIGTERM: it stops
accepting, lets requests in flight finish and returns.

Clients get ``ReadTimeouts`` to send their headers and bodies (``slow_clients``), and the process may
open as many files as its hard limit allows: a thousand slow clients, each a socket, must not leave the
server unable to accept the next connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import resource
import signal
import socket
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import uvicorn

from workbench.serve.slow_clients import DEFAULT, ReadTimeouts, protocol_class

READY_PREFIX = "nel serve: "


def is_loopback(host: str) -> bool:
    """Whether ``host`` only ever reaches this machine (``localhost`` and every address it resolves to)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port`` 0: a free one)."""
    family, kind, proto, _, address = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address)
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve(app: Any, sock: socket.socket, on_ready: Callable[[str], None],
          timeouts: ReadTimeouts | None = None) -> None:
    """Serve ``app`` on ``sock`` until SIGINT/SIGTERM; call ``on_ready(url)`` once it accepts connections."""
    _raise_open_files_limit()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", loop="none",
                            http=protocol_class(timeouts or DEFAULT), timeout_graceful_shutdown=5, server_header=False)
    server = _Server(config)

    async def main() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                break
            await asyncio.sleep(0.01)
        else:
            on_ready(url_of(sock))
        await task

    _run(main)


def _raise_open_files_limit() -> None:
    """The soft limit on open files up to the hard one (often 1024 → 1M): every connection is a descriptor."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):  # macOS caps it lower still: keep what we have
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


class _Server(uvicorn.Server):
    """uvicorn re-raises the signal that stopped it once it is done, so a SIGTERM'd ``nel serve`` would
    die by signal after its clean shutdown; here a signal only asks for the shutdown, and ``nel`` exits 0."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        stops = (signal.SIGINT, signal.SIGTERM)
        for sig in stops:
            loop.add_signal_handler(sig, self._stop)
        try:
            yield
        finally:
            for sig in stops:
                loop.remove_signal_handler(sig)

    def _stop(self) -> None:
        if self.should_exit:  # a second signal: do not wait for requests in flight
            self.force_exit = True
        self.should_exit = True


def _run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """uvloop when installed (it roughly doubles requests per second), asyncio otherwise."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())
