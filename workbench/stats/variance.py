"""Where the uncertainty of a run's score comes from: repeat noise within tasks, or differences across tasks.

One-way random-effects model: attempt ``j`` at task ``i`` scores ``y_ij = μ + a_i + e_ij`` with
``Var(a) = σ²_across`` (some tasks are harder than others) and ``Var(e) = σ²_within`` (the same task
scores differently from one attempt to the next). The run's score is the mean of the per-task means,
whose variance is ``(σ²_across + σ²_within · mean(1/n_i)) / N``. More repeats shrink only the second
term; more tasks shrink both. Method-of-moments estimates (unbalanced one-way ANOVA):

- ``σ²_within`` = pooled within-task variance ``Σ_i Σ_j (y_ij − ȳ_i)² / Σ_i (n_i − 1)``;
- ``σ²_across`` = ``max(0, s²(ȳ_i) − σ²_within · mean(1/n_i))``, ``s²`` the sample variance of task means.

For binary rewards a task's sum of squares is just its pass count, so counts suffice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class VarianceSplit:
    """The variance of per-attempt scores split into its within-task and across-task parts, and what each
    implies for the standard error of the run's mean.

    ``within``/``across`` are ``σ²_within``/``σ²_across``; ``repeat_share`` is the fraction of the
    estimator's variance due to repeat noise (``σ²_within · mean(1/n_i) / s²(ȳ_i)``, at most 1). ``se`` is
    the across-task standard error now (``s/√N``); ``se_double_repeats``/``se_double_tasks`` what it would
    become with twice the repeats per task or twice the tasks; ``se_infinite_repeats`` the floor that
    repeats alone can reach. Undefined parts are NaN (``within`` needs a task with two attempts, the rest
    two tasks).
    """

    within: float
    across: float
    repeat_share: float
    se: float
    se_double_repeats: float
    se_double_tasks: float
    se_infinite_repeats: float
    n_tasks: int
    mean_repeats: float  # harmonic mean of attempts per task, the n that enters the variance


def variance_split(n: npt.ArrayLike, sums: npt.ArrayLike, sums_sq: npt.ArrayLike) -> VarianceSplit:
    """The split from per-task attempt counts ``n``, reward sums and sums of squared rewards.

    Tasks with no attempt are ignored.

    Raises:
        ValueError: when the arrays differ in shape or a count is negative.
    """
    counts = np.asarray(n, dtype=np.float64).ravel()
    total = np.asarray(sums, dtype=np.float64).ravel()
    total_sq = np.asarray(sums_sq, dtype=np.float64).ravel()
    if not counts.shape == total.shape == total_sq.shape:
        raise ValueError(f"n, sums and sums_sq differ in shape: {counts.shape}, {total.shape}, {total_sq.shape}")
    if np.any(counts < 0):
        raise ValueError("attempt counts must be non-negative")
    keep = counts > 0
    counts, total, total_sq = counts[keep], total[keep], total_sq[keep]
    n_tasks = int(counts.size)
    nan = math.nan
    if n_tasks == 0:
        return VarianceSplit(nan, nan, nan, nan, nan, nan, nan, 0, nan)
    means = total / counts
    inv_n = float(np.mean(1.0 / counts))
    df_within = float(np.sum(counts - 1.0))
    # Σ_j (y_ij − ȳ_i)² = Σ y² − (Σ y)² / n, clipped at 0 against rounding
    within_ss = float(np.sum(np.maximum(total_sq - total * means, 0.0)))
    within = within_ss / df_within if df_within > 0 else nan
    if n_tasks < 2:
        return VarianceSplit(within, nan, nan, nan, nan, nan, nan, 1, 1.0 / inv_n)
    between = float(np.var(means, ddof=1))
    se = math.sqrt(between / n_tasks)
    se_double_tasks = math.sqrt(between / (2 * n_tasks))
    if math.isnan(within):  # one attempt per task: the spread cannot be split
        return VarianceSplit(nan, nan, nan, se, nan, se_double_tasks, nan, n_tasks, 1.0 / inv_n)
    # The observed variance of task means estimates across + noise; more repeats shrink only the noise.
    noise = within * inv_n
    return VarianceSplit(
        within=within,
        across=max(0.0, between - noise),
        repeat_share=min(1.0, noise / between) if between > 0 else nan,
        se=se,
        se_double_repeats=math.sqrt(max(0.0, between - noise / 2.0) / n_tasks),
        se_double_tasks=se_double_tasks,
        se_infinite_repeats=math.sqrt(max(0.0, between - noise) / n_tasks),
        n_tasks=n_tasks,
        mean_repeats=1.0 / inv_n,
    )


def variance_split_binary(n: npt.ArrayLike, c: npt.ArrayLike) -> VarianceSplit:
    """The split for pass/fail outcomes from per-task attempts ``n`` and passes ``c`` (``y² = y``)."""
    return variance_split(n, c, c)
