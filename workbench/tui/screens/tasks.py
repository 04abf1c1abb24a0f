"""Screen 4: the tasks of one run, sometimes-pass first; filter, sort, open one or diff its attempts.

Filtering, sorting and paging run in SQL (``triage.task_page``): the table holds one page of rows and
fetches the next as the cursor nears the end, so a run of any size opens at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static

from workbench.analysis.triage import (
    BUCKETS,
    TASK_SORTS,
    RunHeader,
    RunRow,
    TaskFacets,
    TaskFilter,
    TaskRow,
    run_overview,
    task_list,
    task_page,
)
from workbench.tui import format as fmt
from workbench.tui.messages import OverviewLoaded, TasksLoaded
from workbench.tui.screens.base import NelScreen
from workbench.tui.widgets.table import NelTable, SortOrder

PAGE = 100  # rows per fetch: two screenfuls of a large terminal, and quick to add to the table
REFRESH_S = 2.0  # how often the list of a running run is read again
COLUMNS = (("task", "task"), ("question", "question"), ("passes", "k/n"), ("pass rate", "rate"),
           ("wilson", "Wilson 95%"), ("bucket", "bucket"), ("category", "category"), ("failure", "failure"),
           ("tokens", "tokens"), ("latency", "latency"), ("turns", "turns"), ("tool calls", "tools"))
SORTS = tuple(TASK_SORTS)
"""Each sort is named after the column it orders by (turns and tool calls are not sortable)."""
LARGEST_FIRST = ("passes", "pass rate", "wilson", "tokens", "latency")
"""Numbers start largest first; task index, question, bucket (sometimes first) and categories start a→z."""


def _cycle(options: Sequence[str | None], current: str | None) -> str | None:
    """The option after ``current`` (wrapping round; ``None`` means "all")."""
    index = options.index(current) if current in options else -1
    return options[(index + 1) % len(options)]


def _per_attempt(value: float | None) -> str:
    """A per-attempt mean: a whole number as such (every attempt took 3 turns), else one decimal; — for none."""
    if value is None:
        return "—"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


class TasksScreen(NelScreen):
    """One row per task of ``run_id``: k/n passes, Wilson interval, bucket, categories, tokens, latency."""

    AUTO_FOCUS = "#tasks"
    title_text = "tasks of a run"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "diff", "Diff", tooltip="Diff a passing and a failing attempt of the highlighted task"),
        Binding("b", "bucket", "Bucket",
                tooltip="Show one bucket: " + " → ".join((*BUCKETS, "all")) + " (an empty one is skipped)"),
        Binding("f", "failure", "Failure", tooltip="Show tasks with at least one attempt in a failure category"),
        Binding("c", "category", "Category", tooltip="Show one task category (from the benchmark's metadata)"),
        Binding("slash", "text", "Search", key_display="/",
                tooltip="Search the prompts and the responses (#12: task 12; or a task id)"),
        Binding("s", "sort", "Sort", tooltip="Sort by the next column (bucket, task, passes, pass rate, …)"),
        Binding("S", "reverse", "Reverse", show=False, tooltip="Reverse the sort order"),
        Binding("x", "clear", "Clear", tooltip="Clear every filter"),
        Binding("l", "live", "Live", show=False, tooltip="Watch this run live"),
        Binding("R", "reload", "Reload", show=False, tooltip="Read the tasks again"),
    ]

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.filter = TaskFilter()
        self.facets: TaskFacets | None = None
        self.run: RunHeader | None = None
        self.metrics: RunRow | None = None
        self.total = 0
        self._loading_more = False
        self._to_end = False
        self._debounce: Timer | None = None

    def crumb(self) -> str:
        return f"nel › runs › {self.run_id} › tasks"

    def compose_body(self) -> Iterable[Widget]:
        yield Static("loading tasks…", id="summary", classes="summary", markup=False)
        yield Input(placeholder="/ search prompts and responses (#12: task 12)", id="text", compact=True)
        yield Static("", id="status", markup=False)
        yield NelTable(id="tasks")

    def on_mount(self) -> None:
        super().on_mount()
        table = self.query_one("#tasks", NelTable)
        table.set_columns(COLUMNS, sortable=SORTS)
        table.show_sort(self._order())
        self._reload()
        self.set_interval(REFRESH_S, self._refresh_running)

    def _refresh_running(self) -> None:
        """A running run's tasks move on: read them again while shown, unless more pages were scrolled in
        (reloading would drop them under the cursor) or a read is still out."""
        busy = any(w.is_running for w in self.workers)
        table = self.query_one("#tasks", NelTable)
        if (self.is_current and self.run is not None and self.run.status == "running" and not busy
                and table.row_count <= PAGE):
            self.action_reload()

    # ---- loading ---------------------------------------------------------------------------------------------
    def action_reload(self) -> None:
        """Read the run again: the first page, its metrics and its facets (a running run has moved on)."""
        self._reload()
        self._load_overview()

    def _reload(self) -> None:
        """Fetch the first page for the current filter (the first time, the overview follows it)."""
        flt, run_id = self.filter, self.run_id
        self._tokens["more"] = self._tokens.get("more", 0) + 1  # a pending next page belongs to the old list
        self._loading_more = False
        self._to_end = False

        def job(token: int) -> TasksLoaded:
            first = task_list(self.store(), run_id, flt, limit=PAGE)
            return TasksLoaded(token, first.page, first.run)

        self.start("tasks", job)

    def _load_overview(self) -> None:
        run_id = self.run_id
        self.start("overview", lambda token: OverviewLoaded(token, run_overview(self.store(), run_id)))

    def on_overview_loaded(self, message: OverviewLoaded) -> None:
        if self.current("overview", message.token):
            self.facets = message.overview.facets
            self.metrics = message.overview.run
            self._show_status()

    def _more(self, limit: int = PAGE) -> None:
        table = self.query_one("#tasks", NelTable)
        if self._loading_more or table.row_count >= self.total:
            return
        self._loading_more = True
        flt, run_id, offset = self.filter, self.run_id, table.row_count
        self.start("more", lambda token: TasksLoaded(token, task_page(self.store(), run_id, flt, offset=offset,
                                                                            limit=limit), None))

    @on(NelTable.LastRowWanted, "#tasks")
    def _to_last_row(self) -> None:
        """End: fetch every row not loaded yet in one page, then put the cursor on the last."""
        table = self.query_one("#tasks", NelTable)
        if table.row_count >= self.total:
            return
        self._to_end = True
        if self._loading_more:  # a page is on its way: ask for the rest once it is in
            return
        self.say(f"loading the last {self.total - table.row_count:,} tasks…")
        self._more(self.total - table.row_count)

    def on_tasks_loaded(self, message: TasksLoaded) -> None:
        table = self.query_one("#tasks", NelTable)
        if self.current("tasks", message.token) and message.page.offset == 0:
            if message.run is None:
                self._gone()
                return
            if self.run is None:  # after the rows are on screen: the page should not share the CPU with it
                self.call_after_refresh(self._load_overview)
            self.run = message.run
            keep = table.highlighted_key()
            table.clear()
            self._add(message.page.rows)
            table.move_to_key(keep)
        elif self.current("more", message.token) and message.page.offset == table.row_count:
            self._add(message.page.rows)
            self._loading_more = False
        else:
            return
        self.total = message.page.total
        self._show_status()
        if self._to_end:
            if table.row_count < self.total:
                self._to_last_row()
            else:
                self._to_end = False
                self.say("")
                table.move_cursor(row=table.row_count - 1, animate=False, scroll=True)

    def failed(self, group: str, text: str) -> None:
        if group == "more":
            self._loading_more = False  # the next cursor move near the end asks again
        super().failed(group, text)

    def _gone(self) -> None:
        self.query_one("#tasks").display = False
        self.query_one("#summary", Static).update("")
        self.say(f"Run {self.run_id} is no longer in this store (deleted, or the store was replaced). "
                 "Press Escape to go back to the runs.", error=True)

    def _add(self, rows: list[TaskRow]) -> None:
        table = self.query_one("#tasks", NelTable)
        for t in rows:
            table.add_row(
                fmt.num(str(t.task_idx)), fmt.clip(t.question, fmt.QUESTION_CELLS), fmt.num(f"{t.n_pass}/{t.n}"),
                fmt.num(fmt.rate(t.pass_rate)), fmt.interval(t.wilson_low, t.wilson_high), t.bucket,
                t.category or "—", t.failure_category or "—", fmt.num(fmt.count(t.mean_tokens)),
                fmt.num(fmt.millis(t.mean_latency_ms)), fmt.num(_per_attempt(t.turns)),
                fmt.num(_per_attempt(t.tool_calls)), key=str(t.task_idx),
            )

    def _show_status(self) -> None:
        f, run = self.filter, self.run
        if run is not None:
            facets, m = self.facets, self.metrics
            buckets = "  ".join(f"{name} {n}" for name, n in facets.buckets.items()
                                if n or name != "pending") if facets else "counting…"
            pass_at_1 = fmt.estimate(m.pass_at_1, m.pass_at_1_low, m.pass_at_1_high) if m else "…"
            self.query_one("#summary", Static).update(
                f"{run.benchmark} · {run.model_id or '—'} · {run.status} · pass@1 {pass_at_1} · "
                f"{run.n_tasks} tasks × {run.n_repeats}\n{buckets}")
        arrow = self._order().arrow
        shown = self.query_one("#tasks", NelTable).row_count
        more = f" ({shown} loaded)" if shown < self.total else ""
        self.query_one("#status", Static).update(
            f"bucket: {f.bucket or 'all'}  category: {f.category or 'all'}  failure: {f.failure or 'all'}  "
            f"sort: {f.sort} {arrow}   {self.total} tasks{more}")

    # ---- table events -----------------------------------------------------------------------------------------
    @on(DataTable.RowHighlighted, "#tasks")
    def _near_end(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row >= event.data_table.row_count - 20:
            self._more()

    @on(DataTable.RowSelected, "#tasks")
    def _open(self, event: DataTable.RowSelected) -> None:
        from workbench.tui.screens.task import TaskScreen

        self.app.push_screen(TaskScreen(self.run_id, int(str(event.row_key.value))))

    @on(DataTable.HeaderSelected, "#tasks")
    def _header(self, event: DataTable.HeaderSelected) -> None:
        """A click on a header sorts by its column (text a→z first, numbers largest first); again, reverses."""
        name = str(event.column_key.value)
        if name in SORTS:
            self._sort(self._order().choose(name, LARGEST_FIRST))

    @on(Input.Changed, "#text")
    def _text_changed(self) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(0.3, self._apply_text)

    @on(Input.Submitted, "#text")
    def _text_done(self) -> None:
        self._apply_text()
        self.query_one("#tasks").focus()

    def _apply_text(self) -> None:
        text = self.query_one("#text", Input).value
        if text != self.filter.text:
            self._set(text=text)

    # ---- actions ---------------------------------------------------------------------------------------------
    def _set(self, **changes: object) -> None:
        self.filter = replace(self.filter, **changes)  # type: ignore[arg-type]
        self._show_status()
        self._reload()

    def _order(self) -> SortOrder:
        return SortOrder(self.filter.sort, self.filter.descending)

    def _sort(self, order: SortOrder) -> None:
        """Sort by ``order`` (read again in SQL); its column's header shows the arrow at once."""
        self.query_one("#tasks", NelTable).show_sort(order)
        self._set(sort=order.column, descending=order.descending)

    def action_bucket(self) -> None:
        counts = self.facets.buckets if self.facets else {}
        options = [None, *(b for b in BUCKETS if counts.get(b, 1) > 0)]
        self._set(bucket=_cycle(options, self.filter.bucket))

    def action_category(self) -> None:
        self._cycle_facet("category", "categories", "c",
                          "This run's tasks carry no category (the benchmark's metadata has none).")

    def action_failure(self) -> None:
        self._cycle_facet("failure", "failures", "f",
                          "No attempt of this run failed with a category (wrong answers have none).")

    def _cycle_facet(self, name: str, facet: str, key: str, none: str) -> None:
        """Show the next value of the ``name`` filter (from the run's ``facet`` list), or say why not."""
        if self.facets is None:
            self.say(f"Still counting this run's {facet}: press {key} again in a moment.")
            return
        values: list[str] = getattr(self.facets, facet)
        if not values:
            self.say(none)
            return
        self._set(**{name: _cycle([None, *values], getattr(self.filter, name))})

    def action_text(self) -> None:
        self.query_one("#text").focus()

    def action_sort(self) -> None:
        self._sort(self._order().next(SORTS, LARGEST_FIRST))

    def action_reverse(self) -> None:
        self._sort(self._order().reversed())

    def action_clear(self) -> None:
        self.query_one("#text", Input).value = ""
        self._set(bucket=None, category=None, failure=None, text="")

    def action_diff(self) -> None:
        from workbench.tui.screens.diff import DiffScreen

        key = self.query_one("#tasks", NelTable).highlighted_key()
        if key is not None:
            self.app.push_screen(DiffScreen(self.run_id, int(key)))

    def action_live(self) -> None:
        from workbench.tui.screens.live import LiveScreen

        self.app.push_screen(LiveScreen(self.run_id))

    def action_back(self) -> None:
        text = self.query_one("#text", Input)
        if text.has_focus:
            text.value = ""
            self._apply_text()
            self.query_one("#tasks").focus()
        else:
            super().action_back()

