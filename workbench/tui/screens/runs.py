"""Screen 1: every run in the store: sort, filter, open its tasks or watch it live."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static

from workbench.analysis.triage import RUN_SORTS, RunRow, runs_table, sort_filter_runs
from workbench.tui import format as fmt
from workbench.tui.messages import RunsLoaded
from workbench.tui.screens.base import NelScreen
from workbench.tui.widgets.table import NelTable, SortOrder

COLUMNS = (("mark", " "), ("run", "run"), ("source", "source"), ("status", "status"), ("pass@1", "pass@1 [95% CI]"),
           ("size", "tasks×rep"), ("benchmark", "benchmark"), ("model", "model"), ("started", "started (UTC)"),
           ("duration", "duration"), ("steps", "steps"))
"""The source (nel, gym, lm-eval, inspect: which harness produced the run) sits by the run id, seen at 80 columns."""
SORTABLE = RUN_SORTS
"""Each sort is named after the column it orders by, so the arrow goes on that column's header."""
LARGEST_FIRST = ("started", "pass@1", "duration", "steps")
"""Times and numbers start newest/largest first; the other columns are text and start a→z."""
OTHER_CELLS = 50
"""What the columns left of and after the run id take at 80 columns (mark, source, status, pass@1, padding and
the scrollbar): the run column gets the rest of the terminal's width, between RUN_CELLS_MIN and RUN_CELLS_MAX."""
RUN_CELLS_MIN, RUN_CELLS_MAX = 18, 60
MARK_CELLS = 24
"""A marked run's id in the status line, after the highlighted one's (the mark column says which row it is)."""
REFRESH_S = 2.0


class RunsScreen(NelScreen):
    """The first screen: one row per run, newest first."""

    AUTO_FOCUS = "#runs"
    title_text = "runs"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "new_run", "New run",
                tooltip="Start a run in the background and watch it live"),
        Binding("l", "live", "Live", tooltip="Watch the highlighted run live (progress, rates, failures)"),
        Binding("space", "mark", "Mark",
                tooltip="Mark the highlighted run (two at most): A is the baseline and D's reference, B the candidate"),
        Binding("c", "compare", "Compare",
                tooltip="Compare the marked runs A and B (or A with the highlighted run)"),
        Binding("slash", "filter", "Filter", key_display="/",
                tooltip="Filter runs by id, source, benchmark, model or status"),
        Binding("s", "sort", "Sort", tooltip="Sort by the next column (started, run, benchmark, model, …)"),
        Binding("S", "reverse", "Reverse", show=False, tooltip="Reverse the sort order"),
        Binding("R", "reload", "Reload", show=False, tooltip="Read the runs again"),
        Binding("escape", "back", "Clear filter", show=False, tooltip="Clear the filter"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[RunRow] = []
        self.order = SortOrder("started", descending=True)
        self.loaded = False
        self.run_cells = RUN_CELLS_MAX
        """How many characters of a run id the run column shows (the middle elided beyond)."""

    def crumb(self) -> str:
        return f"nel › runs   {self.nel.store_path}"

    def compose_body(self) -> Iterable[Widget]:
        yield Input(placeholder="/ filter by run, source, benchmark, model or status", id="filter", compact=True)
        yield Static("", id="status", markup=False)
        yield NelTable(id="runs")
        yield Static("", id="panel", markup=False)

    def on_mount(self) -> None:
        super().on_mount()
        table = self.query_one("#runs", NelTable)
        table.set_columns(COLUMNS, sortable=SORTABLE)
        table.show_sort(self.order)
        self.run_cells = self._run_cells()
        self.query_one("#panel").display = False
        self.query_one("#status", Static).update("loading runs…")
        self.action_reload()
        self.set_interval(REFRESH_S, self._refresh_running)

    # ---- loading ------------------------------------------------------------------------------------
    def action_reload(self) -> None:
        """Read every run again (in a worker)."""
        self.start("runs", lambda token: RunsLoaded(token, runs_table(self.store())))

    def _refresh_running(self) -> None:
        if self.is_current and any(r.status == "running" for r in self.runs):
            self.action_reload()

    def on_runs_loaded(self, message: RunsLoaded) -> None:
        if not self.current("runs", message.token):
            return
        self.runs, self.loaded = message.runs, True
        self.query_one("#filter").display = True  # a reload after a store error brings the list back
        self.query_one("#panel").remove_class("error")
        self.query_one("#panel").display = not self.runs
        self.query_one("#runs").display = bool(self.runs)
        if not self.runs:
            self.query_one("#panel", Static).update(
                "No runs in this store yet.\n\nPress n to start one here (ctrl+o in the form fills in the built-in "
                "mock model), or run `nel eval run -b gsm8k --model-url URL --model-id NAME "
                f"--store {self.nel.store_path}` and press R to reload.")
        self.say("")
        self._fill()
        self.refresh_bindings()

    def failed(self, group: str, text: str) -> None:
        """A store that cannot be read: say why where the table would be."""
        self.query_one("#runs").display = False
        self.query_one("#filter").display = False
        self.query_one("#status", Static).update("")
        panel = self.query_one("#panel", Static)
        panel.update(f"Cannot read the store.\n\n{text}\n\nStart nel tui with --store PATH naming a store written by "
                     "`nel eval run` (a nel.duckdb file, or the directory that holds one), or press n to start a "
                     "run that creates this one. Press q to quit.")
        panel.add_class("error")
        panel.display = True

    # ---- showing --------------------------------------------------------------------------------------
    def _run_cells(self) -> int:
        return max(RUN_CELLS_MIN, min(RUN_CELLS_MAX, self.app.size.width - OTHER_CELLS))

    def on_resize(self, event: Resize) -> None:
        """A narrower terminal elides more of each run id (and a wider one less)."""
        cells = self._run_cells()
        if cells != self.run_cells:
            self.run_cells = cells
            if self.loaded:
                self._fill()

    def _shown(self) -> list[RunRow]:
        text = self.query_one("#filter", Input).value
        return sort_filter_runs(self.runs, sort=self.order.column, descending=self.order.descending, text=text)

    def _fill(self) -> None:
        table = self.query_one("#runs", NelTable)
        keep = table.highlighted_key()
        table.clear()
        shown = self._shown()
        marks = dict(zip(self.nel.marked_runs, ("A", "B"), strict=False))
        for r in shown:
            table.add_row(
                marks.get(r.run_id, " "), fmt.elide_middle(r.run_id, self.run_cells), r.source, r.status,
                fmt.estimate(r.pass_at_1, r.pass_at_1_low, r.pass_at_1_high), fmt.num(f"{r.n_tasks}×{r.n_repeats}"),
                r.benchmark, r.model_id or "—", fmt.when(r.created_at), fmt.num(fmt.duration(r.duration_s)),
                fmt.num(f"{r.n_steps}/{r.n_steps_expected}"), key=r.run_id,
            )
        table.move_to_key(keep)
        table.show_sort(self.order)
        self._show_status(len(shown))

    def _show_status(self, shown: int | None = None) -> None:
        """How many runs are shown, the highlighted run's id in full when the table elides it, and the marks (the
        sort is on its column's header)."""
        if shown is None:
            shown = self.query_one("#runs", NelTable).row_count
        marks = dict(zip(self.nel.marked_runs, ("A", "B"), strict=False))
        marked = "   " + "  ".join(f"{m}: {fmt.elide_middle(run_id, MARK_CELLS)}"
                                   for run_id, m in marks.items()) if marks else ""
        current = self._highlighted()
        full = f"   ▸ {current}" if current is not None and len(current) > self.run_cells else ""
        self.query_one("#status", Static).update(
            f"{shown} of {len(self.runs)} runs{full}{marked}")

    @on(DataTable.RowHighlighted, "#runs")
    def _highlighted_changed(self) -> None:
        self._show_status()

    @on(Input.Changed, "#filter")
    def _filter_changed(self) -> None:
        self._fill()

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        self.query_one("#runs").focus()

    @on(DataTable.HeaderSelected, "#runs")
    def _header(self, event: DataTable.HeaderSelected) -> None:
        """A click on a header sorts by its column (text a→z first, numbers largest first); again, reverses."""
        name = str(event.column_key.value)
        if name in SORTABLE:
            self.order = self.order.choose(name, LARGEST_FIRST)
            self._fill()

    @on(DataTable.RowSelected, "#runs")
    def _open(self, event: DataTable.RowSelected) -> None:
        from workbench.tui.screens.tasks import TasksScreen

        self.app.push_screen(TasksScreen(str(event.row_key.value)))

    # ---- actions ----------------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Keys that act on runs are greyed out until there are runs."""
        if action in ("live", "mark", "filter", "sort", "reverse", "compare"):
            return True if self.runs else None
        return True

    def _highlighted(self) -> str | None:
        return self.query_one("#runs", NelTable).highlighted_key()

    def action_new_run(self) -> None:
        from workbench.tui.screens.new_run import NewRunScreen

        self.app.push_screen(NewRunScreen())

    def action_live(self) -> None:
        from workbench.tui.screens.live import LiveScreen

        run_id = self._highlighted()
        if run_id is not None:
            self.app.push_screen(LiveScreen(run_id))

    def action_mark(self) -> None:
        """Mark the highlighted run, or unmark it; a third mark replaces the oldest."""
        run_id = self._highlighted()
        if run_id is None:
            return
        marked = self.nel.marked_runs
        self.nel.marked_runs = [r for r in marked if r != run_id] if run_id in marked else [*marked, run_id][-2:]
        self._fill()

    def compare_pair(self) -> tuple[str, str] | None:
        """The runs ``c`` compares: the two marked (A, B), else the marked one against the highlighted one."""
        marked, current = self.nel.marked_runs, self._highlighted()
        if len(marked) == 2:
            return marked[0], marked[1]
        if len(marked) == 1 and current is not None and current != marked[0]:
            return marked[0], current
        return None

    def action_compare(self) -> None:
        from workbench.tui.screens.compare import CompareScreen

        pair = self.compare_pair()
        if pair is None:
            self.say("Mark two runs with space (A is the baseline, B the candidate), or mark one and highlight "
                     "the other, then press c.")
            return
        self.say("")
        self.app.push_screen(CompareScreen(*pair))

    def action_filter(self) -> None:
        self.query_one("#filter").focus()

    def action_sort(self) -> None:
        self.order = self.order.next(RUN_SORTS, LARGEST_FIRST)
        self._fill()

    def action_reverse(self) -> None:
        self.order = self.order.reversed()
        self._fill()

    def action_back(self) -> None:
        filt = self.query_one("#filter", Input)
        if filt.value:
            filt.value = ""
        self.query_one("#runs").focus()
