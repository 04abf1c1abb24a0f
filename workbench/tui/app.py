"""``nel tui``: a keyboard-first Textual app over a store, for failure triage in the terminal.

The app reads the store through ``workbench.analysis.triage`` and nothing else; every read runs in
a worker thread that posts a typed message back (``messages.py``), so the interface never waits on
DuckDB. A bad store, a vanished run or a bad query is a message inside the app, never a traceback.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import ClassVar

from textual import events
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from workbench.store.reader import Store
from workbench.tui.screens.help import HelpScreen, screen_keys
from workbench.tui.screens.runs import RunsScreen
from workbench.tui.screens.too_small import TooSmallScreen, too_small


class NelApp(App[None]):
    """The TUI. ``store_path`` need not exist: the runs screen then says so."""

    CSS_PATH = "app.tcss"
    TITLE = "nel"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Keys", key_display="?"),
        Binding("f1", "help", "Keys", show=False),
        Binding("colon", "sql", "SQL", key_display=":"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, store_path: str | Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.store_path = Path(store_path)
        self.clock = clock
        """Seconds, for rates and timings on screen (tests pass a fixed one)."""
        self.marked_runs: list[str] = []
        """Runs marked on the runs screen, oldest first (two at most): the first is the baseline of a
        comparison and the reference run a task's attempt diffs against (D); the second the candidate."""
        self.last_sql = "SELECT * FROM run_metrics"
        self._store: Store | None = None

    @property
    def reference_run(self) -> str | None:
        """The first marked run: ``D`` on a task diffs against the same task there."""
        return self.marked_runs[0] if self.marked_runs else None

    @reference_run.setter
    def reference_run(self, run_id: str | None) -> None:
        self.marked_runs = [] if run_id is None else [run_id]

    def open_store(self) -> Store:
        """The store, opened on first success (a path that is not a store yet is tried again next time)."""
        if self._store is None:
            self._store = Store(self.store_path)
        return self._store

    def on_mount(self) -> None:
        self.push_screen(RunsScreen())
        self._check_size(self.size.width, self.size.height)

    def on_resize(self, event: events.Resize) -> None:
        self._check_size(event.size.width, event.size.height)

    def _check_size(self, width: int, height: int) -> None:
        small = too_small(width, height)
        if isinstance(self.screen, TooSmallScreen):
            if small:
                self.screen.show_size(width, height)
            else:
                self.pop_screen()
        elif small:
            self.push_screen(TooSmallScreen())

    # ---- app-wide actions ----------------------------------------------------------------------------
    def action_help(self) -> None:
        """Show the keys of the current screen (again to close)."""
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss()
        else:
            self.push_screen(HelpScreen(self.screen))

    def action_sql(self) -> None:
        """Open the SQL screen."""
        from workbench.tui.screens.sql import SqlScreen

        if not isinstance(self.screen, SqlScreen):
            self.push_screen(SqlScreen())

    def action_runs(self) -> None:
        """Go back to the runs list."""
        while len(self.screen_stack) > 2:
            self.pop_screen()

    # ---- the command palette: every action of the current screen, by name --------------------------------
    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        seen = set()
        for key in screen_keys(screen):
            if key.description not in seen:
                seen.add(key.description)
                yield SystemCommand(key.description, f"key {key.key} ({key.where})",
                                    partial(self.run_action, key.action, key.node))
        if len(self.screen_stack) > 2:
            yield SystemCommand("Go to runs", "back to the list of runs", self.action_runs)
        yield SystemCommand("Theme", "change the colour theme", self.action_change_theme)
