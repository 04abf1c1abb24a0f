"""``diagnose``: the whole diagnosis of one run, or of a baseline and a candidate, in one call.

The numbers come from the ``RunData`` frames (``load_run``: the store or an export give the same); the
texts of the tasks read closely come from the optional evidence sources, a few queries per run. Without
evidence sources every number is still computed and the dives carry counts only.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

import workbench
from workbench.analysis.diagnosis.evidence import CachedEvidence, EvidenceSource, build_dives
from workbench.analysis.diagnosis.findings import run_findings, shift_findings
from workbench.analysis.diagnosis.profile import run_profile, task_outcomes
from workbench.analysis.diagnosis.shift import score_shift, with_evidence
from workbench.analysis.diagnosis.types import Artifact, Diagnosis, RunDiagnosis, RunProfile
from workbench.analysis.sources import RunData
from workbench.errors import UsageError


def diagnose(
    baseline: RunData,
    candidate: RunData | None = None,
    *,
    evidence_baseline: EvidenceSource | None = None,
    evidence_candidate: EvidenceSource | None = None,
    slices: Sequence[str] | None = None,
    top: int = 5,
) -> Diagnosis:
    """Diagnose ``baseline`` (and its shift to ``candidate``): profiles, ``top`` sometimes-pass and
    never-pass dives per run, the paired shift with ``top`` drivers per direction, and the findings.

    ``slices`` names the metadata columns to split by (default: each run's few-valued columns, category
    first); a column one run lacks is profiled in the run that has it.

    Raises:
        UsageError: ``top`` below 1, an unknown slice column, runs loaded with different metrics.
    """
    if top < 1:
        raise UsageError(f"--top must be at least 1, got {top}")
    if candidate is not None and candidate.metric != baseline.metric:
        raise UsageError(f"runs {baseline.run_id} and {candidate.run_id} were loaded with different metrics "
                         f"({baseline.metric} and {candidate.metric}); diagnose one metric at a time")
    runs = [baseline] if candidate is None else [baseline, candidate]
    _check_slices(runs, slices)
    profiles = [run_profile(r, slices=_own(r, slices)) for r in runs]
    sources = [None if e is None else CachedEvidence(e) for e in (evidence_baseline, evidence_candidate)[:len(runs)]]
    shift = None
    if candidate is not None:  # the numbers first: they say which tasks drive the shift
        shift = score_shift(baseline, candidate, profiles[0], profiles[1], top=top)
    chosen = [dive_tasks(r, ev, top=top) for r, ev in zip(runs, sources, strict=True)]
    drivers = [] if shift is None else [d.task for d in (*shift.drivers_down, *shift.drivers_up)]
    extra = [[t.task_idx_a for t in drivers], [t.task_idx_b for t in drivers]]
    for ev, (sometimes, never), more in zip(sources, chosen, extra, strict=False):
        if ev is not None:  # one query per run for its dives and its drivers
            ev.prefetch([*sometimes, *never, *more])
    diags = [run_diagnosis(r, p, ev, top=top, chosen=c)
             for r, p, ev, c in zip(runs, profiles, sources, chosen, strict=True)]
    if shift is not None and candidate is not None:
        shift = with_evidence(shift, baseline, candidate, sources[0], sources[1])
    findings = tuple(f for d in diags for f in run_findings(d)) + (shift_findings(shift) if shift else ())
    columns = tuple(dict.fromkeys(c for p in profiles for c in p.slice_columns))
    return Diagnosis(
        baseline=diags[0], candidate=diags[1] if len(diags) > 1 else None, shift=shift, findings=findings,
        artifacts=tuple(_artifact(r) for r in runs), warnings=live_warnings(baseline, candidate),
        settings={"metric": baseline.metric, "slices": list(columns), "top": top,
                  "slices_chosen": "given" if slices is not None else "default (few distinct values)",
                  "pairing": "task_id (content hash)",
                  "interval": "95 %, as nel eval stats: Wilson when every task scored 0 or 1, else Student t over "
                              "tasks cut to [0, 1] and never narrower than the zero-spread floor",
                  "evidence": [_evidence_name(e) for e in (evidence_baseline, evidence_candidate)[:len(runs)]],
                  "version": workbench.__version__},
    )


def live_warnings(baseline: RunData, candidate: RunData | None = None) -> tuple[str, ...]:
    """One sentence per run still being written (status ``running``): its numbers will move (as ``nel compare``
    warns)."""
    roles = [("run", baseline)] if candidate is None else [("the baseline", baseline), ("the candidate", candidate)]
    return tuple(f"{role} {run.run_id} is still running ({run.attempts.height:,} attempts so far): its numbers "
                 "will move; diagnose again when it ends" for role, run in roles if run.status == "running")


def run_diagnosis(
    run: RunData,
    profile: RunProfile,
    evidence: EvidenceSource | None,
    *,
    top: int,
    chosen: tuple[list[int], list[int]] | None = None,
) -> RunDiagnosis:
    """One run's profile with close reads of the tasks ``dive_tasks`` picks (or ``chosen``, already picked)."""
    sometimes, never = chosen if chosen is not None else dive_tasks(run, evidence, top=top)
    dives = build_dives(run, evidence, [*sometimes, *never])
    return RunDiagnosis(profile=profile, sometimes=tuple(dives[i] for i in sometimes),
                        never=tuple(dives[i] for i in never))


def dive_tasks(run: RunData, evidence: EvidenceSource | None, *, top: int) -> tuple[list[int], list[int]]:
    """The ``top`` most informative sometimes-pass tasks (pass rate nearest 0.5, then task_idx) and the
    ``top`` never-pass tasks whose attempts agree most on one answer (then task_idx; without evidence, by
    task_idx). The agreement is one query over the never-pass tasks' answers, not their texts."""
    tasks = task_outcomes(run)
    sometimes = tasks.filter(pl.col("bucket") == "sometimes").sort(
        [(pl.col("p") - 0.5).abs(), pl.col("task_idx")]).head(top)["task_idx"].to_list()
    never = _never_order(tasks.filter(pl.col("bucket") == "never"), evidence)[:top]
    return sometimes, never


def _never_order(never: pl.DataFrame, evidence: EvidenceSource | None) -> list[int]:
    """Never-pass tasks by agreement on one answer (share of attempts, then how many), then task_idx."""
    idx = never["task_idx"].to_list()
    if evidence is None or not idx:
        return sorted(idx)
    agreed = evidence.answer_agreement(idx)
    n = dict(zip(idx, never["n"].to_list(), strict=True))
    return sorted(idx, key=lambda i: (-agreed.get(i, 0) / n[i] if n[i] else 0.0, -agreed.get(i, 0), i))


def _check_slices(runs: Sequence[RunData], slices: Sequence[str] | None) -> None:
    if slices is None:
        return
    known = {c for r in runs for c in r.metadata_columns}
    for column in slices:
        if column not in known:
            names = ", ".join(sorted(known)) if known else "none (no metadata)"
            raise UsageError(f"no run has a column {column!r} to slice by; columns: {names}")


def _own(run: RunData, slices: Sequence[str] | None) -> Sequence[str] | None:
    return None if slices is None else [c for c in slices if c in run.metadata_columns]


def _artifact(run: RunData) -> Artifact:
    """The store file (``store:PATH#RUN`` → PATH) or the export directory the run was read from."""
    source = run.source
    if source.startswith("store:"):
        source = source.removeprefix("store:").removesuffix(f"#{run.run_id}")
    return Artifact(run_id=run.run_id, source=source, n_tasks=len(run.tasks), n_attempts=len(run.attempts))


def _evidence_name(evidence: EvidenceSource | None) -> str:
    return "none" if evidence is None else type(evidence).__name__

