"""One run, profiled: coverage, pass@1 / pass@k / consistency, outcome buckets, per-slice tables, the failure
distribution, the cost of passing against failing attempts, and where transport errors concentrate.

Everything is a handful of polars group-bys over the run's frames (no Python loop per attempt), so a run of
100,000 attempts profiles in tens of milliseconds. The pass@1 interval and the pass@k curve are the ones
``nel eval stats`` reports (``run_statistics``, analytic intervals), so the two never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl

from workbench.analysis.diagnosis.types import (
    TASK_BUCKETS,
    CostContrast,
    CrossTabCell,
    ErrorHotspot,
    FailureCount,
    RunProfile,
    SliceRow,
)
from workbench.analysis.run_stats import NO_VALUE, run_statistics
from workbench.analysis.sources import RunData
from workbench.errors import UsageError

WRONG = "wrong"  # the failure category of an attempt that answered, but not right
COST_MEASURES = ("total_tokens", "latency_ms", "response_chars")
MAX_SLICE_VALUES = 50
MAX_HOTSPOTS = 20
CATEGORY = "category"


def default_slices(run: RunData) -> tuple[str, ...]:
    """The metadata columns worth a per-slice table: ``category`` whenever the run has one, then every column
    with 2 to ``MAX_SLICE_VALUES`` distinct values and at least two tasks per value on average (an identifier
    such as a per-task index is not a slice, however few tasks the run has)."""
    tasks = run.tasks
    chosen = [CATEGORY] if CATEGORY in run.metadata_columns and tasks[CATEGORY].null_count() < len(tasks) else []
    for column in run.metadata_columns:
        if column in chosen:
            continue
        values = tasks[column].drop_nulls()
        distinct = values.n_unique()
        if 2 <= distinct <= MAX_SLICE_VALUES and 2 * distinct <= len(values):
            chosen.append(column)
    return tuple(chosen)


def run_profile(run: RunData, *, slices: Sequence[str] | None = None) -> RunProfile:
    """Profile ``run``; ``slices`` names the metadata columns to split by (default: ``default_slices``).

    Raises:
        UsageError: a slice column the run does not have.
    """
    columns = _slice_columns(run, slices)
    tasks = task_outcomes(run, columns)
    attempted = tasks.filter(pl.col("n") > 0)
    attempts = _attempts_with_slices(run, tasks, columns)
    n_tasks, n_attempted = len(tasks), len(attempted)
    n_attempts = len(attempts)
    n_errors = int(attempts["error"].sum()) if n_attempts else 0
    expected = n_tasks * run.n_repeats
    k = int(attempted["n"].max() or 0) if n_attempted else 0  # type: ignore[arg-type]
    pass_at_1 = _mean(attempted["p"])
    # pass@k, k = the most attempts: only tasks with k attempts define it (any pass among fewer is pass@n, less)
    full = attempted.filter(pl.col("n") >= k)
    pass_at_k = _mean((full["n_pass"] > 0).cast(pl.Float64))
    curve, counts, low, high = _pass_at_k_curve(run) if n_attempted else ((), (), math.nan, math.nan)
    return RunProfile(
        run_id=run.run_id, benchmark=run.benchmark, model_id=run.model_id, metric=run.metric,
        source="store" if run.source.startswith("store:") else run.source, n_repeats=run.n_repeats,
        n_tasks=n_tasks, n_attempted=n_attempted, n_missing=n_tasks - n_attempted, n_attempts=n_attempts,
        n_completed=n_attempts - n_errors, n_expected_attempts=expected,
        coverage=n_attempts / expected if expected else math.nan,
        pass_at_1=pass_at_1, pass_at_1_low=low, pass_at_1_high=high, pass_at_k=pass_at_k, k=k,
        consistency=_mean((attempted["bucket"] == "always").cast(pl.Float64)),
        retry_value=pass_at_k - _mean(full["p"]), pass_at_k_curve=curve,
        buckets={b: tuple(tasks.filter(pl.col("bucket") == b)["task_idx"].to_list()) for b in TASK_BUCKETS},
        pass_histogram=_histogram(attempted, k), slice_columns=columns,
        slices=_slice_rows(attempted, columns), failures=_failures(attempts),
        failure_by_slice=_failure_cells(attempts, attempted, columns), cost=_cost(attempts, attempted, columns),
        error_hotspots=_hotspots(attempts), error_rate=n_errors / n_attempts if n_attempts else math.nan,
        pass_at_k_tasks=len(full), curve_tasks=counts,
    )


def task_outcomes(run: RunData, columns: Sequence[str] = ()) -> pl.DataFrame:
    """One row per task the run lists: ``task_id``, ``task_idx``, ``n``, ``n_pass``, ``n_error``, ``p`` (null
    when not attempted), ``bucket`` (``TASK_BUCKETS``: a task whose every attempt was an error is ``errored``, as in
    ``task_stats`` and ``nel eval stats``) and each slice column, a missing value read as ``(none)``."""
    return run.tasks.select(
        "task_id", "task_idx", "n", "n_pass", "n_error",
        pl.when(pl.col("n") > 0).then(pl.col("n_pass") / pl.col("n")).alias("p"),
        pl.when(pl.col("n") == 0).then(pl.lit("missing"))
        .when(pl.col("n_error") == pl.col("n")).then(pl.lit("errored"))
        .when(pl.col("n_pass") == pl.col("n")).then(pl.lit("always"))
        .when(pl.col("n_pass") == 0).then(pl.lit("never"))
        .otherwise(pl.lit("sometimes")).alias("bucket"),
        *[pl.col(c).fill_null(NO_VALUE) for c in columns],
    ).sort("task_idx")


# ---- pieces ----------------------------------------------------------------------------------------
def _slice_columns(run: RunData, slices: Sequence[str] | None) -> tuple[str, ...]:
    if slices is None:
        return default_slices(run)
    available = run.metadata_columns
    for column in slices:
        if column not in available:
            known = ", ".join(available) if available else "none (this run has no metadata)"
            raise UsageError(f"run {run.run_id} has no column {column!r} to slice by; columns: {known}")
    return tuple(dict.fromkeys(slices))


def _attempts_with_slices(run: RunData, tasks: pl.DataFrame, columns: Sequence[str]) -> pl.DataFrame:
    """The attempts with each slice column taken from their task (one value per task, as the tables count
    tasks), ``passed`` without nulls, and every cost measure (NaN where the run does not have it)."""
    a = run.attempts
    measures = [pl.col(m).cast(pl.Float64) if m in a.columns else pl.lit(math.nan, pl.Float64).alias(m)
                for m in COST_MEASURES]
    a = a.select("task_id", "task_idx", "repeat", pl.col("passed").fill_null(False), pl.col("error").fill_null(False),
                 "failure_category", *measures)
    if columns:
        a = a.join(tasks.select("task_idx", *columns), on="task_idx", how="left", maintain_order="left")
    return a


def _mean(values: pl.Series) -> float:
    return float(values.mean()) if len(values) else math.nan  # type: ignore[arg-type]


def _pass_at_k_curve(
    run: RunData,
) -> tuple[tuple[tuple[int, float, float, float], ...], tuple[int, ...], float, float]:
    """pass@k for k = 1..n_repeats with its analytic interval and the tasks behind each point (those with at
    least k attempts), and pass@1's interval, as ``nel eval stats``."""
    stats = run_statistics(run, bootstrap=0)
    curve = tuple((k, e.value, e.low, e.high) for k, e in stats.overall.pass_at_k.items())
    counts = tuple(e.n_tasks for e in stats.overall.pass_at_k.values())
    first = stats.overall.pass_at_k[1]
    return curve, counts, first.low, first.high


def _histogram(attempted: pl.DataFrame, k: int) -> tuple[tuple[int, int], ...]:
    """Attempted tasks per number of passes, for every count from 0 to ``k`` (zeros included)."""
    counts = dict(attempted.group_by("n_pass").len().iter_rows())
    return tuple((passes, int(counts.get(passes, 0))) for passes in range(k + 1))


def _slice_rows(attempted: pl.DataFrame, columns: Sequence[str]) -> tuple[SliceRow, ...]:
    rows: list[SliceRow] = []
    for column in columns:
        table = attempted.group_by(column).agg(
            pl.len().alias("n_tasks"), pl.col("p").mean().alias("pass_at_1"),
            (pl.col("bucket") == "never").mean().alias("always_fail_rate"), pl.col("n").sum().alias("n_attempts"),
        ).sort(["n_tasks", column], descending=[True, False])
        rows += [SliceRow(column=column, value=str(v), n_tasks=int(n), pass_at_1=float(p), always_fail_rate=float(f),
                          n_attempts=int(a)) for v, n, p, f, a in table.iter_rows()]
    return tuple(rows)


def _failed(attempts: pl.DataFrame) -> pl.DataFrame:
    return attempts.filter(~pl.col("passed")).with_columns(pl.col("failure_category").fill_null(WRONG))


def _failures(attempts: pl.DataFrame) -> tuple[FailureCount, ...]:
    failed = _failed(attempts)
    total = len(failed)
    table = failed.group_by("failure_category").agg(
        pl.len().alias("n"), pl.col("task_idx").n_unique().alias("tasks"),
    ).sort(["n", "failure_category"], descending=[True, False])
    return tuple(FailureCount(category=str(c), n_attempts=int(n), share=n / total, n_tasks=int(t))
                 for c, n, t in table.iter_rows())


def _value_order(attempted: pl.DataFrame, column: str) -> pl.DataFrame:
    """A slice column's values in the order of the slice table (most tasks first), as a rank to sort by."""
    order = attempted.group_by(column).len().sort(["len", column], descending=[True, False])
    return order.select(column, pl.int_range(pl.len()).alias("nel_rank"))


def _failure_cells(attempts: pl.DataFrame, attempted: pl.DataFrame, columns: Sequence[str]) -> tuple[CrossTabCell, ...]:
    failed = _failed(attempts)
    cells: list[CrossTabCell] = []
    for column in columns:
        table = failed.group_by(column, "failure_category").len().join(_value_order(attempted, column), on=column)
        table = table.sort(["nel_rank", "len", "failure_category"], descending=[False, True, False])
        cells += [CrossTabCell(column=column, value=str(v), category=str(c), n_attempts=int(n))
                  for v, c, n in table.select(column, "failure_category", "len").iter_rows()]
    return tuple(cells)


def _cost(attempts: pl.DataFrame, attempted: pl.DataFrame, columns: Sequence[str]) -> tuple[CostContrast, ...]:
    """Each measure over passing and failing attempts, overall then within each slice value. Attempts whose
    exchange failed are left out (a timeout's latency says nothing about the answer), and so are attempts
    without the measure: ``n_pass`` / ``n_fail`` count the attempts behind each mean."""
    completed = attempts.filter(~pl.col("error"))
    aggs = [e for m in COST_MEASURES for e in (pl.col(m).is_not_nan().sum().alias(f"{m}:n"),
                                               pl.col(m).fill_nan(None).mean().alias(f"{m}:mean"),
                                               pl.col(m).fill_nan(None).median().alias(f"{m}:median"))]

    def contrasts(table: pl.DataFrame, column: str | None, value: str | None) -> list[CostContrast]:
        side = {bool(row["passed"]): row for row in table.iter_rows(named=True)}
        out = []
        for m in COST_MEASURES:
            p, f = side.get(True, {}), side.get(False, {})
            out.append(CostContrast(
                measure=m, column=column, slice_value=value, n_pass=int(p.get(f"{m}:n") or 0),
                n_fail=int(f.get(f"{m}:n") or 0), pass_mean=_num(p.get(f"{m}:mean")),
                fail_mean=_num(f.get(f"{m}:mean")), pass_median=_num(p.get(f"{m}:median")),
                fail_median=_num(f.get(f"{m}:median"))))
        return out

    out = contrasts(completed.group_by("passed").agg(aggs), None, None)
    for column in columns:
        parts = completed.group_by(column, "passed").agg(aggs).partition_by(column, as_dict=True)
        for value in _value_order(attempted, column)[column]:
            out += contrasts(parts.get((value,), _EMPTY), column, str(value))
    return tuple(out)


_EMPTY = pl.DataFrame({"passed": []}, schema={"passed": pl.Boolean})


def _num(value: object) -> float:
    return math.nan if value is None else float(value)  # type: ignore[arg-type]


def _hotspots(attempts: pl.DataFrame) -> tuple[ErrorHotspot, ...]:
    errors = attempts.filter(pl.col("error"))
    if errors.is_empty():
        return ()
    per_task = errors.group_by("task_idx").agg(pl.col("task_id").first(), pl.len().alias("n_errors"))
    per_task = per_task.sort(["n_errors", "task_idx"], descending=[True, False]).head(MAX_HOTSPOTS)
    chosen = per_task["task_idx"].to_list()
    totals = dict(attempts.filter(pl.col("task_idx").is_in(chosen)).group_by("task_idx").len().iter_rows())
    cats = errors.filter(pl.col("task_idx").is_in(chosen)).group_by("task_idx", "failure_category").len()
    cats = cats.sort(["task_idx", "len", "failure_category"], descending=[False, True, False])
    by_task: dict[int, list[str]] = {}
    for idx, category, _ in cats.iter_rows():
        by_task.setdefault(int(idx), []).append(str(category))
    return tuple(ErrorHotspot(task_id=str(tid), task_idx=int(idx), n_errors=int(n), n_attempts=int(totals[idx]),
                              categories=tuple(by_task.get(int(idx), ())))
                 for idx, tid, n in per_task.select("task_idx", "task_id", "n_errors").iter_rows())
