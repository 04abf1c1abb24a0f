"""Shown over everything while the terminal is smaller than the TUI can lay out."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Static

MIN_WIDTH, MIN_HEIGHT = 60, 15


def too_small(width: int, height: int) -> bool:
    return width < MIN_WIDTH or height < MIN_HEIGHT


class TooSmallScreen(ModalScreen[None]):
    """Says how big the terminal is and how big it needs to be; goes away by itself on a resize."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "app.quit", "Quit")]

    def compose(self) -> ComposeResult:
        yield Static("", id="too-small", markup=False)

    def on_mount(self) -> None:
        self.show_size(self.app.size.width, self.app.size.height)

    def show_size(self, width: int, height: int) -> None:
        self.query_one("#too-small", Static).update(
            f"Terminal too small: {width}×{height}.\nnel tui needs at least {MIN_WIDTH}×{MIN_HEIGHT}: "
            "enlarge the window (q quits).")
