"""The transcript of one attempt: messages, reply, tool calls, error and scoring, wrapped to the width."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.style import Style
from textual.binding import Binding, BindingType

from workbench.analysis.triage import Block
from workbench.tui.widgets.wrapped import Line, WrappedView, clean, wrap_pieces

TITLE_STYLES: dict[str, Style] = {
    "system": Style(color="magenta", bold=True),
    "user": Style(color="cyan", bold=True),
    "assistant": Style(color="green", bold=True),
    "tool": Style(color="yellow", bold=True),
    "reasoning": Style(color="blue", bold=True),
    "error": Style(color="red", bold=True),
    "scoring": Style(color="bright_white", bold=True),
}
BODY_STYLES: dict[str, Style] = {
    "reasoning": Style(italic=True, dim=True),
    "error": Style(color="red"),
}
_PLAIN = Style()


class TranscriptView(WrappedView):
    """Shows a list of transcript blocks; ``n``/``p`` jump between them."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "next_block", "Next part"),
        Binding("p", "previous_block", "Prev part"),
    ]

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._blocks: list[Block] = []
        self._starts: list[int] = []

    def show(self, blocks: Sequence[Block]) -> None:
        """Replace the content and go back to the top."""
        self._blocks = list(blocks)
        self.content_changed()
        self.scroll_to(y=0, animate=False)

    def wrap_lines(self, width: int) -> list[Line]:
        lines: list[Line] = []
        self._starts = []
        for block in self._blocks:
            self._starts.append(len(lines))
            head = f"── {block.title} "
            lines.append(((head + "─" * max(0, width - len(head)), TITLE_STYLES.get(block.kind, _PLAIN)),))
            body = BODY_STYLES.get(block.kind, _PLAIN)
            for text in clean(block.text).split("\n"):
                lines += wrap_pieces([(text, body)], width)
            lines.append(())
        return lines

    def block_starts(self) -> list[int]:
        _ = self.lines
        return list(self._starts)

    def action_next_block(self) -> None:
        top = self.scroll_offset.y
        target = next((s for s in self.block_starts() if s > top), None)
        if target is not None:
            self.scroll_to(y=target, animate=False)

    def action_previous_block(self) -> None:
        top = self.scroll_offset.y
        target = next((s for s in reversed(self.block_starts()) if s < top), 0)
        self.scroll_to(y=target, animate=False)
