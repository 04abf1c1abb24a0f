"""Regex scoring: the expected answer is a pattern searched for anywhere, ignoring case."""

from __future__ import annotations

import pytest

from workbench.errors import UsageError
from workbench.scoring import get_scorer
from workbench.scoring.regex import score_regex


def test_a_match_anywhere_scores_one_and_records_the_matched_text() -> None:
    result = score_regex("I believe the capital is PARIS, France.", r"\bparis\b")
    assert (result.reward, result.extracted_answer) == (1.0, "PARIS")
    assert result.scoring_details == {"method": "regex_search", "pattern": r"\bparis\b", "raw_match": "PARIS"}


def test_no_match_scores_zero_with_no_extracted_answer() -> None:
    result = score_regex("London", r"\bparis\b")
    assert (result.reward, result.extracted_answer) == (0.0, None)
    assert result.scoring_details["reason"] == "pattern not found"


def test_an_empty_response_never_scores_even_when_the_pattern_matches_nothing() -> None:
    result = score_regex("", r".*")
    assert (result.reward, result.extracted_answer) == (0.0, None)
    assert result.scoring_details["reason"] == "empty response"


def test_an_invalid_pattern_is_a_clear_error_naming_it() -> None:
    with pytest.raises(UsageError, match=r"regex scorer: invalid pattern '\(unclosed'"):
        score_regex("anything", "(unclosed")


def test_scorer_is_registered_by_name() -> None:
    assert get_scorer("regex") is score_regex
