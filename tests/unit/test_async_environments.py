"""Environments written NeMo Evaluator's way: ``async def seed``/``verify`` and a ``SeedResult`` of a prompt, an
expected answer and metadata, run by the engine beside the sync ones (``workbench.environments.coroutines``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from scripted_model import Reply, ScriptedModel

from workbench.engine import run_evaluation
from workbench.environments import EvalEnvironment, SeedResult, VerifyResult, get_environment, register
from workbench.environments.dataset import task_id_of
from workbench.store import open_store


class AsyncQuiz(EvalEnvironment):
    """``n`` questions ``What is i?``; its verify waits ``verify_s`` (a remote judge, say) before scoring."""

    name = "async_quiz"

    def __init__(self, n: int = 4, verify_s: float = 0.0) -> None:
        super().__init__()
        self.n, self.verify_s = n, verify_s

    def __len__(self) -> int:
        return self.n

    async def seed(self, idx: int) -> SeedResult:  # type: ignore[override]  # run as a plain call
        await asyncio.sleep(0)
        return SeedResult(prompt=f"What is {idx}?", expected_answer=str(idx), metadata={"category": "arith"})

    async def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:  # type: ignore[override]
        await asyncio.sleep(self.verify_s)
        if response == "boom":
            raise ValueError("cannot score boom")
        return VerifyResult(reward=float(response.strip() == expected), extracted_answer=response.strip(),
                            scoring_details={"method": "exact"})


def answer(seed: Any, attempt: int) -> Reply:
    return Reply(text="boom" if seed.expected_answer == "3" else seed.expected_answer)


class TestSeedResult:
    def test_a_prompt_and_an_expected_answer_are_enough(self) -> None:
        seed = SeedResult(prompt="What is 2+2?", expected_answer="4", metadata={"category": "arith"})
        assert seed.messages == ({"role": "user", "content": "What is 2+2?"},)
        assert seed.task_id == task_id_of({"prompt": "What is 2+2?", "expected_answer": "4"})
        assert seed.metadata == {"category": "arith"}

    def test_the_task_id_is_the_content_not_the_position(self) -> None:
        same = SeedResult(prompt="p", expected_answer="a").task_id
        assert SeedResult(prompt="p", expected_answer="a", metadata={"idx": 7}).task_id == same
        assert SeedResult(prompt="p", expected_answer="b").task_id != same

    def test_given_messages_and_task_id_are_kept(self) -> None:
        seed = SeedResult(prompt="p", messages=[{"role": "system", "content": "s"}], expected_answer="a",
                          task_id="t1")
        assert (seed.messages, seed.task_id, seed.metadata) == (({"role": "system", "content": "s"},), "t1", {})


class TestAsyncMethods:
    def test_they_become_plain_calls_with_their_results(self) -> None:
        env: Any = AsyncQuiz()  # type checkers see the coroutines the class was written with
        assert env.seed(2).prompt == "What is 2?"
        assert env.verify("2", "2").reward == 1.0
        assert env.check_answer_key(1) == (True, "scores 1.0 via exact")

    def test_they_can_be_called_from_inside_a_running_event_loop(self) -> None:
        async def inside() -> float:
            env: Any = AsyncQuiz()
            return float(env.verify("1", "1").reward)

        assert asyncio.run(inside()) == 1.0

    def test_the_engine_runs_them_and_a_raising_verify_is_a_scorer_error(self, tmp_path: Path) -> None:
        store = tmp_path / "nel.duckdb"
        result = asyncio.run(run_evaluation(AsyncQuiz(4), ScriptedModel(answer), store=store, n_repeats=2))
        rows = open_store(store).rows("SELECT task_idx, reward, failure_category FROM steps ORDER BY task_idx, "
                                      "repeat")
        assert result.steps_written == 8
        assert [(i, r) for i, r, _ in rows] == [(0, 1.0), (0, 1.0), (1, 1.0), (1, 1.0), (2, 1.0), (2, 1.0),
                                                 (3, 0.0), (3, 0.0)]
        assert [c for i, _, c in rows if i == 3] == ["scorer_error", "scorer_error"]

    def test_awaiting_verifies_overlap_instead_of_queueing(self, tmp_path: Path) -> None:
        """16 verifies that each wait 0.2 s take far less than 16 x 0.2 s: the waits interleave on the
        environments' loop, and the engine's loop keeps serving the other attempts meanwhile."""
        started = time.perf_counter()
        asyncio.run(run_evaluation(AsyncQuiz(16, verify_s=0.2), ScriptedModel(), store=tmp_path / "nel.duckdb",
                                   max_concurrent=16, ingest_at_end=False))
        assert time.perf_counter() - started < 1.6


def test_register_and_get_environment_take_a_class_and_a_second_registration_wins() -> None:
    @register("api_test_quiz")
    class First(AsyncQuiz):
        pass

    assert isinstance(get_environment("api_test_quiz"), First)

    @register("api_test_quiz")
    class Second(AsyncQuiz):
        pass

    assert isinstance(get_environment("api_test_quiz"), Second)
    assert get_environment("gsm8k").name == "gsm8k"


def test_a_registered_class_without_a_name_of_its_own_takes_the_registered_one() -> None:
    @register("api_test_unnamed")
    class Unnamed(AsyncQuiz):
        name = "unnamed"

    assert get_environment("api_test_unnamed").name == "api_test_unnamed"
