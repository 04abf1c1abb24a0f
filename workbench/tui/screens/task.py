"""Screen 5: one task: its question, every attempt, and the highlighted attempt's full transcript.

``/`` searches the transcript (``n``/``N`` next and previous match), ``c``/``C`` copy the selected part of the
transcript or the whole attempt to the clipboard (OSC 52, so it works over ssh), ``e`` exports the attempts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static

from workbench.analysis.triage import Attempt, TaskDetail, attempts_markdown, blocks_text, task_detail, transcript
from workbench.export.table_file import Table
from workbench.tui import format as fmt
from workbench.tui.messages import TaskLoaded
from workbench.tui.screens.base import NelScreen
from workbench.tui.widgets.table import NelTable
from workbench.tui.widgets.transcript import TranscriptView

COLUMNS = (("repeat", "#"), ("outcome", "outcome"), ("reward", "reward"), ("extracted", "extracted"),
           ("expected", "expected"), ("failure", "failure"), ("tokens", "tokens"), ("latency", "latency"),
           ("finish", "finish"))


class TaskScreen(NelScreen):
    """A task's statistics and attempts; the transcript below follows the attempt cursor."""

    AUTO_FOCUS = "#attempts"
    title_text = "task detail"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "diff", "Diff", tooltip="Diff two attempts: the marked one and the highlighted one, or a "
                "passing and a failing one"),
        Binding("space", "mark", "Mark", tooltip="Mark the highlighted attempt as the left side of the next diff"),
        Binding("D", "diff_reference", "Diff ref run",
                tooltip="Diff the highlighted attempt against this task in the reference run (space on the runs)"),
        Binding("t", "transcript", "Transcript", tooltip="Move into the transcript (n/p jump between its parts)"),
        Binding("slash", "search", "Search", key_display="/",
                tooltip="Search the transcript (n / N: next / previous match; Escape closes the search)"),
        Binding("n", "next_match", "Next match", show=False),
        Binding("N", "previous_match", "Prev match", show=False),
        Binding("c", "copy_part", "Copy", tooltip="Copy the selected part of the transcript (a message, a tool "
                "call, an output; n/p select) to the clipboard"),
        Binding("C", "copy_attempt", "Copy attempt", show=False,
                tooltip="Copy the highlighted attempt's whole transcript to the clipboard"),
        Binding("e", "export", "Export", tooltip="Export this task's attempts: Markdown, JSON, CSV or Parquet"),
    ]
    DEFAULT_CSS = """
    TaskScreen #question { height: auto; max-height: 6; overflow-y: auto; padding: 0 1; }
    TaskScreen #search { display: none; }
    TaskScreen #search.open { display: block; }
    """

    def __init__(self, run_id: str, task_idx: int) -> None:
        super().__init__()
        self.run_id = run_id
        self.task_idx = task_idx
        self.detail: TaskDetail | None = None
        self.marked: int | None = None

    def crumb(self) -> str:
        return f"nel › runs › {self.run_id} › task {self.task_idx}"

    def compose_body(self) -> Iterable[Widget]:
        yield Static("loading task…", id="summary", classes="summary", markup=False)
        yield Static("", id="question", markup=False)
        yield NelTable(id="attempts")
        yield TranscriptView(id="transcript")
        yield Input(placeholder="/ search the transcript (Enter: to the transcript, n/N: next/previous match)",
                    id="search", compact=True)

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#attempts", NelTable).set_columns(COLUMNS)
        run_id, task_idx = self.run_id, self.task_idx
        self.start("task", lambda token: TaskLoaded(token, task_detail(self.store(), run_id, task_idx)))

    def on_task_loaded(self, message: TaskLoaded) -> None:
        if not self.current("task", message.token):
            return
        detail = self.detail = message.detail
        if detail is None:
            self.query_one("#summary", Static).update("")
            self.say(f"Task {self.task_idx} of run {self.run_id} is not in this store (the run is gone, or has no "
                     "such task). Press Escape to go back.", error=True)
            return
        self.query_one("#summary", Static).update(
            f"task {detail.task_idx} · {detail.task_id} · {detail.bucket} · {detail.n_pass}/{detail.n} pass · "
            f"Wilson {fmt.interval(detail.wilson_low, detail.wilson_high)} · category {detail.category or '—'} · "
            f"expected {fmt.clip(detail.expected_answer, 30)}")
        question = self.query_one("#question", Static)
        question.update(f"Q: {detail.prompt.strip()}" if detail.prompt else "")
        question.display = bool(detail.prompt)
        self._fill()
        if not detail.attempts:
            self.say("No attempt of this task has been made yet.")

    def _fill(self) -> None:
        table = self.query_one("#attempts", NelTable)
        keep = table.highlighted_key()
        table.clear()
        for a in self.detail.attempts if self.detail else []:
            mark = "◆" if a.repeat == self.marked else ""
            table.add_row(
                fmt.num(f"{mark}{a.repeat}"), a.outcome, fmt.num(f"{a.reward:g}"), fmt.clip(a.extracted_answer, 16),
                fmt.clip(a.expected_answer, 16), a.failure_category or "—", fmt.num(fmt.count(a.total_tokens)),
                fmt.num(fmt.millis(a.latency_ms)), a.finish_reason or "—", key=str(a.repeat),
            )
        table.move_to_key(keep)

    def _attempt(self, repeat: int | str | None) -> Attempt | None:
        if self.detail is None or repeat is None:
            return None
        return next((a for a in self.detail.attempts if a.repeat == int(repeat)), None)

    def highlighted(self) -> Attempt | None:
        return self._attempt(self.query_one("#attempts", NelTable).highlighted_key())

    @on(DataTable.RowHighlighted, "#attempts")
    def _show_transcript(self, event: DataTable.RowHighlighted) -> None:
        attempt = self._attempt(event.row_key.value)
        if attempt is not None:
            self.query_one(TranscriptView).show(transcript(attempt))

    @on(DataTable.RowSelected, "#attempts")
    def _enter(self) -> None:
        self.action_transcript()

    # ---- actions ---------------------------------------------------------------------------------------------
    def action_transcript(self) -> None:
        self.query_one(TranscriptView).focus()

    def action_mark(self) -> None:
        attempt = self.highlighted()
        if attempt is not None:
            self.marked = None if self.marked == attempt.repeat else attempt.repeat
            self._fill()

    def action_diff(self) -> None:
        from workbench.tui.screens.diff import DiffScreen

        current, marked = self.highlighted(), self._attempt(self.marked)
        if marked is not None and current is not None and marked.repeat != current.repeat:
            self.app.push_screen(DiffScreen(self.run_id, self.task_idx, left=marked, right=current))
        elif self.detail is not None and len(self.detail.attempts) < 2:
            self.say("This task has fewer than two attempts: nothing to diff in this run (D diffs against the "
                     "reference run).")
        else:
            self.app.push_screen(DiffScreen(self.run_id, self.task_idx))

    def action_diff_reference(self) -> None:
        from workbench.tui.screens.diff import DiffScreen

        reference, current = self.nel.reference_run, self.highlighted()
        if reference is None:
            self.say("No reference run: mark one with space on the runs screen, then press D here.")
        elif reference == self.run_id:
            self.say("The reference run is this run: mark another run on the runs screen (space).")
        elif current is not None:
            self.app.push_screen(DiffScreen(self.run_id, self.task_idx, left=current, other_run=reference))

    # ---- search, copy, export --------------------------------------------------------------------------------
    def action_search(self) -> None:
        search = self.query_one("#search", Input)
        search.add_class("open")
        search.focus()

    @on(Input.Changed, "#search")
    def _search_changed(self, event: Input.Changed) -> None:
        self.query_one(TranscriptView).search(event.value)

    @on(Input.Submitted, "#search")
    def _search_done(self) -> None:
        self.query_one(TranscriptView).focus()

    @on(TranscriptView.SearchMoved)
    def _search_moved(self, event: TranscriptView.SearchMoved) -> None:
        self.say(event.status)

    def action_next_match(self) -> None:
        view = self.query_one(TranscriptView)
        if view.searching:
            view.next_match()

    def action_previous_match(self) -> None:
        view = self.query_one(TranscriptView)
        if view.searching:
            view.previous_match()

    def close_search(self) -> bool:
        """Close an open search (its highlights go); False when none was open."""
        search = self.query_one("#search", Input)
        if not search.has_class("open"):
            return False
        search.remove_class("open")
        search.value = ""
        view = self.query_one(TranscriptView)
        view.clear_search()
        view.focus()
        self.say("")
        return True

    def action_back(self) -> None:
        if not self.close_search():
            super().action_back()

    def action_copy_part(self) -> None:
        view = self.query_one(TranscriptView)
        index = view.selected_part()
        if index is None:
            self.say("Nothing to copy: no attempt is shown.")
            return
        block = view.blocks[index]
        self.app.copy_to_clipboard(block.text)
        self.notify(f"Copied {block.title} ({len(block.text):,} characters) to the clipboard.")

    def action_copy_attempt(self) -> None:
        attempt = self.highlighted()
        if attempt is None:
            self.say("Nothing to copy: this task has no attempt.")
            return
        text = blocks_text(transcript(attempt))
        self.app.copy_to_clipboard(text)
        self.notify(f"Copied attempt {attempt.repeat}'s transcript ({len(text):,} characters) to the clipboard.")

    def export_table(self) -> Table | None:
        """The task's attempts, every column of the store (nested ones as they are), and as Markdown transcripts."""
        detail = self.detail
        if detail is None:
            return None
        columns = list(Attempt.__dataclass_fields__)
        return Table(name=f"{detail.run_id}-task-{detail.task_idx}-attempts",
                     what=f"{len(detail.attempts)} attempt(s) of task {detail.task_idx}", columns=columns,
                     rows=[[getattr(a, c) for c in columns] for a in detail.attempts],
                     document=attempts_markdown(detail))

    def action_export(self) -> None:
        from workbench.tui.export_view import ExportDialog

        table = self.export_table()
        if table is None:
            self.say("The task is still loading: press e again in a moment.")
            return
        self.app.push_screen(ExportDialog(table, self.nel.store_path.parent), self._exported)

    def _exported(self, line: str | None) -> None:
        if line:
            self.say(line)
