"""Multiple-choice letter scoring: the last explicit answer wins; prose never names an option."""

from __future__ import annotations

import pytest

from workbench.scoring import get_scorer
from workbench.scoring.multiple_choice import extract_choice, score_multiple_choice


@pytest.mark.parametrize(
    ("response", "letter", "method"),
    [
        ("A is tempting, but the answer is D", "D", "answer_marker"),
        ("Answer: (b)", "B", "answer_marker"),
        ("Let me think.\nOption C fits best.\n**C**", "C", "bold"),
        ("The correct option is B.", "B", "answer_marker"),
        ("c", "C", "bare_letter"),
        ("  (D).  ", "D", "bare_letter"),
        ("**Answer:** e", "E", "answer_marker"),
        ("The answer is (A).", "A", "answer_marker"),
        ("So the final answer is $\\boxed{C}$", "C", "boxed"),
        ("\\boxed{\\text{b}}", "B", "boxed"),
        ("The answer is B because 3 feet make a yard.", "B", "answer_marker"),
        ("My choice would be J", "J", "answer_marker"),
    ],
)
def test_explicit_answers_are_found(response: str, letter: str, method: str) -> None:
    found = extract_choice(response)
    assert found is not None and (found[0], found[2]) == (letter, method)


def test_the_last_explicit_answer_wins_over_earlier_ones() -> None:
    text = "The answer is (B).\nWait, I made an error. The answer is (C)."
    assert score_multiple_choice(text, "C").reward == 1.0
    assert score_multiple_choice(text, "B").reward == 0.0


def test_lower_case_expected_letter_and_parentheses_are_accepted() -> None:
    assert score_multiple_choice("The answer is (c).", "c").reward == 1.0
    assert score_multiple_choice("The answer is (c).", "(C)").reward == 1.0


@pytest.mark.parametrize(
    "response",
    [
        "A train leaves the station at 3 pm and arrives at 5 pm.",
        "the answer is a bit tricky to find",
        "I am not sure which one it is.",
        "The answer is (X).",
        "The answer is K",
        "Answer: Apples",
    ],
)
def test_a_response_naming_no_option_is_wrong_with_method_none(response: str) -> None:
    result = score_multiple_choice(response, "A")
    assert result.reward == 0.0
    assert result.extracted_answer is None
    assert result.scoring_details["method"] == "none"


@pytest.mark.parametrize("response", ["", "   \n", "\t"])
def test_an_empty_response_never_scores(response: str) -> None:
    result = score_multiple_choice(response, "A")
    assert (result.reward, result.extracted_answer) == (0.0, None)
    assert result.scoring_details["reason"] == "empty response"


def test_a_wrong_letter_scores_zero_and_records_what_was_extracted() -> None:
    result = score_multiple_choice("The answer is (B).", "D")
    assert result.reward == 0.0
    assert result.extracted_answer == "B"
    assert result.scoring_details == {"method": "answer_marker", "raw_match": "answer is (B", "expected": "D"}


def test_a_capital_pronoun_after_a_marker_is_not_an_answer() -> None:
    assert extract_choice("The answer is I think unclear") is None
    assert extract_choice("The answer is I.") == ("I", "answer is I", "answer_marker")


def test_a_letter_glued_to_a_word_is_not_an_answer() -> None:
    assert extract_choice("The answer is Alpha's") is None
    assert extract_choice("answer: B2") is None


def test_scorer_is_registered_by_name() -> None:
    assert get_scorer("multiple_choice") is score_multiple_choice


def test_long_prose_is_scored_quickly() -> None:
    import time

    text = ("A train leaves the option desk and the answer comes later. " * 2000) + "The answer is (D)."
    start = time.perf_counter()
    assert score_multiple_choice(text, "D").reward == 1.0
    assert time.perf_counter() - start < 0.5
