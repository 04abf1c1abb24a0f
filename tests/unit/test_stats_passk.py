"""Specification of pass@k, intervals across tasks, Wilson bounds and percentiles.

Every formula is checked against a reference worked out by hand here or taken from scipy.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as scipy_stats

from workbench.stats import (
    Estimate,
    mean_with_ci,
    pass_at_k,
    pass_at_k_estimates,
    pass_at_k_per_task,
    percentiles,
    wilson_interval,
)


def exact_pass_at_k(n: int, c: int, k: int) -> float:
    """The definition with exact big-integer binomials: the reference the stable form must match."""
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


# --- pass_at_k ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (5, 2, 1, 0.4),  # pass@1 is the pass rate c/n
        (10, 3, 1, 0.3),
        (4, 1, 2, 0.5),  # 1 - C(3,2)/C(4,2) = 1 - 3/6
        (10, 1, 5, 0.5),  # 1 - C(9,5)/C(10,5) = 1 - 126/252
        (6, 2, 3, 0.8),  # 1 - C(4,3)/C(6,3) = 1 - 4/20
    ],
)
def test_pass_at_k_matches_hand_computed_values(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("n", "c", "k"), [(200, 7, 10), (1000, 1, 100), (1000, 999, 1), (50, 25, 50), (3000, 3, 30)]
)
def test_pass_at_k_matches_exact_binomials_for_large_n(n: int, c: int, k: int) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(exact_pass_at_k(n, c, k), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(("n", "k"), [(1, 1), (5, 1), (5, 5), (100, 10)])
def test_no_passes_gives_zero(n: int, k: int) -> None:
    assert pass_at_k(n, 0, k) == 0.0


@pytest.mark.parametrize(("n", "k"), [(1, 1), (5, 1), (5, 5), (100, 10)])
def test_all_passes_gives_one(n: int, k: int) -> None:
    assert pass_at_k(n, n, k) == 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(5, 4, 2), (10, 8, 3), (3, 1, 3)])
def test_fewer_failures_than_k_gives_one(n: int, c: int, k: int) -> None:
    assert pass_at_k(n, c, k) == 1.0


@pytest.mark.parametrize(("n", "c"), [(5, 0), (5, 1), (5, 5), (1, 0), (1, 1)])
def test_k_equal_to_n_is_the_any_success_indicator(n: int, c: int) -> None:
    assert pass_at_k(n, c, n) == (1.0 if c > 0 else 0.0)


@pytest.mark.parametrize(("n", "c"), [(10, 1), (10, 3), (20, 7), (50, 2)])
def test_pass_at_k_never_decreases_with_k(n: int, c: int) -> None:
    values = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    assert all(a <= b for a, b in itertools.pairwise(values))


@pytest.mark.parametrize(("n", "c", "k"), [(5, 2, 6), (5, 2, 0), (5, 2, -1), (5, 6, 1), (5, -1, 1)])
def test_pass_at_k_rejects_undefined_inputs(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


# --- pass_at_k_per_task -------------------------------------------------------------------------------


def test_per_task_pass_at_k_matches_the_scalar_form() -> None:
    n = np.array([5, 10, 4, 200, 7, 3])
    c = np.array([2, 0, 4, 7, 6, 1])
    for k in (1, 2, 3):
        expected = [pass_at_k(int(ni), int(ci), k) for ni, ci in zip(n, c, strict=True)]
        np.testing.assert_allclose(pass_at_k_per_task(n, c, k), expected, rtol=1e-12, atol=1e-15)


def test_per_task_pass_at_k_is_nan_where_there_are_fewer_than_k_attempts() -> None:
    result = pass_at_k_per_task(np.array([5, 2, 3, 0]), np.array([2, 1, 0, 0]), 3)
    assert result[0] == pytest.approx(1 - 1 / 10)  # 1 - C(3,3)/C(5,3)
    assert np.isnan(result[1])
    assert result[2] == 0.0
    assert np.isnan(result[3])


def test_per_task_pass_at_k_accepts_plain_sequences() -> None:
    np.testing.assert_allclose(pass_at_k_per_task([5, 4], [2, 1], 2), [0.7, 0.5])


def test_per_task_pass_at_k_of_no_tasks_is_empty() -> None:
    assert pass_at_k_per_task(np.array([], dtype=int), np.array([], dtype=int), 1).shape == (0,)


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [([5], [6], 1), ([5], [-1], 1), ([5, 5], [1], 1), ([5], [1], 0)],
)
def test_per_task_pass_at_k_rejects_bad_inputs(n: list[int], c: list[int], k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k_per_task(np.array(n), np.array(c), k)


# --- mean_with_ci -------------------------------------------------------------------------------------


def test_mean_with_ci_is_a_student_t_interval_across_tasks() -> None:
    values = np.array([0.2, 0.4, 0.4, 0.6, 0.9])
    mean = 2.5 / 5  # 0.5
    sample_sd = math.sqrt(((0.3**2) + 0.1**2 + 0.1**2 + 0.1**2 + 0.4**2) / 4)  # sqrt(0.28 / 4)
    se = sample_sd / math.sqrt(5)
    t = scipy_stats.t.ppf(0.975, df=4)  # 2.7764451...
    assert t == pytest.approx(2.7764451052)
    est = mean_with_ci(values)
    assert est.value == pytest.approx(mean)
    assert est.se == pytest.approx(se)
    assert est.low == pytest.approx(mean - t * se)
    assert est.high == pytest.approx(mean + t * se)
    assert (est.n_tasks, est.confidence) == (5, 0.95)


def test_mean_with_ci_agrees_with_scipy_t_interval() -> None:
    values = np.array([0.1, 0.35, 0.8, 0.55, 0.3, 0.65, 0.45])
    low, high = scipy_stats.t.interval(
        0.9, df=len(values) - 1, loc=values.mean(), scale=scipy_stats.sem(values)
    )
    est = mean_with_ci(values, confidence=0.9)
    assert est.low == pytest.approx(low)
    assert est.high == pytest.approx(high)
    assert est.confidence == 0.9


def test_mean_with_ci_drops_nan_tasks_and_counts_only_defined_ones() -> None:
    est = mean_with_ci(np.array([1.0, np.nan, 0.0, np.nan]))
    assert est.n_tasks == 2
    assert est.value == 0.5


def test_mean_with_ci_clips_to_the_unit_interval_when_bounded() -> None:
    est = mean_with_ci(np.array([0.0, 1.0, 1.0]))
    assert est.low == 0.0 and est.high == 1.0


def test_mean_with_ci_does_not_clip_when_unbounded() -> None:
    est = mean_with_ci(np.array([0.0, 1.0, 1.0]), bounded=False)
    assert est.low < 0.0 and est.high > 1.0


def test_one_task_gives_the_point_as_its_interval() -> None:
    assert mean_with_ci(np.array([0.25])) == Estimate(value=0.25, low=0.25, high=0.25, n_tasks=1, se=0.0)


def test_no_tasks_give_a_nan_estimate() -> None:
    for values in (np.array([]), np.array([np.nan, np.nan])):
        est = mean_with_ci(values)
        assert est.n_tasks == 0
        assert all(math.isnan(x) for x in (est.value, est.low, est.high, est.se))


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_identical_tasks_have_a_zero_width_interval(value: float) -> None:
    est = mean_with_ci(np.full(10, value))
    assert (est.value, est.low, est.high, est.se) == (value, value, value, 0.0)


@pytest.mark.parametrize("confidence", [0.0, 1.0, 1.5, -0.1])
def test_confidence_must_be_a_probability(confidence: float) -> None:
    with pytest.raises(ValueError):
        mean_with_ci(np.array([0.5, 0.6]), confidence=confidence)


# --- pass_at_k_estimates ------------------------------------------------------------------------------


def test_pass_at_k_estimates_average_per_task_values_across_tasks() -> None:
    n = np.array([5, 4, 5])
    c = np.array([2, 1, 0])
    estimates = pass_at_k_estimates(n, c, ks=[1, 2])
    assert set(estimates) == {1, 2}
    assert estimates[1].value == pytest.approx((0.4 + 0.25 + 0.0) / 3)
    assert estimates[2].value == pytest.approx((0.7 + 0.5 + 0.0) / 3)
    assert estimates[2] == mean_with_ci(np.array([0.7, 0.5, 0.0]))


def test_pass_at_k_estimates_leave_out_tasks_with_too_few_attempts() -> None:
    estimates = pass_at_k_estimates(np.array([5, 2]), np.array([2, 2]), ks=[1, 3])
    assert estimates[1].n_tasks == 2
    assert estimates[3].n_tasks == 1
    assert estimates[3].value == pytest.approx(1 - 1 / 10)


def test_pass_at_k_estimates_all_pass_and_all_fail_are_wilson_intervals_not_points() -> None:
    n = np.full(4, 5)
    top = pass_at_k_estimates(n, n, ks=[1, 5])[5]
    bottom = pass_at_k_estimates(n, np.zeros(4, dtype=int), ks=[1])[1]
    for est, k in ((top, 4), (bottom, 0)):
        ref = scipy_stats.binomtest(k, 4).proportion_ci(0.95, method="wilson")
        assert (est.value, est.n_tasks, est.se) == (k / 4, 4, 0.0)
        assert (est.low, est.high) == pytest.approx((ref.low, ref.high), abs=5e-16)
        assert est.method == "wilson" and "no spread" in est.note


def test_pass_at_k_estimates_pass_the_confidence_on() -> None:
    est = pass_at_k_estimates(np.array([5, 4, 5]), np.array([2, 1, 0]), ks=[1], confidence=0.8)[1]
    assert est.confidence == 0.8


# --- wilson_interval ----------------------------------------------------------------------------------


def test_wilson_interval_for_8_of_10_matches_a_hand_computation() -> None:
    z = 1.959963984540054  # scipy.stats.norm.ppf(0.975)
    p, n = 0.8, 10
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(centre - half)
    assert high == pytest.approx(centre + half)
    assert low == pytest.approx(0.4902, abs=1e-4)
    assert high == pytest.approx(0.9433, abs=1e-4)


def test_wilson_interval_at_the_extremes_stays_in_the_unit_interval() -> None:
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and 0.0 < high < 0.5
    low, high = wilson_interval(10, 10)
    assert 0.5 < low < 1.0 and high == pytest.approx(1.0)


def test_wilson_interval_with_no_trials_is_uninformative() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_wilson_interval_scalars_give_floats() -> None:
    low, high = wilson_interval(3, 7)
    assert isinstance(low, float) and isinstance(high, float)


def test_wilson_interval_is_vectorised() -> None:
    low, high = wilson_interval(np.array([8, 0, 0]), np.array([10, 10, 0]))
    assert low.shape == high.shape == (3,)
    assert (low[0], high[0]) == wilson_interval(8, 10)
    assert (low[2], high[2]) == (0.0, 1.0)


def test_wilson_interval_narrows_as_confidence_falls() -> None:
    wide, narrow = wilson_interval(8, 10, 0.99), wilson_interval(8, 10, 0.8)
    assert wide[0] < narrow[0] < narrow[1] < wide[1]


@pytest.mark.parametrize(("k", "n"), [(11, 10), (-1, 10), (0, -1)])
def test_wilson_interval_rejects_impossible_counts(k: int, n: int) -> None:
    with pytest.raises(ValueError):
        wilson_interval(k, n)


# --- percentiles --------------------------------------------------------------------------------------


def test_percentiles_interpolate_linearly_and_ignore_nan() -> None:
    values = np.array([1.0, 2.0, 3.0, 4.0, np.nan, 5.0])
    # linear interpolation over the 5 defined values: rank q/100 * 4
    assert percentiles(values, qs=(0, 50, 90, 100)) == {0: 1.0, 50: 3.0, 90: pytest.approx(4.6), 100: 5.0}


def test_percentiles_default_to_p50_p90_p99() -> None:
    result = percentiles(np.arange(101, dtype=float))
    assert result == {50: 50.0, 90: 90.0, 99: 99.0}


@pytest.mark.parametrize("values", [np.array([]), np.array([np.nan])])
def test_percentiles_of_nothing_are_nan(values: np.ndarray) -> None:
    result = percentiles(values)
    assert set(result) == {50, 90, 99}
    assert all(math.isnan(v) for v in result.values())
