"""HTTP tools from a NeMo Gym resources server: every ``POST /{tool}`` its ``/openapi.json`` describes.

A resources server offers its tools as plain FastAPI routes (``POST /get_weather`` with a JSON body)
beside the protocol's own (``/seed_session``, ``/verify`` ...). ``discover_tools`` turns each into a
``ToolSpec`` whose parameters are the route's request-body schema (``$ref``s resolved), and
``HttpToolBox`` calls them for one attempt, inside its server session (the cookie from
``/seed_session``), keeping every call so the Responses-API ``response`` sent to ``/verify`` holds
the whole exchange (``function_call`` and ``function_call_output`` items), as Gym's own agents send it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx
import orjson

from workbench.errors import RunFailed
from workbench.gym.http import server_error_text
from workbench.solvers.tools import ToolOutcome, ToolSpec, unknown_tool

PROTOCOL_ROUTES = frozenset({"seed_session", "verify", "aggregate_metrics", "close_session", "close_resources_session",
                             "health",
                             "run"})
"""Routes of the resources-server protocol itself, never offered as tools."""
_MAX_REF_DEPTH = 32


def discover_tools(client: httpx.Client, base_url: str) -> list[ToolSpec]:
    """The tools of the server at ``base_url`` (``RunFailed`` naming the URL when it has no usable schema)."""
    url = f"{base_url}/openapi.json"
    try:
        response = client.get(url)
    except httpx.TransportError as exc:
        raise RunFailed(f"cannot reach {url}: {(str(exc) or type(exc).__name__).splitlines()[0]}") from None
    if response.status_code != 200:
        raise RunFailed(f"{url} answered HTTP {response.status_code}: {server_error_text(response)}")
    try:
        schema = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        raise RunFailed(f"{url} is not JSON: {response.content[:120]!r}") from None
    return tools_from_openapi(schema)


def tools_from_openapi(schema: dict[str, Any]) -> list[ToolSpec]:
    components = (schema.get("components") or {}).get("schemas") or {}
    specs: list[ToolSpec] = []
    for path, operations in sorted((schema.get("paths") or {}).items()):
        name = path.strip("/")
        post = operations.get("post") if isinstance(operations, dict) else None
        if not isinstance(post, dict) or not name or "/" in name or "{" in name or name in PROTOCOL_ROUTES:
            continue
        body = (((post.get("requestBody") or {}).get("content") or {}).get("application/json") or {}).get("schema")
        parameters = _resolve(body, components, 0) if isinstance(body, dict) else {"type": "object", "properties": {}}
        parameters.pop("title", None)
        description = post.get("description") or post.get("summary") or parameters.pop("description", None) or name
        specs.append(ToolSpec(name, " ".join(str(description).split()), parameters))
    return specs


def _resolve(node: Any, components: dict[str, Any], depth: int) -> Any:
    """``node`` with every ``#/components/schemas/X`` reference replaced by its schema."""
    if depth > _MAX_REF_DEPTH:
        return {}
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            target = components.get(ref.rsplit("/", 1)[-1], {})
            return _resolve({**target, **{k: v for k, v in node.items() if k != "$ref"}}, components, depth + 1)
        return {k: _resolve(v, components, depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve(v, components, depth + 1) for v in node]
    return node


class HttpToolBox:
    """One attempt's HTTP tools: ``POST {base_url}/{tool}`` with the attempt's session cookies."""

    def __init__(self, client: httpx.AsyncClient, base_url: str, specs: Sequence[ToolSpec],
                 cookies: httpx.Cookies | None = None) -> None:
        self._client, self._base, self._specs, self._cookies = client, base_url, list(specs), cookies
        self._names = {s.name for s in self._specs}
        self.history: list[dict[str, Any]] = []
        """Every call made, as Responses-API items: a ``function_call`` then its ``function_call_output``."""

    @property
    def specs(self) -> Sequence[ToolSpec]:
        return self._specs

    async def call(self, name: str, arguments: dict[str, Any], *, timeout: float) -> ToolOutcome:
        if name not in self._names:
            return unknown_tool(name, self._specs)
        started = time.perf_counter()
        try:
            response = await self._client.post(f"{self._base}/{name}", content=orjson.dumps(arguments),
                                               headers={"Content-Type": "application/json"},
                                               cookies=self._cookies, timeout=timeout)
        except httpx.TimeoutException:
            outcome = ToolOutcome(f"error: {name} did not answer within {timeout:g} s", error="timeout")
        except httpx.TransportError as exc:
            outcome = ToolOutcome(f"error: cannot reach {self._base}: {exc}", error="unreachable")
        else:
            text = response.text
            outcome = ToolOutcome(text) if response.status_code < 400 else ToolOutcome(
                f"error: HTTP {response.status_code}: {server_error_text(response)}",
                error=f"http_{response.status_code}")
        call_id = f"call_{len(self.history) // 2:04d}_{int(started * 1000) % 100000:05d}"
        self.history.append({"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name,
                             "arguments": orjson.dumps(arguments).decode(), "status": "completed"})
        self.history.append({"type": "function_call_output", "call_id": call_id, "output": outcome.output})
        return outcome
