"""``run_evaluation`` with the in-process scripted model (``tests/scripted_model.py``): what the engine asks of
the model and what it stores, in milliseconds, without HTTP or the mock server. The same behaviours end to end
(through the CLI and a real endpoint) are in ``tests/functional``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import pytest
from scripted_model import Quiz, Reply, ScriptedModel

from workbench.engine import RunResult, Shard, run_evaluation
from workbench.errors import RunFailed, UsageError
from workbench.store import ingest, open_store


def run(env: Quiz, model: ScriptedModel, store: Path, **kw: Any) -> RunResult:
    kw.setdefault("max_concurrent", 4)
    kw.setdefault("ingest_at_end", False)  # readers see the shard's files as they are; creating the database is slow
    return asyncio.run(run_evaluation(env, model, store=store, **kw))


def stored(store: Path, *columns: str) -> list[tuple[Any, ...]]:
    """``(task_id, repeat, *columns)`` of every stored step, in order."""
    extra = "".join(f", {c}" for c in columns)
    return open_store(store).rows(f"SELECT task_id, repeat{extra} FROM steps ORDER BY task_idx, repeat")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "nel.duckdb"


class TestAttempts:
    """Every (task, repeat) is asked of the model once and stored once."""

    def test_every_attempt_is_asked_once_and_stored(self, store: Path) -> None:
        model = ScriptedModel()
        result = run(Quiz(5), model, store, n_repeats=3)
        assert (result.status, result.steps_written, result.steps_skipped, result.n_errors) == ("complete", 15, 0, 0)
        expected = [(f"q{i}", r) for i in range(5) for r in range(3)]
        assert sorted(model.calls) == expected
        assert stored(store, "passed") == [(t, r, True) for t, r in expected]
        assert open_store(store).runs()["status"].to_list() == ["complete"]
        assert model.preflights == 1

    def test_repeats_of_a_task_are_distinct_attempts_of_one_seeded_prompt(self, store: Path) -> None:
        env = Quiz(3)
        run(env, ScriptedModel(), store, n_repeats=4, max_concurrent=1)
        assert stored(store, "request_seed") == [(f"q{i}", r, r) for i in range(3) for r in range(4)]
        # each task seeded once, for all its repeats (and recorded in the shard as it is)
        assert sorted(env.seeded) == [0, 1, 2]

    def test_a_script_decides_each_attempt(self, store: Path) -> None:
        model = ScriptedModel({("q1", 1): Reply("7")}, default=Reply.correct)
        run(Quiz(2), model, store, n_repeats=2)
        assert stored(store, "reward", "extracted_answer") == [
            ("q0", 0, 1.0, "0"), ("q0", 1, 1.0, "0"), ("q1", 0, 1.0, "1"), ("q1", 1, 0.0, "7")]

    def test_an_unsharded_run_is_merged_into_the_database_at_its_end(self, store: Path) -> None:
        result = run(Quiz(2), ScriptedModel(), store, ingest_at_end=None)  # the default
        assert result.ingested and store.exists()
        assert open_store(store).rows("SELECT count(*) FROM steps") == [(2,)]

    def test_max_problems_and_a_problem_range_bound_the_tasks(self, store: Path, tmp_path: Path) -> None:
        model = ScriptedModel()
        run(Quiz(10), model, store, max_problems=3)
        assert sorted(model.calls) == [("q0", 0), ("q1", 0), ("q2", 0)]
        other = ScriptedModel()
        run(Quiz(10), other, tmp_path / "other.duckdb", problem_range=(4, 8), max_problems=2)
        assert sorted(other.calls) == [("q4", 0), ("q5", 0)]


class TestConcurrency:
    """``max_concurrent`` workers, each with its own model worker, never more attempts in flight."""

    @pytest.mark.parametrize("limit", [1, 3, 8])
    def test_at_most_max_concurrent_attempts_are_in_flight(self, store: Path, limit: int) -> None:
        model = ScriptedModel(default=lambda seed, attempt: Reply(seed.expected_answer, latency_s=0.001))
        result = run(Quiz(12), model, store, n_repeats=2, max_concurrent=limit)
        assert result.steps_written == 24
        assert model.peak_in_flight == limit
        assert model.workers_opened == limit

    def test_no_more_workers_than_attempts(self, store: Path) -> None:
        model = ScriptedModel()
        run(Quiz(2), model, store, max_concurrent=16)
        assert model.workers_opened == 2

    def test_max_concurrent_below_one_is_refused(self, store: Path) -> None:
        with pytest.raises(UsageError, match="--max-concurrent must be at least 1"):
            run(Quiz(2), ScriptedModel(), store, max_concurrent=0)


class TestFailureCategories:
    """Each kind of failed attempt is stored with its category; transport failures count as errors."""

    REPLIES: ClassVar[dict[str, Reply]] = {
        "q0": Reply("0"), "q1": Reply("5"), "q2": Reply(""), "q3": Reply("no idea"),
        "q4": Reply("I'm sorry, but I can't help with that."), "q5": Reply(failure="rate_limit"),
        "q6": Reply(failure="timeout"), "q7": Reply(failure="server_error")}

    def test_each_outcome_has_its_category(self, store: Path) -> None:
        model = ScriptedModel({(t, 0): r for t, r in self.REPLIES.items()})
        result = run(Quiz(8), model, store, max_error_rate=0.5)
        assert stored(store, "failure_category", "passed") == [
            ("q0", 0, None, True), ("q1", 0, None, False), ("q2", 0, "empty_response", False),
            ("q3", 0, "format_error", False), ("q4", 0, "refusal", False), ("q5", 0, "rate_limit", False),
            ("q6", 0, "timeout", False), ("q7", 0, "server_error", False)]
        assert (result.status, result.n_errors) == ("complete", 3)
        assert open_store(store).rows("SELECT http_status FROM steps WHERE task_id = 'q5'") == [(429,)]

    def test_a_run_whose_attempts_mostly_errored_is_failed(self, store: Path) -> None:
        model = ScriptedModel({(f"q{i}", 0): Reply(failure="timeout") for i in range(3)})
        result = run(Quiz(4), model, store, max_error_rate=0.5)
        assert (result.status, result.n_errors, result.steps_written) == ("failed", 3, 4)
        assert result.error is not None and "3 of 4 attempts errored" in result.error

    def test_an_endpoint_that_refuses_every_request_stops_the_run_and_keeps_the_steps(self, store: Path) -> None:
        model = ScriptedModel({("q2", 0): Reply(fatal="HTTP 401: bad key")})
        with pytest.raises(RunFailed, match="bad key"):
            run(Quiz(5), model, store, max_concurrent=1)
        assert stored(store) == [("q0", 0), ("q1", 0)]
        assert open_store(store).runs()["status"].to_list() == ["failed"]

    def test_an_endpoint_that_stopped_answering_aborts_without_recording_the_lost_attempts(self, store: Path) -> None:
        gone = ScriptedModel(default=lambda seed, attempt: Reply(failure="server_error", http_status=None))
        with pytest.raises(RunFailed, match="stopped answering"):
            run(Quiz(40), gone, store, max_concurrent=1)
        assert stored(store) == []


class TestResume:
    """``resume`` continues the newest run of the same configuration and never repeats a stored step."""

    def test_resume_asks_only_for_the_steps_not_stored(self, store: Path) -> None:
        stopped = ScriptedModel({("q2", 1): Reply(fatal="HTTP 401")})
        with pytest.raises(RunFailed):
            run(Quiz(4), stopped, store, n_repeats=2, max_concurrent=1)
        assert stopped.calls == [("q0", 0), ("q0", 1), ("q1", 0), ("q1", 1), ("q2", 0), ("q2", 1)]
        model = ScriptedModel()
        result = run(Quiz(4), model, store, n_repeats=2, max_concurrent=1, resume=True)
        assert model.calls == [("q2", 1), ("q3", 0), ("q3", 1)]
        assert (result.status, result.steps_written, result.steps_skipped) == ("complete", 3, 5)
        assert len(stored(store)) == 8
        assert open_store(store).runs()["run_id"].to_list() == [result.run_id]

    def test_resuming_a_finished_run_asks_nothing(self, store: Path) -> None:
        first = run(Quiz(3), ScriptedModel(), store)
        model = ScriptedModel()
        again = run(Quiz(3), model, store, resume=True)
        assert (again.run_id, again.steps_written, again.steps_skipped) == (first.run_id, 0, 3)
        assert model.calls == [] and model.preflights == 0

    def test_retry_errors_attempts_again_only_the_transport_failures(self, store: Path) -> None:
        flaky = ScriptedModel({("q1", 0): Reply(failure="timeout"), ("q2", 0): Reply("wrong")})
        run(Quiz(3), flaky, store, max_error_rate=1.0)
        model = ScriptedModel()
        run(Quiz(3), model, store, resume=True, retry_errors=True)
        assert model.calls == [("q1", 0)]
        rows = open_store(store).rows("SELECT task_id, failure_category, attempt FROM steps ORDER BY task_idx")
        assert rows == [("q0", None, 0), ("q1", None, 1), ("q2", "format_error", 0)]

    def test_without_resume_a_run_with_steps_is_refused(self, store: Path) -> None:
        first = run(Quiz(2), ScriptedModel(), store)
        with pytest.raises(UsageError, match="pass --resume"):
            run(Quiz(2), ScriptedModel(), store, run_id=first.run_id)

    def test_a_changed_configuration_is_not_resumed(self, store: Path) -> None:
        first = run(Quiz(2), ScriptedModel(), store)
        with pytest.raises(UsageError, match="its configuration differs"):
            run(Quiz(2), ScriptedModel(model_id="other"), store, run_id=first.run_id, resume=True)


class TestShards:
    """A shard attempts its contiguous slice of the problems; merged, the shards make one complete run."""

    def test_shards_split_the_problems_and_merge_into_one_run(self, store: Path) -> None:
        models = [ScriptedModel() for _ in range(3)]
        results = [run(Quiz(10), m, store, n_repeats=2, shard=Shard(k, 3), ingest_at_end=None)  # the default
                   for k, m in enumerate(models)]
        slices = [sorted({int(t[1:]) for t, _ in m.calls}) for m in models]
        assert slices == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
        assert len({r.run_id for r in results}) == 1  # a sharded run shares one id
        assert not any(r.ingested for r in results)  # a shard leaves the merge to whoever merges
        ingest(store)
        assert len(stored(store)) == 20
        assert open_store(store).rows("SELECT shard_idx, count(*) FROM steps GROUP BY ALL ORDER BY 1") == [
            (0, 6), (1, 6), (2, 8)]
        assert open_store(store).runs()["status"].to_list() == ["complete"]

    def test_a_shard_slices_the_problem_range(self, store: Path) -> None:
        model = ScriptedModel()
        run(Quiz(20), model, store, problem_range=(10, 16), shard=Shard(1, 2))
        assert sorted(model.calls) == [("q13", 0), ("q14", 0), ("q15", 0)]
