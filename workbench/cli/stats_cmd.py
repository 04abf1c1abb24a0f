"""``nel eval stats RUN_OR_DIR``: a run's statistics with analytic and bootstrap intervals, per slice.

Thin: ``workbench.analysis`` loads and computes, this module only lays the numbers out.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys

import orjson

from workbench.analysis.run_stats import BUCKETS, RunStatistics, SliceStatistics, run_statistics
from workbench.analysis.sources import load_run
from workbench.cli.paths import store_path
from workbench.cli.render import render_figures
from workbench.errors import UsageError


def cmd_eval_stats(args: argparse.Namespace) -> int:
    if args.bootstrap < 0:
        raise UsageError(f"--bootstrap must be 0 (none) or a number of resamples, got {args.bootstrap}")
    data = load_run(args.source, store=store_path(args), metric=args.metric, figures=True)
    stats = run_statistics(data, by=tuple(args.by or ()), cluster=args.cluster, bootstrap=args.bootstrap,
                           seed=args.seed)
    figures = data.benchmark_figures
    if args.format == "json":
        out = {**stats.to_dict(), "benchmark_figures": None if figures is None else dataclasses.asdict(figures)}
        sys.stdout.buffer.write(orjson.dumps(out, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        text = render_stats(stats)
        if figures is not None:
            text += "\n\n" + "\n".join(render_figures(figures, indent=""))
        sys.stdout.write(text + "\n")
    return 0


def render_stats(stats: RunStatistics) -> str:
    """The statistics as aligned plain-text tables."""
    o = stats.overall
    model = f", model {stats.model_id}" if stats.model_id else ""
    lines = [
        f"run {stats.run_id} ({stats.benchmark}{model}), metric {stats.metric}",
        f"  {o.n_tasks} tasks x {stats.n_repeats} repeats: {o.n_tasks_attempted} attempted, {o.n_attempts} attempts, "
        f"{o.n_pass} passed, {o.n_errors} errored (no verdict: the exchange or the scorer failed; counted as "
        "failures)",
        f"  {_method(stats)}",
        "",
    ]
    slices = (o, *stats.slices)
    rows: list[tuple[str, ...]] = [("slice", "metric", "value", "95% CI analytic", "method", "95% CI bootstrap",
                                    "tasks")]
    notes: list[str] = []
    for s in slices:
        estimates = list(s.pass_at_k.values()) + ([] if stats.binary else [s.mean_reward])
        for i, e in enumerate(estimates):
            mark = ""
            if e.note:
                notes.append(f"  [{len(notes) + 1}] {s.label} {e.name}: {e.note}")
                mark = f" [{len(notes)}]"
            rows.append((s.label if i == 0 else "", e.name, _num(e.value), _ci(e.low, e.high), e.method,
                         _ci(e.boot_low, e.boot_high) if stats.n_resamples else "-", f"{e.n_tasks}{mark}"))
    lines += _table(rows, right={2, 6})
    lines.append("  (-: no interval; tasks: those that define the number, for pass@k those with at least k attempts)")
    lines += notes
    lines.append("")
    buckets = [b for b in BUCKETS if b != "missing"]
    counts: list[tuple[str, ...]] = [("slice", "tasks", "attempts", "passed", "errors", *buckets, "missing")]
    for s in slices:
        counts.append((s.label, str(s.n_tasks), str(s.n_attempts), str(s.n_pass), str(s.n_errors),
                       *(str(s.buckets[b]) for b in buckets), str(s.buckets["missing"])))
    lines += _table(counts, right=set(range(1, len(counts[0]))))
    lines.append("  errors: attempts without a verdict (counted as failures); always..missing: tasks by outcome "
                 "(errored: every attempt an error; missing: no attempt, a shard that never ran included)")
    lines.append("")
    lines += _variance(o)
    return "\n".join(lines)


def _method(stats: RunStatistics) -> str:
    analytic = ("Wilson score when every task scored 0 or 1, else Student t on the across-task standard error, "
                "cut to [0, 1] and never narrower than the zero-spread floor")
    units = "task"
    if stats.cluster:
        analytic = (f"cluster-robust t (clustered by {stats.cluster}, {stats.overall.pass_at_k[1].n_clusters} "
                    "clusters), cut to [0, 1] and never narrower than the zero-spread floor")
        units = f"{stats.cluster} cluster"
    boot = (f"{stats.n_resamples:,} {units} resamples, seed {stats.seed}" if stats.n_resamples else "not run")
    return f"95% intervals: analytic = {analytic}; bootstrap = {boot}"


def _variance(s: SliceStatistics) -> list[str]:
    v = s.variance
    if math.isnan(v.within) or math.isnan(v.se):
        return ["variance split: needs at least two tasks, one of them with two attempts"]
    share = f"{100 * v.repeat_share:.0f}%" if not math.isnan(v.repeat_share) else "-"
    return [
        f"variance (all tasks): within-task {_num(v.within)} (repeat noise), across-task {_num(v.across)}; "
        f"repeat noise makes {share} of the variance of the mean",
        f"  standard error {_num(v.se)} now; {_num(v.se_double_repeats)} with twice the repeats, "
        f"{_num(v.se_double_tasks)} with twice the tasks, {_num(v.se_infinite_repeats)} at best from repeats alone",
    ]


def _num(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.4f}"


def _ci(low: float, high: float) -> str:
    return "-" if math.isnan(low) or math.isnan(high) else f"[{low:.4f}, {high:.4f}]"


def _table(rows: list[tuple[str, ...]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                      for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip() for row in rows]

