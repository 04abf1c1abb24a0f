"""Read timeouts for ``nel serve``: a client gets so long to send its headers, and so long for its body.

uvicorn closes idle keep-alive connections but has no read timeout: a client that sends its headers a
byte at a time (slowloris), or stops half-way through a body, holds its connection, its memory and a
file descriptor for as long as it likes, and a thousand such clients are cheap to run. The timeouts have
to live in the HTTP protocol, because an ASGI app (a middleware too) is only called once the headers
are complete. So ``protocol_class`` subclasses uvicorn's httptools protocol with three checks:

- **headers**: from the connection's first moment (or the first byte of a following keep-alive request)
  the request line and headers must be complete within ``header_timeout``, and at most
  ``MAX_HEADER_BYTES`` long (httptools itself sets no limit; a longer head gets a 431);
- **body**: from the end of the headers the whole body must arrive within ``body_timeout``;
- a client that misses either gets a ``408`` (when no response has started) and the connection closes;
- **reply**: a client that stops reading (the server's send buffer full) for ``body_timeout`` is
  dropped; its connection is aborted, as closing would wait for the very buffer it is not reading.

Deadlines, not idle timers: a client trickling a byte a second is cut off as surely as a silent one.
Each connection costs one timer; nothing is polled.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from workbench.serve.guard import error_json

MAX_HEADER_BYTES = 64 * 1024
"""The longest request line plus headers accepted (nginx's default large buffers hold 32 KiB)."""


@dataclass(frozen=True, slots=True)
class ReadTimeouts:
    """Seconds a client has to send its request line and headers, and then its body."""

    header: float = 30.0
    body: float = 60.0


DEFAULT = ReadTimeouts()


def protocol_class(timeouts: ReadTimeouts) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with ``timeouts`` enforced (pass it as ``uvicorn.Config(http=...)``)."""
    return type("TimedHttpToolsProtocol", (TimedHttpToolsProtocol,),
                {"header_timeout": timeouts.header, "body_timeout": timeouts.body})


class TimedHttpToolsProtocol(HttpToolsProtocol):
    """Cuts off a client whose headers or body take longer than allowed (see the module docstring)."""

    header_timeout = DEFAULT.header
    body_timeout = DEFAULT.body

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase = "headers"  # "headers" until they are complete, then "body", then "idle" (keep-alive)
        self._deadline: asyncio.TimerHandle | None = None
        self._stalled: asyncio.TimerHandle | None = None  # set while the client is not reading our reply
        self._header_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm("headers")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._stalled is not None:
            self._stalled.cancel()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stalled is None:
            self._stalled = self.loop.call_later(self.body_timeout, self.transport.abort)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stalled is not None:
            self._stalled.cancel()
            self._stalled = None

    def data_received(self, data: bytes) -> None:
        counted = self._phase == "headers"  # a chunk that starts in a body or between requests is not counted
        super().data_received(data)
        if counted and self._phase == "headers" and not self.transport.is_closing():
            self._header_bytes += len(data)
            if self._header_bytes > MAX_HEADER_BYTES:
                self._refuse(431, "headers_too_large", f"request line and headers are longer than "
                                                       f"{MAX_HEADER_BYTES} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._phase == "idle":  # the first byte of the next request on a keep-alive connection
            self._arm("headers")

    def on_headers_complete(self) -> None:
        self._arm("body")
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        self._phase = "idle"
        super().on_message_complete()

    def _arm(self, phase: str) -> None:
        self._disarm()
        self._phase = phase
        if phase == "headers":
            self._header_bytes = 0
        seconds = self.header_timeout if phase == "headers" else self.body_timeout
        self._deadline = self.loop.call_later(seconds, self._timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _timed_out(self) -> None:
        self._deadline = None
        if self._phase == "headers":
            message = f"the request line and headers took longer than {self.header_timeout:g} s"
        else:
            message = f"the request body took longer than {self.body_timeout:g} s"
        self._refuse(408, "request_timeout", message)

    def _refuse(self, status: int, kind: str, message: str) -> None:
        """Answer ``status`` unless another response is on the wire (then just close), and close the connection."""
        self._disarm()
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if self._phase == "headers":  # the previous request on this connection (if any) must be answered
            writable = cycle is None or cycle.response_complete
        else:  # this request's own app must not have started answering, nor be queued behind another
            writable = not self.pipeline and not cycle.response_started
            if writable:  # the app reading this body gets a disconnect, and nothing it sends is written
                cycle.disconnected = True
                cycle.message_event.set()
        if writable:
            field = "headers" if self._phase == "headers" else "body"
            body = error_json(kind, field, message)
            reason = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}[status]
            self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                                 b"connection: close\r\n\r\n%s" % (status, reason, len(body), body))
        self.transport.close()
