"""The key bar: the shown bindings of the focused pane, the screen and the app, on one line.

Textual's Footer builds a widget per key and rebuilds them on every focus change; a screen of this
TUI opens in a fraction of the time with one line of text instead (the task list and a task's detail
must open in well under 300 ms).
"""

from __future__ import annotations

from rich.text import Text
from textual.screen import Screen
from textual.widgets import Static


class KeyBar(Static):
    """Keys first, then what they do; keys that cannot act now are dimmed."""

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
        color: $footer-foreground;
    }
    """

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self.bindings_changed)
        self.bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def bindings_changed(self, screen: Screen[object]) -> None:
        app = self.app
        text, seen = Text(no_wrap=True, overflow="ellipsis"), set()
        for _, binding, enabled, _ in screen.active_bindings.values():
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            style = "" if enabled else "dim"
            text.append(f" {app.get_key_display(binding)} ", style=f"bold {style}")
            text.append(binding.description, style=style)
        self.update(text + Text(" · ^p palette", style="dim"))
