"""The app shell and the runs screen: listing, sorting, filtering, marking, help, palette, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from pilot_helpers import column, header, row_keys, screen_text, settle, text_of, wait_for
from textual.command import CommandList, CommandPalette
from textual.screen import Screen
from tui_store import LONG_IDS, RUN_A, RUN_B

from workbench.tui.app import NelApp
from workbench.tui.messages import Reply, RunsLoaded
from workbench.tui.screens.help import HelpScreen
from workbench.tui.screens.runs import RunsScreen
from workbench.tui.screens.tasks import TasksScreen
from workbench.tui.screens.too_small import TooSmallScreen

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]


def reverse_offered(screen: Screen[object]) -> bool:
    """The command palette lists its search's results, "Reverse the sort order" highlighted."""
    found = screen.query(CommandList)
    if not found or not found.first().has_class("--visible") or (highlighted := found.first().highlighted) is None:
        return False
    option = found.first().get_option_at_index(highlighted)
    return "Reverse the sort order" in str(option.prompt)


class TestRunsScreen:
    """Screen 1: every run, newest first, with pass@1 and its interval."""

    async def test_lists_every_run_newest_first_with_its_interval(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await settle(pilot)
            assert isinstance(app.screen, RunsScreen)
            assert row_keys(app, "#runs") == [RUN_B, RUN_A]
            assert column(app, "#runs", "pass@1") == ["0.750 [0.434, 1.000]", "0.500 [0.100, 0.900]"]
            assert column(app, "#runs", "size") == ["8×2", "8×4"]
            assert column(app, "#runs", "started") == ["2026-01-03 09:00", "2026-01-02 10:00"]

    async def test_workers_post_typed_messages(self, demo: Path) -> None:
        seen: list[Reply] = []
        app = NelApp(demo)
        async with app.run_test(message_hook=lambda m: seen.append(m) if isinstance(m, Reply) else None) as pilot:
            await settle(pilot)
        loaded = [m for m in seen if isinstance(m, RunsLoaded)]
        assert loaded and {r.run_id for r in loaded[0].runs} == {RUN_A, RUN_B}

    async def test_s_sorts_S_reverses_and_slash_filters(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await settle(pilot)
            await pilot.press("s")  # started → run, a→z
            assert header(app, "#runs", "run") == "run ↑"
            assert row_keys(app, "#runs") == [RUN_A, RUN_B]
            await pilot.press("S")
            assert row_keys(app, "#runs") == [RUN_B, RUN_A]
            await pilot.press("slash", *"mo-a", "enter")
            assert row_keys(app, "#runs") == [RUN_A]
            assert text_of(app, "#status").startswith("1 of 2 runs")
            await pilot.press("escape")
            assert row_keys(app, "#runs") == [RUN_B, RUN_A]

    async def test_long_run_ids_lose_their_middle_but_filter_and_open_by_the_full_id(self, long_ids: Path) -> None:
        app = NelApp(long_ids)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            newest = LONG_IDS[RUN_B]
            assert row_keys(app, "#runs") == [newest, LONG_IDS[RUN_A]]
            assert column(app, "#runs", "run") == ["gsm8k_cot_zero…3-090000-b71e04", "gsm8k_cot_zero…2-100000-3f9a2c"]
            assert f"▸ {newest}" in text_of(app, "#status")  # the highlighted run, in full
            await pilot.press("slash", *"20260102-10", "enter")  # a part of the id the table elides
            assert row_keys(app, "#runs") == [LONG_IDS[RUN_A]]
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, TasksScreen) and app.screen.run_id == LONG_IDS[RUN_A]

    async def test_a_wider_terminal_shows_more_of_each_run_id(self, long_ids: Path) -> None:
        app = NelApp(long_ids)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.resize_terminal(140, 30)
            await settle(pilot)
            assert column(app, "#runs", "run") == [LONG_IDS[RUN_B], LONG_IDS[RUN_A]]
            assert "▸" not in text_of(app, "#status")

    async def test_a_short_run_id_is_shown_whole_and_not_repeated(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            assert column(app, "#runs", "run") == [RUN_B, RUN_A]
            assert "▸" not in text_of(app, "#status")

    async def test_enter_opens_the_tasks_of_the_highlighted_run(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await settle(pilot)
            await pilot.press("down", "enter")
            await settle(pilot)
            assert isinstance(app.screen, TasksScreen) and app.screen.run_id == RUN_A
            await pilot.press("escape")
            assert isinstance(app.screen, RunsScreen)

    async def test_space_marks_up_to_two_runs_the_first_is_the_reference(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await settle(pilot)
            await pilot.press("space")
            assert app.reference_run == RUN_B
            assert column(app, "#runs", "mark") == ["A", ""]
            await pilot.press("down", "space")
            assert app.marked_runs == [RUN_B, RUN_A] and app.reference_run == RUN_B
            assert column(app, "#runs", "mark") == ["A", "B"]
            await pilot.press("space")
            assert app.marked_runs == [RUN_B]
            await pilot.press("up", "space")
            assert app.reference_run is None and app.marked_runs == []

    async def test_c_without_marks_says_how_to_pick_two_runs(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await settle(pilot)
            await pilot.press("c")
            assert isinstance(app.screen, RunsScreen)
            assert "Mark two runs" in screen_text(app)


class TestShell:
    """Keys everywhere: help, the command palette, quitting, and sizes."""

    async def test_question_mark_lists_the_keys_of_the_current_screen(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(100, 40)) as pilot:
            await settle(pilot)
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            text = screen_text(app)
            for line in ("Keys: runs", "this screen", "Mark the highlighted run (two at most)",
                         "Sort by the next column", "everywhere", "ctrl+p opens the command palette"):
                assert line in text
            await pilot.press("question_mark")
            assert isinstance(app.screen, RunsScreen)

    async def test_the_command_palette_reaches_the_screens_actions(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await settle(pilot)
            titles = {c.title for c in app.get_system_commands(app.screen)}
            assert {"Watch the highlighted run live (progress, rates, failures)", "Reverse the sort order",
                    "Read the runs again", "SQL", "Quit", "Theme"} <= titles
            await pilot.press("ctrl+p")
            assert isinstance(app.screen, CommandPalette)
            await pilot.press(*"reverse")
            await wait_for(pilot, lambda: reverse_offered(app.screen), timeout=10)  # it searches in the background
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, RunsScreen) and row_keys(app, "#runs") == [RUN_A, RUN_B]

    async def test_colon_opens_sql_and_q_quits(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await settle(pilot)
            await pilot.press("colon")
            assert app.screen.title_text == "SQL"  # type: ignore[attr-defined]
            await pilot.press("escape", "q")
            assert app.return_code == 0

    async def test_a_terminal_too_small_says_so_and_recovers(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(50, 12)) as pilot:
            await settle(pilot)
            assert isinstance(app.screen, TooSmallScreen)
            assert "Terminal too small: 50×12" in screen_text(app)
            await pilot.resize_terminal(80, 24)
            await pilot.pause()
            assert isinstance(app.screen, RunsScreen)


class TestBadStore:
    """A path that is not a store is a message inside the app, never a traceback."""

    async def test_a_missing_store_is_explained(self, tmp_path: Path) -> None:
        app = NelApp(tmp_path / "nowhere" / "nel.duckdb")
        async with app.run_test() as pilot:
            await settle(pilot)
            panel = text_of(app, "#panel")
            assert "Cannot read the store" in panel and "no store here" in panel
            assert not app.screen.query_one("#runs").display

    async def test_R_reads_again_once_the_store_exists(self, tmp_path: Path) -> None:
        from tui_store import demo_store

        app = NelApp(tmp_path / "nel.duckdb")
        async with app.run_test() as pilot:
            await settle(pilot)
            assert "no store here" in text_of(app, "#panel")
            demo_store(tmp_path / "nel.duckdb")
            await pilot.press("R")
            await settle(pilot)
            assert row_keys(app, "#runs") == [RUN_B, RUN_A]
            assert app.screen.query_one("#runs").display and not app.screen.query_one("#panel").display

    async def test_a_file_that_is_not_a_store_is_explained(self, tmp_path: Path) -> None:
        bogus = tmp_path / "nel.duckdb"
        bogus.write_text("not a database")
        app = NelApp(bogus)
        async with app.run_test() as pilot:
            await settle(pilot)
            assert "not a nel store" in text_of(app, "#panel")

    async def test_an_empty_store_says_how_to_fill_it(self, tmp_path: Path) -> None:
        from workbench.store.database import connect_rw

        connect_rw(tmp_path / "nel.duckdb").close()
        app = NelApp(tmp_path / "nel.duckdb")
        async with app.run_test() as pilot:
            await settle(pilot)
            assert "No runs in this store yet" in text_of(app, "#panel")
            assert app.screen.check_action("live", ()) is None  # greyed out: nothing to act on
