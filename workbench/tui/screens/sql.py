"""Screen 8: run SQL over the store (live runs included), or one of the named queries of store/queries/."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import DataTable, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from workbench.store.queries.sql import SqlResult, named_queries, run_sql
from workbench.tui import format as fmt
from workbench.tui.messages import SqlFinished
from workbench.tui.screens.base import NelScreen
from workbench.tui.sql_text import statement_at
from workbench.tui.widgets.table import NelTable

ROW_LIMIT = 1000


def cell(value: Any) -> str | Text:
    """One result value, readable in a cell (NULL shown dim, long text clipped)."""
    if value is None:
        return Text("NULL", style="dim")
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return Text(f"{value:.6g}", justify="right")
    if isinstance(value, int):
        return Text(str(value), justify="right")
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    return fmt.clip(value, 60)


class SqlScreen(NelScreen):
    """A query editor beside the named queries, and the result as a table."""

    AUTO_FOCUS = "#query"
    title_text = "SQL"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run", "Run", priority=True,
                tooltip="Run the statement under the cursor (or the selected text)"),
        Binding("f5", "run", "Run", show=False, tooltip="Run the statement under the cursor (or the selected text)"),
        Binding("ctrl+n", "named", "Named queries", tooltip="Pick a named query (store/queries/*.sql)"),
        Binding("ctrl+t", "results", "Results", tooltip="Move to the result table"),
        Binding("ctrl+o", "ide", "Open in IDE", tooltip="Open the store in harlequin (nel sql --ide): schema "
                "browser, completion, history, results export"),
        Binding("ctrl+e", "export", "Export", priority=True,
                tooltip="Export the result: Markdown, JSON, CSV or Parquet"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.queries = named_queries()
        self.result: SqlResult | None = None

    def crumb(self) -> str:
        return f"nel › SQL   {self.nel.store_path}"

    def compose_body(self) -> Iterable[Widget]:
        with Horizontal(id="sql-top"):
            yield OptionList(*(Option(name, id=name) for name in self.queries), id="named")
            yield TextArea(self.nel.last_sql, id="query", language=None, show_line_numbers=False)
        yield Static("ctrl+r: the statement at the cursor · Enter: a named query · ctrl+o: harlequin", id="status",
                     markup=False)
        yield NelTable(id="result")

    # ---- running ----------------------------------------------------------------------------------------------
    def action_run(self) -> None:
        editor = self.query_one("#query", TextArea)
        row, column = editor.cursor_location
        offset = sum(len(line) + 1 for line in editor.text.split("\n")[:row]) + column
        query = editor.selected_text.strip() or statement_at(editor.text, offset)
        if not query:
            self.status("The editor is empty: type a query, or pick a named one.", error=True)
            return
        self.nel.last_sql = editor.text
        self.status("running…")
        clock = self.nel.clock

        def job(token: int) -> SqlFinished:
            started = clock()
            result = run_sql(self.store(), query, limit=ROW_LIMIT)
            return SqlFinished(token, query, result, clock() - started)

        self.start("sql", job)

    def on_sql_finished(self, message: SqlFinished) -> None:
        if not self.current("sql", message.token):
            return
        result = self.result = message.result
        self.say("")
        table = self.query_one("#result", NelTable)
        table.clear(columns=True)
        for i, name in enumerate(result.columns):
            table.add_column(name, key=str(i))
        table.add_rows([tuple(cell(v) for v in row) for row in result.rows])
        more = f" (the first {ROW_LIMIT} shown)" if result.truncated else ""
        rows = f"{len(result.rows)} row{'s' if len(result.rows) != 1 else ''}{more}"
        took = f"{1000 * message.elapsed_s:,.0f} ms"
        self.status(f"{rows} · {took}" if result.columns else f"done, no result · {took}")

    def failed(self, group: str, text: str) -> None:
        """The error on the status line under the editor, where the eye is (not at the foot of the screen)."""
        if text.startswith("DuckDB: "):
            text = "SQL error: " + text.removeprefix("DuckDB: ")
        self.status(text, error=True)

    def status(self, text: str, *, error: bool = False) -> None:
        line = self.query_one("#status", Static)
        line.update(text)
        line.set_class(error, "error")

    def action_ide(self) -> None:
        """harlequin on the same store, the TUI suspended meanwhile (it is another full-screen program)."""
        import subprocess
        import sys

        from workbench.extras import missing_module

        if missing_module("tui"):
            self.status("harlequin is not installed: pip install 'nel-workbench[tui]'", error=True)
            return
        with self.app.suspend():
            subprocess.run([sys.executable, "-m", "workbench.cli", "sql", "--ide", "--store",
                            str(self.nel.store_path)], check=False)

    @on(OptionList.OptionSelected, "#named")
    def _named(self, event: OptionList.OptionSelected) -> None:
        name = str(event.option.id)
        editor = self.query_one("#query", TextArea)
        editor.text = self.queries[name].strip()
        self.action_run()

    @on(DataTable.RowSelected, "#result")
    def _open_row(self, event: DataTable.RowSelected) -> None:
        """A row naming a run (and a task) opens it: named queries become a way into the triage screens."""
        result = self.result
        if result is None:
            return
        row = dict(zip(result.columns, result.rows[event.cursor_row], strict=False))
        run_id, task_idx = row.get("run_id"), row.get("task_idx")
        if isinstance(run_id, str) and isinstance(task_idx, int):
            from workbench.tui.screens.task import TaskScreen

            self.app.push_screen(TaskScreen(run_id, task_idx))
        elif isinstance(run_id, str):
            from workbench.tui.screens.tasks import TasksScreen

            self.app.push_screen(TasksScreen(run_id))
        else:
            self.say("Enter opens a row whose result has a run_id column (and a task_idx column for a task).")

    def action_named(self) -> None:
        self.query_one("#named").focus()

    def action_results(self) -> None:
        self.query_one("#result").focus()

    def action_export(self) -> None:
        """The result on show, to a file (the rows fetched: the first ``ROW_LIMIT`` of a longer result)."""
        from workbench.export.table_file import Table
        from workbench.tui.export_view import ExportDialog

        result = self.result
        if result is None or not result.columns:
            self.status("No result to export: run a query first (ctrl+r).", error=True)
            return
        first = f"the first {len(result.rows)} rows of " if result.truncated else f"{len(result.rows)} row(s) of "
        table = Table(name="query-result", what=f"{first}the query result", columns=result.columns, rows=result.rows)
        self.app.push_screen(ExportDialog(table, self.nel.store_path.parent, "csv"),
                             lambda line: self.status(line) if line else None)
