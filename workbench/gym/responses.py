"""A model's answer as an OpenAI Responses-API response object, the shape NeMo Gym's ``/verify`` expects.

Gym resources servers validate ``response`` with their own pydantic model (``NeMoGymResponse``), so
whatever protocol the engine spoke to the model (chat completions, completions, responses), the answer
is re-expressed here as a complete, well-formed response: reasoning first (if any), then the assistant
message, then one ``function_call`` item per tool call, with ids, status and usage.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from workbench.model.client import ModelResponse


def _id(prefix: str, *parts: object) -> str:
    """A deterministic id: the same answer always yields the same response, so requests are reproducible."""
    digest = hashlib.sha256(orjson.dumps([str(p) for p in parts])).hexdigest()[:24]
    return f"{prefix}_{digest}"


def _function_call(call: Mapping[str, Any], index: int, response_id: str) -> dict[str, Any]:
    """A tool call in either wire form (chat ``{"function": {...}}`` or a Responses ``function_call`` item)."""
    function = call.get("function")
    if isinstance(function, Mapping):
        name, arguments = function.get("name"), function.get("arguments")
    else:
        name, arguments = call.get("name"), call.get("arguments")
    if not isinstance(arguments, str):
        arguments = orjson.dumps(arguments if arguments is not None else {}).decode()
    call_id = call.get("call_id") or call.get("id") or _id("call", response_id, index)
    own_id = call.get("id") if call.get("type") == "function_call" else None
    item_id = own_id or _id("fc", response_id, index)
    return {
        "type": "function_call",
        "id": str(item_id),
        "call_id": str(call_id),
        "name": str(name or ""),
        "arguments": arguments,
        "status": "completed",
    }


def _usage(model: ModelResponse) -> dict[str, Any] | None:
    if model.prompt_tokens is None and model.completion_tokens is None:
        return None
    input_tokens = model.prompt_tokens or 0
    output_tokens = model.completion_tokens or 0
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": model.reasoning_tokens or 0},
        "total_tokens": model.total_tokens if model.total_tokens is not None else input_tokens + output_tokens,
    }


def build_response(
    model: ModelResponse,
    *,
    model_id: str,
    text: str | None = None,
    tool_calls: Sequence[Mapping[str, Any]] | None = None,
    created_at: float | None = None,
) -> dict[str, Any]:
    """The Responses-API response for ``model``'s answer (``text``/``tool_calls`` override its own).

    A reply cut short by the token limit (``finish_reason == "length"``) is ``incomplete`` with reason
    ``max_output_tokens``, as the Responses API reports it; everything else is ``completed``.
    """
    answer = model.text if text is None else text
    calls = list(model.tool_calls or ()) if tool_calls is None else list(tool_calls)
    response_id = model.response_id if (model.response_id or "").startswith("resp_") else None
    response_id = response_id or _id("resp", model.response_id, answer, calls)
    output: list[dict[str, Any]] = []
    if model.reasoning:
        output.append({
            "type": "reasoning",
            "id": _id("rs", response_id),
            "summary": [{"type": "summary_text", "text": model.reasoning}],
            "status": "completed",
        })
    if answer or not calls:
        output.append({
            "type": "message",
            "id": _id("msg", response_id),
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": answer, "annotations": []}],
        })
    output.extend(_function_call(call, i, response_id) for i, call in enumerate(calls))
    truncated = model.finish_reason == "length"
    return {
        "id": response_id,
        "object": "response",
        "created_at": float(int(created_at if created_at is not None else time.time())),
        "model": model_id,
        "status": "incomplete" if truncated else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if truncated else None,
        "error": None,
        "instructions": None,
        "metadata": {},
        "output": output,
        "parallel_tool_calls": True,
        "temperature": None,
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
        "usage": _usage(model),
    }
