"""What a verdict makes of a step's failure category, in a run and in a re-scoring alike."""

from __future__ import annotations

from factories import step_row

from workbench.engine.reverify import _rescored
from workbench.engine.verdicts import answer_category, verify_safely
from workbench.environments.base import VerifyResult
from workbench.model.failures import classify_judged


def _raises(response: str, expected: str, **metadata: object) -> VerifyResult:
    raise KeyError("answer")


def test_a_scorer_that_raises_gives_a_scorer_error_with_its_message():
    verdict = verify_safely(_raises, "42", "42", {})
    assert verdict.reward == 0.0
    assert answer_category("42", verdict) == "scorer_error"
    assert verdict.scoring_details["error"] == "KeyError: 'answer'"


def test_a_scorer_that_decides_no_category_is_believed():
    wrong = VerifyResult(0.0, None, {"method": "byob:mine"}, {"failure_category": None})
    assert answer_category("Paris is the capital.", wrong) is None, "wrong, not a format error"
    unextracted = VerifyResult(0.0, None, {"method": "numeric"})
    assert answer_category("no number here", unextracted) == "format_error", "an extraction that found nothing"


def test_a_judged_answer_is_empty_a_refusal_or_just_wrong():
    assert classify_judged("   ", 0.0) == "empty_response"
    assert classify_judged("I'm sorry, but I can't help with that.", 0.0) == "refusal"
    assert classify_judged("Lyon", 0.0) is None
    assert classify_judged("Paris", 1.0) is None


def test_reverify_scores_a_scorer_error_again_and_skips_a_transport_failure():
    def step(category: str | None) -> dict:
        return step_row("r", 0, 0, response="42", expected_answer="42", reward=0.0, passed=False,
                        failure_category=category, seed_ms=0.0, model_ms=1.0)

    def right(response: str, expected: str, **metadata: object) -> VerifyResult:
        return VerifyResult(1.0, response, {"method": "exact"})

    counts = {"steps": 0, "rescored": 0, "changed": 0}
    fixed = _rescored(step("scorer_error"), "r2", right, counts)
    assert (fixed["reward"], fixed["failure_category"]) == (1.0, None), "the fixed scorer scores it"
    untouched = _rescored(step("server_error"), "r2", right, counts)
    assert (untouched["reward"], untouched["failure_category"]) == (0.0, "server_error"), "no answer to score"
