"""SQuAD-style token F1 over normalised tokens, best of the listed alternatives."""

from __future__ import annotations

import pytest

from workbench.scoring import get_scorer
from workbench.scoring.f1 import score_f1, token_f1


def test_identical_answers_score_one() -> None:
    assert score_f1("The Eiffel Tower", "eiffel tower").reward == 1.0


def test_partial_overlap_scores_the_harmonic_mean_of_precision_and_recall() -> None:
    # prediction "eiffel tower in paris" (4 tokens), reference "eiffel tower" (2): p = 1/2, r = 1
    result = score_f1("the Eiffel Tower in Paris", "Eiffel Tower")
    assert result.reward == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    assert result.extracted_answer == "eiffel tower in paris"
    assert result.scoring_details["method"] == "token_f1"


def test_repeated_tokens_count_with_multiplicity() -> None:
    assert token_f1(["a", "a", "b"], ["a", "b"]) == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))


def test_no_shared_token_scores_zero() -> None:
    assert score_f1("London", "Paris").reward == 0.0


def test_the_best_alternative_counts() -> None:
    result = score_f1("aluminum", "Aluminium | Aluminum")
    assert result.reward == 1.0
    assert result.scoring_details["best_alternative"] == "aluminum"
    assert result.scoring_details["alternatives"] == ["aluminium", "aluminum"]


@pytest.mark.parametrize("response", ["", "  ", "the a an", "?!"])
def test_an_empty_response_scores_zero(response: str) -> None:
    result = score_f1(response, "Paris")
    assert (result.reward, result.extracted_answer) == (0.0, None)
    assert result.scoring_details["method"] == "token_f1"


def test_reward_is_always_between_zero_and_one() -> None:
    for response in ("paris paris paris", "paris france", "x"):
        assert 0.0 <= score_f1(response, "Paris | Paris France").reward <= 1.0


def test_scorer_is_registered_by_name() -> None:
    assert get_scorer("f1") is score_f1
