"""Regular-expression scoring: the expected answer is a pattern searched for in the response."""

from __future__ import annotations

import re
from functools import lru_cache

from workbench.errors import UsageError
from workbench.types import VerifyResult


@lru_cache(maxsize=4096)
def compile_pattern(pattern: str, ignore_case: bool = True) -> re.Pattern[str]:
    """The compiled ``pattern`` (case-insensitive by default); ``UsageError`` naming it when it is invalid."""
    try:
        return re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise UsageError(f"regex scorer: invalid pattern {pattern!r}: {exc}") from None


def score_regex(response: str, expected: str, *, ignore_case: bool = True) -> VerifyResult:
    """Score 1.0 when the pattern ``expected`` matches anywhere in ``response`` (``re.search``, ignoring
    case unless ``ignore_case`` is false)."""
    pattern = compile_pattern(expected, ignore_case)
    details: dict[str, object] = {"method": "regex_search", "pattern": expected}
    if not ignore_case:
        details["ignore_case"] = False
    if not response or response.isspace():
        details.update(reason="empty response", raw_match=None)
        return VerifyResult(reward=0.0, extracted_answer=None, scoring_details=details)
    match = pattern.search(response)
    details["raw_match"] = None if match is None else match.group(0)
    if match is None:
        details["reason"] = "pattern not found"
        return VerifyResult(reward=0.0, extracted_answer=None, scoring_details=details)
    return VerifyResult(reward=1.0, extracted_answer=match.group(0), scoring_details=details)
