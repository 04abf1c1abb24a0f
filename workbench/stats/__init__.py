"""Statistics over per-task results: pass@k, intervals (bounded ones too), percentiles, clustered errors,
bootstrap, variance.

Pure numpy/scipy with no I/O, so every formula can be checked against a
hand-computed or scipy reference.
"""

from workbench.stats.bootstrap import BootstrapInterval, BootstrapResult, bootstrap_distribution, bootstrap_means
from workbench.stats.bounds import Bounds, bound_interval, bounded_mean, spread_floor, unit_span
from workbench.stats.clustered import ClusteredEstimate, cluster_codes, clustered_mean
from workbench.stats.intervals import Estimate, mean_with_ci, percentiles, wilson_interval
from workbench.stats.paired import (
    SignificanceTest,
    cohens_dz,
    mann_whitney_u,
    mcnemar_exact,
    mean_difference,
    minimum_detectable_effect,
    paired_bootstrap_interval,
    paired_t_test,
    sign_flip_test,
    tasks_needed,
    tasks_to_resolve,
    wilcoxon_signed_rank,
)
from workbench.stats.passk import pass_at_k, pass_at_k_estimates, pass_at_k_per_task
from workbench.stats.variance import VarianceSplit, variance_split, variance_split_binary

__all__ = [
    "BootstrapInterval",
    "BootstrapResult",
    "Bounds",
    "ClusteredEstimate",
    "Estimate",
    "SignificanceTest",
    "VarianceSplit",
    "bootstrap_distribution",
    "bootstrap_means",
    "bound_interval",
    "bounded_mean",
    "cluster_codes",
    "clustered_mean",
    "cohens_dz",
    "mann_whitney_u",
    "mcnemar_exact",
    "mean_difference",
    "mean_with_ci",
    "minimum_detectable_effect",
    "paired_bootstrap_interval",
    "paired_t_test",
    "pass_at_k",
    "pass_at_k_estimates",
    "pass_at_k_per_task",
    "percentiles",
    "sign_flip_test",
    "spread_floor",
    "tasks_needed",
    "tasks_to_resolve",
    "unit_span",
    "variance_split",
    "variance_split_binary",
    "wilcoxon_signed_rank",
    "wilson_interval",
]
