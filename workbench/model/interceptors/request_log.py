"""``request_log``: every request (and, unless ``include_responses: false``, its response) as one JSON line.

Secrets never reach the file: the body goes through ``workbench.secrets.redact_value`` (every registered key and
every credential-shaped value or key, such as ``api_key`` or ``Authorization``, replaced by ``<redacted>``), the
endpoint through ``redact_url``. Lines are appended with one ``write`` each on an ``O_APPEND`` descriptor, so
shard workers may share the file without interleaving. Placed after ``cache`` it logs only the calls that reached
the model; before it, every call (a replayed one with ``"cache": "hit"``).
"""

from __future__ import annotations

import os
import time
from typing import Any, ClassVar

import orjson

from workbench.model.client import ModelResponse
from workbench.model.interceptors.base import InterceptorContext, ModelCall
from workbench.model.interceptors.config import flag, only_keys, text
from workbench.secrets import redact_value


class RequestLog:
    """Appends each exchange to ``path`` (relative to the config file's directory)."""

    name = "request_log"
    affects_answers: ClassVar[bool] = False

    def __init__(self, config: dict[str, Any], context: InterceptorContext) -> None:
        only_keys(config, ("path", "include_responses"), required=("path",))
        self.path = context.path(text(config, "path") or "")
        self.include_responses = flag(config, "include_responses", True)
        self._fd: int | None = None

    def _write(self, record: dict[str, Any]) -> None:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(self._fd, orjson.dumps(redact_value(record)) + b"\n")

    async def before(self, call: ModelCall) -> ModelResponse | None:
        return None

    async def after(self, call: ModelCall, response: ModelResponse) -> None:
        record: dict[str, Any] = {
            "time": time.time(), "endpoint": call.endpoint, "protocol": call.protocol, "model": call.model_id,
            "task_id": call.scope.task_id, "repeat": call.scope.repeat, "attempt": call.attempt,
            "request": call.json(),
        }
        if self.include_responses:
            record["response"] = {
                "text": response.text, "tool_calls": response.tool_calls, "reasoning": response.reasoning,
                "finish_reason": response.finish_reason, "prompt_tokens": response.prompt_tokens,
                "completion_tokens": response.completion_tokens, "http_status": response.http_status,
                "failure": response.failure, "error": response.error,
                "latency_ms": round(response.latency_ms, 3), "cache": response.cache,
            }
        self._write(record)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
