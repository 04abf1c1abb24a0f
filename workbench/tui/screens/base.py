"""What every screen shares: a breadcrumb, a message line, the key bar, and loading in workers.

``start`` runs a job in a thread worker; the job returns one typed message (``messages.py``) and any
exception becomes a ``Failed`` message shown on the message line, never a traceback. A token per job
group lets a screen ignore replies to requests a newer one has replaced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, ClassVar

import duckdb
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from workbench.errors import NelError
from workbench.store.queries.sql import one_line
from workbench.tui.messages import Failed
from workbench.tui.widgets.keybar import KeyBar

if TYPE_CHECKING:
    from workbench.store.reader import Store
    from workbench.tui.app import NelApp


def describe(exc: BaseException) -> str:
    """An exception as the one line a user reads."""
    if isinstance(exc, NelError):
        return str(exc)
    if isinstance(exc, duckdb.Error):
        return f"DuckDB: {one_line(exc)}"
    return f"{type(exc).__name__}: {one_line(exc)}"


class NelScreen(Screen[None]):
    """Base of the TUI's screens."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", show=False, tooltip="Back to the previous screen"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._tokens: dict[str, int] = {}

    @property
    def nel(self) -> NelApp:
        return self.app  # type: ignore[return-value]

    def crumb(self) -> str:
        """The breadcrumb shown on the first line."""
        return "nel"

    def compose_body(self) -> Iterable[Widget]:
        return ()

    def compose(self) -> ComposeResult:
        yield Static(self.crumb(), id="crumb", markup=False)
        yield from self.compose_body()
        yield Static("", id="message", markup=False)
        yield KeyBar()

    def say(self, text: str, *, error: bool = False) -> None:
        """Show ``text`` on the message line (an empty text hides it)."""
        line = self.query_one("#message", Static)
        line.update(text)
        line.set_class(error, "error")
        line.display = bool(text)

    def on_mount(self) -> None:
        self.query_one("#message", Static).display = False

    def store(self) -> Store:
        """The app's store (raises ``UsageError`` when the path is not a store); call from workers."""
        return self.nel.open_store()

    def start(self, group: str, job: Callable[[int], Message]) -> int:
        """Run ``job(token)`` in a thread worker and post the message it returns; returns the token."""
        token = self._tokens.get(group, 0) + 1
        self._tokens[group] = token
        self.run_worker(partial(self._job, group, token, job), thread=True, group=group, exclusive=True,
                        exit_on_error=False, name=group)
        return token

    def current(self, group: str, token: int) -> bool:
        """Whether ``token`` is the latest request of ``group``."""
        return self._tokens.get(group) == token

    def _job(self, group: str, token: int, job: Callable[[int], Message]) -> None:
        try:
            message = job(token)
        except Exception as exc:
            message = Failed(token, group, describe(exc))
        self.post_message(message)

    def on_failed(self, message: Failed) -> None:
        if self.current(message.group, message.token):
            self.failed(message.group, message.text)

    def failed(self, group: str, text: str) -> None:
        """A job of ``group`` failed; screens override to show it where it belongs."""
        self.say(text, error=True)

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
