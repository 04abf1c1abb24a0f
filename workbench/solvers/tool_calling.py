"""The tool-calling (ReAct) solver: the engine drives the agent loop itself.

Each turn calls the model with the conversation so far and the attempt's tools; every tool call in
the reply is run (in order, each bounded by ``tool_timeout``), its output cut to ``max_output_chars``
keeping head and tail, and sent back as a ``tool`` message. A reply with no tool call ends the
attempt. After ``max_turns`` model calls the attempt stops with ``max_turns_exhausted``.

Every model call and every tool call (name, arguments, output, exit code, error, latency) is kept in
``SolverOutput.turns``, which the engine stores with the step: the TUI and the diff show the whole
transcript, and a failure reads as "bash exited 1 on turn 3", not only as a wrong final answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from workbench.errors import UsageError
from workbench.model.client import ModelClient, ModelResponse, PreparedRequest, build_body
from workbench.model.config import ModelConfig
from workbench.model.failures import FailureCategory
from workbench.solvers.base import AttemptContext, SolverOutput
from workbench.solvers.simple import SimpleSolver, unsendable_images
from workbench.solvers.tools import ToolBox, ToolOutcome, truncate_middle
from workbench.types import Message, SeedResult

ResponseMode = Literal["final_message", "sandbox_artifact"]
MAX_TURNS_EXHAUSTED: FailureCategory = "max_turns_exhausted"


@dataclass(frozen=True, slots=True)
class ToolCallingSettings:
    """``solver: {type: tool_calling, ...}`` of a config. ``response_mode``: what is scored, the final
    message or what the agent left in its sandbox (then the final message may be empty)."""

    max_turns: int = 10
    tool_timeout: float = 60.0
    max_output_chars: int = 10_000
    response_mode: ResponseMode = "final_message"

    def validate(self) -> None:
        if self.max_turns < 1:
            raise UsageError(f"solver.max_turns: must be at least 1, got {self.max_turns}")
        if not self.tool_timeout > 0:
            raise UsageError(f"solver.tool_timeout: must be above 0 seconds, got {self.tool_timeout}")
        if self.max_output_chars < 200:
            raise UsageError(f"solver.max_output_chars: must be at least 200, got {self.max_output_chars}")
        if self.response_mode not in ("final_message", "sandbox_artifact"):
            raise UsageError(f"solver.response_mode: expected final_message or sandbox_artifact, "
                             f"got {self.response_mode!r}")


def prepare_with_tools(config: ModelConfig, messages: list[Message], attempt: int,
                       tools: list[dict[str, Any]]) -> PreparedRequest:
    body = build_body(config, tuple(messages), "", attempt)
    if tools:
        body["tools"] = tools
        body["tool_choice"] = "auto"
    data = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    return PreparedRequest(body=data, request_hash=hashlib.sha256(config.endpoint.encode() + b"\0" + data).hexdigest())


class ToolCallingWorker:
    def __init__(self, client: ModelClient, settings: ToolCallingSettings) -> None:
        self._client = client
        self._config = client.config
        self._settings = settings

    async def solve(self, seed: SeedResult, attempt: int, context: AttemptContext | None = None) -> SolverOutput:
        tools = getattr(context, "tools", None)
        if tools is None:
            raise UsageError("the tool_calling solver needs tools: this benchmark's attempts offer none "
                             "(set sandbox_tools: true with a sandbox, or a resource_service)")
        config, settings = self._config, self._settings
        refused = unsendable_images(config, seed)
        if refused is not None:
            return refused
        messages: list[Message] = []
        if config.system_prompt:
            messages.append({"role": "system", "content": config.system_prompt})
        messages.extend(seed.messages)
        specs = [s.openai() for s in tools.specs]
        turns: list[dict[str, Any]] = []
        total = ModelResponse()
        request: PreparedRequest | None = None
        result = ModelResponse()
        for turn in range(1, settings.max_turns + 1):
            request = prepare_with_tools(config, messages, attempt, specs)
            result = await self._client.generate(request, attempt)
            _add_usage(total, result)
            record: dict[str, Any] = {"turn": turn, "model": _model_record(result), "text": result.text,
                                      "tool_calls": []}
            turns.append(record)
            if result.failure is not None or not result.tool_calls:
                break
            if turn == settings.max_turns:  # the model still wants tools, and no turn is left to read them
                result.failure = MAX_TURNS_EXHAUSTED
                result.error = (f"{MAX_TURNS_EXHAUSTED}: the model was still calling tools after "
                                f"{settings.max_turns} turns")
                record["tool_calls"] = [{"id": c.get("id"), "name": _name(c), "arguments": _raw_arguments(c),
                                         "turn": turn, "skipped": "no turn left"} for c in result.tool_calls]
                break
            messages.append({"role": "assistant", "content": result.text or None, "tool_calls": result.tool_calls})
            for call in result.tool_calls:
                outcome, entry = await self._run_call(tools, call, turn)
                record["tool_calls"].append(entry)
                messages.append({"role": "tool", "tool_call_id": call.get("id") or "", "content": outcome})
        final = _final_response(result, total)
        return SolverOutput(
            response=final.text,
            messages=messages,
            model=final,
            request_hash=request.request_hash if request else None,
            request_seed=None if config.seed is None else config.seed + attempt,
            turns=turns,
        )

    async def _run_call(self, tools: ToolBox, call: dict[str, Any], turn: int) -> tuple[str, dict[str, Any]]:
        name, raw = _name(call), _raw_arguments(call)
        started = time.perf_counter()
        try:
            arguments = orjson.loads(raw) if raw.strip() else {}
            if not isinstance(arguments, dict):
                raise ValueError("the arguments are not a JSON object")
        except (orjson.JSONDecodeError, ValueError) as exc:
            outcome = ToolOutcome(f"error: the arguments of {name} are not a JSON object: {exc}",
                                  error="bad_arguments")
        else:
            timeout = self._settings.tool_timeout
            try:
                async with asyncio.timeout(timeout + 5.0):  # not wait_for: it can swallow a Ctrl-C on Python 3.11
                    outcome = await tools.call(name, arguments, timeout=timeout)
            except TimeoutError:
                outcome = ToolOutcome(f"error: {name} did not finish within {timeout:g} s", error="timeout")
        text, truncated = truncate_middle(outcome.output, self._settings.max_output_chars)
        entry = {"id": call.get("id"), "name": name, "arguments": raw, "output": text, "truncated": truncated,
                 "output_chars": len(outcome.output), "exit_code": outcome.exit_code, "error": outcome.error,
                 "latency_ms": round((time.perf_counter() - started) * 1000.0, 3), "turn": turn}
        return text, entry


def tool_failures(turns: list[dict[str, Any]] | None) -> list[str]:
    """Each failed tool call in words, in order: "bash exited 1 on turn 3", "file_write timed out on turn 2"."""
    out: list[str] = []
    for turn in turns or ():
        for call in turn.get("tool_calls") or ():
            name, n, error, code = call.get("name"), call.get("turn", turn.get("turn")), call.get("error"), \
                call.get("exit_code")
            if error == "timeout":
                out.append(f"{name} timed out on turn {n}")
            elif error is not None:
                out.append(f"{name} failed on turn {n}: {error}")
            elif code not in (None, 0):
                out.append(f"{name} exited {code} on turn {n}")
    return out


def _name(call: dict[str, Any]) -> str:
    function = call.get("function") or {}
    return str(function.get("name") or call.get("name") or "")


def _raw_arguments(call: dict[str, Any]) -> str:
    function = call.get("function") or {}
    raw = function.get("arguments", call.get("arguments", ""))
    return raw if isinstance(raw, str) else orjson.dumps(raw).decode()


def _model_record(result: ModelResponse) -> dict[str, Any]:
    return {"latency_ms": round(result.latency_ms, 3), "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens, "finish_reason": result.finish_reason,
            "n_retries": result.n_retries, "http_status": result.http_status, "failure": result.failure,
            "error": result.error}


def _add_usage(total: ModelResponse, result: ModelResponse) -> None:
    for name in ("prompt_tokens", "completion_tokens", "total_tokens", "reasoning_tokens"):
        value = getattr(result, name)
        if value is not None:
            setattr(total, name, (getattr(total, name) or 0) + value)
    total.latency_ms += result.latency_ms
    total.n_retries += result.n_retries


def _final_response(last: ModelResponse, total: ModelResponse) -> ModelResponse:
    """The last reply, with tokens, latency and retries summed over every turn."""
    for name in ("prompt_tokens", "completion_tokens", "total_tokens", "reasoning_tokens", "latency_ms",
                 "n_retries"):
        setattr(last, name, getattr(total, name))
    return last


class ToolCallingSolver(SimpleSolver):
    """Call the model with tools until it answers without one (or runs out of turns)."""

    name = "tool_calling"

    def __init__(self, model: ModelConfig, settings: ToolCallingSettings | None = None) -> None:
        super().__init__(model)
        self.settings = settings or ToolCallingSettings()
        self.settings.validate()
        if model.protocol != "chat_completions":
            raise UsageError(f"the tool_calling solver speaks the chat_completions protocol; "
                             f"this service uses {model.protocol}")

    def identity(self) -> dict[str, Any]:
        s = self.settings
        return {**super().identity(), "solver": self.name, "max_turns": s.max_turns,
                "max_output_chars": s.max_output_chars, "response_mode": s.response_mode}

    @asynccontextmanager
    async def worker(self) -> AsyncIterator[ToolCallingWorker]:  # type: ignore[override]
        async with ModelClient(self.model) as client:
            yield ToolCallingWorker(client, self.settings)
