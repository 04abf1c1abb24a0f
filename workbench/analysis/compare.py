"""Paired comparison of two runs: per-metric deltas with intervals and tests, per-category deltas,
runtime deltas, flips, and a verdict with its reasons (``nel compare``; the TUI and notebooks call the same).

Runs are paired by task identity (the content hash ``task_id``), never by row position: tasks only one
run has are reported, not dropped silently. Each task is reduced to one score per side first (the mean
reward over its attempts; an errored attempt counts as a failure, reward 0), so unequal repeats are fine:
every paired task contributes one difference ``candidate − baseline``. ``docs/compare.md`` states the
verdict rules; ``verdict`` implements them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import starmap
from typing import Any

import numpy as np
import polars as pl

from workbench.analysis.sources import RunData
from workbench.stats import mean_with_ci, percentiles
from workbench.stats.bounds import DIFFERENCE, Bounds, bound_interval, spread_floor, unit_span
from workbench.stats.paired import (
    ALPHA,
    N_RESAMPLES,
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
    wilcoxon_signed_rank,
)
from workbench.stats.passk import pass_at_k_per_task
from workbench.types import Verdict

VERDICTS = tuple(Verdict)
UNCATEGORIZED = "uncategorized"
CATEGORY = "category"


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One side of the comparison, as a reader needs it to know what was compared."""

    run_id: str
    benchmark: str
    model_id: str | None
    metric: str
    n_repeats: int
    n_tasks: int  # tasks the run lists, attempted or not
    n_tasks_attempted: int
    n_attempts: int
    n_errors: int  # attempts whose exchange failed (also counted as failures)
    source: str

    @property
    def error_rate(self) -> float:
        return self.n_errors / self.n_attempts if self.n_attempts else math.nan


@dataclass(frozen=True, slots=True)
class Coverage:
    """Which tasks could be paired. ``only_*`` are attempted task ids the other run did not attempt."""

    n_paired: int
    only_baseline: tuple[str, ...]
    only_candidate: tuple[str, ...]
    unattempted_baseline: int  # tasks the run lists but never attempted
    unattempted_candidate: int


@dataclass(frozen=True, slots=True)
class MetricDelta:
    """One metric compared over the paired tasks.

    ``low``/``high`` is the paired t interval of the mean difference (cut to [−1, 1] when the scores lie
    in [0, 1]; NaN with one task); ``boot_low``/``boot_high`` the paired percentile bootstrap;
    ``decision_low``/``decision_high`` the interval the verdict reads: the t interval, widened where needed
    to ``spread_floor`` (so that a handful of unchanged tasks proves nothing); ``decision_method`` says which.
    ``mde`` is NaN when it is undefined (fewer than two tasks, or differences without spread);
    ``tasks_needed`` the paired tasks that would detect a drop of ``max_drop`` at 80 % power (None when
    undefined). ``baseline_all``/``candidate_all`` are each side's mean over all its attempted tasks.
    """

    metric: str
    n_tasks: int
    baseline: float
    candidate: float
    delta: float
    low: float
    high: float
    boot_low: float
    boot_high: float
    decision_low: float
    decision_high: float
    se: float
    sd: float
    effect_size: float
    mde: float
    tasks_needed: int | None
    tests: tuple[SignificanceTest, ...]
    baseline_all: float
    candidate_all: float
    ci_overlap: bool | None  # whether the two sides' own intervals overlap (NeMo Evaluator's field)
    decision_method: str = "t"

    @property
    def relative(self) -> float:
        return self.delta / self.baseline if self.baseline else math.nan

    def test(self, name: str) -> SignificanceTest:
        return next(t for t in self.tests if t.name == name)


@dataclass(frozen=True, slots=True)
class CategoryDelta:
    """The primary metric within one category, paired within it. ``low``/``high`` is the interval a verdict
    would read (``decision_interval``: inside [−1, 1], never narrower than the zero-spread floor)."""

    category: str
    n_tasks: int
    baseline: float
    candidate: float
    delta: float
    low: float
    high: float
    p_value: float  # paired t
    n_regressions: int
    n_improvements: int


@dataclass(frozen=True, slots=True)
class RuntimeDelta:
    name: str
    baseline: float
    candidate: float

    @property
    def delta(self) -> float:
        return self.candidate - self.baseline

    @property
    def relative(self) -> float:
        return self.delta / self.baseline if self.baseline else math.nan


@dataclass(frozen=True, slots=True)
class Flip:
    """A task whose score moved: a regression (it fell) or an improvement (it rose)."""

    task_id: str
    task_idx: int
    category: str | None
    baseline_score: float
    candidate_score: float
    baseline_passes: int
    baseline_attempts: int
    baseline_errors: int
    candidate_passes: int
    candidate_attempts: int
    candidate_errors: int

    @property
    def delta(self) -> float:
        return self.candidate_score - self.baseline_score


@dataclass(frozen=True, slots=True)
class Flips:
    """Regressions (largest drop first) and improvements (largest gain first) among the paired tasks."""

    regressions: tuple[Flip, ...]
    improvements: tuple[Flip, ...]
    n_unchanged: int
    n_stable_correct: int  # unchanged at the top score on both sides
    n_stable_wrong: int  # unchanged at zero on both sides


@dataclass(frozen=True, slots=True)
class Comparison:
    """Everything ``nel compare`` reports. ``score`` is the metric the verdict is about."""

    baseline: RunInfo
    candidate: RunInfo
    max_drop: float
    confidence: float
    seed: int
    n_resamples: int
    coverage: Coverage
    score: MetricDelta
    other_scores: tuple[MetricDelta, ...]
    category_column: str | None
    categories: tuple[CategoryDelta, ...]
    runtime: tuple[RuntimeDelta, ...]
    flips: Flips
    verdict: Verdict
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    collapsed: tuple[CategoryDelta, ...] = ()  # collapsed_categories: named in the reasons
    pass_at_k: tuple[MetricDelta, ...] = ()  # pass_at_k_deltas: pass@1 .. pass@K over the paired tasks

    @property
    def mcnemar_applies(self) -> bool:
        return self.score.test("mcnemar_exact").applicable

    def runtime_delta(self, name: str) -> RuntimeDelta:
        return next(r for r in self.runtime if r.name == name)


# ---- the comparison ------------------------------------------------------------------------------
def compare_runs(
    baseline: RunData,
    candidate: RunData,
    *,
    max_drop: float = 0.05,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
    confidence: float = 0.95,
    other_metrics: Sequence[tuple[RunData, RunData]] = (),
    pass_at_k: bool = True,
) -> Comparison:
    """Compare ``candidate`` with ``baseline`` on their metric (both must carry the same one).

    ``other_metrics`` are more (baseline, candidate) loads of the same two runs for other metrics:
    they are compared too and reported, but the verdict is about the first metric only. ``pass_at_k=False``
    leaves out the paired pass@k of every k (regression.json's; a front end that shows none of them saves
    a comparison per k).

    Raises:
        ValueError: when the two sides carry different metrics, or ``max_drop`` is outside [0, 1].
    """
    if baseline.metric != candidate.metric:
        raise ValueError(f"the sides carry different metrics: {baseline.metric!r} and {candidate.metric!r}")
    if not 0.0 <= max_drop <= 1.0:
        raise ValueError(f"max_drop must be within [0, 1], got {max_drop}")
    b_tasks, c_tasks = task_scores(baseline), task_scores(candidate)
    paired = pair_tasks(b_tasks, c_tasks)
    coverage = _coverage(baseline, candidate, b_tasks, c_tasks, paired)

    def delta(metric: str, pairs: pl.DataFrame, b: pl.DataFrame, c: pl.DataFrame) -> MetricDelta:
        return metric_delta(metric, pairs, b, c, max_drop=max_drop, seed=seed, n_resamples=n_resamples,
                            confidence=confidence)

    score = delta(baseline.metric, paired, b_tasks, c_tasks)
    others = []
    for more_b, more_c in other_metrics:
        if more_b.metric != more_c.metric:
            raise ValueError(f"the sides carry different metrics: {more_b.metric!r} and {more_c.metric!r}")
        mb, mc = task_scores(more_b), task_scores(more_c)
        others.append(delta(more_b.metric, pair_tasks(mb, mc), mb, mc))
    b_info, c_info = _info(baseline, b_tasks), _info(candidate, c_tasks)
    runtime = runtime_deltas(baseline.attempts, candidate.attempts)
    column = CATEGORY if CATEGORY in paired.columns else None
    categories = category_deltas(paired, confidence) if column else ()
    verdict_, reasons = verdict(score, max_drop, coverage=coverage,
                                error_rate_delta=c_info.error_rate - b_info.error_rate, categories=categories)
    return Comparison(
        baseline=b_info, candidate=c_info, max_drop=max_drop, confidence=confidence, seed=seed,
        n_resamples=n_resamples, coverage=coverage, score=score, other_scores=tuple(others),
        category_column=column, categories=categories, runtime=runtime, flips=flips(paired),
        verdict=verdict_, reasons=reasons, warnings=_warnings(baseline, candidate),
        collapsed=collapsed_categories(categories, max_drop) if score.n_tasks else (),
        pass_at_k=pass_at_k_deltas(paired, b_tasks, c_tasks, max_drop=max_drop, seed=seed, n_resamples=n_resamples,
                                   confidence=confidence) if pass_at_k else (),
    )


def pass_at_k_ks(max_k: int) -> list[int]:
    """The k a regression report gives pass@k for: every k up to 8, then the powers of two, and the largest."""
    return sorted({k for k in range(1, min(max_k, 8) + 1)} | {2 ** i for i in range(max_k.bit_length())
                                                            if 2 ** i <= max_k} | ({max_k} if max_k else set()))


def pass_at_k_deltas(paired: pl.DataFrame, baseline_tasks: pl.DataFrame, candidate_tasks: pl.DataFrame,
                     **options: Any) -> tuple[MetricDelta, ...]:
    """pass@k of both sides compared paired by task (NeMo Evaluator's ``pass@1``, ``pass@2`` ... keys), for each k
    every paired task has attempts for on both sides: each task's unbiased estimate 1 − C(n−c, k)/C(n, k) (an
    errored attempt counts as a failure) is its score, and ``metric_delta`` does the rest."""
    if paired.is_empty():
        return ()
    max_k = int(min(paired["n_b"].to_numpy().min(), paired["n_c"].to_numpy().min()))

    def at_k(frame: pl.DataFrame, k: int, suffix: str = "") -> pl.DataFrame:
        n, c = frame[f"n{suffix}"].to_numpy(), frame[f"n_pass{suffix}"].to_numpy()
        keep = n >= k
        return frame.filter(pl.Series(keep)).with_columns(
            pl.Series(f"score{suffix}", pass_at_k_per_task(n[keep], c[keep], k)))

    out = []
    for k in pass_at_k_ks(max_k):
        pairs = at_k(at_k(paired, k, "_b"), k, "_c")
        out.append(metric_delta(f"pass@{k}", pairs, at_k(baseline_tasks, k), at_k(candidate_tasks, k), **options))
    return tuple(out)


_SCORES_KEPT = 4
_scores_cache: list[tuple[RunData, pl.DataFrame]] = []


def task_scores(run: RunData) -> pl.DataFrame:
    """One row per attempted task: ``task_id``, ``task_idx``, ``n``, ``n_pass``, ``n_error``, ``score`` (the
    mean reward over its attempts, an errored attempt counting 0) and ``category`` when the run has one.

    Two problems with identical content share a ``task_id``; they become one task (its attempts pooled),
    since pairing by content cannot tell them apart. The last few runs' frames are kept (by identity: a
    ``RunData`` is immutable), so a comparison and the attribution beside it aggregate each run once.
    """
    for seen, frame in _scores_cache:
        if seen is run:
            return frame
    frame = _task_scores(run)
    _scores_cache.insert(0, (run, frame))
    del _scores_cache[_SCORES_KEPT:]
    return frame


def _task_scores(run: RunData) -> pl.DataFrame:
    a = run.attempts
    reward = pl.when(pl.col("error")).then(0.0).otherwise(pl.col("reward").fill_null(0.0))
    aggs = [
        pl.col("task_idx").min().alias("task_idx"),
        pl.len().cast(pl.Int64).alias("n"),
        pl.col("passed").fill_null(False).sum().cast(pl.Int64).alias("n_pass"),
        pl.col("error").fill_null(False).sum().cast(pl.Int64).alias("n_error"),
        reward.mean().alias("score"),
    ]
    if CATEGORY in a.columns:
        aggs.append(pl.col(CATEGORY).drop_nulls().first().alias(CATEGORY))
    return a.group_by("task_id").agg(aggs).sort("task_id")


def pair_tasks(baseline: pl.DataFrame, candidate: pl.DataFrame) -> pl.DataFrame:
    """Inner join of two ``task_scores`` frames on ``task_id``, sorted by it (so the pairing, and every
    seeded resample over it, is the same whichever side is which). Columns end in ``_b`` / ``_c``;
    ``category`` is the baseline's, else the candidate's, else ``uncategorized``."""
    cols = ["task_id", "task_idx", "n", "n_pass", "n_error", "score"]
    joined = baseline.select(cols).join(candidate.select(cols), on="task_id", how="inner", suffix="_c")
    joined = joined.rename({c: f"{c}_b" for c in cols[1:]}).sort("task_id")
    if CATEGORY in baseline.columns or CATEGORY in candidate.columns:
        cats = [f.select("task_id", pl.col(CATEGORY).alias(f"{CATEGORY}{s}"))
                for f, s in ((baseline, "_b"), (candidate, "_c")) if CATEGORY in f.columns]
        for frame in cats:
            joined = joined.join(frame, on="task_id", how="left")
        present = [f"{CATEGORY}{s}" for s in ("_b", "_c") if f"{CATEGORY}{s}" in joined.columns]
        joined = joined.with_columns(pl.coalesce(*present).alias(CATEGORY)).drop(present)
        if joined[CATEGORY].null_count() == len(joined):
            joined = joined.drop(CATEGORY)
        else:
            joined = joined.with_columns(pl.col(CATEGORY).fill_null(UNCATEGORIZED))
    return joined


def metric_delta(
    metric: str,
    paired: pl.DataFrame,
    baseline_tasks: pl.DataFrame,
    candidate_tasks: pl.DataFrame,
    *,
    max_drop: float = 0.05,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
    confidence: float = 0.95,
) -> MetricDelta:
    """Every paired statistic of one metric over the paired tasks (``pair_tasks``)."""
    b = paired["score_b"].to_numpy().astype(np.float64)
    c = paired["score_c"].to_numpy().astype(np.float64)
    n = b.size
    est = mean_difference(b, c, confidence)
    sd = float(np.std(c - b, ddof=1)) if n > 1 else math.nan
    decision = decision_interval(b, c, confidence)
    t_low, t_high = _t_interval(est.low, est.high, n, _span(b, c))
    boot = paired_bootstrap_interval(b, c, n_resamples=n_resamples, seed=seed, confidence=confidence)
    single = n > 0 and bool((paired["n_b"] == 1).all() and (paired["n_c"] == 1).all())
    binary = bool(np.isin(b, (0.0, 1.0)).all() and np.isin(c, (0.0, 1.0)).all())
    if single and binary:
        mcnemar = mcnemar_exact(b == 1.0, c == 1.0)
    else:
        why = "several attempts at some task" if not single else "scores are not binary"
        mcnemar = SignificanceTest("mcnemar_exact", math.nan, math.nan, "not applicable",
                                   f"{why}: McNemar needs one pass/fail outcome per task on each side")
    tests = (
        mcnemar,
        paired_t_test(b, c),
        wilcoxon_signed_rank(b, c),
        sign_flip_test(b, c, n_resamples=n_resamples, seed=seed),
        mann_whitney_u(b, c),
    )
    b_est, c_est = mean_with_ci(b, confidence), mean_with_ci(c, confidence)
    overlap = None if n < 2 else bool(b_est.low <= c_est.high and c_est.low <= b_est.high)
    return MetricDelta(
        metric=metric, n_tasks=n, baseline=_mean(b), candidate=_mean(c), delta=est.value,
        low=t_low, high=t_high, boot_low=boot[0], boot_high=boot[1],
        decision_low=decision.low, decision_high=decision.high,
        se=est.se if n > 1 else math.nan, sd=sd, effect_size=cohens_dz(b, c) if n else math.nan,
        mde=minimum_detectable_effect(sd, n),
        tasks_needed=tasks_needed(max_drop, sd) if max_drop > 0 else None,
        tests=tests, baseline_all=_mean(baseline_tasks["score"].to_numpy()),
        candidate_all=_mean(candidate_tasks["score"].to_numpy()), ci_overlap=overlap, decision_method=decision.method,
    )


def decision_interval(baseline: np.ndarray, candidate: np.ndarray, confidence: float = 0.95) -> Bounds:
    """The interval a verdict reads for the mean of ``candidate − baseline``: the paired t interval, cut to
    [−1, 1] when both sides' scores lie in [0, 1], and widened where needed to ``spread_floor`` (with one
    task, the floor alone). NaN with no task."""
    n = len(baseline)
    if n == 0:
        return Bounds(math.nan, math.nan, "none", "no paired task")
    est = mean_difference(baseline, candidate, confidence)
    d = np.asarray(candidate, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)
    if _span(baseline, candidate) is not None:
        return bound_interval(d, est.low, est.high, n, span=DIFFERENCE, confidence=confidence, wilson=False)
    floor_low, floor_high = spread_floor(est.value, n, confidence)  # scores outside [0, 1]: no range to cut to
    if n < 2:
        return Bounds(floor_low, floor_high, "zero-spread floor", "one task: no spread to estimate")
    low, high = min(est.low, floor_low), max(est.high, floor_high)
    return Bounds(low, high, "t" if (low, high) == (est.low, est.high) else "t, widened to the zero-spread floor")


def category_deltas(paired: pl.DataFrame, confidence: float = 0.95) -> tuple[CategoryDelta, ...]:
    """The mean difference per category, paired within it, with its decision interval; largest drop first."""
    out = []
    for (category,), part in paired.group_by(CATEGORY):
        b, c = part["score_b"].to_numpy(), part["score_c"].to_numpy()
        bounds = decision_interval(b, c, confidence)
        out.append(CategoryDelta(
            category=str(category), n_tasks=len(part), baseline=_mean(b), candidate=_mean(c),
            delta=_mean(c - b), low=bounds.low, high=bounds.high, p_value=paired_t_test(b, c).p_value,
            n_regressions=int(np.sum(c < b)), n_improvements=int(np.sum(c > b)),
        ))
    return tuple(sorted(out, key=lambda d: (d.delta, d.category)))


def collapsed_categories(categories: Sequence[CategoryDelta], max_drop: float,
                         alpha: float = ALPHA) -> tuple[CategoryDelta, ...]:
    """Categories that collapsed: a drop beyond ``max_drop`` whose decision interval lies below 0 and whose
    paired t p-value clears ``alpha`` after Bonferroni's correction over the categories (one of many
    categories falls by chance; the interval guards a t test without spread). A headline average can hide
    them; a verdict names them."""
    g = len(categories)
    return tuple(d for d in categories
                 if d.delta < -max_drop and d.high < 0 and d.p_value * g < alpha)


def _span(baseline: np.ndarray, candidate: np.ndarray) -> tuple[float, float] | None:
    """The range of a difference: [−1, 1] when both sides' scores lie in [0, 1], else unknown."""
    return DIFFERENCE if unit_span(baseline) and unit_span(candidate) else None


def _t_interval(low: float, high: float, n: int, span: tuple[float, float] | None) -> tuple[float, float]:
    if n < 2:
        return math.nan, math.nan  # one task: no spread, no t interval
    return (max(low, span[0]), min(high, span[1])) if span else (low, high)


RUNTIME_NAMES = ("completion_tokens_per_s", "latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "error_rate")


def runtime_deltas(baseline: pl.DataFrame, candidate: pl.DataFrame) -> tuple[RuntimeDelta, ...]:
    """Runtime of each side over all its attempts: completion tokens per second of request time (summed
    tokens over summed latency, attempts that reported both), latency percentiles, and the error rate."""
    b, c = _runtime(baseline), _runtime(candidate)
    return tuple(RuntimeDelta(name, b[name], c[name]) for name in RUNTIME_NAMES)


def flips(paired: pl.DataFrame) -> Flips:
    """Tasks whose score fell (regressions, largest drop first) or rose (improvements, largest gain first);
    ties by problem index."""
    delta = pl.col("score_c") - pl.col("score_b")
    moved = paired.with_columns(delta.alias("delta"))
    regress = moved.filter(pl.col("delta") < 0).sort(["delta", "task_idx_b"])
    improve = moved.filter(pl.col("delta") > 0).sort([pl.col("delta"), pl.col("task_idx_b")],
                                                      descending=[True, False])
    same = moved.filter(pl.col("delta") == 0)
    return Flips(
        regressions=_flips(regress),
        improvements=_flips(improve),
        n_unchanged=len(same),
        n_stable_correct=int((same["score_b"] >= 1.0).sum()),
        n_stable_wrong=int((same["score_b"] == 0).sum()),
    )


# ---- the verdict ---------------------------------------------------------------------------------
def verdict(
    score: MetricDelta,
    max_drop: float,
    *,
    coverage: Coverage | None = None,
    error_rate_delta: float = math.nan,
    categories: Sequence[CategoryDelta] = (),
) -> tuple[Verdict, tuple[str, ...]]:
    """PASS / WARN / BLOCK / INCONCLUSIVE and the reasons, from the paired delta ``d`` of ``score``, its
    decision interval ``[lo, hi]`` and the tolerance ``m = max_drop`` (the first rule that holds wins):

    1. no paired task: INCONCLUSIVE;
    2. ``hi < 0`` and ``d < −m``: BLOCK (a significant drop, beyond tolerance);
    3. ``hi < 0``: WARN (a significant drop, within tolerance);
    4. ``d < −m``: WARN (a drop beyond tolerance, not significant);
    5. ``lo < −m``: INCONCLUSIVE (a drop beyond tolerance cannot be ruled out; the minimum detectable
       effect and the tasks needed say what would settle it);
    6. otherwise PASS (the interval rules out any drop beyond tolerance).

    An error rate that rose by more than ``m`` adds a reason and lifts PASS or INCONCLUSIVE to WARN; so
    does a category that collapsed (``collapsed_categories``): the headline average can hide it.
    """
    m = max_drop
    d, lo, hi = score.delta, score.decision_low, score.decision_high
    name = score.metric
    reasons: list[str] = []
    span = f"{d:+.4f} (95 % interval {lo:+.4f} to {hi:+.4f}, {score.n_tasks} paired tasks)"
    if score.n_tasks == 0:
        result, reasons = Verdict.INCONCLUSIVE, ["no task was attempted in both runs: nothing to compare"]
    elif hi < 0 and d < -m:
        result = Verdict.BLOCK
        reasons.append(f"{name} dropped {span}: a significant drop larger than the tolerated {m:.4f}")
    elif hi < 0:
        result = Verdict.WARN
        reasons.append(f"{name} dropped {span}: significant, but within the tolerated {m:.4f}")
    elif d < -m:
        result = Verdict.WARN
        reasons.append(f"{name} dropped {span}: more than the tolerated {m:.4f}, but not significantly")
    elif lo < -m:
        result = Verdict.INCONCLUSIVE
        reasons.append(f"{name} changed {span}: a drop larger than the tolerated {m:.4f} cannot be ruled out")
        reasons.append(power_text(score, m))
    else:
        result = Verdict.PASS
        reasons.append(f"{name} changed {span}: the interval rules out a drop larger than {m:.4f}")
    if not math.isnan(error_rate_delta) and error_rate_delta > m:
        reasons.append(f"the error rate rose by {error_rate_delta:.4f}, more than {m:.4f}")
        if result in (Verdict.PASS, Verdict.INCONCLUSIVE):
            result = Verdict.WARN
    collapsed = collapsed_categories(categories, m) if score.n_tasks else ()
    reasons += [category_reason(d, m) for d in collapsed]
    if collapsed and result in (Verdict.PASS, Verdict.INCONCLUSIVE):
        result = Verdict.WARN
    if coverage is not None and (coverage.only_baseline or coverage.only_candidate):
        reasons.append(f"{len(coverage.only_baseline)} tasks only in the baseline and "
                       f"{len(coverage.only_candidate)} only in the candidate are not in the paired statistics")
    return result, tuple(reasons)


def category_reason(d: CategoryDelta, m: float) -> str:
    """The words for a collapsed category (``collapsed_categories``)."""
    return (f"category {d.category} dropped {d.delta:+.4f} ({d.baseline:.4f} → {d.candidate:.4f}, 95 % interval "
            f"{d.low:+.4f} to {d.high:+.4f}, {d.n_tasks} paired tasks, {d.n_regressions} regressed; paired t "
            f"p = {d.p_value:.2g}): a significant drop larger than the tolerated {m:.4f}")


def no_spread(score: MetricDelta) -> str:
    """"none of the 20 tasks changed" or "every one of the 20 tasks changed by -1.0000"."""
    if score.delta == 0:
        return f"none of the {score.n_tasks} tasks changed"
    return f"every one of the {score.n_tasks} tasks changed by {score.delta:+.4f}"


def power_text(score: MetricDelta, m: float) -> str:
    """The minimum detectable effect (or why it is undefined) and the paired tasks that would detect a drop
    of ``m`` at 80 % power."""
    if score.n_tasks < 2:
        return "too few paired tasks to estimate the spread of the differences"
    if math.isnan(score.mde):
        return (f"the paired differences have no spread ({no_spread(score)}): the minimum detectable effect is "
                "undefined, and so are the tasks needed")
    text = f"with {score.n_tasks} tasks the smallest drop detectable at 80 % power is {score.mde:.4f}"
    if score.tasks_needed is not None:
        text += f"; about {score.tasks_needed} paired tasks would detect a drop of {m:.4f}"
    return text


# ---- helpers -------------------------------------------------------------------------------------
def _mean(values: np.ndarray) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def _info(run: RunData, tasks: pl.DataFrame) -> RunInfo:
    return RunInfo(
        run_id=run.run_id, benchmark=run.benchmark, model_id=run.model_id, metric=run.metric,
        n_repeats=run.n_repeats, n_tasks=max(len(run.tasks), len(tasks)), n_tasks_attempted=len(tasks),
        n_attempts=len(run.attempts), n_errors=int(run.attempts["error"].fill_null(False).sum()), source=run.source,
    )


def _coverage(baseline: RunData, candidate: RunData, b: pl.DataFrame, c: pl.DataFrame,
              paired: pl.DataFrame) -> Coverage:
    def only(left: pl.DataFrame, right: pl.DataFrame) -> tuple[str, ...]:
        return tuple(left.join(right.select("task_id"), on="task_id", how="anti").sort("task_idx")["task_id"])

    def unattempted(run: RunData) -> int:
        return int((run.tasks["n"] == 0).sum()) if len(run.tasks) else 0

    return Coverage(n_paired=len(paired), only_baseline=only(b, c), only_candidate=only(c, b),
                    unattempted_baseline=unattempted(baseline), unattempted_candidate=unattempted(candidate))


def _runtime(attempts: pl.DataFrame) -> dict[str, float]:
    lat = attempts["latency_ms"].cast(pl.Float64).to_numpy()
    tokens = attempts["completion_tokens"].cast(pl.Float64).to_numpy()
    both = ~np.isnan(lat) & ~np.isnan(tokens) & (lat > 0)
    seconds = float(lat[both].sum()) / 1000.0
    p = percentiles(lat)
    n = len(attempts)
    return {
        "completion_tokens_per_s": float(tokens[both].sum()) / seconds if seconds > 0 else math.nan,
        "latency_p50_ms": p[50], "latency_p90_ms": p[90], "latency_p99_ms": p[99],
        "error_rate": int(attempts["error"].fill_null(False).sum()) / n if n else math.nan,
    }


def _flips(frame: pl.DataFrame) -> tuple[Flip, ...]:
    """One ``Flip`` per row, built column-wise (tens of thousands of flips: no dict per row)."""
    category = (frame[CATEGORY].cast(pl.Utf8) if CATEGORY in frame.columns
                else pl.Series([None] * frame.height, dtype=pl.Utf8))
    columns = (frame["task_id"].cast(pl.Utf8), frame["task_idx_b"].cast(pl.Int64), category,
               frame["score_b"].cast(pl.Float64), frame["score_c"].cast(pl.Float64),
               *(frame[c].cast(pl.Int64) for c in ("n_pass_b", "n_b", "n_error_b", "n_pass_c", "n_c", "n_error_c")))
    return tuple(starmap(Flip, zip(*(c.to_list() for c in columns), strict=True)))


def _warnings(baseline: RunData, candidate: RunData) -> tuple[str, ...]:
    out = []
    if baseline.benchmark != candidate.benchmark:
        out.append(f"the runs are of different benchmarks: {baseline.benchmark!r} and {candidate.benchmark!r}")
    if baseline.run_id == candidate.run_id and baseline.source == candidate.source:
        out.append("the baseline and the candidate are the same run")
    for side, run in (("baseline", baseline), ("candidate", candidate)):
        if run.status == "running":
            done = run.attempts.height
            out.append(f"the {side} {run.run_id} is still running ({done:,} attempts so far): its numbers will "
                       "move; compare again when it ends")
    return tuple(out)



# ---- regression.json -----------------------------------------------------------------------------
REPORT_VERSION = 1


def regression_report(c: Comparison) -> dict[str, Any]:
    """The comparison as JSON-native data: NeMo Evaluator's field names (``score_deltas``,
    ``category_deltas``, ``runtime_deltas``, ``verdict``, ``verdict_reasons``, ``flip_report``, ``mcnemar``,
    ``permutation_test``, ``test_used``, ``threshold``, ...) plus ours; ``None`` for an undefined number."""
    s = c.score
    mcnemar = s.test("mcnemar_exact")
    perm = s.test("sign_flip_permutation")
    regressions, improvements = c.flips.regressions, c.flips.improvements
    report: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "format": "nel-regression",
        "baseline": _run_dict(c.baseline),
        "candidate": _run_dict(c.candidate),
        "metric": s.metric,
        "threshold": c.max_drop,
        "max_drop": c.max_drop,
        "confidence": c.confidence,
        "alpha": ALPHA,
        "seed": c.seed,
        "n_resamples": c.n_resamples,
        "verdict": c.verdict,
        "verdict_reasons": list(c.reasons),
        "warnings": list(c.warnings),
        "test_used": "mcnemar" if mcnemar.applicable else "permutation",
        "test_reason": "one pass/fail outcome per task on each side" if mcnemar.applicable else mcnemar.note,
        "score_deltas": {m.metric: _delta_dict(m) for m in (*c.pass_at_k, s, *c.other_scores)},
        "category_column": c.category_column,
        "category_deltas": {d.category: _category_dict(d, d in c.collapsed) for d in c.categories},
        "runtime_deltas": _runtime_dict(c.runtime),
        "mcnemar": {
            **_test_dict(mcnemar), "n_discordant": len(regressions) + len(improvements) if mcnemar.applicable else None,
            "n_regressions": len(regressions), "n_improvements": len(improvements), "hypothesis": "two-sided",
            "significant": mcnemar.applicable and mcnemar.p_value < ALPHA,
        },
        "permutation_test": {**_test_dict(perm), "observed_mean_diff": s.delta, "effect_size": s.effect_size,
                             "significant": perm.applicable and perm.p_value < ALPHA},
        "tests": {t.name: _test_dict(t) for t in s.tests},
        "coverage": {
            "n_paired": c.coverage.n_paired,
            "n_only_baseline": len(c.coverage.only_baseline), "n_only_candidate": len(c.coverage.only_candidate),
            "only_baseline": list(c.coverage.only_baseline), "only_candidate": list(c.coverage.only_candidate),
            "n_unattempted_baseline": c.coverage.unattempted_baseline,
            "n_unattempted_candidate": c.coverage.unattempted_candidate,
        },
        "flip_report": _flip_report(c),
    }
    return json_native(report)


def _run_dict(r: RunInfo) -> dict[str, Any]:
    return {"run_id": r.run_id, "benchmark": r.benchmark, "model_id": r.model_id, "metric": r.metric,
            "n_repeats": r.n_repeats, "n_tasks": r.n_tasks, "n_tasks_attempted": r.n_tasks_attempted,
            "n_attempts": r.n_attempts, "n_errors": r.n_errors, "error_rate": r.error_rate, "source": r.source}


def _runtime_dict(runtime: Sequence[RuntimeDelta]) -> dict[str, Any]:
    """Each runtime figure, and NeMo Evaluator's ``tokens_per_second`` (completion tokens per second of request
    time) beside ours."""
    out = {r.name: {"baseline": r.baseline, "candidate": r.candidate, "delta": r.delta,
                    "relative_pct": 100 * r.relative} for r in runtime}
    if "completion_tokens_per_s" in out:
        out["tokens_per_second"] = dict(out["completion_tokens_per_s"])
    return out


def headline_test(m: MetricDelta) -> SignificanceTest:
    """The test a report's ``p_value`` comes from: McNemar's exact test when each task has one pass/fail outcome a
    side, else the sign-flip permutation test of the paired differences (``test_used`` in regression.json)."""
    mcnemar = m.test("mcnemar_exact")
    return mcnemar if mcnemar.applicable else m.test("sign_flip_permutation")


def _delta_dict(m: MetricDelta) -> dict[str, Any]:
    test = headline_test(m)
    return {
        "baseline": m.baseline, "candidate": m.candidate, "delta": m.delta, "relative_pct": 100 * m.relative,
        "ci_overlap": m.ci_overlap, "p_value": test.p_value, "significant": test.applicable and test.p_value < ALPHA,
        "test": test.name, "n_tasks": m.n_tasks, "ci_low": m.low, "ci_high": m.high,
        "bootstrap_low": m.boot_low, "bootstrap_high": m.boot_high,
        "decision_low": m.decision_low, "decision_high": m.decision_high, "decision_method": m.decision_method,
        "se": m.se, "sd_diff": m.sd,
        "effect_size": m.effect_size, "mde": m.mde, "tasks_needed": m.tasks_needed,
        "baseline_all_tasks": m.baseline_all, "candidate_all_tasks": m.candidate_all,
        "p_values": {t.name: t.p_value for t in m.tests},
    }


def _category_dict(d: CategoryDelta, collapsed: bool) -> dict[str, Any]:
    return {"baseline": d.baseline, "candidate": d.candidate, "delta": d.delta, "n_tasks": d.n_tasks,
            "ci_low": d.low, "ci_high": d.high, "p_value": d.p_value,
            "n_regressions": d.n_regressions, "n_improvements": d.n_improvements, "collapsed": collapsed}


def _test_dict(t: SignificanceTest) -> dict[str, Any]:
    return {"statistic": t.statistic, "p_value": t.p_value, "method": t.method, "note": t.note,
            "applicable": t.applicable}


def _flip_dict(f: Flip) -> dict[str, Any]:
    return {"problem_idx": f.task_idx, "task_id": f.task_id, "category": f.category,
            "baseline_reward": f.baseline_score, "candidate_reward": f.candidate_score, "delta": f.delta,
            "baseline_passes": f.baseline_passes, "baseline_attempts": f.baseline_attempts,
            "baseline_errors": f.baseline_errors, "candidate_passes": f.candidate_passes,
            "candidate_attempts": f.candidate_attempts, "candidate_errors": f.candidate_errors}


def _flip_report(c: Comparison) -> dict[str, Any]:
    f = c.flips
    n = c.coverage.n_paired
    breakdown: dict[str, dict[str, int]] = {}
    for kind, items in (("regressions", f.regressions), ("improvements", f.improvements)):
        for flip in items:
            if flip.category is not None:
                breakdown.setdefault(flip.category, {"regressions": 0, "improvements": 0})[kind] += 1
    contingency = {}
    if c.mcnemar_applies:
        contingency = {"both_correct": f.n_stable_correct, "both_wrong": f.n_stable_wrong,
                       "baseline_only_correct": len(f.regressions), "candidate_only_correct": len(f.improvements)}
    return {
        "level": "task",
        "contingency": contingency,
        "regressions": [_flip_dict(x) for x in f.regressions],
        "improvements": [_flip_dict(x) for x in f.improvements],
        "summary": {
            "n_paired": n, "n_regressions": len(f.regressions), "n_improvements": len(f.improvements),
            "n_unchanged": f.n_unchanged, "n_stable_correct": f.n_stable_correct, "n_stable_wrong": f.n_stable_wrong,
            "regression_rate": len(f.regressions) / n if n else None,
            "improvement_rate": len(f.improvements) / n if n else None,
            "category_breakdown": breakdown or None,
        },
    }


def json_native(value: Any) -> Any:
    """JSON-native: NaN and infinities become ``None``, numpy scalars Python ones, tuples lists."""
    if isinstance(value, dict):
        return {str(k): json_native(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_native(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
