"""Screen 7: two runs compared, paired by task; Enter on a task that moved diffs it across the runs.

In the demo store, run B (candidate) fell on tasks 4 and 1 and rose on tasks 6, 3, 2 and 5; task 0 did
not move, and task 7 was attempted by B only.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pilot_helpers import column, header, open_screen, row_keys, screen_text, settle, text_of
from textual.pilot import Pilot
from textual.widgets import DataTable
from tui_store import RUN_A, RUN_B, TASK_IDS

from workbench.analysis.triage.compare import cross_run_pair, moved_tasks, run_comparison
from workbench.errors import UsageError
from workbench.store.reader import Store
from workbench.tui.app import NelApp
from workbench.tui.screens import compare as compare_screen
from workbench.tui.screens.compare import CompareScreen
from workbench.tui.screens.diff import DiffScreen
from workbench.tui.screens.help import HelpScreen
from workbench.tui.screens.runs import RunsScreen
from workbench.tui.widgets.table import NelTable

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]


async def open_compare(pilot: Pilot[None], baseline: str = RUN_A, candidate: str = RUN_B) -> CompareScreen:
    await open_screen(pilot, CompareScreen(baseline, candidate))
    screen = pilot.app.screen
    assert isinstance(screen, CompareScreen)
    return screen


class TestFromTheRunsScreen:
    """Marking runs with space and pressing c opens the comparison: A is the baseline, B the candidate."""

    async def test_two_marked_runs_compare_first_against_second(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("down", "space", "up", "space", "c")  # A = demo-a, B = demo-b
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, CompareScreen)
            assert (screen.baseline, screen.candidate) == (RUN_A, RUN_B)
            assert f"compare A {RUN_A} → B {RUN_B}" in text_of(app, "#crumb")
            headline = text_of(app, "#headline")
            assert "INCONCLUSIVE" in headline and "numeric  A 0.500 → B 0.714  Δ +0.214" in headline
            assert "p-values: paired t 0.418" in headline and "McNemar n/a" in headline  # several repeats per task
            assert "7 paired tasks (88% coverage: 0 only in A, 1 only in B) · 2 fell, 4 rose, 1 same" in headline
            assert "a drop larger than the tolerated 0.0500 cannot be ruled out" in headline  # a reason

    async def test_one_marked_run_compares_against_the_highlighted_one(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await settle(pilot)
            await pilot.press("space", "down", "c")  # demo-b marked (A), demo-a highlighted (B)
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, CompareScreen)
            assert (screen.baseline, screen.candidate) == (RUN_B, RUN_A)
            await pilot.press("escape")
            assert isinstance(app.screen, RunsScreen)


class TestTheComparison:
    async def test_flips_list_regressions_first_largest_drop_first_then_improvements(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(100, 30)) as pilot:
            await open_compare(pilot)
            assert column(app, "#flips", "kind") == ["▼", "▼", "▲", "▲", "▲", "▲"]
            assert column(app, "#flips", "task") == ["4", "1", "6", "3", "2", "5"]
            assert column(app, "#flips", "a") == ["3/4", "4/4", "0/4 (4 err)", "1/4", "2/4", "0/4"]
            assert column(app, "#flips", "b") == ["0/2", "1/2", "2/2", "2/2", "2/2", "1/2"]
            assert column(app, "#flips", "delta") == ["-0.750", "-0.500", "+1.000", "+0.750", "+0.500", "+0.500"]

    async def test_per_category_deltas_largest_drop_first(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(120, 40)) as pilot:
            await open_compare(pilot)
            assert row_keys(app, "#categories") == ["tools", "arithmetic", "algebra", "number theory", "rates"]
            assert column(app, "#categories", "delta")[:2] == ["-0.750", "+0.167"]
            assert column(app, "#categories", "worse")[:2] == ["1", "1"]

    async def test_what_moved_lists_transition_groups_that_add_up_to_the_delta(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(120, 40)) as pilot:
            await open_compare(pilot)
            assert column(app, "#moved", "group") == [  # drops first (largest first), then gains, then the rest
                "▸ sometimes→never", "▸ always→sometimes", "▸ sometimes→always", "▸ errored→always",
                "▸ never→sometimes", "▸ always→always"]
            assert column(app, "#moved", "tasks") == ["1", "1", "2", "1", "1", "1"]
            assert column(app, "#moved", "contribution") == ["-10.71 pp", "-7.14 pp", "+17.86 pp", "+14.29 pp",
                                                             "+7.14 pp", "0.00 pp"]
            assert column(app, "#moved", "delta")[2] == "+0.625"  # the mean change of a task of the group
            assert "what moved: Σ +21.43 pp, 6 tasks in 5 groups" in screen_text(app)  # Δ = +0.214

    async def test_enter_on_a_group_lists_its_tasks_largest_change_first_and_enter_again_hides_them(
            self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(120, 40)) as pilot:
            await open_compare(pilot)
            await pilot.press("tab", "tab", "down", "down", "enter")  # sometimes→always: tasks 3 and 2
            assert column(app, "#moved", "group")[2:5] == ["▾ sometimes→always", "#3 rates", "#2 algebra"]
            assert column(app, "#moved", "tasks")[3:5] == ["1/4→2/2", "2/4→2/2"]
            assert column(app, "#moved", "delta")[3:5] == ["+0.750", "+0.500"]
            assert column(app, "#moved", "contribution")[3:5] == ["+10.71 pp", "+7.14 pp"]
            assert column(app, "#moved", "p")[3:5] == ["0.400", "0.467"]  # Fisher exact, two-sided
            await pilot.press("enter")
            assert len(row_keys(app, "#moved")) == 6

    async def test_r_and_i_jump_to_the_regressions_and_the_improvements(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            screen = await open_compare(pilot)
            flips = screen.query_one("#flips", DataTable)
            await pilot.press("i")
            assert flips.cursor_row == 2 and flips.has_focus
            await pilot.press("r")
            assert flips.cursor_row == 0

    async def test_enter_on_a_category_shows_only_its_flips_and_x_shows_all(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(100, 30)) as pilot:
            await open_compare(pilot)
            await pilot.press("tab", "down", "enter")  # arithmetic: task 1 fell, task 6 rose
            assert column(app, "#flips", "task") == ["1", "6"]
            assert "flips in arithmetic" in screen_text(app)
            await pilot.press("x")
            assert len(row_keys(app, "#flips")) == 6

    async def test_each_flip_shows_its_question(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(100, 30)) as pilot:
            await open_compare(pilot)
            assert header(app, "#flips", "question") == "question"
            assert column(app, "#flips", "question") == [
                "Use the calculator tool…", "What is 7 * 6?", "How many legs do 3 spid…", "A train travels 60 km i…",
                "Solve x + 4 = 10 for x.", "What is the 10th prime …"]

    async def test_questions_are_read_only_for_the_flips_shown(self, demo: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
        """With one flip of each kind shown, the comparison reads two questions; a category's flips bring theirs."""
        monkeypatch.setattr(compare_screen, "FLIPS_SHOWN", 1)
        app = NelApp(demo)
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await open_compare(pilot)
            assert set(screen._questions) == {TASK_IDS[4], TASK_IDS[6]}
            categories = screen.query_one("#categories", NelTable)
            categories.focus()
            categories.move_to_key("rates")  # task 3 rose: not among the flips shown for every category
            await pilot.press("enter")
            await settle(pilot)
            assert column(app, "#flips", "task") == ["3"]
            assert column(app, "#flips", "question") == ["A train travels 60 km i…"]

    async def test_the_first_rows_questions_come_with_the_comparison_the_rest_once_it_is_drawn(
            self, demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """The comparison waits for the questions of the first rows only (QUESTIONS_FIRST): at 50,000 tasks a
        flip list of 1,000 rows' questions cost ~100 ms before anything was drawn. The other rows fill in after."""
        monkeypatch.setattr(compare_screen, "QUESTIONS_FIRST", 2)
        loaded: list[int] = []
        shown = CompareScreen.on_comparison_loaded

        def on_loaded(screen: CompareScreen, message: compare_screen.ComparisonLoaded) -> None:
            loaded.append(len(message.questions))
            shown(screen, message)

        monkeypatch.setattr(CompareScreen, "on_comparison_loaded", on_loaded)
        app = NelApp(demo)
        async with app.run_test(size=(100, 30)) as pilot:
            await open_compare(pilot)
            await settle(pilot)
            assert loaded == [2]
            assert column(app, "#flips", "question") == [
                "Use the calculator tool…", "What is 7 * 6?", "How many legs do 3 spid…", "A train travels 60 km i…",
                "Solve x + 4 = 10 for x.", "What is the 10th prime …"]

    async def test_tab_moves_between_the_tables(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await open_compare(pilot)
            seen = []
            for _ in range(3):
                await pilot.press("tab")
                seen.append(app.focused.id if app.focused else None)
            assert seen == ["categories", "moved", "flips"]

    async def test_s_swaps_the_sides(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await open_compare(pilot)
            await pilot.press("s")
            await settle(pilot)
            assert (screen.baseline, screen.candidate) == (RUN_B, RUN_A)
            assert f"compare A {RUN_B} → B {RUN_A}" in text_of(app, "#crumb")
            assert "A 0.714 → B 0.500  Δ -0.214" in text_of(app, "#headline")
            assert column(app, "#flips", "task") == ["6", "3", "2", "5", "4", "1"]  # the gains are now drops

    async def test_the_keys_are_listed_with_what_they_do(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(100, 40)) as pilot:
            await open_compare(pilot)
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            text = screen_text(app)
            for line in ("Keys: compare two runs", "Diff the highlighted task across the two runs",
                         "Jump to the first regression", "Swap the sides", "Move to the next table"):
                assert line in text, line


class TestDiffAcrossRuns:
    async def test_enter_on_a_regression_diffs_the_passing_baseline_against_the_failing_candidate(
            self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(100, 30)) as pilot:
            await open_compare(pilot)
            await pilot.press("enter")  # task 4: 3/4 in A, 0/2 in B
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, DiffScreen)
            assert (screen.left.run_id, screen.right.run_id) == (RUN_A, RUN_B)
            assert f"A {RUN_A} attempt 0 (pass)  vs  B {RUN_B} attempt 0 (wrong)" in text_of(app, "#sides")
            assert f"task 4 › diff vs {RUN_B}" in text_of(app, "#crumb")
            assert "extracted answer: '5535' → '5525'" in text_of(app, "#scoring")
            await pilot.press("escape")
            assert isinstance(app.screen, CompareScreen)

    async def test_enter_on_an_improvement_diffs_the_failing_baseline_against_the_passing_candidate(
            self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(100, 30)) as pilot:
            await open_compare(pilot)
            await pilot.press("i", "down", "enter")  # task 3: 1/4 in A (attempt 1 passed), 2/2 in B
            await settle(pilot)
            assert f"A {RUN_A} attempt 0 (wrong)  vs  B {RUN_B} attempt 0 (pass)" in text_of(app, "#sides")

    async def test_enter_on_a_task_that_moved_most_diffs_it_too(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(100, 30)) as pilot:
            await open_compare(pilot)
            await pilot.press("tab", "tab", "down", "down", "down", "enter")  # errored→always: task 6
            await pilot.press("down", "enter")  # task 6: every attempt of A was a server error
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, DiffScreen) and screen.task_idx == 6
            assert f"A {RUN_A} attempt 0 (server_error)  vs  B {RUN_B} attempt 0 (pass)" in text_of(app, "#sides")


class TestAtScale:
    """Two runs of 50,000 tasks: one task is 0.002 percentage points of Δ and still reads as non-zero."""

    @pytest.mark.timeout(120)
    async def test_groups_and_their_tasks_show_readable_non_zero_shares(self, tmp_path: Path) -> None:
        from tui_store import synthetic_store

        store = synthetic_store(tmp_path / "nel.duckdb", runs=2, tasks=50_000, repeats=2)
        app = NelApp(store)
        async with app.run_test(size=(140, 40)) as pilot:
            await open_compare(pilot, "syn-0", "syn-1")
            await pilot.press("tab", "tab", "enter")  # the largest drop's tasks
            rows = list(zip(column(app, "#moved", "group"), column(app, "#moved", "contribution"), strict=True))
            groups = [(g[2:], share) for g, share in rows if g[0] in "▸▾"]
            tasks = [share for g, share in rows if g[0] not in "▸▾"]
            unchanged = {"always→always", "sometimes→sometimes", "never→never"}
            assert len(tasks) == 100 and all(share.endswith(" pp") for _, share in rows)
            assert all(float(share.split()[0]) != 0 for g, share in groups if g not in unchanged)
            assert all(float(share.split()[0]) != 0 for share in tasks), "one task of 50,000 is not ±0.0000"
            assert "±0.0000" not in screen_text(app)


class TestProblemsAreMessages:
    """A run that is gone, a store that cannot be read, runs that cannot be compared: said in the app."""

    async def test_a_run_that_is_gone(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await open_compare(pilot, RUN_A, "no-such-run")
            headline = text_of(app, "#headline")
            assert f"Cannot compare {RUN_A} (A) with no-such-run (B)." in headline
            assert "Run no-such-run is not in this store" in headline and "Press Escape" in headline
            assert not app.screen.query_one("#upper").display
            assert app.screen.check_action("diff", ()) is None

    async def test_a_store_that_cannot_be_read(self, tmp_path: Path) -> None:
        app = NelApp(tmp_path / "nowhere" / "nel.duckdb")
        async with app.run_test() as pilot:
            await open_compare(pilot)
            assert "no store here" in text_of(app, "#headline")

    async def test_runs_of_different_benchmarks_and_metrics(self, tmp_path: Path) -> None:
        from tui_store import demo_store, synthetic_store

        store = synthetic_store(demo_store(tmp_path / "nel.duckdb"), runs=1, tasks=5, repeats=1)
        app = NelApp(store)
        async with app.run_test() as pilot:
            await open_compare(pilot, RUN_A, "syn-0")  # syn-0 is scored by reward, not numeric
            headline = text_of(app, "#headline")
            assert "Cannot compare on 'numeric', the primary metric of demo-a" in headline
            assert "run syn-0 has no metric 'numeric'" in headline


@pytest.fixture
def live_b(tmp_path: Path) -> Path:
    """The demo store with run B still running (its status in the store: being written)."""
    from tui_store import demo_store

    from workbench.store.database import connect_rw

    path = demo_store(tmp_path / "nel.duckdb")
    con = connect_rw(path)
    try:
        con.execute("UPDATE runs SET status = 'running' WHERE run_id = ?", [RUN_B])
    finally:
        con.close()
    return path


class TestAgainstALiveRun:
    """A run still being written: its numbers will move, and every view of the comparison says so."""

    async def test_the_compare_headline_warns_that_the_candidate_is_still_running(self, live_b: Path) -> None:
        app = NelApp(live_b)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_compare(pilot)
            assert "the candidate demo-b is still running (16 attempts so far)" in text_of(app, "#headline")
            shown = " ".join(screen_text(app).split())
            assert "demo-b is still running (16 attempts so far): its numbers will move" in shown

    async def test_the_findings_header_warns_that_the_candidate_is_still_running(self, live_b: Path) -> None:
        from workbench.tui.screens.findings import FindingsScreen

        app = NelApp(live_b)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_compare(pilot)
            await pilot.press("f")
            await settle(pilot)
            assert isinstance(app.screen, FindingsScreen)
            assert "the candidate demo-b is still running" in text_of(app, "#summary")
            assert "demo-b is still running" in " ".join(screen_text(app).split())

    async def test_finished_runs_carry_no_such_warning(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_compare(pilot)
            await pilot.press("f")
            await settle(pilot)
            assert "still running" not in screen_text(app)


class TestHeadless:
    """The queries behind the screen, without a terminal."""

    async def test_the_groups_add_up_to_the_delta(self, demo: Path) -> None:
        result = run_comparison(Store(demo), RUN_A, RUN_B)
        groups = result.attribution.groups
        assert result.n_moved == 6 and sum(g.n_tasks for g in groups) == result.comparison.coverage.n_paired
        assert math.fsum(g.contribution for g in groups) == pytest.approx(result.comparison.score.delta, abs=1e-12)
        assert [(t.task_idx_a, t.task_idx_b) for t in groups[2].tasks] == [(3, 3), (2, 2)]

    async def test_moved_tasks_of_loaded_runs_largest_change_then_confidence_then_task_id(self, demo: Path) -> None:
        from workbench.analysis.sources import load_run

        a, b = load_run(RUN_A, store=demo), load_run(RUN_B, store=demo)
        # task 6 moved by 1.0; tasks 3 and 4 by 0.75 with the same Fisher p-value (0.4), so the task id decides
        assert [m.task_id for m in moved_tasks(a, b, limit=3)] == [TASK_IDS[6], TASK_IDS[3], TASK_IDS[4]]

    async def test_a_cross_run_pair_contrasts_the_outcomes(self, demo: Path) -> None:
        left, right = cross_run_pair(Store(demo), RUN_A, RUN_B, TASK_IDS[1], baseline_better=True)
        assert (left.passed, right is not None and right.passed) == (True, False)
        with pytest.raises(UsageError, match="Run demo-a has no attempt at task task0007"):
            cross_run_pair(Store(demo), RUN_A, RUN_B, TASK_IDS[7], baseline_better=False)

    async def test_different_benchmarks_sharing_no_task_cannot_be_compared(self, tmp_path: Path) -> None:
        from tui_store import demo_store, synthetic_store

        from workbench.store.database import connect_rw

        path = synthetic_store(demo_store(tmp_path / "nel.duckdb"), runs=1, tasks=5, repeats=1)
        con = connect_rw(path)
        try:
            con.execute("""UPDATE runs SET config = '{"primary_metric": "numeric"}' WHERE run_id = 'syn-0'""")
        finally:
            con.close()
        with pytest.raises(UsageError, match="different benchmarks and share no task"):
            run_comparison(Store(path), RUN_A, "syn-0")


    async def test_findings_from_compare_reuse_the_runs_it_read_and_say_the_same(self, demo: Path) -> None:
        from workbench.analysis.triage.compare import diagnose_runs, findings_by_run

        store = Store(demo)
        runs = run_comparison(store, RUN_A, RUN_B).reusable_runs
        assert runs is not None and [r.run_id for r in runs] == [RUN_A, RUN_B]
        reused, cold = diagnose_runs(store, RUN_A, RUN_B, runs=runs), diagnose_runs(store, RUN_A, RUN_B)
        assert findings_by_run(reused) == findings_by_run(cold) and reused.shift == cold.shift
        swapped = diagnose_runs(store, RUN_B, RUN_A, runs=runs)  # runs of another pair: read again, not misused
        assert swapped.baseline.profile.run_id == RUN_B

    async def test_a_run_still_being_written_is_read_again_for_its_findings(self, demo: Path) -> None:
        import dataclasses

        result = run_comparison(Store(demo), RUN_A, RUN_B)
        assert result.runs is not None
        live = (result.runs[0], dataclasses.replace(result.runs[1], status="running"))
        assert dataclasses.replace(result, runs=live).reusable_runs is None


class TestFindings:
    """f on the comparison: the diagnosis' heuristic findings, each with its rule and the tasks it cites."""

    async def test_f_lists_findings_with_their_rule_and_enter_opens_a_cited_task(self, demo: Path) -> None:
        from workbench.tui.screens.findings import FindingsScreen
        from workbench.tui.screens.task import TaskScreen

        app = NelApp(demo)
        async with app.run_test(size=(110, 36)) as pilot:
            await settle(pilot)
            await open_compare(pilot)
            await pilot.press("f")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, FindingsScreen)
            summary = text_of(app, "#summary")
            assert "paired tasks" in summary and "Heuristic" in summary
            assert screen.findings, "the demo runs have errors and one-sided tasks: some rule speaks"
            rules = {rf.finding.rule for rf in screen.findings}
            assert "shift.one_sided_tasks" in rules  # task 7 was attempted by B only
            assert "rule: " in text_of(app, "#detail") and "(heuristic)" in text_of(app, "#detail")
            cited = next(i for i, rf in enumerate(screen.findings) if rf.finding.task_idx)
            for _ in range(cited):
                await pilot.press("down")
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, TaskScreen)
            assert app.screen.task_idx == screen.findings[cited].finding.task_idx[0]
            assert app.screen.run_id == screen.findings[cited].run_id

    async def test_the_cited_tasks_show_their_questions_whole_not_cut_to_the_header(self, demo: Path) -> None:
        """The questions arrive after the rows (a worker reads them): the column widened to them. It stayed as wide
        as its header, showing "A train" for a whole question."""
        from workbench.tui.screens.findings import FindingsScreen

        app = NelApp(demo)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await open_compare(pilot)
            await pilot.press("f")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, FindingsScreen)
            row = next(i for i, rf in enumerate(screen.findings) if len(rf.finding.task_idx) >= 3)
            for _ in range(row):
                await pilot.press("down")
            await settle(pilot)
            assert "A train travels 60 km in 1.5 hours" in screen_text(app)


    async def test_a_run_that_is_gone_is_a_message_not_a_traceback(self, demo: Path) -> None:
        from workbench.tui.screens.findings import FindingsScreen

        app = NelApp(demo)
        async with app.run_test(size=(100, 30)) as pilot:
            await open_screen(pilot, FindingsScreen(RUN_A, "no-such-run"))
            assert "Cannot diagnose" in text_of(app, "#summary")
            assert "no-such-run is not in this store" in text_of(app, "#summary")
