"""Paired comparisons of two runs: tests, intervals, effect size and power, on per-task scores.

Every function takes the two sides as aligned arrays, one entry per task present in both runs
(the caller pairs them by task identity), and works on the differences ``candidate − baseline``.
Tasks, not attempts, are the units: repeats are reduced to one score per task first.

Symmetry is a contract: swapping ``baseline`` and ``candidate`` negates every difference and
leaves every p-value unchanged, bit for bit. The randomised procedures draw their random numbers
independently of the data's signs so that this holds exactly for a given seed.

scipy is imported inside the functions that need it: ``scipy.stats`` costs most of a second to
import, and a process that never compares runs should not pay for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from workbench.stats.bounds import spread_floor as spread_floor  # re-exported: its home was here
from workbench.stats.intervals import Estimate, mean_with_ci
from workbench.stats.quantiles import normal_quantile as _normal_quantile
from workbench.stats.quantiles import t_quantile as _t_quantile
from workbench.types import Interval

ALPHA = 0.05
POWER = 0.80
N_RESAMPLES = 10_000
# Sign-flip sums are compared with this relative tolerance (of the sum of |d|), so that
# two arrangements equal in exact arithmetic count as ties whatever the summation order.
_TIE_TOLERANCE = 1e-10
# Above this many distinct difference values the resampling works on tasks, not values.
_MAX_DISTINCT_VALUES = 512
_CHUNK_ELEMENTS = 4_000_000


@dataclass(frozen=True, slots=True)
class SignificanceTest:
    """One test's outcome. ``p_value`` is NaN when the test does not apply; ``note`` says why.

    ``method`` says how the p-value was obtained (``exact``, ``normal approximation``,
    ``10000 random sign flips``, ...), so that a reader can judge it.
    """

    name: str
    statistic: float
    p_value: float
    method: str
    note: str = ""

    @property
    def applicable(self) -> bool:
        return not math.isnan(self.p_value)


def differences(baseline: npt.ArrayLike, candidate: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """``candidate − baseline`` per task, checked: equal lengths, finite values.

    Raises:
        ValueError: when the lengths differ or a value is NaN or infinite.
    """
    b = np.asarray(baseline, dtype=np.float64).ravel()
    c = np.asarray(candidate, dtype=np.float64).ravel()
    if b.shape != c.shape:
        raise ValueError(f"paired arrays differ in length: {b.size} baseline, {c.size} candidate")
    if not (np.isfinite(b).all() and np.isfinite(c).all()):
        raise ValueError("paired scores must be finite")
    return c - b


def _not_applicable(name: str, note: str) -> SignificanceTest:
    return SignificanceTest(name=name, statistic=math.nan, p_value=math.nan, method="not applicable", note=note)


# ---- interval, effect size, power ----------------------------------------------------------------
def mean_difference(
    baseline: npt.ArrayLike, candidate: npt.ArrayLike, confidence: float = 0.95
) -> Estimate:
    """Mean of the per-task differences with its Student-t interval (the paired t interval)."""
    return mean_with_ci(differences(baseline, candidate), confidence, bounded=False)


def cohens_dz(baseline: npt.ArrayLike, candidate: npt.ArrayLike) -> float:
    """Cohen's d_z: the mean difference over the standard deviation of the differences.

    NaN with fewer than two tasks; 0 when no task changed; NaN when every task changed by the
    same non-zero amount (no spread to scale by).
    """
    d = differences(baseline, candidate)
    if d.size < 2:
        return math.nan
    sd = float(d.std(ddof=1))
    mean = float(d.mean())
    if sd == 0.0:
        return 0.0 if mean == 0.0 else math.nan
    return mean / sd


def minimum_detectable_effect(sd: float, n: int, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true mean difference a two-sided paired t test at ``alpha`` detects with ``power``.

    ``(t[1−α/2, n−1] + t[power, n−1]) · sd / √n``: the usual approximation to the noncentral-t
    solution (within a few percent of it from ten tasks on). NaN with fewer than two tasks, an
    unknown ``sd``, or ``sd = 0``: when every task changed by the same amount the spread that power
    rests on is not estimated (0 would claim any effect is detectable), so the MDE is undefined.
    """
    if n < 2 or math.isnan(sd) or sd <= 0.0:
        return math.nan
    df = n - 1
    return (_t_quantile(df, 1.0 - alpha / 2.0) + _t_quantile(df, power)) * sd / math.sqrt(n)


def tasks_needed(effect: float, sd: float, *, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """Paired tasks needed for a two-sided test at ``alpha`` to detect a true difference of
    ``effect`` with ``power``, when the differences have standard deviation ``sd``.

    The smallest ``n`` with ``minimum_detectable_effect(sd, n) ≤ |effect|``, found from the
    normal-quantile estimate upward. ``None`` when ``sd`` is unknown or zero (no spread to plan
    with) or ``effect`` is zero.
    """
    if math.isnan(sd) or sd <= 0.0 or effect == 0.0 or math.isnan(effect):
        return None
    target = abs(effect)
    z = _normal_quantile(1.0 - alpha / 2.0) + _normal_quantile(power)
    n = max(2, math.ceil((z * sd / target) ** 2))
    while minimum_detectable_effect(sd, n, alpha=alpha, power=power) > target:
        # t quantiles exceed normal ones, so n only grows; step by the gap to converge fast.
        n = max(n + 1, math.ceil((minimum_detectable_effect(sd, n, alpha=alpha, power=power) / target) ** 2 * n))
    while n > 2 and minimum_detectable_effect(sd, n - 1, alpha=alpha, power=power) <= target:
        n -= 1
    return n


def tasks_to_resolve(delta: float, tolerance: float, sd: float, *, alpha: float = ALPHA,
                     power: float = POWER) -> int | None:
    """Paired tasks needed to settle whether a change ``delta`` (good direction positive) is a drop
    beyond ``tolerance``, if the true change is ``delta`` and the differences have standard deviation ``sd``.

    Settling means the two-sided interval at ``alpha`` leaves the boundary it straddles, with ``power``.
    Within tolerance (``delta ≥ −tolerance``) the interval must clear ``−tolerance``: the effect to detect
    is the distance ``delta + tolerance`` to it, not ``tolerance`` itself (a change of −0.0375 against a
    tolerance of 0.05 is 0.0125 from the boundary, 16 times as many tasks as 0.05 would need). Beyond it,
    the interval must clear 0: the effect is ``|delta|``. ``None`` when ``sd`` is unknown or zero, or the
    change sits on the boundary.
    """
    effect = delta + tolerance if delta >= -tolerance else delta
    return tasks_needed(effect, sd, alpha=alpha, power=power)


# ---- tests ---------------------------------------------------------------------------------------
def paired_t_test(baseline: npt.ArrayLike, candidate: npt.ArrayLike) -> SignificanceTest:
    """Student's paired t test on the per-task differences (as ``scipy.stats.ttest_rel``).

    With no spread in the differences: p = 1 when none changed, p = 0 when all changed by the
    same amount (what the t statistic's limit gives); not applicable below two tasks.
    """
    name = "paired_t"
    d = differences(baseline, candidate)
    n = d.size
    if n < 2:
        return _not_applicable(name, "needs at least two paired tasks")
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        if mean == 0.0:
            return SignificanceTest(name, 0.0, 1.0, "exact", "no task changed")
        return SignificanceTest(name, math.copysign(math.inf, mean), 0.0, "exact",
                                "every task changed by the same amount")
    t = mean / (sd / math.sqrt(n))
    from scipy import special

    p = float(2.0 * special.stdtr(n - 1, -abs(t)))
    return SignificanceTest(name, t, min(p, 1.0), f"Student t, {n - 1} degrees of freedom")


def wilcoxon_signed_rank(baseline: npt.ArrayLike, candidate: npt.ArrayLike) -> SignificanceTest:
    """Wilcoxon's signed-rank test on the per-task differences (``scipy.stats.wilcoxon``).

    Zero differences are dropped (Wilcoxon's convention); the statistic is the smaller of the
    positive and negative rank sums. p = 1 when no task changed.
    """
    name = "wilcoxon"
    d = differences(baseline, candidate)
    if d.size == 0:
        return _not_applicable(name, "no paired tasks")
    nonzero = int(np.count_nonzero(d))
    if nonzero == 0:
        return SignificanceTest(name, 0.0, 1.0, "exact", "no task changed")
    from scipy import stats

    result = stats.wilcoxon(d, zero_method="wilcox", method="auto")
    # scipy's "auto": the exact distribution without ties or zeros up to 50 tasks, else every sign
    # pattern up to 13 tasks, else the normal approximation with a tie correction.
    ties = nonzero != np.unique(np.abs(d[d != 0])).size
    if d.size <= 50 and not ties and nonzero == d.size:
        method = "exact"
    else:
        method = "exact: all sign patterns" if d.size <= 13 else "normal approximation, tie-corrected"
    return SignificanceTest(name, float(result.statistic), float(result.pvalue), method,
                            f"{d.size - nonzero} tasks without change dropped" if nonzero < d.size else "")


def mann_whitney_u(baseline: npt.ArrayLike, candidate: npt.ArrayLike) -> SignificanceTest:
    """The Mann-Whitney U test on the two sides' per-task scores (``scipy.stats.mannwhitneyu``).

    It ignores the pairing, so it is weaker than the paired tests; it is here because NeMo
    Evaluator's documentation promises it. The statistic is U of the candidate sample.
    """
    name = "mann_whitney_u"
    b = np.asarray(baseline, dtype=np.float64).ravel()
    c = np.asarray(candidate, dtype=np.float64).ravel()
    differences(b, c)  # the same checks as the paired tests
    if b.size == 0:
        return _not_applicable(name, "no paired tasks")
    if np.all(b == b[0]) and np.all(c == b[0]):
        return SignificanceTest(name, b.size * c.size / 2.0, 1.0, "exact", "every score is the same")
    from scipy import stats

    result = stats.mannwhitneyu(c, b, alternative="two-sided", method="auto")
    ties = np.unique(np.concatenate([b, c])).size < b.size + c.size
    method = "exact" if b.size <= 8 and not ties else "normal approximation, tie-corrected, continuity-corrected"
    return SignificanceTest(name, float(result.statistic), float(result.pvalue), method,
                            "unpaired: ignores which task each score belongs to")


def mcnemar_exact(baseline_passed: npt.ArrayLike, candidate_passed: npt.ArrayLike) -> SignificanceTest:
    """McNemar's exact test: a two-sided binomial test (p = ½) on the discordant pairs.

    For one binary outcome per task on each side. The statistic is the number of discordant tasks
    that got worse (passed in the baseline, failed in the candidate). p = 1 with no discordant task.
    ``2 · P(X ≤ min(worse, better))`` is the two-sided binomial p-value of ``scipy.stats.binomtest``
    for p = ½ (the distribution is symmetric), written so that swapping sides cannot change it.
    """
    name = "mcnemar_exact"
    b = np.asarray(baseline_passed, dtype=bool).ravel()
    c = np.asarray(candidate_passed, dtype=bool).ravel()
    if b.shape != c.shape:
        raise ValueError(f"paired arrays differ in length: {b.size} baseline, {c.size} candidate")
    if b.size == 0:
        return _not_applicable(name, "no paired tasks")
    worse = int(np.count_nonzero(b & ~c))
    better = int(np.count_nonzero(~b & c))
    discordant = worse + better
    if discordant == 0:
        return SignificanceTest(name, 0.0, 1.0, "exact binomial", "no discordant task")
    from scipy import special

    p = min(1.0, 2.0 * float(special.bdtr(min(worse, better), discordant, 0.5)))
    return SignificanceTest(name, float(worse), p, f"exact binomial on {discordant} discordant tasks")


def sign_flip_test(
    baseline: npt.ArrayLike, candidate: npt.ArrayLike, *, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> SignificanceTest:
    """Permutation test of a zero mean difference: flip the sign of each task's difference at random.

    Under the null hypothesis that baseline and candidate are exchangeable within each task, each
    difference is as likely negative as positive. The statistic is the mean difference; the
    two-sided p-value is the share of sign patterns whose |sum| reaches the observed one,
    counting the observed pattern (Phipson & Smyth 2010, so p is never 0). With ``2**n ≤
    n_resamples`` every pattern is enumerated and p is exact.

    The random patterns depend only on the seed and the multiplicities of the distinct values,
    so swapping sides (negating every difference) negates every resampled sum: p is unchanged.
    """
    name = "sign_flip_permutation"
    d = differences(baseline, candidate)
    n = d.size
    if n == 0:
        return _not_applicable(name, "no paired tasks")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    mean = float(d.mean())
    scale = float(np.abs(d).sum())
    if scale == 0.0:
        return SignificanceTest(name, 0.0, 1.0, "exact", "no task changed")
    tolerance = _TIE_TOLERANCE * scale
    if n <= 30 and 2**n <= n_resamples:
        sums = _all_sign_sums(d)
        observed = float(d.sum())
        extreme = int(np.count_nonzero(np.abs(sums) >= abs(observed) - tolerance))
        return SignificanceTest(name, mean, extreme / sums.size, f"exact: all {sums.size} sign patterns")
    rng = np.random.default_rng(seed)
    values, counts = _distinct_in_order(d)
    if values.size <= _MAX_DISTINCT_VALUES:
        observed = float(values @ counts.astype(np.float64))
        sums = _value_sign_sums(values, counts, n_resamples, rng)
    else:
        observed = float(d.sum())
        sums = _task_sign_sums(d, n_resamples, rng)
    extreme = int(np.count_nonzero(np.abs(sums) >= abs(observed) - tolerance))
    p = (extreme + 1) / (n_resamples + 1)
    return SignificanceTest(name, mean, p, f"{n_resamples} random sign flips (seed {seed})")


def paired_bootstrap_interval(
    baseline: npt.ArrayLike,
    candidate: npt.ArrayLike,
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> Interval:
    """Percentile bootstrap interval of the mean difference, resampling tasks with replacement.

    A check on the t interval that assumes nothing about the shape of the differences. Drawing
    n tasks with replacement is drawing multinomial counts of the distinct difference values, so
    when there are few distinct values (per-task means of a few repeats) that is what is drawn:
    the same distribution, far faster. ``(NaN, NaN)`` with no tasks.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    d = differences(baseline, candidate)
    n = d.size
    if n == 0:
        return Interval(math.nan, math.nan)
    rng = np.random.default_rng(seed)
    values, counts = _distinct_in_order(d)
    if values.size <= _MAX_DISTINCT_VALUES:
        draws = rng.multinomial(n, counts / n, size=n_resamples)
        means = draws.astype(np.float64) @ values / n
    else:
        means = np.empty(n_resamples)
        rows = max(1, _CHUNK_ELEMENTS // n)
        for start in range(0, n_resamples, rows):
            stop = min(n_resamples, start + rows)
            means[start:stop] = d[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    mean = float(d.mean())
    return Interval(min(float(low), mean), max(float(high), mean))


# ---- helpers -------------------------------------------------------------------------------------
def _distinct_in_order(d: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Distinct values of ``d`` and their counts, in order of first appearance.

    First-appearance order does not depend on the values' signs, so ``-d`` gets the same order
    (and hence the same random draws) as ``d``.
    """
    values, first, counts = np.unique(d, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    return values[order], counts[order].astype(np.int64)


def _all_sign_sums(d: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    n = d.size
    patterns = ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1).astype(np.float64)
    return (1.0 - 2.0 * patterns) @ d


def _value_sign_sums(
    values: npt.NDArray[np.float64], counts: npt.NDArray[np.int64], n_resamples: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """Random sign-flip sums drawn per distinct value: of the ``c`` tasks with value ``v``, a
    Binomial(c, ½) number keep their sign, the rest flip, adding ``v · (2·kept − c)``."""
    kept = rng.binomial(counts[None, :], 0.5, size=(n_resamples, counts.size))
    return (2 * kept - counts[None, :]).astype(np.float64) @ values


def _task_sign_sums(d: npt.NDArray[np.float64], n_resamples: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """Random sign-flip sums drawn per task, in chunks of bounded memory."""
    n = d.size
    total = float(d.sum())
    sums = np.empty(n_resamples)
    rows = max(1, _CHUNK_ELEMENTS // n)
    for start in range(0, n_resamples, rows):
        stop = min(n_resamples, start + rows)
        bits = np.unpackbits(rng.integers(0, 256, size=(stop - start, (n + 7) // 8), dtype=np.uint8),
                             axis=1, count=n)
        sums[start:stop] = total - 2.0 * (bits.astype(np.float64) @ d)
    return sums


