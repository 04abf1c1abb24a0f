"""Exact match: the response, stripped of surrounding whitespace, must equal the expected answer."""

from __future__ import annotations

from workbench.types import VerifyResult


def score_exact(response: str, expected: str, *, case_sensitive: bool = True) -> VerifyResult:
    """Score 1.0 when ``response.strip() == expected.strip()`` (inner spacing counts, and case unless
    ``case_sensitive`` is false); an empty response never scores."""
    got, want = response.strip(), expected.strip()
    details: dict[str, object] = {"method": "exact_match", "expected": want, "extracted": got}
    if not case_sensitive:
        details["case_sensitive"] = False
        return _verdict(got, got.casefold() == want.casefold(), details)
    return _verdict(got, got == want, details)


def _verdict(got: str, equal: bool, details: dict[str, object]) -> VerifyResult:
    if not got:
        details["reason"] = "empty response"
        return VerifyResult(reward=0.0, extracted_answer=None, scoring_details=details)
    return VerifyResult(reward=1.0 if equal else 0.0, extracted_answer=got, scoring_details=details)
