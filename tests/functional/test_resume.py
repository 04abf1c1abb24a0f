"""`--resume`: a run killed hard (SIGKILL) or interrupted (SIGINT) continues where it stopped, keeping every
step it completed; a resume with another configuration is refused; resuming a complete run is a no-op."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import orjson
import polars as pl
import pytest
from nel_helpers import (
    assert_ok,
    assert_one_line_error,
    eval_args,
    nel,
    nel_popen,
    step_count,
    wait_for_steps,
)

from workbench.mock import MockHandle, mock_model
from workbench.store import open_store

pytestmark = pytest.mark.timeout(90)

PROBLEMS, REPEATS = 100, 4
TOTAL = PROBLEMS * REPEATS
KEY = ["run_id", "task_idx", "repeat"]
KEPT = [*KEY, "task_id", "response", "request_hash", "reward", "passed", "extracted_answer", "started_at"]


@pytest.fixture(scope="module")
def slow_mock() -> Iterator[MockHandle]:
    """A mock that takes 10 ms per answer: slow enough to stop a run part way."""
    with mock_model(latency_ms=10) as handle:
        yield handle


def _args(mock: MockHandle, out: Path, *extra: str) -> list[str]:
    # 4 in flight at 10 ms: at most ~400 steps/s, so 400 steps leave time to interrupt at ~24.
    return eval_args(
        mock.base_url, problems=PROBLEMS, repeats=REPEATS, output_dir=out, concurrency=4, extra=extra
    )


def _stop_part_way(mock: MockHandle, tmp_path: Path, sig: signal.Signals) -> tuple[int, str, Path]:
    """Start a run, send ``sig`` once the live store shows some steps; (exit code, stderr, output dir)."""
    out = tmp_path / "o"
    proc = nel_popen(*_args(mock, out), cwd=tmp_path)
    try:
        wait_for_steps(out / "nel.duckdb", 24, proc)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, stderr, out


def _assert_complete_and_unique(store: Path) -> pl.DataFrame:
    steps = open_store(store).steps()
    assert steps.height == TOTAL
    assert steps.select(KEY).unique().height == TOTAL
    assert steps["run_id"].n_unique() == 1
    assert sorted(steps["task_idx"].unique().to_list()) == list(range(PROBLEMS))
    runs = open_store(store).sql("SELECT run_id, status FROM runs")
    assert runs.rows() == [(steps["run_id"][0], "complete")]
    return steps


def _assert_kept(before: pl.DataFrame, after: pl.DataFrame) -> None:
    joined = before.select(KEPT).join(after.select(KEPT), on=KEY, how="left", suffix="_after")
    assert joined.height == before.height
    for col in KEPT[len(KEY) :]:
        assert joined[col].to_list() == joined[f"{col}_after"].to_list(), f"{col} changed on resume"


@pytest.fixture(scope="module")
def killed_once(slow_mock: MockHandle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output dir of a run killed with SIGKILL part way (tests work on copies)."""
    code, _, out = _stop_part_way(slow_mock, tmp_path_factory.mktemp("killed"), signal.SIGKILL)
    assert code == -signal.SIGKILL
    return out


@pytest.fixture(scope="module")
def small_run(mock: MockHandle, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A complete 10 x 2 run at temperature 0 (shared: the tests below add no steps to it)."""
    cwd = tmp_path_factory.mktemp("small")
    out = cwd / "o"
    args = eval_args(mock.base_url, problems=10, repeats=2, output_dir=out, extra=["--temperature", "0"])
    assert_ok(nel(*args, cwd=cwd))
    return out, args


class TestResumeAfterKill:
    """SIGKILL loses no completed step, and --resume finishes the run without repeating one."""

    @pytest.fixture()
    def killed(self, killed_once: Path, tmp_path: Path) -> tuple[Path, pl.DataFrame]:
        """A copy of the output dir of a run killed with SIGKILL part way, and the steps it left."""
        out = tmp_path / "o"
        shutil.copytree(killed_once, out)
        return out, open_store(out / "nel.duckdb").steps()

    def test_sigkill_keeps_every_completed_step_and_shows_the_run_incomplete(self, killed):
        out, before = killed
        assert 24 <= before.height < TOTAL
        assert before.select(KEY).unique().height == before.height
        assert before["run_id"].n_unique() == 1
        assert before["response"].null_count() == 0 and before["request_hash"].null_count() == 0
        store = open_store(out / "nel.duckdb")
        assert store.sql("SELECT status FROM runs")["status"].to_list() == ["incomplete"]
        assert store.sql("SELECT status FROM run_shards")["status"].to_list() == ["interrupted"]

    def test_sigkill_then_resume_completes_the_same_run_keeping_earlier_steps(
        self, slow_mock, killed, tmp_path
    ):
        out, before = killed
        store = out / "nel.duckdb"
        run_id = before["run_id"][0]
        resumed = nel(*_args(slow_mock, out, "--resume"), cwd=tmp_path)
        assert_ok(resumed)
        assert f"resuming run {run_id}" in resumed.stderr
        assert f"({before.height} already done)" in resumed.stderr
        assert f"{TOTAL - before.height} new steps" in resumed.stdout

        after = _assert_complete_and_unique(store)
        assert after["run_id"][0] == run_id
        _assert_kept(before, after)

    def test_resume_after_a_torn_journal_write_completes(self, slow_mock, killed, tmp_path):
        out, _ = killed
        journals = sorted((out / "nel.duckdb.segments").rglob("journal-*.jsonl"))
        assert journals, "kill -9 leaves the journal behind"
        first = journals[-1].read_bytes().splitlines()[0]
        torn = orjson.dumps({**orjson.loads(first), "task_idx": PROBLEMS - 1, "repeat": REPEATS - 1})
        with journals[-1].open("ab") as fh:
            fh.write(torn[: len(torn) // 2])  # the process died in the middle of this write
        before = open_store(out / "nel.duckdb").steps()

        resumed = nel(*_args(slow_mock, out, "--resume", "--max-concurrent", "32"), cwd=tmp_path)
        assert_ok(resumed)
        _assert_kept(before, _assert_complete_and_unique(out / "nel.duckdb"))


class TestResumeAfterInterrupt:
    """Ctrl-C stops the run cleanly (exit 130, status recorded), and --resume finishes it."""

    def test_sigint_records_an_interrupted_run_then_resume_completes_it(self, slow_mock, tmp_path):
        code, stderr, out = _stop_part_way(slow_mock, tmp_path, signal.SIGINT)
        assert code == 130, stderr
        assert "Traceback" not in stderr
        assert "interrupted" in stderr
        store = out / "nel.duckdb"
        assert not list((out / "nel.duckdb.segments").rglob("*.jsonl")), "an interrupted run is ingested"
        shards = open_store(store).sql("SELECT status, n_steps FROM run_shards")
        assert shards["status"].to_list() == ["interrupted"]
        before = open_store(store).steps()
        assert shards["n_steps"][0] == before.height
        assert 24 <= before.height < TOTAL
        assert open_store(store).sql("SELECT status FROM runs")["status"].to_list() == ["incomplete"]

        # --max-concurrent is not part of a run's identity: a resume may use more workers
        resumed = nel(*_args(slow_mock, out, "--resume", "--max-concurrent", "32"), cwd=tmp_path)
        assert_ok(resumed)
        _assert_kept(before, _assert_complete_and_unique(store))
        assert open_store(store).sql("SELECT status FROM run_shards")["status"].to_list() == ["complete"]

    def test_sigterm_is_treated_like_ctrl_c(self, slow_mock, tmp_path):
        code, stderr, out = _stop_part_way(slow_mock, tmp_path, signal.SIGTERM)
        assert code == 130, stderr
        assert "Traceback" not in stderr and "--resume" in stderr
        store = open_store(out / "nel.duckdb")
        assert store.sql("SELECT status FROM run_shards")["status"].to_list() == ["interrupted"]
        assert 24 <= store.steps().height < TOTAL


class TestResumeRules:
    """What --resume accepts and what it refuses."""

    def test_resume_with_another_temperature_is_refused_naming_it(self, small_run, tmp_path):
        out, args = small_run
        before = step_count(out / "nel.duckdb")
        changed = [*args[: args.index("--temperature")], "--temperature", "0.7", "--resume"]
        line = assert_one_line_error(nel(*changed, cwd=tmp_path), 2)
        assert "temperature" in line and "0.7" in line
        assert step_count(out / "nel.duckdb") == before

    def test_resume_of_a_complete_run_does_nothing(self, small_run, tmp_path):
        out, args = small_run
        store = out / "nel.duckdb"
        before = open_store(store).steps()
        proc = nel(*args, "--resume", cwd=tmp_path)
        assert_ok(proc)
        assert "0 new steps" in proc.stdout and "20 kept from before" in proc.stdout
        after = open_store(store).steps()
        assert after.select(KEPT).sort(KEY).equals(before.select(KEPT).sort(KEY))
        assert open_store(store).sql("SELECT status FROM runs")["status"].to_list() == ["complete"]
