"""The simple solver: one prompt, one model call, one response."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from workbench.errors import RunFailed
from workbench.images import check_images, has_images
from workbench.model.client import ModelClient, ModelResponse, prepare, probe
from workbench.model.config import ModelConfig, redact_url
from workbench.solvers.base import AttemptContext, SolverOutput
from workbench.types import Message, SeedResult


class SimpleWorker:
    def __init__(self, client: ModelClient) -> None:
        self._client = client
        self._config = client.config

    async def solve(self, seed: SeedResult, attempt: int, context: AttemptContext | None = None) -> SolverOutput:
        config = self._config
        refused = unsendable_images(config, seed)
        if refused is not None:
            return refused
        request = prepare(config, seed.messages, seed.prompt, attempt)
        result = await self._client.generate(request, attempt)
        messages: list[Message] = []
        if config.protocol == "completions":
            text = f"{config.system_prompt}\n\n{seed.prompt}" if config.system_prompt else seed.prompt
            messages.append({"role": "user", "content": text})
        else:
            if config.system_prompt:
                messages.append({"role": "system", "content": config.system_prompt})
            messages.extend(seed.messages)
        return SolverOutput(
            response=result.text,
            messages=messages,
            model=result,
            request_hash=request.request_hash,
            request_seed=None if config.seed is None else config.seed + attempt,
        )


def unsendable_images(config: ModelConfig, seed: SeedResult) -> SolverOutput | None:
    """An ``image_error`` attempt, recorded without calling the model, when the prompt's images cannot be sent: one
    does not decode (bad base64, not an image, cut short), or the protocol carries no images. ``None`` otherwise
    (a prompt without images costs one look at each message's content)."""
    if not has_images(seed.messages):
        return None
    problem = ("the completions protocol cannot carry images; use --protocol chat_completions or responses"
               if config.protocol == "completions" else check_images(seed.messages))
    if problem is None:
        return None
    messages: list[Message] = [{"role": "system", "content": config.system_prompt}] if config.system_prompt else []
    return SolverOutput(response="", messages=[*messages, *seed.messages],
                        model=ModelResponse(failure="image_error", error=problem))


class SimpleSolver:
    """Send the seeded prompt to the model once and take its answer."""

    name = "simple"

    def __init__(self, model: ModelConfig) -> None:
        self.model = model

    def identity(self) -> dict[str, Any]:
        return {"solver": self.name, **self.model.identity()}

    @asynccontextmanager
    async def worker(self) -> AsyncIterator[SimpleWorker]:
        async with ModelClient(self.model) as client:
            yield SimpleWorker(client)

    async def preflight(self) -> None:
        """Check the host answers HTTP at all (any status will do), with bounded retries."""
        parts = urlsplit(self.model.endpoint)
        probe_url = urlunsplit((parts.scheme, parts.netloc, parts.path.rsplit("/", 1)[0] + "/models", "", ""))
        last: Exception | None = None
        for delay in (0.0, 0.5, 1.0, 2.0):
            await asyncio.sleep(delay)
            try:
                await probe(probe_url)
                return
            except httpx.TransportError as exc:
                last = exc
        reason = (str(last) or type(last).__name__).splitlines()[0] if last else "unknown error"
        stored = cached_answers(self.model)
        if stored:  # a re-run answered from the cache needs no model: say so, and let a miss fail on its own
            print(f"nel: warning: cannot reach the model at {redact_url(self.model.endpoint)} ({reason}); answering "
                  f"from the cache, which holds {stored:,} answers for it (a request it has no answer for fails as "
                  "a transport error)", file=sys.stderr, flush=True)
            return
        raise RunFailed(
            f"cannot reach the model at {redact_url(self.model.endpoint)}: {reason} (4 attempts); "
            "check the model URL and that the server is running"
        )


def prefetch_cache(model: ModelConfig) -> None:
    """Start reading the answers the model's ``cache`` interceptor holds for it, in the background (no-op without
    one): a cached re-run's first request then finds them read."""
    if not model.interceptors:
        return
    from workbench.model.interceptors.cache import CacheInterceptor

    cache = model.interceptors.find(CacheInterceptor)
    if cache is not None:
        cache.prefetch(model.model_id, model.answer_source, model.protocol)


def cached_answers(model: ModelConfig) -> int:
    """Answers the model's ``cache`` interceptor holds for it (0 without one, or with ``--no-cache``)."""
    if not model.interceptors:
        return 0
    from workbench.model.interceptors.cache import CacheInterceptor

    cache = model.interceptors.find(CacheInterceptor)
    if cache is None:
        return 0
    return int(cache.stored_answers(model.model_id, model.answer_source, model.protocol))
