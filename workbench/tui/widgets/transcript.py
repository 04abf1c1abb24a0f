"""The transcript of one attempt: messages, reply, tool calls, error and scoring, wrapped to the width.

A tool's output folds to its title line (``▶ output of bash (… 240 lines)``; ``o`` opens or folds the part at
the top, ``O`` every part), as Textual's ``Collapsible`` does, but drawn inside this one line-rendered view:
a 2 MB agent transcript stays a single widget that renders only the rows on screen. Search (``search``)
finds text in folded parts too and opens the part it lands in.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message

from workbench.analysis.triage import Block
from workbench.tui.search import TextSearch
from workbench.tui.widgets.wrapped import Line, WrappedView, clean, overlay, wrap_offsets

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
SELECTED = Style(reverse=True)
"""The title of the selected part (the one ``c`` copies and ``o`` folds; ``n``/``p`` move it)."""
MATCH = Style(color="black", bgcolor="yellow")
CURRENT_MATCH = Style(color="black", bgcolor="bright_magenta", bold=True)
FOLD_HINT = Style(dim=True)
_PLAIN = Style()


@dataclass(slots=True)
class _Source:
    """The transcript's text, built once per ``show``: every logical line (titles and body lines) joined into
    one searchable text, and where each line starts in it."""

    search: TextSearch
    line_start: list[int]
    line_block: list[int]
    block_first_line: list[int]
    bodies: list[list[str]]
    """Each block's text, cleaned and split into lines (laid out again at each width without redoing this)."""


def _source(blocks: Sequence[Block]) -> _Source:
    texts: list[str] = []
    line_block: list[int] = []
    first: list[int] = []
    bodies: list[list[str]] = []
    for i, block in enumerate(blocks):
        first.append(len(texts))
        body = clean(block.text).split("\n")
        bodies.append(body)
        texts += [f"── {block.title} ", *body]
        line_block += [i] * (1 + len(body))
    starts, pos = [], 0
    for text in texts:
        starts.append(pos)
        pos += len(text) + 1
    return _Source(TextSearch("\n".join(texts)), starts, line_block, first, bodies)


@dataclass(slots=True)
class _Rows:
    """One block laid out: its visual lines, the searchable range of the text each shows (start -1: none) and the
    column that range starts at, and where each of its logical lines starts among them (-1: folded away)."""

    lines: list[Line]
    start: list[int]
    end: list[int]
    col: list[int]
    line_vis: list[int]

    def add(self, line: Line, start: int, length: int, col: int) -> None:
        self.lines.append(line)
        self.start.append(start)
        self.end.append(start + length)
        self.col.append(col)


class TranscriptView(WrappedView):
    """Shows a list of transcript blocks; ``n``/``p`` select the next or previous one (``n``/``N`` go between
    search matches while a search is on), ``o`` folds or opens a tool's output."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "next_block", "Next part"),
        Binding("p", "previous_block", "Prev part"),
        Binding("N", "previous_match", "Prev match", show=False),
        Binding("o", "fold", "Fold/open", tooltip="Fold or open the selected tool output (or the next one)"),
        Binding("O", "fold_all", "Fold/open all", show=False, tooltip="Fold or open every tool output"),
    ]

    class SearchMoved(Message):
        """The search's query or current match changed (``status`` says where it is, for the screen)."""

        def __init__(self, status: str) -> None:
            super().__init__()
            self.status = status

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._blocks: list[Block] = []
        self._starts: list[int] = []
        self._folded: set[int] = set()
        self._part = 0
        self._source = _source(())
        self._current: int | None = None
        # Per visual line: the searchable range of the text it shows, and the column that range starts at.
        self._vis_start: list[int] = []
        self._vis_end: list[int] = []
        self._vis_col: list[int] = []
        self._line_vis: list[int] = []

    @property
    def blocks(self) -> list[Block]:
        return self._blocks

    def show(self, blocks: Sequence[Block]) -> None:
        """Replace the content (long tool outputs folded), keep the search's query, and go back to the top."""
        query = self._source.search.query
        self._blocks = list(blocks)
        self._folded = {i for i, b in enumerate(self._blocks) if b.folded}
        self._source = _source(self._blocks)
        self._source.search.query = query
        self._current = None
        self._part = 0
        self.content_changed()
        self.scroll_to(y=0, animate=False)
        if query:
            self.post_message(self.SearchMoved(self.search_status()))

    # ---- layout ----------------------------------------------------------------------------------------------
    def wrap_lines(self, width: int) -> list[Line]:
        lines: list[Line] = []
        self._starts, self._vis_start, self._vis_end, self._vis_col = [], [], [], []
        self._line_vis = []
        for i in range(len(self._blocks)):
            rows = self._block_rows(i, width)
            self._starts.append(len(lines))
            self._line_vis += [v + len(lines) if v >= 0 else -1 for v in rows.line_vis]
            lines += rows.lines
            self._vis_start += rows.start
            self._vis_end += rows.end
            self._vis_col += rows.col
        return lines

    def _block_rows(self, i: int, width: int) -> _Rows:
        src, block = self._source, self._blocks[i]
        first = src.block_first_line[i]
        body = src.bodies[i]
        folded = i in self._folded
        rows = _Rows([], [], [], [], [0] + [-1] * len(body))
        mark = ("▶ " if folded else "▼ ") if block.foldable else ""
        head = f"── {block.title} "
        hint = "(o opens) " if folded else ""
        rule = "─" * max(0, width - len(mark) - len(head) - len(hint))
        style = TITLE_STYLES.get(block.kind, _PLAIN)
        rows.add(((mark, style), (head, style), (hint, FOLD_HINT), (rule, style)), src.line_start[first], len(head),
                 len(mark))
        if not folded:
            body_style = BODY_STYLES.get(block.kind, _PLAIN)
            for n, text in enumerate(body, start=1):
                rows.line_vis[n] = len(rows.lines)
                offset = src.line_start[first + n]
                for start, end in wrap_offsets(text, width):
                    rows.add(((text[start:end], body_style),), offset + start, end - start, 0)
        rows.add((), -1, 0, 0)
        return rows

    def _reflow(self, i: int) -> None:
        """Lay block ``i`` out again in place (it was folded or opened): the rest of the layout only shifts, so
        opening one output of a 2 MB transcript costs that output, not the transcript."""
        layout = self._wrapped
        if layout is None:
            return
        rows = self._block_rows(i, layout.width)
        lo = self._starts[i]
        hi = self._starts[i + 1] if i + 1 < len(self._starts) else len(layout.lines)
        delta = len(rows.lines) - (hi - lo)
        layout.lines[lo:hi] = rows.lines
        self._vis_start[lo:hi] = rows.start
        self._vis_end[lo:hi] = rows.end
        self._vis_col[lo:hi] = rows.col
        self._starts[i + 1:] = [s + delta for s in self._starts[i + 1:]]
        first = self._source.block_first_line[i]
        after = first + len(rows.line_vis)
        self._line_vis[first:after] = [v + lo if v >= 0 else -1 for v in rows.line_vis]
        self._line_vis[after:] = [v + delta if v >= 0 else -1 for v in self._line_vis[after:]]
        self.virtual_size = Size(layout.width, len(layout.lines))
        self.repaint()

    def decorate(self, index: int, line: Line) -> Line:
        if index >= len(self._vis_start) or self._vis_start[index] < 0:
            return line
        start, end, col = self._vis_start[index], self._vis_end[index], self._vis_col[index]
        search = self._source.search
        if search.query:
            matches = search.within(start, end)
            line = overlay(line, [(col + max(a, start) - start, col + min(b, end) - start,
                                   CURRENT_MATCH if a == self._current else MATCH) for a, b in matches])
        if self.has_focus and self._part < len(self._starts) and index == self._starts[self._part]:
            line = overlay(line, [(col, col + end - start, SELECTED)])
        return line

    # ---- parts -----------------------------------------------------------------------------------------------
    def block_starts(self) -> list[int]:
        _ = self.lines
        return list(self._starts)

    def selected_part(self) -> int | None:
        """The index of the selected part (the one ``c`` copies, ``o`` folds); None when nothing is shown."""
        return self._part if self._blocks else None

    def select_part(self, index: int) -> None:
        """Select part ``index`` and bring its title to the top (as far as the view scrolls)."""
        if not self._blocks:
            return
        self._part = max(0, min(index, len(self._blocks) - 1))
        _ = self.lines
        self.scroll_to(y=self._starts[self._part], animate=False)
        self.repaint()

    def on_focus(self) -> None:
        self.repaint()  # the selected part's title is marked while the transcript has the focus

    def on_blur(self) -> None:
        self.repaint()

    def action_next_block(self) -> None:
        if self._source.search.query:
            self.next_match()
        elif self._part + 1 < len(self._blocks):
            self.select_part(self._part + 1)

    def action_previous_block(self) -> None:
        self.select_part(self._part - 1)

    def action_fold(self) -> None:
        """Fold or open the selected part; when it is no tool output, the next one that is."""
        foldable = [i for i, b in enumerate(self._blocks) if b.foldable]
        if not foldable:
            self.notify("This transcript has no tool output to fold.")
            return
        block = next((i for i in foldable if i >= self._part), foldable[-1])
        self._part = block
        self._set_folded(set() if block in self._folded else {block}, {block})

    def action_fold_all(self) -> None:
        foldable = {i for i, b in enumerate(self._blocks) if b.foldable}
        self._set_folded(set() if self._folded & foldable else foldable, foldable)

    def _set_folded(self, folded: set[int], among: set[int]) -> None:
        """Fold the blocks of ``folded`` and open the rest of ``among``, keeping the selected part in view."""
        changed = (self._folded ^ ((self._folded - among) | folded))
        self._folded = (self._folded - among) | folded
        if len(changed) > 8:  # many parts: one layout of the whole is quicker than many splices
            self.content_changed()
        else:
            for block in sorted(changed):
                self._reflow(block)
        self.select_part(self._part)

    def is_folded(self, block: int) -> bool:
        return block in self._folded

    # ---- search ----------------------------------------------------------------------------------------------
    def search(self, query: str) -> str:
        """Highlight ``query`` and go to its first match at or after the top of the view; returns the status."""
        self._source.search.query = query
        top = self.scroll_offset.y
        starts = [s for s in self._vis_start[top:] if s >= 0][:1]
        self._current = None
        self._go(self._source.search.next(starts[0] if starts else 0))
        return self.search_status()

    def next_match(self) -> None:
        search = self._source.search
        after = self._current + max(1, len(search.query)) if self._current is not None else 0
        self._go(search.next(after))

    def previous_match(self) -> None:
        search = self._source.search
        self._go(search.previous(self._current if self._current is not None else len(search.text)))

    def action_previous_match(self) -> None:
        if self._source.search.query:
            self.previous_match()

    def clear_search(self) -> None:
        self._source.search.query = ""
        self._current = None
        self.repaint()

    @property
    def searching(self) -> bool:
        return bool(self._source.search.query)

    def search_status(self) -> str:
        """``3 of 17 matches``, or ``no match`` (empty when no search is on)."""
        search = self._source.search
        if not search.query:
            return ""
        count = search.count()
        if not count:
            return f"no match for {search.query!r}"
        if self._current is None:  # another attempt shown with the search on: nothing chosen yet
            return f"{count} match{'es' if count != 1 else ''} (n: the first)"
        return f"{search.ordinal(self._current)} of {count} match{'es' if count != 1 else ''}"

    def _go(self, pos: int | None) -> None:
        self._current = pos
        if pos is not None:
            src = self._source
            line = bisect_right(src.line_start, pos) - 1
            block = src.line_block[line] if 0 <= line < len(src.line_block) else None
            if block is not None:
                self._part = block
                if block in self._folded:
                    self._folded.discard(block)
                    self._reflow(block)
            _ = self.lines
            first = self._line_vis[line] if 0 <= line < len(self._line_vis) else -1
            target = first  # the line's wrapped rows follow it; the match is on the last one starting at or before it
            while first >= 0 and target + 1 < len(self._vis_start) and 0 <= self._vis_start[target + 1] <= pos:
                target += 1
            if target >= 0 and not self.scroll_offset.y <= target < self.scroll_offset.y + self.size.height - 1:
                self.scroll_to_line(target, context=3)
        self.repaint()
        self.post_message(self.SearchMoved(self.search_status()))
