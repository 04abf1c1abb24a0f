"""Cluster-robust standard error of a mean of per-task values.

Tasks that share context (questions on one passage, variants of one template) are not independent:
their errors move together, and an interval that treats them as independent is too narrow. The robust
("sandwich") variance of the mean sums residuals within each cluster first:

    V = G / (G − 1) · Σ_g (Σ_{i∈g} (y_i − ȳ))² / N²

with ``G`` clusters and ``N`` tasks, and the interval uses Student's t with ``G − 1`` degrees of freedom
(the small-sample correction of Cameron & Miller). With every task its own cluster ``V`` is exactly
``s² / N`` (``s`` the sample standard deviation), the plain across-task standard error of
``workbench.stats.mean_with_ci``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from workbench.stats.intervals import _check_confidence, _t_quantile


@dataclass(frozen=True, slots=True)
class ClusteredEstimate:
    """A mean across tasks with a (cluster-)robust interval ``[low, high]``.

    ``n_clusters`` equals ``n_tasks`` when no clusters were given; ``df = n_clusters − 1``. With fewer than
    two clusters there is no spread to estimate: ``se`` is 0 and the interval is the point (read it as
    "unknown"), as ``mean_with_ci`` does for one task. With no tasks every number is NaN.
    """

    value: float
    low: float
    high: float
    se: float
    n_tasks: int
    n_clusters: int
    df: int
    confidence: float = 0.95


def cluster_codes(labels: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Integer codes ``0..G−1`` for cluster labels (equal labels, equal codes), in order of first appearance."""
    values = np.asarray(labels)
    if values.size == 0:
        return np.zeros(0, dtype=np.int64)
    _, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first, kind="stable"), kind="stable")
    return order[inverse.ravel()].astype(np.int64)


def clustered_mean(
    values: npt.ArrayLike,
    clusters: npt.ArrayLike | None = None,
    confidence: float = 0.95,
    *,
    bounded: bool = False,
) -> ClusteredEstimate:
    """Mean of per-task ``values`` with a cluster-robust t-interval.

    ``clusters`` labels each task (any comparable values, one per task); ``None`` makes every task its own
    cluster. NaN values (tasks where the statistic is undefined) are dropped with their labels.
    ``bounded`` clips the interval to ``[0, 1]`` (rates, probabilities).

    Raises:
        ValueError: when ``clusters`` has a different length from ``values``.
    """
    _check_confidence(confidence)
    y = np.asarray(values, dtype=np.float64).ravel()
    keep = ~np.isnan(y)
    if clusters is None:
        codes = np.arange(int(keep.sum()), dtype=np.int64)
    else:
        labels = np.asarray(clusters).ravel()
        if labels.shape != y.shape:
            raise ValueError(f"clusters has {labels.size} labels for {y.size} values")
        codes = cluster_codes(labels[keep])
    y = y[keep]
    n = int(y.size)
    if n == 0:
        nan = math.nan
        return ClusteredEstimate(nan, nan, nan, nan, 0, 0, 0, confidence)
    mean = float(y.mean())
    g = int(codes.max()) + 1
    if g < 2:
        return ClusteredEstimate(mean, mean, mean, 0.0, n, g, 0, confidence)
    if clusters is None:  # computed as mean_with_ci does, so the two agree to the last bit
        se = float(y.std(ddof=1)) / math.sqrt(n)
    else:
        residual_sums = np.bincount(codes, weights=y - mean, minlength=g)
        se = math.sqrt(g / (g - 1) * float(np.dot(residual_sums, residual_sums)) / (n * n))
    half = _t_quantile(g - 1, (1.0 + confidence) / 2.0) * se
    low, high = mean - half, mean + half
    if bounded:
        low, high = max(low, 0.0), min(high, 1.0)
    return ClusteredEstimate(mean, low, high, se, n, g, g - 1, confidence)
