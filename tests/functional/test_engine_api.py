"""The Python API: ``run_evaluation`` against the mock, its result and progress events, and the store
readers (``open_store(...).runs() / .tasks() / .steps()``) over what it wrote."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import workbench
from workbench.engine import RunProgress, RunResult, Shard, run_evaluation
from workbench.environments import get_environment
from workbench.errors import UsageError
from workbench.mock import MockHandle
from workbench.model.config import ModelConfig
from workbench.solvers import SimpleSolver

pytestmark = pytest.mark.timeout(60)

PROBLEMS, REPEATS = 40, 4
TOTAL = PROBLEMS * REPEATS


def _solver(mock: MockHandle, **model: Any) -> SimpleSolver:
    return SimpleSolver(ModelConfig(url=mock.base_url, model_id="nel-mock", max_retries=0, **model))


def _run(mock: MockHandle, store: Path, **kwargs: Any) -> RunResult:
    kwargs = {"n_repeats": REPEATS, "max_problems": PROBLEMS, "max_concurrent": 16, **kwargs}
    return asyncio.run(run_evaluation(get_environment("gsm8k"), _solver(mock), store=store, **kwargs))


@pytest.fixture(scope="module")
def run(mock: MockHandle, tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, Path, list]:
    """One 40 x 4 run with a listener recording every event."""
    store = tmp_path_factory.mktemp("api") / "nel.duckdb"
    events: list[tuple[RunProgress, dict[str, Any], int]] = []
    result = _run(mock, store, listeners=[lambda p, row: events.append((p, row, p.completed))])
    return result, store, events


class TestRunEvaluation:
    """What ``run_evaluation`` returns and reports while it runs."""

    def test_returns_a_complete_result(self, run):
        result, store, _ = run
        assert result.status == "complete"
        assert result.store == store and result.shard == Shard()
        assert (result.steps_written, result.steps_skipped, result.shard_steps) == (TOTAL, 0, TOTAL)
        assert result.ingested and result.elapsed_s > 0
        assert result.run_id.startswith("gsm8k-")

    def test_listeners_receive_every_step_once_as_it_completes(self, run):
        result, store, events = run
        assert len(events) == TOTAL
        keys = [(row["task_idx"], row["repeat"]) for _, row, _ in events]
        assert sorted(keys) == [(i, r) for i in range(PROBLEMS) for r in range(REPEATS)]
        assert [n for _, _, n in events] == list(range(1, TOTAL + 1)), "progress counts each step as it lands"
        progress = events[-1][0]
        assert progress.run_id == result.run_id and progress.total == TOTAL
        assert progress.finished and progress.done == TOTAL
        assert progress.n_pass == sum(row["passed"] for _, row, _ in events)
        stored = workbench.open_store(store).steps(result.run_id)
        assert stored["response"].to_list() == [
            row["response"] for _, row in sorted(((r["task_idx"], r["repeat"]), r) for _, r, _ in events)
        ]

    def test_a_second_run_with_the_same_run_id_is_refused_without_resume(self, run, mock):
        result, store, _ = run
        with pytest.raises(UsageError, match="--resume"):
            _run(mock, store, run_id=result.run_id)

    def test_resume_with_the_same_run_id_skips_everything_done(self, run, mock):
        result, store, _ = run
        again = _run(mock, store, run_id=result.run_id, resume=True)
        assert (again.status, again.steps_written, again.steps_skipped) == ("complete", 0, TOTAL)
        assert workbench.open_store(store).steps(result.run_id).height == TOTAL


def test_a_seed_gives_each_attempt_its_own_reproducible_request(mock, tmp_path):
    store = tmp_path / "nel.duckdb"
    solver = _solver(mock, seed=7)
    first = asyncio.run(
        run_evaluation(get_environment("gsm8k"), solver, store=store, n_repeats=3, max_problems=5)
    )
    steps = workbench.open_store(store).steps(first.run_id)
    assert steps["request_seed"].to_list() == [7 + r for _ in range(5) for r in range(3)]
    assert steps["request_hash"].n_unique() == 15, "the seed is part of the request body"
    second = asyncio.run(
        run_evaluation(get_environment("gsm8k"), solver, store=store, n_repeats=3, max_problems=5)
    )
    again = workbench.open_store(store).steps(second.run_id)
    cols = ["task_idx", "repeat", "request_hash", "response", "reward"]
    assert again.select(cols).equals(steps.select(cols)), "same seed, same requests, same answers"


class TestRunIdentity:
    """A run is its configuration: resuming, or adding a shard, with another one is refused by name."""

    def test_resume_over_more_problems_is_refused_naming_the_range(self, run, mock):
        result, store, _ = run
        with pytest.raises(UsageError, match="problem_end"):
            _run(mock, store, run_id=result.run_id, resume=True, max_problems=PROBLEMS + 2)

    def test_a_second_run_without_resume_or_run_id_is_a_new_run(self, mock, tmp_path):
        store = tmp_path / "nel.duckdb"
        first = _run(mock, store, max_problems=5, n_repeats=1)
        second = _run(mock, store, max_problems=5, n_repeats=1)
        assert first.run_id != second.run_id
        runs = workbench.open_store(store).runs()
        assert sorted(runs["run_id"]) == sorted([first.run_id, second.run_id])
        assert runs["n_steps"].to_list() == [5, 5]

    def test_a_shard_with_another_configuration_under_the_same_run_id_is_refused(self, mock, tmp_path):
        store = tmp_path / "nel.duckdb"
        env = get_environment("gsm8k")

        def shard(idx: int, seed: int) -> RunResult:
            return asyncio.run(
                run_evaluation(
                    env,
                    _solver(mock, seed=seed),
                    store=store,
                    n_repeats=1,
                    max_problems=6,
                    shard=Shard(idx, 2),
                    run_id="shared",
                )
            )

        assert shard(0, seed=1).status == "complete"
        with pytest.raises(UsageError, match=r"seed: 1 -> 2"):
            shard(1, seed=2)
        assert workbench.open_store(store).steps("shared")["task_idx"].to_list() == [0, 1, 2]


class TestStoreReaders:
    """``open_store`` over the run: per-task buckets, run metrics with intervals."""

    def test_tasks_have_always_sometimes_and_never_buckets(self, run):
        result, store, _ = run
        tasks = workbench.open_store(store).tasks(result.run_id)
        assert tasks.height == PROBLEMS and tasks["task_idx"].to_list() == list(range(PROBLEMS))
        assert set(tasks["bucket"]) == {"always", "sometimes", "never"}
        for t in tasks.iter_rows(named=True):
            assert t["n"] == REPEATS
            expected = "always" if t["n_pass"] == t["n"] else "never" if t["n_pass"] == 0 else "sometimes"
            assert t["bucket"] == expected
            assert t["wilson_low"] <= t["pass_rate"] <= t["wilson_high"]

    def test_run_metrics_give_pass_at_1_inside_its_interval(self, run):
        result, store, _ = run
        metrics = workbench.open_store(store).runs()
        assert metrics.height == 1
        m = metrics.row(0, named=True)
        assert m["run_id"] == result.run_id and m["status"] == "complete"
        assert m["n_steps"] == m["n_steps_expected"] == TOTAL and m["n_missing"] == 0
        assert m["pass_at_1_low"] < m["pass_at_1"] < m["pass_at_1_high"]
        steps = workbench.open_store(store).steps(result.run_id)
        per_task = steps.group_by("task_idx").agg(pl.col("passed").mean())
        assert m["pass_at_1"] == pytest.approx(per_task["passed"].mean())
        assert m["n_always"] + m["n_sometimes"] + m["n_never"] == PROBLEMS

    def test_step_messages_view_unnests_each_transcript(self, run):
        result, store, _ = run
        msgs = workbench.open_store(store).sql(
            "SELECT turn, role, count(*) AS n FROM step_messages WHERE run_id = ? GROUP BY ALL ORDER BY turn",
            [result.run_id],
        )
        assert msgs.rows() == [(0, "user", TOTAL), (1, "assistant", TOTAL)]


class TestProblemSelection:
    """``problem_range`` and ``max_problems`` pick which task indices a run covers."""

    def test_problem_range_selects_exactly_those_tasks(self, mock, tmp_path):
        store = tmp_path / "nel.duckdb"
        result = _run(mock, store, problem_range=(100, 110), max_problems=None, n_repeats=1)
        steps = workbench.open_store(store).steps(result.run_id)
        assert steps["task_idx"].to_list() == list(range(100, 110))
        env = get_environment("gsm8k")
        assert steps["task_id"].to_list() == [env.seed(i).task_id for i in range(100, 110)]
        run = workbench.open_store(store).sql("SELECT problem_start, problem_end, n_tasks FROM runs").row(0)
        assert run == (100, 110, 10)

    def test_max_problems_takes_the_first_of_the_range(self, mock, tmp_path):
        store = tmp_path / "nel.duckdb"
        result = _run(mock, store, problem_range=(100, 110), max_problems=3, n_repeats=1)
        assert workbench.open_store(store).steps(result.run_id)["task_idx"].to_list() == [100, 101, 102]

    def test_a_shard_covers_its_contiguous_slice(self, mock, tmp_path):
        store = tmp_path / "nel.duckdb"
        result = _run(mock, store, problem_range=(10, 20), max_problems=None, n_repeats=1, shard=Shard(1, 3))
        assert not result.ingested, "a shard leaves its segments for the merge"
        steps = workbench.open_store(store).steps(result.run_id)
        assert steps["task_idx"].to_list() == [13, 14, 15]
        assert set(steps["shard_idx"]) == {1}

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"problem_range": (1300, 1400), "max_problems": None}, "outside"),
            ({"n_repeats": 0}, "--repeats"),
            ({"max_concurrent": 0}, "--max-concurrent"),
            ({"max_problems": 0}, "--max-problems"),
        ],
    )
    def test_bad_arguments_raise_usage_error_before_anything_is_written(
        self, mock, tmp_path, kwargs, message
    ):
        store = tmp_path / "nel.duckdb"
        with pytest.raises(UsageError, match=message):
            _run(mock, store, **kwargs)
        assert not store.exists() and not store.with_name("nel.duckdb.segments").exists()
