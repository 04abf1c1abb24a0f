"""Helpers of the TUI tests: wait for workers or a condition, read what is on screen."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from textual.app import App
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import DataTable, Static
from textual.worker import WorkerState

from workbench.tui.widgets.table import NelTable

_BUSY = (WorkerState.PENDING, WorkerState.RUNNING)


def _tables_pending(app: App[Any]) -> bool:
    """A table lays out new rows on its next idle; a snapshot taken before would catch old column widths."""
    return any(t._require_update_dimensions for s in app.screen_stack for t in s.query(DataTable))


async def settle(pilot: Pilot[Any], rounds: int = 200) -> None:
    """Wait until no worker is running, the messages they posted are handled and the tables laid out."""
    app = pilot.app
    for _ in range(rounds):
        await app.workers.wait_for_complete()
        await pilot.pause()
        if not any(w.state in _BUSY for w in app.workers) and not _tables_pending(app):
            await pilot.pause()
            return
    raise AssertionError("workers kept running")


async def wait_for(pilot: Pilot[Any], done: Callable[[], object], timeout: float = 90.0,
                   interval: float = 0.2) -> None:
    """Let the app run (its timers fire while the pilot pauses) until ``done()`` holds; after ``timeout`` s
    fail, showing the screen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return
        await pilot.pause(interval)
    raise AssertionError(f"timed out; on screen:\n{screen_text(pilot.app)}")


async def open_screen(pilot: Pilot[Any], screen: Screen[Any]) -> None:
    """Once the runs are listed, push ``screen`` and wait until it has loaded."""
    await settle(pilot)
    await pilot.app.push_screen(screen)
    await settle(pilot)


def screen_text(app: App[Any]) -> str:
    """The current screen as plain text, as a terminal would show it."""
    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(), record=True,
                      force_terminal=True, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


def text_of(app: App[Any], selector: str) -> str:
    """The text of a Static."""
    return str(app.screen.query_one(selector, Static).content)


def column(app: App[Any], selector: str, key: str) -> list[str]:
    """One column of a table, as plain strings."""
    table = app.screen.query_one(selector, DataTable)
    return [str(table.get_cell(row, key)).strip() for row in table.rows]


def row_keys(app: App[Any], selector: str) -> list[str]:
    table = app.screen.query_one(selector, DataTable)
    return [str(key.value) for key in table.rows]


def header(app: App[Any], selector: str, key: str) -> str:
    """A column's header as shown (the sort arrow included, trailing space trimmed)."""
    return app.screen.query_one(selector, NelTable).header_label(key)


def column_widths(app: App[Any], selector: str) -> list[int]:
    table = app.screen.query_one(selector, DataTable)
    return [c.get_render_width(table) for c in table.columns.values()]


async def click_header(pilot: Pilot[Any], selector: str, key: str) -> None:
    """Click the header of column ``key``, then wait for the table to be sorted (and read again)."""
    table = pilot.app.screen.query_one(selector, DataTable)
    keys = [str(k.value) for k in table.columns]
    x = sum(column_widths(pilot.app, selector)[:keys.index(key)]) + 2
    await pilot.click(selector, offset=(x - round(table.scroll_x), 0))
    await settle(pilot)
