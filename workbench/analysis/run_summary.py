"""The end-of-run summary: pass@k with intervals, tokens, latency, failures.

Pure: takes the run's steps as a polars frame (read by the caller from the
store) and returns a typed result. Repeats are reduced per task first, then
pass@k is averaged across tasks (``workbench.stats``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from workbench.stats import Estimate, pass_at_k_estimates, percentiles

SUMMARY_COLUMNS = (
    "task_idx", "passed", "failure_category", "error", "latency_ms",
    "prompt_tokens", "completion_tokens", "total_tokens",
)
ERROR_CATEGORIES = frozenset({"rate_limit", "timeout", "server_error", "context_window", "model_error"})


@dataclass(frozen=True, slots=True)
class RunSummary:
    run_id: str
    n_tasks: int
    n_repeats: int
    n_steps: int
    n_steps_expected: int
    n_tasks_attempted: int
    pass_at_k: dict[int, Estimate]
    n_pass: int
    n_wrong: int
    n_errors: int
    failures: dict[str, int]
    buckets: dict[str, int]
    tokens: dict[str, int]
    latency_ms: dict[int, float]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.n_steps >= self.n_steps_expected


def summarize(run_id: str, steps: pl.DataFrame, n_tasks: int, n_repeats: int,
              extra: Mapping[str, Any] | None = None) -> RunSummary:
    """Summarise one run (or one shard) from its steps (columns ``SUMMARY_COLUMNS``)."""
    per_task = (
        steps.group_by("task_idx")
        .agg(pl.len().alias("n"), pl.col("passed").sum().alias("c"))
        .sort("task_idx")
    )
    n = per_task["n"].to_numpy().astype(np.int64)
    c = per_task["c"].to_numpy().astype(np.int64)
    max_n = int(n.max()) if len(n) else 0
    ks = [k for k in range(1, max(n_repeats, 1) + 1) if k <= max_n] or [1]
    estimates = pass_at_k_estimates(n, c, ks)
    failures = {
        str(cat): int(cnt)
        for cat, cnt in steps.drop_nulls("failure_category").group_by("failure_category").len().iter_rows()
    }
    n_errors = sum(v for k, v in failures.items() if k in ERROR_CATEGORIES)
    n_pass = int(steps["passed"].sum()) if steps.height else 0
    buckets = {
        "always": int(np.sum(c == n)),
        "sometimes": int(np.sum((c > 0) & (c < n))),
        "never": int(np.sum(c == 0)),
        "missing": max(0, n_tasks - len(n)),
    }
    tokens = {
        name: int(steps[name].sum() or 0) for name in ("prompt_tokens", "completion_tokens", "total_tokens")
    }
    latency = percentiles(steps["latency_ms"].drop_nulls().to_numpy(), (50, 90, 99))
    return RunSummary(
        run_id=run_id,
        n_tasks=n_tasks,
        n_repeats=n_repeats,
        n_steps=steps.height,
        n_steps_expected=n_tasks * n_repeats,
        n_tasks_attempted=len(n),
        pass_at_k=estimates,
        n_pass=n_pass,
        n_wrong=steps.height - n_pass - sum(failures.values()),
        n_errors=n_errors,
        failures=failures,
        buckets=buckets,
        tokens=tokens,
        latency_ms=latency,
        extra=dict(extra or {}),
    )
