"""The end-of-run summary: pass@k with intervals, tokens, latency, failures.

Pure: takes per-task counts and per-step arrays (read by the caller from the
store, or derived from a polars frame by ``summarize_steps``) and returns a
typed result. Repeats are reduced per task first, then
pass@k is averaged across tasks (``workbench.stats``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workbench.model.failures import ERROR_CATEGORIES
from workbench.types import BenchmarkFigures

if TYPE_CHECKING:  # numpy and the statistics are imported by ``summarize``: a run's start does not wait for them
    import numpy as np
    import polars as pl

    from workbench.stats import Estimate

SUMMARY_COLUMNS = (
    "task_idx", "passed", "failure_category", "error", "latency_ms",
    "prompt_tokens", "completion_tokens", "total_tokens",
)


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
    benchmark_figures: BenchmarkFigures | None = None
    """The figures the benchmark's authors report beyond pass@k (``EvalEnvironment.benchmark_figures``), if any."""

    @property
    def complete(self) -> bool:
        return self.n_steps >= self.n_steps_expected


def summarize(
    run_id: str,
    *,
    n_tasks: int,
    n_repeats: int,
    attempts: np.ndarray,
    passes: np.ndarray,
    latency_ms: np.ndarray,
    failures: Mapping[str, int],
    tokens: Mapping[str, int],
    extra: Mapping[str, Any] | None = None,
    errors: np.ndarray | None = None,
    benchmark_figures: BenchmarkFigures | None = None,
) -> RunSummary:
    """Summarise one run (or shard) from per-task attempt and pass counts (one entry per
    attempted task), every step's latency, failure counts and token totals.

    ``errors`` (per task, aligned with ``attempts``: attempts that were errors, ``ERROR_CATEGORIES``)
    adds the ``errored`` bucket of ``task_stats`` and ``nel eval stats``: a task whose every attempt was
    an error is ``errored``, not ``never``. Without it the buckets cannot tell the two apart.
    ``benchmark_figures`` (``workbench.analysis.figures.run_figures``) is carried as given.
    """
    import numpy as np

    from workbench.stats import pass_at_k_estimates, percentiles

    n = np.asarray(attempts, dtype=np.int64)
    c = np.asarray(passes, dtype=np.int64)
    errored = np.zeros(n.shape, dtype=bool) if errors is None else np.asarray(errors, dtype=np.int64) == n
    n_steps = int(n.sum())
    n_pass = int(c.sum())
    max_n = int(n.max()) if len(n) else 0
    ks = [k for k in range(1, max(n_repeats, 1) + 1) if k <= max_n] or [1]
    failures = {str(k): int(v) for k, v in failures.items()}
    return RunSummary(
        run_id=run_id,
        n_tasks=n_tasks,
        n_repeats=n_repeats,
        n_steps=n_steps,
        n_steps_expected=n_tasks * n_repeats,
        n_tasks_attempted=len(n),
        pass_at_k=pass_at_k_estimates(n, c, ks),
        n_pass=n_pass,
        n_wrong=n_steps - n_pass - sum(failures.values()),
        n_errors=sum(v for k, v in failures.items() if k in ERROR_CATEGORIES),
        failures=failures,
        buckets={
            "always": int(np.sum((c == n) & ~errored)),
            "sometimes": int(np.sum((c > 0) & (c < n))),
            "never": int(np.sum((c == 0) & ~errored)),
            **({} if errors is None else {"errored": int(np.sum(errored))}),
            "missing": max(0, n_tasks - len(n)),
        },
        tokens={name: int(tokens.get(name) or 0) for name in ("prompt_tokens", "completion_tokens", "total_tokens")},
        latency_ms=percentiles(np.asarray(latency_ms, dtype=np.float64), (50, 90, 99)),
        extra=dict(extra or {}),
        benchmark_figures=benchmark_figures,
    )


def summarize_steps(run_id: str, steps: pl.DataFrame, n_tasks: int, n_repeats: int) -> RunSummary:
    """The same summary from a frame of steps (columns ``SUMMARY_COLUMNS``), e.g. in a notebook."""
    import polars as pl

    errors = pl.col("failure_category").is_in(sorted(ERROR_CATEGORIES)).fill_null(False)
    per_task = steps.group_by("task_idx").agg(pl.len().alias("n"), pl.col("passed").sum().alias("c"),
                                              errors.sum().alias("e"))
    failures = dict(steps.drop_nulls("failure_category").group_by("failure_category").len().iter_rows())
    return summarize(
        run_id,
        n_tasks=n_tasks,
        n_repeats=n_repeats,
        attempts=per_task["n"].to_numpy(),
        passes=per_task["c"].to_numpy(),
        latency_ms=steps["latency_ms"].drop_nulls().to_numpy(),
        failures=failures,
        tokens={name: int(steps[name].sum() or 0) for name in ("prompt_tokens", "completion_tokens", "total_tokens")},
        errors=per_task["e"].to_numpy(),
    )
