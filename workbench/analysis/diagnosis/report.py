"""A ``Diagnosis`` as BLADE's markdown report, or as JSON.

The report has BLADE's ten sections, always all of them and always in the same order (a section with
nothing to say says so), so reports of different runs can be read side by side and checked by tools.
Every claim names its tasks (``#task_idx``, at most ``CITED_MAX`` listed, the count always stated) and its
counts; the recommendations carry the rule that produced them and are labelled as heuristic. Text that came
from data (answers, responses, slice values) is escaped, so a response holding ``|`` or ``<script>`` stays
text; long responses go in fenced blocks that their own backticks cannot close.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
import shlex
from collections.abc import Sequence
from typing import Any

import workbench
from workbench.analysis.diagnosis.attribution import RANKING, points
from workbench.analysis.diagnosis.findings import agreed_wrong_answer, cite, plural
from workbench.analysis.diagnosis.types import (
    BUCKETS,
    TASK_BUCKETS,
    TAXONOMY_LABELS,
    AttemptEvidence,
    Diagnosis,
    Finding,
    RunDiagnosis,
    RunProfile,
    ScoreShift,
    TaskDive,
    TaskEvidence,
    TaskShift,
)
from workbench.analysis.markdown import md_escape

SECTIONS = (
    "Executive summary", "Artifact inventory", "Aggregate results", "Task outcome buckets", "Dominant failure modes",
    "Sometimes-pass deep dives", "Never-pass deep dives", "Cross-run comparison", "Recommendations",
    "Reproducibility notes",
)
"""BLADE's sections, in order; the report numbers them 1 to 10."""
HEURISTIC = "Heuristic: produced by rule `{rule}`; check the evidence."
RESPONSE_CHARS = 1200
"""A representative response longer than this is clipped in the report (the JSON keeps it whole)."""
ROWS_SHOWN = 15
"""Rows of the long tables (hotspots, cross tabs, slices of a shift)."""
NO_SECOND_RUN = "There is no second run: this report diagnoses one run."


# ---- markdown -------------------------------------------------------------------------------------
def render_markdown(d: Diagnosis, *, command: str | None = None) -> str:
    """The report. ``command`` is how to rerun it (``nel diagnose`` passes the one it ran); by default it is
    rebuilt from the artifacts and the settings."""
    bodies = (_summary(d), _inventory(d), _aggregate(d), _buckets(d), _failure_modes(d),
              _dives(d, "sometimes"), _dives(d, "never"), _cross_run(d), _recommendations(d),
              _reproducibility(d, command or rerun_command(d)))
    runs = _runs(d)
    title = " → ".join(r.profile.run_id for r in runs)
    out = [f"# Diagnosis: {md_escape(d.baseline.profile.benchmark)}, {md_escape(title)}", "",
           "_Every number below is computed from the runs; the recommendations are heuristic._", ""]
    out += [line for w in d.warnings for line in (f"> **Warning:** {md_escape(w)}", "")]
    for n, (name, body) in enumerate(zip(SECTIONS, bodies, strict=True), start=1):
        out += [f"## {n}. {name}", "", *body, ""]
    return "\n".join(out).rstrip() + "\n"


def _runs(d: Diagnosis) -> list[RunDiagnosis]:
    return [d.baseline] if d.candidate is None else [d.baseline, d.candidate]


def _label(d: Diagnosis, r: RunDiagnosis) -> str:
    role = "baseline" if r is d.baseline else "candidate"
    return f"{role} `{_code(r.profile.run_id)}`" if d.candidate is not None else f"run `{_code(r.profile.run_id)}`"


def _summary(d: Diagnosis) -> list[str]:
    lines = [f"- {_headline(r.profile, _label(d, r))}" for r in _runs(d)]
    s = d.shift
    if s is not None:
        down = [t for t in s.tasks if t.contribution < 0]
        up = [t for t in s.tasks if t.contribution > 0]
        lines.append(f"- Δpass@1 (candidate − baseline) = {s.delta:+.4f} over {s.n_paired} paired tasks "
                     f"({s.pass_at_1_a:.4f} → {s.pass_at_1_b:.4f}); it is the sum of the per-task contributions.")
        lines.append(f"- Fell: {cite(_idx_b(down))}. Rose: {cite(_idx_b(up))}. Unchanged: "
                     f"{s.n_paired - len(down) - len(up)} tasks.")
        if s.drivers_down:
            worst = ", ".join(f"#{e.task.task_idx_b} ({e.task.contribution:+.4f})" for e in s.drivers_down[:3])
            lines.append(f"- Largest drops: {worst}.")
    if d.findings:
        kinds = _counts(TAXONOMY_LABELS.get(f.category, f.category) for f in d.findings)
        lines.append(f"- {len(d.findings)} heuristic findings ({kinds}); see section 9.")
    else:
        lines.append("- No heuristic rule fired: no pattern in the evidence cleared its threshold.")
    return lines


def _headline(p: RunProfile, label: str) -> str:
    b = {k: p.bucket_count(k) for k in TASK_BUCKETS}
    top = p.failures[0] if p.failures else None
    failure = (f" Most frequent failure: {md_escape(top.category)} ({top.n_attempts} attempts on {top.n_tasks} "
               f"tasks, {top.share:.0%} of failed attempts).") if top else " No failed attempt."
    return (f"{_cap(label)} ({md_escape(p.model_id or 'unknown model')}, metric {md_escape(p.metric)}): "
            f"pass@1 {_f(p.pass_at_1)} [{_f(p.pass_at_1_low)}, {_f(p.pass_at_1_high)}] over {p.n_attempted} "
            f"attempted tasks ({p.n_attempts} attempts, up to {p.n_repeats} each); pass@{p.k} {_f(p.pass_at_k)}"
            f"{_over(p)}. Buckets: {b['always']} always, {b['sometimes']} sometimes, {b['never']} never, "
            f"{b['errored']} errored, {b['missing']} missing.{failure} Error rate {p.error_rate:.1%}.")


def _over(p: RunProfile, lead: str = "") -> str:
    """" over the 3 of 4 attempted tasks with 4 attempts" when pass@k cannot count every attempted task."""
    if 0 < p.pass_at_k_tasks < p.n_attempted:
        return f"{lead} over the {p.pass_at_k_tasks} of {p.n_attempted} attempted tasks with {p.k} attempts"
    return ""


def _inventory(d: Diagnosis) -> list[str]:
    roles = ["baseline", "candidate"] if d.candidate is not None else ["run"]
    rows = [(roles[i] if i < len(roles) else "", f"`{_code(a.run_id)}`", md_escape(a.source), str(a.n_tasks),
             str(a.n_attempts)) for i, a in enumerate(d.artifacts)]
    lines = [*_table(("role", "run", "source", "tasks", "attempts"), "lllrr", rows), ""]
    for r in _runs(d):
        p = r.profile
        lines.append(f"- {_cap(_label(d, r))}: benchmark {md_escape(p.benchmark)}, model "
                     f"{md_escape(p.model_id or 'unknown')}, {p.n_tasks} tasks × {p.n_repeats} repeats expected "
                     f"({p.n_expected_attempts} attempts), {p.n_attempts} recorded, {p.n_completed} completed; "
                     f"read from {md_escape(p.source)}.")
    return lines


def _aggregate(d: Diagnosis) -> list[str]:
    runs = _runs(d)
    head = ("measure", *(_label(d, r) for r in runs))
    measures: list[tuple[str, Any]] = [
        ("tasks attempted / listed", lambda p: f"{p.n_attempted} / {p.n_tasks}"),
        ("attempts (coverage)", lambda p: f"{p.n_attempts} ({p.coverage:.1%})"),
        ("pass@1 [95 % interval]", lambda p: f"{_f(p.pass_at_1)} [{_f(p.pass_at_1_low)}, {_f(p.pass_at_1_high)}]"),
        ("pass@k (oracle ceiling)", lambda p: f"{_f(p.pass_at_k)} (k = {p.k}{_over(p, ',')})"),
        ("consistency (all attempts pass)", lambda p: _f(p.consistency)),
        ("retry value (pass@k − pass@1 on the same tasks)", lambda p: _f(p.retry_value)),
        ("error rate", lambda p: f"{p.error_rate:.2%}"),
    ]
    rows = [(name, *(fn(r.profile) for r in runs)) for name, fn in measures]
    lines = _table(head, "l" + "r" * len(runs), rows)
    lines += ["", "pass@k by k (unbiased estimator, 95 % interval; each k over the tasks with at least k attempts, "
                  "how many in parentheses when that is not every attempted task):", ""]
    ks = sorted({k for r in runs for k, *_ in r.profile.pass_at_k_curve})
    curve = {id(r): {k: (e, lo, hi, _subset(r.profile, i)) for i, (k, e, lo, hi) in
                     enumerate(r.profile.pass_at_k_curve)} for r in runs}
    rows = [(str(k), *(_curve_cell(curve[id(r)].get(k)) for r in runs)) for k in ks]
    lines += _table(("k", *(_label(d, r) for r in runs)), "r" + "l" * len(runs), rows, empty="no attempts")
    for r in runs:
        lines += ["", f"By slice, {_label(d, r)}:", ""]
        srows = [(md_escape(s.column), md_escape(s.value), str(s.n_tasks), _f(s.pass_at_1),
                  f"{s.always_fail_rate:.0%}", str(s.n_attempts)) for s in r.profile.slices]
        lines += _table(("column", "value", "tasks", "pass@1", "never-pass", "attempts"), "llrrrr", srows,
                        empty="no slice column profiled")
        cost = [c for c in r.profile.cost if c.slice_value is None]
        if cost:
            lines += ["", f"Passing against failing attempts, {_label(d, r)}:", ""]
            lines += _table(("measure", "passing (n)", "failing (n)", "mean pass / fail", "median pass / fail"),
                            "lrrrr", [(c.measure, str(c.n_pass), str(c.n_fail),
                                       f"{_f(c.pass_mean, 1)} / {_f(c.fail_mean, 1)}",
                                       f"{_f(c.pass_median, 1)} / {_f(c.fail_median, 1)}") for c in cost])
    return lines


def _curve_cell(point: tuple[float, float, float, str] | None) -> str:
    return "-" if point is None else f"{_f(point[0])} [{_f(point[1])}, {_f(point[2])}]{point[3]}"


def _subset(p: RunProfile, i: int) -> str:
    """" (3 of 4 tasks)" when the curve's i-th point counts fewer than the attempted tasks."""
    n = p.curve_tasks[i] if i < len(p.curve_tasks) else p.n_attempted
    return f" ({n} of {p.n_attempted} tasks)" if n < p.n_attempted else ""


def _buckets(d: Diagnosis) -> list[str]:
    lines = ["always: every attempt passed; sometimes: some did; never: none did; errored: every attempt was an "
             "error (no verdict: says nothing about the model); missing: never attempted.", ""]
    for r in _runs(d):
        p = r.profile
        total = p.n_tasks or 1
        rows = [(b, str(p.bucket_count(b)), f"{p.bucket_count(b) / total:.1%}", cite(p.buckets.get(b, ())))
                for b in TASK_BUCKETS]
        lines += [f"{_cap(_label(d, r))}:", ""]
        lines += _table(("bucket", "tasks", "share", "task ids"), "lrrl", rows)
        hist = "; ".join(f"{plural(n, 'task')} with {passes} passing" for passes, n in p.pass_histogram)
        lines += ["", f"Passing attempts per attempted task: {hist or 'none'}.", ""]
    return lines[:-1]


def _failure_modes(d: Diagnosis) -> list[str]:
    lines: list[str] = []
    for r in _runs(d):
        p = r.profile
        lines += [f"{_cap(_label(d, r))}: {p.n_attempts - p.n_completed} attempts without a completed "
                  f"exchange; \"wrong\" is an answer that was extracted but did not pass.", ""]
        lines += _table(("category", "attempts", "share of failures", "tasks", "tasks read closely"), "lrrrl",
                        [(md_escape(f.category), str(f.n_attempts), f"{f.share:.1%}", str(f.n_tasks),
                          _dive_ids(r, f.category)) for f in p.failures], empty="no failed attempt")
        if p.error_hotspots:
            lines += ["", "Where errors concentrate (most errors first):", ""]
            lines += _table(("task", "errors / attempts", "categories"), "lrl",
                            [(f"#{h.task_idx}", f"{h.n_errors} / {h.n_attempts}", md_escape(", ".join(h.categories)))
                             for h in p.error_hotspots[:ROWS_SHOWN]])
        cells = sorted(p.failure_by_slice, key=lambda c: (-c.n_attempts, c.column, c.value, c.category))
        if cells:
            lines += ["", f"Failed attempts by slice (largest {min(len(cells), ROWS_SHOWN)} of {len(cells)} cells):",
                      ""]
            lines += _table(("column", "value", "category", "attempts"), "lllr",
                            [(md_escape(c.column), md_escape(c.value), md_escape(c.category), str(c.n_attempts))
                             for c in cells[:ROWS_SHOWN]])
        lines.append("")
    return lines[:-1]


def _dive_ids(r: RunDiagnosis, category: str) -> str:
    """The closely read tasks with an attempt of ``category`` (failure categories live on the attempts)."""
    idx = {e.task_idx for t in (*r.sometimes, *r.never) for e in t.evidence
           if not e.passed and (e.failure_category or "wrong") == category}
    return cite(idx) if idx else "-"


def _dives(d: Diagnosis, bucket: str) -> list[str]:
    lines: list[str] = []
    for r in _runs(d):
        dives = r.sometimes if bucket == "sometimes" else r.never
        in_bucket = r.profile.buckets.get(bucket, ())
        order = ("pass rate nearest 0.5 first" if bucket == "sometimes"
                 else "tasks whose attempts agree on one wrong answer first")
        lines += [f"{_cap(_label(d, r))}: {len(in_bucket)} {bucket}-pass tasks; {len(dives)} read closely "
                  f"({order}): {cite(t.task_idx for t in dives)}.", ""]
        for t in dives:
            lines += _dive(t)
    return lines[:-1] if lines and not lines[-1] else lines


def _dive(t: TaskDive) -> list[str]:
    lines = [f"### #{t.task_idx} in `{_code(t.run_id)}`: {t.passes} of {t.attempts} attempts passed", "",
             f"Task id `{_code(t.task_id)}`; expected answer: {_inline(t.expected_answer)}."]
    agreed = agreed_wrong_answer(t)
    if agreed is not None:
        lines.append(f"Every one of the {t.attempts} attempts answered {_inline(agreed)}: check the reference.")
    lines += [""]
    lines += _table(("answer", "attempts", "passed"), "lrl",
                    [(_inline(a.answer), str(a.n_attempts), "yes" if a.passed else "no") for a in t.answers],
                    empty="no attempt")
    lines += ["", *_representatives(t.representative_pass, t.representative_fail, t.diff_markdown)]
    return lines


def _representatives(good: AttemptEvidence | None, bad: AttemptEvidence | None, diff: str) -> list[str]:
    lines: list[str] = []
    for name, e in (("A passing attempt", good), ("A failing attempt", bad)):
        if e is None:
            continue
        why = f", {md_escape(e.failure_category)}" if e.failure_category else ""
        err = f"; error: {_inline(e.error)}" if e.error else ""
        lines += [f"{name} (`{_code(e.run_id)}` #{e.task_idx}, repeat {e.repeat}{why}; extracted "
                  f"{_inline(e.extracted_answer)}{err}):", "", *_fence(e.response), ""]
    if diff:
        lines += ["Word-level difference, pass against fail:", "", diff.rstrip(), ""]
    return lines


def _cross_run(d: Diagnosis) -> list[str]:
    s = d.shift
    if s is None:
        return [NO_SECOND_RUN + " Give a CANDIDATE to `nel diagnose` for the paired comparison."]
    a, b = _code(s.profile_a.run_id), _code(s.profile_b.run_id)
    total = sum(t.contribution for t in s.tasks)
    lines = [f"Paired on task identity: {s.n_paired} tasks. Only in `{a}` (its indices): {cite(s.only_a)}. "
             f"Only in `{b}`: {cite(s.only_b)}. Task numbers below are `{b}`'s.", "",
             f"pass@1 over the paired tasks: {_f(s.pass_at_1_a)} → {_f(s.pass_at_1_b)}, Δ = {s.delta:+.4f}. "
             f"Each task contributes (p_B − p_A) / {s.n_paired}; the contributions add up to {total:+.4f}. Every "
             "task's p is its own passes over its own attempts, so unequal repeats are fine.", ""]
    f = s.attempt_flips
    lines += [f"Attempts paired by repeat index ({f.n_pairs} pairs): {f.pass_to_fail} pass → fail, "
              f"{f.fail_to_pass} fail → pass, {f.pass_to_pass} pass → pass, {f.fail_to_fail} fail → fail.", ""]
    lines += ["Bucket transitions (rows: baseline, columns: candidate; paired tasks):", ""]
    used = [b for b in TASK_BUCKETS if b in BUCKETS or any(b in key for key in s.transitions)]
    lines += _table(("baseline \\ candidate", *used), "l" + "r" * len(used),
                    [(x, *(str(s.transitions.get((x, y), 0)) for y in used)) for x in used])
    lines += ["", *_groups(s), "", *_slice_shifts(s), "", *_drivers(s, "down"), *_drivers(s, "up")]
    return lines[:-1] if not lines[-1] else lines


def _groups(s: ScoreShift) -> list[str]:
    """What moved the score, by outcome transition: the groups add up to Δ, so nothing hides in a tail."""
    rows = [(md_escape(g.transition), str(g.n_tasks), points(g.contribution),
             md_escape(", ".join(f"{c.category} {c.n_tasks}" for c in g.categories[:3])) or "-",
             ", ".join(f"#{t.task_idx_b}" for t in g.tasks[:5]) or "-") for g in s.attribution.groups]
    total = sum(g.contribution for g in s.attribution.groups)
    return [f"What moved the score, by outcome transition (the groups add up to Δ = {points(total)}; within a "
            f"group, tasks are ranked {RANKING}):", "",
            *_table(("transition", "tasks", "contribution", "categories", "first tasks"), "lrrll", rows)]


def _slice_shifts(s: ScoreShift) -> list[str]:
    rows = [(md_escape(x.column), md_escape(x.value), str(x.n_tasks), _f(x.pass_at_1_a), _f(x.pass_at_1_b),
             f"{x.contribution:+.4f}", str(x.n_regressed), str(x.n_improved)) for x in s.slices[:ROWS_SHOWN]]
    more = f" (first {ROWS_SHOWN} of {len(s.slices)})" if len(s.slices) > ROWS_SHOWN else ""
    return [f"By slice, most negative contribution first{more}:", "",
            *_table(("column", "value", "tasks", "pass@1 A", "pass@1 B", "contribution", "fell", "rose"),
                    "llrrrrrr", rows, empty="no slice column profiled")]


def _drivers(s: ScoreShift, direction: str) -> list[str]:
    drivers = s.drivers_down if direction == "down" else s.drivers_up
    moved = [t for t in s.tasks if (t.contribution < 0 if direction == "down" else t.contribution > 0)]
    title = "pulled the score down most" if direction == "down" else "pulled the score up most"
    lines = [f"### Tasks that {title}: {len(drivers)} of the {len(moved)} that moved this way", ""]
    lines += _table(("task", "task id", "baseline", "candidate", "contribution", "errors A → B"), "lllrrr",
                    [_shift_row(e.task) for e in drivers], empty="none")
    lines.append("")
    for e in drivers:
        lines += _evidence(e)
    return lines


def _shift_row(t: TaskShift) -> tuple[str, ...]:
    return (f"#{t.task_idx_b}", f"`{_code(t.task_id)}`", f"{t.passes_a}/{t.attempts_a} ({t.bucket_a})",
            f"{t.passes_b}/{t.attempts_b} ({t.bucket_b})", f"{t.contribution:+.4f}", f"{t.errors_a} → {t.errors_b}")


def _evidence(e: TaskEvidence) -> list[str]:
    t = e.task
    answers = []
    for side, dive in (("baseline", e.dive_a), ("candidate", e.dive_b)):
        counts = "; ".join(f"{_inline(a.answer)} × {a.n_attempts}{' (pass)' if a.passed else ''}"
                           for a in dive.answers[:5])
        answers.append(f"- {side} answers: {counts or 'none'}")
    return [f"#### #{t.task_idx_b}: {t.passes_a}/{t.attempts_a} → {t.passes_b}/{t.attempts_b} passed "
            f"({t.contribution:+.4f})", "", f"Expected answer: {_inline(e.dive_b.expected_answer)}.", *answers, "",
            *_representatives(e.representative_pass, e.representative_fail, e.diff_markdown)]


def _recommendations(d: Diagnosis) -> list[str]:
    if not d.findings:
        return ["No rule fired: no pattern in the evidence cleared its threshold (docs/diagnose.md lists the "
                "rules and thresholds). Read the deep dives above for what the rules do not cover."]
    lines = ["Each recommendation comes from a documented rule over the numbers above. They are heuristics: "
             "they say where to look first, not what the cause is.", ""]
    for n, f in enumerate(d.findings, start=1):
        lines += _finding(n, f)
    return lines[:-1]


def _finding(n: int, f: Finding) -> list[str]:
    return [f"### {n}. {_cap(TAXONOMY_LABELS.get(f.category, f.category))}: {md_escape(f.title)}", "",
            f"- Evidence: {md_escape(f.detail)}",
            f"- Tasks cited: {cite(f.task_idx)}.",
            f"- Suggested intervention: {md_escape(f.suggestion)}",
            f"- _{HEURISTIC.format(rule=f.rule)}_", ""]


def _reproducibility(d: Diagnosis, command: str) -> list[str]:
    lines = [f"- {_cap(_label(d, r))}: benchmark {md_escape(r.profile.benchmark)}, read from "
             f"{md_escape(r.profile.source)}." for r in _runs(d)]
    lines += [f"- Input `{_code(a.run_id)}`: {md_escape(a.source)} ({a.n_tasks} tasks, {a.n_attempts} attempts)."
              for a in d.artifacts]
    lines += [f"- Metric: {md_escape(d.baseline.profile.metric)}; workbench version {workbench.__version__}.",
              "- The numbers are deterministic: the same runs and settings give the same report.", ""]
    lines += _table(("setting", "value"), "ll", [(md_escape(str(k)), md_escape(_setting(v)))
                                                 for k, v in d.settings.items()], empty="no settings recorded")
    lines += ["", "To rerun:", "", *_fence(command, lang="sh")]
    return lines


def rerun_command(d: Diagnosis) -> str:
    """``nel diagnose`` with the inputs and settings of ``d``: an export directory as such, a store run by id."""
    args = ["nel", "diagnose"]
    store: str | None = None
    for a in d.artifacts:
        path = a.source.removeprefix("store:").split("#", 1)[0]
        if a.source.startswith("store:") or path.endswith(".duckdb"):
            args.append(a.run_id)
            store = store or path
        else:
            args.append(a.source)
    args += ["--metric", d.baseline.profile.metric]
    if not str(d.settings.get("slices_chosen", "given")).startswith("default"):
        for column in _setting_list(d.settings.get("slices")):
            args += ["--slice", column]
    if isinstance(d.settings.get("top"), int):
        args += ["--top", str(d.settings["top"])]
    if store:
        args += ["--store", store]
    return shlex.join(args)


def _setting_list(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def _setting(value: object) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) or "-"
    return "-" if value is None else str(value)


# ---- markdown pieces ------------------------------------------------------------------------------
def _table(head: Sequence[str], align: str, rows: Sequence[Sequence[str]], *, empty: str = "none") -> list[str]:
    """A GitHub table; cells are already escaped. ``empty`` is said instead of a table without rows."""
    if not rows:
        return [f"_{empty}_"]
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    return out + ["| " + " | ".join(row) + " |" for row in rows]


def _fence(text: str, lang: str = "text") -> list[str]:
    """A fenced block longer than any backtick run inside, so the text cannot close it."""
    clipped = text if len(text) <= RESPONSE_CHARS else text[:RESPONSE_CHARS] + f"\n… ({len(text)} characters)"
    longest = max((len(m) for m in re.findall(r"`+", clipped)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{lang}", clipped.rstrip("\n") or "(empty)", fence]


def _inline(text: str | None) -> str:
    if text is None:
        return "_(none)_"
    flat = " ".join(text.split())
    return md_escape(flat if len(flat) <= 80 else flat[:79] + "…") if flat else "_(empty)_"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]  # str.capitalize would lower-case the run ids


def _code(text: str) -> str:
    return text.replace("`", "'")


def _f(x: float, digits: int = 4) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def _idx_b(tasks: Sequence[TaskShift]) -> list[int]:
    return [t.task_idx_b for t in tasks]


def _counts(items: Any) -> str:
    seen: dict[str, int] = {}
    for x in items:
        seen[x] = seen.get(x, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in seen.items())


# ---- JSON -----------------------------------------------------------------------------------------
def diagnosis_json(d: Diagnosis, *, command: str | None = None) -> dict[str, Any]:
    """``d`` as JSON-native data: dataclasses → dicts, tuples → lists, NaN and infinities → None, and the
    transition keys ``(a, b)`` → ``"a→b"``. ``sections`` lists the markdown report's section titles and
    ``command`` how to rerun (as in ``render_markdown``)."""
    data = _jsonable(d)
    assert isinstance(data, dict)
    return {"version": workbench.__version__, "sections": list(SECTIONS), "command": command or rerun_command(d),
            **data}


def _jsonable(x: object) -> object:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return {_key(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if x is None or isinstance(x, str | bool):
        return x
    if isinstance(x, numbers.Integral):  # numpy integers included
        return int(x)
    if isinstance(x, numbers.Real):
        v = float(x)
        return None if math.isnan(v) or math.isinf(v) else v
    return str(x)


def _key(k: object) -> str:
    return "→".join(str(p) for p in k) if isinstance(k, tuple) else str(k)
