"""Point estimates with confidence intervals, and percentiles.

Repeats are reduced per task first (a task's pass rate, its pass@k) and the
interval is taken across tasks, because tasks, not attempts, are the
independent units: ten attempts at one easy task are not ten observations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np
import numpy.typing as npt

from workbench.stats.quantiles import normal_quantile as _normal_quantile
from workbench.stats.quantiles import t_quantile as _t_quantile
from workbench.types import Interval


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean across tasks with its two-sided confidence interval ``[low, high]``.

    ``se`` is the standard error of the mean; ``n_tasks`` counts the tasks that
    had a defined value. With no tasks every number is NaN. ``method`` names the
    interval (``t``; ``workbench.stats.bounds`` has the others) and ``note`` says
    why it is degenerate, widened, or over fewer tasks than the run has.
    """

    value: float
    low: float
    high: float
    n_tasks: int
    se: float
    confidence: float = 0.95
    method: str = "t"
    note: str = ""


def mean_with_ci(
    per_task_values: npt.ArrayLike, confidence: float = 0.95, *, bounded: bool = True
) -> Estimate:
    """Mean of per-task values with a Student-t interval: ``mean ± t(1+conf)/2, N−1 × SE``.

    ``SE`` is the sample standard deviation (ddof=1) over ``sqrt(N)``. NaN values
    (tasks where the metric is undefined) are dropped. With one task there is no
    spread to estimate, so ``se`` is 0 and the interval is the point itself:
    read that as "unknown", not "certain". ``bounded`` clips the interval to
    ``[0, 1]``, right for rates and probabilities.
    """
    _check_confidence(confidence)
    values = np.asarray(per_task_values, dtype=np.float64).ravel()
    values = values[~np.isnan(values)]
    count = int(values.size)
    if count == 0:
        nan = math.nan
        return Estimate(value=nan, low=nan, high=nan, n_tasks=0, se=nan, confidence=confidence)
    mean = float(values.mean())
    if count == 1:
        return Estimate(value=mean, low=mean, high=mean, n_tasks=1, se=0.0, confidence=confidence)
    se = float(values.std(ddof=1)) / math.sqrt(count)
    half_width = _t_quantile(count - 1, (1.0 + confidence) / 2.0) * se
    low, high = mean - half_width, mean + half_width
    if bounded:
        low, high = max(low, 0.0), min(high, 1.0)
    return Estimate(value=mean, low=low, high=high, n_tasks=count, se=se, confidence=confidence)


@overload
def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> Interval: ...


@overload
def wilson_interval(
    successes: npt.ArrayLike, n: npt.ArrayLike, confidence: float = 0.95
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...


def wilson_interval(
    successes: npt.ArrayLike, n: npt.ArrayLike, confidence: float = 0.95
) -> Interval | tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Wilson score interval for a binomial proportion (one task's pass rate, say).

    Unlike the normal approximation it stays inside ``[0, 1]`` and behaves at
    0/n and n/n. ``n == 0`` gives ``(0, 1)``: no evidence either way. Scalars in
    give an ``Interval`` of floats out; arrays broadcast and give arrays.

    Raises:
        ValueError: when a count is negative or ``successes > n``.
    """
    _check_confidence(confidence)
    scalar = np.ndim(successes) == 0 and np.ndim(n) == 0
    k = np.asarray(successes, dtype=np.float64)
    trials = np.asarray(n, dtype=np.float64)
    if np.any(trials < 0) or np.any(k < 0) or np.any(k > trials):
        raise ValueError("need 0 <= successes <= n")
    z = _normal_quantile((1.0 + confidence) / 2.0)
    empty = trials == 0
    safe_n = np.where(empty, 1.0, trials)
    p = k / safe_n
    denominator = 1.0 + z * z / safe_n
    centre = (p + z * z / (2.0 * safe_n)) / denominator
    half = z / denominator * np.sqrt(p * (1.0 - p) / safe_n + z * z / (4.0 * safe_n * safe_n))
    low = np.where(empty, 0.0, np.clip(centre - half, 0.0, 1.0))
    high = np.where(empty, 1.0, np.clip(centre + half, 0.0, 1.0))
    if scalar:
        return Interval(float(low), float(high))
    return low, high


def percentiles(values: npt.ArrayLike, qs: Sequence[int] = (50, 90, 99)) -> dict[int, float]:
    """The ``qs`` percentiles of ``values`` (linear interpolation), ignoring NaN; all NaN if none are left."""
    data = np.asarray(values, dtype=np.float64).ravel()
    data = data[~np.isnan(data)]
    if data.size == 0:
        return {q: math.nan for q in qs}
    return {q: float(v) for q, v in zip(qs, np.percentile(data, list(qs)), strict=True)}


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence}")
