"""How the mock model tells apart prompts that differ only in their picture.

Many visual tasks ask the same question of different images ("How many blue circles are in the picture?"). The
mock's answer index is keyed by prompt text, so a prompt that carries images is keyed by its text followed by the
SHA-256 of each image's bytes: the key is the same whichever protocol sent it (chat completions' ``image_url``
parts or the Responses API's ``input_image``) and whatever ``detail`` it asked for. An image it cannot decode
leaves a mark that no known task has, so the mock answers it as an unknown prompt.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from workbench.images import IMAGE_PART_TYPES, ImageError, decode_data_url, part_url


def image_key(text: str, content: Any) -> str:
    """``text``, followed by one line per image of ``content`` naming its hash (``text`` alone without images)."""
    if not isinstance(content, list):
        return text
    marks = [_mark(part) for part in content if isinstance(part, Mapping) and part.get("type") in IMAGE_PART_TYPES]
    return text if not marks else text + "".join(f"\n[image {m}]" for m in marks)


def _mark(part: Mapping[str, Any]) -> str:
    url = part_url(part) or ""
    try:
        return "sha256:" + hashlib.sha256(decode_data_url(url)[1]).hexdigest()
    except ImageError:
        return "undecodable"


def seed_key(prompt: str, messages: Iterable[Mapping[str, Any]]) -> str:
    """The key of a built-in task as the engine would send it: its prompt and the images of its user message."""
    for message in messages:
        if message.get("role") == "user" and isinstance(message.get("content"), list):
            return image_key(prompt, message["content"])
    return prompt
