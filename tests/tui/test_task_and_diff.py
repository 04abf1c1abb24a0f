"""Screens 5 and 6: a task's attempts and transcript (virtualised), and the trajectory diff."""

from __future__ import annotations

from pathlib import Path

import pytest
from pilot_helpers import column, open_screen, screen_text, settle, text_of
from textual.pilot import Pilot
from tui_store import LONG_LINES, RUN_A, RUN_B

from workbench.tui.app import NelApp
from workbench.tui.screens.diff import DiffScreen
from workbench.tui.screens.task import TaskScreen
from workbench.tui.widgets.diff_view import DiffView
from workbench.tui.widgets.transcript import TranscriptView

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]


async def open_task(pilot: Pilot[None], task_idx: int, run_id: str = RUN_A) -> None:
    await open_screen(pilot, TaskScreen(run_id, task_idx))


class TestTaskDetail:
    async def test_every_attempt_with_reward_answers_failure_tokens_and_latency(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(120, 40)) as pilot:
            await open_task(pilot, 2)
            assert column(app, "#attempts", "outcome") == ["pass", "wrong", "pass", "format_error"]
            assert column(app, "#attempts", "extracted") == ["6", "14", "6", "—"]
            assert column(app, "#attempts", "expected") == ["6"] * 4
            assert column(app, "#attempts", "tokens") == ["52", "55", "58", "61"]
            assert column(app, "#attempts", "latency") == ["120 ms", "121 ms", "122 ms", "123 ms"]
            assert "2/4 pass · Wilson [0.150, 0.850]" in text_of(app, "#summary")

    async def test_the_transcript_follows_the_cursor_and_shows_tool_calls(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(100, 50)) as pilot:
            await open_task(pilot, 4)
            text = screen_text(app)
            for part in ("── system", "── user", "── assistant tool call ", "calculator: 123 * 45",
                         "▼ ── output of calculator (call_1; 1 line)", "── assistant reply (finish: stop)",
                         "The answer is: 5535", "── scoring"):
                assert part in text, part
            await pilot.press("down")
            assert "The answer is: 5525" in screen_text(app)

    async def test_a_long_transcript_renders_only_its_visible_lines(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await open_task(pilot, 5)
            view = app.screen.query_one(TranscriptView)
            assert len(view.lines) > LONG_LINES  # the whole text is laid out as an index of lines...
            assert len(view._strips) <= view.size.height  # ...but only what is on screen was rendered
            await pilot.press("t", "end")
            await pilot.pause()
            assert view.scroll_offset.y > LONG_LINES - view.size.height
            assert len(view._strips) <= 2 * view.size.height
            assert "── scoring" in screen_text(app)

    async def test_n_and_p_jump_between_the_parts_of_a_transcript(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await open_task(pilot, 4)
            view = app.screen.query_one(TranscriptView)
            starts = view.block_starts()
            await pilot.press("t", "n")
            assert view.scroll_offset.y == starts[1]
            await pilot.press("n", "p")
            assert view.scroll_offset.y == starts[1]

    async def test_a_task_that_is_not_in_the_store_is_a_message(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await open_task(pilot, 99)
            assert "Task 99 of run demo-a is not in this store" in text_of(app, "#message")


class TestDiff:
    async def test_d_pairs_a_passing_and_a_failing_attempt_and_opens_at_the_first_divergence(
            self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(100, 30)) as pilot:
            await open_task(pilot, 3)
            await pilot.press("d")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, DiffScreen)
            assert (screen.left.repeat, screen.right.repeat) == (1, 0)  # attempt 1 passed, attempt 0 did not
            assert "A attempt 1 (pass)  vs  B attempt 0 (wrong)" in text_of(app, "#sides")
            scoring = text_of(app, "#scoring")
            assert "outcome: pass (reward 1) → wrong (reward 0)" in scoring
            assert "extracted answer: '40' → '90'" in scoring and "expected answer (both): '40'" in scoring
            view = screen.query_one(DiffView)
            first = view._row_starts[view._diff.first_divergence]  # type: ignore[index]
            assert view.scroll_offset.y <= first < view.scroll_offset.y + view.size.height
            assert "▶ The answer is: 40" in screen_text(app).replace("│", " ").replace("  ", " ")

    async def test_space_marks_the_left_side_and_s_swaps(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await open_task(pilot, 5)
            await pilot.press("down", "space", "down", "d")
            await settle(pilot)
            assert (app.screen.left.repeat, app.screen.right.repeat) == (1, 2)  # type: ignore[attr-defined]
            await pilot.press("s")
            await settle(pilot)
            assert (app.screen.left.repeat, app.screen.right.repeat) == (2, 1)  # type: ignore[attr-defined]
            assert "A attempt 2 (wrong)  vs  B attempt 1 (wrong)" in text_of(app, "#sides")

    async def test_D_diffs_against_the_same_task_in_the_reference_run(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await open_task(pilot, 1)
            await pilot.press("D")
            assert "No reference run" in text_of(app, "#message")
            app.reference_run = RUN_B
            await pilot.press("D")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, DiffScreen)
            assert screen.right.run_id == RUN_B and screen.right.repeat == 1  # B's failing attempt: the contrast
            assert f"A {RUN_A} attempt 0 (pass)  vs  B {RUN_B} attempt 1 (wrong)" in text_of(app, "#sides")

    async def test_f_and_brackets_move_between_changes(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_task(pilot, 5)
            await pilot.press("d")
            await settle(pilot)
            view = app.screen.query_one(DiffView)
            first = view.scroll_offset.y
            await pilot.press("end")
            await pilot.pause()
            assert view.scroll_offset.y > first
            await pilot.press("f")
            assert view.scroll_offset.y == first

    async def test_a_task_with_one_attempt_cannot_be_diffed_within_its_run(self, tmp_path: Path) -> None:
        from tui_store import synthetic_store

        store = synthetic_store(tmp_path / "nel.duckdb", runs=1, tasks=3, repeats=1)
        app = NelApp(store)
        async with app.run_test() as pilot:
            await open_task(pilot, 0, "syn-0")
            await pilot.press("d")
            assert "fewer than two attempts" in text_of(app, "#message")


class TestDiffScoringHeader:
    """The scoring difference above a diff is shown whole at 80×24: long lines wrap, a tall one scrolls."""

    @staticmethod
    async def _diff_of_task_3(pilot: Pilot[None], error: str | None = None) -> DiffScreen:
        """Task 3's default pair (scored differently in five ways); ``error`` given to its failing attempt."""
        from dataclasses import replace

        from workbench.analysis.triage import default_pair, task_detail

        await settle(pilot)
        detail = task_detail(pilot.app.open_store(), RUN_A, 3)  # type: ignore[attr-defined]
        assert detail is not None
        pair = default_pair(detail.attempts)
        assert pair is not None
        left, right = pair[0], replace(pair[1], error=error) if error else pair[1]
        screen = DiffScreen(RUN_A, 3, left=left, right=right)
        await open_screen(pilot, screen)
        return screen

    async def test_a_five_line_scoring_difference_and_a_long_error_are_shown_whole(self, demo: Path) -> None:
        error = ("HTTP 400: the request was rejected because the prompt and the requested completion together exceed "
                 "the context window of the model by 1,024 tokens; shorten the prompt or lower max_tokens")
        app = NelApp(demo)
        async with app.run_test(size=(80, 24)) as pilot:
            await self._diff_of_task_3(pilot, error)
            lines = [line.strip().removeprefix("scoring: ") for line in text_of(app, "#scoring").splitlines()]
            assert len(lines) == 6 and lines[3].startswith("error: —")
            shown = " ".join(screen_text(app).split())  # wrapped lines joined back
            for line in lines:
                assert " ".join(line.split()) in shown, line

    async def test_a_scoring_difference_taller_than_the_screen_scrolls(self, demo: Path) -> None:
        error = " ".join(f"word{i}" for i in range(400)) + " THE-END"
        app = NelApp(demo)
        async with app.run_test(size=(80, 24)) as pilot:
            await self._diff_of_task_3(pilot, error)
            assert "THE-END" not in screen_text(app)
            box = app.screen.query_one("#scoring-box")
            assert box.size.height <= 12 and app.screen.query_one(DiffView).size.height >= 5  # room for the diff
            box.focus()
            await pilot.press("end")
            await pilot.pause()
            assert "THE-END" in screen_text(app)


class TestDiffView:
    """The diff widget on its own: aligned columns, stops at each change."""

    async def test_brackets_step_through_changes_and_f_returns_to_the_first(self) -> None:
        from textual.app import App, ComposeResult

        from workbench.analysis.triage import word_diff

        class One(App[None]):
            def compose(self) -> ComposeResult:
                yield DiffView(id="diff")

        left = "\n".join(f"line {i}" for i in range(100))
        right = left.replace("line 10\n", "line ten\n").replace("line 60\n", "line sixty\n")
        app = One()
        async with app.run_test(size=(60, 20)) as pilot:
            view = app.query_one(DiffView)
            view.focus()
            view.show(word_diff(left, right))
            await pilot.pause()
            assert view.scroll_offset.y == 8  # the first divergence, with two lines of context above
            await pilot.press("right_square_bracket")
            assert view.scroll_offset.y == 58
            await pilot.press("left_square_bracket")
            assert view.scroll_offset.y == 8
            await pilot.press("end", "f")
            assert view.scroll_offset.y == 8
            assert "▶ line 10" in screen_text(app) and "line ten" in screen_text(app)
