"""Two runs of a store compared for triage: ``nel compare``'s paired statistics, plus which tasks moved
the score (grouped by outcome transition, ``diagnosis.attribution``) and the attempts a cross-run diff of
a moved task opens on.

The statistics are ``workbench.analysis.compare``'s, unchanged (the TUI and the CLI must agree). What is
added here is what a person triaging needs next: each group's share of the change, and, for a
task that moved, an attempt on each side with opposite outcomes, the sharpest contrast to read.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass

import polars as pl

from workbench.analysis.compare import CATEGORY, Comparison, compare_runs, pair_tasks, task_scores
from workbench.analysis.diagnosis.attribution import attribute, attribution_tasks, ranked
from workbench.analysis.diagnosis.types import Attribution, Diagnosis, Finding, RankedTask
from workbench.analysis.sources import RunData, load_run
from workbench.analysis.triage.attempts import counterpart
from workbench.errors import UsageError
from workbench.store.queries.triage_attempts import Attempt, attempts
from workbench.store.queries.triage_runs import present_runs
from workbench.store.reader import Store

MOVED_SHOWN = 100
"""Ranked tasks kept per transition group: what expanding a group on the compare screen lists."""


@dataclass(frozen=True, slots=True)
class TriageComparison:
    """A comparison of two runs of the store, as the compare screen shows it.

    ``attribution`` groups the paired tasks by outcome transition (``always→never``, …): each group's count
    and summed contribution, which add up to the delta, and its first ``MOVED_SHOWN`` tasks by rank.
    """

    comparison: Comparison
    attribution: Attribution
    runs: tuple[RunData, RunData] | None = None
    """Both runs as read (baseline, candidate): the findings screen opened from this comparison diagnoses them
    without reading the store again, when neither is still being written."""

    @property
    def reusable_runs(self) -> tuple[RunData, RunData] | None:
        """``runs`` when both are finished (a finished run's steps do not change), else None: read them again."""
        if self.runs is None or any(r.status in (None, "running") for r in self.runs):
            return None
        return self.runs

    @property
    def n_moved(self) -> int:
        """Paired tasks whose score changed."""
        return self.attribution.n_moved

    @property
    def baseline(self) -> str:
        return self.comparison.baseline.run_id

    @property
    def candidate(self) -> str:
        return self.comparison.candidate.run_id


def run_comparison(store: Store, baseline: str, candidate: str, *, max_drop: float = 0.05,
                   seed: int = 0) -> TriageComparison:
    """Compare run ``candidate`` with run ``baseline`` of ``store`` on the baseline's primary metric (other
    metrics both runs carry are compared too, as ``nel compare`` does).

    Raises:
        UsageError: a run that is not in the store, a candidate without the baseline's metric, or two runs
            of different benchmarks that share no task.
    """
    base, cand = _load_pair(store, baseline, candidate, "compare", parallel=True)
    others = [
        (load_run(baseline, store=store.path, metric=m), load_run(candidate, store=store.path, metric=m))
        for m in base.metrics if m != base.metric and m in cand.metrics
    ]
    if base.benchmark != cand.benchmark and pair_tasks(task_scores(base), task_scores(cand)).is_empty():
        raise UsageError(f"Runs {baseline} ({base.benchmark}) and {candidate} ({cand.benchmark}) are of different "
                         "benchmarks and share no task: nothing to compare.")
    # The screen shows no pass@k of k > 1: leaving those comparisons out saves one bootstrap and one permutation
    # test per k (a fifth of the time at 50,000 tasks).
    comparison = compare_runs(base, cand, max_drop=max_drop, seed=seed, other_metrics=others, pass_at_k=False)
    return TriageComparison(comparison=comparison, attribution=attribute(attribution_frame(base, cand),
                                                                         keep=MOVED_SHOWN), runs=(base, cand))


def diagnose_runs(store: Store, baseline: str, candidate: str, *, top: int = 5,
                  runs: tuple[RunData, RunData] | None = None) -> Diagnosis:
    """The BLADE-style diagnosis of two runs of the store: what ``nel diagnose BASELINE CANDIDATE`` reports
    (its findings are heuristic readings of the evidence, each citing task ids and counts). ``runs``: both
    already read on the baseline's primary metric (``TriageComparison.reusable_runs``), else they are read here.

    Raises:
        UsageError: as ``run_comparison``.
    """
    from workbench.analysis.diagnosis.api import diagnose
    from workbench.analysis.diagnosis.evidence import StoreEvidence

    if runs is not None and (runs[0].run_id, runs[1].run_id) == (baseline, candidate) \
            and runs[0].metric == runs[1].metric:
        base, cand = runs
    else:
        base, cand = _load_pair(store, baseline, candidate, "diagnose", parallel=True)
    # Finished runs: the evidence's few queries on one connection (one set-up). A live run's journals may roll
    # into a segment between them: each query then takes its own snapshot, retried if a file vanished.
    finished = all(r.status not in (None, "running") for r in (base, cand))
    with store.pinned() if finished else nullcontext():
        return diagnose(base, cand, top=top, evidence_baseline=StoreEvidence(store, baseline, metric=base.metric),
                        evidence_candidate=StoreEvidence(store, candidate, metric=base.metric))


@dataclass(frozen=True, slots=True)
class RunFinding:
    """A finding with the run whose task indices it cites (a shift's findings cite the candidate's)."""

    run_id: str
    scope: str  # "baseline", "candidate" or "shift"
    finding: Finding


def findings_by_run(d: Diagnosis) -> list[RunFinding]:
    """The diagnosis' findings, each with the run its task indices belong to: the baseline's own, the
    candidate's own, then the shift's (in the rules' fixed order within each)."""
    from workbench.analysis.diagnosis.findings import run_findings, shift_findings

    out = [RunFinding(d.baseline.profile.run_id, "baseline", f) for f in run_findings(d.baseline)]
    if d.candidate is not None:
        cand = d.candidate.profile.run_id
        out += [RunFinding(cand, "candidate", f) for f in run_findings(d.candidate)]
        if d.shift is not None:
            out += [RunFinding(cand, "shift", f) for f in shift_findings(d.shift)]
    return out


def moved_tasks(baseline: RunData, candidate: RunData, *, limit: int | None = None) -> tuple[RankedTask, ...]:
    """The paired tasks whose score changed, the first ``limit`` of them by rank (the largest change, then
    the smallest Fisher p-value, then task id); paired and scored as ``compare_runs`` does."""
    order = ranked(attribution_frame(baseline, candidate)).filter(pl.col("direction") != "same")
    return attribution_tasks(order if limit is None else order.head(limit))


def attribution_frame(baseline: RunData, candidate: RunData) -> pl.DataFrame:
    """The paired tasks (``pair_tasks``) in the columns ``attribute`` reads: A is the baseline."""
    paired = pair_tasks(task_scores(baseline), task_scores(candidate))
    return paired.select(
        "task_id", pl.col("task_idx_b").alias("idx_a"), pl.col("task_idx_c").alias("idx_b"),
        pl.col("n_b").alias("n_a"), pl.col("n_pass_b").alias("pass_a"), pl.col("n_error_b").alias("err_a"),
        pl.col("n_c").alias("n_b"), pl.col("n_pass_c").alias("pass_b"), pl.col("n_error_c").alias("err_b"),
        pl.col("score_b").alias("p_a"), pl.col("score_c").alias("p_b"),
        *([pl.col(CATEGORY).cast(pl.Utf8)] if CATEGORY in paired.columns else []),
    )


def cross_run_pair(store: Store, baseline: str, candidate: str, task_id: str, *,
                   baseline_better: bool) -> tuple[Attempt, Attempt | None]:
    """An attempt of the task (by content hash) in ``baseline`` and its counterpart in ``candidate``, chosen for
    contrast: a passing attempt on the side that scored better and a failing one on the other, where the runs
    have them. The candidate side is None when that run has no attempt at the task.

    Raises:
        UsageError: when ``baseline`` has no attempt at the task (any more).
    """
    mine = attempts(store, baseline, task_id=task_id)
    if not mine:
        raise UsageError(f"Run {baseline} has no attempt at task {task_id} (the run is gone, or was replaced).")
    left = next((a for a in mine if a.passed == baseline_better), mine[0])
    return left, counterpart(store, left, candidate)


def _load_pair(store: Store, baseline: str, candidate: str, verb: str, *,
               parallel: bool = False) -> tuple[RunData, RunData]:
    """Both runs on the baseline's primary metric; a run that is gone, or a candidate without that metric,
    is said in one line. ``parallel``: both read at once (DuckDB and polars work outside the GIL), the
    candidate on its own primary metric, read again on the baseline's in the rare case they differ."""
    cand: RunData | None = None
    if parallel:
        with ThreadPoolExecutor(2) as pool:
            base_job = pool.submit(load_run, baseline, store=store.path)
            cand_job = pool.submit(load_run, candidate, store=store.path)
            try:
                base = base_job.result()
                cand = cand_job.result()
            except UsageError:
                _check_runs(store, baseline, candidate)  # a run that is gone, named; else as below
                base = base_job.result()
                cand = None
        if cand is not None and cand.metric == base.metric:
            return base, cand
    else:
        _check_runs(store, baseline, candidate)
        base = load_run(baseline, store=store.path)
    try:
        cand = load_run(candidate, store=store.path, metric=base.metric)
    except UsageError as exc:
        raise UsageError(f"Cannot {verb} on {base.metric!r}, the primary metric of {baseline}: {exc}") from None
    return base, cand


def _check_runs(store: Store, baseline: str, candidate: str) -> None:
    """Name a run that is gone in one line, before loading starts."""
    found = present_runs(store, [baseline, candidate])
    for run_id in (baseline, candidate):
        if run_id not in found:
            raise UsageError(f"Run {run_id} is not in this store (deleted, or the store was replaced).")
