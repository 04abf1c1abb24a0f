"""Screen 3: a run another process is writing, watched live (the store is polled at least once a second)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pilot_helpers import column, settle, text_of, wait_for
from tui_store import RUN_A

from workbench.store.layout import segments_root
from workbench.tui.app import NelApp
from workbench.tui.screens.live import LiveScreen
from workbench.tui.screens.runs import RunsScreen
from workbench.tui.screens.task import TaskScreen
from workbench.tui.screens.tasks import TasksScreen

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(40)]
WRITER = Path(__file__).with_name("tui_store.py")


class LiveWriter:
    """Another process writing run ``live-run``: one step, then the rest after :meth:`start`, the last
    after :meth:`finish` (a slow machine cannot finish the run before the test has watched it)."""

    def __init__(self, store: Path) -> None:
        self.gate = store.with_name(store.name + ".gate")
        self.hold = store.with_name(store.name + ".hold")
        self.gate.touch()
        self.hold.touch()
        self.process = subprocess.Popen(
            [sys.executable, str(WRITER), "live", str(store), str(self.gate), str(self.hold)])

    def start(self) -> None:
        """Let the steps after the first land, one every 80 ms."""
        self.gate.unlink(missing_ok=True)

    def finish(self, timeout: float = 20) -> None:
        """Let the last step land and wait for the writer to exit."""
        self.start()
        self.hold.unlink(missing_ok=True)
        self.process.wait(timeout=timeout)


@contextmanager
def live_writer(store: Path) -> Iterator[LiveWriter]:
    """A :class:`LiveWriter` into ``store``, yielded once its segments exist."""
    live = LiveWriter(store)
    writer = live.process
    try:
        deadline = time.monotonic() + 10
        while not (segments_root(store) / "live-run").is_dir() and time.monotonic() < deadline:
            time.sleep(0.02)
        yield live
    finally:
        writer.kill()
        writer.wait()


class TestLive:
    async def test_updates_at_least_once_a_second_while_another_process_writes(self, tmp_path: Path) -> None:
        store = tmp_path / "nel.duckdb"
        with live_writer(store) as writer:
            app = NelApp(store)
            async with app.run_test(size=(100, 30)) as pilot:
                await settle(pilot)
                await app.push_screen(LiveScreen("live-run"))
                screen = app.screen
                assert isinstance(screen, LiveScreen)
                writer.start()
                seen: list[int] = []
                started = time.monotonic()
                while time.monotonic() - started < 2.0:
                    await pilot.pause(0.25)
                    if screen.snapshot is not None:
                        seen.append(screen.snapshot.run.n_steps)
                assert screen.polls >= 3  # ≥ 1 update a second over 2 s
                assert len(set(seen)) >= 3 and seen == sorted(seen)  # the count moves as steps land
                headline = text_of(app, "#headline")
                assert headline.startswith("running · ") and "steps/s" in headline and "(now)" in headline
                assert "— steps/s" not in headline
                assert column(app, "#shards", "status") == ["running"]
                assert "wrong" in text_of(app, "#failures")
                assert app.screen.query_one("#latest").row_count > 0  # type: ignore[attr-defined]
                assert all(q.startswith("live problem ") for q in column(app, "#latest", "question"))
                writer.finish()
                await wait_for(pilot, lambda: screen.snapshot is not None and screen.snapshot.run.status == "complete",
                               timeout=10)
                await settle(pilot)
                assert screen.snapshot is not None and screen.snapshot.run.status == "complete"
                assert text_of(app, "#headline").startswith("complete · 60/60 steps (100.0%)")
                assert column(app, "#shards", "done") == ["60/60"]

    async def test_the_task_list_of_a_running_run_follows_it_until_it_completes(self, tmp_path: Path) -> None:
        store = tmp_path / "nel.duckdb"
        with live_writer(store) as writer:
            app = NelApp(store)
            async with app.run_test(size=(100, 30)) as pilot:
                await settle(pilot)
                await app.push_screen(TasksScreen("live-run"))
                await settle(pilot)
                screen = app.screen
                assert isinstance(screen, TasksScreen) and screen.run is not None
                assert screen.run.status == "running"
                writer.finish()
                await wait_for(pilot, lambda: screen.run is not None and screen.run.status == "complete", timeout=10)
                assert screen.run.status == "complete"
                assert "missing" not in column(app, "#tasks", "bucket")

    async def test_a_finished_run_shows_its_mean_rates_and_enter_opens_a_failure(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("down", "l")
            await settle(pilot)
            assert isinstance(app.screen, LiveScreen) and app.screen.run_id == RUN_A
            headline = text_of(app, "#headline")
            assert headline.startswith("complete · 28/32 steps (87.5%)") and "(mean)" in headline
            assert "pass@1 0.500 [0.100, 0.900]" in headline
            assert text_of(app, "#failures") == "failures by category: wrong 9  server_error 4  format_error 1"
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, TaskScreen) and app.screen.task_idx == 6  # the latest failure

    async def test_a_run_that_is_not_there_is_a_message_and_polling_goes_on(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test() as pilot:
            await settle(pilot)
            assert isinstance(app.screen, RunsScreen)
            await app.push_screen(LiveScreen("not-yet"))
            await wait_for(pilot, lambda: app.screen.polls >= 2, timeout=10)  # type: ignore[attr-defined]
            await settle(pilot)
            assert "Run not-yet is not in this store" in text_of(app, "#message")
            assert app.screen.polls >= 2  # type: ignore[attr-defined]


class TestRunStartedFromATerminal:
    """x and r on a run no background launch of this store started: x stops its processes by the pids the store
    holds (SIGTERM, as Ctrl-C in its terminal), r says how to resume it; neither does nothing silently."""

    async def test_x_stops_the_writing_process_and_r_says_how_to_resume(self, tmp_path: Path) -> None:
        store = tmp_path / "nel.duckdb"
        with live_writer(store) as writer:
            app = NelApp(store)
            async with app.run_test(size=(100, 30)) as pilot:
                await settle(pilot)
                await app.push_screen(LiveScreen("live-run"))
                screen = app.screen
                assert isinstance(screen, LiveScreen) and screen.launch is None
                await pilot.press("r")
                await settle(pilot)
                assert "started from a terminal" in text_of(app, "#message")
                assert "--resume" in text_of(app, "#message")
                await pilot.press("x")
                await wait_for(pilot, lambda: "sent SIGTERM to pid" in text_of(app, "#message"))
                assert str(writer.process.pid) in text_of(app, "#message")
                assert writer.process.wait(timeout=10) != 0  # the writer got the signal and is gone

    async def test_x_on_a_finished_run_says_there_is_nothing_to_stop(self, demo: Path) -> None:
        app = NelApp(demo)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await app.push_screen(LiveScreen(RUN_A))
            await settle(pilot)
            await pilot.press("x")
            await wait_for(pilot, lambda: "nothing to stop" in text_of(app, "#message"))
