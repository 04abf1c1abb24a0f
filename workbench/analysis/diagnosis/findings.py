"""The heuristic rules: each reads the diagnosis' numbers and, when its evidence clears a named threshold,
returns a ``Finding`` in BLADE's taxonomy with the tasks and counts behind it.

The rules are deliberately simple and documented one by one in ``docs/diagnose.md`` (rule id → category →
threshold), so that a reader can check every suggestion against the evidence it cites. They are heuristics:
a finding says where to look first, never what the cause is. Below its threshold a rule stays silent, so a
clean run yields no finding at all. Order is fixed (infrastructure first: it can invalidate every other
reading), so the same inputs always give the same findings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from workbench.analysis.diagnosis.types import (
    AttemptEvidence,
    ErrorHotspot,
    Finding,
    RunDiagnosis,
    RunProfile,
    ScoreShift,
    SliceRow,
    TaskDive,
    TaskShift,
)

CITED_MAX = 10
"""Task ids a finding's text lists; the text always states how many tasks there are in all, and
``Finding.task_idx`` holds every one of them."""

# ---- thresholds: one run --------------------------------------------------------------------------
ERROR_RATE_MIN = 0.05
"""``run.high_error_rate``: share of attempts whose exchange failed (transport error, timeout)."""
ERROR_MIN_ATTEMPTS = 3
"""Errored attempts needed before any error rule speaks (a single blip is not a pattern)."""
HOTSPOT_TASK_ERROR_SHARE = 0.5
"""``run.error_hotspots``: a task is a hotspot when at least this share of its attempts errored …"""
HOTSPOT_ERROR_SHARE = 0.5
"""… and the hotspots together hold at least this share of the run's errored attempts."""
MISSING_MIN_TASKS = 1
"""``run.incomplete``: never-attempted tasks that make a run incomplete."""
ANSWER_FAILURE_SHARE_MIN = 0.2
"""``run.format_errors`` / ``run.refusals`` / ``run.empty_responses``: share of the failed attempts."""
ANSWER_FAILURE_MIN_ATTEMPTS = 3
"""… and at least this many such attempts."""
RETRY_VALUE_MIN = 0.10
"""``run.unreliable``: pass@k − pass@1, the score left on the table by inconsistent sampling …"""
SOMETIMES_MIN_TASKS = 3
"""… with at least this many sometimes-pass tasks."""
NEVER_SLICE_MIN_TASKS = 3
"""``run.never_slice``: never-pass tasks within one slice value …"""
NEVER_SLICE_SHARE_MIN = 0.5
"""… that hold at least this share of the run's never-pass tasks …"""
NEVER_SLICE_LIFT_MIN = 2.0
"""… in a value whose never-pass rate is at least this multiple of the rest of the run's."""
AGREED_MIN_ATTEMPTS = 3
"""``run.agreed_wrong_answer``: a never-pass task whose every attempt (at least this many) gave one answer."""

# ---- thresholds: a shift --------------------------------------------------------------------------
SHIFT_ERROR_TASK_SHARE = 0.5
"""``shift.regressions_errors``: a regressed task counts as errored when this share of its B attempts errored …"""
SHIFT_ERROR_DROP_SHARE = 0.5
"""… and such tasks account for at least this share of the summed negative contributions."""
SPIKE_MIN_NEW_ATTEMPTS = 3
"""``shift.format_error_spike`` (and refusal / empty-response): attempts more in B than in A …"""
SPIKE_RATE_RATIO = 2.0
"""… with B's per-attempt rate at least this multiple of A's …"""
SPIKE_MIN_RATE = 0.03
"""… and at least this share of B's attempts (a handful in hundreds is noise, not a harness change)."""
LOST_SLICE_MIN_TASKS = 3
"""``shift.lost_in_slice``: tasks that passed at least once in A and never in B, within one slice value …"""
LOST_SLICE_SHARE_MIN = 0.5
"""… holding at least this share of all such lost tasks …"""
LOST_SLICE_LIFT_MIN = 1.5
"""… and over-represented: their share of lost tasks / the value's share of paired tasks."""
CONSISTENCY_LOSS_MIN_TASKS = 3
"""``shift.consistency_loss``: always → sometimes transitions …"""
CONSISTENCY_LOSS_SHARE_MIN = 0.10
"""… that are at least this share of the paired tasks."""


@dataclass(frozen=True, slots=True)
class _AnswerFailure:
    """A failure category decided after the response arrived, and what its rules say."""

    category: str
    taxonomy: str
    run_rule: str
    shift_rule: str
    label: str
    suggestion: str


_ANSWER_FAILURES = (
    _AnswerFailure("format_error", "behavioural_issue", "run.format_errors", "shift.format_error_spike",
                   "format errors (no answer could be extracted)",
                   "Check the prompt's answer-format instruction and the harness's extraction (regex, parser, "
                   "chat template) against the cited responses before blaming the model."),
    _AnswerFailure("refusal", "behavioural_issue", "run.refusals", "shift.refusal_spike", "refusals",
                   "Read the cited refusals: a system prompt or safety setting may be over-triggering; adjust the "
                   "prompt or the model's settings."),
    _AnswerFailure("empty_response", "behavioural_issue", "run.empty_responses", "shift.empty_response_spike",
                   "empty responses",
                   "Check max_tokens, stop sequences and reasoning/content splitting in the harness: empty "
                   "answers usually come from the request, not from the model's knowledge."),
    _AnswerFailure("max_turns_exhausted", "behavioural_issue", "run.turns_exhausted", "shift.turns_exhausted_spike",
                   "agents out of turns (still calling tools at max_turns)",
                   "Read the cited transcripts (step_tool_calls): an agent repeating the same call needs to be told "
                   "when to stop; raise max_turns only where it was still making progress."),
)


# ---- one run --------------------------------------------------------------------------------------
def run_findings(d: RunDiagnosis) -> tuple[Finding, ...]:
    """Every rule over one run, in a fixed order; ``()`` when nothing clears its threshold."""
    found = [
        _incomplete(d.profile),
        _high_error_rate(d.profile),
        _error_hotspots(d.profile),
        _missing_expected(d),
        _agreed_wrong_answer(d),
        *(_answer_failures(d, spec) for spec in _ANSWER_FAILURES),
        _unreliable(d.profile),
        *_never_slices(d.profile),
    ]
    return tuple(f for f in found if f is not None)


def _incomplete(p: RunProfile) -> Finding | None:
    """Never-attempted tasks: the run stopped or skipped work, so its score covers part of the benchmark."""
    missing = p.buckets.get("missing", ())
    if len(missing) < MISSING_MIN_TASKS:
        return None
    return Finding(
        category="infrastructure",
        title=f"{len(missing)} of {p.n_tasks} tasks were never attempted",
        detail=f"Run {p.run_id}: {p.n_attempts} of {p.n_expected_attempts} expected attempts "
               f"(coverage {p.coverage:.1%}); never attempted: {cite(missing)}.",
        task_idx=_ids(missing),
        rule="run.incomplete",
        suggestion="Resume the run (or check why these tasks were skipped) before reading the score: pass@1 "
                   "covers the attempted tasks only.",
    )


def _n_errors(p: RunProfile) -> int:
    return round(p.error_rate * p.n_attempts)


def _high_error_rate(p: RunProfile) -> Finding | None:
    """Many failed exchanges: the score measures the serving stack as much as the model."""
    n_errors = _n_errors(p)
    if p.error_rate < ERROR_RATE_MIN or n_errors < ERROR_MIN_ATTEMPTS:
        return None
    idx = [h.task_idx for h in p.error_hotspots]
    return Finding(
        category="infrastructure",
        title=f"{p.error_rate:.1%} of attempts got no answer back ({n_errors} of {p.n_attempts})",
        detail=f"Run {p.run_id}: {n_errors} errored attempts ({_error_kinds(p.error_hotspots)}), counted as "
               f"failures; tasks with the most errors: {cite(idx)}.",
        task_idx=_ids(idx),
        rule="run.high_error_rate",
        suggestion="Fix the endpoint (rate limits, timeouts, server errors) and rerun the errored attempts; "
                   "do not read these failures as the model's.",
    )


def _error_hotspots(p: RunProfile) -> Finding | None:
    """Errors piled on a few tasks point at those tasks' requests (length, content), not at the service."""
    n_errors = _n_errors(p)
    hot = [h for h in p.error_hotspots
           if h.n_attempts and h.n_errors / h.n_attempts >= HOTSPOT_TASK_ERROR_SHARE]
    in_hot = sum(h.n_errors for h in hot)
    if not hot or in_hot < ERROR_MIN_ATTEMPTS or n_errors == 0 or in_hot / n_errors < HOTSPOT_ERROR_SHARE:
        return None
    idx = [h.task_idx for h in hot]
    return Finding(
        category="infrastructure",
        title=f"errors concentrate on {plural(len(hot), 'task')} ({in_hot} of {n_errors} errored attempts)",
        detail=f"Run {p.run_id}: at least {HOTSPOT_TASK_ERROR_SHARE:.0%} of the attempts errored on "
               f"{cite(idx)}; categories: {_error_kinds(hot)}.",
        task_idx=_ids(idx),
        rule="run.error_hotspots",
        suggestion="Inspect these tasks' requests (prompt length against the context window, content a server "
                   "rejects); they fail before the model answers.",
    )


def _error_kinds(hotspots: Iterable[ErrorHotspot]) -> str:
    """The error categories of ``hotspots``, most frequent first."""
    kinds = Counter(c for h in hotspots for c in h.categories)
    return ", ".join(k for k, _ in kinds.most_common()) or "unknown"


def _missing_expected(d: RunDiagnosis) -> Finding | None:
    """Some tasks carry a reference answer and others none: a data-preparation gap, detectable when mixed."""
    dives = [*d.sometimes, *d.never]
    without = sorted({t.task_idx for t in dives if not (t.expected_answer or "").strip()})
    with_ref = [t for t in dives if (t.expected_answer or "").strip()]
    if not without or not with_ref:
        return None  # all missing: a benchmark verified without references (code tests), not an artifact
    return Finding(
        category="data_artifact",
        title=f"{len(without)} of {len(dives)} tasks read closely have no reference answer",
        detail=f"Run {d.profile.run_id}: empty or missing expected answer on {cite(without)}, while "
               f"{len(with_ref)} other tasks read closely have one.",
        task_idx=_ids(without),
        rule="run.missing_expected",
        suggestion="Fix the benchmark data: a task without a reference cannot be passed, whatever the model says.",
    )


def agreed_wrong_answer(t: TaskDive) -> str | None:
    """The single wrong answer every attempt of a never-pass task gave, or None when they differ or are few."""
    if t.passes or t.attempts < AGREED_MIN_ATTEMPTS or len(t.answers) != 1:
        return None
    only = t.answers[0]
    if only.answer is None or not only.answer.strip() or only.n_attempts != t.attempts:
        return None
    return only.answer


def _agreed_wrong_answer(d: RunDiagnosis) -> Finding | None:
    """Independent samples that agree on one 'wrong' answer often mean the reference or the scorer is wrong."""
    agreed = [(t.task_idx, t.attempts, a) for t in d.never if (a := agreed_wrong_answer(t)) is not None]
    if not agreed:
        return None
    agreed.sort()
    examples = "; ".join(f"#{i}: all {n} attempts answered {_quote(a)}" for i, n, a in agreed[:3])
    idx = [i for i, _, _ in agreed]
    return Finding(
        category="task_or_verifier_issue",
        title=f"{plural(len(agreed), 'never-pass task')} where every attempt gave the same answer",
        detail=f"Run {d.profile.run_id}: {cite(idx)}. {examples}.",
        task_idx=_ids(idx),
        rule="run.agreed_wrong_answer",
        suggestion="Check the reference answer and the scorer's normalisation on these tasks: consistent "
                   "agreement is what a wrong key looks like.",
    )


def _answer_failures(d: RunDiagnosis, spec: _AnswerFailure) -> Finding | None:
    """A large share of failures that are answers the harness could not use (format, refusal, empty)."""
    p = d.profile
    count = next((f for f in p.failures if f.category == spec.category), None)
    if count is None or count.n_attempts < ANSWER_FAILURE_MIN_ATTEMPTS or count.share < ANSWER_FAILURE_SHARE_MIN:
        return None
    idx = _tasks_with_category([e for t in (*d.sometimes, *d.never) for e in t.evidence], spec.category)
    return Finding(
        category=spec.taxonomy,
        title=f"{spec.label}: {count.share:.0%} of failed attempts",
        detail=f"Run {p.run_id}: {count.n_attempts} attempts on {count.n_tasks} tasks failed as "
               f"{spec.category}; among the tasks read closely: {cite(idx)}.",
        task_idx=_ids(idx),
        rule=spec.run_rule,
        suggestion=spec.suggestion,
    )


def _unreliable(p: RunProfile) -> Finding | None:
    """A large gap between pass@k and pass@1: the model can solve these tasks but does not do it reliably."""
    sometimes = p.buckets.get("sometimes", ())
    if p.retry_value < RETRY_VALUE_MIN or len(sometimes) < SOMETIMES_MIN_TASKS:
        return None
    subset = ""
    if 0 < p.pass_at_k_tasks < p.n_attempted:  # pass@k exists only where there were k attempts
        subset = (f"; over the {p.pass_at_k_tasks} of {p.n_attempted} attempted tasks with {p.k} attempts, "
                  f"pass@1 {p.pass_at_k - p.retry_value:.3f} and pass@{p.k} {p.pass_at_k:.3f}")
    return Finding(
        category="unreliable_knowledge",
        title=f"{plural(len(sometimes), 'sometimes-pass task')}; pass@{p.k} exceeds pass@1 by {p.retry_value:.3f}",
        detail=f"Run {p.run_id}: pass@1 {p.pass_at_1:.3f}, pass@{p.k} {p.pass_at_k:.3f}, consistency "
               f"{p.consistency:.3f}{subset}; sometimes-pass: {cite(sometimes)}.",
        task_idx=_ids(sometimes),
        rule="run.unreliable",
        suggestion="Improve consistency (lower temperature, self-consistency / majority voting, more reasoning "
                   "budget) before adding knowledge: the model already solves these tasks some of the time.",
    )


def _never_slices(p: RunProfile) -> list[Finding]:
    """Never-pass tasks piled into one slice value: a missing skill, not noise. At most one per column. A value
    that holds every attempted task has no rest of the run to be set against: it concentrates nothing."""
    never = p.buckets.get("never", ())
    if not never or not p.n_attempted:
        return []
    found: list[Finding] = []
    for column in p.slice_columns:
        best: tuple[int, float, SliceRow] | None = None
        for r in (r for r in p.slices if r.column == column):
            n_never = round(r.always_fail_rate * r.n_tasks)
            n_rest = p.n_attempted - r.n_tasks
            if n_rest <= 0:
                continue
            rest = (len(never) - n_never) / n_rest
            if (n_never >= NEVER_SLICE_MIN_TASKS and n_never / len(never) >= NEVER_SLICE_SHARE_MIN
                    and r.always_fail_rate >= NEVER_SLICE_LIFT_MIN * rest
                    and (best is None or n_never > best[0])):
                best = (n_never, rest, r)
        if best is None:
            continue
        n_never, rest, r = best
        found.append(Finding(
            category="knowledge_gap",
            title=f"never-pass tasks concentrate in {column} = {r.value} ({n_never} of {len(never)})",
            detail=f"Run {p.run_id}: {n_never} of the {r.n_tasks} tasks with {column} = {r.value} never passed "
                   f"({r.always_fail_rate:.0%}, against {rest:.0%} over the rest of the run; pass@1 there "
                   f"{r.pass_at_1:.3f}). The run's never-pass tasks, of every slice: {cite(never)}.",
            task_idx=_ids(never),
            rule="run.never_slice",
            suggestion=f"Treat {column} = {r.value} as a knowledge gap: targeted data, retrieval or tools for it; "
                       "more samples will not help where no attempt passes.",
        ))
    return found


# ---- two runs -------------------------------------------------------------------------------------
def shift_findings(s: ScoreShift) -> tuple[Finding, ...]:
    """Every rule over a baseline → candidate shift, in a fixed order; task ids are the candidate's."""
    found = [
        _one_sided(s),
        _regressions_errors(s),
        *(_spike(s, spec) for spec in _ANSWER_FAILURES),
        _consistency_loss(s),
        *_lost_in_slice(s),
    ]
    return tuple(f for f in found if f is not None)


def _one_sided(s: ScoreShift) -> Finding | None:
    """Tasks in one run only: the runs saw different data, so the comparison covers the overlap only."""
    if not s.only_a and not s.only_b:
        return None
    a, b = s.profile_a.run_id, s.profile_b.run_id
    return Finding(
        category="data_artifact",
        title=f"the runs' tasks differ: {len(s.only_a)} only in {a}, {len(s.only_b)} only in {b}",
        detail=f"{s.n_paired} tasks are paired. Only in {a} (its indices): {cite(s.only_a)}. Only in {b}: "
               f"{cite(s.only_b)}.",
        task_idx=_ids(s.only_b),
        rule="shift.one_sided_tasks",
        suggestion="Check that both runs used the same benchmark version and filters; the shift covers the "
                   "paired tasks only.",
    )


def _regressions_errors(s: ScoreShift) -> Finding | None:
    """Regressions whose candidate attempts mostly errored: the drop is the serving stack, not the model."""
    down = [t for t in s.tasks if t.contribution < 0]
    total = -sum(t.contribution for t in down)
    errored = [t for t in down if t.errors_b > t.errors_a and _mostly_errors(t)]
    part = -sum(t.contribution for t in errored)
    n_err = sum(t.errors_b for t in errored)
    if not errored or n_err < ERROR_MIN_ATTEMPTS or total <= 0 or part / total < SHIFT_ERROR_DROP_SHARE:
        return None
    idx = _b_idx(errored)
    return Finding(
        category="infrastructure",
        title=f"{len(errored)} of {len(down)} regressed tasks mostly errored in {s.profile_b.run_id}",
        detail=f"{n_err} errored attempts in {s.profile_b.run_id} on {cite(idx)} (against "
               f"{sum(t.errors_a for t in errored)} in {s.profile_a.run_id}); they account for {part:.4f} of the "
               f"{total:.4f} lost (Δpass@1 {s.delta:+.4f}).",
        task_idx=_ids(idx),
        rule="shift.regressions_errors",
        suggestion="Rerun the errored attempts once the endpoint is healthy before attributing the drop to the "
                   "model: this part of the regression is infrastructure.",
    )


def _mostly_errors(t: TaskShift) -> bool:
    """The candidate's attempts at ``t`` mostly errored: what happened to it says nothing about the model."""
    return t.attempts_b > 0 and t.errors_b / t.attempts_b >= SHIFT_ERROR_TASK_SHARE


def _spike(s: ScoreShift, spec: _AnswerFailure) -> Finding | None:
    """An answer-failure category that grew sharply in the candidate: usually a prompt or harness change."""
    n_a = next((f.n_attempts for f in s.profile_a.failures if f.category == spec.category), 0)
    n_b = next((f.n_attempts for f in s.profile_b.failures if f.category == spec.category), 0)
    rate_a = n_a / s.profile_a.n_attempts if s.profile_a.n_attempts else 0.0
    rate_b = n_b / s.profile_b.n_attempts if s.profile_b.n_attempts else 0.0
    if n_b - n_a < SPIKE_MIN_NEW_ATTEMPTS or rate_b < SPIKE_RATE_RATIO * rate_a or rate_b < SPIKE_MIN_RATE:
        return None
    evidence = [e for t in (*s.drivers_down, *s.drivers_up) for e in t.dive_b.evidence]
    idx = _tasks_with_category(evidence, spec.category)
    return Finding(
        category=spec.taxonomy,
        title=f"{spec.label} rose from {n_a} to {n_b} attempts",
        detail=f"{spec.category}: {n_a} of {s.profile_a.n_attempts} attempts in {s.profile_a.run_id} "
               f"({rate_a:.1%}), {n_b} of {s.profile_b.n_attempts} in {s.profile_b.run_id} ({rate_b:.1%}); among "
               f"the drivers read closely: {cite(idx)}.",
        task_idx=_ids(idx),
        rule=spec.shift_rule,
        suggestion=spec.suggestion,
    )


def _consistency_loss(s: ScoreShift) -> Finding | None:
    """Tasks that always passed now pass only sometimes: sampling or stability changed, not knowledge."""
    moved = [t for t in s.tasks if t.bucket_a == "always" and t.bucket_b == "sometimes" and not _mostly_errors(t)]
    if not s.n_paired or len(moved) < CONSISTENCY_LOSS_MIN_TASKS or \
            len(moved) / s.n_paired < CONSISTENCY_LOSS_SHARE_MIN:
        return None
    idx = _b_idx(moved)
    return Finding(
        category="unreliable_knowledge",
        title=f"{plural(len(moved), 'always-pass task')} became sometimes-pass",
        detail=f"always → sometimes on {len(moved)} of {s.n_paired} paired tasks ({cite(idx)}); their summed "
               f"contribution {sum(t.contribution for t in moved):+.4f} of Δpass@1 {s.delta:+.4f}.",
        task_idx=_ids(idx),
        rule="shift.consistency_loss",
        suggestion="Compare the sampling settings (temperature, top_p, max_tokens) and the candidate's stability: "
                   "the knowledge is still there some of the time.",
    )


def _lost_in_slice(s: ScoreShift) -> list[Finding]:
    """Tasks that passed in A and never in B, concentrated in one slice value: a lost skill. One per column."""
    lost = [t for t in s.tasks if t.bucket_a in ("always", "sometimes") and t.bucket_b == "never"
            and not _mostly_errors(t)]
    if len(lost) < LOST_SLICE_MIN_TASKS or not s.n_paired:
        return []
    columns = list(dict.fromkeys(sl.column for sl in s.slices))
    found: list[Finding] = []
    for column in columns:
        sizes = {sl.value: sl.n_tasks for sl in s.slices if sl.column == column}
        by_value: dict[str, list[TaskShift]] = {}
        for t in lost:
            by_value.setdefault(t.slices.get(column, "(none)"), []).append(t)
        best: tuple[int, str] | None = None
        for value, tasks in sorted(by_value.items()):
            share = len(tasks) / len(lost)
            base = sizes.get(value, 0) / s.n_paired
            if (len(tasks) >= LOST_SLICE_MIN_TASKS and share >= LOST_SLICE_SHARE_MIN and base > 0
                    and share / base >= LOST_SLICE_LIFT_MIN and (best is None or len(tasks) > best[0])):
                best = (len(tasks), value)
        if best is None:
            continue
        value = best[1]
        tasks = by_value[value]
        idx = _b_idx(tasks)
        from_sometimes = sum(t.bucket_a == "sometimes" for t in tasks)
        found.append(Finding(
            category="knowledge_gap",
            title=f"{len(tasks)} tasks with {column} = {value} stopped passing",
            detail=f"{len(tasks)} of the {len(lost)} tasks that passed in {s.profile_a.run_id} and never in "
                   f"{s.profile_b.run_id} have {column} = {value} ({from_sometimes} were sometimes-pass, "
                   f"{len(tasks) - from_sometimes} always-pass), though it holds {sizes.get(value, 0)} of the "
                   f"{s.n_paired} paired tasks: {cite(idx)}.",
            task_idx=_ids(idx),
            rule="shift.lost_in_slice",
            suggestion=f"The candidate lost a skill on {column} = {value}: check what changed in its training "
                       "data or fine-tuning for this area; targeted data restores knowledge, sampling does not.",
        ))
    return found


# ---- citing ---------------------------------------------------------------------------------------
def cite(idx: Iterable[int], limit: int = CITED_MAX) -> str:
    """``"3 tasks: #2, #5, #9"``; past ``limit`` ids, ``"… and N more"``; ``"none"`` for no task. The count is
    always stated."""
    ids = sorted(set(idx))
    if not ids:
        return "none"
    shown = ", ".join(f"#{i}" for i in ids[:limit])
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return f"{plural(len(ids), 'task')}: {shown}{more}"


def _ids(idx: Iterable[int]) -> tuple[int, ...]:
    return tuple(sorted(set(idx)))


def plural(n: int, noun: str) -> str:
    """``"1 task"``, ``"3 tasks"``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _b_idx(tasks: Sequence[TaskShift]) -> list[int]:
    return sorted(t.task_idx_b for t in tasks)


def _tasks_with_category(evidence: Iterable[AttemptEvidence], category: str) -> list[int]:
    return sorted({e.task_idx for e in evidence if e.failure_category == category})


def _quote(text: str, limit: int = 40) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


__all__ = ["agreed_wrong_answer", "cite", "plural", "run_findings", "shift_findings"]
