"""Math equivalence through math-verify: symbolic, not string, comparison."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from workbench.scoring import get_scorer
from workbench.scoring.math import score_math


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("0.5", r"\frac{1}{2}"),
        (r"So the answer is $\boxed{2\sqrt{2}}$.", r"\sqrt{8}"),
        (r"The solution set is $(1, 2]$.", r"(1,2]"),
        (r"\boxed{[0,1)}", r"[0,1)"),
        (r"$x = \frac{3}{4}$", "0.75"),
    ],
)
def test_equal_values_in_different_forms_score_one(response: str, expected: str) -> None:
    result = score_math(response, expected)
    assert result.reward == 1.0
    assert result.scoring_details["method"] == "math_verify"
    assert result.extracted_answer is not None


def test_a_wrong_answer_scores_zero_and_records_what_was_read() -> None:
    result = score_math(r"\boxed{3}", "4")
    assert (result.reward, result.extracted_answer) == (0.0, "3")
    assert result.scoring_details["parsed_expected"] == "4"


def test_an_open_interval_is_not_a_half_open_one() -> None:
    assert score_math(r"\boxed{(1,2)}", "(1,2]").reward == 0.0


@pytest.mark.parametrize("response", ["", "   "])
def test_an_empty_response_never_scores(response: str) -> None:
    result = score_math(response, "5")
    assert (result.reward, result.extracted_answer) == (0.0, None)
    assert result.scoring_details["reason"] == "empty response"


def test_a_response_with_no_maths_scores_zero_with_a_reason() -> None:
    result = score_math("I do not know.", "5")
    assert result.reward == 0.0
    assert result.scoring_details["method"] == "math_verify"


def test_scoring_works_off_the_main_thread() -> None:
    results: list[float] = []
    thread = threading.Thread(target=lambda: results.append(score_math(r"\boxed{\frac{2}{4}}", "0.5").reward))
    thread.start()
    thread.join()
    assert results == [1.0]


def test_importing_the_scorers_does_not_import_sympy_or_math_verify() -> None:
    code = (
        "import sys, workbench.scoring, workbench.scoring.math;"
        "from workbench.scoring import get_scorer; get_scorer('math');"
        "print(sorted(m for m in ('sympy', 'math_verify') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_scorer_is_registered_by_name() -> None:
    assert get_scorer("math") is score_math
