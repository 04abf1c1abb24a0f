"""The mock model's answer index: which built-in problem a prompt is."""

from __future__ import annotations

import pytest

from workbench.environments import get_environment
from workbench.mock.answers import AnswerIndex, Task


@pytest.fixture(scope="module")
def index() -> AnswerIndex:
    return AnswerIndex.load(["gsm8k"])


def _task(key: str, question: str) -> Task:
    return Task("demo", key, 0, f"Solve: {question}", question, "1", None)


def test_index_holds_every_gsm8k_problem_with_its_answer(index: AnswerIndex) -> None:
    env = get_environment("gsm8k")
    assert len(index) == len(env) == 1319
    first = index.exact(env.seed(0).prompt)
    assert first is not None
    assert (first.benchmark, first.index, first.answer) == ("gsm8k", 0, env.seed(0).expected_answer)
    assert first.key == f"gsm8k:{env.seed(0).task_id}"


def test_exact_rendered_prompt_is_found(index: AnswerIndex) -> None:
    env = get_environment("gsm8k")
    for i in (0, 1, 500, 1318):
        task = index.lookup(env.seed(i).prompt)
        assert task is not None and task.index == i


def test_question_wrapped_in_other_text_is_found(index: AnswerIndex) -> None:
    env = get_environment("gsm8k")
    question = next(e.question for i, e in enumerate(env.answer_key()) if i == 42)
    wrapped = f"You are a careful tutor.\n\nQuestion: {question}\nAnswer: let's think."
    task = index.lookup(wrapped)
    assert task is not None and task.index == 42
    assert index.exact(wrapped) is None


def test_few_shot_text_resolves_to_the_last_question(index: AnswerIndex) -> None:
    env = get_environment("gsm8k")
    entries = list(env.answer_key())
    text = f"Q: {entries[3].question}\nA: {entries[3].answer}\n\nQ: {entries[9].question}\nA:"
    task = index.lookup(text)
    assert task is not None and task.index == 9


def test_unknown_prompt_is_not_found(index: AnswerIndex) -> None:
    assert index.lookup("What is the capital of France?") is None
    assert index.lookup("") is None


def test_search_result_is_cached_per_prompt(index: AnswerIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    text = "Unknown prompt that is looked up twice."
    assert index.lookup(text) is None
    monkeypatch.setattr(index, "_search", lambda text: pytest.fail("searched again"))
    assert index.lookup(text) is None


def test_questions_shorter_than_the_prefix_are_found() -> None:
    index = AnswerIndex([_task("a", "2+2?"), _task("b", "What is 3 times 7 when doubled?" * 3)])
    found = index.lookup("Please answer: 2+2? Thanks")
    assert found is not None and found.key == "a"
    found = index.lookup("x " + "What is 3 times 7 when doubled?" * 3)
    assert found is not None and found.key == "b"
