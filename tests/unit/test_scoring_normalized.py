"""SQuAD-style normalised match: case, punctuation, articles and spacing do not count."""

from __future__ import annotations

import pytest

from workbench.scoring import get_scorer
from workbench.scoring.normalized import normalize_answer, score_normalized


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("The Eiffel  Tower!", "eiffel tower"),
        ("an apple, a pear", "apple pear"),
        ("**Fe**.", "fe"),
        ("Theatre", "theatre"),  # an article only as a whole word
        ("  A  ", ""),
    ],
)
def test_normalize_answer_matches_squad(text: str, normalized: str) -> None:
    assert normalize_answer(text) == normalized


@pytest.mark.parametrize("response", ["sodium", "Sodium.", "**SODIUM**", " the sodium "])
def test_variants_of_the_answer_score_one(response: str) -> None:
    result = score_normalized(response, "Sodium")
    assert (result.reward, result.extracted_answer) == (1.0, "sodium")
    assert result.scoring_details["method"] == "normalized_match"


@pytest.mark.parametrize("response", ["Potassium", "sodium chloride", "Na"])
def test_a_different_answer_scores_zero(response: str) -> None:
    assert score_normalized(response, "Sodium").reward == 0.0


@pytest.mark.parametrize("response", ["", "   ", "...", "the"])
def test_an_empty_or_all_stripped_response_never_scores(response: str) -> None:
    result = score_normalized(response, "")
    assert (result.reward, result.extracted_answer) == (0.0, None)
    assert "reason" in result.scoring_details


def test_scorer_is_registered_by_name() -> None:
    assert get_scorer("normalized") is score_normalized
