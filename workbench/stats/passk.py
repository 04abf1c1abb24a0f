"""The unbiased pass@k estimator (Chen et al. 2021, "Evaluating Large Language Models Trained on Code").

With ``n`` attempts at a task of which ``c`` passed, the probability that at
least one of ``k`` attempts drawn without replacement passes is
``1 - C(n - c, k) / C(n, k)``. The ratio of binomials is computed as a product
of ``k`` factors ``(n - c - j) / (n - j)``, never as huge binomials, so it is
exact to float precision for any ``n``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from workbench.stats.bounds import bounded_mean
from workbench.stats.intervals import Estimate


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with ``n`` attempts and ``c`` passes.

    Raises:
        ValueError: when ``k < 1``, ``k > n``, ``c < 0`` or ``c > n``: pass@k is
            undefined there, and a silent value would hide a bookkeeping bug.
    """
    _check_k(k)
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} attempts, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"passes must be between 0 and n={n}, got c={c}")
    if n - c < k:  # every draw of k attempts includes a pass
        return 1.0
    failures_only = 1.0
    for j in range(k):
        failures_only *= (n - c - j) / (n - j)
    return 1.0 - failures_only


def pass_at_k_per_task(n: npt.ArrayLike, c: npt.ArrayLike, k: int) -> npt.NDArray[np.float64]:
    """pass@k for each task; NaN for a task with fewer than ``k`` attempts (undefined, not 0).

    Raises:
        ValueError: when ``k < 1``, the arrays differ in shape, or some ``c`` is
            outside ``[0, n]``.
    """
    _check_k(k)
    attempts = np.asarray(n, dtype=np.int64)
    passes = np.asarray(c, dtype=np.int64)
    if attempts.shape != passes.shape:
        raise ValueError(f"n and c differ in shape: {attempts.shape} vs {passes.shape}")
    if np.any(passes < 0) or np.any(passes > attempts):
        raise ValueError("every c must be between 0 and its n")
    defined = attempts >= k
    j = np.arange(k, dtype=np.float64)
    n_col = np.where(defined, attempts, k)[..., None].astype(np.float64)  # placeholder n avoids 0/0
    c_col = passes[..., None].astype(np.float64)
    # A factor reaches 0 exactly when n - c < k, so such tasks come out as pass@k = 1.
    failures_only = np.prod(np.clip((n_col - c_col - j) / (n_col - j), 0.0, None), axis=-1)
    return np.where(defined, 1.0 - failures_only, np.nan)


def pass_at_k_estimates(
    n: npt.ArrayLike, c: npt.ArrayLike, ks: Sequence[int], confidence: float = 0.95
) -> dict[int, Estimate]:
    """Mean pass@k across tasks with a bounded interval (``bounded_mean``), for each ``k`` in ``ks``.

    Each task contributes one value (its repeats are reduced by the estimator),
    then the mean and interval are taken across tasks. pass@k is over the tasks
    with at least ``k`` attempts only: ``Estimate.n_tasks`` says how many, and the
    note says so when that is fewer than the attempted tasks (then the values for
    different ``k`` cover different tasks and need not rise with ``k``).
    """
    attempted = int(np.count_nonzero(np.asarray(n) > 0))
    out = {}
    for k in ks:
        est = bounded_mean(pass_at_k_per_task(n, c, k), confidence)
        out[k] = replace(est, note=_join(est.note, subset_note(est.n_tasks, attempted, k)))
    return out


def subset_note(n_counted: int, n_attempted: int, k: int) -> str:
    """"over the 12 of 20 attempted tasks with at least 4 attempts", or "" when every attempted task counts."""
    if n_counted >= n_attempted:
        return ""
    return f"over the {n_counted} of {n_attempted} attempted tasks with at least {k} attempts"


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
