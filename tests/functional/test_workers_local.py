"""Background runs on this machine (``workbench.workers``): real supervisor and worker processes,
the built-in mock model, a real store. What the TUI's new-run form and its stop/resume keys rely on."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest

from workbench.errors import UsageError
from workbench.mock import MockHandle
from workbench.store.live import pid_alive
from workbench.store.reader import Store
from workbench.workers import MOCK, LaunchState, RunRequest, find_launch, launch, launches, resume, stop
from workbench.workers.local import observed, read_state

TIMEOUT_S = 90.0


def wait_until(state: LaunchState, done: object, timeout: float = TIMEOUT_S) -> LaunchState:
    """Poll the launch's state file until ``done(state)`` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = observed(read_state(state.directory))
        if done(state):  # type: ignore[operator]
            return state
        time.sleep(0.1)
    raise AssertionError(f"launch {state.launch_id} still {state.status}: {state.message}")


def ended(state: LaunchState) -> bool:
    return not state.active


def steps_of(store: Path, run_id: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in Store(store).rows(
        "SELECT task_idx, repeat FROM steps WHERE run_id = ? ORDER BY ALL", [run_id])]


def mock_request(tmp_path: Path, **changes: object) -> RunRequest:
    request = RunRequest(store=tmp_path / "nel.duckdb", output_dir=tmp_path, bench="gsm8k", model_url=MOCK,
                         model_id="nel-mock", repeats=2, max_problems=20, max_concurrent=8)
    return replace(request, **changes)  # type: ignore[arg-type]


class TestLaunch:
    def test_a_sharded_run_in_the_background_is_merged_when_every_shard_finishes(self, tmp_path: Path) -> None:
        state = launch(mock_request(tmp_path, shards=2))
        assert state.run_ids == (state.launch_id,)
        final = wait_until(state, ended)
        assert final.status == "complete", final.message
        assert [w.exit_code for w in final.workers] == [0, 0]
        run_id = final.run_ids[0]
        assert len(steps_of(tmp_path / "nel.duckdb", run_id)) == 20 * 2
        status, shards = Store(tmp_path / "nel.duckdb").rows(
            "SELECT status, total_shards FROM runs WHERE run_id = ?", [run_id])[0]
        assert (status, shards) == ("complete", 2)
        assert (tmp_path / "runs" / run_id / f"eval-{run_id}.json").exists()  # exported on merge
        assert find_launch(tmp_path / "nel.duckdb", run_id) == final
        assert [s.launch_id for s in launches(tmp_path / "nel.duckdb")] == [state.launch_id]

    def test_stop_keeps_completed_steps_and_resume_finishes_with_each_step_exactly_once(
            self, tmp_path: Path) -> None:
        store = tmp_path / "nel.duckdb"
        state = launch(mock_request(tmp_path, max_problems=60, max_concurrent=2, mock_latency_ms=100, shards=2))
        run_id = state.launch_id
        wait_until(state, lambda s: s.status == "running" and len(_steps_so_far(store, run_id)) >= 4)
        stopped = stop(store, run_id)
        assert stopped.status == "stopped", stopped.message
        kept = steps_of(store, run_id)
        assert 0 < len(kept) < 120
        assert Store(store).rows("SELECT status FROM runs WHERE run_id = ?", [run_id])[0][0] != "complete"
        resumed = resume(store, run_id)
        assert resumed.resumes == 1
        final = wait_until(resumed, ended)
        assert final.status == "complete", final.message
        steps = steps_of(store, run_id)
        assert len(steps) == len(set(steps)) == 120
        assert set(kept) <= set(steps)

    def test_a_config_file_launch_learns_its_run_ids_from_the_store(self, tmp_path: Path, mock: MockHandle) -> None:
        config = tmp_path / "suite.yaml"
        config.write_text(
            "services:\n  m:\n    url: " + mock.base_url + "\n    model: nel-mock\n"
            "benchmarks:\n  - name: gsm8k\n    max_problems: 5\n  - name: unit_conversion_mc\n    max_problems: 5\n")
        state = launch(RunRequest(store=tmp_path / "nel.duckdb", output_dir=tmp_path, config=config))
        final = wait_until(state, ended)
        assert final.status == "complete", final.message
        benchmarks = sorted(r[0] for r in Store(tmp_path / "nel.duckdb").rows(
            "SELECT benchmark FROM runs WHERE run_id IN (SELECT unnest(?))", [list(final.run_ids)]))
        assert benchmarks == ["gsm8k", "unit_conversion_mc"]

    def test_a_worker_that_fails_is_reported_with_its_last_line(self, tmp_path: Path) -> None:
        request = mock_request(tmp_path, model_url="http://127.0.0.1:9/v1")  # nothing listens on the discard port
        final = wait_until(launch(replace(request, max_problems=2)), ended)
        assert final.status == "failed"
        assert "shard 0 exited with" in final.message and "nel:" in final.message

    def test_a_supervisor_killed_without_warning_is_seen_as_lost(self, tmp_path: Path) -> None:
        state = launch(mock_request(tmp_path, max_problems=200, max_concurrent=1, mock_latency_ms=200))
        running = wait_until(state, lambda s: s.status == "running")
        os.kill(running.supervisor_pid or 0, signal.SIGKILL)
        lost = wait_until(running, lambda s: s.status == "lost", timeout=10)
        assert "gone" in lost.message
        stopped = stop(tmp_path / "nel.duckdb", state.launch_id)  # its orphaned worker lives on until then
        assert stopped.status == "stopped" and "gone" in stopped.message
        assert not any(pid_alive(w.pid) for w in running.workers)
        assert running.model_pid and not pid_alive(running.model_pid)  # the mock it started, in its own session


class TestBadInput:
    @pytest.mark.parametrize(("changes", "field"), [
        ({"bench": None}, "bench"),
        ({"model_url": "localhost:8000"}, "model_url"),
        ({"repeats": 0}, "repeats"),
        ({"shards": 0}, "shards"),
        ({"max_concurrent": 0}, "max_concurrent"),
        ({"mock_latency_ms": -1.0}, "mock_latency_ms"),
        ({"config": Path("/nonexistent/suite.yaml")}, "config"),
    ])
    def test_a_bad_request_is_refused_naming_the_field(self, tmp_path: Path, changes: dict[str, object],
                                                       field: str) -> None:
        with pytest.raises(UsageError, match=f"^{field}: "):
            launch(mock_request(tmp_path, **changes))
        assert not (tmp_path / "nel.duckdb.workers").exists()

    def test_a_config_file_mistake_is_named_by_file_and_line_before_anything_starts(self, tmp_path: Path) -> None:
        config = tmp_path / "suite.yaml"
        config.write_text("services:\n  m:\n    url: http://127.0.0.1:8000/v1\n    model: x\nbenchmarks:\n"
                          "  - name: gsm8k\n    repeets: 2\n")
        with pytest.raises(UsageError, match=r"suite\.yaml:7: benchmarks\.0\.repeets"):
            launch(RunRequest(store=tmp_path / "nel.duckdb", output_dir=tmp_path, config=config))

    def test_stop_and_resume_name_a_run_that_was_not_started_in_the_background(self, tmp_path: Path) -> None:
        with pytest.raises(UsageError, match="was not started in the background"):
            stop(tmp_path / "nel.duckdb", "some-run")
        with pytest.raises(UsageError, match="--resume"):
            resume(tmp_path / "nel.duckdb", "some-run")

    def test_the_api_key_never_reaches_argv_or_the_state_file(self, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("NEMO_API_KEY", "sk-secret-123")
        final = wait_until(launch(mock_request(tmp_path, max_problems=2, repeats=1)), ended)
        assert final.status == "complete"
        for path in final.directory.iterdir():
            assert "sk-secret-123" not in path.read_text(errors="replace"), path


def _steps_so_far(store: Path, run_id: str) -> list[tuple[int, int]]:
    try:
        return steps_of(store, run_id)
    except Exception:  # the store is not there yet
        return []

