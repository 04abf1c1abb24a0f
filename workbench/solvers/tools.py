"""Tools an agent can call: what the model is told about them, and what a call returned.

A ``ToolBox`` is a set of tools for one attempt (sandbox tools act on that attempt's sandbox, HTTP
tools on its server session). The tool-calling solver advertises ``specs`` to the model in
OpenAI's function format and sends each call to ``call``. A tool reports failure in its
``ToolOutcome`` (an exit code, an error); it raises only when the harness itself is broken.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from workbench.errors import UsageError

TRUNCATION_MARK = "\n[... {n} characters cut ...]\n"


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as the model sees it: a name, what it does and a JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def openai(self) -> dict[str, Any]:
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)}}


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What one call gave back. ``output`` is what the model reads; ``exit_code`` is a command's status
    (``None`` for tools that have none); ``error`` names a failure of the call itself (``timeout``,
    ``unknown_tool``, ``bad_arguments``, ``http_500`` ...)."""

    output: str
    exit_code: int | None = None
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None or (self.exit_code is not None and self.exit_code != 0)


class ToolBox(Protocol):
    """The tools of one attempt."""

    @property
    def specs(self) -> Sequence[ToolSpec]: ...

    async def call(self, name: str, arguments: dict[str, Any], *, timeout: float) -> ToolOutcome:
        """Run tool ``name``; a call that outlives ``timeout`` seconds ends with ``error="timeout"``."""
        ...


class CombinedToolBox:
    """Several tool boxes as one (sandbox tools and a resources server's tools, say); names must not clash."""

    def __init__(self, boxes: Sequence[ToolBox]) -> None:
        self._owner: dict[str, ToolBox] = {}
        self._specs: list[ToolSpec] = []
        for box in boxes:
            for spec in box.specs:
                if spec.name in self._owner:
                    raise UsageError(f"two tools are named {spec.name!r}; tool names must be unique")
                self._owner[spec.name] = box
                self._specs.append(spec)

    @property
    def specs(self) -> Sequence[ToolSpec]:
        return self._specs

    async def call(self, name: str, arguments: dict[str, Any], *, timeout: float) -> ToolOutcome:
        box = self._owner.get(name)
        if box is None:
            return unknown_tool(name, self._specs)
        return await box.call(name, arguments, timeout=timeout)


def unknown_tool(name: str, specs: Sequence[ToolSpec]) -> ToolOutcome:
    known = ", ".join(s.name for s in specs) or "none"
    return ToolOutcome(f"error: there is no tool named {name!r}; the tools are: {known}", error="unknown_tool")


def truncate_middle(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to about ``limit`` characters keeping its head and tail (where errors and results
    usually are), with a marker saying how much went; ``(text, False)`` when it fits."""
    if len(text) <= limit:
        return text, False
    mark_room = len(TRUNCATION_MARK.format(n=len(text)))
    keep = max(0, limit - mark_room)
    head = keep // 2
    tail = keep - head
    cut = len(text) - head - tail
    return text[:head] + TRUNCATION_MARK.format(n=cut) + (text[-tail:] if tail else ""), True
