"""A scrolling view of long styled text that renders only the lines on screen.

The text is wrapped once per width into an index of visual lines (cheap string slicing, no
rendering); ``render_line`` then builds a ``Strip`` only for the rows in view, behind an LRU cache,
as toolong does. A 100,000-line trajectory scrolls as smoothly as a 10-line one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import get_character_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

Piece = tuple[str, Style]
"""A run of text in one style."""
Line = tuple[Piece, ...]
"""One visual (already wrapped) line."""


def _fit(text: str, start: int, width: int) -> int:
    """The end of the longest slice from ``start`` that fits ``width`` cells."""
    if text.isascii():
        return min(len(text), start + width)
    cells, end = 0, start
    while end < len(text):
        size = get_character_cell_size(text[end])
        if cells + size > width:
            break
        cells += size
        end += 1
    return max(end, start + 1)


def wrap_offsets(text: str, width: int) -> list[tuple[int, int]]:
    """Where ``text`` (one line, no newline) breaks to fit ``width`` cells: at the last space that
    fits, else mid-word. The space at a break is dropped; an empty text is one empty line."""
    width = max(1, width)
    out: list[tuple[int, int]] = []
    start, n = 0, len(text)
    while True:
        end = _fit(text, start, width)
        if end >= n:
            out.append((start, n))
            return out
        brk = text.rfind(" ", start, end + 1)
        if brk > start:
            out.append((start, brk))
            start = brk + 1
        else:
            out.append((start, end))
            start = end


def wrap_pieces(pieces: Sequence[Piece], width: int) -> list[Line]:
    """Wrap one logical line made of styled pieces into visual lines of at most ``width`` cells."""
    text = "".join(t for t, _ in pieces)
    bounds, pos = [], 0
    for t, style in pieces:
        bounds.append((pos, pos + len(t), style))
        pos += len(t)
    lines: list[Line] = []
    for start, end in wrap_offsets(text, width):
        line = tuple((text[max(s, start):min(e, end)], style) for s, e, style in bounds if s < end and e > start)
        lines.append(line)
    return lines


def overlay(line: Line, ranges: Sequence[tuple[int, int, Style]]) -> Line:
    """``line`` with each (start, end, style) character range (sorted, not overlapping) drawn over in ``style``
    (a search match)."""
    if not ranges:
        return line
    out: list[Piece] = []
    pos = 0
    for text, style in line:
        end = pos + len(text)
        cut = pos
        for start, stop, over in ranges:
            a, b = max(start, pos), min(stop, end)
            if a >= b:
                continue
            if a > cut:
                out.append((text[cut - pos:a - pos], style))
            out.append((text[a - pos:b - pos], style + over))
            cut = b
        if cut < end:
            out.append((text[cut - pos:], style))
        pos = end
    return tuple(out)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean(text: str) -> str:
    """Tabs to spaces, no carriage returns, other control characters shown as � (they would garble a row)."""
    return _CONTROL.sub("�", text.replace("\t", "    ").replace("\r", ""))


@dataclass(slots=True)
class _Layout:
    width: int
    lines: list[Line]


class WrappedView(ScrollView, can_focus=True):
    """Base class: subclasses say how their content lays out at a width (``wrap_lines``)."""

    DEFAULT_CSS = """
    WrappedView {
        height: 1fr;
        overflow-x: hidden;
        overflow-y: scroll;
        scrollbar-gutter: stable;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("home", "top", "Top", show=False),  # a jump, not an animation through every line between
        Binding("end", "bottom", "Bottom", show=False),
    ]

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._wrapped: _Layout | None = None
        self._strips: LRUCache[tuple[int, Style], Strip] = LRUCache(1024)

    def wrap_lines(self, width: int) -> list[Line]:
        """Every visual line of the content at ``width`` cells."""
        raise NotImplementedError

    @property
    def lines(self) -> list[Line]:
        """The visual lines at the current width (laid out on first use after a change)."""
        width = max(1, self.scrollable_content_region.width)
        if self._wrapped is None or self._wrapped.width != width:
            self._wrapped = _Layout(width, self.wrap_lines(width))
            self._strips.clear()
            self.virtual_size = Size(width, len(self._wrapped.lines))
        return self._wrapped.lines

    def decorate(self, index: int, line: Line) -> Line:
        """Visual line ``index`` as drawn: subclasses overlay what changes without a new layout (search matches);
        call ``repaint`` when that changes."""
        return line

    def repaint(self) -> None:
        """Draw the lines again (their decoration changed; the layout did not)."""
        self._strips.clear()
        self.refresh()

    def content_changed(self) -> None:
        """Call after the content changed: lays out again and repaints."""
        self._wrapped = None
        self._strips.clear()
        _ = self.lines
        self.refresh()

    def on_resize(self) -> None:
        _ = self.lines

    def render_line(self, y: int) -> Strip:
        lines = self.lines
        index = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        base = self.rich_style
        if index >= len(lines):
            return Strip.blank(width, base)
        strip = self._strips.get((index, base))  # keyed on the base style too: a theme change repaints
        if strip is None:
            segments = [Segment(text, base + style) for text, style in self.decorate(index, lines[index])]
            strip = Strip(segments).crop_extend(0, width, base)
            self._strips[index, base] = strip
        return strip

    def action_top(self) -> None:
        self.scroll_to(y=0, animate=False)

    def action_bottom(self) -> None:
        self.scroll_to(y=self.max_scroll_y, animate=False)

    def scroll_to_line(self, index: int, *, context: int = 2) -> None:
        """Bring visual line ``index`` near the top (with a little context above it)."""
        self.scroll_to(y=max(0, index - context), animate=False)
