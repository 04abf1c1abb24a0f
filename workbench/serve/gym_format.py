"""Read a model's answer out of whatever shape a client posts to ``/verify``.

A benchmark's ``verify`` scores plain text. Clients send one of three things:

- a string (the evaluator format: ``{response, expected, metadata}``);
- a Responses-API ``response`` object, as NeMo Gym's agents do: its ``output`` holds
  ``message`` items (whose ``output_text`` parts are the answer), ``function_call`` and
  ``function_call_output`` items (a tool-using trajectory) and ``reasoning`` items;
- a chat-completions object (``choices[0].message``, with ``content``, ``tool_calls`` and
  ``reasoning_content``).

``parse_response`` turns each into a ``ParsedResponse``: the text to score, plus the tool calls
and reasoning kept for ``scoring_details``. Anything it cannot read raises ``FormatError``
naming the exact field (``response.output[2].type``), which the app answers with a 422, so a
client bug is never scored as a wrong answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

Source = Literal["text", "responses", "chat_completions"]

MESSAGE_PART_TYPES = ("output_text", "text", "input_text", "refusal")
OUTPUT_ITEM_TYPES = ("message", "function_call", "function_call_output", "reasoning")


class FormatError(ValueError):
    """A request field that cannot be read; ``field`` is its path in the JSON body."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class ParsedResponse:
    """The text a benchmark scores, and what else the response held."""

    text: str
    source: Source
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    reasoning: str = ""
    refusal: str = ""

    def details(self) -> dict[str, Any]:
        """What goes into ``scoring_details`` beside the benchmark's own: only the parts that exist."""
        out: dict[str, Any] = {"response_format": self.source}
        if self.tool_calls:
            out["tool_calls"] = self.tool_calls
        if self.reasoning:
            out["reasoning"] = self.reasoning
        if self.refusal:
            out["refusal"] = self.refusal
        return out


def parse_response(value: Any, where: str = "response") -> ParsedResponse:
    """Dispatch on the shape: a string, a Responses-API object (``output``) or a chat completion (``choices``)."""
    if isinstance(value, str):
        return ParsedResponse(text=value, source="text")
    if not isinstance(value, dict):
        raise FormatError(where, f"expected a string, a Responses-API object or a chat-completions object, "
                                 f"got {_kind(value)}")
    if "output" in value:
        return parse_responses_object(value, where)
    if "choices" in value:
        return parse_chat_completion(value, where)
    raise FormatError(where, "an object must be a Responses-API response (with 'output') "
                             "or a chat completion (with 'choices')")


def parse_responses_object(obj: dict[str, Any], where: str = "response") -> ParsedResponse:
    """Join the ``output_text`` of every message item; keep tool calls and reasoning aside."""
    output = obj.get("output")
    if not isinstance(output, list):
        raise FormatError(f"{where}.output", f"expected a list of output items, got {_kind(output)}")
    texts: list[str] = []
    refusals: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for i, item in enumerate(output):
        at = f"{where}.output[{i}]"
        if not isinstance(item, dict):
            raise FormatError(at, f"expected an output item object, got {_kind(item)}")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            text, refusal = _message_content(item.get("content"), f"{at}.content")
            texts.append(text)
            if refusal:
                refusals.append(refusal)
        elif kind == "function_call":
            calls.append({"type": "function_call", "name": _string(item, "name", at),
                          "arguments": _arguments(item.get("arguments"), f"{at}.arguments"),
                          "call_id": _optional_string(item, "call_id", at)})
        elif kind == "function_call_output":
            calls.append({"type": "function_call_output", "call_id": _optional_string(item, "call_id", at),
                          "output": item.get("output")})
        elif kind == "reasoning":
            reasoning.extend(_reasoning_texts(item, at))
        else:
            raise FormatError(f"{at}.type", f"unknown output item type {kind!r}; "
                                            f"expected one of {', '.join(OUTPUT_ITEM_TYPES)}")
    return ParsedResponse(text="\n".join(t for t in texts if t), source="responses", tool_calls=calls,
                          reasoning="\n".join(reasoning), refusal="\n".join(refusals))


def parse_chat_completion(obj: dict[str, Any], where: str = "response") -> ParsedResponse:
    """Score the first choice's message, as the engine does for the chat-completions protocol."""
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices:
        raise FormatError(f"{where}.choices", f"expected a non-empty list of choices, got {_kind(choices)}")
    choice = choices[0]
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        raise FormatError(f"{where}.choices[0].message", "expected a message object")
    message: dict[str, Any] = choice["message"]
    at = f"{where}.choices[0].message"
    text, refusal = _message_content(message.get("content"), f"{at}.content")
    calls = []
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise FormatError(f"{at}.tool_calls", f"expected a list, got {_kind(raw_calls)}")
    for j, call in enumerate(raw_calls):
        call_at = f"{at}.tool_calls[{j}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise FormatError(f"{call_at}.function", "expected a function object with a name and arguments")
        calls.append({"type": "function_call", "name": _string(function, "name", f"{call_at}.function"),
                      "arguments": _arguments(function.get("arguments"), f"{call_at}.function.arguments"),
                      "call_id": _optional_string(call, "id", call_at)})
    reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    if not isinstance(reasoning, str):
        raise FormatError(f"{at}.reasoning_content", f"expected a string, got {_kind(reasoning)}")
    refusal = refusal or _optional_string(message, "refusal", at) or ""
    return ParsedResponse(text=text, source="chat_completions", tool_calls=calls, reasoning=reasoning,
                          refusal=refusal)


def _message_content(content: Any, at: str) -> tuple[str, str]:
    """``(text, refusal)`` of a message: a string, ``None``, or a list of typed parts joined as they stream."""
    if content is None:
        return "", ""
    if isinstance(content, str):
        return content, ""
    if not isinstance(content, list):
        raise FormatError(at, f"expected a string or a list of content parts, got {_kind(content)}")
    texts: list[str] = []
    refusals: list[str] = []
    for j, part in enumerate(content):
        part_at = f"{at}[{j}]"
        if not isinstance(part, dict):
            raise FormatError(part_at, f"expected a content part object, got {_kind(part)}")
        kind = part.get("type")
        if kind == "refusal":
            refusals.append(_string(part, "refusal", part_at))
        elif kind in MESSAGE_PART_TYPES:
            texts.append(_string(part, "text", part_at))
        else:
            raise FormatError(f"{part_at}.type", f"unknown content part type {kind!r}; "
                                                 f"expected one of {', '.join(MESSAGE_PART_TYPES)}")
    return "".join(texts), "".join(refusals)


def _reasoning_texts(item: dict[str, Any], at: str) -> list[str]:
    """Reasoning text from ``summary`` (``summary_text`` parts) and ``content`` (``reasoning_text`` parts)."""
    texts: list[str] = []
    for key in ("summary", "content"):
        parts = item.get(key)
        if parts is None:
            continue
        if not isinstance(parts, list):
            raise FormatError(f"{at}.{key}", f"expected a list, got {_kind(parts)}")
        for j, part in enumerate(parts):
            if not isinstance(part, dict):
                raise FormatError(f"{at}.{key}[{j}]", f"expected an object, got {_kind(part)}")
            texts.append(_string(part, "text", f"{at}.{key}[{j}]"))
    return texts


def _string(obj: dict[str, Any], key: str, at: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise FormatError(f"{at}.{key}", f"expected a string, got {_kind(value)}")
    return value


def _optional_string(obj: dict[str, Any], key: str, at: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise FormatError(f"{at}.{key}", f"expected a string, got {_kind(value)}")
    return value


def _arguments(value: Any, at: str) -> str:
    """Tool-call arguments are a JSON string in both APIs; an object is accepted and kept as given."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return orjson.dumps(value).decode()
    raise FormatError(at, f"expected a JSON string, got {_kind(value)}")


def _kind(value: Any) -> str:
    """A JSON type name for error messages: what the client sent, in its own terms."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
