"""Specification of the paired statistics: each test, interval and power formula against a worked
example done by hand here and against scipy, plus property tests of the symmetry contract."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import examples
from scipy import stats as sps

from workbench.stats.paired import (
    cohens_dz,
    differences,
    mann_whitney_u,
    mcnemar_exact,
    mean_difference,
    minimum_detectable_effect,
    paired_bootstrap_interval,
    paired_t_test,
    sign_flip_test,
    spread_floor,
    tasks_needed,
    wilcoxon_signed_rank,
)

# A worked example: five tasks, per-task scores of four repeats.
BASE = [0.5, 0.25, 1.0, 0.75, 0.0]
CAND = [0.75, 0.25, 1.0, 1.0, 0.25]  # differences 0.25, 0, 0, 0.25, 0.25


def _random_pair(seed: int, n: int, repeats: int = 8) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    base = rng.binomial(repeats, rng.uniform(0, 1, n)) / repeats
    cand = np.clip(base + rng.integers(-2, 3, n) / repeats, 0, 1)
    return base, cand


class TestPairedT:
    """The paired t test and its interval."""

    def test_worked_example(self):
        # mean 0.15; sd = sqrt((3·0.1² + 2·0.15²)/4) = sqrt(0.01875); t = 0.15·√5 / sd = √6
        result = paired_t_test(BASE, CAND)
        assert result.statistic == pytest.approx(math.sqrt(6), rel=1e-12)
        assert result.p_value == pytest.approx(2 * sps.t.sf(math.sqrt(6), 4), rel=1e-12)
        assert result.p_value == pytest.approx(0.0705, abs=5e-4)  # the t table at 4 degrees of freedom

    @pytest.mark.filterwarnings("ignore:Precision loss")  # scipy's own warning on two near-equal tasks
    @pytest.mark.parametrize(("seed", "n"), [(1, 2), (2, 7), (3, 40), (4, 2000)])
    def test_matches_scipy_ttest_rel(self, seed, n):
        base, cand = _random_pair(seed, n)
        if np.all(cand == base):
            cand[0] = 1 - base[0]
        ref = sps.ttest_rel(cand, base)
        ours = paired_t_test(base, cand)
        assert ours.statistic == pytest.approx(ref.statistic, rel=1e-10)
        assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)

    @pytest.mark.parametrize(("seed", "n"), [(5, 3), (6, 30), (7, 5000)])
    def test_interval_matches_scipy(self, seed, n):
        base, cand = _random_pair(seed, n)
        ref = sps.ttest_rel(cand, base).confidence_interval(0.95)
        est = mean_difference(base, cand)
        assert (est.low, est.high) == pytest.approx((ref.low, ref.high), rel=1e-9)
        assert est.value == pytest.approx(float(np.mean(cand - base)), abs=1e-15)

    def test_interval_is_not_clipped_to_rates(self):
        est = mean_difference([1, 1, 1, 0], [0, 0, 0, 1])
        assert est.low < -1.0  # a difference of rates lives in [-1, 1]; the t interval may overshoot

    def test_no_change_is_p_one_and_a_constant_change_is_p_zero(self):
        assert paired_t_test([1, 0, 1], [1, 0, 1]).p_value == 1.0
        constant = paired_t_test([1, 1, 1], [0, 0, 0])
        assert constant.p_value == 0.0 and constant.statistic == -math.inf

    def test_one_task_is_not_applicable(self):
        result = paired_t_test([1.0], [0.0])
        assert not result.applicable and "two" in result.note


class TestMcNemar:
    """McNemar's exact test on single binary outcomes."""

    def test_worked_example(self):
        # 8 worse, 2 better of 10 discordant: p = 2·(C(10,0)+C(10,1)+C(10,2))/2¹⁰ = 2·56/1024
        base = [1] * 8 + [0] * 2 + [1] * 5 + [0] * 3
        cand = [0] * 8 + [1] * 2 + [1] * 5 + [0] * 3
        result = mcnemar_exact(base, cand)
        assert result.p_value == pytest.approx(112 / 1024, rel=1e-12)
        assert result.statistic == 8

    @pytest.mark.parametrize(("worse", "better"), [(0, 1), (1, 0), (3, 3), (7, 1), (40, 22), (120, 80), (1, 30)])
    def test_matches_scipy_binomtest(self, worse, better):
        base = [True] * worse + [False] * better + [True, False]
        cand = [False] * worse + [True] * better + [True, False]
        ref = sps.binomtest(worse, worse + better, 0.5).pvalue
        assert mcnemar_exact(base, cand).p_value == pytest.approx(ref, rel=1e-9)

    def test_no_discordant_task_is_p_one(self):
        assert mcnemar_exact([1, 0, 1], [1, 0, 1]).p_value == 1.0


class TestWilcoxon:
    """Wilcoxon's signed-rank test."""

    def test_worked_example(self):
        # |d| ranks 1..5; W− = 3 (the −3); subsets of {1..5} summing to ≤ 3: {}, 1, 2, 3, 1+2 → 5/32
        result = wilcoxon_signed_rank([0, 0, 3, 0, 0], [1, 2, 0, 4, 5])
        assert result.statistic == 3
        assert result.p_value == pytest.approx(10 / 32, rel=1e-12)
        assert result.method == "exact"

    @pytest.mark.parametrize(("seed", "n"), [(1, 6), (2, 12), (3, 45), (4, 300), (5, 10_000)])
    def test_matches_scipy_with_zeros_and_ties(self, seed, n):
        base, cand = _random_pair(seed, n)
        if np.all(cand == base):
            cand[0] = 1 - base[0]
        ref = sps.wilcoxon(cand - base)
        ours = wilcoxon_signed_rank(base, cand)
        assert ours.statistic == ref.statistic
        assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9)

    def test_no_change_is_p_one(self):
        result = wilcoxon_signed_rank([0.5, 1.0], [0.5, 1.0])
        assert result.p_value == 1.0 and result.note == "no task changed"


class TestMannWhitney:
    """The unpaired Mann-Whitney U test that NeMo Evaluator's documentation promises."""

    def test_worked_example(self):
        # every candidate score beats every baseline score: U = 9 of 9; P = 2 / C(6, 3)
        result = mann_whitney_u([1, 2, 3], [4, 5, 6])
        assert result.statistic == 9
        assert result.p_value == pytest.approx(2 / 20, rel=1e-12)

    @pytest.mark.parametrize(("seed", "n"), [(1, 5), (2, 30), (3, 3000)])
    def test_matches_scipy(self, seed, n):
        base, cand = _random_pair(seed, n)
        ref = sps.mannwhitneyu(cand, base, alternative="two-sided")
        ours = mann_whitney_u(base, cand)
        assert ours.statistic == ref.statistic
        assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9)

    def test_identical_constant_scores_are_p_one(self):
        assert mann_whitney_u([1, 1, 1], [1, 1, 1]).p_value == 1.0


class TestSignFlip:
    """The seeded sign-flip permutation test."""

    def test_worked_example_exact(self):
        # d = (1, 2, 3): of the 8 sign patterns only (+,+,+) and (−,−,−) reach |sum| = 6
        result = sign_flip_test([0, 0, 0], [1, 2, 3])
        assert result.p_value == pytest.approx(2 / 8)
        assert result.method.startswith("exact")

    @pytest.mark.parametrize("seed", [1, 2, 3])
    def test_exact_enumeration_matches_scipy(self, seed):
        base, cand = _random_pair(seed, 11)
        d = cand - base
        ref = sps.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=10_000).pvalue
        assert sign_flip_test(base, cand).p_value == pytest.approx(ref, rel=1e-9)

    @pytest.mark.parametrize(("seed", "n", "repeats"), [(1, 200, 8), (2, 1000, 3), (3, 800, 1000)])
    def test_random_flips_agree_with_scipy_within_monte_carlo_error(self, seed, n, repeats):
        base, cand = _random_pair(seed, n, repeats)  # 1000 repeats: many distinct values, per-task path
        cand = np.clip(cand - 0.004, 0, 1)
        d = cand - base
        ref = sps.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=10_000,
                                   random_state=seed).pvalue
        ours = sign_flip_test(base, cand, seed=seed).p_value
        assert ours == pytest.approx(ref, abs=0.02)  # two Monte Carlo estimates: SE ≤ 0.005 each

    def test_same_seed_same_p_and_p_is_never_zero(self):
        base, cand = _random_pair(9, 500)
        cand = np.minimum(cand + 0.25, 1)
        first = sign_flip_test(base, cand, seed=4)
        assert first.p_value == sign_flip_test(base, cand, seed=4).p_value
        assert first.p_value == pytest.approx(1 / 10_001)

    def test_no_change_is_p_one(self):
        assert sign_flip_test([1, 0], [1, 0]).p_value == 1.0


class TestBootstrap:
    """The paired percentile bootstrap."""

    @pytest.mark.parametrize(("seed", "n", "repeats"), [(1, 400, 4), (2, 600, 1000)])
    def test_agrees_with_scipy_percentile_bootstrap(self, seed, n, repeats):
        base, cand = _random_pair(seed, n, repeats)
        ref = sps.bootstrap((cand - base,), np.mean, method="percentile", n_resamples=20_000,
                            random_state=seed).confidence_interval
        low, high = paired_bootstrap_interval(base, cand, n_resamples=20_000, seed=seed)
        width = ref.high - ref.low
        assert low == pytest.approx(ref.low, abs=0.03 * width)
        assert high == pytest.approx(ref.high, abs=0.03 * width)

    def test_close_to_the_t_interval_for_many_tasks(self):
        base, cand = _random_pair(3, 5000)
        est = mean_difference(base, cand)
        low, high = paired_bootstrap_interval(base, cand)
        assert low == pytest.approx(est.low, abs=0.05 * (est.high - est.low))
        assert high == pytest.approx(est.high, abs=0.05 * (est.high - est.low))

    def test_no_tasks_is_nan(self):
        assert all(math.isnan(x) for x in paired_bootstrap_interval([], []))


class TestEffectAndPower:
    """Cohen's d_z, the minimum detectable effect and the tasks needed."""

    def test_cohens_dz_worked_example(self):
        assert cohens_dz(BASE, CAND) == pytest.approx(0.15 / math.sqrt(0.01875), rel=1e-12)  # √1.2

    def test_cohens_dz_edge_cases(self):
        assert math.isnan(cohens_dz([1], [0]))
        assert cohens_dz([1, 0], [1, 0]) == 0.0
        assert math.isnan(cohens_dz([1, 1], [0, 0]))

    def test_mde_worked_example(self):
        # (t[0.975, 99] + t[0.80, 99]) · 0.5 / √100 = (1.984217 + 0.845267) · 0.05
        assert minimum_detectable_effect(0.5, 100) == pytest.approx(0.1414742, abs=1e-6)

    @pytest.mark.parametrize(("sd", "n"), [(0.3, 20), (0.5, 100), (0.2, 2000)])
    def test_mde_has_about_80_percent_power(self, sd, n):
        mde = minimum_detectable_effect(sd, n)
        nc = mde / (sd / math.sqrt(n))
        crit = sps.t.ppf(0.975, n - 1)
        power = sps.nct.sf(crit, n - 1, nc) + sps.nct.cdf(-crit, n - 1, nc)
        assert power == pytest.approx(0.80, abs=0.01)

    @pytest.mark.parametrize(("effect", "sd"), [(0.05, 0.3), (0.02, 0.4), (0.2, 0.5), (0.5, 0.1)])
    def test_tasks_needed_is_the_smallest_n_that_detects_the_effect(self, effect, sd):
        n = tasks_needed(effect, sd)
        assert n is not None and n >= 2
        assert minimum_detectable_effect(sd, n) <= effect
        assert n == 2 or minimum_detectable_effect(sd, n - 1) > effect

    def test_tasks_needed_worked_example(self):
        # normal approximation (1.959964 + 0.841621)² · (0.3 / 0.05)² = 282.6; the t quantiles add a few
        assert tasks_needed(0.05, 0.3) == 285

    def test_tasks_needed_without_spread_is_unknown(self):
        assert tasks_needed(0.05, 0.0) is None and tasks_needed(0.05, math.nan) is None

    def test_mde_needs_two_tasks(self):
        assert math.isnan(minimum_detectable_effect(0.5, 1))


class TestSpreadFloor:
    """The floor under the t interval when few tasks moved."""

    def test_worked_example(self):
        # w = 1.959964² / (5 + 1.959964²) = 3.841459 / 8.841459 = 0.434482
        low, high = spread_floor(0.0, 5)
        assert (low, high) == pytest.approx((-0.434482, 0.434482), abs=1e-6)

    def test_shrinks_like_one_over_n(self):
        assert spread_floor(0.0, 14_000)[1] == pytest.approx(3.841459 / 14_003.841459, rel=1e-6)

    def test_respects_the_range_of_a_difference(self):
        low, high = spread_floor(-1.0, 5)
        assert low == -1.0 and high == pytest.approx(-1.0 + 2 * 0.434482, abs=1e-6)


def test_differences_reject_unequal_lengths_and_nan():
    with pytest.raises(ValueError, match="length"):
        differences([1, 0], [1])
    with pytest.raises(ValueError, match="finite"):
        differences([math.nan], [1])


# ---- properties ----------------------------------------------------------------------------------
def _scores(repeats: int, n: int) -> st.SearchStrategy[list[float]]:
    return st.lists(st.integers(0, repeats).map(lambda k: k / repeats), min_size=n, max_size=n)


@st.composite
def paired_scores(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    n = draw(st.integers(0, 70))
    repeats = draw(st.sampled_from([1, 2, 3, 5, 8]))
    if draw(st.booleans()):
        floats = st.floats(0, 1, allow_nan=False, width=32)
        base = draw(st.lists(floats, min_size=n, max_size=n))
        cand = draw(st.lists(floats, min_size=n, max_size=n))
    else:
        base, cand = draw(_scores(repeats, n)), draw(_scores(repeats, n))
    return np.array(base, dtype=np.float64), np.array(cand, dtype=np.float64)


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@settings(max_examples=examples(100), deadline=None)
@given(paired_scores(), st.integers(0, 2**31))
def test_swapping_sides_negates_the_delta_and_keeps_every_p_value(pair, seed):
    base, cand = pair
    forward, backward = mean_difference(base, cand), mean_difference(cand, base)
    assert _same(forward.value, -backward.value)
    assert _same(forward.low, -backward.high) and _same(forward.high, -backward.low)
    tests = (paired_t_test, wilcoxon_signed_rank, mann_whitney_u)
    for test in tests:
        assert _same(test(base, cand).p_value, test(cand, base).p_value), test.__name__
    flip = sign_flip_test(base, cand, n_resamples=2000, seed=seed)
    flop = sign_flip_test(cand, base, n_resamples=2000, seed=seed)
    assert _same(flip.p_value, flop.p_value) and _same(flip.statistic, -flop.statistic)
    passed_b, passed_c = base >= 1.0, cand >= 1.0
    assert _same(mcnemar_exact(passed_b, passed_c).p_value, mcnemar_exact(passed_c, passed_b).p_value)
    assert _same(cohens_dz(base, cand), -cohens_dz(cand, base))
    low, high = paired_bootstrap_interval(base, cand, n_resamples=500, seed=seed)
    low2, high2 = paired_bootstrap_interval(cand, base, n_resamples=500, seed=seed)
    if base.size:
        assert low == pytest.approx(-high2, abs=1e-12) and high == pytest.approx(-low2, abs=1e-12)


@settings(max_examples=examples(150), deadline=None)
@given(paired_scores(), st.integers(0, 2**31))
def test_intervals_contain_their_point_estimate(pair, seed):
    base, cand = pair
    if base.size == 0:
        return
    est = mean_difference(base, cand)
    assert est.low <= est.value <= est.high
    low, high = paired_bootstrap_interval(base, cand, n_resamples=500, seed=seed)
    assert low <= est.value <= high
    floor_low, floor_high = spread_floor(est.value, base.size)
    assert floor_low <= est.value <= floor_high


@settings(max_examples=examples(100), deadline=None)
@given(paired_scores())
def test_p_values_are_probabilities(pair):
    base, cand = pair
    for result in (paired_t_test(base, cand), wilcoxon_signed_rank(base, cand), mann_whitney_u(base, cand),
                   sign_flip_test(base, cand, n_resamples=500), mcnemar_exact(base >= 1, cand >= 1)):
        assert math.isnan(result.p_value) or 0.0 <= result.p_value <= 1.0, result
