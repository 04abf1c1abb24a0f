"""Which tasks drove a score shift, at any scale: the paired tasks grouped by how their outcome changed.

A list of the largest single movers stops answering once many tasks move a little each (80 tasks at ±0.01
look alike, and at 50,000 tasks one task is 0.002 percentage points). Groups do not: every paired task
falls in exactly one group, keyed by its outcome in each run (always / sometimes / never / errored) and the
direction of its change, so the groups' summed contributions add up to Δ whatever the scale. Within a
group, tasks are ranked by the size of their change, then by the confidence of that change (the two-sided
Fisher exact p-value of the two pass counts), then by task id: never by position in the benchmark.

One implementation for every front end: ``nel diagnose`` (``shift.py``), the TUI's compare screen
(``triage/compare.py``) and the notebook waterfall all read an ``Attribution``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl

from workbench.analysis.diagnosis.types import Attribution, CategoryShare, RankedTask, ShiftGroup, TaskShift
from workbench.stats.proportions import fisher_exact_many

OUTCOMES = ("always", "sometimes", "never", "errored")
"""A task's outcome in one run: every attempt passed / some did / none did / every attempt was an error."""
_LEVEL = {"always": 2, "sometimes": 1, "never": 0, "errored": 0}  # errored attempts count as failures
TASKS_KEPT = 200
"""Ranked tasks an ``Attribution`` keeps per group (its count and sum always cover all of them)."""
RANKING = "largest change first, then the smallest Fisher exact p-value, then task id"

COLUMNS = ("task_id", "idx_a", "idx_b", "n_a", "pass_a", "err_a", "n_b", "pass_b", "err_b", "p_a", "p_b")
"""What ``attribute`` reads, one row per paired task (``category`` too, when the runs have one)."""


def points(share: float) -> str:
    """A contribution in signed percentage points with three significant digits however small (one task of
    50,000 is ``+0.00200 pp``), never rounded to zero: the unit every front end shows contributions in."""
    if math.isnan(share):
        return "—"
    value = 100 * share
    if value == 0:
        return "0.00 pp"
    digits = 2 if abs(value) >= 1 else min(8, 2 - math.floor(math.log10(abs(value))))
    return f"{value:+.{digits}f} pp"


def outcome(passes: pl.Expr, errors: pl.Expr, attempts: pl.Expr) -> pl.Expr:
    """The outcome of a task from its counts (as ``OUTCOMES``)."""
    return (pl.when(errors == attempts).then(pl.lit("errored")).when(passes == attempts).then(pl.lit("always"))
            .when(passes == 0).then(pl.lit("never")).otherwise(pl.lit("sometimes")))


def ranked(paired: pl.DataFrame) -> pl.DataFrame:
    """``paired`` (``COLUMNS``) with each task's ``contribution``, ``change``, ``p_value``, outcomes, group
    ``transition`` and ``direction``, ranked within its group (column ``rank``, 0 first)."""
    n = paired.height
    if "p_value" not in paired.columns:
        paired = with_p_values(paired)
    frame = paired.with_columns(
        ((pl.col("p_b") - pl.col("p_a")) / max(n, 1)).alias("contribution"),
        (pl.col("p_b") - pl.col("p_a")).alias("change"),
        outcome(pl.col("pass_a"), pl.col("err_a"), pl.col("n_a")).alias("outcome_a"),
        outcome(pl.col("pass_b"), pl.col("err_b"), pl.col("n_b")).alias("outcome_b"),
    ).with_columns(
        pl.when(pl.col("change") < 0).then(pl.lit("down")).when(pl.col("change") > 0).then(pl.lit("up"))
        .otherwise(pl.lit("same")).alias("direction"),
    )
    frame = frame.with_columns(_transition().alias("transition"))
    return frame.sort([pl.col("change").abs(), "p_value", "task_id"], descending=[True, False, False]).with_columns(
        pl.int_range(pl.len()).over("transition").alias("rank"))


def with_p_values(paired: pl.DataFrame) -> pl.DataFrame:
    """``paired`` with ``p_value``: how sure it is that a task's pass rate changed (two-sided Fisher exact)."""
    p_value = fisher_exact_many(paired["pass_a"].to_numpy(), paired["n_a"].to_numpy(),
                                paired["pass_b"].to_numpy(), paired["n_b"].to_numpy())
    return paired.with_columns(pl.Series("p_value", p_value, dtype=pl.Float64))


def _transition() -> pl.Expr:
    """``a→b``, with ▼ / ▲ when the direction is not what the outcomes say (a task that stayed
    ``sometimes`` but fell; a score that rose while the passes fell)."""
    level_a = pl.col("outcome_a").replace_strict(_LEVEL, return_dtype=pl.Int8)
    level_b = pl.col("outcome_b").replace_strict(_LEVEL, return_dtype=pl.Int8)
    implied = pl.when(level_b < level_a).then(pl.lit("down")).when(level_b > level_a).then(pl.lit("up")).otherwise(
        pl.lit("same"))
    mark = pl.when(pl.col("direction") == implied).then(pl.lit("")).when(pl.col("direction") == "down").then(
        pl.lit(" ▼")).when(pl.col("direction") == "up").then(pl.lit(" ▲")).otherwise(pl.lit(" ="))
    return pl.concat_str([pl.col("outcome_a"), pl.lit("→"), pl.col("outcome_b"), mark])


def attribute(paired: pl.DataFrame, *, keep: int = TASKS_KEPT) -> Attribution:
    """The paired tasks (``COLUMNS``, plus ``category``) grouped by transition: each group's count, summed
    contribution, category breakdown and first ``keep`` tasks by rank (``RANKING``)."""
    frame = ranked(paired)
    has_category = "category" in frame.columns
    totals = frame.group_by("transition").agg(
        pl.len().alias("n"), pl.col("contribution").sum(), pl.col("outcome_a").first(), pl.col("outcome_b").first(),
        pl.col("direction").first(),
    )
    tops = frame.filter(pl.col("rank") < keep).partition_by("transition", as_dict=True)
    shares = _category_shares(frame) if has_category else {}
    groups = [
        ShiftGroup(transition=t, outcome_a=oa, outcome_b=ob, direction=d, n_tasks=int(count), contribution=float(c),
                   categories=shares.get(t, ()), tasks=_kept(tops.get((t,))))
        for t, count, c, oa, ob, d in totals.iter_rows()
    ]
    groups.sort(key=_group_order)
    return Attribution(n_paired=frame.height, delta=float(frame["contribution"].sum()) if frame.height else 0.0,
                       groups=tuple(groups))


def _group_order(g: ShiftGroup) -> tuple[int, float, int, int, str]:
    """Drops first (most negative), gains next (largest), then the groups that did not move; ties by the
    outcomes' order, never by a task's position."""
    side = 0 if g.contribution < 0 else 1 if g.contribution > 0 else 2
    return (side, -abs(g.contribution), OUTCOMES.index(g.outcome_a), OUTCOMES.index(g.outcome_b), g.transition)


def _category_shares(frame: pl.DataFrame) -> dict[str, tuple[CategoryShare, ...]]:
    table = frame.group_by("transition", "category").agg(pl.len().alias("n"), pl.col("contribution").sum()).sort(
        [pl.col("contribution").abs(), "n", "category"], descending=[True, True, False])
    out: dict[str, list[CategoryShare]] = {}
    for t, category, n, c in table.iter_rows():
        out.setdefault(str(t), []).append(CategoryShare(category=str(category), n_tasks=int(n), contribution=float(c)))
    return {t: tuple(v) for t, v in out.items()}


def _kept(rows: pl.DataFrame | None) -> tuple[RankedTask, ...]:
    return () if rows is None else attribution_tasks(rows.sort("rank"))


def attribution_tasks(rows: pl.DataFrame) -> tuple[RankedTask, ...]:
    """Rows of ``ranked`` as ``RankedTask``, in the rows' order."""
    names = ("task_id", "idx_a", "idx_b", "pass_a", "n_a", "pass_b", "n_b", "p_a", "p_b", "contribution", "p_value")
    categories = rows["category"].to_list() if "category" in rows.columns else [None] * rows.height
    return tuple(
        RankedTask(task_id=str(r[0]), task_idx_a=int(r[1]), task_idx_b=int(r[2]), passes_a=int(r[3]),
                   attempts_a=int(r[4]), passes_b=int(r[5]), attempts_b=int(r[6]), p_a=float(r[7]), p_b=float(r[8]),
                   contribution=float(r[9]), p_value=float(r[10]), category=None if c is None else str(c))
        for r, c in zip(rows.select(names).iter_rows(), categories, strict=True)
    )


def attribute_tasks(tasks: Sequence[TaskShift], *, category: str | None = "category",
                    keep: int = TASKS_KEPT) -> Attribution:
    """``attribute`` over tasks already paired (a ``ScoreShift``'s, or a hand-built one), ``category`` naming
    the slice column to break groups down by."""
    frame = pl.DataFrame({
        "task_id": [t.task_id for t in tasks], "idx_a": [t.task_idx_a for t in tasks],
        "idx_b": [t.task_idx_b for t in tasks], "n_a": [t.attempts_a for t in tasks],
        "pass_a": [t.passes_a for t in tasks], "err_a": [t.errors_a for t in tasks],
        "n_b": [t.attempts_b for t in tasks], "pass_b": [t.passes_b for t in tasks],
        "err_b": [t.errors_b for t in tasks], "p_a": [t.p_a for t in tasks], "p_b": [t.p_b for t in tasks],
    }, schema={"task_id": pl.Utf8, "idx_a": pl.Int64, "idx_b": pl.Int64, "n_a": pl.Int64, "pass_a": pl.Int64,
               "err_a": pl.Int64, "n_b": pl.Int64, "pass_b": pl.Int64, "err_b": pl.Int64, "p_a": pl.Float64,
               "p_b": pl.Float64})
    if category is not None and any(category in t.slices for t in tasks):
        frame = frame.with_columns(pl.Series("category", [t.slices.get(category) for t in tasks], dtype=pl.Utf8))
    return attribute(frame, keep=keep)
