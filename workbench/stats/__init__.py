"""Statistics over per-task results: pass@k, intervals, percentiles.

Pure numpy/scipy with no I/O, so every formula can be checked against a
hand-computed or scipy reference.
"""

from workbench.stats.intervals import Estimate, mean_with_ci, percentiles, wilson_interval
from workbench.stats.passk import pass_at_k, pass_at_k_estimates, pass_at_k_per_task

__all__ = [
    "Estimate",
    "mean_with_ci",
    "pass_at_k",
    "pass_at_k_estimates",
    "pass_at_k_per_task",
    "percentiles",
    "wilson_interval",
]
