"""``ModelClient``: NeMo Evaluator's async chat client, on the engine's own model client.

``await client.chat("What is 2+2?", system="Answer briefly.")`` returns a ``ChatResponse`` with the seed's
``ModelResponse`` fields. Each request goes through ``workbench.model.client.ModelClient`` (the connection,
retries, failure classification and secret scrubbing every run uses); this class adds what a notebook caller
needs: a pool of those connections bounded by ``max_concurrent``, and the raw JSON of each answer.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from workbench.errors import RunFailed
from workbench.model import client as engine_client
from workbench.model.config import ModelConfig, Protocol
from workbench.types import Message

API_KEY_VARIABLES = ("NEMO_API_KEY", "OPENAI_API_KEY")
"""Where the key comes from when none is given (the CLI reads the same two)."""


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """One answer, with the fields of NeMo Evaluator's ``ModelResponse``."""

    content: str
    model: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    reasoning_tokens: int | None
    latency_ms: float
    raw_response: dict[str, Any] = field(default_factory=dict, repr=False)
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


class _Connection(engine_client.ModelClient):
    """The engine's client, keeping the body of the last answer (``ChatResponse.raw_response``)."""

    last_body: bytes = b""

    async def _post(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        response = await super()._post(body, headers)
        self.last_body = response.content
        return response


class ModelClient:
    """An OpenAI-compatible endpoint, called at most ``max_concurrent`` requests at a time.

    ``base_url`` is the API's base (``http://host:port/v1``) or a full endpoint URL; ``api_key`` defaults to
    ``$NEMO_API_KEY`` (else ``$OPENAI_API_KEY``) and is never shown, stored or logged. Use as
    ``async with ModelClient(...) as client`` or call ``await client.close()``.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        stop: list[str] | None = None,
        frequency_penalty: float | None = None,
        presence_penalty: float | None = None,
        timeout: float = 120.0,
        max_concurrent: int = 8,
        max_retries: int = 5,
        protocol: Protocol = "chat_completions",
    ) -> None:
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, got {max_concurrent}")
        key = api_key if api_key is not None else next(
            (os.environ[v] for v in API_KEY_VARIABLES if os.environ.get(v)), None)
        self._config = ModelConfig(
            url=base_url, model_id=model, protocol=protocol, api_key=key, temperature=temperature, top_p=top_p,
            max_tokens=max_tokens, seed=seed, stop=tuple(stop) if stop else None,
            frequency_penalty=frequency_penalty, presence_penalty=presence_penalty, request_timeout=timeout,
            max_retries=max_retries)
        self._max_concurrent = max_concurrent
        self._idle: list[_Connection] = []
        self._open: list[_Connection] = []
        self._slots = asyncio.Semaphore(max_concurrent)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._attempts = itertools.count()

    @property
    def config(self) -> ModelConfig:
        """The endpoint and sampling settings (what ``ChatSolver`` hands the engine)."""
        return self._config

    @property
    def max_concurrent(self) -> int:
        return self._max_concurrent

    @property
    def model(self) -> str:
        return self._config.model_id

    def __repr__(self) -> str:  # the key stays out of notebooks' output
        return f"ModelClient(base_url={self._config.url!r}, model={self.model!r}, max_concurrent={self.max_concurrent})"

    async def chat(self, prompt: str | None = None, *, system: str | None = None,
                   messages: list[Message] | tuple[Message, ...] | None = None) -> ChatResponse:
        """One chat request: ``prompt`` as the user's message after ``system``, or ``messages`` as given.

        Raises ``RunFailed`` with the endpoint's reason when no answer came (after the client's retries), or when
        the endpoint refuses the request outright (a bad key, no such endpoint)."""
        if (prompt is None) == (messages is None):
            raise ValueError("chat() takes a prompt or messages=, exactly one of them")
        turns: tuple[Message, ...] = tuple(messages) if messages is not None else ({"role": "user", "content": prompt},)
        if system is not None:
            turns = ({"role": "system", "content": system}, *turns)
        attempt = next(self._attempts)  # each call a distinct sample, as each repeat of a run is
        request = engine_client.prepare(self._config, turns, prompt or "", attempt)
        self._bind()
        async with self._slots:
            connection = self._idle.pop() if self._idle else self._connect()
            try:
                out = await connection.generate(request, attempt)
            except engine_client.FatalModelError as exc:
                raise RunFailed(str(exc)) from None
            finally:
                self._idle.append(connection)
            raw = connection.last_body
        if out.failure is not None and not out.text:
            raise RunFailed(f"the model call failed ({out.failure}): {out.error}")
        data = _json(raw)
        return ChatResponse(
            content=out.text, model=str(data.get("model") or self._config.model_id), finish_reason=out.finish_reason,
            prompt_tokens=out.prompt_tokens, completion_tokens=out.completion_tokens, total_tokens=out.total_tokens,
            reasoning_tokens=out.reasoning_tokens, latency_ms=out.latency_ms, raw_response=data,
            reasoning=out.reasoning, tool_calls=out.tool_calls)

    def _bind(self) -> None:
        """Connections and the semaphore belong to one event loop: a new loop (another ``asyncio.run``) gets its own."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self._idle, self._open = loop, [], []
            self._slots = asyncio.Semaphore(self._max_concurrent)

    def _connect(self) -> _Connection:
        connection = _Connection(self._config)
        self._open.append(connection)
        return connection

    async def close(self) -> None:
        """Close every connection (the client can be used again afterwards: it reconnects)."""
        opened, self._open, self._idle = self._open, [], []
        for connection in opened:
            await connection.aclose()

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _json(body: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}
