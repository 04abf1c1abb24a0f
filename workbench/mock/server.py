"""The mock model's HTTP/1.1 server: an asyncio ``Protocol`` over ``httptools``, uvloop when present.

One ``_Connection`` per TCP connection parses requests with
``httptools.HttpRequestParser`` (keep-alive, Content-Length bodies,
``Connection: close``) and hands each to ``MockApp.handle``, which routes it,
draws a fault, and returns the bytes to send with a delay. Delayed replies are
scheduled with ``loop.call_later`` — no coroutine per request — and leave in
request order even when jitter would reorder them.
"""

from __future__ import annotations

import asyncio
import collections
import random
import signal
import socket
import traceback
from collections.abc import Callable
from typing import Any, cast

import httptools
import orjson

from workbench.mock.answers import AnswerIndex
from workbench.mock.config import MockConfig
from workbench.mock.endpoints import Api, ApiError, error_body
from workbench.mock.responder import Responder
from workbench.mock.skill import SkillProfile

_REASONS = {
    200: b"200 OK",
    400: b"400 Bad Request",
    404: b"404 Not Found",
    405: b"405 Method Not Allowed",
    429: b"429 Too Many Requests",
    500: b"500 Internal Server Error",
}
_CLOSE = b"Connection: close\r\n"
_MALFORMED = b'{"id": "chatcmpl-mock", "object": "chat.completion", "choices": [{"index": 0, "message": {"ro'
_INVALID_JSON = error_body(
    "We could not parse the JSON body of your request: it is not valid JSON.",
    type="invalid_request_error",
    code="invalid_json",
)
_NOT_AN_OBJECT = error_body(
    "The JSON body of your request must be an object.", type="invalid_request_error", code="invalid_json"
)
_RATE_LIMITED = error_body(
    "Rate limit reached for requests (injected by the mock model's fault settings).",
    type="requests",
    code="rate_limit_exceeded",
)
_SERVER_ERROR = error_body(
    "The server had an error while processing your request (injected by the mock model's fault settings).",
    type="server_error",
    code="internal_error",
)

Handler = Callable[[dict[str, Any], object], bytes]
Reply = tuple[bytes | None, float, bool]
"""What to send (``None``: nothing), after how many seconds, and whether to close the connection after."""


def http_response(status: int, body: bytes, close: bool = False, extra: bytes = b"") -> bytes:
    """A complete HTTP/1.1 response with a JSON body."""
    head = b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s%s\r\n" % (
        _REASONS[status],
        len(body),
        extra,
        _CLOSE if close else b"",
    )
    return head + body


def _echo_text(method: bytes, url: bytes, headers: list[tuple[bytes, bytes]]) -> str:
    """The request line and headers as text: what ``--echo-headers`` replies with."""
    lines = [f"{method.decode()} {url.decode('latin-1')}"]
    lines += [f"{name.decode('latin-1')}: {value.decode('latin-1')}" for name, value in headers]
    return "\n".join(lines)


def _attempt_of(header: bytes | None) -> object:
    """The ``X-Nel-Attempt`` header; ``None`` when the caller sent none (the endpoints then decide)."""
    if header is None:
        return None
    try:
        return int(header)
    except ValueError:
        return header.decode("latin-1").strip()


class MockApp:
    """Routing, faults and latency around the ``Api`` endpoints."""

    def __init__(self, config: MockConfig, index: AnswerIndex) -> None:
        self.config = config
        self.api = Api(config, index, Responder(SkillProfile(config.skill_seed)))
        self._model_routes: dict[bytes, Handler] = {
            b"/v1/chat/completions": self.api.chat_completions,
            b"/v1/completions": self.api.completions,
            b"/v1/responses": self.api.responses,
        }
        self._info_routes: dict[bytes, bytes] = {
            b"/v1/models": self.api.models_body,
            b"/health": self.api.health_body,
        }
        self._fault_rng = random.Random(config.fault_seed)
        self._latency_rng = random.Random(config.fault_seed + 1)
        self._delays = config.latency_ms > 0 or config.jitter_ms > 0
        self._retry_after = b"Retry-After: %d\r\n" % config.retry_after_s

    def delay(self) -> float:
        """Seconds to wait before replying: ``latency_ms`` ± uniform ``jitter_ms``, never negative."""
        if not self._delays:
            return 0.0
        ms = self.config.latency_ms + self._latency_rng.uniform(-self.config.jitter_ms, self.config.jitter_ms)
        return max(0.0, ms / 1000.0)

    def draw_fault(self) -> str | None:
        """The fault this model request gets, if any."""
        rate = self.config.fail_rate
        if rate <= 0.0 or self._fault_rng.random() >= rate:
            return None
        return self._fault_rng.choice(self.config.faults)

    def handle(
        self, method: bytes, url: bytes, body: bytes, attempt: bytes | None, keep_alive: bool,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> Reply:
        close = not keep_alive
        path = url.partition(b"?")[0]
        handler = self._model_routes.get(path)
        if handler is None:
            info = self._info_routes.get(path)
            if info is None:
                shown = url if self.config.echo_headers else path  # --echo-headers quotes the query string too
                message = f"Unknown request URL: {method.decode()} {shown.decode('latin-1')}."
                payload = error_body(message, type="invalid_request_error", code="unknown_url")
                return http_response(404, payload, close), 0.0, close
            if method != b"GET":
                return self._not_allowed(method, path, b"GET", close), 0.0, close
            return http_response(200, info, close), 0.0, close
        if method != b"POST":
            return self._not_allowed(method, path, b"POST", close), 0.0, close
        delay = self.delay()
        fault = self.draw_fault()
        if fault == "timeout":
            return None, self.config.hang_s, True
        if fault == "429":
            return http_response(429, _RATE_LIMITED, close, self._retry_after), delay, close
        if fault == "500":
            return http_response(500, _SERVER_ERROR, close), delay, close
        if fault == "malformed":
            return http_response(200, _MALFORMED, close), delay, close
        if headers is not None:
            self.api.echo = _echo_text(method, url, headers)
        try:
            status, payload = self._call(handler, body, attempt)
        finally:
            self.api.echo = None
        data = http_response(status, payload, close)
        if fault == "truncated":  # Content-Length promises the whole body; half of it comes, then EOF
            return data[: len(data) - len(payload) + len(payload) // 2], delay, True
        return data, delay, close

    @staticmethod
    def _call(handler: Handler, body: bytes, attempt: bytes | None) -> tuple[int, bytes]:
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            return 400, _INVALID_JSON
        if not isinstance(request, dict):
            return 400, _NOT_AN_OBJECT
        try:
            return 200, handler(request, _attempt_of(attempt))
        except ApiError as exc:
            return exc.status, exc.body
        except Exception as exc:  # a bug in the mock: answer 500 rather than leave the client hanging
            traceback.print_exc()
            message = f"The mock model failed on this request: {type(exc).__name__}: {exc}"
            return 500, error_body(message, type="server_error", code="mock_internal_error")

    @staticmethod
    def _not_allowed(method: bytes, path: bytes, allowed: bytes, close: bool) -> bytes:
        message = (
            f"Method {method.decode()} is not allowed for {path.decode('latin-1')}; use {allowed.decode()}."
        )
        payload = error_body(message, type="invalid_request_error", code="method_not_allowed")
        return http_response(405, payload, close, b"Allow: %s\r\n" % allowed)


class _Connection(asyncio.Protocol):
    """One client connection: parse requests, send replies in order, honour keep-alive."""

    __slots__ = ("_app", "_attempt", "_body", "_closing", "_headers", "_loop", "_parser", "_queue", "_transport",
                 "_url")

    def __init__(self, app: MockApp, loop: asyncio.AbstractEventLoop) -> None:
        self._app = app
        self._loop = loop
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._url = b""
        self._body = b""
        self._attempt: bytes | None = None
        # Every header is kept only under --echo-headers (a test feature); otherwise only X-Nel-Attempt is read.
        self._headers: list[tuple[bytes, bytes]] | None = [] if app.config.echo_headers else None
        self._closing = False
        # replies waiting for their delay, oldest first: [data, close, ready]
        self._queue: collections.deque[list[Any]] = collections.deque()

    # --- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._queue.clear()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # no protocol upgrades: the request was answered as plain HTTP/1.1
        except httptools.HttpParserError:
            payload = error_body("Malformed HTTP request.", type="invalid_request_error", code="bad_request")
            self._closing = True
            self._send(http_response(400, payload, close=True), True)

    # --- httptools callbacks -----------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._url = b""
        self._body = b""
        self._attempt = None
        if self._headers is not None:
            self._headers = []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._headers is not None:
            self._headers.append((name, value))
        if len(name) == 13 and name.lower() == b"x-nel-attempt":
            self._attempt = value

    def on_body(self, body: bytes) -> None:
        self._body += body

    def on_message_complete(self) -> None:
        if self._closing:
            return
        parser = self._parser
        data, delay, close = self._app.handle(
            parser.get_method(), self._url, self._body, self._attempt, parser.should_keep_alive(), self._headers
        )
        if close:
            self._closing = True
        if delay <= 0.0 and not self._queue:
            self._send(data, close)
            return
        slot = [data, close, False]
        self._queue.append(slot)
        self._loop.call_later(delay, self._release, slot)

    # --- sending -------------------------------------------------------------------------------

    def _release(self, slot: list[Any]) -> None:
        slot[2] = True
        queue = self._queue
        while queue and queue[0][2]:
            data, close, _ = queue.popleft()
            self._send(data, close)
            if close:
                queue.clear()

    def _send(self, data: bytes | None, close: bool) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if data:
            transport.write(data)
        if close:
            transport.close()


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A uvloop event loop when uvloop is installed, else asyncio's default."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one); ``OSError`` if it cannot bind."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


async def start_server(config: MockConfig, index: AnswerIndex, sock: socket.socket) -> asyncio.Server:
    """Serve the mock model on ``sock`` in the running loop; the caller closes the server."""
    loop = asyncio.get_running_loop()
    app = MockApp(config, index)
    return await loop.create_server(lambda: _Connection(app, loop), sock=sock, backlog=1024)


def serve_forever(
    config: MockConfig, index: AnswerIndex, sock: socket.socket, on_ready: Callable[[], None]
) -> None:
    """Serve until SIGINT or SIGTERM, calling ``on_ready`` once requests are being accepted."""
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(_serve_until_signalled(config, index, sock, on_ready))
    finally:
        asyncio.set_event_loop(None)
        loop.close()


async def _serve_until_signalled(
    config: MockConfig, index: AnswerIndex, sock: socket.socket, on_ready: Callable[[], None]
) -> None:
    # Signal handlers are installed from inside the running loop: uvloop can lose a signal that
    # arrives between add_signal_handler and the loop starting to run.
    server = await start_server(config, index, sock)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    on_ready()
    await stop.wait()
    server.close()
