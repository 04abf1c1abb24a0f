"""The checks every request passes before it reaches a route: auth token, content type, body size.

A plain ASGI middleware rather than FastAPI dependencies, because the body limit must hold while
the body is still being received (a chunked upload has no Content-Length to trust) and a refused
request should cost nothing beyond its headers.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_JSON_TYPES = (b"application/json",)


def error_json(kind: str, field: str, message: str) -> bytes:
    """The one error body shape of the server: ``{"error": {"type", "field", "message"}}``."""
    return orjson.dumps({"error": {"type": kind, "field": field, "message": message}})


class BodyTooLarge(Exception):
    """Raised from ``receive`` when a streamed body passes the limit; the guard answers 413."""


class Guard:
    """Refuse before routing: 401 (token), 415 (not JSON), 413 (body over ``max_body_bytes``)."""

    def __init__(self, app: ASGIApp, *, auth_token: str | None, max_body_bytes: int,
                 path_limits: dict[str, int] | None = None) -> None:
        self.app = app
        self._token = f"Bearer {auth_token}".encode() if auth_token else None
        self.max_body_bytes = max_body_bytes
        self._path_limits = path_limits or {}
        """Routes whose bodies are a whole run (``/aggregate_metrics``): their own, larger limit."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        limit = self._path_limits.get(scope["path"], self.max_body_bytes)
        refusal = self._refusal(scope["method"], headers, limit)
        if refusal is not None:
            await _reply(send, *refusal)
            return
        state = {"started": False, "exceeded": False}

        async def guarded_send(message: Message) -> None:
            # FastAPI turns an error raised while reading the body into its own 400: once the limit
            # was passed, whatever the app answers is replaced by the 413 it deserves
            if state["exceeded"]:
                if message["type"] == "http.response.start" and not state["started"]:
                    state["started"] = True
                    await _reply(send, 413, "body_too_large", "body", self._too_large(limit))
                return
            state["started"] = state["started"] or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, self._limited(receive, state, limit), guarded_send)
        except BodyTooLarge:
            if not state["started"]:
                await _reply(send, 413, "body_too_large", "body", self._too_large(limit))

    def _refusal(self, method: str, headers: dict[bytes, bytes], limit: int) -> tuple[int, str, str, str] | None:
        if self._token is not None:
            given = headers.get(b"authorization", b"")
            # compare_digest: the time taken says nothing about how much of the token was right
            if not hmac.compare_digest(given, self._token):
                why = "missing" if not given else "wrong"
                return 401, "unauthorized", "Authorization", f"{why} bearer token (send 'Authorization: Bearer TOKEN')"
        if method not in ("POST", "PUT", "PATCH"):
            return None
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            return 413, "body_too_large", "body", self._too_large(limit)
        content_type = headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower()
        if content_type not in _JSON_TYPES and not content_type.endswith(b"+json"):
            shown = content_type.decode("latin-1") or "none"
            return 415, "unsupported_media_type", "Content-Type", f"expected application/json, got {shown}"
        return None

    def _too_large(self, limit: int) -> str:
        flag = " (--max-body-bytes)" if limit == self.max_body_bytes else ""
        return f"request body is larger than the limit of {limit} bytes{flag}"

    def _limited(self, receive: Receive, state: dict[str, bool], limit: int) -> Receive:
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    state["exceeded"] = True
                    raise BodyTooLarge
            return message

        return limited


async def _reply(send: Send, status: int, kind: str, field: str, message: str) -> None:
    body = error_json(kind, field, message)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
