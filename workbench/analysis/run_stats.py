"""A run's statistics, overall and per slice: pass@k and mean reward, each with an analytic and a bootstrap
interval, counts, outcome buckets, the variance split, and per-task pass rates with Wilson intervals.

Repeats are reduced within each task first (pass@k by the unbiased estimator, a mean reward), then the mean
is taken across tasks; the analytic interval is the across-task standard error (cluster-robust when tasks
share context), the bootstrap resamples tasks (or clusters). Errored attempts (no answer came back) count as
failures, as a user would experience them, and are also counted apart. Tasks with no attempt define no
value; they are counted as ``missing``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from workbench.analysis.sources import RunData
from workbench.errors import UsageError
from workbench.stats import (
    BootstrapInterval,
    VarianceSplit,
    bootstrap_means,
    clustered_mean,
    pass_at_k_per_task,
    variance_split,
    wilson_interval,
)
from workbench.stats.bounds import UNIT, bound_interval
from workbench.stats.passk import subset_note

BUCKETS = ("always", "sometimes", "never", "missing", "errored")
NO_VALUE = "(none)"  # the slice of tasks without a value in the slicing column


@dataclass(frozen=True, slots=True)
class MetricEstimate:
    """One number with its two intervals (95 % unless asked otherwise).

    ``low``/``high`` are analytic, by the policy of ``workbench.stats.bounds`` (``method``: Wilson for pass/fail
    tasks, else Student t on the across-task, or cluster-robust, standard error, cut to the metric's range and
    never narrower than the zero-spread floor); ``se``/``df`` are the t ones. ``boot_low``/``boot_high``/
    ``boot_se`` come from the bootstrap (NaN when it was not run, or when every resample is the same: no
    spread to resample). ``n_tasks`` counts the tasks that define the number (pass@k: those with at least k
    attempts), ``n_clusters`` the independent units behind it; ``note`` says why an interval is degenerate,
    widened, or over fewer tasks than were attempted.
    """

    name: str
    value: float
    low: float
    high: float
    se: float
    df: int
    boot_low: float
    boot_high: float
    boot_se: float
    n_tasks: int
    n_clusters: int
    method: str = "t"
    note: str = ""


@dataclass(frozen=True, slots=True)
class SliceStatistics:
    """The statistics of one set of tasks: the whole run (``column`` None) or one value of a column."""

    column: str | None
    value: str | None
    n_tasks: int
    n_tasks_attempted: int
    n_attempts: int
    n_pass: int
    n_errors: int
    buckets: dict[str, int]
    pass_at_k: dict[int, MetricEstimate]
    mean_reward: MetricEstimate
    variance: VarianceSplit

    @property
    def label(self) -> str:
        return "all" if self.column is None else f"{self.column}={self.value}"


@dataclass(frozen=True, slots=True, eq=False)
class RunStatistics:
    """Everything ``nel eval stats`` shows, for one run and metric.

    ``tasks`` has one row per task: the loader's counts and metadata, plus ``pass_rate`` with its Wilson
    interval (``wilson_low``/``wilson_high``), ``mean_reward`` and ``bucket`` (always / sometimes / never;
    ``errored`` when every attempt failed in transport; ``missing`` when there was none).
    """

    run_id: str
    benchmark: str
    model_id: str | None
    metric: str
    source: str
    n_repeats: int
    binary: bool
    cluster: str | None
    n_resamples: int
    seed: int
    overall: SliceStatistics
    slices: tuple[SliceStatistics, ...]
    tasks: pl.DataFrame
    confidence: float = 0.95
    by: tuple[str, ...] = ()

    def to_dict(self, *, include_tasks: bool = True) -> dict[str, Any]:
        """JSON-native: string keys, ``None`` for an undefined number."""
        out: dict[str, Any] = {
            "run_id": self.run_id, "benchmark": self.benchmark, "model_id": self.model_id, "metric": self.metric,
            "source": self.source, "n_repeats": self.n_repeats, "binary": self.binary,
            "confidence": self.confidence, "cluster": self.cluster, "by": list(self.by),
            "bootstrap": {"n_resamples": self.n_resamples, "seed": self.seed},
            "overall": _slice_dict(self.overall, self.n_resamples > 0),
            "slices": [_slice_dict(s, self.n_resamples > 0) for s in self.slices],
        }
        if include_tasks:
            out["tasks"] = [{k: _clean(v) for k, v in row.items()} for row in self.tasks.iter_rows(named=True)]
        return out


def run_statistics(
    data: RunData,
    *,
    by: Sequence[str] = (),
    cluster: str | None = None,
    bootstrap: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> RunStatistics:
    """The statistics of ``data``, overall and per value of each ``by`` column.

    ``cluster`` names a metadata column whose tasks share context: the analytic intervals become
    cluster-robust and the bootstrap resamples whole clusters (a task without a value is its own cluster).
    ``bootstrap`` resamples (0: none) drawn with ``seed``.

    Raises:
        UsageError: a ``by`` or ``cluster`` column the run does not have, or ``bootstrap < 0``.
    """
    if bootstrap < 0:
        raise UsageError(f"--bootstrap must be 0 (none) or a number of resamples, got {bootstrap}")
    available = data.metadata_columns
    for column in [*by, *([cluster] if cluster else [])]:
        if column not in available:
            known = ", ".join(available) if available else "none (this run has no metadata)"
            raise UsageError(f"run {data.run_id} has no column {column!r} to slice or cluster by; columns: {known}")
    tasks = _task_table(data, confidence)
    n = tasks["n"].to_numpy()
    most = data.n_repeats if data.n_repeats > 0 else max(int(n.max()) if len(n) else 0, 1)
    ks = list(range(1, most + 1))
    values = _per_task_values(tasks, ks)
    rewards = data.attempts["reward"]
    binary = bool(rewards.is_in([0.0, 1.0]).all()) if len(rewards) else True
    unit_rewards = bool(((rewards >= 0) & (rewards <= 1)).all()) if len(rewards) else True
    codes = _cluster_codes(tasks, cluster)
    ctx = _Context(ks, values, codes, bootstrap, seed, confidence, unit_rewards, binary)
    everything = np.ones(len(tasks), dtype=bool)
    overall = _slice(tasks, everything, None, None, ctx)
    slices = []
    for column in by:
        labels = tasks[column].fill_null(NO_VALUE)
        for value in sorted(labels.unique().to_list()):
            slices.append(_slice(tasks, (labels == value).to_numpy(), column, value, ctx))
    return RunStatistics(
        run_id=data.run_id, benchmark=data.benchmark, model_id=data.model_id, metric=data.metric,
        source=data.source, n_repeats=data.n_repeats, binary=binary, cluster=cluster, n_resamples=bootstrap,
        seed=seed, overall=overall, slices=tuple(slices), tasks=tasks.drop("reward_sq_sum"), confidence=confidence,
        by=tuple(by),
    )


@dataclass(frozen=True, slots=True)
class _Context:
    ks: list[int]
    values: npt.NDArray[np.float64]  # per task: pass@k for each k, then mean reward (NaN: undefined)
    codes: npt.NDArray[np.int64] | None
    n_resamples: int
    seed: int
    confidence: float
    unit_rewards: bool
    binary: bool


def _task_table(data: RunData, confidence: float) -> pl.DataFrame:
    """Per task: counts, pass rate with its Wilson interval, mean reward, reward sum of squares, bucket."""
    squares = data.attempts.group_by("task_idx").agg((pl.col("reward") ** 2).sum().alias("reward_sq_sum"))
    tasks = data.tasks.join(squares, on="task_idx", how="left").with_columns(pl.col("reward_sq_sum").fill_null(0.0))
    n = tasks["n"].to_numpy()
    low, high = wilson_interval(tasks["n_pass"].to_numpy(), n, confidence)
    attempted = pl.col("n") > 0
    return tasks.with_columns(
        pl.when(attempted).then(pl.col("n_pass") / pl.col("n")).alias("pass_rate"),
        pl.when(attempted).then(pl.Series(low)).alias("wilson_low"),
        pl.when(attempted).then(pl.Series(high)).alias("wilson_high"),
        pl.when(attempted).then(pl.col("reward_sum") / pl.col("n")).alias("mean_reward"),
        pl.when(~attempted).then(pl.lit("missing"))
        .when(pl.col("n_error") == pl.col("n")).then(pl.lit("errored"))
        .when(pl.col("n_pass") == pl.col("n")).then(pl.lit("always"))
        .when(pl.col("n_pass") == 0).then(pl.lit("never"))
        .otherwise(pl.lit("sometimes")).alias("bucket"),
    ).sort("task_idx")


def _per_task_values(tasks: pl.DataFrame, ks: list[int]) -> npt.NDArray[np.float64]:
    n = tasks["n"].to_numpy()
    c = tasks["n_pass"].to_numpy()
    columns = [pass_at_k_per_task(n, c, k) for k in ks]
    columns.append(tasks["mean_reward"].fill_null(math.nan).to_numpy().astype(np.float64))
    return np.column_stack(columns) if columns else np.zeros((len(tasks), 0))


def _cluster_codes(tasks: pl.DataFrame, cluster: str | None) -> npt.NDArray[np.int64] | None:
    """One integer per task, equal for tasks of one cluster; a task without a value is a cluster of its own."""
    if cluster is None:
        return None
    labels = tasks[cluster]
    ranks = labels.rank("dense").to_numpy()
    codes = np.where(np.isnan(ranks.astype(np.float64)), 0, ranks).astype(np.int64)
    missing = labels.is_null().to_numpy()
    top = int(codes.max()) if len(codes) else 0
    codes[missing] = top + 1 + np.arange(int(missing.sum()))
    return codes


def _slice(tasks: pl.DataFrame, mask: npt.NDArray[np.bool_], column: str | None, value: str | None,
           ctx: _Context) -> SliceStatistics:
    part = tasks.filter(pl.Series(mask))
    n = part["n"].to_numpy()
    values = ctx.values[mask]
    codes = None if ctx.codes is None else ctx.codes[mask]
    boot = _bootstrap(values, codes, ctx)
    names = [f"pass@{k}" for k in ctx.ks] + ["mean_reward"]
    bounded = [True] * len(ctx.ks) + [ctx.unit_rewards]
    attempted = int(np.sum(n > 0))
    subsets = [subset_note(int(np.sum(n >= k)), attempted, k) for k in ctx.ks] + [""]
    estimates = [_estimate(name, values[:, j], codes, boot, j, ctx.confidence, bounded[j], subsets[j])
                 for j, name in enumerate(names)]
    counts = part["bucket"].value_counts()
    buckets = dict.fromkeys(BUCKETS, 0) | {str(b): int(c) for b, c in counts.iter_rows()}
    return SliceStatistics(
        column=column, value=value, n_tasks=len(part), n_tasks_attempted=int(np.sum(n > 0)),
        n_attempts=int(n.sum()), n_pass=int(part["n_pass"].sum()), n_errors=int(part["n_error"].sum()),
        buckets=buckets, pass_at_k=dict(zip(ctx.ks, estimates[:-1], strict=True)), mean_reward=estimates[-1],
        variance=variance_split(n, part["reward_sum"].to_numpy(), part["reward_sq_sum"].to_numpy()),
    )


def _bootstrap(values: npt.NDArray[np.float64], codes: npt.NDArray[np.int64] | None,
               ctx: _Context) -> list[BootstrapInterval] | None:
    """Bootstrap intervals of every column. pass@k for every k comes from one set of resamples; so does mean
    reward when rewards are pass/fail. Continuous mean rewards are resampled apart: the per-task pass counts
    take few distinct values, which makes their resamples cheap, and the rewards would forfeit that."""
    if ctx.n_resamples == 0:
        return None
    groups = [slice(None)] if ctx.binary else [slice(0, len(ctx.ks)), slice(len(ctx.ks), None)]
    out: list[BootstrapInterval] = []
    for group in groups:
        result = bootstrap_means(values[:, group], codes, n_resamples=ctx.n_resamples, seed=ctx.seed,
                                 confidence=ctx.confidence)
        out.extend(result.intervals)
    return out


def _estimate(name: str, values: npt.NDArray[np.float64], codes: npt.NDArray[np.int64] | None,
              boot: list[BootstrapInterval] | None, j: int, confidence: float, bounded: bool,
              subset: str) -> MetricEstimate:
    est = clustered_mean(values, codes, confidence)
    defined = values[~np.isnan(values)]
    bounds = bound_interval(defined, est.low, est.high, est.n_clusters, span=UNIT if bounded else None,
                            confidence=confidence, wilson=codes is None)
    nan = math.nan
    interval = boot[j] if boot is not None else None
    boot_low, boot_high = (interval.low, interval.high) if interval else (nan, nan)
    notes = [bounds.note, subset]
    if interval is not None and est.n_tasks and interval.se == 0.0:  # every resample the same: not an interval
        boot_low = boot_high = nan
        notes.append("the bootstrap has no spread to resample")
    return MetricEstimate(
        name=name, value=est.value, low=bounds.low, high=bounds.high, se=est.se if est.n_clusters > 1 else nan,
        df=est.df, boot_low=boot_low, boot_high=boot_high, boot_se=interval.se if interval else nan,
        n_tasks=est.n_tasks, n_clusters=est.n_clusters, method=bounds.method,
        note="; ".join(n for n in notes if n),
    )


def _slice_dict(s: SliceStatistics, boot: bool) -> dict[str, Any]:
    return {
        "column": s.column, "value": s.value, "n_tasks": s.n_tasks, "n_tasks_attempted": s.n_tasks_attempted,
        "n_missing": s.buckets["missing"], "n_attempts": s.n_attempts, "n_pass": s.n_pass, "n_errors": s.n_errors,
        "buckets": dict(s.buckets),
        "pass_at_k": {str(k): _estimate_dict(e, boot) for k, e in s.pass_at_k.items()},
        "mean_reward": _estimate_dict(s.mean_reward, boot),
        "variance": {k: _clean(v) for k, v in asdict(s.variance).items()},
    }


def _estimate_dict(e: MetricEstimate, boot: bool) -> dict[str, Any]:
    return {
        "value": _clean(e.value), "low": _clean(e.low), "high": _clean(e.high), "se": _clean(e.se), "df": e.df,
        "n_tasks": e.n_tasks, "n_clusters": e.n_clusters, "method": e.method, "note": e.note,
        "bootstrap": {"low": _clean(e.boot_low), "high": _clean(e.boot_high), "se": _clean(e.boot_se)}
        if boot else None,
    }


def _clean(value: Any) -> Any:
    if isinstance(value, float | np.floating) and not math.isfinite(float(value)):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value
