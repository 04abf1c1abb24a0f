"""``nel compare`` and ``nel gate``: thin; ``workbench.analysis`` pairs, tests and decides, this module
loads the two sides, lays the numbers out and maps the verdict to an exit code.

Exit codes. ``nel compare``: 0 whatever the verdict; with ``--strict`` 1 on BLOCK and 2 on WARN or
INCONCLUSIVE. ``nel gate``: 0 whatever the decision; with ``--strict`` 1 on NO-GO and 2 on INCONCLUSIVE.
Both: 2 for a usage error (an unknown run, a directory without an export, a policy mistake).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from workbench.analysis.compare import Comparison, Flip, compare_runs, regression_report
from workbench.analysis.sources import RunData, load_run
from workbench.cli.paths import store_path
from workbench.errors import UsageError

if TYPE_CHECKING:
    from workbench.analysis.gate import BenchmarkResult, GateResult

FLIPS_SHOWN = 10
COMPARE_EXIT = {"PASS": 0, "BLOCK": 1, "WARN": 2, "INCONCLUSIVE": 2}
GATE_EXIT = {"GO": 0, "NO-GO": 1, "INCONCLUSIVE": 2}
_TEST_LABELS = {
    "mcnemar_exact": "McNemar exact", "paired_t": "paired t", "wilcoxon": "Wilcoxon signed-rank",
    "sign_flip_permutation": "sign-flip permutation", "mann_whitney_u": "Mann-Whitney U",
}


# ---- nel compare ---------------------------------------------------------------------------------
def cmd_compare(args: argparse.Namespace) -> int:
    if not 0.0 <= args.max_drop <= 1.0:
        raise UsageError(f"--max-drop must be within [0, 1], got {args.max_drop}")
    store = store_path(args)
    baseline = load_side(args.baseline, store, args.metric)
    candidate = load_side(args.candidate, store, baseline.metric)
    others = [
        (load_side(args.baseline, store, metric), load_side(args.candidate, store, metric))
        for metric in baseline.metrics if metric != baseline.metric and metric in candidate.metrics
    ]
    comparison = compare_runs(baseline, candidate, max_drop=args.max_drop, seed=args.seed, other_metrics=others)
    sys.stdout.write(render_comparison(comparison, show_flips=args.show_flips) + "\n")
    if args.output:
        print(f"wrote {write_report(args.output, 'regression.json', regression_report(comparison))}")
    return COMPARE_EXIT[comparison.verdict] if args.strict else 0


def write_report(output: str, default_name: str, report: dict[str, Any]) -> Path:
    """``--output`` of compare and gate: the JSON report at ``output``, or ``default_name`` in it when it is a
    directory (or ends with a slash); written atomically, before the exit code is decided."""
    from workbench.export.artifacts import write_json  # atomic; imported only when needed

    out = Path(output)
    if out.is_dir() or output.endswith(("/", os.sep)):
        out = out / default_name
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return write_json(out, report)
    except OSError as exc:
        raise UsageError(f"--output {output}: cannot write the report: {exc.strerror or exc}") from None


def load_side(source: str, store: Path, metric: str | None) -> RunData:
    """A run id in the store, or a results directory: one holding an ``eval-*.json``, or an output directory
    with exactly one exported run below it (``OUTPUT_DIR/runs/RUN_ID/``)."""
    path = Path(source)
    if path.is_dir() and not any(path.glob("eval-*.json")):
        found = sorted(path.rglob("eval-*.json"))
        if len(found) > 1:
            names = ", ".join(str(p.parent) for p in found[:5]) + (", ..." if len(found) > 5 else "")
            raise UsageError(f"{path}: {len(found)} exported runs below it ({names}); name one of them")
        if found:
            path = found[0]
    return load_run(str(path), store=store, metric=metric)


def render_comparison(c: Comparison, *, show_flips: bool = False) -> str:
    """The comparison as plain text: runs, coverage, deltas and tests, categories, runtime, flips, verdict."""
    s = c.score
    b, k = c.baseline, c.candidate
    cov = c.coverage
    lines = [
        f"compare {b.benchmark}, metric {s.metric}: candidate − baseline, paired by task (95 % intervals)",
        f"  baseline   {b.run_id}  ({_model(b.model_id)}, {b.n_tasks_attempted} tasks x {b.n_repeats}, "
        f"{b.n_errors} errored attempts)  {b.source}",
        f"  candidate  {k.run_id}  ({_model(k.model_id)}, {k.n_tasks_attempted} tasks x {k.n_repeats}, "
        f"{k.n_errors} errored attempts)  {k.source}",
        f"  paired     {cov.n_paired} tasks; {len(cov.only_baseline)} only in the baseline, "
        f"{len(cov.only_candidate)} only in the candidate"
        + (f"; never attempted: {cov.unattempted_baseline} baseline, {cov.unattempted_candidate} candidate"
           if cov.unattempted_baseline or cov.unattempted_candidate else ""),
    ]
    for label, ids in (("only in the baseline", cov.only_baseline), ("only in the candidate", cov.only_candidate)):
        if ids:
            shown = ", ".join(ids[:FLIPS_SHOWN]) + (f", ... ({len(ids)} in all)" if len(ids) > FLIPS_SHOWN else "")
            lines.append(f"    {label}: {shown}")
    lines += ["", *_score_table(c), "", f"tests of {s.metric} (two-sided, {s.n_tasks} paired tasks)"]
    for t in s.tests:
        label = _TEST_LABELS.get(t.name, t.name)
        if t.applicable:
            note = f"; {t.note}" if t.note else ""
            lines.append(f"  {label:<22} p = {_p(t.p_value)}  ({t.method}{note})")
        else:
            lines.append(f"  {label:<22} n/a    ({t.note})")
    lines.append(f"  effect size d_z {_num(s.effect_size, 3)}; smallest change detectable at 80 % power "
                 f"{_mde(s.mde, s.n_tasks)}; paired tasks needed to detect a drop of {c.max_drop:g}: "
                 f"{s.tasks_needed if s.tasks_needed is not None else '-'}")
    if c.categories:
        collapsed = c.collapsed
        lines += ["", f"by {c.category_column} (paired within each)"]
        cat_rows = [("", "tasks", "baseline", "candidate", "delta", "95 % interval", "p (t)", "worse", "better")]
        cat_rows += [(d.category + (" !" if d in collapsed else ""), str(d.n_tasks), _num(d.baseline),
                      _num(d.candidate), _signed(d.delta), _ci(d.low, d.high), _p(d.p_value), str(d.n_regressions),
                      str(d.n_improvements)) for d in c.categories]
        lines += _table(cat_rows, right=set(range(1, 9)))
        lines.append("  (interval: paired t, cut to [-1, 1] for scores in [0, 1], widened when few tasks moved"
                     + ("; !: collapsed, named in the verdict)" if collapsed else ")"))
    lines += ["", "runtime (all attempts)"]
    rows = [("", "baseline", "candidate", "delta")]
    for r in c.runtime:
        digits = 4 if r.name == "error_rate" else 2
        rows.append((r.name, _num(r.baseline, digits), _num(r.candidate, digits), _signed(r.delta, digits)))
    lines += _table(rows, right={1, 2, 3})
    lines += ["", *_flip_lines(c, show_flips), "", f"verdict: {c.verdict}"]
    lines += [f"  - {reason}" for reason in c.reasons]
    lines += [f"  ! {warning}" for warning in c.warnings]
    return "\n".join(lines)


def _score_table(c: Comparison) -> list[str]:
    rows = [("metric", "baseline", "candidate", "delta", "95 % interval (t)", "bootstrap", "decision interval")]
    for m in (c.score, *c.other_scores):
        rows.append((m.metric, _num(m.baseline), _num(m.candidate), _signed(m.delta), _ci(m.low, m.high),
                     _ci(m.boot_low, m.boot_high), _ci(m.decision_low, m.decision_high)))
    return [*_table(rows, right={1, 2, 3}),
            "  (decision interval: the t interval, widened when few tasks moved; the verdict reads it; "
            f"{c.score.metric}: {c.score.decision_method})"]


def _flip_lines(c: Comparison, show_all: bool) -> list[str]:
    f = c.flips
    lines = [f"flips: {len(f.regressions)} tasks fell, {len(f.improvements)} rose, {f.n_unchanged} unchanged "
             f"({f.n_stable_correct} always right, {f.n_stable_wrong} always wrong)"]
    for title, items in (("regressions (largest drop first)", f.regressions),
                         ("improvements (largest gain first)", f.improvements)):
        if not items:
            continue
        shown = items if show_all else items[:FLIPS_SHOWN]
        more = "" if len(shown) == len(items) else f"; top {len(shown)} of {len(items)}, --show-flips for all"
        lines.append(f"  {title}{more}")
        lines += [f"    {_flip(x)}" for x in shown]
    return lines


def _flip(x: Flip) -> str:
    cat = f"  [{x.category}]" if x.category else ""
    errors = ""
    if x.baseline_errors or x.candidate_errors:
        errors = f"  errors {x.baseline_errors} -> {x.candidate_errors}"
    return (f"#{x.task_idx:<6} {x.task_id}  {x.baseline_passes}/{x.baseline_attempts} -> "
            f"{x.candidate_passes}/{x.candidate_attempts} passed  ({x.baseline_score:.3f} -> {x.candidate_score:.3f}, "
            f"{x.delta:+.3f}){errors}{cat}")


# ---- nel gate ------------------------------------------------------------------------------------
def cmd_gate(args: argparse.Namespace) -> int:
    from workbench.analysis.gate import load_policy, run_gate  # the policy loader brings the config schema

    policy = load_policy(Path(args.policy))
    result = run_gate(Path(args.baseline), Path(args.candidate), policy, seed=args.seed)
    if args.format == "json":
        sys.stdout.buffer.write(orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")
    else:
        sys.stdout.write(render_gate(result, verbose=args.verbose) + "\n")
    if args.output:
        written = write_report(args.output, "gate.json", result.to_dict())
        print(f"wrote {written}", file=sys.stderr if args.format == "json" else sys.stdout)
    return GATE_EXIT[result.decision] if args.strict else 0


def render_gate(g: GateResult, *, verbose: bool = False) -> str:
    """The gate as plain text: one row per benchmark, the decision and its reasons."""
    title = f"policy {g.policy.name}" if g.policy.name else f"policy {g.policy.file}"
    lines = [f"gate: {title}: {g.decision}", ""]
    rows = [("tier", "benchmark", "status", "metric", "baseline", "candidate", "delta", "95 % interval",
             "tolerance", "tasks")]
    for r in g.benchmarks:
        s = r.score
        rows.append((r.rule.tier, r.rule.benchmark, r.status, r.metric or "-",
                     _num(s.baseline) if s else "-", _num(s.candidate) if s else "-",
                     _signed(s.delta) if s else "-", _ci(s.decision_low, s.decision_high) if s else "-",
                     _num(r.tolerance), str(s.n_tasks) if s else "-"))
    lines += _table(rows, right={4, 5, 6, 8, 9})
    if verbose:
        for r in g.benchmarks:
            lines += ["", *_gate_details(r)]
    lines += ["", f"decision: {g.decision}"]
    lines += [f"  - {reason}" for reason in g.reasons]
    notes = [n for r in g.benchmarks for n in r.notes]
    if g.unlisted:
        notes.append(f"not in the policy (not gated): {', '.join(g.unlisted)}")
    lines += [f"  note: {n}" for n in notes]
    return "\n".join(lines)


def _gate_details(r: BenchmarkResult) -> list[str]:
    rule = r.rule
    limits = [f"max_drop {rule.max_drop:g}" if rule.max_drop is not None else "",
              f"max_relative_drop {rule.max_relative_drop:g}" if rule.max_relative_drop is not None else ""]
    lines = [f"{rule.benchmark} ({rule.tier}, {rule.direction}, {', '.join(x for x in limits if x)}): {r.status}",
             f"  {r.reason}"]
    s = r.score
    if s is None:
        return lines
    lines.append(f"  runs: baseline {r.baseline_run}, candidate {r.candidate_run}")
    lines.append("  p-values: " + ", ".join(f"{_TEST_LABELS.get(t.name, t.name)} {_p(t.p_value)}" for t in s.tests))
    lines.append(f"  t interval {_ci(s.low, s.high)}, bootstrap {_ci(s.boot_low, s.boot_high)}; "
                 f"d_z {_num(s.effect_size, 3)}; detectable at 80 % power {_mde(s.mde, s.n_tasks)}; "
                 f"tasks that would settle it {r.tasks_needed if r.tasks_needed is not None else '-'}")
    return lines


# ---- formatting ----------------------------------------------------------------------------------
def _model(model_id: str | None) -> str:
    return f"model {model_id}" if model_id else "model unknown"


def _mde(mde: float, n_tasks: int) -> str:
    """The minimum detectable effect, or why there is none (not ``0.0000``: without spread it is undefined)."""
    if not math.isnan(mde):
        return f"{mde:.4f}"
    return "undefined (no spread in the paired differences)" if n_tasks >= 2 else "- (fewer than two tasks)"


def _num(x: float, digits: int = 4) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def _signed(x: float, digits: int = 4) -> str:
    return "-" if math.isnan(x) else f"{x:+.{digits}f}"


def _p(p: float) -> str:
    if math.isnan(p):
        return "-"
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def _ci(low: float, high: float) -> str:
    return "-" if math.isnan(low) or math.isnan(high) else f"[{low:+.4f}, {high:+.4f}]"


def _table(rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    """Columns padded to their widest cell; ``right`` columns aligned right (numbers)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        out.append("  " + "  ".join(cells).rstrip())
    return out
