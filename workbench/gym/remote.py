"""Remote environments: a benchmark served by another ``nel serve`` or by a NeMo Gym resources server.

``gym://HOST:PORT`` (protocol ``evaluator``) asks ``nel serve`` for its size (``/health``), each problem
(``/seed_session {idx}``) and each verdict (``/verify {response, expected, metadata}``).
``gym://HOST:PORT?protocol=native&data=ROWS.jsonl`` speaks NeMo Gym's own protocol: problems come from
the local Gym rows; every attempt posts the row to ``/seed_session``, keeps the session cookie, and after
the model has answered posts the row's fields, ``responses_create_params`` and a Responses-API response
built from the answer to ``/verify``. The engine owns the model call either way, so trajectories, tokens
and latency are recorded as for a local benchmark; the server's extra verdict fields become the step's
``scoring_details``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from workbench.environments.base import Capabilities, EvalEnvironment
from workbench.environments.dataset import load_jsonl, task_id_of
from workbench.errors import RunFailed, UsageError
from workbench.gym import http
from workbench.gym.responses import build_response
from workbench.gym.tools import HttpToolBox, discover_tools
from workbench.gym.url import GymURL, parse_gym_url
from workbench.model.client import ModelResponse
from workbench.solvers.tools import ToolSpec
from workbench.types import Message, SeedResult, VerifyResult

_SEED_WINDOW = 64
"""Problems fetched together from ``nel serve`` on a seed cache miss (in parallel threads)."""
_ECHO_DROPPED = ("response", "responses_create_params")
"""Verdict fields that only echo the request back: not kept in the scoring details."""


def _hash(*parts: object) -> str:
    return hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def _reward(url: str, data: dict[str, Any]) -> float:
    reward = data.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        raise RunFailed(f"{url} answered without a numeric 'reward': {orjson.dumps(data)[:200]!r}")
    return float(reward)


class RemoteEnvironment(EvalEnvironment):
    """What both protocols share: the URL, its connections and the run identity."""

    scorer = "remote"
    capabilities = Capabilities(remote_attempts=True, tools=True)

    def __init__(self, url: GymURL) -> None:
        self.url = url
        self._headers = url.headers()
        self._sync: httpx.Client | None = None

    def _client(self) -> httpx.Client:
        """A blocking client for work done before (or outside) the engine's event loop."""
        if self._sync is None:
            self._sync = httpx.Client(timeout=http.timeout(self.url.timeout_s), headers=self._headers,
                                      verify=True, follow_redirects=False)
        return self._sync

    def _endpoint(self, path: str) -> str:
        return f"{self.url.base_url}{path}"

    @asynccontextmanager
    async def attempt_worker(self) -> AsyncIterator[_AttemptWorker]:  # type: ignore[override]
        """One engine worker's connection to the server (see ``workbench.engine.attempts``)."""
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx.AsyncClient(timeout=http.timeout(self.url.timeout_s), headers=self._headers,
                                     limits=limits, follow_redirects=False) as client:
            yield _AttemptWorker(self, client)

    async def _begin(self, client: httpx.AsyncClient, seed: SeedResult) -> httpx.Cookies | None:
        """Open the attempt's server-side session; ``None`` where the protocol has none."""
        return None

    async def _verify(self, client: httpx.AsyncClient, cookies: httpx.Cookies | None, seed: SeedResult,
                      response: str, model: ModelResponse, history: list[dict[str, Any]] | None = None,
                      ) -> VerifyResult:
        raise NotImplementedError

    tool_specs: list[ToolSpec] = []  # noqa: RUF012  (replaced per instance by offer_tools)

    def row_tools(self, seed: SeedResult) -> list[ToolSpec]:
        """The tools a task's own row declares (``responses_create_params.tools``), if any: what Gym's
        agents offer the model for it. Only tools the server serves are kept."""
        return []

    def offer_tools(self) -> list[ToolSpec]:  # type: ignore[override]
        """Offer the server's own tools (``POST /{tool}``, from its /openapi.json) to the run's agent."""
        self.tool_specs = discover_tools(self._client(), self.url.base_url)
        if not self.tool_specs:
            raise RunFailed(f"{self.url.base_url}/openapi.json describes no tools (POST /NAME routes besides "
                            "the protocol's own)")
        return self.tool_specs

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "size": len(self), "scorer": self.scorer, "url": self.url.base_url,
                "protocol": self.url.protocol, "description": f"remote benchmark at {self.url.base_url}"}


@dataclass(slots=True)
class _Attempt:
    worker: _AttemptWorker
    seed: SeedResult
    cookies: httpx.Cookies | None
    seed_ms: float
    tools: HttpToolBox | None = None
    """The server's own tools, inside this attempt's session (when the run's solver calls tools)."""

    async def verify(self, response: str, model: ModelResponse) -> VerifyResult:
        env, client = self.worker.env, self.worker.client
        history = self.tools.history if self.tools is not None else None
        return await env._verify(client, self.cookies, self.seed, response, model, history)

    async def close(self) -> None:
        """Nothing to end: the server forgets a session on its own."""


@dataclass(slots=True)
class _AttemptWorker:
    env: RemoteEnvironment
    client: httpx.AsyncClient

    async def begin(self, seed: SeedResult, attempt: int) -> _Attempt:
        t0 = time.perf_counter()
        cookies = await self.env._begin(self.client, seed)
        specs = self.env.tool_specs and (self.env.row_tools(seed) or self.env.tool_specs)
        tools = HttpToolBox(self.client, self.env.url.base_url, specs, cookies) if specs else None
        return _Attempt(self, seed, cookies, (time.perf_counter() - t0) * 1000.0, tools)


class EvaluatorEnvironment(RemoteEnvironment):
    """A benchmark served by ``nel serve`` (the evaluator protocol)."""

    def __init__(self, url: GymURL) -> None:
        super().__init__(url)
        health = http.request_sync(self._client(), "GET", self._endpoint("/health"))
        size = health.get("dataset_size")
        if not isinstance(size, int) or size < 0:
            raise self._not_nel_serve(health)
        self.name = str(health.get("benchmark") or "remote")
        self._size = size
        self._health = health
        self._seeds: dict[int, SeedResult] = {}

    def _not_nel_serve(self, health: dict[str, Any]) -> Exception:
        """Why a server without ``dataset_size`` cannot be run as it is named, and what to add to the URL."""
        native = self.url.as_native()
        if _is_gym_resources_server(self._client(), self.url.base_url):
            return UsageError(f"{self.url.raw} is a NeMo Gym resources server: it scores rows but does not serve "
                              f"them (its /health has no dataset_size); give the rows to seed from: {native}")
        return RunFailed(f"{self._endpoint('/health')} gave no dataset_size: {orjson.dumps(health)[:200]!r}; "
                         f"gym:// speaks to nel serve, or, for a NeMo Gym resources server, {native}")

    def __len__(self) -> int:
        return self._size

    def _fetch(self, idx: int) -> SeedResult:
        url = self._endpoint("/seed_session")
        data = http.request_sync(self._client(), "POST", url, {"idx": idx})
        prompt, messages = data.get("prompt"), data.get("messages")
        if not isinstance(prompt, str):
            raise RunFailed(f"{url} gave problem {idx} without a text 'prompt'")
        if not isinstance(messages, list) or not messages:
            messages = [{"role": "user", "content": prompt}]
        raw_metadata = data.get("metadata")
        metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
        expected = str(data.get("expected_answer") or "")
        task_id = data.get("task_id") or metadata.get("task_id") or _hash(prompt, expected)
        return SeedResult(prompt=prompt, messages=tuple(messages), expected_answer=expected, task_id=str(task_id),
                          metadata=metadata)

    def seed(self, idx: int) -> SeedResult:
        """Problem ``idx``, fetched with the next few in parallel and cached: the engine seeds every task
        before its workers start, so later calls inside the event loop never wait on the network."""
        if not 0 <= idx < self._size:
            raise IndexError(f"{self.name}: problem index {idx} out of range 0..{self._size - 1}")
        if idx not in self._seeds:
            window = [i for i in range(idx, min(idx + _SEED_WINDOW, self._size)) if i not in self._seeds]
            with ThreadPoolExecutor(max_workers=8) as pool:
                for i, seed in zip(window, pool.map(self._fetch, window), strict=True):
                    self._seeds[i] = seed
        return self._seeds[idx]

    def _verdict(self, data: dict[str, Any]) -> VerifyResult:
        raw = data.get("scoring_details")
        details: dict[str, Any] = raw if isinstance(raw, dict) else {}
        extracted = data.get("extracted_answer")
        return VerifyResult(_reward(self._endpoint("/verify"), data), None if extracted is None else str(extracted),
                            {**details, "remote": self.url.base_url})

    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        body = {"response": response, "expected": expected, "metadata": metadata}
        return self._verdict(http.request_sync(self._client(), "POST", self._endpoint("/verify"), body))

    async def _verify(self, client: httpx.AsyncClient, cookies: httpx.Cookies | None, seed: SeedResult,
                      response: str, model: ModelResponse, history: list[dict[str, Any]] | None = None,
                      ) -> VerifyResult:
        body = {"response": response, "expected": seed.expected_answer, "metadata": seed.metadata}
        data, _ = await http.post(client, self._endpoint("/verify"), body)
        return self._verdict(data)

    @property
    def data_hash(self) -> str:
        """The server (URL), what it serves and, when it says, the hash of its data."""
        h = self._health
        return _hash(self.url.identity(), h.get("benchmark"), h.get("dataset_size"), h.get("data_hash"))


_GYM_ROUTES = ("/seed_session", "/verify", "/aggregate_metrics")
"""The routes every NeMo Gym resources server publishes (``nemo_gym.base_resources_server``)."""


def _is_gym_resources_server(client: httpx.Client, base_url: str) -> bool:
    """Whether ``base_url`` publishes Gym's resources-server routes in its OpenAPI document."""
    try:
        response = client.get(f"{base_url}/openapi.json")
        paths = orjson.loads(response.content).get("paths") if response.is_success else None
    except (httpx.HTTPError, orjson.JSONDecodeError, AttributeError):
        return False
    return isinstance(paths, dict) and all(route in paths for route in _GYM_ROUTES)


def _text(content: Any) -> str:
    """A Responses-API content value (a string or a list of ``input_text`` parts) as text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def row_messages(row: dict[str, Any]) -> list[Message]:
    """A Gym row's ``responses_create_params`` (``instructions`` and ``input``) as chat messages."""
    params = row.get("responses_create_params")
    if not isinstance(params, dict) or "input" not in params:
        raise ValueError("no responses_create_params.input")
    messages: list[Message] = []
    if params.get("instructions"):
        messages.append({"role": "system", "content": str(params["instructions"])})
    items = params["input"]
    if isinstance(items, str):
        return [*messages, {"role": "user", "content": items}]
    if not isinstance(items, list):
        raise ValueError("responses_create_params.input is neither text nor a list of messages")
    for item in items:
        if not isinstance(item, dict) or item.get("type", "message") != "message" or "role" not in item:
            raise ValueError(f"input item {str(item)[:80]!r} is not a message (only messages can be replayed)")
        role = "system" if item["role"] == "developer" else str(item["role"])
        messages.append({"role": role, "content": _text(item.get("content"))})
    if not messages:
        raise ValueError("responses_create_params.input is empty")
    return messages


class NativeGymEnvironment(RemoteEnvironment):
    """A NeMo Gym resources server, seeded from local Gym rows (the native protocol)."""

    scorer = "gym_native"

    def __init__(self, url: GymURL) -> None:
        super().__init__(url)
        assert url.data is not None  # the URL grammar requires it for protocol=native
        rows, self._data_sha256 = load_jsonl(url.data)
        self._seeds: list[SeedResult] = []
        self._rows: list[dict[str, Any]] = []
        for lineno, row in rows:
            try:
                messages = row_messages(row)
            except ValueError as exc:
                raise UsageError(f"{url.data}:{lineno}: not a NeMo Gym row: {exc}") from None
            prompt = "\n\n".join(str(m["content"]) for m in messages if m["role"] != "system")
            own_id = row.get("task_id")  # a row exported by nel serve keeps nel's id: the run pairs with native runs
            self._seeds.append(SeedResult(
                prompt=prompt, messages=tuple(messages), expected_answer=str(row.get("expected_answer") or ""),
                task_id=own_id if isinstance(own_id, str) and own_id else task_id_of(row),
                metadata={"idx": len(self._rows)},
            ))
            self._rows.append(row)
        if not self._rows:
            raise UsageError(f"{url.data}: no rows")
        self.name = url.data.stem
        self._check_reachable()

    def _check_reachable(self) -> None:
        """Fail before the run starts when nothing answers at the URL (any HTTP status will do)."""
        try:
            self._client().get(self._endpoint("/health"))
        except httpx.TransportError as exc:
            raise RunFailed(f"cannot reach the gym server at {self.url.base_url}: "
                            f"{(str(exc) or type(exc).__name__).splitlines()[0]}; "
                            "check the URL and that it is running") from None

    def __len__(self) -> int:
        return len(self._rows)

    def seed(self, idx: int) -> SeedResult:
        if not 0 <= idx < len(self._rows):
            raise IndexError(f"{self.name}: problem index {idx} out of range 0..{len(self._rows) - 1}")
        return self._seeds[idx]

    def row(self, idx: int) -> dict[str, Any]:
        return self._rows[idx]

    def row_tools(self, seed: SeedResult) -> list[ToolSpec]:
        served = {spec.name: spec for spec in self.tool_specs}
        declared = self._rows[seed.metadata["idx"]].get("responses_create_params", {}).get("tools") or []
        out = []
        for tool in declared if isinstance(declared, list) else ():
            if isinstance(tool, dict) and tool.get("type") == "function" and tool.get("name") in served:
                parameters = tool.get("parameters") if isinstance(tool.get("parameters"), dict) else None
                out.append(ToolSpec(str(tool["name"]), str(tool.get("description") or served[tool["name"]].description),
                                    parameters or served[tool["name"]].parameters))
        return out

    async def _begin(self, client: httpx.AsyncClient, seed: SeedResult) -> httpx.Cookies | None:
        _, cookies = await http.post(client, self._endpoint("/seed_session"), self._rows[seed.metadata["idx"]])
        return cookies

    def _verify_body(self, row: dict[str, Any], response: str, model: ModelResponse,
                     history: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        built = build_response(model, model_id=str(row.get("responses_create_params", {}).get("model") or "nel"),
                               text=response)
        if history:  # an agent's tool calls and their outputs come first, as Gym's own agents send them
            built["output"] = [*history, *built["output"]]
        return {**row, "responses_create_params": row["responses_create_params"], "response": built}

    def _verdict(self, row: dict[str, Any], data: dict[str, Any]) -> VerifyResult:
        details = {k: v for k, v in data.items()
                   if k not in _ECHO_DROPPED and k != "reward" and not (k in row and row[k] == v)}
        extracted = data.get("extracted_answer")
        # mask_sample: the server says its reward measures nothing (a judge or sandbox failed), as a judge_error
        masked = {"failure_category": "judge_error"} if data.get("mask_sample") is True else {}
        return VerifyResult(
            _reward(self._endpoint("/verify"), data), None if extracted is None else str(extracted),
            {"method": "gym_native", "remote": self.url.base_url, **details}, masked,
        )

    async def _verify(self, client: httpx.AsyncClient, cookies: httpx.Cookies | None, seed: SeedResult,
                      response: str, model: ModelResponse, history: list[dict[str, Any]] | None = None,
                      ) -> VerifyResult:
        row = self._rows[seed.metadata["idx"]]
        body = self._verify_body(row, response, model, history)
        data, _ = await http.post(client, self._endpoint("/verify"), body, cookies)
        return self._verdict(row, data)

    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        """Blocking form (``nel validate``, re-verification): its own session, then ``/verify``."""
        row = self._rows[int(metadata["idx"])]
        client = self._client()
        client.cookies.clear()
        http.request_sync(client, "POST", self._endpoint("/seed_session"), row)  # the session cookie stays in client
        data = http.request_sync(client, "POST", self._endpoint("/verify"),
                                 self._verify_body(row, response, ModelResponse(text=response)))
        client.cookies.clear()
        return self._verdict(row, data)

    @property
    def data_hash(self) -> str:
        """The server (URL) and the exact bytes of the rows file."""
        return _hash(self.url.identity(), self._data_sha256)


def remote_environment(name: str) -> RemoteEnvironment:
    """The environment a ``gym://`` benchmark name points at (see ``workbench.gym.url`` for the grammar)."""
    url = parse_gym_url(name)
    return NativeGymEnvironment(url) if url.protocol == "native" else EvaluatorEnvironment(url)


def check_gym_url(name: str) -> None:
    """Validate the URL's grammar (and its data file) without contacting the server."""
    parse_gym_url(name)


__all__ = ["EvaluatorEnvironment", "NativeGymEnvironment", "RemoteEnvironment", "check_gym_url",
           "remote_environment", "row_messages"]
