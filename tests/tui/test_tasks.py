"""Screen 4: the tasks of a run: sometimes-pass first, filters, search, sort, paging, a run that is gone."""

from __future__ import annotations

from pathlib import Path

import pytest
from pilot_helpers import click_header, column, open_screen, row_keys, settle, text_of
from textual.pilot import Pilot
from textual.widgets import DataTable, Input
from tui_store import RUN_A

from workbench.tui.app import NelApp
from workbench.tui.screens.diff import DiffScreen
from workbench.tui.screens.task import TaskScreen
from workbench.tui.screens.tasks import PAGE, TasksScreen
from workbench.tui.widgets.table import NelTable

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]


async def open_tasks(pilot: Pilot[None], run_id: str = RUN_A) -> None:
    await open_screen(pilot, TasksScreen(run_id))


class TestTaskList:
    async def test_sometimes_pass_tasks_come_first_with_k_of_n_and_wilson(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(120, 40)) as pilot:
            await open_tasks(pilot)
            assert row_keys(app, "#tasks") == ["2", "3", "4", "5", "6", "0", "1", "7"]
            assert column(app, "#tasks", "bucket") == ["sometimes"] * 3 + ["never", "errored", "always", "always",
                                                                           "missing"]
            assert column(app, "#tasks", "passes")[:3] == ["2/4", "1/4", "3/4"]
            assert column(app, "#tasks", "wilson")[0] == "[0.150, 0.850]"
            assert column(app, "#tasks", "category")[:3] == ["algebra", "rates", "tools"]
            summary = text_of(app, "#summary")
            assert "pass@1 0.500 [0.100, 0.900]" in summary and "sometimes 3" in summary and "errored 1" in summary

    async def test_b_c_and_f_filter_by_bucket_category_and_failure_category(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await open_tasks(pilot)
            await pilot.press("b")  # sometimes comes first
            await settle(pilot)
            assert row_keys(app, "#tasks") == ["2", "3", "4"]
            assert "bucket: sometimes" in text_of(app, "#status")
            await pilot.press("b", "b")  # never, then errored
            await settle(pilot)
            assert row_keys(app, "#tasks") == ["6"]
            await pilot.press("x", "c")  # clear, then algebra: the first category in order
            await settle(pilot)
            assert row_keys(app, "#tasks") == ["2"]
            await pilot.press("x", "f", "f")  # format_error, then server_error
            await settle(pilot)
            assert row_keys(app, "#tasks") == ["6"]
            assert "failure: server_error" in text_of(app, "#status")

    async def test_the_b_key_names_every_bucket_it_cycles_through_pending_included(self) -> None:
        """The keys panel's tooltip and docs/tui.md list the buckets in the order ``b`` steps through them."""
        from workbench.analysis.triage import BUCKETS

        cycle = " → ".join((*BUCKETS, "all"))
        assert "pending" in BUCKETS
        (binding,) = [b for b in TasksScreen.BINDINGS if not isinstance(b, tuple) and b.key == "b"]
        assert isinstance(binding.tooltip, str) and cycle in binding.tooltip
        docs = (Path(__file__).resolve().parents[2] / "docs" / "tui.md").read_text(encoding="utf-8")
        assert f"| `b` | bucket: {cycle}" in docs

    async def test_search_covers_prompts_and_responses(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await open_tasks(pilot)
            await pilot.press("slash", *"legs", "enter")
            await settle(pilot)
            assert row_keys(app, "#tasks") == ["6"]
            app.screen.query_one("#text", Input).value = "calculator returned"
            await pilot.press("slash", "enter")
            await settle(pilot)
            assert row_keys(app, "#tasks") == ["4"]  # only in the responses
            assert app.screen.query_one("#tasks").has_focus

    async def test_s_sorts_by_any_column_and_a_header_click_too(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(160, 40)) as pilot:
            await open_tasks(pilot)
            await pilot.press("s")  # task index
            await settle(pilot)
            assert row_keys(app, "#tasks") == [str(i) for i in range(8)]
            await pilot.press("S")
            await settle(pilot)
            assert row_keys(app, "#tasks") == [str(i) for i in reversed(range(8))]
            await click_header(pilot, "#tasks", "latency")  # slowest first
            assert "sort: latency ↓" in text_of(app, "#status")
            assert row_keys(app, "#tasks")[:2] == ["6", "5"]

    async def test_the_next_page_loads_as_the_cursor_nears_the_end(self, big: Path) -> None:
        app = NelApp(big)
        async with app.run_test() as pilot:
            await open_tasks(pilot, "syn-0")
            table = app.screen.query_one("#tasks", DataTable)
            assert table.row_count == PAGE
            assert f"350 tasks ({PAGE} loaded)" in text_of(app, "#status")
            table.move_cursor(row=PAGE - 10)
            await settle(pilot)
            assert table.row_count == 2 * PAGE
            assert f"350 tasks ({2 * PAGE} loaded)" in text_of(app, "#status")

    async def test_end_loads_the_rest_and_lands_on_the_last_row(self, big: Path) -> None:
        app = NelApp(big)
        async with app.run_test() as pilot:
            await open_tasks(pilot, "syn-0")
            table = app.screen.query_one("#tasks", DataTable)
            await pilot.press("end")
            await settle(pilot)
            assert table.row_count == 350 and table.cursor_row == 349
            assert text_of(app, "#status").endswith("350 tasks")
            assert len(set(row_keys(app, "#tasks"))) == 350  # each task once, in one order
            assert row_keys(app, "#tasks")[-1] == str(app.screen.query_one("#tasks", NelTable).highlighted_key())

    async def test_enter_opens_the_task_and_d_its_diff(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await open_tasks(pilot)
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, TaskScreen) and app.screen.task_idx == 2
            await pilot.press("escape", "d")
            await settle(pilot)
            assert isinstance(app.screen, DiffScreen) and app.screen.task_idx == 2

    async def test_a_run_that_is_gone_is_a_message(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await open_tasks(pilot, "no-such-run")
            assert "no-such-run is no longer in this store" in text_of(app, "#message")
            assert not app.screen.query_one("#tasks").display
