"""What the mock model answers: right answers that score, wrong ones that never do."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from workbench.environments import benchmark_names, get_environment
from workbench.environments.registry import BUILTIN_CLASSES, describe_benchmark
from workbench.mock.answers import AnswerIndex, Task
from workbench.mock.responder import (
    GENERIC_REPLY,
    REFUSAL,
    Completion,
    Responder,
    apply_limits,
    count_tokens,
    strip_annotations,
    wrong_answer,
)
from workbench.mock.skill import SkillProfile
from workbench.resources import benchmarks_dir

# What a final-answer marker looks like, and the answer it states.
_MARKED = re.compile(r"(?:The answer is:|####|Answer:)\s*(\S+)|\\boxed\{([^}]*)\}")
ATTEMPTS = 6


def _marked_answers(text: str) -> list[str]:
    return [(a or b).replace(",", "") for a, b in _MARKED.findall(text)]


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return AnswerIndex.load(["gsm8k"]).tasks


@pytest.fixture(scope="module")
def replies(tasks: list[Task]) -> list[tuple[Task, bool, Completion]]:
    responder = Responder(SkillProfile(0))
    return [
        (task, responder.skill.attempt(task.key, None, a).correct, responder.respond(task, None, a))
        for task in tasks
        for a in range(ATTEMPTS)
    ]


def test_correct_replies_score_correct_with_the_answer_after_a_final_marker(
    replies: list[tuple[Task, bool, Completion]],
) -> None:
    env = get_environment("gsm8k")
    correct = [(t, c) for t, ok, c in replies if ok]
    assert len(correct) > 1000
    formats: Counter[str] = Counter()
    for task, completion in correct:
        final_line = completion.text.rsplit("\n", 1)[-1]
        assert _marked_answers(final_line) == [task.answer.replace(",", "")]
        assert completion.finish_reason == "stop"
        assert env.verify(completion.text, task.answer).reward == 1.0
        formats[re.sub(r"[\d,.-]+", "N", final_line)] += 1
    assert set(formats) == {"The answer is: N", "#### N", "\\boxed{N}", "Answer: N"}


def test_correct_replies_carry_the_worked_solution_without_calculator_annotations(
    replies: list[tuple[Task, bool, Completion]],
) -> None:
    _, _, completion = next(r for r in replies if r[1] and r[0].index == 0)
    assert "<<" not in completion.text
    assert completion.text.startswith("Janet sells 16 - 3 - 4 = 9 duck eggs a day.")
    assert strip_annotations("a = <<16-3-4=9>>9 b") == "a = 9 b"


def test_wrong_replies_never_state_the_right_answer_after_a_marker(
    replies: list[tuple[Task, bool, Completion]],
) -> None:
    env = get_environment("gsm8k")
    wrong = [(t, c) for t, ok, c in replies if not ok]
    assert len(wrong) > 1000
    for task, completion in wrong:
        assert task.answer.replace(",", "") not in _marked_answers(completion.text)
        assert env.verify(completion.text, task.answer).reward == 0.0


def test_wrong_replies_mix_wrong_numbers_cut_off_reasoning_refusals_and_empty_ones(
    replies: list[tuple[Task, bool, Completion]],
) -> None:
    kinds: Counter[str] = Counter()
    for _, ok, completion in replies:
        if ok:
            continue
        if completion.text == REFUSAL:
            kinds["refusal"] += 1
        elif completion.text == "":
            kinds["empty"] += 1
        elif completion.finish_reason == "length":
            assert not _marked_answers(completion.text)
            kinds["cut off"] += 1
        else:
            assert len(_marked_answers(completion.text)) == 1
            kinds["wrong number"] += 1
    total = sum(kinds.values())
    assert 0.01 < kinds["refusal"] / total < 0.06
    assert 0.005 < kinds["empty"] / total < 0.04
    assert kinds["cut off"] > 0.15 * total
    assert kinds["wrong number"] > 0.5 * total


def test_the_same_attempt_always_reads_the_same(tasks: list[Task]) -> None:
    first, second = Responder(SkillProfile(5)), Responder(SkillProfile(5))
    for task in tasks[:100]:
        for attempt in range(3):
            assert first.respond(task, 1, attempt) == second.respond(task, 1, attempt)


@pytest.mark.parametrize("answer", ["0", "7", "18", "100", "70000", "1,450,000", "-5", "12.5", "B"])
def test_wrong_answer_is_never_the_answer(answer: str) -> None:
    value = answer.replace(",", "")
    for choice in range(0, 2**48, 2**48 // 997):
        wrong = wrong_answer(answer, choice)
        assert wrong is not None and wrong != value
        if answer != "B":
            assert float(wrong) != float(value)


def test_wrong_answer_of_free_text_is_none() -> None:
    assert wrong_answer("the mitochondria", 12345) is None


def test_unknown_prompt_gets_the_generic_reply() -> None:
    responder = Responder(SkillProfile(0))
    assert responder.respond(None, None, 0) == Completion(GENERIC_REPLY, "stop")
    assert responder.respond(None, 3, 9) == responder.respond(None, None, 0)


def test_max_tokens_truncates_with_finish_reason_length() -> None:
    cut = apply_limits(Completion("x" * 100), max_tokens=5)
    assert cut == Completion("x" * 20, "length")
    assert apply_limits(Completion("short"), max_tokens=5) == Completion("short", "stop")


def test_stop_cuts_at_the_first_stop_string() -> None:
    text = "one\ntwo END three\nfour"
    assert apply_limits(Completion(text), None, ["\n", "END"]) == Completion("one", "stop")
    assert apply_limits(Completion(text), None, ["END"]) == Completion("one\ntwo ", "stop")
    assert apply_limits(Completion(text, "length"), None, ["four"]) == Completion(
        "one\ntwo END three\n", "stop"
    )
    assert apply_limits(Completion(text), 1, ["three"]) == Completion("one\n", "length")


def test_tokens_are_about_four_characters_and_at_least_one() -> None:
    assert count_tokens("") == 1
    assert count_tokens("abcd") == 1
    assert count_tokens("abcde") == 2
    assert count_tokens("x" * 400) == 100


@pytest.fixture(scope="module")
def all_tasks() -> list[Task]:
    return AnswerIndex.load().tasks


def _present_builtins() -> list[str]:
    """Built-ins whose data ships with nel (hub-backed ones: on their fixtures, tests/unit/test_catalogue_*). Only
    nel's own: a test module collected earlier may have registered a benchmark of its own (``my_benchmark``)."""
    own = [b for b in benchmark_names() if b in BUILTIN_CLASSES or (benchmarks_dir() / b / "benchmark.toml").exists()]
    return [b for b in own
            if describe_benchmark(b)["present"] != "not present" and not get_environment(b).requires_sandbox]


@pytest.mark.parametrize("benchmark", _present_builtins())
def test_right_replies_score_one_and_wrong_ones_zero_for_every_task_of_every_builtin(
    benchmark: str, all_tasks: list[Task]
) -> None:
    env = get_environment(benchmark)
    responder = Responder(SkillProfile(0))
    tasks = [t for t in all_tasks if t.benchmark == benchmark]
    assert len(tasks) == len(env)
    outcomes: Counter[bool] = Counter()
    for task in tasks:
        for attempt in range(ATTEMPTS):
            correct = responder.skill.attempt(task.key, None, attempt).correct
            reward = env.verify(responder.respond(task, None, attempt).text, task.answer).reward
            assert reward == (1.0 if correct else 0.0), (task.index, attempt)
            outcomes[correct] += 1
    assert outcomes[True] > 0 and outcomes[False] > 0


def test_multiple_choice_replies_end_with_the_answer_letter_right_or_wrong(all_tasks: list[Task]) -> None:
    responder = Responder(SkillProfile(0))
    letters: Counter[str] = Counter()
    for task in (t for t in all_tasks if t.scorer == "multiple_choice"):
        for attempt in range(ATTEMPTS):
            completion = responder.respond(task, None, attempt)
            match = re.search(r"The answer is \(([A-J])\)\.$", completion.text)
            correct = responder.skill.attempt(task.key, None, attempt).correct
            if correct:
                assert match is not None and match.group(1) == task.answer
            elif match is not None:
                assert match.group(1) != task.answer
                letters["wrong letter"] += 1
    assert letters["wrong letter"] > 100


def test_short_answer_replies_are_the_answer_or_another_problems_answer(all_tasks: list[Task]) -> None:
    responder = Responder(SkillProfile(0))
    short = [t for t in all_tasks if t.scorer == "normalized"]
    answers = {t.answer for t in short}
    assert short
    for task in short:
        assert len(task.distractors) == 3 and task.answer not in task.distractors
        for attempt in range(ATTEMPTS):
            reply = responder.respond(task, None, attempt).text
            text = reply.strip("*.")
            correct = responder.skill.attempt(task.key, None, attempt).correct
            if correct:
                assert text == task.answer
            elif reply and reply != REFUSAL:
                assert text in answers and text != task.answer
                # alike in shape: a symbol for a symbol, a name for a name
                assert (len(text) <= 2) == (len(task.answer) <= 2)
