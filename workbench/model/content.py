"""A prompt's content parts in each protocol's own form.

Environments write messages the chat-completions way (``{"type": "text"}`` and ``{"type": "image_url",
"image_url": {"url": …, "detail": …}}`` parts, or a plain string). Chat completions sends them as they are, with
the run's ``image_detail`` applied to every image; the Responses API wants ``input_text`` and ``input_image``
parts (``image_url`` a string, ``detail`` beside it). Messages with string content, the common case, pass through
untouched and uncopied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workbench.images import part_url
from workbench.types import Message


def chat_messages(messages: tuple[Message, ...], detail: str | None) -> list[Message]:
    """``messages`` for chat completions: as they are, each image at ``detail`` when one is set."""
    if detail is None:
        return list(messages)
    return [_with_detail(m, detail) if isinstance(m.get("content"), list) else m for m in messages]


def _with_detail(message: Message, detail: str) -> Message:
    parts = []
    for part in message["content"]:
        if isinstance(part, Mapping) and part.get("type") == "image_url":
            value = part.get("image_url")
            url = value.get("url") if isinstance(value, Mapping) else value
            part = {**part, "image_url": {**(value if isinstance(value, Mapping) else {}), "url": url,
                                          "detail": detail}}
        parts.append(part)
    return {**message, "content": parts}


def responses_input(messages: tuple[Message, ...], detail: str | None) -> list[Any]:
    """``messages`` as Responses API input items: content parts renamed to ``input_text``/``input_image``
    (``output_text`` for an assistant's own earlier text)."""
    items: list[Any] = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            items.append(message)
            continue
        text_type = "output_text" if message.get("role") == "assistant" else "input_text"
        parts: list[Any] = []
        for part in content:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind == "text":
                parts.append({"type": text_type, "text": part.get("text", "")})
            elif kind in ("image_url", "input_image"):
                value = part.get("image_url")
                own = value.get("detail") if isinstance(value, Mapping) else part.get("detail")
                parts.append({"type": "input_image", "image_url": part_url(part),
                              "detail": detail or own or "auto"})
            else:
                parts.append(part)
        items.append({**message, "content": parts})
    return items
