"""Specification of the cluster-robust standard error of a mean of per-task values.

References: a worked example by hand, scipy's t distribution and standard error, and the textbook sandwich
formula written out with matrices (an independent route to the same number).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from workbench.stats import cluster_codes, clustered_mean, mean_with_ci


def sandwich_se(y: np.ndarray, labels: list[str]) -> float:
    """(X'X)^-1 [G/(G-1) Σ_g X_g' e_g e_g' X_g] (X'X)^-1 for the intercept-only regression y = μ + e."""
    x = np.ones((len(y), 1))
    bread = np.linalg.inv(x.T @ x)
    e = y - y.mean()
    groups = sorted(set(labels))
    meat = np.zeros((1, 1))
    for g in groups:
        idx = [i for i, label in enumerate(labels) if label == g]
        score = x[idx].T @ e[idx]
        meat += np.outer(score, score)
    g_count = len(groups)
    return float(np.sqrt((bread @ (g_count / (g_count - 1) * meat) @ bread)[0, 0]))


def test_a_worked_example_by_hand():
    # Six tasks in three passages. Mean 0.5, residuals ±0.5; passage sums of residuals: a 0, b +1, c −1.
    # V = G/(G−1) · Σ S_g² / N² = 3/2 · 2 / 36 = 1/12; t(0.975, df=2) = 4.302652729749464.
    values = [1, 0, 1, 1, 0, 0]
    passages = ["a", "a", "b", "b", "c", "c"]
    est = clustered_mean(values, passages)
    se = math.sqrt(1 / 12)
    assert est.value == 0.5
    assert est.se == pytest.approx(se, rel=1e-12)
    assert (est.n_tasks, est.n_clusters, est.df) == (6, 3, 2)
    assert est.low == pytest.approx(0.5 - 4.302652729749464 * se, rel=1e-12)
    assert est.high == pytest.approx(0.5 + 4.302652729749464 * se, rel=1e-12)


def test_it_matches_the_matrix_sandwich_formula():
    rng = np.random.default_rng(7)
    y = rng.random(40)
    labels = [f"g{i}" for i in rng.integers(0, 9, 40)]
    assert clustered_mean(y, labels).se == pytest.approx(sandwich_se(y, labels), rel=1e-10)


def test_the_interval_is_students_t_with_g_minus_1_degrees_of_freedom():
    rng = np.random.default_rng(3)
    y = rng.random(30)
    labels = np.repeat(np.arange(6), 5)
    est = clustered_mean(y, labels, confidence=0.9)
    low, high = scipy_stats.t.interval(0.9, df=5, loc=y.mean(), scale=est.se)
    assert (est.low, est.high) == pytest.approx((low, high), rel=1e-10)


def test_without_clusters_it_is_the_plain_across_task_interval_to_the_last_bit():
    y = np.array([0.2, 0.9, 0.4, 0.4, 1.0, 0.0, 0.75])
    est, plain = clustered_mean(y), mean_with_ci(y, bounded=False)
    assert (est.value, est.low, est.high, est.se) == (plain.value, plain.low, plain.high, plain.se)
    assert est.se == pytest.approx(scipy_stats.sem(y), rel=1e-12)
    assert est.n_clusters == 7 and est.df == 6


def test_every_task_its_own_cluster_is_the_same_as_no_clusters():
    y = np.random.default_rng(1).random(25)
    assert clustered_mean(y, np.arange(25)).se == pytest.approx(clustered_mean(y).se, rel=1e-12)


def test_tasks_that_move_together_widen_the_interval():
    # Identical outcomes within each passage: 4 independent units, not 20.
    y = np.repeat([1.0, 0.0, 1.0, 0.0], 5)
    clustered = clustered_mean(y, np.repeat(["a", "b", "c", "d"], 5))
    assert clustered.se > clustered_mean(y).se
    assert clustered.high - clustered.low > 2 * (clustered_mean(y).high - clustered_mean(y).low)


def test_undefined_values_are_dropped_with_their_labels():
    est = clustered_mean([1.0, np.nan, 0.0, 1.0], ["a", "z", "b", "b"])
    assert (est.n_tasks, est.n_clusters) == (3, 2)
    assert est.value == pytest.approx(2 / 3)


def test_bounded_clips_to_the_unit_interval():
    est = clustered_mean([1, 0, 1, 1, 0, 0], ["a", "a", "b", "b", "c", "c"], bounded=True)
    assert (est.low, est.high) == (0.0, 1.0)


def test_no_tasks_gives_nan_and_one_cluster_gives_the_point():
    empty = clustered_mean([])
    assert math.isnan(empty.value) and math.isnan(empty.se) and empty.n_tasks == 0
    one = clustered_mean([0.2, 0.4], ["a", "a"])
    assert (one.value, one.low, one.high, one.se, one.df) == (pytest.approx(0.3), one.value, one.value, 0.0, 0)


def test_labels_must_match_the_values():
    with pytest.raises(ValueError, match="2 labels for 3 values"):
        clustered_mean([1, 2, 3], ["a", "b"])


def test_cluster_codes_number_clusters_in_order_of_first_appearance():
    assert cluster_codes(["b", "a", "b", "c", "a"]).tolist() == [0, 1, 0, 2, 1]
    assert cluster_codes([]).tolist() == []
