"""`nel eval run --shards N --background`, `nel eval status/stop/resume`: real supervisor and shard worker
processes against the mock model, the store on a "shared filesystem" (its own directory, named by absolute
path, away from the output directory and the working directory). Merging twice and a merge with a missing
shard are covered by test_sharding.py; the launch library itself by test_workers_local.py."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from nel_helpers import assert_ok, assert_one_line_error, eval_args, nel

from workbench.mock import MockHandle, mock_model
from workbench.store.reader import Store

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def slow_mock() -> Iterator[MockHandle]:
    """A mock that takes 100 ms per answer: a run lasts long enough to be stopped or killed."""
    with mock_model(latency_ms=100) as handle:
        yield handle


def status_json(store: Path, run_id: str, cwd: Path) -> dict[str, Any]:
    proc = nel("eval", "status", run_id, "--store", str(store), "--format", "json", cwd=cwd)
    assert_ok(proc)
    (launch,) = orjson.loads(proc.stdout)["launches"]
    return dict(launch)


def wait_status(store: Path, run_id: str, cwd: Path, done: Callable[[dict[str, Any]], bool],
                timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        launch = status_json(store, run_id, cwd)
        if done(launch) or time.monotonic() > deadline:
            assert done(launch), launch
            return launch
        time.sleep(0.2)


def ended(launch: dict[str, Any]) -> bool:
    return launch["status"] in ("complete", "failed", "stopped", "lost")


def start(url: str, tmp_path: Path, *, problems: int, repeats: int, concurrency: int) -> tuple[Path, str]:
    """Launch a 2-shard background run whose store lives in ``shared/``; return the store and the run id."""
    store = tmp_path / "shared" / "nel.duckdb"
    store.parent.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    proc = nel(*eval_args(url, problems=problems, repeats=repeats, store=store, output_dir=tmp_path / "out",
                          concurrency=concurrency), "--shards", "2", "--background", "--temperature", "0.5",
               cwd=cwd)
    assert_ok(proc)
    run_id = proc.stdout.split("started run ", 1)[1].split()[0]
    assert f"nel eval status {run_id}" in proc.stdout and f"nel eval resume {run_id}" in proc.stdout
    return store, run_id


def distinct_steps(store: Path, run_id: str) -> tuple[int, int]:
    n, distinct = Store(store).rows(
        "SELECT count(*), count(DISTINCT (task_idx, repeat)) FROM steps WHERE run_id = ?", [run_id])[0]
    return int(n), int(distinct)


def test_a_background_run_reports_each_shard_and_is_merged_into_the_shared_store(mock, tmp_path):
    store, run_id = start(mock.base_url, tmp_path, problems=20, repeats=2, concurrency=8)
    final = wait_status(store, run_id, tmp_path, ended)
    assert final["status"] == "complete", final
    assert [(s["status"], s["exit_code"], s["steps_done"], s["steps_expected"]) for s in final["shards"]] == [
        ("done", 0, 20, 20), ("done", 0, 20, 20)]
    assert (final["steps_done"], final["percent"]) == (40, 100.0)
    assert store.exists() and Store(store).rows("SELECT status, total_shards FROM runs")[0] == ("complete", 2)
    assert distinct_steps(store, run_id) == (40, 40)
    assert not (tmp_path / "cwd" / "nel-results").exists(), "nothing lands in the working directory"
    shard_log = Path(final["shards"][0]["log"]).read_text()
    assert "shard 1/2" in shard_log

    text = nel("eval", "status", "--store", str(store.parent), cwd=tmp_path)
    assert_ok(text)
    assert f"run {run_id}: complete, 2 shard(s)" in text.stdout
    assert "40/40" in text.stdout and "100%" in text.stdout

    again = nel("eval", "merge", str(store), cwd=tmp_path)  # the supervisor merged already: a no-op
    assert_ok(again)
    assert "0 new steps" in again.stdout and distinct_steps(store, run_id) == (40, 40)


def test_a_shard_killed_with_sigkill_is_reported_dead_and_resume_completes_every_step_once(slow_mock, tmp_path):
    store, run_id = start(slow_mock.base_url, tmp_path, problems=40, repeats=2, concurrency=2)
    running = wait_status(store, run_id, tmp_path, lambda s: s["shards"][0]["status"] == "running"
                          and s["shards"][0]["steps_done"] >= 4)
    survivor_pid = running["shards"][1]["pid"]
    os.kill(running["shards"][0]["pid"], signal.SIGKILL)

    dead = wait_status(store, run_id, tmp_path, lambda s: s["shards"][0]["status"] == "dead", timeout=10)
    assert dead["dead_shards"] == [0]
    assert dead["shards"][0]["detail"] in ("killed by SIGKILL", "its worker is gone")
    failed = wait_status(store, run_id, tmp_path, ended)
    assert failed["status"] == "failed"
    assert "shard 0 dead (killed by SIGKILL)" in failed["message"] and "nel eval resume" in failed["message"]
    assert failed["shards"][1]["status"] == "done"
    text = nel("eval", "status", run_id, "--store", str(store), cwd=tmp_path)
    assert "dead" in text.stdout and f"nel eval resume {run_id}" in text.stdout
    kept, _ = distinct_steps(store, run_id)
    assert 0 < kept < 80

    resumed = nel("eval", "resume", run_id, "--store", str(store), cwd=tmp_path)
    assert_ok(resumed)
    assert "shard(s) 0 start again" in resumed.stdout and "shard(s) 1 had finished" in resumed.stdout
    final = wait_status(store, run_id, tmp_path, ended)
    assert final["status"] == "complete", final
    assert final["resumes"] == 1 and final["shards"][1]["pid"] == survivor_pid, "the finished shard is not rerun"
    assert distinct_steps(store, run_id) == (80, 80)
    assert Store(store).rows("SELECT status FROM runs WHERE run_id = ?", [run_id])[0][0] == "complete"


def test_stop_ends_the_workers_keeping_their_steps(slow_mock, tmp_path):
    store, run_id = start(slow_mock.base_url, tmp_path, problems=100, repeats=2, concurrency=1)
    wait_status(store, run_id, tmp_path, lambda s: s["steps_done"] >= 2)
    proc = nel("eval", "stop", run_id, "--store", str(store), cwd=tmp_path)
    assert_ok(proc)
    assert f"run {run_id}: stopped" in proc.stdout and f"nel eval resume {run_id}" in proc.stdout
    launch = status_json(store, run_id, tmp_path)
    assert launch["status"] == "stopped"
    assert {s["status"] for s in launch["shards"]} == {"stopped"}
    assert 0 < launch["steps_done"] < 200


@pytest.mark.parametrize(("flags", "message"), [
    (["--ray-address", "auto"], "--ray-address: only with --engine ray"),
    (["--background", "--resume"], "nel eval resume RUN"),
    (["--shards", "2", "--background", "--engine", "ray"], "--background: not with --engine ray"),
    (["--background", "--repeats", "0"], "must be at least 1"),
])
def test_contradictory_flags_are_refused_in_one_line(tmp_path, flags, message):
    proc = nel(*eval_args("http://127.0.0.1:9/v1", problems=2, repeats=1, store=tmp_path / "s"), *flags,
               cwd=tmp_path)
    if "--repeats" in flags:  # argparse's own refusal
        assert proc.returncode == 2 and message in proc.stderr
        return
    assert message in assert_one_line_error(proc, 2)
    assert not (tmp_path / "s.workers").exists()


def test_status_and_stop_name_a_run_that_is_not_a_background_run(tmp_path):
    empty = nel("eval", "status", "--store", str(tmp_path / "nel.duckdb"), cwd=tmp_path)
    assert_ok(empty)
    assert "no background runs" in empty.stdout
    for command in ("status", "stop", "resume"):
        proc = nel("eval", command, "nope", "--store", str(tmp_path / "nel.duckdb"), cwd=tmp_path)
        assert "nope" in assert_one_line_error(proc, 2)
