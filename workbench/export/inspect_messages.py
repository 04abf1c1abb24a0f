"""A stored step's conversation as inspect_ai chat messages.

nel keeps the conversation as sent in the final model call (OpenAI format: system, user, earlier assistant turns
with their tool calls, tool results) and the reply apart (``response`` + ``tool_calls``); inspect shows one list
of messages with the reply last, and the sample's ``input`` is what came before the first reply.
"""

from __future__ import annotations

from typing import Any

import orjson
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    Content,
    ContentImage,
    ContentText,
)
from inspect_ai.tool import ToolCall


def tool_calls(raw: Any) -> list[ToolCall] | None:
    """OpenAI ``tool_calls`` (``{id, function: {name, arguments}}``, arguments a JSON text) as inspect's."""
    if not raw:
        return None
    calls = []
    for i, call in enumerate(raw):
        fn = call.get("function") or {}
        text = fn.get("arguments")
        parse_error = None
        try:
            arguments = orjson.loads(text) if isinstance(text, str | bytes) else (text or {})
        except orjson.JSONDecodeError as exc:
            arguments, parse_error = {}, f"arguments are not JSON: {exc}"
        if not isinstance(arguments, dict):
            arguments, parse_error = {"value": arguments}, "arguments are not a JSON object"
        calls.append(ToolCall(id=str(call.get("id") or f"call_{i}"), function=str(fn.get("name") or ""),
                              arguments=arguments, parse_error=parse_error))
    return calls


def _content(value: Any) -> str | list[Content]:
    """Text stays text; a list of parts keeps its text and images (an image by its URL or stored hash)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    parts: list[Content] = []
    for part in value:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            parts.append(ContentText(text=str(part.get("text") or "")))
        elif kind == "image_url":
            url = part.get("image_url")
            parts.append(ContentImage(image=str(url.get("url") if isinstance(url, dict) else url)))
        else:
            parts.append(ContentText(text=orjson.dumps(part).decode()))
    return parts


def chat_message(m: dict[str, Any]) -> ChatMessage:
    """One OpenAI-format message; an unknown role is shown as a user message rather than dropped."""
    role, content = m.get("role"), _content(m.get("content"))
    if role == "system" or role == "developer":
        return ChatMessageSystem(content=content)
    if role == "assistant":
        return ChatMessageAssistant(content=content, tool_calls=tool_calls(m.get("tool_calls")), model=None)
    if role == "tool":
        return ChatMessageTool(content=content, tool_call_id=m.get("tool_call_id"), function=m.get("name"))
    return ChatMessageUser(content=content)


def conversation(messages: str | None, prompt: str | None, response: str | None, calls: str | None,
                 model: str) -> tuple[list[ChatMessage], list[ChatMessage], ChatMessageAssistant]:
    """``(input, messages, reply)``: the messages before the first reply, the whole transcript with the reply
    last, and the reply itself."""
    sent = orjson.loads(messages) if messages else [{"role": "user", "content": prompt or ""}]
    history = [chat_message(m) for m in sent]
    first_reply = next((i for i, m in enumerate(history) if m.role == "assistant"), len(history))
    reply = ChatMessageAssistant(content=response or "", tool_calls=tool_calls(orjson.loads(calls) if calls else None),
                                 model=model, source="generate")
    return history[:first_reply], [*history, reply], reply
