"""From a scorer's verdict to a step's failure category, the same for a run and a re-scoring.

A scorer may decide the category itself (``VerifyResult.metadata["failure_category"]``, ``None`` included: a
BYOB scorer judges the whole response, so a wrong answer it rejects is wrong, not a format error); otherwise the
category follows from what extraction found. A scorer that raises yields ``scorer_error`` with its message,
never a crashed run and never a category that blames the model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.model.failures import FailureCategory, classify_answer
from workbench.types import VerifyResult


def answer_category(response: str, verdict: VerifyResult) -> FailureCategory | None:
    """The failure category of an attempt that got an answer (``None`` for a plain wrong or right answer)."""
    if "failure_category" in verdict.metadata:
        category: FailureCategory | None = verdict.metadata["failure_category"]
        return category
    return classify_answer(response, verdict.reward, verdict.extracted_answer)


def scorer_failed(exc: Exception) -> VerifyResult:
    """A scorer that raised on a response: the attempt has no verdict, and says why."""
    return VerifyResult(0.0, None, {"method": "error", "error": f"{type(exc).__name__}: {exc}"},
                        {"failure_category": "scorer_error"})


def verify_safely(verify: Callable[..., VerifyResult], response: str, expected: str,
                  metadata: dict[str, Any]) -> VerifyResult:
    """``verify(response, expected, **metadata)``, with an exception turned into a ``scorer_error`` verdict."""
    try:
        return verify(response, expected, **metadata)
    except Exception as exc:  # one response the scorer cannot take does not end the run
        return scorer_failed(exc)
