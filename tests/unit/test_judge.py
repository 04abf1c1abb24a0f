"""LLM-as-judge without a model: the prompt it sees, the strict reading of its verdict, the mock judge."""

import pytest

from workbench.mock.judge import agrees, judge_reply
from workbench.scoring.judge import DEFAULT_TEMPLATE, check_template, parse_verdict, render_prompt, sections


@pytest.mark.parametrize(("reply", "correct"), [
    ("The answer matches.\nVERDICT: CORRECT", True),
    ("Different number.\nVERDICT: INCORRECT", False),
    ("verdict: correct", True),
    ("Looks right.\n\n**VERDICT: CORRECT**\n\n", True),
    ("VERDICT: INCORRECT.", False),
    ("I first thought VERDICT: INCORRECT, but on reflection...\nVERDICT: CORRECT", None),
    ("VERDICT: CORRECT\nActually, no.", None),
    ("The answer is correct.", None),
    ("VERDICT: CORRECT or INCORRECT", None),
    ("VERDICT: PARTIALLY CORRECT", None),
    ("", None),
    ("   \n  ", None),
])
def test_only_a_final_verdict_line_counts(reply, correct):
    verdict = parse_verdict(reply)
    assert verdict.correct is correct, verdict.reason
    assert verdict.reason


def test_the_prompt_is_filled_literally_so_braces_in_answers_survive():
    prompt = render_prompt(DEFAULT_TEMPLATE, question="f(x) = {x}", expected="{1, 2}", response="set {1, 2}")
    assert "f(x) = {x}" in prompt and "set {1, 2}" in prompt
    assert sections(prompt) == ("f(x) = {x}", "{1, 2}", "set {1, 2}")


def test_a_template_must_show_the_judge_the_response():
    assert check_template("Grade: {question}") is not None
    assert check_template("Grade {response} against {expected}") is None
    assert sections("Grade this: 42") is None


@pytest.mark.parametrize(("answer", "reference", "expected"), [
    ("Step by step...\nThe answer is: 18", "18", True),
    ("The answer is: 17", "18", False),
    ("I think it is (B). The answer is (C).", "C", True),
    ("Lithium", "lithium", True),
    ("It is the element Lithium", "Lithium", True),
    ("Sodium", "Lithium", False),
    ("", "Lithium", False),
])
def test_the_mock_judge_grades_like_the_builtin_scorers(answer, reference, expected):
    assert agrees(answer, reference) is expected
    reply = judge_reply(render_prompt(DEFAULT_TEMPLATE, question="Q?", expected=reference, response=answer))
    assert reply is not None and parse_verdict(reply).correct is expected


def test_the_mock_judge_ignores_prompts_that_are_not_judge_prompts():
    assert judge_reply("What is the chemical symbol for lithium?") is None
