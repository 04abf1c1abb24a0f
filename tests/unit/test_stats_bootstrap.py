"""Specification of the seeded, vectorised task-level and cluster bootstrap of several means at once.

References: bootstrap distributions enumerated by hand for tiny samples, the binomial distribution (scipy) for a
resampled pass rate, and the plug-in standard error of a mean.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats as scipy_stats

from workbench.stats import bootstrap as bootstrap_module
from workbench.stats import bootstrap_distribution, bootstrap_means


def frequencies(draws: np.ndarray) -> dict[float, float]:
    counts = Counter(np.round(draws, 12).tolist())
    return {value: n / len(draws) for value, n in counts.items()}


def test_two_tasks_resample_to_the_hand_enumerated_distribution():
    # Tasks {0, 1}: a resample of two is (0,0) → 0, (0,1) or (1,0) → 0.5, (1,1) → 1: probabilities 1/4, 1/2, 1/4.
    dist = bootstrap_distribution([0.0, 1.0], n_resamples=40_000, seed=1)[:, 0]
    freq = frequencies(dist)
    assert freq[0.0] == pytest.approx(0.25, abs=0.01)
    assert freq[0.5] == pytest.approx(0.5, abs=0.01)
    assert freq[1.0] == pytest.approx(0.25, abs=0.01)
    result = bootstrap_means([0.0, 1.0], n_resamples=40_000, seed=1)
    assert (result.intervals[0].low, result.intervals[0].high) == (0.0, 1.0)


def test_three_distinct_tasks_match_the_enumeration_of_all_27_resamples():
    values = [0.0, 0.3, 1.0]
    exact = Counter(round(sum(c) / 3, 12) for c in itertools.product(values, repeat=3))
    freq = frequencies(bootstrap_distribution(values, n_resamples=54_000, seed=2)[:, 0])
    assert set(freq) == set(exact)
    for value, count in exact.items():
        assert freq[value] == pytest.approx(count / 27, abs=0.01)


def test_a_resampled_pass_rate_is_binomial():
    # 40 tasks, 12 passed: the resampled pass rate is Binomial(40, 0.3) / 40; its 2.5 % and 97.5 % quantiles
    # are the percentile interval (to within one step of 1/40).
    values = np.array([1.0] * 12 + [0.0] * 28)
    result = bootstrap_means(values, n_resamples=20_000, seed=3)
    low, high = scipy_stats.binom.ppf([0.025, 0.975], 40, 0.3) / 40
    assert result.intervals[0].low == pytest.approx(low, abs=1 / 40 + 1e-9)
    assert result.intervals[0].high == pytest.approx(high, abs=1 / 40 + 1e-9)
    assert result.intervals[0].se == pytest.approx(math.sqrt(0.3 * 0.7 / 40), rel=0.03)


def test_the_bootstrap_se_of_a_mean_is_the_plug_in_standard_error():
    y = np.random.default_rng(4).gamma(2.0, size=400)
    plug_in = y.std(ddof=0) / math.sqrt(len(y))
    assert bootstrap_means(y, n_resamples=10_000, seed=0).intervals[0].se == pytest.approx(plug_in, rel=0.03)


@pytest.mark.parametrize(
    ("kind", "values"),
    [
        ("multinomial over distinct rows", np.random.default_rng(10).integers(0, 2, (600, 1)).astype(float)),
        ("gathered values", np.random.default_rng(11).random((600, 2))),
        ("counted draws", np.random.default_rng(12).random((600, 6))),
    ],
)
def test_every_resampling_path_gives_the_plug_in_standard_error(kind, values):
    result = bootstrap_means(values, n_resamples=6000, seed=0)
    for j, interval in enumerate(result.intervals):
        plug_in = values[:, j].std(ddof=0) / math.sqrt(len(values))
        assert interval.se == pytest.approx(plug_in, rel=0.05), kind
        assert interval.low < values[:, j].mean() < interval.high


def test_it_is_reproducible_from_its_seed():
    y = np.random.default_rng(5).random((300, 3))
    a = bootstrap_means(y, n_resamples=2000, seed=11)
    assert a == bootstrap_means(y, n_resamples=2000, seed=11)
    assert a != bootstrap_means(y, n_resamples=2000, seed=12)
    assert (a.seed, a.n_resamples, a.n_units, a.clustered) == (11, 2000, 300, False)


def test_every_statistic_comes_from_the_same_resamples():
    p = np.random.default_rng(6).integers(0, 2, 500).astype(float)
    dist = bootstrap_distribution(np.column_stack([p, 1.0 - p, p]), n_resamples=3000, seed=0)
    np.testing.assert_allclose(dist[:, 1], 1.0 - dist[:, 0], atol=1e-12)
    np.testing.assert_array_equal(dist[:, 2], dist[:, 0])


def test_an_undefined_value_leaves_that_task_out_of_that_statistic_only():
    values = np.array([[1.0, np.nan], [0.0, 0.0], [1.0, 1.0], [0.0, np.nan]])
    result = bootstrap_means(values, n_resamples=4000, seed=0)
    assert result.intervals[0].value == 0.5 and result.intervals[0].n_units == 4
    assert result.intervals[1].value == 0.5 and result.intervals[1].n_units == 2
    # A resample holding only tasks 0 and 3 defines no second statistic: NaN there, not 0.
    dist = bootstrap_distribution(values, n_resamples=4000, seed=0)
    assert np.isnan(dist[:, 1]).any() and not np.isnan(dist[:, 0]).any()


def test_a_statistic_no_task_defines_is_nan():
    result = bootstrap_means(np.array([[1.0, np.nan], [0.0, np.nan]]), n_resamples=100)
    assert all(math.isnan(x) for x in (result.intervals[1].value, result.intervals[1].low, result.intervals[1].high))
    empty = bootstrap_means(np.zeros((0, 2)), n_resamples=100)
    assert empty.n_units == 0 and all(math.isnan(i.value) for i in empty.intervals)


def test_one_task_gives_a_point_interval():
    iv = bootstrap_means([0.7], n_resamples=50).intervals[0]
    assert (iv.value, iv.low, iv.high, iv.se) == pytest.approx((0.7, 0.7, 0.7, 0.0), abs=1e-12)


class TestClusterBootstrap:
    """Clusters are drawn whole; the statistic is the mean over the tasks drawn."""

    def test_unequal_clusters_resample_to_the_hand_enumerated_ratio(self):
        # Cluster A = two passing tasks, cluster B = one failing task. Two draws: AA → 4/4 = 1, AB → 2/3, BB → 0.
        freq = frequencies(bootstrap_distribution([1.0, 1.0, 0.0], ["A", "A", "B"], n_resamples=40_000, seed=0)[:, 0])
        assert freq[1.0] == pytest.approx(0.25, abs=0.01)
        assert freq[round(2 / 3, 12)] == pytest.approx(0.5, abs=0.01)
        assert freq[0.0] == pytest.approx(0.25, abs=0.01)

    def test_equal_clusters_of_identical_tasks_behave_like_one_task_each(self):
        means = np.random.default_rng(8).random(30)
        tasks = np.repeat(means, 4)
        by_cluster = bootstrap_means(tasks, np.repeat(np.arange(30), 4), n_resamples=8000, seed=1)
        one_each = bootstrap_means(means, n_resamples=8000, seed=1)
        assert by_cluster.n_units == 30 and by_cluster.clustered
        assert by_cluster.intervals[0].se == pytest.approx(one_each.intervals[0].se, rel=0.05)
        assert by_cluster.intervals[0].se > bootstrap_means(tasks, n_resamples=8000, seed=1).intervals[0].se * 1.5

    def test_labels_must_match_the_tasks(self):
        with pytest.raises(ValueError, match="2 labels for 3 tasks"):
            bootstrap_means([1.0, 0.0, 1.0], ["a", "b"])


class TestChunking:
    """Resamples are drawn chunk by chunk; no B × N array is built."""

    def test_chunks_of_multinomial_weights_give_the_same_draws(self, monkeypatch):
        values = np.random.default_rng(9).integers(0, 2, 400).astype(float)
        whole = bootstrap_distribution(values, n_resamples=1000, seed=3)
        monkeypatch.setattr(bootstrap_module, "_CHUNK_CELLS", 14)
        np.testing.assert_array_equal(bootstrap_distribution(values, n_resamples=1000, seed=3), whole)

    def test_small_chunks_of_index_draws_still_give_the_right_distribution(self, monkeypatch):
        monkeypatch.setattr(bootstrap_module, "_CHUNK_CELLS", 5)
        values = [0.0, 0.3, 1.0]
        freq = frequencies(bootstrap_distribution(values, n_resamples=27_000, seed=4)[:, 0])
        assert freq[round(1.3 / 3, 12)] == pytest.approx(6 / 27, abs=0.012)


def test_resamples_must_be_at_least_one():
    with pytest.raises(ValueError, match="at least 1"):
        bootstrap_means([1.0, 0.0], n_resamples=0)
