"""Two runs paired on task identity: which tasks moved pass@1, by how much, in which slices, between which
buckets, and the evidence behind the tasks that moved it most.

Each paired task contributes ``(p_B(t) − p_A(t)) / N`` to Δpass@1, where ``N`` is the number of paired tasks
and ``p`` a task's passes over its own attempts: the contributions add up to the headline delta whatever the
repeats on either side. Pairing is on the content hash ``task_id``, never on position; a task attempted on
one side only is listed apart (``only_a`` / ``only_b``), not paired with anything. Two problems with the same
content share a ``task_id`` and are pooled into one task (as ``nel compare`` does); their attempts pair up in
order of problem index for the attempt flips.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import polars as pl

from workbench.analysis.diagnosis.attribution import attribute, with_p_values
from workbench.analysis.diagnosis.evidence import EvidenceSource, build_dives, diff_markdown
from workbench.analysis.diagnosis.types import (
    AttemptFlips,
    Attribution,
    RunProfile,
    ScoreShift,
    SliceShift,
    TaskDive,
    TaskEvidence,
    TaskShift,
)
from workbench.analysis.run_stats import NO_VALUE
from workbench.analysis.sources import RunData
from workbench.errors import UsageError

ATTEMPTED_BUCKETS = ("always", "sometimes", "never", "errored")
CATEGORY = "category"
"""The slice column attribution breaks its groups down by, when the runs have it."""


def score_shift(
    a: RunData,
    b: RunData,
    profile_a: RunProfile,
    profile_b: RunProfile,
    *,
    evidence_a: EvidenceSource | None = None,
    evidence_b: EvidenceSource | None = None,
    top: int = 5,
) -> ScoreShift:
    """The shift from ``a`` (baseline) to ``b`` (candidate); slices are the profiles' slice columns, drivers
    the ``top`` tasks per direction, with dives when evidence sources are given.

    Raises:
        UsageError: the runs were loaded with different metrics.
    """
    if a.metric != b.metric:
        raise UsageError(f"runs {a.run_id} and {b.run_id} were loaded with different metrics "
                         f"({a.metric} and {b.metric}); diagnose one metric at a time")
    columns = tuple(dict.fromkeys([*profile_a.slice_columns, *profile_b.slice_columns]))
    side_a, side_b = _per_task(a, columns), _per_task(b, columns)
    paired = _pair(side_a, side_b, columns)
    n = len(paired)
    only_a = side_a.join(side_b, on="task_id", how="anti")["task_idx"].sort().to_list()
    only_b = side_b.join(side_a, on="task_id", how="anti")["task_idx"].sort().to_list()
    p_a, p_b = paired["p_a"].to_list(), paired["p_b"].to_list()
    pass_a = math.fsum(p_a) / n if n else math.nan
    pass_b = math.fsum(p_b) / n if n else math.nan
    tasks = _task_shifts(paired, columns)
    down = [t for t in tasks if t.contribution < 0][:top]
    up = sorted((t for t in tasks if t.contribution > 0), key=lambda t: (-t.contribution, t.p_value, t.task_id))[:top]
    shift = ScoreShift(
        profile_a=profile_a, profile_b=profile_b, n_paired=n, only_a=tuple(only_a), only_b=tuple(only_b),
        pass_at_1_a=pass_a, pass_at_1_b=pass_b, delta=pass_b - pass_a, tasks=tasks,
        slices=_slice_shifts(paired, columns), transitions=_transitions(paired),
        attempt_flips=attempt_flips(a, b), drivers_down=(), drivers_up=(), attribution=_attribution(paired, columns),
    )
    return with_evidence(shift, a, b, evidence_a, evidence_b, down=down, up=up)


def with_evidence(
    shift: ScoreShift,
    a: RunData,
    b: RunData,
    evidence_a: EvidenceSource | None,
    evidence_b: EvidenceSource | None,
    *,
    down: Sequence[TaskShift] | None = None,
    up: Sequence[TaskShift] | None = None,
) -> ScoreShift:
    """``shift`` with its drivers (by default its own) read closely from the evidence sources: one
    ``attempts`` call per side."""
    down = [d.task for d in shift.drivers_down] if down is None else list(down)
    up = [d.task for d in shift.drivers_up] if up is None else list(up)
    dives_a = build_dives(a, evidence_a, [t.task_idx_a for t in [*down, *up]])
    dives_b = build_dives(b, evidence_b, [t.task_idx_b for t in [*down, *up]])
    return dataclasses.replace(
        shift,
        drivers_down=tuple(task_evidence(t, dives_a[t.task_idx_a], dives_b[t.task_idx_b]) for t in down),
        drivers_up=tuple(task_evidence(t, dives_a[t.task_idx_a], dives_b[t.task_idx_b]) for t in up),
    )


def _per_task(run: RunData, columns: Sequence[str]) -> pl.DataFrame:
    """One row per attempted task_id: its (first) problem index, counts, pass rate, bucket (as ``task_outcomes``)
    and slice values."""
    a = run.attempts
    return a.group_by("task_id").agg(
        pl.col("task_idx").min(),
        pl.len().cast(pl.Int64).alias("n"),
        pl.col("passed").fill_null(False).sum().cast(pl.Int64).alias("n_pass"),
        pl.col("error").fill_null(False).sum().cast(pl.Int64).alias("n_error"),
        *[(pl.col(c).drop_nulls().first() if c in a.columns else pl.lit(None, pl.Utf8)).alias(c) for c in columns],
    ).with_columns(
        (pl.col("n_pass") / pl.col("n")).alias("p"),
        pl.when(pl.col("n_error") == pl.col("n")).then(pl.lit("errored"))
        .when(pl.col("n_pass") == pl.col("n")).then(pl.lit("always"))
        .when(pl.col("n_pass") == 0).then(pl.lit("never")).otherwise(pl.lit("sometimes")).alias("bucket"),
    )


def _pair(side_a: pl.DataFrame, side_b: pl.DataFrame, columns: Sequence[str]) -> pl.DataFrame:
    """The paired tasks, contribution ascending (largest drop first), ties by the confidence of the change
    (Fisher exact p-value, smallest first), then task id. A task's slice value is A's, else B's, else
    ``(none)``."""
    joined = side_a.join(side_b, on="task_id", how="inner", suffix="_b")
    joined = joined.rename({c: f"{c}_a" for c in ("task_idx", "n", "n_pass", "n_error", "p", "bucket")})
    n = len(joined)
    counts = joined.select(pl.col("n_pass_a").alias("pass_a"), pl.col("n_a"), pl.col("n_pass_b").alias("pass_b"),
                           pl.col("n_b"))
    return joined.with_columns(
        ((pl.col("p_b") - pl.col("p_a")) / n).alias("contribution"),
        with_p_values(counts)["p_value"],
        *[pl.coalesce(c, f"{c}_b").fill_null(NO_VALUE).alias(c) for c in columns],
    ).sort(["contribution", "p_value", "task_id"])


def _attribution(paired: pl.DataFrame, columns: Sequence[str]) -> Attribution:
    """The paired tasks grouped by transition; broken down by category when ``category`` is profiled."""
    frame = paired.select(
        "task_id", pl.col("task_idx_a").alias("idx_a"), pl.col("task_idx_b").alias("idx_b"), "n_a",
        pl.col("n_pass_a").alias("pass_a"), pl.col("n_error_a").alias("err_a"), "n_b",
        pl.col("n_pass_b").alias("pass_b"), pl.col("n_error_b").alias("err_b"), "p_a", "p_b", "p_value",
        *([pl.col(CATEGORY).cast(pl.Utf8)] if CATEGORY in columns else []),
    )
    return attribute(frame)


def _task_shifts(paired: pl.DataFrame, columns: Sequence[str]) -> tuple[TaskShift, ...]:
    """One ``TaskShift`` per paired task, built column by column (50,000 tasks: no tuple unpacking per row)."""
    ints = ("task_idx_a", "task_idx_b", "n_pass_a", "n_a", "n_pass_b", "n_b", "n_error_a", "n_error_b")
    floats = ("p_a", "p_b", "contribution", "p_value")
    col = {n: paired[n].cast(pl.Int64).to_list() for n in ints}
    col |= {n: paired[n].cast(pl.Float64).to_list() for n in floats}
    col |= {n: paired[n].cast(pl.Utf8).to_list() for n in ("task_id", "bucket_a", "bucket_b")}
    shared: dict[tuple[object, ...], dict[str, str]] = {}  # one dict per distinct slice (tens), not per task
    slices = ([shared.get(r) or shared.setdefault(r, dict(zip(columns, r, strict=True)))
               for r in paired.select(*columns).iter_rows()] if columns else [{}] * paired.height)
    return tuple(map(  # TaskShift's fields, in order
        TaskShift, col["task_id"], col["task_idx_a"], col["task_idx_b"], slices, col["n_pass_a"], col["n_a"],
        col["n_pass_b"], col["n_b"], col["p_a"], col["p_b"], col["contribution"], col["bucket_a"], col["bucket_b"],
        col["n_error_a"], col["n_error_b"], col["p_value"]))


def _slice_shifts(paired: pl.DataFrame, columns: Sequence[str]) -> tuple[SliceShift, ...]:
    out: list[SliceShift] = []
    for column in columns:
        table = paired.group_by(column).agg(
            pl.len().alias("n"), pl.col("contribution").sum(), pl.col("p_a").mean(), pl.col("p_b").mean(),
            (pl.col("p_b") < pl.col("p_a")).sum().alias("down"), (pl.col("p_b") > pl.col("p_a")).sum().alias("up"),
        ).sort(["contribution", column])
        out += [SliceShift(column=column, value=str(v), n_tasks=int(n), contribution=float(c), pass_at_1_a=float(pa),
                           pass_at_1_b=float(pb), n_regressed=int(d), n_improved=int(u))
                for v, n, c, pa, pb, d, u in table.iter_rows()]
    return tuple(out)


def _transitions(paired: pl.DataFrame) -> dict[tuple[str, str], int]:
    """Paired tasks per (bucket in A, bucket in B), every pair of attempted buckets present (zeros included);
    ``errored`` only when a paired task is in it on either side."""
    counts = {(str(x), str(y)): int(n) for x, y, n in paired.group_by("bucket_a", "bucket_b").len().iter_rows()}
    used = [b for b in ATTEMPTED_BUCKETS if b != "errored" or any("errored" in key for key in counts)]
    return {(x, y): counts.get((x, y), 0) for x in used for y in used}


def attempt_flips(a: RunData, b: RunData) -> AttemptFlips:
    """Repeat r of a task in A against repeat r of the same task in B (a repeat one side lacks is not paired).
    Problems sharing a ``task_id`` pair up in order of problem index."""

    def keyed(run: RunData) -> pl.DataFrame:
        attempts = run.attempts
        # Problems sharing a task id are rare: when every id is one problem's, each occurrence is the first.
        shared = attempts.select(pl.col("task_idx").n_unique() != pl.col("task_id").n_unique()).item()
        occurrence = (pl.col("task_idx").rank("dense").over("task_id") if shared
                      else pl.lit(1, dtype=pl.UInt32)).alias("nel_occurrence")
        return attempts.select("task_id", "repeat", pl.col("passed").fill_null(False), occurrence)

    joined = keyed(a).join(keyed(b), on=["task_id", "nel_occurrence", "repeat"], how="inner", suffix="_b")
    pa, pb = joined["passed"], joined["passed_b"]
    return AttemptFlips(
        n_pairs=len(joined), pass_to_fail=int((pa & ~pb).sum()), fail_to_pass=int((~pa & pb).sum()),
        pass_to_pass=int((pa & pb).sum()), fail_to_fail=int((~pa & ~pb).sum()),
    )


def task_evidence(task: TaskShift, dive_a: TaskDive, dive_b: TaskDive) -> TaskEvidence:
    """The side that passed more gives the representative pass, the other the representative fail."""
    better, worse = (dive_a, dive_b) if task.p_a > task.p_b else (dive_b, dive_a)
    rep_pass, rep_fail = better.representative_pass, worse.representative_fail
    return TaskEvidence(task=task, dive_a=dive_a, dive_b=dive_b, representative_pass=rep_pass,
                        representative_fail=rep_fail, diff_markdown=diff_markdown(rep_pass, rep_fail))
