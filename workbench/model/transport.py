"""A lean HTTP/1.1 transport for httpx: one keep-alive connection per worker.

Why: on a 2-core machine httpx's default stack (httpcore over anyio) spends
about 0.85 ms of CPU per request, which alone caps a worker process near
1,000 requests/s; most of that is layering (anyio stream wrappers, cancel
scopes, per-request lock setup). This transport speaks HTTP/1.1 straight over
an asyncio ``Protocol`` and parses responses with ``httptools`` (the parser
uvicorn uses), so the client keeps httpx's API (``Request``/``Response``,
timeouts, exception types) at a fraction of the cost.

Scope, on purpose: one request at a time per transport (each engine worker
owns one), ``http`` and ``https``, Content-Length and chunked bodies (gzip is
decoded by httpx). Proxies are not handled here: ``ModelClient`` falls back to
httpx's default transport when proxy variables are set.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import httptools
import httpx


class _Exchange(asyncio.Protocol):
    """One TCP connection; collects one response at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[None] | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []
        self.status = 0
        self.keep_alive = True
        self.received_any = False
        self.closed = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.received_any = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"invalid HTTP response: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.received_any:
            message = "peer closed connection without sending complete message body"
        else:
            message = "Server disconnected without sending a response."
        self._fail(httpx.RemoteProtocolError(message))

    # httptools callbacks
    def on_message_begin(self) -> None:
        self.headers = []
        self.chunks = []

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def _fail(self, exc: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


def _timeouts(request: httpx.Request) -> tuple[float | None, float | None]:
    t: dict[str, Any] = request.extensions.get("timeout", {})
    return t.get("connect"), t.get("read")


class FastTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over one reused connection (see the module docstring)."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self._ssl_context = ssl_context
        self._conn: _Exchange | None = None
        self._lock = asyncio.Lock()

    async def _connect(self, request: httpx.Request, timeout: float | None) -> _Exchange:
        url = request.url
        secure = url.scheme == "https"
        port = url.port or (443 if secure else 80)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):  # not wait_for: see handle_async_request
                _, conn = await loop.create_connection(
                    _Exchange, url.host, port,
                    ssl=(self._ssl_context or ssl.create_default_context()) if secure else None,
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {url.host}:{port} timed out", request=request) from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from None
        return conn

    @staticmethod
    def _encode(request: httpx.Request, body: bytes) -> bytes:
        target = request.url.raw_path
        lines = [request.method.encode() + b" " + target + b" HTTP/1.1"]
        for name, value in request.headers.raw:
            lines.append(name + b": " + value)
        return b"\r\n".join(lines) + b"\r\n\r\n" + body

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        payload = self._encode(request, body)
        connect_timeout, read_timeout = _timeouts(request)
        async with self._lock:
            for attempt in (0, 1):
                conn = self._conn
                reused = conn is not None and not conn.closed
                if not reused:
                    conn = self._conn = await self._connect(request, connect_timeout)
                assert conn is not None and conn.transport is not None
                conn.waiter = asyncio.get_running_loop().create_future()
                conn.received_any = False
                conn.transport.write(payload)
                try:
                    # Not asyncio.wait_for: on Python 3.11 it returns the result, swallowing a cancellation
                    # that arrives as the answer does (CPython gh-86296). Against a fast endpoint under uvloop
                    # that happened on every Ctrl-C or SIGTERM of a long run, which then never stopped.
                    async with asyncio.timeout(read_timeout):
                        await conn.waiter
                except TimeoutError:
                    conn.close()
                    self._conn = None
                    raise httpx.ReadTimeout("timed out waiting for the response", request=request) from None
                except httpx.RemoteProtocolError:
                    self._conn = None
                    # A kept-alive connection the server had already closed: send once more on a new one.
                    if reused and attempt == 0 and not conn.received_any:
                        continue
                    raise
                break
            assert conn is not None
            if not conn.keep_alive:
                conn.close()
                self._conn = None
            return httpx.Response(
                conn.status,
                headers=conn.headers,
                stream=httpx.ByteStream(b"".join(conn.chunks)),
                extensions={"http_version": b"HTTP/1.1"},
                request=request,
            )

    async def aclose(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
