"""How an imported sample finds nel's task: one rule for Gym rollouts, inspect samples and lm-eval documents."""

from __future__ import annotations

import pytest

from workbench.environments import get_environment
from workbench.environments.question_index import QuestionIndex, normalise


@pytest.fixture(scope="module")
def gsm8k() -> QuestionIndex:
    return QuestionIndex("gsm8k")


@pytest.fixture(scope="module")
def problems() -> list[tuple[str, str, str]]:
    """(task id, prompt nel sends, question) of gsm8k's first problems."""
    env = get_environment("gsm8k")
    rows = env.rows  # type: ignore[attr-defined]
    return [(env.seed(i).task_id, env.seed(i).prompt, rows[i]["question"]) for i in range(5)]


def test_the_prompt_nel_sends_is_its_problem(gsm8k: QuestionIndex, problems: list[tuple[str, str, str]]) -> None:
    task_id, prompt, _ = problems[2]
    match = gsm8k.find(prompt)
    assert (match.task_id, match.how) == (task_id, "prompt")


def test_the_question_itself_normalised(gsm8k: QuestionIndex, problems: list[tuple[str, str, str]]) -> None:
    task_id, _, question = problems[1]
    shouted = "  " + question.upper().replace(" ", "\n ") + "  "
    assert gsm8k.find(shouted).task_id == task_id
    assert gsm8k.find("Question: whatever", question=question).how == "question"


def test_a_question_inside_another_harness_template(gsm8k: QuestionIndex,
                                                    problems: list[tuple[str, str, str]]) -> None:
    task_id, _, question = problems[3]
    inspect_style = f"Solve the following math problem step by step.\n\n{question}\n\nRemember to put your answer last."
    lmeval_style = f"Question: {question}\nAnswer:"
    assert gsm8k.find(inspect_style) == gsm8k.find(lmeval_style)
    assert (gsm8k.find(inspect_style).task_id, gsm8k.find(inspect_style).how) == (task_id, "inside")


def test_few_shot_examples_before_the_question_do_not_win(gsm8k: QuestionIndex,
                                                          problems: list[tuple[str, str, str]]) -> None:
    """Examples from the same split come first; the question asked is the one that ends last."""
    (first, _, q_first), (last, _, q_last) = problems[0], problems[4]
    text = f"Question: {q_first}\nAnswer: 42\n\nQuestion: {q_last}\nAnswer:"
    assert gsm8k.find(text).task_id == last != first


def test_no_match_and_no_benchmark_say_why() -> None:
    assert QuestionIndex("gsm8k").find("What is the capital of France?").reason == \
        "the prompt is none of gsm8k's problems"
    assert "no benchmark named" in (QuestionIndex(None).find("x").reason or "")
    assert "not a benchmark nel knows" in (QuestionIndex("no-such-bench").find("x").reason or "")


def test_normalise_folds_case_width_and_spaces() -> None:
    assert normalise("  Ｈello\u00a0\n WORLD ") == "hello world"
