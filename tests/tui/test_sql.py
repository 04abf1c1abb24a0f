"""Screen 8: SQL over the store, named queries, errors as messages, rows that open a run or a task."""

from __future__ import annotations

from pathlib import Path

import pytest
from pilot_helpers import settle, text_of
from textual.widgets import DataTable, OptionList, TextArea
from tui_store import RUN_A

from workbench.tui.app import NelApp
from workbench.tui.screens.sql import ROW_LIMIT, SqlScreen
from workbench.tui.screens.task import TaskScreen

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]


async def open_sql(app: NelApp, pilot, query: str | None = None) -> SqlScreen:  # type: ignore[no-untyped-def]
    """The SQL screen, with ``query`` in the editor and run (when one is given)."""
    await settle(pilot)
    await pilot.press("colon")
    screen = app.screen
    assert isinstance(screen, SqlScreen)
    if query is not None:
        screen.query_one("#query", TextArea).text = query
        await pilot.press("ctrl+r")
        await settle(pilot)
    return screen


class TestSql:
    async def test_ctrl_r_runs_the_query_and_shows_the_result_as_a_table(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await open_sql(app, pilot, "SELECT run_id, n_steps FROM run_metrics ORDER BY run_id")
            table = app.screen.query_one("#result", DataTable)
            assert [str(c.label) for c in table.columns.values()] == ["run_id", "n_steps"]
            assert [[str(v).strip() for v in table.get_row_at(i)] for i in range(table.row_count)] == [
                ["demo-a", "28"], ["demo-b", "16"]]
            assert text_of(app, "#status").startswith("2 rows · ")

    async def test_a_syntax_error_is_one_line_right_under_the_editor(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await open_sql(app, pilot, "SELEC nonsense FROM nowhere")
            status = app.screen.query_one("#status")
            message = text_of(app, "#status")
            assert message.startswith("SQL error: Parser Error: syntax error at or near \"SELEC\"")
            assert "\n" not in message and status.has_class("error")
            editor = app.screen.query_one("#query")
            assert status.region.y <= editor.region.bottom + 1  # where the eye is, not at the foot of the screen
            assert app.screen.query_one("#result", DataTable).row_count == 0

    async def test_ctrl_r_runs_the_statement_under_the_cursor_or_the_selection(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            screen = await open_sql(app, pilot)
            editor = screen.query_one("#query", TextArea)
            editor.text = "SELECT 1 AS one;\n-- the second; with a ; in a comment\nSELECT 'a;b' AS two;\n"
            editor.focus()
            editor.cursor_location = (0, 3)
            await pilot.press("ctrl+r")
            await settle(pilot)
            table = screen.query_one("#result", DataTable)
            assert [str(c.label) for c in table.columns.values()] == ["one"]
            editor.cursor_location = (2, 5)
            await pilot.press("ctrl+r")
            await settle(pilot)
            assert [str(c.label) for c in table.columns.values()] == ["two"]
            assert str(table.get_row_at(0)[0]) == "a;b"
            editor.select_line(0)
            await pilot.press("ctrl+r")
            await settle(pilot)
            assert [str(c.label) for c in table.columns.values()] == ["one"]

    async def test_a_named_query_loads_and_runs_and_its_rows_open_their_task(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            screen = await open_sql(app, pilot)
            names = screen.query_one("#named", OptionList)
            await pilot.press("ctrl+n")
            assert names.has_focus
            names.highlighted = [o.id for o in names.options].index("sometimes_pass")
            await pilot.press("enter")
            await settle(pilot)
            assert "FROM task_stats" in screen.query_one("#query", TextArea).text
            table = screen.query_one("#result", DataTable)
            assert table.row_count == 5  # 3 sometimes-pass tasks in demo-a, 2 in demo-b
            await pilot.press("ctrl+t", "enter")
            await settle(pilot)
            assert isinstance(app.screen, TaskScreen)
            assert (app.screen.run_id, app.screen.task_idx) == (RUN_A, 3)  # the lowest pass rate first

    async def test_a_large_result_is_cut_at_the_row_limit_and_says_so(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await open_sql(app, pilot, f"SELECT * FROM range({ROW_LIMIT + 5})")
            assert app.screen.query_one("#result", DataTable).row_count == ROW_LIMIT
            assert f"(the first {ROW_LIMIT} shown)" in text_of(app, "#status")

    async def test_the_last_query_is_kept_between_visits(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await open_sql(app, pilot, "SELECT 42 AS answer")
            await pilot.press("escape")
            await open_sql(app, pilot)
            assert app.screen.query_one("#query", TextArea).text == "SELECT 42 AS answer"
