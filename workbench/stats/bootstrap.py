"""Seeded, vectorised task-level (or cluster) bootstrap of several means at once.

Each column of a per-task value matrix is one statistic (pass@1, pass@2, ..., mean reward): the mean over the
tasks where it is defined (NaN elsewhere, e.g. pass@k of a task with fewer than k attempts). A resample draws
tasks, or whole clusters of tasks, with replacement; every statistic is computed from the same draws, so
their intervals are mutually consistent.

No B × N array is materialised at once: resamples are drawn chunk by chunk. Units (tasks or clusters) with
identical value rows are merged first (a binary run with 8 repeats has at most 9 distinct task rows, whatever
the number of tasks), and how often each distinct row is drawn is multinomial: a resample is a row of a weight
matrix, and every statistic of a chunk of resamples is one matrix product. This is the same distribution as
drawing indices, only cheaper. When most rows are distinct (continuous rewards) indices are drawn after all,
and the values they pick are summed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from workbench.stats.clustered import cluster_codes
from workbench.stats.intervals import _check_confidence

_CHUNK_CELLS = 1 << 21  # weight-matrix or index cells per chunk (16 MB of float64 or int64)
_GATHER_COLUMNS = 4  # up to this many varying columns, summing gathered values beats counting draws


@dataclass(frozen=True, slots=True)
class BootstrapInterval:
    """One statistic: its point estimate, percentile interval and bootstrap standard error.

    ``n_units`` counts the tasks (or clusters) that define it. Without units every number is NaN.
    """

    value: float
    low: float
    high: float
    se: float
    n_units: int


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    """Percentile intervals of every column, from ``n_resamples`` resamples of ``n_units`` units."""

    intervals: tuple[BootstrapInterval, ...]
    n_resamples: int
    n_units: int
    clustered: bool
    seed: int
    confidence: float = 0.95


def bootstrap_distribution(
    values: npt.ArrayLike,
    clusters: npt.ArrayLike | None = None,
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> npt.NDArray[np.float64]:
    """The bootstrap distribution, ``(n_resamples, m)``, of the column means of ``values`` (``(N,)`` or
    ``(N, m)``, NaN = undefined). A statistic no drawn unit defines is NaN in that resample.

    Raises:
        ValueError: when ``n_resamples < 1`` or ``clusters`` does not have one label per task.
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    sums, counts = _unit_sums(values, clusters)
    return _distribution(sums, counts, n_resamples, seed)


def _distribution(
    sums: npt.NDArray[np.float64], counts: npt.NDArray[np.float64], n_resamples: int, seed: int
) -> npt.NDArray[np.float64]:
    m = sums.shape[1]
    n_units = sums.shape[0]
    if n_units == 0:
        return np.full((n_resamples, m), np.nan)
    units = np.hstack([sums, counts])
    rows, multiplicity = np.unique(units, axis=0, return_counts=True)
    rng = np.random.default_rng(seed)
    # Three ways to the same distribution, by cost: a multinomial over the distinct rows costs about one
    # binomial per row and resample; drawing unit indices costs one integer per unit and resample, then a
    # gather per column that varies, or (many columns) a count per unit and one matrix product.
    if rows.shape[0] * 8 < n_units:
        totals = _multinomial_totals(rows, multiplicity, n_resamples, rng)
    else:
        varying = [j for j in range(units.shape[1]) if np.ptp(units[:, j]) > 0]
        if len(varying) <= _GATHER_COLUMNS:
            totals = _gathered_totals(units, varying, n_resamples, rng)
        else:
            totals = _counted_totals(units, n_resamples, rng)
    num, den = totals[:, :m], totals[:, m:]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _multinomial_totals(
    rows: npt.NDArray[np.float64], multiplicity: npt.NDArray[np.int64], n_resamples: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """Column totals of each resample, drawing how often each distinct row is drawn."""
    n_units = int(multiplicity.sum())
    matrix = np.ascontiguousarray(rows)
    out = np.empty((n_resamples, rows.shape[1]))
    chunk = max(1, _CHUNK_CELLS // rows.shape[0])
    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        weights = rng.multinomial(n_units, multiplicity / n_units, size=b).astype(np.float64)
        out[start:start + b] = weights @ matrix
    return out


def _gathered_totals(
    units: npt.NDArray[np.float64], varying: list[int], n_resamples: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """Column totals of each resample, summing the drawn units' values of each column that varies."""
    n_units = units.shape[0]
    out = np.empty((n_resamples, units.shape[1]))
    out[:] = units[0] * n_units  # a constant column totals n times its value
    columns = [np.ascontiguousarray(units[:, j]) for j in varying]
    chunk = max(1, _CHUNK_CELLS // n_units)
    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        drawn = rng.integers(0, n_units, size=(b, n_units))
        for j, column in zip(varying, columns, strict=True):
            out[start:start + b, j] = column[drawn].sum(axis=1)
    return out


def _counted_totals(
    units: npt.NDArray[np.float64], n_resamples: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """Column totals of each resample from how often each unit is drawn (one matrix product per chunk)."""
    n_units = units.shape[0]
    matrix = np.ascontiguousarray(units)
    out = np.empty((n_resamples, units.shape[1]))
    chunk = max(1, _CHUNK_CELLS // n_units)
    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        drawn = rng.integers(0, n_units, size=(b, n_units))
        drawn += (np.arange(b, dtype=np.int64) * n_units)[:, None]
        weights = np.bincount(drawn.ravel(), minlength=b * n_units).reshape(b, n_units).astype(np.float64)
        out[start:start + b] = weights @ matrix
    return out


def bootstrap_means(
    values: npt.ArrayLike,
    clusters: npt.ArrayLike | None = None,
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Percentile bootstrap intervals of the column means of ``values`` (see ``bootstrap_distribution``).

    Resampling is over tasks, or over whole clusters when ``clusters`` labels each task: tasks that share
    context are drawn together, as they were sampled together.
    """
    _check_confidence(confidence)
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    sums, counts = _unit_sums(values, clusters)
    dist = _distribution(sums, counts, n_resamples, seed)
    alpha = (1.0 - confidence) / 2.0
    intervals = []
    for j in range(sums.shape[1]):
        defined = int(np.sum(counts[:, j] > 0))
        column = dist[:, j]
        column = column[~np.isnan(column)]
        if defined == 0 or column.size == 0:
            nan = math.nan
            intervals.append(BootstrapInterval(nan, nan, nan, nan, defined))
            continue
        low, high = np.quantile(column, [alpha, 1.0 - alpha])
        se = float(column.std(ddof=1)) if column.size > 1 else 0.0
        value = float(sums[:, j].sum() / counts[:, j].sum())
        intervals.append(BootstrapInterval(value, float(low), float(high), se, defined))
    return BootstrapResult(tuple(intervals), n_resamples, int(sums.shape[0]), clusters is not None, seed, confidence)


def _unit_sums(
    values: npt.ArrayLike, clusters: npt.ArrayLike | None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per unit (task, or cluster) and column: the sum of defined values and how many there are. Units that
    define no column are dropped: they can change no statistic."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1:
        v = v[:, None]
    if v.ndim != 2:
        raise ValueError(f"values must be (N,) or (N, m), got shape {v.shape}")
    defined = ~np.isnan(v)
    filled = np.where(defined, v, 0.0)
    if clusters is None:
        sums, counts = filled, defined.astype(np.float64)
    else:
        labels = np.asarray(clusters).ravel()
        if labels.size != v.shape[0]:
            raise ValueError(f"clusters has {labels.size} labels for {v.shape[0]} tasks")
        codes = cluster_codes(labels)
        g = int(codes.max()) + 1 if codes.size else 0
        sums = np.stack([np.bincount(codes, weights=filled[:, j], minlength=g) for j in range(v.shape[1])], axis=1)
        counts = np.stack([np.bincount(codes, weights=defined[:, j].astype(np.float64), minlength=g)
                           for j in range(v.shape[1])], axis=1)
        sums, counts = sums.reshape(g, v.shape[1]), counts.reshape(g, v.shape[1])
    keep = counts.sum(axis=1) > 0
    return sums[keep], counts[keep]
