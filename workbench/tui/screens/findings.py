"""Why did the score change? The diagnosis of two runs (what ``nel diagnose A B`` reports), as a list of
heuristic findings in BLADE's taxonomy, each with its claim, the rule that produced it, the suggested
intervention and the tasks it cites, each with its question; Enter on a finding moves to its cited tasks,
Enter on a cited task opens it (every one of them, not only the first).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.widget import Widget
from textual.widgets import DataTable, Static

from workbench.analysis.diagnosis.types import TAXONOMY_LABELS
from workbench.analysis.sources import RunData
from workbench.analysis.triage import task_questions
from workbench.analysis.triage.compare import RunFinding, diagnose_runs, findings_by_run
from workbench.tui import format as fmt
from workbench.tui.messages import DiagnosisLoaded, Reply
from workbench.tui.screens.base import NelScreen
from workbench.tui.widgets.table import NelTable

COLUMNS = (("scope", "about"), ("category", "category"), ("tasks", "tasks"), ("title", "finding"))
CITED_COLUMNS = (("task", "task"), ("question", "question"))
CITED_SHOWN = 12
CRUMB_ID_CELLS = 18
"""Each run id in the crumb: both fit the 78 cells of an 80-column line after "nel › runs › compare › findings"."""


class CitedLoaded(Reply):
    """The questions of the tasks a finding cites (index → question)."""

    def __init__(self, token: int, row: int, questions: dict[int, str | None]) -> None:
        super().__init__(token)
        self.row = row
        self.questions = questions


class FindingsScreen(NelScreen):
    """Findings of ``baseline`` → ``candidate``; the detail of the highlighted one below the list."""

    AUTO_FOCUS = "#findings"
    title_text = "findings"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open task", show=False, tooltip="Open a task the finding cites"),
    ]
    DEFAULT_CSS = """
    FindingsScreen #findings { height: auto; max-height: 35%; }
    FindingsScreen #detail { height: auto; max-height: 35%; padding: 0 1; border-top: solid $primary-muted;
                             overflow-y: auto; }
    FindingsScreen #cited { height: 1fr; }
    FindingsScreen #summary.live { color: $text-warning; }
    """

    def __init__(self, baseline: str, candidate: str, *, runs: tuple[RunData, RunData] | None = None) -> None:
        """``runs``: both runs as the compare screen read them (finished runs), so the diagnosis starts at once."""
        super().__init__()
        self.baseline, self.candidate = baseline, candidate
        self._runs = runs
        self.findings: list[RunFinding] = []

    def crumb(self) -> str:
        a, b = (fmt.elide_middle(run_id, CRUMB_ID_CELLS) for run_id in (self.baseline, self.candidate))
        return f"nel › runs › compare › findings   A {a} → B {b}"

    def compose_body(self) -> Iterable[Widget]:
        yield Static(f"diagnosing {self.baseline} → {self.candidate}…", id="summary", classes="summary",
                     markup=False)
        yield NelTable(id="findings")
        yield Static("", id="detail", markup=False)
        yield NelTable(id="cited")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#findings", NelTable).set_columns(COLUMNS)
        self.query_one("#cited", NelTable).set_columns(CITED_COLUMNS)
        baseline, candidate = self.baseline, self.candidate

        def job(token: int) -> DiagnosisLoaded:
            diagnosis = diagnose_runs(self.store(), baseline, candidate, runs=self._runs)
            self._runs = None  # not held once diagnosed
            return DiagnosisLoaded(token, diagnosis, findings_by_run(diagnosis))

        self.start("diagnose", job)

    def on_diagnosis_loaded(self, message: DiagnosisLoaded) -> None:
        if not self.current("diagnose", message.token):
            return
        self.findings = message.findings
        shift = message.diagnosis.shift
        head = (f"Δpass@1 {shift.delta:+.4f} over {shift.n_paired} paired tasks "
                f"({shift.pass_at_1_a:.4f} → {shift.pass_at_1_b:.4f}), the sum of the tasks' contributions · "
                if shift is not None else "")
        live = "".join(f"! {w}\n" for w in message.diagnosis.warnings)  # first: the numbers below will move
        summary = self.query_one("#summary", Static)
        summary.update(f"{live}{head}{len(self.findings)} findings. Heuristic: each comes from a documented rule "
                       "(docs/diagnose.md) and says where to look first, not what the cause is.")
        summary.set_class(bool(live), "live")
        table = self.query_one("#findings", NelTable)
        table.clear()
        for i, rf in enumerate(self.findings):
            f = rf.finding
            table.add_row(rf.scope, TAXONOMY_LABELS.get(f.category, f.category), fmt.num(str(len(f.task_idx))),
                          fmt.clip(f.title, 70), key=str(i))
        if not self.findings:
            self.query_one("#detail", Static).update("No rule found enough evidence to speak: nothing stands out.")
        self._show(0)

    def failed(self, group: str, text: str) -> None:
        self.query_one("#summary", Static).update(f"Cannot diagnose {self.baseline} → {self.candidate}.\n{text}")
        self.query_one("#summary").add_class("error")

    def _show(self, row: int) -> None:
        if not 0 <= row < len(self.findings):
            return
        rf = self.findings[row]
        f = rf.finding
        cited = ", ".join(f"#{i}" for i in f.task_idx[:CITED_SHOWN])
        more = f" and {len(f.task_idx) - CITED_SHOWN} more" if len(f.task_idx) > CITED_SHOWN else ""
        self.query_one("#detail", Static).update(
            f"{f.title}\n\n{f.detail}\n\nSuggested: {f.suggestion}\n\n"
            f"category: {TAXONOMY_LABELS.get(f.category, f.category)} · rule: {f.rule} (heuristic)\n"
            f"tasks in {rf.run_id}: {cited or 'none'}{more}" + (" · Enter lists them" if f.task_idx else ""))
        cited_table = self.query_one("#cited", NelTable)
        cited_table.clear()
        cited_table.border_title = (f"the {len(f.task_idx)} task(s) it cites in "
                                    f"{fmt.elide_middle(rf.run_id, fmt.ID_CELLS)}")
        for i in f.task_idx:
            cited_table.add_row(fmt.num(f"#{i}"), "…", key=str(i))
        run_id, idxs = rf.run_id, list(f.task_idx)
        if idxs:
            self.start("cited", lambda token: CitedLoaded(token, row, task_questions(self.store(), run_id, idxs)))

    def on_cited_loaded(self, message: CitedLoaded) -> None:
        if not self.current("cited", message.token):
            return
        table = self.query_one("#cited", NelTable)
        for i, question in message.questions.items():
            if str(i) in {str(k.value) for k in table.rows}:
                table.update_cell(str(i), "question", fmt.clip(question, 100), update_width=True)

    @on(DataTable.RowHighlighted, "#findings")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show(event.cursor_row)

    @on(DataTable.RowSelected, "#findings")
    def _selected(self) -> None:
        self.action_open()

    @on(DataTable.RowSelected, "#cited")
    def _cited_selected(self, event: DataTable.RowSelected) -> None:
        self._open_task(int(str(event.row_key.value)))

    def action_open(self) -> None:
        """Enter on a finding: to its cited tasks (straight into the task when it cites one)."""
        row = self.query_one("#findings", NelTable).cursor_row
        if not 0 <= row < len(self.findings):
            return
        f = self.findings[row].finding
        if not f.task_idx:
            self.say("This finding cites no task.")
        elif len(f.task_idx) == 1:
            self._open_task(f.task_idx[0])
        else:
            self.query_one("#cited", NelTable).focus()

    def _open_task(self, task_idx: int) -> None:
        from workbench.tui.screens.task import TaskScreen

        row = self.query_one("#findings", NelTable).cursor_row
        if 0 <= row < len(self.findings):
            self.app.push_screen(TaskScreen(self.findings[row].run_id, task_idx))

    def action_back(self) -> None:
        cited = self.query_one("#cited", NelTable)
        if cited.has_focus:  # back from the cited tasks to the findings first
            self.query_one("#findings", NelTable).focus()
        else:
            super().action_back()
