"""Screen 6: two attempts side by side, word-level, opened at their first point of divergence.

By default a passing and a failing attempt of the same task (the sharpest contrast a sometimes-pass
task offers); or two given attempts; or an attempt and the same task (by content hash) in another run.
The conversations are aligned on turns (the prompt against the prompt, turn i against turn i), so scaffolding
both repeat lines up and only what changed stands out. The scoring difference is spelled out above the texts,
one difference per line, every line shown (long ones wrap; a difference taller than half the screen scrolls).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from workbench.analysis.triage import (
    Attempt,
    conversation,
    counterpart,
    default_pair,
    scoring_difference,
    task_detail,
    turn_diff,
    turns,
)
from workbench.errors import UsageError
from workbench.store.reader import Store
from workbench.tui.messages import DiffReady
from workbench.tui.screens.base import NelScreen
from workbench.tui.widgets.diff_view import DiffView


def resolve_pair(store: Store, run_id: str, task_idx: int, left: Attempt | None, right: Attempt | None,
                 other_run: str | None) -> tuple[Attempt, Attempt]:
    """The two attempts to compare; ``UsageError`` says why there is no pair."""
    if left is not None and other_run is not None:
        other = counterpart(store, left, other_run)
        if other is None:
            raise UsageError(f"Run {other_run} has no attempt at this task (task id {left.task_id}).")
        return left, other
    if left is not None and right is not None:
        return left, right
    detail = task_detail(store, run_id, task_idx)
    if detail is None:
        raise UsageError(f"Task {task_idx} of run {run_id} is not in this store.")
    pair = default_pair(detail.attempts)
    if pair is None:
        raise UsageError(f"Task {task_idx} has {len(detail.attempts)} attempt(s): a diff needs two.")
    return pair


class DiffScreen(NelScreen):
    """A (left) against B (right): removed words red on the left, added words green on the right."""

    AUTO_FOCUS = "#diff"
    title_text = "trajectory diff"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("s", "swap", "Swap sides", tooltip="Swap the two sides")]

    def __init__(self, run_id: str, task_idx: int, *, left: Attempt | None = None, right: Attempt | None = None,
                 other_run: str | None = None) -> None:
        super().__init__()
        self.run_id, self.task_idx = run_id, task_idx
        self.left, self.right, self.other_run = left, right, other_run

    def crumb(self) -> str:
        against = f" vs {self.other_run}" if self.other_run else ""
        return f"nel › runs › {self.run_id} › task {self.task_idx} › diff{against}"

    def compose_body(self) -> Iterable[Widget]:
        yield Static("diffing…", id="sides", classes="summary", markup=False)
        # one difference per line, wrapped under the label; the box scrolls when taller than half the screen
        yield VerticalScroll(Horizontal(Static("scoring:", id="scoring-label"), Static("", id="scoring", markup=False),
                                        id="scoring-row"), id="scoring-box")
        yield DiffView(id="diff")

    def on_mount(self) -> None:
        super().on_mount()
        self._load()

    def _load(self) -> None:
        run_id, task_idx, left, right, other = self.run_id, self.task_idx, self.left, self.right, self.other_run

        def job(token: int) -> DiffReady:
            a, b = resolve_pair(self.store(), run_id, task_idx, left, right, other)
            diff = turn_diff(turns(conversation(a)), turns(conversation(b)))
            return DiffReady(token, a, b, diff, scoring_difference(a, b))

        self.start("diff", job)

    def on_diff_ready(self, message: DiffReady) -> None:
        if not self.current("diff", message.token):
            return
        self.left, self.right, self.other_run = message.left, message.right, None
        diff, a, b = message.diff, message.left, message.right
        same_run = a.run_id == b.run_id

        def side(x: Attempt) -> str:
            where = "" if same_run else f"{x.run_id} "
            return f"{where}attempt {x.repeat} ({x.outcome})"

        where = ("▶ marks the first divergence (f returns to it; ] [ step through changes)"
                 if diff.first_divergence is not None else "the two conversations are identical")
        self.query_one("#sides", Static).update(
            f"A {side(a)}  vs  B {side(b)} · {len(diff.changed_rows)} changed region(s)\n{where}")
        self.query_one("#scoring", Static).update("\n".join(message.scoring))
        self.query_one(DiffView).show(diff)

    def failed(self, group: str, text: str) -> None:
        self.query_one("#sides", Static).update("")
        self.say(f"{text} Press Escape to go back.", error=True)

    def action_swap(self) -> None:
        if self.left is not None and self.right is not None:
            self.left, self.right = self.right, self.left
            self._load()
