"""One inspect_ai sample (one epoch of it) as a ``steps`` row: scores, transcript, tools, usage, failures.

Score values map as inspect's own ``value_to_float`` does (``C`` 1, ``P`` 0.5, ``I``/``N`` 0, numbers, booleans,
``yes``/``no``), so the mean of the primary score over steps is inspect's accuracy; a dict-valued score (several
metrics from one scorer) becomes ``scorer/key`` entries. The first scorer is the primary: ``reward`` and
``passed`` (``reward >= 1``, the engine's rule).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

from workbench.gym.importer import content_text, scrub
from workbench.model.failures import classify_answer, classify_error_text

LIMIT_CATEGORIES = {
    "context": "context_window", "time": "timeout", "working": "timeout", "message": "max_turns_exhausted",
    "turn": "max_turns_exhausted", "token": "max_turns_exhausted", "cost": "max_turns_exhausted",
}
"""An inspect sample limit that was hit, as the store's failure category (other limits: ``model_error``)."""
_LETTERS = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}
_ATTACHMENT = "attachment://"


def score_value(value: Any) -> float | None:
    """A score value as a number, as inspect's ``value_to_float`` reads it; ``None`` for lists and the unreadable."""
    if isinstance(value, str):
        if value in _LETTERS:
            return _LETTERS[value]
        low = value.strip().lower()
        if low in ("yes", "true"):
            return 1.0
        if low in ("no", "false"):
            return 0.0
        try:
            number = float(low)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    if isinstance(value, bool | int | float):
        return float(value)
    return None


def sample_scores(sample: Mapping[str, Any]) -> list[tuple[str, float | None, dict[str, Any]]]:
    """``(name, value, score)`` of every score of ``sample``, in the order inspect wrote them; a dict-valued
    score gives one ``scorer/key`` per key."""
    out: list[tuple[str, float | None, dict[str, Any]]] = []
    scores = sample.get("scores")
    for name, score in (scores.items() if isinstance(scores, dict) else ()):
        if not isinstance(score, dict):
            continue
        value = score.get("value")
        if isinstance(value, dict):
            out += [(f"{name}/{k}", score_value(v), score) for k, v in value.items()]
        else:
            out.append((str(name), score_value(value), score))
    return out


def resolve(value: Any, attachments: Mapping[str, Any]) -> Any:
    """``value`` with inspect's ``attachment://HASH`` references replaced by the text they stand for."""
    if isinstance(value, str):
        if value.startswith(_ATTACHMENT):
            return attachments.get(value[len(_ATTACHMENT):], value)
        return value
    if isinstance(value, list):
        return [resolve(v, attachments) for v in value]
    if isinstance(value, dict):
        return {k: resolve(v, attachments) for k, v in value.items()}
    return value


def _reasoning(content: Any) -> str | None:
    if not isinstance(content, list):
        return None
    parts = [p.get("reasoning") for p in content if isinstance(p, dict) and p.get("type") == "reasoning"]
    return "\n\n".join(p for p in parts if isinstance(p, str)) or None


def input_text(sample: Mapping[str, Any]) -> str | None:
    """What the sample asks: its input string, or the first user message of a list input."""
    value = resolve(sample.get("input"), _obj(sample.get("attachments")))
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, list):
        for message in value:
            if isinstance(message, dict) and message.get("role") == "user":
                text = content_text(message.get("content"))
                return text if text.strip() else None
    return None


def target_text(sample: Mapping[str, Any]) -> str | None:
    target = sample.get("target")
    if isinstance(target, str):
        return target
    return None if not target else orjson.dumps(target).decode()


def _tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    args = call.get("arguments")
    return {"id": call.get("id"), "type": "function",
            "function": {"name": call.get("function"), "arguments": args if isinstance(args, str) else _dumps(args)}}


def chat_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """An inspect ``ChatMessage`` as an OpenAI chat message (what ``steps.messages`` holds)."""
    role = message.get("role", "user")
    out: dict[str, Any] = {"role": role, "content": content_text(message.get("content"))}
    calls = message.get("tool_calls")
    if role == "assistant" and isinstance(calls, list) and calls:
        out["tool_calls"] = [_tool_call(c) for c in calls if isinstance(c, dict)]
    if role == "tool":
        out["tool_call_id"] = message.get("tool_call_id")
        err = message.get("error")
        if isinstance(err, dict) and err.get("message"):
            out["content"] = out["content"] or f"error: {err['message']}"
    return out


def _tool_events(events: Any) -> dict[str, dict[str, Any]]:
    return {e["id"]: e for e in events or [] if isinstance(e, dict) and e.get("event") == "tool" and e.get("id")}


def turns(messages: list[dict[str, Any]], events: Any) -> list[dict[str, Any]] | None:
    """The agent's tool-calling turns in the engine's format (``steps.turns``); ``None`` without tool calls."""
    tool_events = _tool_events(events)
    results = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        calls = []
        for call in message.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            event = tool_events.get(str(call.get("id")), {})
            result = results.get(call.get("id"), {})
            error = _obj(event.get("error") or result.get("error")).get("message")
            seconds = event.get("working_time")
            function = _obj(call.get("function"))
            calls.append({"id": call.get("id"), "name": function.get("name"), "arguments": function.get("arguments"),
                          "output": content_text(result.get("content")) if result else _text(event.get("result")),
                          "truncated": bool(event.get("truncated")), "exit_code": None, "error": error,
                          "latency_ms": seconds * 1000.0 if isinstance(seconds, int | float) else None})
        out.append({"turn": len(out), "model": {}, "text": content_text(message.get("content")), "tool_calls": calls})
    return out if any(t["tool_calls"] for t in out) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) or value is None else _dumps(value)


def _usage(sample: Mapping[str, Any]) -> dict[str, int | None]:
    totals: dict[str, int | None] = {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None,
                                     "reasoning_tokens": None}
    names = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens", "total_tokens": "total_tokens",
             "reasoning_tokens": "reasoning_tokens"}
    for usage in _obj(sample.get("model_usage")).values():
        for theirs, ours in names.items():
            value = _obj(usage).get(theirs)
            if isinstance(value, int) and not isinstance(value, bool):
                totals[ours] = (totals[ours] or 0) + value
    return totals


def error_category(message: str) -> str:
    """A sample error's failure category, from its message (a scorer's error is the scorer's)."""
    return classify_error_text(message, also=(("scor", "scorer_error"),))


def _ms(seconds: Any) -> float | None:
    return float(seconds) * 1000.0 if isinstance(seconds, int | float) and not isinstance(seconds, bool) else None


def step_row(sample: Mapping[str, Any], *, run_id: str, task: Mapping[str, Any], task_idx: int, primary: str,
             started: float) -> dict[str, Any]:
    """One sample × epoch as a ``steps`` row; ``primary`` is the name the first score is recorded under."""
    attachments = _obj(sample.get("attachments"))
    history = [chat_message(resolve(m, attachments)) for m in sample.get("messages") or [] if isinstance(m, dict)]
    last = max((n for n, m in enumerate(history) if m["role"] == "assistant"), default=None)
    output = _obj(sample.get("output"))
    choice = _obj((output.get("choices") or [{}])[0])
    if last is None:
        response: str | None = content_text(resolve(output.get("completion"), attachments)) or None
        sent, calls, reasoning = history, None, None
    else:
        raw_last = resolve((sample.get("messages") or [])[last], attachments)
        response, sent = history[last]["content"], history[:last]
        calls, reasoning = history[last].get("tool_calls"), _reasoning(_obj(raw_last).get("content"))
    scores = sample_scores(sample)
    entries: dict[str, dict[str, Any]] = {}
    for n, (name, value, score) in enumerate(scores):
        key = primary if n == 0 else name
        reward = 0.0 if value is None else value
        entries[key] = {"reward": reward, "passed": reward >= 1.0, "extracted_answer": _text(score.get("answer")),
                        "method": "inspect_ai", "details": {"scorer": name, "value": score.get("value")}}
    first = scores[0] if scores else None
    reward = 0.0 if first is None or first[1] is None else first[1]
    extracted = _text(first[2].get("answer")) if first else None
    error_obj = _obj(sample.get("error"))
    limit = _obj(sample.get("limit"))
    error: str | None = None
    category: str | None
    if limit.get("type"):
        category = LIMIT_CATEGORIES.get(str(limit["type"]), "model_error")
        error = f"{limit['type']} limit of {limit.get('limit')} reached"
    elif error_obj.get("message"):
        error = str(error_obj["message"])
        category = error_category(error)
    elif not scores:
        category, error = "scorer_error", "the sample has no score"
    else:
        category = classify_answer(response or "", reward, extracted)
    details = {"method": "inspect_ai", "scorer": first[0] if first else None,
               "value": first[2].get("value") if first else None,
               "explanation": first[2].get("explanation") if first else None,
               "metadata": scrub(first[2].get("metadata")) if first else None}
    epoch = sample.get("epoch")
    return {
        "run_id": run_id, "task_idx": task_idx, "repeat": epoch - 1 if isinstance(epoch, int) else 0,
        "task_id": task["task_id"], "shard_idx": 0, "started_at": started, "prompt": task["prompt"],
        "messages": _dumps(sent), "response": response, "reasoning": reasoning,
        "finish_reason": choice.get("stop_reason"), "tool_calls": _dumps(calls),
        "reward": reward, "passed": reward >= 1.0, "expected_answer": task["expected_answer"],
        "extracted_answer": extracted, "scoring_method": "inspect_ai", "scoring_details": _dumps(details),
        "failure_category": category, "error": error, "http_status": None,
        "n_retries": len(sample.get("error_retries") or []), **_usage(sample),
        "latency_ms": _ms(sample.get("total_time")), "seed_ms": None, "model_ms": _ms(sample.get("working_time")),
        "verify_ms": None, "request_hash": None, "request_seed": None, "response_id": None,
        "metadata": _dumps(step_metadata(sample)), "scores": _dumps(entries) if entries else None,
        "turns": _dumps(turns(history, sample.get("events"))),
    }


def step_metadata(sample: Mapping[str, Any]) -> dict[str, Any]:
    """inspect's ids of the sample and its metadata (credentials scrubbed)."""
    return {"inspect_id": sample.get("id"), "epoch": sample.get("epoch"), "uuid": sample.get("uuid"),
            **scrub(_obj(sample.get("metadata")))}


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dumps(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value, default=str).decode()
