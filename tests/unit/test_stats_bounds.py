"""Specification of ``workbench.stats.bounds``: intervals for bounded means that stay in range and name their
method, against scipy (Wilson: ``binomtest(...).proportion_ci``; t: ``t.interval``; power: ``nct``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import examples
from scipy import stats as sps

from workbench.stats import bounded_mean, mean_with_ci, tasks_to_resolve, unit_span
from workbench.stats.bounds import DIFFERENCE, FLOOR, T_FLOOR, WILSON, T, bound_interval, spread_floor

Z2 = sps.norm.ppf(0.975) ** 2


class TestWilson:
    """Pass/fail tasks: the Wilson interval of the share that passed."""

    @pytest.mark.parametrize(("k", "n"), [(0, 1), (1, 1), (0, 5), (1, 5), (5, 5), (3, 7), (40, 41), (0, 400)])
    def test_matches_scipy(self, k, n):
        est = bounded_mean([1.0] * k + [0.0] * (n - k))
        ref = sps.binomtest(k, n).proportion_ci(0.95, method="wilson")
        assert (est.low, est.high) == pytest.approx((ref.low, ref.high), abs=5e-16)
        assert est.method == WILSON and est.n_tasks == n

    def test_rescaled_to_the_span(self):
        est = bounded_mean([-1.0, -1.0, 1.0], span=DIFFERENCE)
        ref = sps.binomtest(1, 3).proportion_ci(0.95, method="wilson")
        assert (est.low, est.high) == pytest.approx((2 * ref.low - 1, 2 * ref.high - 1), abs=1e-15)

    def test_no_spread_is_said(self):
        assert "every task scored 1" in bounded_mean([1.0] * 9).note
        assert bounded_mean([1.0, 0.0]).note == ""


class TestT:
    """Other scores: the t interval, cut to the range, never narrower than the zero-spread floor."""

    def test_inside_the_range_with_spread_it_is_scipys_t_interval(self):
        y = np.random.default_rng(3).uniform(0.2, 0.8, 40)
        est = bounded_mean(y)
        assert (est.low, est.high) == pytest.approx(sps.t.interval(0.95, 39, loc=y.mean(), scale=sps.sem(y)),
                                                    rel=1e-12)
        assert est.method == T and est.note == "" and est.se == pytest.approx(sps.sem(y), rel=1e-12)

    def test_cut_to_the_range(self):
        y = np.array([0.0, 0.1, 0.0, 0.2, 0.9])
        est = bounded_mean(y)
        t_low, _ = sps.t.interval(0.95, 4, loc=y.mean(), scale=sps.sem(y))
        assert t_low < 0 and est.low == 0.0

    def test_no_spread_off_the_ends_is_the_floor(self):
        est = bounded_mean([0.5] * 7)
        w = Z2 / (7 + Z2)
        assert (est.low, est.high) == pytest.approx((0.5 - w * 0.5, 0.5 + w * 0.5), rel=1e-12)
        assert est.method == T_FLOOR and "every task scored 0.5" in est.note

    def test_one_task_is_the_floor(self):
        est = bounded_mean([0.25])
        w = Z2 / (1 + Z2)
        assert (est.low, est.high) == pytest.approx((0.25 * (1 - w), 0.25 + w * 0.75), rel=1e-12)
        assert est.method == FLOOR and math.isnan(est.se)

    def test_without_a_range_it_is_plain_t_and_one_task_has_none(self):
        y = [2.0, 5.0, 3.5]
        est = bounded_mean(y, span=None)
        assert (est.low, est.high) == pytest.approx(sps.t.interval(0.95, 2, loc=np.mean(y), scale=sps.sem(y)))
        one = bounded_mean([7.0], span=None)
        assert math.isnan(one.low) and math.isnan(one.high) and "one task" in one.note

    def test_nothing_defined_is_nan(self):
        est = bounded_mean([math.nan, math.nan])
        assert est.n_tasks == 0 and math.isnan(est.value) and math.isnan(est.low)


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30), st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_every_interval_stays_in_range_contains_its_mean_and_contains_the_floor(values, confidence):
    est = bounded_mean(values, confidence)
    assert 0.0 <= est.low <= est.value <= est.high <= 1.0
    floor = spread_floor(est.value, len(values), confidence, (0.0, 1.0))
    assert est.low <= floor[0] + 1e-12 and est.high >= floor[1] - 1e-12


def test_bound_interval_agrees_with_bounded_mean_from_a_t_interval():
    y = np.array([0.25, 0.5, 0.75, 1.0])
    t = mean_with_ci(y, bounded=False)
    b = bound_interval(y, t.low, t.high, 4, span=(0.0, 1.0))
    est = bounded_mean(y)
    assert (b.low, b.high, b.method) == (est.low, est.high, est.method)


def test_unit_span_reads_the_values():
    assert unit_span([0.0, 0.4, 1.0, math.nan]) == (0.0, 1.0)
    assert unit_span([0.0, 1.5]) is None


class TestTasksToResolve:
    """The tasks that settle a verdict: a direct power calculation on the distance to the boundary."""

    @pytest.mark.parametrize(("delta", "sd"), [(-0.0375, 0.1417), (-0.02, 0.3), (0.0, 0.2), (-0.08, 0.25)])
    def test_matches_the_noncentral_t_power(self, delta, sd):
        m = 0.05
        n = tasks_to_resolve(delta, m, sd)
        effect = delta + m if delta >= -m else -delta  # to clear −m, or (beyond tolerance) to clear 0

        def power(k: int) -> float:
            return float(sps.nct.sf(sps.t.ppf(0.975, k - 1), k - 1, effect * math.sqrt(k) / sd))

        ref = next(k for k in range(2, 100_000) if power(k) >= 0.8)
        assert n is not None and abs(n - ref) <= max(2, 0.01 * ref), (n, ref)

    def test_on_the_boundary_or_without_spread_nothing_settles_it(self):
        assert tasks_to_resolve(-0.05, 0.05, 0.2) is None
        assert tasks_to_resolve(-0.01, 0.05, 0.0) is None
