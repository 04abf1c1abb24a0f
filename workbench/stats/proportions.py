"""Two binomial proportions compared, for many pairs at once: how sure are we that a task's pass rate
changed between two runs? Fisher's exact test (scipy's), two-sided, on the 2×2 table of passes and fails.

Tasks with the same counts share a p-value, and runs have few repeats, so a comparison of 50,000 tasks
has a few dozen distinct tables: each is tested once and the answer broadcast back.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.stats import fisher_exact


def fisher_exact_many(
    passes_a: npt.ArrayLike, attempts_a: npt.ArrayLike, passes_b: npt.ArrayLike, attempts_b: npt.ArrayLike,
) -> npt.NDArray[np.float64]:
    """Two-sided Fisher exact p-value of ``passes_a/attempts_a`` against ``passes_b/attempts_b``, element-wise
    (``scipy.stats.fisher_exact`` on ``[[passes_a, fails_a], [passes_b, fails_b]]``). A side without
    attempts says nothing: its p-value is 1.

    Raises:
        ValueError: arrays of different lengths, or passes outside ``0..attempts``.
    """
    table = np.stack([np.asarray(x, dtype=np.int64).ravel() for x in (passes_a, attempts_a, passes_b, attempts_b)],
                     axis=1) if np.size(passes_a) else np.zeros((0, 4), dtype=np.int64)
    if table.size and ((table[:, 0] < 0).any() or (table[:, 0] > table[:, 1]).any()
                       or (table[:, 2] < 0).any() or (table[:, 2] > table[:, 3]).any()):
        raise ValueError("passes must lie between 0 and the attempts")
    base = int(table.max(initial=0)) + 1
    if base ** 4 < 2 ** 62:  # one integer per table: np.unique of a vector is far quicker than of rows
        key = ((table[:, 0] * base + table[:, 1]) * base + table[:, 2]) * base + table[:, 3]
        _, first, where = np.unique(key, return_index=True, return_inverse=True)
        distinct = table[first]
    else:
        distinct, where = np.unique(table, axis=0, return_inverse=True)
    p = np.ones(len(distinct), dtype=np.float64)
    for i, (ka, na, kb, nb) in enumerate(distinct):
        if na and nb:
            p[i] = float(fisher_exact([[ka, na - ka], [kb, nb - kb]]).pvalue)
    return p[where.ravel()]
