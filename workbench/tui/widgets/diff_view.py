"""Two attempts side by side, word differences marked, the first divergence flagged and jumped to."""

from __future__ import annotations

from itertools import zip_longest
from typing import ClassVar

from rich.cells import cell_len
from rich.style import Style
from textual.binding import Binding, BindingType

from workbench.analysis.triage import DiffRow, Span, WordDiff
from workbench.tui.widgets.wrapped import Line, Piece, WrappedView, clean, wrap_pieces

SPAN_STYLES: dict[str, Style] = {
    "same": Style(),
    "removed": Style(color="bright_white", bgcolor="dark_red", bold=True),
    "added": Style(color="bright_white", bgcolor="dark_green", bold=True),
}
GUTTER_FIRST = Style(color="black", bgcolor="yellow", bold=True)
GUTTER_CHANGED = Style(color="yellow", bold=True)
RULE = Style(dim=True)
_PLAIN = Style()


class DiffView(WrappedView):
    """A word diff laid out in two wrapped columns whose rows stay aligned.

    The gutter shows ``▶`` on the first divergence and ``~`` on every other changed row;
    ``f`` jumps to the first divergence, ``]``/``[`` to the next/previous change.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "first_divergence", "First divergence"),
        Binding("right_square_bracket", "next_change", "Next change", key_display="]"),
        Binding("left_square_bracket", "previous_change", "Prev change", key_display="["),
    ]

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._diff = WordDiff([], None, [])
        self._row_starts: list[int] = []

    def show(self, diff: WordDiff) -> None:
        self._diff = diff
        self.content_changed()
        self.action_first_divergence()
        self.call_after_refresh(self.action_first_divergence)  # again once laid out at its real width

    def wrap_lines(self, width: int) -> list[Line]:
        column = max(4, (width - 5) // 2)
        lines: list[Line] = []
        self._row_starts = []
        first = self._diff.first_divergence
        for index, row in enumerate(self._diff.rows):
            self._row_starts.append(len(lines))
            left = self._side(row.left, column, index == first)
            right = self._side(row.right, column, index == first)
            for n, (lpart, rpart) in enumerate(zip_longest(left, right, fillvalue=())):
                mark, style = self._gutter(row, index == first, n)
                lines.append(((mark, style), *self._pad(lpart, column), (" │ ", RULE), *rpart))
        return lines

    @staticmethod
    def _gutter(row: DiffRow, first: bool, n: int) -> Piece:
        if n > 0 or not row.changed:
            return ("  ", _PLAIN)
        return ("▶ ", GUTTER_FIRST) if first else ("~ ", GUTTER_CHANGED)

    @staticmethod
    def _side(spans: tuple[Span, ...], width: int, first: bool) -> list[Line]:
        pieces = [(clean(s.text), SPAN_STYLES[s.kind] + Style(underline=first and s.kind != "same")) for s in spans]
        return wrap_pieces(pieces, width)

    @staticmethod
    def _pad(line: Line, width: int) -> Line:
        used = sum(cell_len(text) for text, _ in line)
        return (*line, (" " * max(0, width - used), _PLAIN))

    def _row_line(self, row: int) -> int:
        _ = self.lines
        return self._row_starts[row] if 0 <= row < len(self._row_starts) else 0

    def action_first_divergence(self) -> None:
        if self._diff.first_divergence is not None:
            self.scroll_to_line(self._row_line(self._diff.first_divergence))

    def _change_lines(self) -> list[int]:
        return [self._row_line(r) for r in self._diff.changed_rows]

    def action_next_change(self) -> None:
        top = self.scroll_offset.y + 2
        target = next((line for line in self._change_lines() if line > top), None)
        if target is not None:
            self.scroll_to_line(target)

    def action_previous_change(self) -> None:
        top = self.scroll_offset.y + 2
        target = next((line for line in reversed(self._change_lines()) if line < top), None)
        if target is not None:
            self.scroll_to_line(target)
