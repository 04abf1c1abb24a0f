"""Exact match: only surrounding whitespace is forgiven."""

from __future__ import annotations

import pytest

from workbench.scoring import get_scorer
from workbench.scoring.exact import score_exact


def test_equal_text_after_strip_scores_one() -> None:
    result = score_exact("  Paris\n", "Paris")
    assert (result.reward, result.extracted_answer) == (1.0, "Paris")
    assert result.scoring_details == {"method": "exact_match", "expected": "Paris", "extracted": "Paris"}


@pytest.mark.parametrize("response", ["paris", "Paris.", "The answer is Paris", "Pa ris"])
def test_case_punctuation_and_extra_words_count(response: str) -> None:
    assert score_exact(response, "Paris").reward == 0.0


@pytest.mark.parametrize("response", ["", "  \n "])
def test_an_empty_response_never_scores_even_against_an_empty_expected_answer(response: str) -> None:
    result = score_exact(response, "")
    assert (result.reward, result.extracted_answer) == (0.0, None)
    assert result.scoring_details["method"] == "exact_match"


def test_scorer_is_registered_by_name() -> None:
    assert get_scorer("exact") is score_exact
