"""Screen 7: two runs compared, paired by task: the verdict and its statistics, the flips (regressions
first), the per-category deltas and what moved the score, by outcome transition (``always→never``, …);
Enter on a transition lists its tasks, largest change first; Enter on a task diffs it across the two runs.

The numbers are ``nel compare``'s (``workbench.analysis.compare``), computed in a worker; the screen only
lays them out, so the TUI and the CLI never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import DataTable, Static

from workbench.analysis.compare import CategoryDelta, Comparison, Flip, Flips
from workbench.analysis.diagnosis.attribution import points
from workbench.analysis.diagnosis.types import RankedTask, ShiftGroup
from workbench.analysis.triage import questions_by_task_id
from workbench.analysis.triage.compare import TriageComparison, cross_run_pair, run_comparison
from workbench.store.reader import Store
from workbench.tui import format as fmt
from workbench.tui.messages import ComparisonLoaded, CounterpartFound, Reply
from workbench.tui.screens.base import NelScreen
from workbench.tui.widgets.table import Cell, NelTable

QUESTIONS_FIRST = 60  # flips whose questions come with the comparison: more rows than a tall terminal shows
FLIPS_SHOWN = 500  # per kind: a table of thousands of rows is slow to fill and no one reads past the top
FLIP_COLUMNS = (("kind", " "), ("task", "task"), ("question", "question"), ("category", "category"),
                ("a", "A k/n"), ("b", "B k/n"), ("delta", "Δ"))
CATEGORY_CELLS = 12
CATEGORY_COLUMNS = (("category", "category"), ("delta", "Δ"), ("a", "A"), ("b", "B"), ("tasks", "tasks"),
                    ("worse", "▼"), ("better", "▲"), ("ci", "95% CI"))
MOVED_COLUMNS = (("group", "transition / task"), ("contribution", "share of Δ"), ("tasks", "tasks"), ("delta", "Δ"),
                 ("p", "p"))
GROUP_KEY = "group:"
"""Row keys of the transition groups in the moved table (a task's row key is its task id)."""
TABLES = ("#flips", "#categories", "#moved")
VERDICT_STYLES = {"PASS": "bold green", "WARN": "bold yellow", "BLOCK": "bold red", "INCONCLUSIVE": "bold blue"}
TEST_LABELS = {"mcnemar_exact": "McNemar", "paired_t": "paired t", "wilcoxon": "Wilcoxon",
               "sign_flip_permutation": "sign-flip"}


def signed(value: float, digits: int = 3) -> str:
    return "—" if math.isnan(value) else f"{value:+.{digits}f}"


def p_value(p: float) -> str:
    return "—" if math.isnan(p) else f"{p:.3f}" if p >= 1e-3 else f"{p:.1e}"


def delta_cell(value: float, digits: int = 3) -> Text:
    """A right-aligned signed number, red when it fell and green when it rose."""
    style = "red" if value < 0 else "green" if value > 0 else ""
    return Text(signed(value, digits), style=style, justify="right")


def passes(k: int, n: int, errors: int) -> Text:
    return fmt.num(f"{k}/{n}" + (f" ({errors} err)" if errors else ""))


def shown_flips(flips: Flips, category: str | None) -> list[tuple[str, Flip]]:
    """The flips the table lists, with their kind (▼ fell, ▲ rose): the first ``FLIPS_SHOWN`` regressions, then
    improvements, of ``category`` (None: of every category)."""
    out: list[tuple[str, Flip]] = []
    for kind, items in (("▼", flips.regressions), ("▲", flips.improvements)):
        chosen = [x for x in items if category is None or x.category == category]
        out += [(kind, x) for x in chosen[:FLIPS_SHOWN]]
    return out


def flip_questions(store: Store, task_ids: list[str]) -> dict[str, str | None]:
    """The question of each of ``task_ids`` (None for a task the store has no text for: asked once, not again)."""
    found = questions_by_task_id(store, task_ids)
    return {task_id: found.get(task_id) for task_id in task_ids}


class QuestionsLoaded(Reply):
    """The questions of flips the table lists but the comparison did not bring (another category's)."""

    def __init__(self, token: int, questions: dict[str, str | None]) -> None:
        super().__init__(token)
        self.questions = questions


def headline(c: Comparison) -> Text:
    """The verdict and the numbers it rests on: the metric on each side, the delta with its interval, the
    p-values of the tests that apply, the pairing, any warning, and the verdict's reasons."""
    s, cov, f = c.score, c.coverage, c.flips
    text = Text()
    text.append(f" {c.verdict} ", style=f"reverse {VERDICT_STYLES.get(c.verdict, 'bold')}")
    text.append(f"  {s.metric}  A {fmt.rate(s.baseline)} → B {fmt.rate(s.candidate)}  Δ ")
    text.append(signed(s.delta), style="red" if s.delta < 0 else "green" if s.delta > 0 else "")
    interval = "—" if math.isnan(s.low) else f"[{s.low:+.3f}, {s.high:+.3f}]"
    text.append(f" 95% CI {interval}\n")
    shown = [t for t in s.tests if t.name in TEST_LABELS and t.applicable]
    tests = " · ".join(f"{TEST_LABELS[t.name]} {p_value(t.p_value)}" for t in shown) or "none applies"
    mcnemar = "" if c.mcnemar_applies else " · McNemar n/a"
    text.append(f"p-values: {tests}{mcnemar}\n")
    union = cov.n_paired + len(cov.only_baseline) + len(cov.only_candidate)
    coverage = f"{100 * cov.n_paired / union:.0f}%" if union else "—"
    text.append(f"{cov.n_paired} paired tasks ({coverage} coverage: {len(cov.only_baseline)} only in A, "
                f"{len(cov.only_candidate)} only in B) · {len(f.regressions)} fell, {len(f.improvements)} rose, "
                f"{f.n_unchanged} same")
    for warning in c.warnings:
        text.append(f"\n! {warning}", style="bold red")
    for reason in c.reasons:
        text.append(f"\n· {reason}", style="dim" if c.verdict == "PASS" else "")
    return text


class CompareScreen(NelScreen):
    """Run A (the baseline) against run B (the candidate), paired by task."""

    AUTO_FOCUS = "#flips"
    title_text = "compare two runs"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "diff", "Diff", tooltip="Diff the highlighted task across the two runs: a passing attempt on "
                "the side that scored better against a failing one on the other (Enter too)"),
        Binding("r", "regressions", "Drops", tooltip="Jump to the first regression (the largest drop)"),
        Binding("i", "improvements", "Gains", tooltip="Jump to the first improvement (the largest gain)"),
        Binding("s", "swap", "Swap", tooltip="Swap the sides: B becomes the baseline, A the candidate"),
        Binding("f", "findings", "Findings",
                tooltip="Why did the score change? The diagnosis' heuristic findings (as nel diagnose A B)"),
        Binding("tab", "next_table", "Next table", show=False,
                tooltip="Move to the next table: flips → categories → what moved the score"),
        Binding("shift+tab", "previous_table", "Previous table", show=False, tooltip="Move to the previous table"),
        Binding("x", "clear", "All categories", show=False,
                tooltip="Show the flips of every category (Enter on a category shows only its flips)"),
        Binding("R", "reload", "Reload", show=False, tooltip="Compare the two runs again (a running run has moved on)"),
        Binding("e", "export", "Export", show=False, tooltip="Export the flip list: Markdown, JSON, CSV or Parquet"),
    ]
    DEFAULT_CSS = """
    CompareScreen #headline {
        height: auto;
        max-height: 40%;
        overflow-y: auto;
        padding: 0 1;
    }
    CompareScreen #headline.error {
        color: $text-error;
    }
    CompareScreen #upper {
        height: 3fr;
    }
    CompareScreen #lower {
        height: 2fr;
    }
    CompareScreen #flips, CompareScreen #categories, CompareScreen #moved {
        border-top: solid $primary-muted;
    }
    CompareScreen #flips:focus, CompareScreen #categories:focus, CompareScreen #moved:focus {
        border-top: solid $accent;
    }
    CompareScreen #categories {
        width: 1fr;
    }
    CompareScreen #moved {
        width: 1fr;
        margin-left: 1;
    }
    """

    def __init__(self, baseline: str, candidate: str) -> None:
        super().__init__()
        self.baseline, self.candidate = baseline, candidate
        self.result: TriageComparison | None = None
        self.category: str | None = None
        """The category whose flips alone are shown (Enter on a category), None for all."""
        self._flips: dict[str, Flip] = {}
        self._questions: dict[str, str | None] = {}
        """Task id → question, for the flips listed so far (read in workers, only for the rows shown)."""
        self._moved: dict[str, RankedTask] = {}
        self._expanded: set[str] = set()
        """Transition groups whose tasks the moved table lists (Enter on a group)."""

    def crumb(self) -> str:
        a, b = (fmt.elide_middle(run_id, fmt.ID_CELLS) for run_id in (self.baseline, self.candidate))
        return f"nel › runs › compare A {a} → B {b}"

    def compose_body(self) -> Iterable[Widget]:
        yield Static("", id="headline", markup=False)
        yield Vertical(NelTable(id="flips"), id="upper")
        yield Horizontal(NelTable(id="categories"), NelTable(id="moved"), id="lower")

    def on_mount(self) -> None:
        super().on_mount()
        for selector, columns in zip(TABLES, (FLIP_COLUMNS, CATEGORY_COLUMNS, MOVED_COLUMNS), strict=True):
            self.query_one(selector, NelTable).set_columns(columns)
        self._show_tables(False)
        self.action_reload()

    # ---- loading ---------------------------------------------------------------------------------------------
    def action_reload(self) -> None:
        """Compare the two runs (again) in a worker."""
        baseline, candidate, category = self.baseline, self.candidate, self.category
        headline = self.query_one("#headline", Static)
        headline.remove_class("error")
        headline.update(f"comparing {baseline} (A, baseline) with {candidate} (B, candidate)…")
        self.query_one("#crumb", Static).update(self.crumb())

        def job(token: int) -> ComparisonLoaded:
            result = run_comparison(self.store(), baseline, candidate)
            # the questions of the rows a screen shows first; the table's other rows get theirs once it is drawn
            ids = [x.task_id for _, x in shown_flips(result.comparison.flips, category)][:QUESTIONS_FIRST]
            return ComparisonLoaded(token, result, flip_questions(self.store(), ids))

        self.start("compare", job)

    def on_comparison_loaded(self, message: ComparisonLoaded) -> None:
        if not self.current("compare", message.token):
            return
        self.result = result = message.result
        self._questions = message.questions
        c = result.comparison
        if self.category is not None and all(d.category != self.category for d in c.categories):
            self.category = None
        self.query_one("#headline", Static).update(headline(c))
        self._fill_flips()
        self._fill_categories(c)
        self._fill_moved(result)
        self._show_tables(True)
        self.say("")
        self.refresh_bindings()

    def failed(self, group: str, text: str) -> None:
        if group != "compare":
            self.say(text, error=True)
            return
        self.result = None
        self._show_tables(False)
        headline = self.query_one("#headline", Static)
        headline.add_class("error")
        headline.update(f"Cannot compare {self.baseline} (A) with {self.candidate} (B).\n{text}\n"
                        "Press Escape to go back to the runs, or R to try again.")
        self.refresh_bindings()

    def _show_tables(self, shown: bool) -> None:
        self.query_one("#upper").display = shown
        self.query_one("#lower").display = shown

    # ---- the tables ------------------------------------------------------------------------------------------
    def _fill_flips(self) -> None:
        table = self.query_one("#flips", NelTable)
        keep = table.highlighted_key()
        table.clear()
        self._flips = {}
        if self.result is None:
            return
        f = self.result.comparison.flips
        counts = []
        for kind, items in (("▼", f.regressions), ("▲", f.improvements)):
            n = sum(1 for x in items if self.category is None or x.category == self.category)
            counts.append(f"{n} {kind}" + (f" (first {FLIPS_SHOWN})" if n > FLIPS_SHOWN else ""))
        missing = []
        for kind, x in shown_flips(f, self.category):
            self._flips[x.task_id] = x
            if x.task_id in self._questions:
                question = fmt.clip(self._questions[x.task_id], fmt.QUESTION_CELLS)
            else:
                question = "…"
                missing.append(x.task_id)
            table.add_row(Text(kind, style="red" if kind == "▼" else "green"), fmt.num(str(x.task_idx)), question,
                          fmt.clip(x.category or "—", CATEGORY_CELLS),
                          passes(x.baseline_passes, x.baseline_attempts, x.baseline_errors),
                          passes(x.candidate_passes, x.candidate_attempts, x.candidate_errors),
                          delta_cell(x.delta), key=x.task_id)
        where = f" in {self.category} (x: all)" if self.category else ""
        table.border_title = f"flips{where}: {', '.join(counts)} · Enter diffs a task across the runs"
        table.move_to_key(keep)
        if missing:
            self.start("questions", lambda token: QuestionsLoaded(token, flip_questions(self.store(), missing)))

    def on_questions_loaded(self, message: QuestionsLoaded) -> None:
        if self.current("questions", message.token):
            self._questions.update(message.questions)
            self._fill_flips()

    def _fill_categories(self, c: Comparison) -> None:
        table = self.query_one("#categories", NelTable)
        keep = table.highlighted_key()
        table.clear()
        for d in c.categories:
            table.add_row(*self._category_row(d), key=d.category)
        table.border_title = f"by {c.category_column}" if c.categories else "no task categories in these runs"
        table.move_to_key(keep)

    @staticmethod
    def _category_row(d: CategoryDelta) -> tuple[Cell, ...]:
        ci = f"[{d.low:+.2f}, {d.high:+.2f}]" if d.n_tasks > 1 and not math.isnan(d.low) else "—"
        return (fmt.clip(d.category, 14), delta_cell(d.delta), fmt.num(fmt.rate(d.baseline)),
                fmt.num(fmt.rate(d.candidate)), fmt.num(str(d.n_tasks)), fmt.num(str(d.n_regressions)),
                fmt.num(str(d.n_improvements)), fmt.num(ci))

    def _fill_moved(self, result: TriageComparison) -> None:
        """One row per transition group (count, summed share of Δ in percentage points, mean Δ per task), and
        under an expanded group its tasks by rank."""
        table = self.query_one("#moved", NelTable)
        keep = table.highlighted_key()
        table.clear()
        self._moved = {}
        attribution = result.attribution
        for group in attribution.groups:
            table.add_row(*self._group_row(group, attribution.n_paired), key=GROUP_KEY + group.transition)
            if group.transition in self._expanded:
                for task in group.tasks:
                    self._moved[task.task_id] = task
                    table.add_row(*self._task_row(task), key=task.task_id)
        table.border_title = (f"what moved: Σ {points(attribution.delta)}, {attribution.n_moved} tasks in "
                              f"{sum(g.moved for g in attribution.groups)} groups · Enter lists a group's tasks")
        table.move_to_key(keep)

    def _group_row(self, g: ShiftGroup, n_paired: int) -> tuple[Cell, ...]:
        open_ = g.transition in self._expanded
        listed = f" (first {len(g.tasks)})" if open_ and len(g.tasks) < g.n_tasks else ""
        style = "red" if g.contribution < 0 else "green" if g.contribution > 0 else "dim"
        mean = g.contribution * n_paired / g.n_tasks if g.n_tasks else math.nan
        return (Text(f"{'▾' if open_ else '▸'} {g.transition}{listed}", style=style),
                Text(points(g.contribution), style=style, justify="right"), fmt.num(f"{g.n_tasks:,}"), delta_cell(mean),
                Text(""))

    @staticmethod
    def _task_row(t: RankedTask) -> tuple[Cell, ...]:
        category = f" {fmt.clip(t.category, 12)}" if t.category else ""
        return (Text(f"   #{t.task_idx_a}{category}", style="dim" if t.change == 0 else ""),
                fmt.num(points(t.contribution)), fmt.num(f"{t.passes_a}/{t.attempts_a}→{t.passes_b}/{t.attempts_b}"),
                delta_cell(t.change), fmt.num(p_value(t.p_value)))

    @on(DataTable.RowSelected, "#flips")
    def _enter_task(self) -> None:
        self.action_diff()

    @on(DataTable.RowSelected, "#moved")
    def _enter_moved(self, event: DataTable.RowSelected) -> None:
        """Enter on a transition group lists (or hides) its tasks; on a task, diffs it across the runs."""
        key = str(event.row_key.value)
        if not key.startswith(GROUP_KEY):
            self.action_diff()
            return
        self._expanded ^= {key[len(GROUP_KEY):]}
        if self.result is not None:
            self._fill_moved(self.result)

    @on(DataTable.RowSelected, "#categories")
    def _enter_category(self, event: DataTable.RowSelected) -> None:
        category = str(event.row_key.value)
        self.category = None if self.category == category else category
        self._fill_flips()
        self.query_one("#flips", NelTable).move_to_key(None)

    # ---- actions ---------------------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Keys that act on the comparison are greyed out until it is loaded."""
        if action in ("diff", "regressions", "improvements", "clear"):
            return True if self.result is not None else None
        return True

    def _highlighted_task(self) -> tuple[str, float, float] | None:
        """The highlighted task of the focused table (flips unless the moved table has focus):
        its id and its score in A and in B."""
        if self.focused is not None and self.focused.id == "moved":
            key = self.query_one("#moved", NelTable).highlighted_key()
            m = self._moved.get(key or "")
            return (m.task_id, m.p_a, m.p_b) if m else None
        key = self.query_one("#flips", NelTable).highlighted_key()
        f = self._flips.get(key or "")
        return (f.task_id, f.baseline_score, f.candidate_score) if f else None

    def action_diff(self) -> None:
        """Diff the highlighted task across the runs (in a worker: the attempts are read first)."""
        task = self._highlighted_task()
        if task is None:
            self.say("No task to diff: highlight a flip, or a task of a transition group (Enter on a group "
                     "lists its tasks).")
            return
        task_id, a_score, b_score = task
        baseline, candidate = self.baseline, self.candidate

        def job(token: int) -> CounterpartFound:
            left, right = cross_run_pair(self.store(), baseline, candidate, task_id, baseline_better=a_score > b_score)
            return CounterpartFound(token, left, right, candidate)

        self.start("diff", job)

    def on_counterpart_found(self, message: CounterpartFound) -> None:
        from workbench.tui.screens.diff import DiffScreen

        if not self.current("diff", message.token) or not self.is_current:
            return  # a newer request, or the user has moved on meanwhile
        a = message.attempt
        if message.other is None:
            self.say(f"Run {message.other_run} has no attempt at task {a.task_id} (any more).", error=True)
            return
        self.say("")
        self.app.push_screen(DiffScreen(a.run_id, a.task_idx, left=a, right=message.other,
                                        other_run=message.other_run))

    def _jump(self, kind: str, what: str) -> None:
        table = self.query_one("#flips", NelTable)
        table.focus()
        for row, key in enumerate(table.rows):
            flip = self._flips.get(str(key.value))
            if flip is not None and (flip.delta < 0) == (kind == "regression"):
                table.move_cursor(row=row, animate=False, scroll=True)
                return
        where = f" in {self.category}" if self.category else ""
        self.say(f"No {what}{where}: no paired task {'fell' if kind == 'regression' else 'rose'}.")

    def action_findings(self) -> None:
        from workbench.tui.screens.findings import FindingsScreen

        runs = None if self.result is None else self.result.reusable_runs
        self.app.push_screen(FindingsScreen(self.baseline, self.candidate, runs=runs))

    def action_regressions(self) -> None:
        self._jump("regression", "regression")

    def action_improvements(self) -> None:
        self._jump("improvement", "improvement")

    def action_clear(self) -> None:
        if self.category is not None:
            self.category = None
            self._fill_flips()

    def action_swap(self) -> None:
        """B becomes the baseline and A the candidate: every delta changes sign, the flips trade places."""
        self.baseline, self.candidate = self.candidate, self.baseline
        self.action_reload()

    def _cycle(self, step: int) -> None:
        tables = [self.query_one(selector, NelTable) for selector in TABLES]
        current = next((i for i, t in enumerate(tables) if t.has_focus), -1)
        tables[(current + step) % len(tables)].focus()

    def action_next_table(self) -> None:
        self._cycle(1)

    def action_previous_table(self) -> None:
        self._cycle(-1)

    def action_export(self) -> None:
        """The whole flip list, each task with its question, to a file (``export_view``)."""
        from workbench.tui.export_view import export_later, flips_table

        if self.result is None:
            self.say("The comparison is still loading: press e again in a moment.")
            return
        flips, baseline, candidate = self.result.comparison.flips, self.baseline, self.candidate
        ids = [x.task_id for x in (*flips.regressions, *flips.improvements)]
        export_later(self, lambda: flips_table(flips, questions_by_task_id(self.store(), ids), baseline, candidate))
