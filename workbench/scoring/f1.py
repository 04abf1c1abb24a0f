"""SQuAD-style token F1 between a response and the expected answer(s).

Both sides are normalised with ``normalize_answer`` and split on whitespace; F1 is
the harmonic mean of token precision and recall (tokens counted with multiplicity).
``expected`` may list alternatives separated by ``" | "``: the best one counts.
"""

from __future__ import annotations

from collections import Counter

from workbench.scoring.normalized import normalize_answer
from workbench.types import VerifyResult

ALTERNATIVES_SEPARATOR = " | "


def token_f1(prediction_tokens: list[str], reference_tokens: list[str]) -> float:
    """Token F1 of two token lists; 0.0 when either is empty or they share no token."""
    if not prediction_tokens or not reference_tokens:
        return 0.0
    common = sum((Counter(prediction_tokens) & Counter(reference_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(prediction_tokens)
    recall = common / len(reference_tokens)
    return 2 * precision * recall / (precision + recall)


def score_f1(response: str, expected: str, *, threshold: float | None = None) -> VerifyResult:
    """Reward in [0, 1]: the best token F1 of ``response`` against any alternative in ``expected``.

    With ``threshold``, the reward is binary instead: 1.0 when that F1 reaches the threshold
    (the F1 itself stays in ``scoring_details``).
    """
    got = normalize_answer(response)
    alternatives = [normalize_answer(a) for a in expected.split(ALTERNATIVES_SEPARATOR)]
    details: dict[str, object] = {"method": "token_f1", "normalized_extracted": got, "alternatives": alternatives}
    if not got:
        details.update(
            reason="empty response" if not response.strip() else "nothing left after normalisation",
            best_alternative=None,
        )
        return VerifyResult(reward=0.0, extracted_answer=None, scoring_details=details)
    tokens = got.split()
    scores = [token_f1(tokens, a.split()) for a in alternatives]
    best = max(range(len(scores)), key=scores.__getitem__)
    details["best_alternative"] = alternatives[best]
    if threshold is None:
        return VerifyResult(reward=scores[best], extracted_answer=got, scoring_details=details)
    details.update(f1=scores[best], threshold=threshold)
    return VerifyResult(reward=1.0 if scores[best] >= threshold else 0.0, extracted_answer=got, scoring_details=details)
