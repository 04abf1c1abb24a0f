"""Sort arrows on column headers: the sorted column's header carries ↓ or ↑, every other header is plain.

A newly chosen text column sorts a→z first, a number or a time largest (newest) first; choosing the same
column again reverses. ``s`` moves to the next column the same way, ``S`` reverses, a header click chooses.
In the demo store run B (model-b, pass@1 0.750) started after run A (model-a, 0.500).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pilot_helpers import click_header, column_widths, header, open_screen, row_keys, settle
from tui_store import RUN_A, RUN_B

from workbench.tui.app import NelApp
from workbench.tui.screens.tasks import TasksScreen

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]


def headers(app: NelApp, selector: str) -> dict[str, str]:
    table = app.screen.query_one(selector)
    return {str(k.value): header(app, selector, str(k.value)) for k in table.columns}  # type: ignore[attr-defined]


def arrows(app: NelApp, selector: str) -> dict[str, str]:
    """The headers that carry an arrow (one, while a list is sorted)."""
    return {k: v for k, v in headers(app, selector).items() if v.endswith(("↓", "↑"))}


class TestRunsHeaders:
    async def test_the_newest_run_first_shows_on_the_started_header(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(160, 30)) as pilot:
            await settle(pilot)
            assert arrows(app, "#runs") == {"started": "started (UTC) ↓"}
            assert headers(app, "#runs")["run"] == "run"

    async def test_s_moves_the_arrow_to_a_text_column_a_to_z_and_S_reverses_it(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(160, 30)) as pilot:
            await settle(pilot)
            await pilot.press("s")
            assert arrows(app, "#runs") == {"run": "run ↑"}
            assert row_keys(app, "#runs") == [RUN_A, RUN_B]
            await pilot.press("S")
            assert arrows(app, "#runs") == {"run": "run ↓"}
            assert row_keys(app, "#runs") == [RUN_B, RUN_A]

    async def test_s_goes_on_to_the_source_column(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(160, 30)) as pilot:
            await settle(pilot)
            await pilot.press("s", "s")
            assert arrows(app, "#runs") == {"source": "source ↑"}

    async def test_a_header_click_sorts_text_a_to_z_then_reverses(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(160, 30)) as pilot:
            await settle(pilot)
            await click_header(pilot, "#runs", "model")
            assert arrows(app, "#runs") == {"model": "model ↑"}
            assert row_keys(app, "#runs") == [RUN_A, RUN_B]  # model-a, model-b
            await click_header(pilot, "#runs", "model")
            assert arrows(app, "#runs") == {"model": "model ↓"}
            assert row_keys(app, "#runs") == [RUN_B, RUN_A]

    async def test_a_number_column_sorts_largest_first(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(160, 30)) as pilot:
            await settle(pilot)
            await click_header(pilot, "#runs", "run")  # away from started, so the next click is a first one
            await click_header(pilot, "#runs", "pass@1")
            assert arrows(app, "#runs") == {"pass@1": "pass@1 [95% CI] ↓"}
            assert row_keys(app, "#runs") == [RUN_B, RUN_A]  # 0.750, 0.500

    async def test_a_header_that_does_not_sort_changes_nothing(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(160, 30)) as pilot:
            await settle(pilot)
            await click_header(pilot, "#runs", "size")
            assert arrows(app, "#runs") == {"started": "started (UTC) ↓"}
            assert headers(app, "#runs")["size"] == "tasks×rep"

    async def test_the_columns_keep_their_widths_as_the_arrow_moves(self, long_ids: Path) -> None:
        app = NelApp(long_ids)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            before = column_widths(app, "#runs")
            for key in ("s", "s", "S", "s"):
                await pilot.press(key)
                await settle(pilot)
                assert column_widths(app, "#runs") == before


class TestTasksHeaders:
    async def test_the_default_bucket_order_shows_on_its_header(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(160, 30)) as pilot:
            await open_screen(pilot, TasksScreen(RUN_A))
            assert arrows(app, "#tasks") == {"bucket": "bucket ↑"}

    async def test_s_sorts_by_task_index_first_and_S_reverses(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(160, 30)) as pilot:
            await open_screen(pilot, TasksScreen(RUN_A))
            await pilot.press("s")
            await settle(pilot)
            assert arrows(app, "#tasks") == {"task": "task ↑"}
            assert row_keys(app, "#tasks") == [str(i) for i in range(8)]
            await pilot.press("S")
            await settle(pilot)
            assert arrows(app, "#tasks") == {"task": "task ↓"}
            assert row_keys(app, "#tasks") == [str(i) for i in reversed(range(8))]

    async def test_the_question_header_sorts_a_to_z_then_z_to_a(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(160, 30)) as pilot:
            await open_screen(pilot, TasksScreen(RUN_A))
            await click_header(pilot, "#tasks", "question")
            assert arrows(app, "#tasks") == {"question": "question ↑"}
            # "A train…", "How many legs…", "Solve x…", "Use the calculator…", "What is 15%…", …
            assert row_keys(app, "#tasks")[:4] == ["3", "6", "2", "4"]
            await click_header(pilot, "#tasks", "question")
            assert arrows(app, "#tasks") == {"question": "question ↓"}
            assert row_keys(app, "#tasks")[-4:] == ["4", "2", "6", "3"]

    async def test_a_number_header_sorts_largest_first(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(160, 30)) as pilot:
            await open_screen(pilot, TasksScreen(RUN_A))
            await click_header(pilot, "#tasks", "passes")
            assert arrows(app, "#tasks") == {"passes": "k/n ↓"}
            assert row_keys(app, "#tasks")[:2] == ["0", "1"]  # 4/4 twice, then 3/4

    async def test_turns_do_not_sort_and_keep_a_plain_header(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(200, 30)) as pilot:
            await open_screen(pilot, TasksScreen(RUN_A))
            before = row_keys(app, "#tasks")
            await click_header(pilot, "#tasks", "turns")
            assert arrows(app, "#tasks") == {"bucket": "bucket ↑"}
            assert row_keys(app, "#tasks") == before
