"""The row tables of the TUI: a DataTable with a row cursor whose Enter shows in the footer, and whose sorted
column carries its arrow in the header."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

Cell = str | Text
DESCENDING, ASCENDING = "↓", "↑"


@dataclass(frozen=True, slots=True)
class SortOrder:
    """The column a list is sorted by, and which way. A newly chosen column starts the way people read it
    first: text a→z, numbers and times largest (newest) first; choosing the same column again reverses."""

    column: str
    descending: bool

    @property
    def arrow(self) -> str:
        return DESCENDING if self.descending else ASCENDING

    def choose(self, column: str, largest_first: Collection[str]) -> SortOrder:
        """The order after ``column`` is picked (a header click): reversed if it is already the sort."""
        if column == self.column:
            return self.reversed()
        return SortOrder(column, column in largest_first)

    def next(self, columns: Sequence[str], largest_first: Collection[str]) -> SortOrder:
        """The order ``s`` moves to: the column after this one (wrapping round), in its first direction."""
        index = columns.index(self.column) if self.column in columns else -1
        column = columns[(index + 1) % len(columns)]
        return SortOrder(column, column in largest_first)

    def reversed(self) -> SortOrder:
        return SortOrder(self.column, not self.descending)


class NelTable(DataTable[Cell]):
    """A row-cursor table; Enter opens the highlighted row (``RowSelected``)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Open"),
        Binding("home", "scroll_top", "First row", show=False),  # rows, not columns: these tables scroll down
        Binding("end", "scroll_bottom", "Last row", show=False),
    ]

    class LastRowWanted(Message):
        """End was pressed: a screen that pages its rows in loads the rest, so End reaches the list's last row."""

        def __init__(self, table: NelTable) -> None:
            super().__init__()
            self.table = table

        @property
        def control(self) -> NelTable:
            return self.table

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True)
        self._labels: dict[str, str] = {}
        self._sortable: set[str] = set()

    def action_scroll_bottom(self) -> None:
        super().action_scroll_bottom()
        self.post_message(self.LastRowWanted(self))

    def set_columns(self, columns: Sequence[tuple[str, str]], *, sortable: Iterable[str] = ()) -> None:
        """(key, label) pairs, once. The header of a ``sortable`` column keeps two cells for its arrow, so the
        table does not shift when the sort moves to another column."""
        if not self.columns:
            self._labels = dict(columns)
            self._sortable = set(sortable)
            for key, label in columns:
                self.add_column(f"{label}  " if key in self._sortable else label, key=key)

    def show_sort(self, order: SortOrder | None) -> None:
        """Put ``order``'s arrow on its column's header (``started ↓``); every other header plain."""
        console = self.app.console
        for key, column in self.columns.items():
            name = str(key.value)
            if name not in self._sortable:
                continue
            arrow = order.arrow if order is not None and order.column == name else " "
            column.label = Text(f"{self._labels[name]} {arrow}")
            column.content_width = max(column.content_width, console.measure(column.label).maximum)
        self._clear_caches()
        self._require_update_dimensions = True
        self.refresh()

    def header_label(self, key: str) -> str:
        """A column's header as shown (trailing space trimmed): what a test or a screen reader reads."""
        return self.columns[ColumnKey(key)].label.plain.rstrip()

    def highlighted_key(self) -> str | None:
        """The key of the row under the cursor, if any."""
        if not self.row_count:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    def move_to_key(self, key: str | None) -> None:
        """Put the cursor on the row with ``key`` (first row when it is gone)."""
        try:
            row = self.get_row_index(key) if key is not None else 0
        except Exception:  # RowDoesNotExist: the row left with a reload or a filter
            row = 0
        self.move_cursor(row=row, animate=False, scroll=True)
