"""The TUI over a run the engine really made (GSM8K against the built-in mock model): real transcripts,
real scoring details, real failure categories."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pilot_helpers import column, open_screen, settle, text_of

from workbench.engine import run_evaluation
from workbench.environments import get_environment
from workbench.mock import mock_model
from workbench.model.config import ModelConfig
from workbench.solvers import SimpleSolver
from workbench.tui.app import NelApp
from workbench.tui.screens.diff import DiffScreen
from workbench.tui.screens.task import TaskScreen
from workbench.tui.screens.tasks import TasksScreen
from workbench.tui.widgets.diff_view import DiffView

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A GSM8K run of 12 problems × 4 attempts with a few injected faults: (store, run id)."""
    store = tmp_path_factory.mktemp("real") / "nel.duckdb"
    with mock_model(latency_ms=0, fail_rate=0.1, faults="500,malformed") as mock:
        solver = SimpleSolver(ModelConfig(url=mock.base_url, model_id="nel-mock", max_retries=0))
        result = asyncio.run(run_evaluation(get_environment("gsm8k"), solver, store=store, n_repeats=4,
                                            max_problems=12, max_concurrent=8))
    return store, result.run_id


async def test_a_real_run_reads_from_its_runs_row_to_a_diff(real: tuple[Path, str]) -> None:
    store, run_id = real
    app = NelApp(store)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert column(app, "#runs", "run") == [run_id]
        await open_screen(pilot, TasksScreen(run_id))
        buckets = column(app, "#tasks", "bucket")
        assert len(buckets) == 12 and set(buckets) <= {"sometimes", "never", "errored", "always"}
        await pilot.press("b")  # sometimes-pass only
        await settle(pilot)
        assert set(column(app, "#tasks", "bucket")) == {"sometimes"}
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, TaskScreen) and screen.detail is not None
        assert len(screen.detail.attempts) == 4 and {"pass"} < set(column(app, "#attempts", "outcome"))
        assert "── user" in "".join(t for line in screen.query_one("#transcript").lines for t, _ in line)  # type: ignore[attr-defined]
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, DiffScreen)
        assert app.screen.query_one(DiffView)._diff.first_divergence is not None
        assert "outcome: pass" in text_of(app, "#scoring")
