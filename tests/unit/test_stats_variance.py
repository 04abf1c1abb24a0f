"""Specification of the within-task / across-task variance split and what it implies for the standard error.

References: worked examples by hand, scipy's one-way ANOVA (its F statistic is the ratio of the mean squares
the split is built from), and a seeded simulation of the random-effects model.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from workbench.stats import variance_split, variance_split_binary


def split_of(groups: list[list[float]]):
    return variance_split([len(g) for g in groups], [sum(g) for g in groups], [sum(x * x for x in g) for g in groups])


def test_a_binary_worked_example_by_hand():
    # Task A passes 2 of 4, B 4 of 4, C 0 of 4.
    # Within: A's squared deviations sum to 4 · 0.25 = 1, B's and C's to 0; df = 3 · 3 = 9 → σ²_within = 1/9.
    # Task means 0.5, 1, 0: sample variance 0.25. mean(1/n) = 1/4, so repeat noise in it is (1/9)/4 = 1/36
    # and σ²_across = 0.25 − 1/36 = 2/9. SE now √(0.25/3); twice the repeats √((0.25 − 1/72)/3);
    # twice the tasks √(0.25/6); infinitely many repeats √((2/9)/3).
    v = variance_split_binary([4, 4, 4], [2, 4, 0])
    assert v.within == pytest.approx(1 / 9)
    assert v.across == pytest.approx(2 / 9)
    assert v.repeat_share == pytest.approx((1 / 36) / 0.25)
    assert v.se == pytest.approx(math.sqrt(0.25 / 3))
    assert v.se_double_repeats == pytest.approx(math.sqrt((0.25 - 1 / 72) / 3))
    assert v.se_double_tasks == pytest.approx(math.sqrt(0.25 / 6))
    assert v.se_infinite_repeats == pytest.approx(math.sqrt((2 / 9) / 3))
    assert (v.n_tasks, v.mean_repeats) == (3, pytest.approx(4.0))


def test_a_continuous_unbalanced_example_by_hand():
    # A = [0.2, 0.4] (mean 0.3, SS 0.02), B = [0.9, 0.7, 0.8] (mean 0.8, SS 0.02): σ²_within = 0.04 / (1 + 2) = 0.04/3.
    # Means 0.3, 0.8: sample variance 0.125. mean(1/n) = (1/2 + 1/3) / 2 = 5/12.
    v = split_of([[0.2, 0.4], [0.9, 0.7, 0.8]])
    noise = 0.04 / 3 * 5 / 12
    assert v.within == pytest.approx(0.04 / 3)
    assert v.across == pytest.approx(0.125 - noise)
    assert v.repeat_share == pytest.approx(noise / 0.125)
    assert v.mean_repeats == pytest.approx(12 / 5)


def test_balanced_data_agree_with_scipys_one_way_anova():
    rng = np.random.default_rng(0)
    groups = [list(rng.normal(mu, 1.0, 5)) for mu in rng.normal(0, 2, 12)]
    v = split_of(groups)
    f = scipy_stats.f_oneway(*groups).statistic
    ms_between = 5 * np.var([np.mean(g) for g in groups], ddof=1)
    assert ms_between / v.within == pytest.approx(f, rel=1e-10)  # MSB / MSW
    assert v.across == pytest.approx((ms_between - v.within) / 5, rel=1e-10)


def test_binary_counts_give_the_same_split_as_the_outcomes():
    outcomes = [[1, 0, 1], [0, 0, 0, 1], [1, 1], [1, 0, 0, 0, 1]]
    assert variance_split_binary([len(o) for o in outcomes], [sum(o) for o in outcomes]) == split_of(
        [[float(x) for x in o] for o in outcomes])


def test_a_simulated_random_effects_model_is_recovered():
    rng = np.random.default_rng(42)
    n_tasks, repeats, across, within = 4000, 6, 0.5, 2.0
    y = rng.normal(0, math.sqrt(across), (n_tasks, 1)) + rng.normal(0, math.sqrt(within), (n_tasks, repeats))
    v = variance_split(np.full(n_tasks, repeats), y.sum(axis=1), (y * y).sum(axis=1))
    assert v.within == pytest.approx(within, rel=0.03)
    assert v.across == pytest.approx(across, rel=0.1)


def test_more_repeats_help_less_than_more_tasks():
    v = variance_split_binary([4] * 6, [0, 1, 2, 3, 4, 2])
    assert v.se_infinite_repeats <= v.se_double_repeats <= v.se
    assert v.se_double_tasks == pytest.approx(v.se / math.sqrt(2))


def test_one_repeat_per_task_cannot_be_split():
    v = variance_split_binary([1, 1, 1, 1], [1, 0, 1, 1])
    assert math.isnan(v.within) and math.isnan(v.across) and math.isnan(v.se_double_repeats)
    assert v.se == pytest.approx(math.sqrt(0.25 / 4))


def test_one_task_has_a_within_part_only():
    v = variance_split_binary([4], [1])
    assert v.within == pytest.approx(0.25)  # 4 · (3/16) / 3
    assert math.isnan(v.across) and math.isnan(v.se) and v.n_tasks == 1


def test_all_pass_has_no_variance_and_no_share_to_report():
    v = variance_split_binary([3, 3], [3, 3])
    assert (v.within, v.across, v.se) == (0.0, 0.0, 0.0)
    assert math.isnan(v.repeat_share)


def test_tasks_without_attempts_are_ignored_and_no_tasks_is_nan():
    assert variance_split_binary([4, 0, 4, 4], [2, 0, 4, 0]) == variance_split_binary([4, 4, 4], [2, 4, 0])
    empty = variance_split_binary([], [])
    assert empty.n_tasks == 0 and math.isnan(empty.within) and math.isnan(empty.se)


def test_shapes_must_agree():
    with pytest.raises(ValueError, match="differ in shape"):
        variance_split([1, 2], [1], [1])
