"""The row tables of the TUI: a DataTable with a row cursor whose Enter shows in the footer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable

Cell = str | Text


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

    def action_scroll_bottom(self) -> None:
        super().action_scroll_bottom()
        self.post_message(self.LastRowWanted(self))

    def set_columns(self, columns: Sequence[tuple[str, str]]) -> None:
        """(key, label) pairs, once."""
        if not self.columns:
            for key, label in columns:
                self.add_column(label, key=key)

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
