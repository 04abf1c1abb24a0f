"""Agent transcripts people can read, searched, copied and exported; the question in view (issue 19, 3–5)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from pilot_helpers import column, open_screen, screen_text, settle, text_of
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, RadioButton, Static
from tui_store import AGENT_QUESTION, OUTPUT_LINES, SYSTEM, TASKS

from workbench.analysis import triage
from workbench.store import open_store
from workbench.tui.app import NelApp
from workbench.tui.export_view import ExportDialog
from workbench.tui.screens.diff import DiffScreen
from workbench.tui.screens.task import TaskScreen
from workbench.tui.screens.tasks import TasksScreen
from workbench.tui.widgets.transcript import TranscriptView

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(60)]


async def open_agent_task(pilot: Pilot[None], run_id: str = "agent-a") -> TranscriptView:
    await open_screen(pilot, TaskScreen(run_id, 0))
    return pilot.app.screen.query_one(TranscriptView)


class TestReadableToolCalls:
    async def test_a_tool_call_reads_as_a_command_and_its_long_output_opens_folded(self, agent: Path) -> None:
        app = NelApp(agent)
        async with app.run_test(size=(110, 50)) as pilot:
            view = await open_agent_task(pilot)
            text = screen_text(app)
            assert "bash: ls -la" in text and '"arguments"' not in text
            assert f"▶ ── output of bash (call_0; turn 1, exit 0; {OUTPUT_LINES} lines) (o opens)" in text
            assert "file05.py" not in text  # folded: the calls around it stay in view
            assert "── assistant reply (finish: stop)" in text
            await pilot.press("t", "o")  # the first tool output (o on another part: the next output)
            assert "▼ ── output of bash" in screen_text(app) and "file05.py" in screen_text(app)
            assert len(view.lines) > OUTPUT_LINES
            spliced = (list(view.lines), list(view._vis_start), list(view._line_vis), view.block_starts())
            view.content_changed()  # opening relaid out that part alone: the same as laying out the whole
            assert spliced == (list(view.lines), list(view._vis_start), list(view._line_vis), view.block_starts())
            await pilot.press("O")  # fold every output again
            assert "file05.py" not in screen_text(app)


class TestSearch:
    async def test_slash_finds_every_match_n_and_shift_n_step_through_them_and_escape_closes(
            self, agent: Path) -> None:
        app = NelApp(agent)
        async with app.run_test(size=(110, 40)) as pilot:
            view = await open_agent_task(pilot)
            await pilot.press("slash", *"file1")
            await pilot.pause()
            assert text_of(app, "#message") == "1 of 10 matches"  # file10 … file19, in the folded output
            assert "file10.py" in screen_text(app)  # the search opened the output it landed in
            await pilot.press("enter", "n", "n")
            assert text_of(app, "#message") == "3 of 10 matches"
            assert "file12.py" in screen_text(app)
            await pilot.press("N", "N", "N")
            assert text_of(app, "#message") == "10 of 10 matches"  # wraps round to the last
            await pilot.press("escape")
            assert not view.searching and not app.screen.query_one("#message", Static).display
            assert isinstance(app.screen, TaskScreen)  # the first Escape closed the search only
            await pilot.press("escape")
            assert not isinstance(app.screen, TaskScreen)

    async def test_a_query_with_no_match_says_so_and_a_capital_makes_it_exact(self, agent: Path) -> None:
        app = NelApp(agent)
        async with app.run_test(size=(110, 40)) as pilot:
            await open_agent_task(pilot)
            await pilot.press("slash", *"zebra")
            await pilot.pause()
            assert text_of(app, "#message") == "no match for 'zebra'"
            app.screen.query_one("#search", Input).value = "LIST"
            await pilot.pause()
            assert text_of(app, "#message") == "no match for 'LIST'"
            app.screen.query_one("#search", Input).value = "list"
            await pilot.pause()
            assert text_of(app, "#message") == "1 of 2 matches"  # "List the files…", "I will list the files."


class TestCopy:
    async def test_c_copies_the_part_at_the_top_and_shift_c_the_whole_attempt(self, agent: Path) -> None:
        app = NelApp(agent)
        async with app.run_test(size=(110, 40)) as pilot:
            await open_agent_task(pilot)
            await pilot.press("c")
            assert app.clipboard == SYSTEM
            await pilot.press("t", "n", "c")
            assert app.clipboard == AGENT_QUESTION
            await pilot.press("n", "n", "c")
            assert app.clipboard == "bash: ls -la"
            await pilot.press("C")
            assert app.clipboard.startswith(f"── system ──\n{SYSTEM}") and "── scoring ──" in app.clipboard
            assert "file39.py" in app.clipboard  # folded on screen, whole in the copy


class TestExport:
    async def test_e_writes_the_attempts_in_each_format_and_polars_reads_them_back(
            self, agent: Path, tmp_path: Path) -> None:
        app = NelApp(agent)
        async with app.run_test(size=(110, 40)) as pilot:
            await open_agent_task(pilot)
            for fmt, suffix in (("markdown", ".md"), ("json", ".json"), ("csv", ".csv"), ("parquet", ".parquet")):
                await pilot.press("e")
                await pilot.pause()
                dialog = app.screen
                assert isinstance(dialog, ExportDialog)
                path = dialog.query_one("#export-path", Input)
                assert path.value == str(agent.parent / "exports" / "agent-a-task-0-attempts.md")
                dialog.query_one(f"#format-{fmt}", RadioButton).value = True
                await pilot.pause()
                assert path.value.endswith(f"agent-a-task-0-attempts{suffix}")
                path.value = str(tmp_path / f"out{suffix}")
                label = dialog.query_one(f"#format-{fmt}", RadioButton).label
                await pilot.press("enter")
                await pilot.pause()
                assert isinstance(app.screen, TaskScreen)
                assert text_of(app, "#message") == f"Wrote 2 attempt(s) of task 0 as {label} to {path.value}"
        markdown = (tmp_path / "out.md").read_text()
        assert "## Question" in markdown and "## Attempt 1 (pass)" in markdown and "bash: ls -la" in markdown
        for frame in (pl.read_json(tmp_path / "out.json"), pl.read_csv(tmp_path / "out.csv"),
                      pl.read_parquet(tmp_path / "out.parquet")):
            assert frame["repeat"].to_list() == [0, 1] and frame["run_id"].to_list() == ["agent-a"] * 2
            assert "ls -la" in str(frame["messages"][0])
        assert pl.read_csv(tmp_path / "out.csv")["turns"].str.contains('"exit_code":0').all()  # nested → JSON text

    async def test_a_path_that_cannot_be_written_is_named_and_the_dialog_stays(self, agent: Path,
                                                                                 tmp_path: Path) -> None:
        blocker = tmp_path / "a-file"
        blocker.write_text("not a folder")
        app = NelApp(agent)
        async with app.run_test(size=(110, 40)) as pilot:
            await open_agent_task(pilot)
            await pilot.press("e")
            await pilot.pause()
            app.screen.query_one("#export-path", Input).value = str(blocker / "out.md")
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, ExportDialog)
            assert str(app.screen.query_one("#export-error", Static).content).startswith(f"cannot write {blocker}")
            await pilot.press("escape")
            assert isinstance(app.screen, TaskScreen) and not app.screen.query_one("#message", Static).display


class TestQuestionInView:
    async def test_the_task_detail_opens_on_the_whole_question(self, agent: Path) -> None:
        app = NelApp(agent)
        async with app.run_test(size=(110, 40)) as pilot:
            await open_agent_task(pilot)
            assert text_of(app, "#question") == f"Q: {AGENT_QUESTION}"

    async def test_the_task_list_shows_the_question_turns_and_tool_calls(self, agent: Path) -> None:
        app = NelApp(agent)
        async with app.run_test(size=(160, 40)) as pilot:
            await open_screen(pilot, TasksScreen("agent-a"))
            assert column(app, "#tasks", "question") == ["List the files in the r…"]  # 24 cells: the numbers fit 80
            assert column(app, "#tasks", "turns") == ["2"]
            assert column(app, "#tasks", "tool calls") == ["1"]


class TestTurnAlignedDiff:
    async def test_turn_i_faces_turn_i_and_only_the_changed_turn_is_marked(self, agent: Path) -> None:
        store = open_store(agent)
        a = triage.attempts(store, "agent-a", task_idx=0)[0]
        b = triage.attempts(store, "agent-b", task_idx=0)[1]
        app = NelApp(agent)
        async with app.run_test(size=(140, 60)) as pilot:
            await open_screen(pilot, DiffScreen("agent-a", 0, left=a, right=b))
            diff = app.screen.query_one("#diff").__dict__["_diff"]  # the WordDiff on show
            headings = [i for i, row in enumerate(diff.rows) if row.left and row.left[0].text.startswith("═══")]
            labels = [diff.rows[i].left[0].text for i in headings]
            assert labels == ["═══ prompt ═══", "═══ turn 1 ═══", "═══ turn 2 ═══"]
            assert all(not diff.rows[i].changed for i in range(headings[0], headings[1]))  # the prompt: same
            assert headings[1] < diff.first_divergence  # the first change is in turn 1: file39 is gone in B
            assert "═══ turn 1 ═══" in screen_text(app)


class TestTaskNumber:
    async def test_hash_and_a_number_in_the_filter_finds_that_task(self, big: Path) -> None:
        app = NelApp(big)
        async with app.run_test(size=(120, 30)) as pilot:
            await open_screen(pilot, TasksScreen("syn-0"))
            await pilot.press("slash", *"#12", "enter")
            await settle(pilot)
            assert column(app, "#tasks", "task") == ["12"]


class TestSqlExport:
    async def test_ctrl_e_exports_the_query_result_as_csv_by_default_and_as_parquet(self, demo: Path,
                                                                                   tmp_path: Path) -> None:
        from textual.widgets import TextArea

        from workbench.tui.screens.sql import SqlScreen

        app = NelApp(demo)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await pilot.press("colon")
            assert isinstance(app.screen, SqlScreen)
            await pilot.press("ctrl+e")
            assert "No result to export" in text_of(app, "#status")
            app.screen.query_one("#query", TextArea).text = "SELECT run_id, n_steps, [1, 2] AS l FROM run_metrics"
            await pilot.press("ctrl+r")
            await settle(pilot)
            for fmt, label, name in (("csv", "CSV", "r.csv"), ("parquet", "Parquet", "r.parquet")):
                await pilot.press("ctrl+e")
                await pilot.pause()
                dialog = app.screen
                assert isinstance(dialog, ExportDialog)
                dialog.query_one(f"#format-{fmt}", RadioButton).value = True
                dialog.query_one("#export-path", Input).value = str(tmp_path / name)
                await pilot.press("enter")
                await pilot.pause()
                assert text_of(app, "#status") == f"Wrote 2 row(s) of the query result as {label} to {tmp_path / name}"
        csv, parquet = pl.read_csv(tmp_path / "r.csv"), pl.read_parquet(tmp_path / "r.parquet")
        assert sorted(csv["run_id"].to_list()) == ["demo-a", "demo-b"] and csv["l"].to_list() == ["[1,2]"] * 2
        assert parquet["l"].to_list() == [[1, 2]] * 2  # nested stays nested where the format has lists


class TestFindingsCiteEveryTask:
    async def test_enter_lists_the_cited_tasks_with_their_questions_and_opens_any_of_them(self, demo: Path) -> None:
        from workbench.analysis.triage.compare import RunFinding
        from workbench.tui.screens.findings import FindingsScreen

        app = NelApp(demo)
        async with app.run_test(size=(120, 40)) as pilot:
            await open_screen(pilot, FindingsScreen("demo-a", "demo-b"))
            screen = app.screen
            assert isinstance(screen, FindingsScreen)
            row, rf = next((i, f) for i, f in enumerate(screen.findings) if len(f.finding.task_idx) >= 2)
            assert isinstance(rf, RunFinding)
            screen.query_one("#findings", DataTable).move_cursor(row=row)
            await settle(pilot)
            cited = [int(v.lstrip("#")) for v in column(app, "#cited", "task")]
            assert cited == list(rf.finding.task_idx)
            assert column(app, "#cited", "question") == [TASKS[i][0] for i in cited]
            await pilot.press("enter")  # to the cited tasks
            assert app.focused is screen.query_one("#cited")
            await pilot.press("down", "enter")  # the second one, not only the first
            await settle(pilot)
            assert isinstance(app.screen, TaskScreen) and app.screen.task_idx == cited[1]
            await pilot.press("escape")
            await pilot.press("escape")  # from the cited tasks back to the findings
            assert app.focused is screen.query_one("#findings")


class TestSearchFollowsTheAttempt:
    async def test_another_attempt_keeps_the_query_and_counts_its_own_matches(self, agent: Path) -> None:
        app = NelApp(agent)
        async with app.run_test(size=(110, 40)) as pilot:
            await open_agent_task(pilot, "agent-b")
            await pilot.press("slash", *"file39", "enter")
            await pilot.pause()
            assert text_of(app, "#message") == "1 of 1 match"
            app.screen.query_one("#attempts", DataTable).move_cursor(row=1)  # attempt 1 saw 39 files: no file39
            await pilot.pause()
            assert text_of(app, "#message") == "no match for 'file39'"
            app.screen.query_one("#attempts", DataTable).move_cursor(row=0)
            await pilot.pause()
            assert text_of(app, "#message") == "1 match (n: the first)"
            await pilot.press("n")
            assert text_of(app, "#message") == "1 of 1 match"


class TestFlipExport:
    async def test_e_on_a_comparison_exports_every_flip_with_its_question(self, demo: Path, tmp_path: Path) -> None:
        from workbench.tui.screens.compare import CompareScreen

        app = NelApp(demo)
        async with app.run_test(size=(120, 40)) as pilot:
            await open_screen(pilot, CompareScreen("demo-a", "demo-b"))
            screen = app.screen
            assert isinstance(screen, CompareScreen) and screen.result is not None
            flips = screen.result.comparison.flips
            await pilot.press("e")
            await settle(pilot)
            dialog = app.screen
            assert isinstance(dialog, ExportDialog)
            dialog.query_one("#format-csv", RadioButton).value = True
            dialog.query_one("#export-path", Input).value = str(tmp_path / "flips.csv")
            await pilot.press("enter")
            await pilot.pause()
            n = len(flips.regressions) + len(flips.improvements)
            assert text_of(app, "#message") == f"Wrote {n} flips of demo-a → demo-b as CSV to {tmp_path / 'flips.csv'}"
        frame = pl.read_csv(tmp_path / "flips.csv")
        assert frame.height == n and frame["flip"].to_list() == (["regression"] * len(flips.regressions)
                                                                 + ["improvement"] * len(flips.improvements))
        assert frame["question"].to_list() == [TASKS[i][0] for i in frame["task_idx"].to_list()]
