"""``?``: the keys of the screen underneath, from its live bindings (so the list is never stale)."""

from __future__ import annotations

from typing import ClassVar, NamedTuple

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from workbench.tui.widgets.table import NelTable

_TABLE_KEYS = ("↑ ↓ PgUp PgDn Home End move the cursor (End loads a long list to its last row); Enter opens the row; "
               "a click on a header sorts by it")


class KeyRow(NamedTuple):
    where: str
    key: str
    description: str
    action: str
    node: DOMNode


def _own_actions(node: DOMNode) -> set[str]:
    """Actions bound by the TUI's own classes (not Textual's defaults such as tab or copy)."""
    actions = set()
    for cls in type(node).__mro__:
        if cls.__module__.startswith("workbench.tui"):
            for binding in cls.__dict__.get("BINDINGS", ()):
                actions.add(binding.action if isinstance(binding, Binding) else binding[1])
    return actions


def screen_keys(screen: Screen[object]) -> list[KeyRow]:
    """Every enabled binding the TUI defines on ``screen``, its focused pane and the app, with the longer
    explanation (a binding's tooltip) where there is one."""
    rows = []
    own: dict[int, set[str]] = {}
    for active in screen.active_bindings.values():
        node, binding = active.node, active.binding
        actions = own.setdefault(id(node), _own_actions(node))
        if not binding.description or not active.enabled or binding.action not in actions:
            continue
        where = "everywhere" if isinstance(node, App) else "this screen" if isinstance(node, Screen) else "focused pane"
        rows.append(KeyRow(where, screen.app.get_key_display(binding), binding.tooltip or binding.description,
                           binding.action, node))
    order = {"this screen": 0, "focused pane": 1, "everywhere": 2}
    return sorted(rows, key=lambda r: order[r.where])


class HelpScreen(ModalScreen[None]):
    """A panel listing the keys; any of Escape, ? or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("question_mark", "close", "Close", key_display="?"),
        Binding("q", "close", "Close"),
    ]

    def __init__(self, under: Screen[object]) -> None:
        super().__init__()
        self.under = under

    def compose(self) -> ComposeResult:
        keys = screen_keys(self.under)
        width = max((len(k.key) for k in keys), default=4)
        text, section = Text(), ""
        for where, key, what, _, _ in keys:
            if where != section:
                text.append(("\n" if section else "") + where + "\n", style="bold underline")
                section = where
            text.append(f"  {key.ljust(width)}  ", style="bold")
            text.append(what + "\n")
        if self.under.query(NelTable):
            text.append("\ntables\n", style="bold underline")
            text.append(f"  {_TABLE_KEYS}\n")
        text.append("\nctrl+p opens the command palette: every action above, by name.")
        title = getattr(self.under, "title_text", type(self.under).__name__)
        with VerticalScroll(id="help"):
            yield Static(f"Keys: {title}", id="help-title", markup=False)
            yield Static(text, id="help-body")

    def action_close(self) -> None:
        self.dismiss()
