"""SVG snapshots of every screen at 80×24 (and the runs list on a large terminal).

The demo store has fixed content and timestamps, the app is given a relative store path, and cursors
do not blink: each snapshot is the same on every run. `pytest --snapshot-update` rewrites them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pilot_helpers import settle
from textual.pilot import Pilot
from textual.widgets import Input, TextArea
from tui_store import RUN_A, RUN_B

from workbench.tui.app import NelApp
from workbench.tui.screens.compare import CompareScreen
from workbench.tui.screens.live import LiveScreen
from workbench.tui.screens.task import TaskScreen

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def app(demo: Path, monkeypatch: pytest.MonkeyPatch) -> NelApp:
    monkeypatch.chdir(demo.parent)
    return NelApp(Path("nel.duckdb"), clock=lambda: 0.0)


async def _settled(pilot: Pilot[None]) -> None:
    await settle(pilot)


def _keys(*keys: str):  # type: ignore[no-untyped-def]
    async def run(pilot: Pilot[None]) -> None:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    return run


class TestRuns:
    """The runs list, the keys panel and the shell's messages."""

    def test_runs(self, app: NelApp, snap_compare) -> None:  # type: ignore[no-untyped-def]
        assert snap_compare(app, run_before=_settled)

    def test_runs_large_terminal(self, app: NelApp, snap_compare) -> None:  # type: ignore[no-untyped-def]
        assert snap_compare(app, run_before=_keys("down", "space"), terminal_size=(140, 40))

    def test_runs_long_ids(self, long_ids: Path, monkeypatch: pytest.MonkeyPatch, snap_compare) -> None:  # type: ignore[no-untyped-def]
        """Run ids as long as real ones at 80×24: elided in the middle, the highlighted one in full in the status."""
        monkeypatch.chdir(long_ids.parent)
        assert snap_compare(NelApp(Path("nel.duckdb"), clock=lambda: 0.0), run_before=_keys("down"))

    def test_help(self, app: NelApp, snap_compare) -> None:  # type: ignore[no-untyped-def]
        assert snap_compare(app, run_before=_keys("question_mark"))

    def test_bad_store(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, snap_compare) -> None:  # type: ignore[no-untyped-def]
        monkeypatch.chdir(tmp_path)
        assert snap_compare(NelApp(Path("missing/nel.duckdb")), run_before=_settled)

    def test_new_run_form(self, app: NelApp, snap_compare) -> None:  # type: ignore[no-untyped-def]
        """The new-run form filled in for the built-in mock model (ctrl+o), with a mistake named."""
        async def run(pilot: Pilot[None]) -> None:
            await _keys("n", "ctrl+o")(pilot)
            pilot.app.screen.query_one("#shards", Input).value = "0"
            await pilot.press("ctrl+s")
            await settle(pilot)

        assert snap_compare(app, run_before=run)

    def test_too_small(self, app: NelApp, snap_compare) -> None:  # type: ignore[no-untyped-def]
        assert snap_compare(app, run_before=_settled, terminal_size=(50, 12))


class TestTriage:
    """Tasks of a run, one task, a diff."""

    def test_tasks_sometimes_pass(self, app: NelApp, snap_compare) -> None:  # type: ignore[no-untyped-def]
        assert snap_compare(app, run_before=_keys("down", "enter", "b"))

    def test_task_detail_with_tool_calls(self, app: NelApp, snap_compare) -> None:  # type: ignore[no-untyped-def]
        async def run(pilot: Pilot[None]) -> None:
            await settle(pilot)
            await pilot.app.push_screen(TaskScreen(RUN_A, 4))
            await settle(pilot)
            await pilot.press("t", "n", "n")

        assert snap_compare(app, run_before=run)

    def test_diff_first_divergence(self, app: NelApp, snap_compare) -> None:  # type: ignore[no-untyped-def]
        async def run(pilot: Pilot[None]) -> None:
            await settle(pilot)
            await pilot.app.push_screen(TaskScreen(RUN_A, 3))
            await settle(pilot)
            await pilot.press("d")
            await settle(pilot)

        assert snap_compare(app, run_before=run)

    def test_compare_two_runs(self, app: NelApp, snap_compare) -> None:  # type: ignore[no-untyped-def]
        async def run(pilot: Pilot[None]) -> None:
            await settle(pilot)
            await pilot.app.push_screen(CompareScreen(RUN_A, RUN_B))
            await settle(pilot)

        assert snap_compare(app, run_before=run)


class TestSqlAndLive:
    """The SQL screen, with a result and with an error, and a finished run on the live screen."""

    def _sql(self, query: str):  # type: ignore[no-untyped-def]
        async def run(pilot: Pilot[None]) -> None:
            await settle(pilot)
            await pilot.press("colon")
            pilot.app.screen.query_one("#query", TextArea).text = query
            await pilot.press("ctrl+r")
            await settle(pilot)

        return run

    def test_sql_result(self, app: NelApp, snap_compare) -> None:  # type: ignore[no-untyped-def]
        query = "SELECT run_id, n_steps, round(pass_at_1, 3) AS pass_at_1 FROM run_metrics ORDER BY run_id"
        assert snap_compare(app, run_before=self._sql(query))

    def test_sql_error(self, app: NelApp, snap_compare) -> None:  # type: ignore[no-untyped-def]
        assert snap_compare(app, run_before=self._sql("SELECT * FROM no_such_table"))

    def test_live_finished_run(self, app: NelApp, snap_compare) -> None:  # type: ignore[no-untyped-def]
        async def run(pilot: Pilot[None]) -> None:
            await settle(pilot)
            await pilot.app.push_screen(LiveScreen(RUN_A))
            await settle(pilot)

        assert snap_compare(app, run_before=run)
