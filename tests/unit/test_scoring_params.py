"""Scorer parameters: typed, validated by name, applied to the verdict and visible in its details."""

import pytest

from workbench.errors import UsageError
from workbench.scoring import check_params, get_scorer, scorer_names, scorer_params


def test_every_scorer_lists_its_parameters_with_defaults_and_meaning():
    for name in scorer_names():
        for param, spec in scorer_params(name).items():
            assert spec.help, (name, param)
            assert spec.kind in (float, bool)


def test_numeric_tolerance_accepts_near_answers_and_says_how_near():
    exact = get_scorer("numeric")
    loose = get_scorer("numeric", {"abs_tol": 0.01})
    relative = get_scorer("numeric", {"rel_tol": 0.001})
    assert exact("The answer is: 3.141", "3.14").reward == 0.0
    verdict = loose("The answer is: 3.141", "3.14")
    assert verdict.reward == 1.0 and verdict.scoring_details["tolerance"] == pytest.approx(0.01)
    assert loose("The answer is: 3.16", "3.14").reward == 0.0
    assert relative("The answer is: 1000.9", "1000").reward == 1.0
    assert relative("The answer is: 1001.1", "1000").reward == 0.0


def test_exact_match_can_ignore_case_but_never_scores_an_empty_response():
    insensitive = get_scorer("exact", {"case_sensitive": False})
    assert get_scorer("exact")("lithium", "Lithium").reward == 0.0
    assert insensitive("lithium", "Lithium").reward == 1.0
    assert insensitive("   ", "").reward == 0.0


def test_f1_threshold_makes_the_reward_binary_and_keeps_the_f1():
    binary = get_scorer("f1", {"threshold": 0.5})
    verdict = binary("the Eiffel tower in Paris", "Eiffel Tower")
    assert verdict.reward == 1.0 and 0.5 <= verdict.scoring_details["f1"] < 1.0
    assert binary("a big red tower in town", "Eiffel Tower").reward == 0.0
    assert get_scorer("f1")("a big red tower in town", "Eiffel Tower").reward == pytest.approx(2 / 7)


def test_regex_can_be_case_sensitive():
    assert get_scorer("regex")("ANSWER: yes", r"answer: yes").reward == 1.0
    assert get_scorer("regex", {"ignore_case": False})("ANSWER: yes", r"answer: yes").reward == 0.0


@pytest.mark.parametrize(("name", "params", "message"), [
    ("numeric", {"tolerance": 0.1}, "scoring.tolerance: scorer 'numeric' has no parameter 'tolerance'; "
                                    "its parameters: abs_tol, rel_tol"),
    ("math", {"abs_tol": 0.1}, "its parameters: none"),
    ("numeric", {"abs_tol": "0.1"}, "scoring.abs_tol: expected a number, got '0.1'"),
    ("numeric", {"abs_tol": True}, "expected a number"),
    ("exact", {"case_sensitive": 0}, "scoring.case_sensitive: expected true or false, got 0"),
])
def test_a_bad_parameter_is_named_with_what_is_accepted(name, params, message):
    with pytest.raises(UsageError) as info:
        get_scorer(name, params)
    assert message in str(info.value)


def test_integers_are_accepted_where_numbers_are_expected():
    assert check_params("numeric", {"abs_tol": 1}) == {"abs_tol": 1.0}
