"""Exact match: the response, stripped of surrounding whitespace, must equal the expected answer."""

from __future__ import annotations

from workbench.environments.base import VerifyResult


def score_exact(response: str, expected: str) -> VerifyResult:
    """Score 1.0 when ``response.strip() == expected.strip()`` (case and inner spacing count); empty never scores."""
    got, want = response.strip(), expected.strip()
    details = {"method": "exact_match", "expected": want, "extracted": got}
    if not got:
        details["reason"] = "empty response"
        return VerifyResult(reward=0.0, extracted_answer=None, scoring_details=details)
    return VerifyResult(reward=1.0 if got == want else 0.0, extracted_answer=got, scoring_details=details)
