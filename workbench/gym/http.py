"""HTTP to a remote environment: one-line errors, bounded retries of transient failures, cookies per attempt.

Unreachable servers and non-2xx answers raise ``RunFailed`` naming the URL and quoting the server's own
error text, so a run stops with a message the user can act on (completed steps are kept for ``--resume``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import httpx
import orjson

from workbench.errors import RunFailed

_RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_BACKOFF_S = (0.25, 1.0, 2.0)
Json = dict[str, Any]


def timeout(seconds: float) -> httpx.Timeout:
    return httpx.Timeout(seconds, connect=min(10.0, seconds))


def server_error_text(response: httpx.Response) -> str:
    """The server's own explanation, on one line: FastAPI ``detail`` lists, ``error.message`` or the body."""
    try:
        data = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return " ".join(response.text.split())[:300] or "(empty body)"
    detail = data.get("detail", data.get("error", data)) if isinstance(data, dict) else data
    if isinstance(detail, dict):
        detail = detail.get("message", detail)
    if isinstance(detail, list):  # pydantic validation errors: "body.question: Field required; ..."
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', e)}" if isinstance(e, dict) else str(e)
            for e in detail
        )
    return " ".join(str(detail).split())[:500]


def _describe(exc: Exception) -> str:
    return (str(exc) or type(exc).__name__).splitlines()[0][:200]


def _unreachable(url: str, exc: Exception) -> RunFailed:
    return RunFailed(f"cannot reach the gym server at {url}: {_describe(exc)}; check the URL and that it is running")


def _refused(url: str, response: httpx.Response) -> RunFailed:
    return RunFailed(f"{url} answered HTTP {response.status_code}: {server_error_text(response)}")


def _json(url: str, response: httpx.Response) -> Json:
    try:
        data = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        raise RunFailed(f"{url} answered with something other than JSON: {response.text[:200]!r}") from None
    if not isinstance(data, dict):
        raise RunFailed(f"{url} answered with JSON that is not an object: {response.text[:200]!r}")
    return data


def request_sync(client: httpx.Client, method: str, url: str, body: Mapping[str, Any] | None = None) -> Json:
    """One blocking call (seeding and health checks happen before the engine's workers start)."""
    last: Exception | None = None
    for delay in (0.0, *_BACKOFF_S):
        time.sleep(delay)
        try:
            response = client.request(method, url, content=None if body is None else orjson.dumps(body),
                                      headers={"Content-Type": "application/json"})
        except httpx.TransportError as exc:
            last = exc
            continue
        if response.status_code in _RETRY_STATUS:
            last = _refused(url, response)
            continue
        if not response.is_success:
            raise _refused(url, response)
        return _json(url, response)
    raise last if isinstance(last, RunFailed) else _unreachable(url, last or RuntimeError("no answer"))


async def post(client: httpx.AsyncClient, url: str, body: Mapping[str, Any],
               cookies: httpx.Cookies | None = None) -> tuple[Json, httpx.Cookies]:
    """POST ``body``, sending ``cookies``; the answer and the cookies the server set (a Gym session)."""
    last: Exception | None = None
    for delay in (0.0, *_BACKOFF_S):
        await asyncio.sleep(delay)
        request = client.build_request("POST", url, content=orjson.dumps(body),
                                       headers={"Content-Type": "application/json"})
        if cookies:
            cookies.set_cookie_header(request)
        try:
            response = await client.send(request)
        except httpx.TransportError as exc:
            last = exc
            continue
        client.cookies.clear()  # the client's own jar would share one session across attempts
        if response.status_code in _RETRY_STATUS:
            last = _refused(url, response)
            continue
        if not response.is_success:
            raise _refused(url, response)
        jar = httpx.Cookies(cookies)
        jar.extract_cookies(response)
        return _json(url, response), jar
    raise last if isinstance(last, RunFailed) else _unreachable(url, last or RuntimeError("no answer"))
