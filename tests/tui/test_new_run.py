"""Screen 2, the new-run form, and the live view's stop and resume: a run started from the TUI goes to
the background (real supervisor and worker processes, the built-in mock model) and is watched until
it finishes; the form names a mistake before anything starts."""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pilot_helpers import screen_text, settle, wait_for
from recording_model import recording_model, url_of
from textual.pilot import Pilot
from textual.widgets import Input, Select
from tui_store import RUN_A

from workbench.store.reader import Store
from workbench.tui.app import NelApp
from workbench.tui.messages import LaunchChanged, LiveUpdated
from workbench.tui.screens.live import LiveScreen
from workbench.tui.screens.new_run import NewRunScreen
from workbench.tui.screens.runs import RunsScreen
from workbench.workers import LaunchState, find_launch
from workbench.workers.local import write_state
from workbench.workers.request import RunRequest

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]


async def fill(pilot: Pilot[Any], **values: str) -> None:
    screen = pilot.app.screen
    for field, value in values.items():
        if field in ("bench", "sandbox"):
            screen.query_one(f"#{field}", Select).value = value
        else:
            screen.query_one(f"#{field}", Input).value = value
    await pilot.pause()


def suite(folder: Path, benchmarks: str) -> Path:
    """A config file of one service and ``benchmarks`` (the YAML items of its list)."""
    config = folder / "suite.yaml"
    config.write_text("services:\n  m:\n    url: http://127.0.0.1:8000/v1\n    model: x\nbenchmarks:\n" + benchmarks)
    return config


async def start_config(pilot: Pilot[Any], config: Path) -> None:
    """On the runs screen: n, the config file, ctrl+s."""
    await settle(pilot)
    await pilot.press("n")
    await fill(pilot, config=str(config))
    await pilot.press("ctrl+s")
    await settle(pilot)


class TestNewRun:
    """n on the runs screen opens the form; ctrl+s starts the run and opens its live view."""

    async def test_start_a_sharded_run_against_the_mock_and_watch_it_finish(self, tmp_path: Path) -> None:
        store = tmp_path / "nel.duckdb"
        app = NelApp(store)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            assert "press n to start" in screen_text(app)
            await pilot.press("n")
            assert isinstance(app.screen, NewRunScreen)
            await pilot.press("ctrl+o")  # the built-in mock, gsm8k
            await fill(pilot, repeats="2", max_problems="15", shards="2", max_concurrent="4")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
            live = app.screen
            assert isinstance(live, LiveScreen)
            await wait_for(pilot, lambda: live.launch is not None and live.launch.status == "complete")
            await wait_for(pilot, lambda: live.snapshot is not None and live.snapshot.run.status == "complete")
            assert live.snapshot is not None and live.snapshot.run.n_steps == 30
            assert [s.done for s in live.snapshot.shards] == [14, 16]  # problems 0..6 and 7..14, twice each
            assert "background: complete" in screen_text(app)
            assert live.check_action("stop", ()) is None  # nothing left to stop
            await pilot.press("escape")
            assert isinstance(app.screen, RunsScreen)
        assert Store(store).rows("SELECT count(*) FROM steps")[0][0] == 30

    async def test_a_code_benchmark_runs_with_the_sandbox_chosen_in_the_form(self, tmp_path: Path) -> None:
        store = tmp_path / "nel.duckdb"
        app = NelApp(store)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("n")
            await pilot.press("ctrl+o")
            await fill(pilot, bench="humaneval", sandbox="local", repeats="1", max_problems="4")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
            live = app.screen
            assert isinstance(live, LiveScreen)
            await wait_for(pilot, lambda: live.snapshot is not None and live.snapshot.run.status == "complete")
        rows = Store(store).rows("SELECT count(*), count(DISTINCT scoring_details->>'sandbox') FROM steps")
        assert rows == [(4, 1)]

    async def test_the_extra_request_body_in_the_form_reaches_every_request(self, tmp_path: Path) -> None:
        store = tmp_path / "nel.duckdb"
        app = NelApp(store)
        with recording_model() as model:
            async with app.run_test(size=(100, 30)) as pilot:
                await settle(pilot)
                await pilot.press("n")
                await fill(pilot, bench="gsm8k", model_url=url_of(model), model_id="m", repeats="1",
                           max_problems="3", shards="2", extra_body='{"top_k": 20}')
                await pilot.press("ctrl+s")
                await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
                live = app.screen
                assert isinstance(live, LiveScreen)
                await wait_for(pilot, lambda: live.launch is not None and live.launch.status == "complete")
        assert len(model.bodies) == 3 and all(body["top_k"] == 20 for body in model.bodies)

    async def test_temperature_seed_and_run_id_from_the_form_reach_the_run(self, tmp_path: Path) -> None:
        store = tmp_path / "nel.duckdb"
        app = NelApp(store)
        with recording_model() as model:
            async with app.run_test(size=(100, 40)) as pilot:
                await settle(pilot)
                await pilot.press("n")
                await fill(pilot, bench="gsm8k", model_url=url_of(model), model_id="m", repeats="2",
                           max_problems="2", temperature="0.3", seed="7", run_id="form-run")
                await pilot.press("ctrl+s")
                await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
                live = app.screen
                assert isinstance(live, LiveScreen) and live.run_id == "form-run"
                await wait_for(pilot, lambda: live.launch is not None and live.launch.status == "complete")
        assert sorted((b["temperature"], b["seed"]) for b in model.bodies) == [(0.3, 7), (0.3, 7), (0.3, 8), (0.3, 8)]

    async def test_stop_and_resume_from_the_live_view(self, tmp_path: Path) -> None:
        store = tmp_path / "nel.duckdb"
        app = NelApp(store)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("n", "ctrl+o")
            # 40 steps one at a time, 300 ms each: 12 s of run, so a loaded machine still sees it running at "x"
            await fill(pilot, repeats="1", max_problems="40", max_concurrent="1", mock_latency_ms="300")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
            live = app.screen
            assert isinstance(live, LiveScreen)
            await wait_for(pilot, lambda: live.snapshot is not None and live.snapshot.run.n_steps >= 3)
            await pilot.press("x")
            await wait_for(pilot, lambda: live.launch is not None and live.launch.status == "stopped")
            kept = Store(store).rows("SELECT count(*) FROM steps")[0][0]
            assert 3 <= kept < 40
            await pilot.press("r")
            await wait_for(pilot, lambda: live.launch is not None and live.launch.status == "complete")
            await wait_for(pilot, lambda: live.snapshot is not None and live.snapshot.run.status == "complete")
        rows = Store(store).rows("SELECT count(*), count(DISTINCT task_idx) FROM steps")[0]
        assert tuple(rows) == (40, 40)
        launch = find_launch(store, live.run_id)
        assert launch is not None and launch.resumes == 1

    async def test_a_poll_that_read_the_launch_before_a_stop_answered_does_not_undo_the_stop(
            self, demo: Path, tmp_path: Path) -> None:
        # A poll reads the launch, then the store; the stop's answer can land in between. The poll's older
        # "running" used to win for half a second, and an r pressed then was refused without a word (CI saw it).
        store = tmp_path / "nel.duckdb"
        shutil.copy(demo, store)
        stopped = LaunchState(launch_id=RUN_A, request=RunRequest(store=store, output_dir=tmp_path, run_id=RUN_A),
                              status="stopped", run_ids=(RUN_A,))
        write_state(stopped)
        app = NelApp(store)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await app.push_screen(LiveScreen(RUN_A))
            live = app.screen
            assert isinstance(live, LiveScreen)
            await wait_for(pilot, lambda: live.launch is not None)
            answered = time.monotonic()
            live.start("launch", lambda token: LaunchChanged(token, stopped, "stop", answered))
            await wait_for(pilot, lambda: "stopped" in screen_text(app))
            polls = live.polls
            running = replace(stopped, status="running", supervisor_pid=1)
            live.start("live", lambda token: LiveUpdated(token, live.snapshot, 0.0, running, answered - 1.0))
            await wait_for(pilot, lambda: live.polls > polls)
            assert live.launch is not None and live.launch.status == "stopped"
            assert live.check_action("resume", ()) is True

    async def test_a_run_started_elsewhere_keeps_its_stop_and_resume_keys(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await settle(pilot)
            await pilot.press("l")
            await settle(pilot)
            assert isinstance(app.screen, LiveScreen)
            # x and r answer (tests/tui/test_live.py: TestRunStartedFromATerminal): they are not hidden
            assert app.screen.check_action("stop", ()) and app.screen.check_action("resume", ())


class TestFormMistakes:
    """A mistake in the form is named on the message line; nothing starts."""

    @pytest.mark.parametrize(("values", "message"), [
        ({}, "bench: required"),
        ({"bench": "gsm8k", "model_url": "localhost:8000", "model_id": "m"}, "model_url: 'localhost:8000' is not"),
        ({"bench": "gsm8k", "model_url": "mock", "model_id": "m", "shards": "0"}, "shards: must be within"),
        ({"bench": "gsm8k", "model_url": "http://h:1/v1", "model_id": "m", "mock_latency_ms": "5"},
         "mock_latency_ms: applies to the built-in mock model only"),
        ({"config": "/nonexistent/suite.yaml"}, "config: /nonexistent/suite.yaml: no such file"),
        ({"config": "x.yaml", "bench": "gsm8k"}, "config: give a config file or a benchmark"),
        ({"bench": "humaneval", "model_url": "mock", "model_id": "m"},
         "sandbox: humaneval runs each attempt in a sandbox: choose docker or local"),
    ])
    async def test_a_bad_form_says_which_field(self, tmp_path: Path, values: dict[str, str], message: str) -> None:
        app = NelApp(tmp_path / "nel.duckdb")
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("n")
            await fill(pilot, **values)
            await pilot.press("ctrl+s")
            await settle(pilot)
            assert isinstance(app.screen, NewRunScreen)
            assert message in screen_text(app).replace("\n", " ") or message in str(
                app.screen.query_one("#message").render())
        assert not (tmp_path / "nel.duckdb.workers").exists()

    async def test_fixing_the_field_clears_its_error_at_once(self, tmp_path: Path) -> None:
        app = NelApp(tmp_path / "nel.duckdb")
        async with app.run_test(size=(100, 40)) as pilot:
            await settle(pilot)
            await pilot.press("n")
            await fill(pilot, bench="gsm8k", model_url="localhost:8000", model_id="m")
            await pilot.press("ctrl+s")
            await settle(pilot)
            message = app.screen.query_one("#message")
            assert "model_url: 'localhost:8000' is not" in str(message.render())
            await fill(pilot, model_url="http://127.0.0.1:8000/v1", shards="0")
            assert "shards: must be within" in str(message.render())  # the next mistake, not the fixed one
            await fill(pilot, shards="1")
            assert not message.display
        assert not (tmp_path / "nel.duckdb.workers").exists()

    async def test_a_run_over_a_thousand_steps_asks_first(self, tmp_path: Path) -> None:
        from workbench.tui.screens.confirm import ConfirmScreen

        app = NelApp(tmp_path / "nel.duckdb")
        async with app.run_test(size=(100, 40)) as pilot:
            await settle(pilot)
            await pilot.press("n", "ctrl+o")  # gsm8k, every problem, its 4 default repeats
            await pilot.press("ctrl+s")
            await settle(pilot)
            assert isinstance(app.screen, ConfirmScreen)
            assert "5,276 model calls (1,319 problems × 4 repeats of gsm8k)" in str(
                app.screen.query_one("#question").render())
            await pilot.press("n")
            await settle(pilot)
            assert isinstance(app.screen, NewRunScreen)
            assert "Not started" in str(app.screen.query_one("#message").render())
        assert not (tmp_path / "nel.duckdb.workers").exists()

    async def test_a_config_file_run_over_a_thousand_steps_asks_first(self, tmp_path: Path) -> None:
        """Its size is known from the config (each benchmark's problems, range and repeats) before it starts."""
        from workbench.tui.screens.confirm import ConfirmScreen

        config = suite(tmp_path, "  - name: gsm8k\n    repeats: 2\n  - name: gsm8k\n    max_problems: 100\n")
        app = NelApp(tmp_path / "nel.duckdb")
        async with app.run_test(size=(100, 40)) as pilot:
            await start_config(pilot, config)
            assert isinstance(app.screen, ConfirmScreen)
            question = " ".join(str(app.screen.query_one("#question").render()).split())
            assert ("3,038 model calls (suite.yaml: 1,319 problems × 2 repeats of gsm8k; 100 problems × 4 repeats "
                    "of gsm8k)") in question
            await pilot.press("n")
            await settle(pilot)
            assert "Not started" in str(app.screen.query_one("#message").render())
        assert not (tmp_path / "nel.duckdb.workers").exists()

    async def test_the_planned_size_of_a_config_file(self, tmp_path: Path) -> None:
        """A range and max problems narrow a benchmark as the engine does; a benchmark whose size is not known
        without loading its data (another dataset) is named, not guessed."""
        from workbench.tui.screens.new_run import planned_steps
        from workbench.workers import RunRequest

        def plan(benchmarks: str):  # type: ignore[no-untyped-def]
            return planned_steps(RunRequest(store=tmp_path / "nel.duckdb", output_dir=tmp_path,
                                            config=suite(tmp_path, benchmarks)))

        ranged = plan("  - name: gsm8k\n    problem_range: [100, 400]\n    max_problems: 250\n    repeats: 3\n")
        assert ranged is not None and (ranged.steps, ranged.unknown) == (750, ())
        partly = plan("  - name: gsm8k\n    repeats: 1\n  - name: gsm8k\n    dataset: data/mine.jsonl\n")
        assert partly is not None and partly.steps == 1319 and partly.unknown == ("gsm8k (dataset data/mine.jsonl)",)

    async def test_a_config_file_mistake_is_named_by_file_and_line(self, tmp_path: Path) -> None:
        config = suite(tmp_path, "  - name: gsm8k\n    repeets: 2\n")
        app = NelApp(tmp_path / "nel.duckdb")
        async with app.run_test(size=(100, 30)) as pilot:
            await start_config(pilot, config)
            assert isinstance(app.screen, NewRunScreen)
            assert "suite.yaml:7: benchmarks.0.repeets" in str(app.screen.query_one("#message").render())
