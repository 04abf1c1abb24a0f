"""Intervals for a mean of bounded per-task scores that stay inside the scores' range and say what they are.

The Student t interval (``mean_with_ci``) fails in three ways a run meets often: it reaches outside the
range (five tasks of a 0–1 judge metric, one passed: ``[−0.36, 0.76]``), it shrinks to a point when every
task scored the same (all pass: ``[1, 1]``, as if certain), and it is undefined for one task. The policy,
one function for ``nel eval stats``, the end-of-run summary, ``nel compare``, ``nel gate`` and the views:

- scores that take only the two ends of their range (pass/fail per task): the **Wilson** score interval
  of the share of tasks at the top, rescaled to the range. It stays inside the range and is not a point
  at 0/n or n/n (Wilson's 5/5 is ``[0.566, 1]``).
- other scores: the **t** interval cut to the range (the mean cannot leave it, so the cut loses no
  coverage), and never narrower than the **zero-spread floor** (``spread_floor``): when few tasks moved,
  the sample spread is itself badly estimated, and the floor allows for the tasks that could lie at
  either end without showing in the sample. With one task the floor is the interval.
- no known range: the plain t interval; undefined (NaN) with one task.

``method`` names what was used, ``note`` says why an interval is degenerate or wider than the t one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from workbench.stats.intervals import Estimate, _check_confidence, _normal_quantile, mean_with_ci, wilson_interval
from workbench.types import Interval

Span = tuple[float, float]
UNIT: Span = (0.0, 1.0)
DIFFERENCE: Span = (-1.0, 1.0)  # a difference of two scores in [0, 1]

WILSON = "wilson"
T = "t"
T_FLOOR = "t, widened to the zero-spread floor"
FLOOR = "zero-spread floor"
NO_INTERVAL = "none"


@dataclass(frozen=True, slots=True)
class Bounds:
    """An interval with how it was obtained (``method``) and, when it is degenerate or was widened, why."""

    low: float
    high: float
    method: str
    note: str = ""


def unit_span(values: npt.ArrayLike) -> Span | None:
    """``(0, 1)`` when every defined value lies in it (rates, probabilities, most rewards), else ``None``."""
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[~np.isnan(v)]
    return UNIT if bool(np.all((v >= 0.0) & (v <= 1.0))) else None


def spread_floor(
    mean: float, n: int, confidence: float = 0.95, span: Span = DIFFERENCE
) -> Interval:
    """The narrowest interval a mean over ``n`` tasks can honestly claim.

    The t interval rests on the sample spread. When few tasks moved, that spread is itself badly
    estimated: if no task changed at all, the t interval is a single point, which would let three
    identical tasks "prove" two models equal. This floor allows for the tasks that could have moved
    without any showing in the sample: up to the upper Wilson bound of a 0/n share, ``w = z² / (n + z²)``
    (about 3.84 / n: the rule of three), each moving to the end of its range ``span``. Returns
    ``(mean − w·(mean − lo), mean + w·(hi − mean))``; with no tasks, ``span`` itself. At a mean on an end
    of ``span`` it is the Wilson interval of n/n (or 0/n).
    """
    lo, hi = span
    if n <= 0 or math.isnan(mean):
        return Interval(lo, hi)
    z = _normal_quantile((1.0 + confidence) / 2.0)
    w = z * z / (n + z * z)
    return Interval(mean - w * max(mean - lo, 0.0), mean + w * max(hi - mean, 0.0))


def bound_interval(
    values: npt.ArrayLike,
    t_low: float,
    t_high: float,
    n_units: int,
    *,
    span: Span | None,
    confidence: float = 0.95,
    wilson: bool = True,
) -> Bounds:
    """The reported interval of the mean of ``values`` (finite, one per task) from its t interval
    ``[t_low, t_high]`` over ``n_units`` independent units, by the module's policy.

    ``n_units`` is the number of tasks, or of clusters when tasks share context (fewer than the values):
    clustered, there is no Wilson interval (it assumes independent tasks) and no interval at all from one
    cluster (nothing says how clusters differ). The floor counts tasks: it hedges against tasks that could
    lie at an end of the range unseen, not against clusters. ``wilson`` allows Wilson for two-valued scores.
    """
    _check_confidence(confidence)
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        return Bounds(math.nan, math.nan, NO_INTERVAL, "no task defines it")
    mean = float(v.mean())
    clustered = n_units < v.size
    flat = bool(v.max() == v.min())
    no_spread = f"no spread: every task scored {_g(v[0])}" if flat and v.size > 1 else ""
    if n_units < 2 and (span is None or clustered):
        what = "one cluster" if clustered else "one task"
        return Bounds(math.nan, math.nan, NO_INTERVAL, f"{what}: no spread to estimate an interval from")
    if span is None:
        return Bounds(t_low, t_high, T, f"{no_spread}; the t interval is a point" if no_spread else "")
    lo, hi = span
    if wilson and not clustered and bool(np.all((v == lo) | (v == hi))):
        k = int(np.count_nonzero(v == hi))
        w_low, w_high = wilson_interval(k, int(v.size), confidence)
        note = f"{no_spread}; the interval is Wilson's for {k}/{v.size} tasks" if no_spread else ""
        if v.size == 1:
            note = "one task: the interval is Wilson's for one pass/fail outcome"
        return Bounds(lo + (hi - lo) * w_low, lo + (hi - lo) * w_high, WILSON, note)
    f_low, f_high = spread_floor(mean, int(v.size), confidence, span)
    if n_units < 2:
        return Bounds(f_low, f_high, FLOOR, "one task: no spread to estimate; the interval is the zero-spread floor")
    c_low, c_high = max(t_low, lo), min(t_high, hi)
    low, high = min(c_low, f_low), max(c_high, f_high)
    if (low, high) == (c_low, c_high):
        return Bounds(low, high, T)
    why = no_spread or "few tasks moved"
    return Bounds(low, high, T_FLOOR, f"{why}; the t interval was narrower than the zero-spread floor")


def bounded_mean(values: npt.ArrayLike, confidence: float = 0.95, *, span: Span | None = UNIT) -> Estimate:
    """Mean of per-task ``values`` (NaN: undefined, dropped) with the interval of ``bound_interval``.

    ``se`` is the across-task standard error (NaN with one task); ``n_tasks`` counts the defined values.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[~np.isnan(v)]
    t = mean_with_ci(v, confidence, bounded=False)
    bounds = bound_interval(v, t.low, t.high, int(v.size), span=span, confidence=confidence)
    se = t.se if v.size > 1 else math.nan
    return Estimate(value=t.value, low=bounds.low, high=bounds.high, n_tasks=int(v.size), se=se,
                    confidence=confidence, method=bounds.method, note=bounds.note)


def _g(x: float) -> str:
    return f"{x:.4g}"
