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

    async def test_a_syntax_error_is_a_message_not_a_traceback(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await open_sql(app, pilot, "SELEC nonsense FROM nowhere")
            message = text_of(app, "#message")
            assert message.startswith("SQL error: Parser Error: syntax error at or near \"SELEC\"")
            assert "\n" not in message
            assert app.screen.query_one("#result", DataTable).row_count == 0

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
