"""Diagnosis results → altair charts: pure functions, no ipywidgets, so they work in scripts and reports too.

Each chart has a ``*_frame`` twin returning the (small) table it draws, so the numbers can be checked
without a browser. Nothing here computes a statistic: contributions, buckets, pass@k and slices come
from ``workbench.analysis.diagnosis``, Wilson bounds from ``workbench.stats``. What happens here is
layout: ordering, grouping the long tail, and aggregating points, so a chart of 14,000 tasks stays a few
hundred marks (a browser draws that at once; 14,000 marks with error bars it does not).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import altair as alt
import numpy as np
import polars as pl

from workbench.analysis.diagnosis.attribution import points
from workbench.analysis.diagnosis.types import TASK_BUCKETS, RunProfile, ScoreShift, TaskShift
from workbench.stats import wilson_interval

WATERFALL_TOP = 12
"""Tasks a waterfall bar's tooltip names (its transition group's first, by rank)."""
SCATTER_MAX_POINTS = 400
"""Above this many distinct (A, B) outcomes the scatter bins pass rates to a ``SCATTER_BIN`` grid."""
SCATTER_BIN = 0.05
POINT_AREA_MAX = 900
"""Area in px² of the scatter's largest point (radius 17 px)."""
SCATTER_PAD = 20
"""Pixels between the 0 and 1 pass rates and the scatter's axes: more than the largest point's radius."""
SLICE_MAX_BARS = 40
"""Slice values drawn (most negative contribution first within each column); a note says what was left out."""

GROUP_PICK = "group_pick"
"""The waterfall's point selection (field ``group``, a transition): picking a bar lists that group's tasks."""
CELL_PICK = "cell_pick"
"""The scatter's point selection (field ``cell``): picking a point drills down into its tasks."""

COLORS = {"regressed": "#d62728", "improved": "#2ca02c", "unchanged": "#8c8c8c", "rest": "#9467bd",
          "total": "#1f77b4"}
BUCKET_COLORS = {"always": "#2ca02c", "sometimes": "#ff7f0e", "never": "#d62728", "errored": "#9467bd",
                 "missing": "#8c8c8c"}
WIDTH, HEIGHT = 380, 240
NO_SLICES = "<p><i>Contribution by slice: no slice columns (tasks carry no category-like metadata)</i></p>"
NO_FAILURES = "<p><i>Failure categories: no failed attempt</i></p>"
"""What a widget shows instead of a chart with nothing to draw (an empty chart is bare axes)."""


def _direction(delta: float) -> str:
    return "improved" if delta > 0 else "regressed" if delta < 0 else "unchanged"


def _scale(mapping: dict[str, str], domain: Sequence[str]) -> alt.Scale:
    return alt.Scale(domain=list(domain), range=[mapping[d] for d in domain])


# ---- waterfall ---------------------------------------------------------------------------------------
def waterfall_frame(shift: ScoreShift, top: int = WATERFALL_TOP) -> pl.DataFrame:
    """The waterfall's bars: one per transition group that moved the score (``shift.attribution``, drops
    first), labelled with its count, then the total. ``start``/``end`` are the running sum, so the last
    group's bar ends at ``shift.delta`` and the total bar spans 0 → delta; ``detail`` names the group's
    largest categories and its first ``top`` tasks by rank."""
    groups = [g for g in shift.attribution.groups if g.contribution != 0.0]
    rows: list[dict[str, object]] = []
    running = 0.0
    for g in groups:
        categories = ", ".join(f"{c.category} {c.n_tasks}" for c in g.categories[:3])
        tasks = ", ".join(f"#{t.task_idx_b}" for t in g.tasks[:top])
        rows.append({"label": f"{g.transition} ({g.n_tasks:,})", "kind": _direction(g.contribution),
                     "group": g.transition, "n_tasks": g.n_tasks, "contribution": g.contribution, "start": running,
                     "end": running + g.contribution, "share": points(g.contribution),
                     "detail": "; ".join(x for x in (categories, f"first: {tasks}" if tasks else "") if x)})
        running += g.contribution
    n_moved = shift.attribution.n_moved
    rows.append({"label": "Δ pass@1", "kind": "total", "group": None, "n_tasks": n_moved,
                 "contribution": shift.delta, "start": 0.0, "end": shift.delta, "share": points(shift.delta),
                 "detail": f"{shift.n_paired} paired tasks, {n_moved} moved"})
    schema = {"label": pl.Utf8, "kind": pl.Utf8, "group": pl.Utf8, "n_tasks": pl.Int64, "contribution": pl.Float64,
              "start": pl.Float64, "end": pl.Float64, "share": pl.Utf8, "detail": pl.Utf8}
    return pl.DataFrame(rows, schema=schema).with_row_index("order")


def _title(text: str, subtitle: str) -> alt.TitleParams:
    """A title over a second line: two charts side by side keep their titles within their own width."""
    return alt.TitleParams(text=text, subtitle=subtitle, anchor="start")


def waterfall_chart(shift: ScoreShift, top: int = WATERFALL_TOP) -> alt.LayerChart:
    """What moved Δpass@1, by outcome transition: one bar per group (coloured by the sign of its sum,
    labelled with its count), drops first, the total last. Click a group's bar to list its tasks
    (selection ``GROUP_PICK``)."""
    frame = waterfall_frame(shift, top)
    pick = alt.selection_point(name=GROUP_PICK, fields=["group"], on="click", empty=False)
    kinds = ["regressed", "improved", "total"]
    base = alt.Chart(frame).encode(
        x=alt.X("label:N", sort=alt.SortField("order"), title=None, axis=alt.Axis(labelAngle=-40, labelLimit=160)),
    )
    bars = base.mark_bar().encode(
        y=alt.Y("start:Q", title="Δ pass@1 (running sum)"),
        y2="end:Q",
        color=alt.Color("kind:N", scale=_scale(COLORS, kinds), legend=None),
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.8)),
        tooltip=[alt.Tooltip("label:N"), alt.Tooltip("share:N", title="share of Δ"), alt.Tooltip("detail:N")],
    ).add_params(pick)
    zero = alt.Chart(pl.DataFrame({"y": [0.0]})).mark_rule(color="#444").encode(y="y:Q")
    n_groups = frame.height - 1
    title = _title(f"What moved pass@1 by {points(shift.delta)}",
                   f"{shift.attribution.n_moved} tasks in {n_groups} transition groups")
    return alt.LayerChart(layer=[bars, zero], width=WIDTH, height=HEIGHT, title=title)


# ---- scatter -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ScatterData:
    """The scatter's points and which tasks each point stands for (for the drill-down)."""

    points: pl.DataFrame  # cell, p_a, p_b, low_a, high_a, low_b, high_b, n_tasks, direction, contribution
    members: dict[str, tuple[str, ...]]  # cell → task ids, contribution ascending (largest drop first)
    binned: bool  # True: pass rates rounded to a SCATTER_BIN grid and intervals averaged over the cell


def scatter_data(shift: ScoreShift, max_points: int = SCATTER_MAX_POINTS) -> ScatterData:
    """One point per distinct outcome (passes/attempts in A, passes/attempts in B): tasks with the same
    counts sit on the same spot with the same Wilson intervals, so nothing is lost by drawing them once,
    sized by how many they are. With more distinct outcomes than ``max_points`` (many or unequal
    repeats), rates are binned to a ``SCATTER_BIN`` grid instead; every task is still in some point."""
    tasks = shift.tasks
    pa = np.array([t.passes_a for t in tasks], dtype=np.int64)
    na = np.array([t.attempts_a for t in tasks], dtype=np.int64)
    pb = np.array([t.passes_b for t in tasks], dtype=np.int64)
    nb = np.array([t.attempts_b for t in tasks], dtype=np.int64)
    low_a, high_a = wilson_interval(pa, na)
    low_b, high_b = wilson_interval(pb, nb)
    frame = pl.DataFrame({
        "task_id": [t.task_id for t in tasks], "p_a": [t.p_a for t in tasks], "p_b": [t.p_b for t in tasks],
        "low_a": low_a, "high_a": high_a, "low_b": low_b, "high_b": high_b,
        "contribution": [t.contribution for t in tasks],
        "exact": [f"{a}/{m} → {b}/{n}" for a, m, b, n in zip(pa, na, pb, nb, strict=True)],
    })
    binned = frame["exact"].n_unique() > max_points
    if binned:
        frame = frame.with_columns(
            ((pl.col("p_a") / SCATTER_BIN).round() * SCATTER_BIN).alias("p_a"),
            ((pl.col("p_b") / SCATTER_BIN).round() * SCATTER_BIN).alias("p_b"),
        ).with_columns(pl.format("{} → {}", pl.col("p_a").round(2), pl.col("p_b").round(2)).alias("cell"))
    else:
        frame = frame.with_columns(pl.col("exact").alias("cell"))
    points = frame.group_by("cell").agg(
        pl.col("p_a").mean(), pl.col("p_b").mean(),
        pl.col("low_a").mean(), pl.col("high_a").mean(), pl.col("low_b").mean(), pl.col("high_b").mean(),
        pl.len().cast(pl.Int64).alias("n_tasks"), pl.col("contribution").sum(),
    ).with_columns(
        pl.when(pl.col("p_b") > pl.col("p_a")).then(pl.lit("improved"))
        .when(pl.col("p_b") < pl.col("p_a")).then(pl.lit("regressed")).otherwise(pl.lit("unchanged"))
        .alias("direction"),
    ).sort("p_a", "p_b", "cell")
    ordered = frame.sort("contribution", maintain_order=True)
    members = {str(cell): tuple(ids) for cell, ids in
               ordered.group_by("cell", maintain_order=True).agg(pl.col("task_id")).iter_rows()}
    return ScatterData(points=points, members=members, binned=binned)


def scatter_chart(shift: ScoreShift, data: ScatterData | None = None) -> alt.LayerChart:
    """Per-task pass rate in A (x) against B (y) with 95 % Wilson intervals; the diagonal is "no change",
    below it tasks got worse. Click a point to drill down into its tasks (selection ``CELL_PICK``)."""
    data = data if data is not None else scatter_data(shift)
    points = data.points
    pick = alt.selection_point(name=CELL_PICK, fields=["cell"], on="click", empty=False)
    directions = ["regressed", "improved", "unchanged"]
    # Padding keeps the largest points at 0 and 1 clear of the axes and their labels.
    rate = alt.Scale(domain=[0, 1], padding=SCATTER_PAD, nice=False)
    axis_a = alt.X("p_a:Q", scale=rate, title=f"pass rate in A ({shift.profile_a.run_id})")
    axis_b = alt.Y("p_b:Q", scale=rate, title=f"pass rate in B ({shift.profile_b.run_id})")
    base = alt.Chart(points).encode(x=axis_a, y=axis_b)
    err_a = base.mark_rule(opacity=0.5, color="#555").encode(x="low_a:Q", x2="high_a:Q")
    err_b = base.mark_rule(opacity=0.5, color="#555").encode(y="low_b:Q", y2="high_b:Q")
    dots = base.mark_circle(opacity=0.85, stroke="#222").encode(
        size=alt.Size("n_tasks:Q", scale=alt.Scale(range=[30, POINT_AREA_MAX], zero=False), title="tasks",
                      legend=alt.Legend(format="d", tickMinStep=1)),
        color=alt.Color("direction:N", scale=_scale(COLORS, directions), title=None),
        strokeWidth=alt.condition(pick, alt.value(2.0), alt.value(0.0)),
        tooltip=[alt.Tooltip("cell:N", title="outcome"), alt.Tooltip("n_tasks:Q", title="tasks"),
                 alt.Tooltip("contribution:Q", format="+.4f"),
                 alt.Tooltip("low_b:Q", format=".2f", title="B low"), alt.Tooltip("high_b:Q", format=".2f",
                                                                                 title="B high")],
    ).add_params(pick)
    diagonal = alt.Chart(pl.DataFrame({"a": [0.0, 1.0], "b": [0.0, 1.0]})).mark_line(
        strokeDash=[4, 4], color="#444").encode(x="a:Q", y="b:Q")
    how = f"binned to {SCATTER_BIN:g}" if data.binned else "one point per outcome"
    title = _title("Pass rate per task, A vs B", f"{shift.n_paired} tasks in {points.height} points ({how})")
    return alt.LayerChart(layer=[diagonal, err_a, err_b, dots], width=WIDTH, height=HEIGHT, title=title)


# ---- slices and bucket transitions -------------------------------------------------------------------
def slice_shift_frame(shift: ScoreShift, max_bars: int = SLICE_MAX_BARS) -> tuple[pl.DataFrame, int]:
    """The slice bars in the diagnosis' order (per column, most negative first) and how many were left out."""
    rows = [{"label": f"{s.column} = {s.value}", "column": s.column, "value": s.value, "n_tasks": s.n_tasks,
             "contribution": s.contribution, "pass_at_1_a": s.pass_at_1_a, "pass_at_1_b": s.pass_at_1_b,
             "n_regressed": s.n_regressed, "n_improved": s.n_improved, "direction": _direction(s.contribution)}
            for s in shift.slices]
    schema = {"label": pl.Utf8, "column": pl.Utf8, "value": pl.Utf8, "n_tasks": pl.Int64, "contribution": pl.Float64,
              "pass_at_1_a": pl.Float64, "pass_at_1_b": pl.Float64, "n_regressed": pl.Int64,
              "n_improved": pl.Int64, "direction": pl.Utf8}
    frame = pl.DataFrame(rows, schema=schema).with_row_index("order")
    return frame.head(max_bars), max(0, frame.height - max_bars)


def slice_shift_chart(shift: ScoreShift, max_bars: int = SLICE_MAX_BARS) -> alt.Chart:
    """Each slice value's share of Δpass@1 (its tasks' contributions summed)."""
    frame, left_out = slice_shift_frame(shift, max_bars)
    title = "Contribution by slice" + (f" ({left_out} more values not drawn)" if left_out else "")
    if frame.is_empty():
        title = "Contribution by slice: no slice columns (tasks carry no category-like metadata)"
    return alt.Chart(frame).mark_bar().encode(
        y=alt.Y("label:N", sort=alt.SortField("order"), title=None, axis=alt.Axis(labelLimit=200)),
        x=alt.X("contribution:Q", title="contribution to Δ pass@1"),
        color=alt.Color("direction:N", scale=_scale(COLORS, ["regressed", "improved", "unchanged"]), legend=None),
        tooltip=[alt.Tooltip("label:N"), alt.Tooltip("n_tasks:Q", title="tasks"),
                 alt.Tooltip("contribution:Q", format="+.4f"), alt.Tooltip("pass_at_1_a:Q", format=".3f"),
                 alt.Tooltip("pass_at_1_b:Q", format=".3f"), alt.Tooltip("n_regressed:Q"),
                 alt.Tooltip("n_improved:Q")],
    ).properties(width=WIDTH, height=max(60, 18 * frame.height), title=title)


def transition_frame(shift: ScoreShift) -> pl.DataFrame:
    """Every (bucket in A, bucket in B) cell, zeros included, in ``TASK_BUCKETS`` order; ``errored`` and ``missing``
    only when a task is in one; ``missing`` only when it
    occurs (a paired task is attempted on both sides, so normally it does not)."""
    used = [b for b in TASK_BUCKETS if b not in ("missing", "errored") or any(b in key for key in shift.transitions)]
    rows = [{"bucket_a": a, "bucket_b": b, "n_tasks": int(shift.transitions.get((a, b), 0))}
            for a in used for b in used]
    return pl.DataFrame(rows, schema={"bucket_a": pl.Utf8, "bucket_b": pl.Utf8, "n_tasks": pl.Int64})


def transition_heatmap(shift: ScoreShift) -> alt.LayerChart:
    """How paired tasks moved between outcome buckets (always / sometimes / never pass)."""
    frame = transition_frame(shift)
    order = list(dict.fromkeys(frame["bucket_a"].to_list()))
    base = alt.Chart(frame).encode(
        x=alt.X("bucket_b:N", sort=order, title="bucket in B", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("bucket_a:N", sort=order, title="bucket in A"),
    )
    cells = base.mark_rect().encode(color=alt.Color("n_tasks:Q", scale=alt.Scale(scheme="blues"), title="tasks"),
                                    tooltip=["bucket_a:N", "bucket_b:N", "n_tasks:Q"])
    top = max([1, *frame["n_tasks"].to_list()])
    text = base.mark_text(fontSize=13).encode(
        text="n_tasks:Q",
        color=alt.condition(alt.datum.n_tasks > top / 2, alt.value("white"), alt.value("black")),
    )
    return alt.LayerChart(layer=[cells, text], width=WIDTH * 0.7, height=HEIGHT * 0.8,
                          title="Bucket transitions (paired tasks)")


def score_shift_chart(shift: ScoreShift, top: int = WATERFALL_TOP, data: ScatterData | None = None) -> alt.VConcatChart:
    """The four ScoreShift charts in one figure: what a static rendering of the widget shows."""
    # Each chart keeps its own colours and sizes: shared scales would merge the waterfall's kinds with the
    # scatter's directions into one palette.
    bottom: list[alt.Chart | alt.LayerChart] = [*([slice_shift_chart(shift)] if shift.slices else []),
                                                transition_heatmap(shift)]
    return alt.vconcat(
        alt.hconcat(waterfall_chart(shift, top), scatter_chart(shift, data)).resolve_scale(
            color="independent", size="independent"),
        alt.hconcat(*bottom).resolve_scale(color="independent"),
    ).resolve_scale(color="independent", size="independent")


# ---- one run -----------------------------------------------------------------------------------------
def pass_at_k_frame(profile: RunProfile) -> pl.DataFrame:
    return pl.DataFrame([{"k": k, "estimate": e, "low": lo, "high": hi} for k, e, lo, hi in profile.pass_at_k_curve],
                        schema={"k": pl.Int64, "estimate": pl.Float64, "low": pl.Float64, "high": pl.Float64})


def pass_at_k_chart(profile: RunProfile) -> alt.LayerChart:
    """pass@k for k = 1 … repeats with its 95 % interval: how much sampling more often would buy."""
    frame = pass_at_k_frame(profile)
    base = alt.Chart(frame).encode(x=alt.X("k:O", title="k (attempts per task)", axis=alt.Axis(labelAngle=0)))
    band = base.mark_area(opacity=0.25, color=COLORS["total"]).encode(
        y=alt.Y("low:Q", scale=alt.Scale(domain=[0, 1]), title="pass@k"), y2="high:Q")
    line = base.mark_line(point=True, color=COLORS["total"]).encode(
        y="estimate:Q",
        tooltip=["k:O", alt.Tooltip("estimate:Q", format=".4f"), alt.Tooltip("low:Q", format=".4f"),
                 alt.Tooltip("high:Q", format=".4f")],
    )
    return alt.LayerChart(layer=[band, line], width=WIDTH * 0.8, height=HEIGHT * 0.8,
                     title=f"pass@k with 95 % intervals ({profile.run_id})")


def bucket_histogram_frame(profile: RunProfile) -> pl.DataFrame:
    """Tasks by number of passing attempts; 0 is the never bucket, ``k`` (every attempt) the always bucket."""
    rows = [{"passes": passes, "n_tasks": n,
             "bucket": "never" if passes == 0 else "always" if passes >= profile.k else "sometimes"}
            for passes, n in profile.pass_histogram]
    return pl.DataFrame(rows, schema={"passes": pl.Int64, "n_tasks": pl.Int64, "bucket": pl.Utf8})


def bucket_histogram(profile: RunProfile) -> alt.Chart:
    frame = bucket_histogram_frame(profile)
    shown = [b for b in TASK_BUCKETS if b != "errored" or profile.bucket_count(b)]
    counts = ", ".join(f"{b} {profile.bucket_count(b)}" for b in shown)
    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("passes:O", title="passing attempts per task", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("n_tasks:Q", title="tasks"),
        color=alt.Color("bucket:N", scale=_scale(BUCKET_COLORS, ["always", "sometimes", "never"]), title=None),
        tooltip=["passes:O", "n_tasks:Q", "bucket:N"],
    ).properties(width=WIDTH * 0.8, height=HEIGHT * 0.8, title=f"Buckets: {counts}")


def failure_frame(profile: RunProfile) -> pl.DataFrame:
    rows = [{"category": f.category, "n_attempts": f.n_attempts, "share": f.share, "n_tasks": f.n_tasks}
            for f in profile.failures]
    return pl.DataFrame(rows, schema={"category": pl.Utf8, "n_attempts": pl.Int64, "share": pl.Float64,
                                      "n_tasks": pl.Int64}).with_row_index("order")


def failure_chart(profile: RunProfile) -> alt.Chart:
    """Failed attempts by category ("wrong": answered but wrong), most frequent first."""
    frame = failure_frame(profile)
    title = "Failure categories" if frame.height else "Failure categories: no failed attempt"
    return alt.Chart(frame).mark_bar(color=COLORS["regressed"]).encode(
        y=alt.Y("category:N", sort=alt.SortField("order"), title=None),
        x=alt.X("n_attempts:Q", title="failed attempts"),
        tooltip=["category:N", "n_attempts:Q", alt.Tooltip("share:Q", format=".1%"), "n_tasks:Q"],
    ).properties(width=WIDTH * 0.8, height=max(60, 22 * frame.height), title=title)


def slice_frame(profile: RunProfile) -> pl.DataFrame:
    """The run's slice table: pass@1 and the never-pass rate per metadata value."""
    rows = [{"column": s.column, "value": s.value, "n_tasks": s.n_tasks, "pass_at_1": s.pass_at_1,
             "always_fail_rate": s.always_fail_rate, "n_attempts": s.n_attempts} for s in profile.slices]
    return pl.DataFrame(rows, schema={"column": pl.Utf8, "value": pl.Utf8, "n_tasks": pl.Int64,
                                      "pass_at_1": pl.Float64, "always_fail_rate": pl.Float64,
                                      "n_attempts": pl.Int64})


def slice_chart(profile: RunProfile, max_bars: int = SLICE_MAX_BARS) -> alt.Chart:
    """pass@1 per slice value (the slice table as bars, for the static figure)."""
    frame = slice_frame(profile).with_row_index("order").with_columns(
        pl.format("{} = {}", "column", "value").alias("label")).head(max_bars)
    return alt.Chart(frame).mark_bar(color=COLORS["total"]).encode(
        y=alt.Y("label:N", sort=alt.SortField("order"), title=None, axis=alt.Axis(labelLimit=200)),
        x=alt.X("pass_at_1:Q", scale=alt.Scale(domain=[0, 1]), title="pass@1"),
        tooltip=["label:N", "n_tasks:Q", alt.Tooltip("pass_at_1:Q", format=".4f"),
                 alt.Tooltip("always_fail_rate:Q", format=".1%", title="never pass")],
    ).properties(width=WIDTH * 0.8, height=max(60, 18 * frame.height), title="pass@1 by slice")


def run_overview_chart(profile: RunProfile) -> alt.VConcatChart:
    """The RunOverview charts in one figure (its static rendering), the slice table drawn as bars; a chart with
    nothing to draw (no failed attempt, no slice column) is left out."""
    top = alt.hconcat(pass_at_k_chart(profile), bucket_histogram(profile)).resolve_scale(color="independent")
    bottom = [*([failure_chart(profile)] if profile.failures else []),
              *([slice_chart(profile)] if profile.slices else [])]
    rows = [top, alt.hconcat(*bottom)] if bottom else [top]
    return alt.vconcat(*rows).resolve_scale(color="independent")


def task_label(task: TaskShift) -> str:
    """How a task is named in a picker: its index in B, its counts, its contribution."""
    return (f"task {task.task_idx_b}: {task.passes_a}/{task.attempts_a} → {task.passes_b}/{task.attempts_b} "
            f"({task.contribution:+.4f})")
