"""``cache``: a request-content cache in DuckDB, shared across runs.

A request whose key (``cache_key``: model, endpoint, protocol, exact body, attempt) has a stored answer is answered
from it, the model never called: the same text, tool calls, reasoning, token usage, finish reason and response id,
marked ``cache: hit`` on the step (its ``model_ms`` is the lookup, ~0). A request it has no answer for is sent, and
a successful answer is stored. Errors are never stored (they would replay a 503 forever).

A cached run's identity is the run's own: the requests are the same, so are the answers; ``--resume`` and
comparisons treat it as the run it repeats. ``--no-cache`` (or ``NEL_NO_CACHE=1``) turns it off for a run: nothing
is read or written.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from workbench.model.client import ModelResponse
from workbench.model.interceptors.base import InterceptorContext, ModelCall
from workbench.model.interceptors.cache_key import cache_key, scope_of
from workbench.model.interceptors.cache_store import CacheFile, cache_file
from workbench.model.interceptors.config import only_keys, text
from workbench.secrets import redact_bytes, redact_value

DEFAULT_FILE = "nel-cache.duckdb"
NO_CACHE_ENV = "NEL_NO_CACHE"
_REPLAYED = ("text", "finish_reason", "prompt_tokens", "completion_tokens", "total_tokens", "reasoning_tokens",
             "response_id", "tool_calls", "reasoning", "http_status")


def cache_disabled() -> bool:
    """``--no-cache``: the flag sets ``NEL_NO_CACHE=1``, so shard workers started by the run see it too."""
    return os.environ.get(NO_CACHE_ENV, "").strip().lower() not in ("", "0", "false", "no")


@dataclass(frozen=True, slots=True)
class CacheCounts:
    """What the cache did for one run: calls answered from it, calls sent on, and where it is."""

    hits: int
    misses: int
    path: str
    enabled: bool

    def as_json(self) -> dict[str, Any]:
        return {"hits": self.hits, "misses": self.misses, "path": self.path, "enabled": self.enabled}


class CacheInterceptor:
    """See the module docstring; config ``path`` (default ``STORE_DIR/nel-cache.duckdb``)."""

    name = "cache"
    affects_answers: ClassVar[bool] = False

    def __init__(self, config: dict[str, Any], context: InterceptorContext) -> None:
        only_keys(config, ("path",))
        given = text(config, "path")
        self.path = context.path(given) if given else context.store_dir / DEFAULT_FILE
        self.enabled = not cache_disabled()
        self.hits = 0
        self.misses = 0
        self._file: CacheFile | None = None
        self._scopes: dict[tuple[str, str, str], str] = {}

    def stored_answers(self, model_id: str, endpoint: str, protocol: str) -> int:
        """Answers the cache holds for this model, answer source (``ModelConfig.answer_source``) and protocol: a
        run whose model cannot be reached can still be answered from them (0 when the cache is off)."""
        if not self.enabled:
            return 0
        file, scope = self._scope(model_id, endpoint, protocol)
        return file.load(scope)  # the count of the one read, made here or at the first request

    def prefetch(self, model_id: str, endpoint: str, protocol: str) -> None:
        """Start reading this scope's answers in a thread: the DuckDB read overlaps the run's set-up (the store's
        own checks), and the first request waits for it only if it is still going. A cache that cannot be read
        says so at that first request, as it would have."""
        if not self.enabled:
            return
        file = self._file = self._file or cache_file(self.path)
        scope = scope_of(model_id, endpoint, protocol)
        threading.Thread(target=_load_quietly, args=(file, scope), name="nel-cache-read", daemon=True).start()

    def counts(self) -> CacheCounts:
        return CacheCounts(self.hits, self.misses, str(self.path), self.enabled)

    def _scope(self, model_id: str, endpoint: str, protocol: str) -> tuple[CacheFile, str]:
        file = self._file
        if file is None:
            file = self._file = cache_file(self.path)
        triple = (model_id, endpoint, protocol)
        scope = self._scopes.get(triple)
        if scope is None:
            scope = self._scopes[triple] = scope_of(*triple)
            file.load(scope)  # once per process and scope: one query, then every lookup is a dictionary read
        return file, scope

    async def before(self, call: ModelCall) -> ModelResponse | None:
        if not self.enabled:
            return None
        started = time.perf_counter()
        file, scope = self._scope(call.model_id, call.source or call.endpoint, call.protocol)
        key = cache_key(scope, call.body, call.attempt)
        state = call.state(self)
        state["key"] = key
        stored = file.get(key)
        if stored is None:
            self.misses += 1
            return None
        self.hits += 1
        fields = orjson.loads(stored)
        return ModelResponse(**{k: fields.get(k) for k in _REPLAYED}, cache="hit",
                             latency_ms=(time.perf_counter() - started) * 1000.0)

    async def after(self, call: ModelCall, response: ModelResponse) -> None:
        if not self.enabled:
            return
        response.cache = "miss"
        if response.failure is not None or response.http_status != 200:
            return
        file, scope = self._scope(call.model_id, call.source or call.endpoint, call.protocol)
        key = call.state(self).pop("key", None) or cache_key(scope, call.body, call.attempt)
        entry = _scrubbed({k: getattr(response, k) for k in _REPLAYED})
        if file.put(scope, key, entry):
            await asyncio.to_thread(file.write, file.take())

    def close(self) -> None:
        if self._file is not None:
            self._file.flush()


def _load_quietly(file: CacheFile, scope: str) -> None:
    with contextlib.suppress(Exception):  # read again, and raised, on the event loop's first request
        file.load(scope)


def _scrubbed(fields: dict[str, Any]) -> str:
    """The entry as stored: a registered secret the model echoed never reaches the cache file (as in the store)."""
    data = orjson.dumps(fields)
    cleaned = redact_bytes(data)
    if cleaned is not data and cleaned != data:
        try:
            orjson.loads(cleaned)
        except orjson.JSONDecodeError:  # a secret holding a quote: redact field by field instead
            cleaned = orjson.dumps(redact_value(fields))
    return cleaned.decode()
