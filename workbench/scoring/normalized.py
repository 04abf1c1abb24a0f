"""SQuAD-style normalised match: case, punctuation, articles and spacing do not count.

``normalize_answer`` is the SQuAD v1.1 evaluation script's normalisation: lower-case,
drop ASCII punctuation, drop the articles a/an/the, collapse whitespace.
"""

from __future__ import annotations

import re
import string

from workbench.types import VerifyResult

_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower-case, strip punctuation and articles, collapse whitespace (SQuAD's ``normalize_answer``)."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def score_normalized(response: str, expected: str) -> VerifyResult:
    """Score 1.0 when ``response`` and ``expected`` are equal after ``normalize_answer``; empty never scores."""
    got, want = normalize_answer(response), normalize_answer(expected)
    details = {"method": "normalized_match", "normalized_expected": want, "normalized_extracted": got}
    if not got:
        details["reason"] = "empty response" if not response.strip() else "nothing left after normalisation"
        return VerifyResult(reward=0.0, extracted_answer=None, scoring_details=details)
    return VerifyResult(reward=1.0 if got == want else 0.0, extracted_answer=got, scoring_details=details)
