"""The heuristic rules of ``nel diagnose``: each fires on its evidence, stays silent below its threshold, and
cites task ids and counts. Built from hand-made result objects, so every rule is tested on exactly the
numbers it reads. (The factories here are shared with ``test_diagnosis_report.py``.)"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from workbench.analysis.diagnosis import findings as rules
from workbench.analysis.diagnosis.attribution import attribute_tasks
from workbench.analysis.diagnosis.findings import cite, run_findings, shift_findings
from workbench.analysis.diagnosis.types import (
    TAXONOMY,
    AnswerCount,
    AttemptEvidence,
    AttemptFlips,
    ErrorHotspot,
    FailureCount,
    Finding,
    RunDiagnosis,
    RunProfile,
    ScoreShift,
    SliceRow,
    SliceShift,
    TaskDive,
    TaskEvidence,
    TaskShift,
)


# ---- factories ------------------------------------------------------------------------------------
def make_profile(**over: Any) -> RunProfile:
    """A clean run: 20 tasks × 4 repeats, every attempt passed."""
    base: dict[str, Any] = dict(
        run_id="run-a", benchmark="gsm8k", model_id="mock", metric="correct", source="store", n_repeats=4,
        n_tasks=20, n_attempted=20, n_missing=0, n_attempts=80, n_completed=80, n_expected_attempts=80,
        coverage=1.0, pass_at_1=1.0, pass_at_1_low=0.95, pass_at_1_high=1.0, pass_at_k=1.0, k=4,
        consistency=1.0, retry_value=0.0,
        pass_at_k_curve=tuple((k, 1.0, 0.9, 1.0) for k in range(1, 5)),
        buckets={"always": tuple(range(20)), "sometimes": (), "never": (), "missing": ()},
        pass_histogram=((4, 20),), slice_columns=("category",),
        slices=(SliceRow("category", "algebra", 10, 1.0, 0.0, 40), SliceRow("category", "geometry", 10, 1.0, 0.0, 40)),
        failures=(), failure_by_slice=(), cost=(), error_hotspots=(), error_rate=0.0,
    )
    base.update(over)
    return RunProfile(**base)


def attempt(task_idx: int, repeat: int, passed: bool, answer: str | None = "42", *, run_id: str = "run-a",
            category: str | None = None, expected: str | None = "42", error: str | None = None) -> AttemptEvidence:
    return AttemptEvidence(run_id=run_id, task_idx=task_idx, repeat=repeat, passed=passed, extracted_answer=answer,
                           expected_answer=expected, failure_category=category, error=error,
                           response=f"The answer is {answer}.")


def make_dive(task_idx: int, answers: list[tuple[str | None, bool]], *, run_id: str = "run-a",
              expected: str | None = "42", category: str | None = None) -> TaskDive:
    """A task whose attempts gave ``answers`` (answer, passed) in repeat order."""
    ev = tuple(attempt(task_idx, r, ok, a, run_id=run_id, expected=expected, category=None if ok else category)
               for r, (a, ok) in enumerate(answers))
    counts: dict[tuple[str | None, bool], int] = {}
    for a, ok in answers:
        counts[(a, ok)] = counts.get((a, ok), 0) + 1
    ac = tuple(AnswerCount(a, n, ok) for (a, ok), n in sorted(counts.items(), key=lambda kv: -kv[1]))
    good = next((e for e in ev if e.passed), None)
    bad = next((e for e in ev if not e.passed), None)
    return TaskDive(run_id=run_id, task_id=f"t{task_idx:04d}", task_idx=task_idx,
                    passes=sum(ok for _, ok in answers), attempts=len(answers), expected_answer=expected,
                    answers=ac, evidence=ev, representative_pass=good, representative_fail=bad,
                    diff_markdown="~~42~~ **41**" if good and bad else "")


def make_run(profile: RunProfile | None = None, sometimes: tuple[TaskDive, ...] = (),
             never: tuple[TaskDive, ...] = ()) -> RunDiagnosis:
    return RunDiagnosis(profile=profile or make_profile(), sometimes=sometimes, never=never)


def task_shift(i: int, passes_a: int, passes_b: int, *, n: int = 4, n_paired: int = 20, errors_a: int = 0,
               errors_b: int = 0, category: str = "algebra") -> TaskShift:
    def bucket(p: int) -> str:
        return "always" if p == n else "never" if p == 0 else "sometimes"

    return TaskShift(task_id=f"t{i:04d}", task_idx_a=i, task_idx_b=i, slices={"category": category},
                     passes_a=passes_a, attempts_a=n, passes_b=passes_b, attempts_b=n, p_a=passes_a / n,
                     p_b=passes_b / n, contribution=(passes_b - passes_a) / n / n_paired, bucket_a=bucket(passes_a),
                     bucket_b=bucket(passes_b), errors_a=errors_a, errors_b=errors_b)


def make_shift(tasks: list[TaskShift], *, profile_a: RunProfile | None = None, profile_b: RunProfile | None = None,
               only_a: tuple[int, ...] = (), only_b: tuple[int, ...] = (),
               drivers_down: tuple[TaskEvidence, ...] = ()) -> ScoreShift:
    n = len(tasks)
    ordered = tuple(sorted(tasks, key=lambda t: (t.contribution, t.task_idx_b)))
    transitions: dict[tuple[str, str], int] = {}
    for t in tasks:
        transitions[(t.bucket_a, t.bucket_b)] = transitions.get((t.bucket_a, t.bucket_b), 0) + 1
    slices = []
    for value in sorted({t.slices["category"] for t in tasks}):
        mine = [t for t in tasks if t.slices["category"] == value]
        slices.append(SliceShift("category", value, len(mine), sum(t.contribution for t in mine),
                                 sum(t.p_a for t in mine) / len(mine), sum(t.p_b for t in mine) / len(mine),
                                 sum(t.contribution < 0 for t in mine), sum(t.contribution > 0 for t in mine)))
    slices.sort(key=lambda s: s.contribution)
    pa = sum(t.p_a for t in tasks) / n
    pb = sum(t.p_b for t in tasks) / n
    return ScoreShift(
        profile_a=profile_a or make_profile(), profile_b=profile_b or make_profile(run_id="run-b"), n_paired=n,
        only_a=only_a, only_b=only_b, pass_at_1_a=pa, pass_at_1_b=pb, delta=pb - pa, tasks=ordered,
        slices=tuple(slices), transitions=transitions, attempt_flips=AttemptFlips(4 * n, 0, 0, 4 * n, 0),
        drivers_down=drivers_down, drivers_up=(), attribution=attribute_tasks(ordered),
    )


def steady(n: int = 20, start: int = 0, category: str = "algebra") -> list[TaskShift]:
    """Tasks that passed every attempt in both runs."""
    return [task_shift(i, 4, 4, category=category) for i in range(start, start + n)]


def rules_of(found: tuple[Finding, ...]) -> list[str]:
    return [f.rule for f in found]


# ---- a clean run, a clean shift -------------------------------------------------------------------
def test_a_clean_run_gives_no_finding() -> None:
    assert run_findings(make_run()) == ()


def test_a_clean_shift_gives_no_finding() -> None:
    assert shift_findings(make_shift(steady())) == ()


# ---- one run: infrastructure ----------------------------------------------------------------------
def test_never_attempted_tasks_make_the_run_incomplete() -> None:
    p = make_profile(buckets={"always": tuple(range(17)), "sometimes": (), "never": (), "missing": (17, 18, 19)},
                     n_missing=3, n_attempted=17, n_attempts=68, coverage=0.85)
    [f] = run_findings(make_run(p))
    assert (f.rule, f.category, f.task_idx) == ("run.incomplete", "infrastructure", (17, 18, 19))
    assert "3 tasks: #17, #18, #19" in f.detail and "68 of 80" in f.detail


def hot(i: int, n_errors: int, cats: tuple[str, ...] = ("timeout",)) -> ErrorHotspot:
    return ErrorHotspot(task_id=f"t{i:04d}", task_idx=i, n_errors=n_errors, n_attempts=4, categories=cats)


def test_a_high_error_rate_is_infrastructure_not_the_model() -> None:
    spots = tuple(hot(i, 1, ("server_error",)) for i in range(8))
    f = run_findings(make_run(make_profile(error_rate=8 / 80, error_hotspots=spots)))
    assert rules_of(f) == ["run.high_error_rate"]
    assert f[0].category == "infrastructure" and f[0].task_idx == tuple(range(8))
    assert "8 errored attempts (server_error)" in f[0].detail and "8 tasks" in f[0].detail


def test_an_error_rate_below_threshold_is_not_a_finding() -> None:
    spots = tuple(hot(i, 1) for i in range(3))
    assert run_findings(make_run(make_profile(error_rate=3 / 80, error_hotspots=spots))) == ()


def test_errors_concentrated_on_few_tasks_point_at_those_tasks() -> None:
    spots = (hot(5, 4, ("context_window",)), hot(9, 3, ("context_window",)), hot(1, 1))
    f = run_findings(make_run(make_profile(error_rate=8 / 80, error_hotspots=spots)))
    assert rules_of(f) == ["run.high_error_rate", "run.error_hotspots"]
    assert f[1].task_idx == (5, 9) and "7 of 8 errored attempts" in f[1].title
    assert "context_window" in f[1].detail


def test_errors_spread_thin_are_not_hotspots() -> None:
    spots = (hot(5, 2), *(hot(i, 1) for i in range(10, 14)))
    f = run_findings(make_run(make_profile(error_rate=6 / 80, error_hotspots=spots)))
    assert "run.error_hotspots" not in rules_of(f)  # 2 of 6 errors sit on the hotspot


# ---- one run: behaviour ---------------------------------------------------------------------------
def test_a_large_share_of_format_errors_is_behavioural() -> None:
    dives = (make_dive(3, [("42", True), (None, False)], category="format_error"),
             make_dive(7, [("42", True), ("41", False)]))
    p = make_profile(failures=(FailureCount("format_error", 6, 0.6, 4), FailureCount("wrong", 4, 0.4, 3)))
    [f] = run_findings(make_run(p, sometimes=dives))
    assert (f.rule, f.category, f.task_idx) == ("run.format_errors", "behavioural_issue", (3,))
    assert "6 attempts on 4 tasks" in f.detail and "#3" in f.detail


def test_agents_running_out_of_turns_are_behavioural() -> None:
    dives = (make_dive(5, [("done", True), (None, False)], category="max_turns_exhausted"),)
    p = make_profile(failures=(FailureCount("max_turns_exhausted", 5, 0.5, 3), FailureCount("wrong", 5, 0.5, 4)))
    [f] = run_findings(make_run(p, sometimes=dives))
    assert (f.rule, f.category, f.task_idx) == ("run.turns_exhausted", "behavioural_issue", (5,))
    assert "max_turns" in f.title and "step_tool_calls" in f.suggestion


@pytest.mark.parametrize(("n", "share"), [(2, 0.9), (6, 0.1)])
def test_format_errors_below_either_threshold_are_not_a_finding(n: int, share: float) -> None:
    p = make_profile(failures=(FailureCount("format_error", n, share, n),))
    assert run_findings(make_run(p)) == ()


def test_refusals_and_empty_responses_have_their_own_rules() -> None:
    p = make_profile(failures=(FailureCount("refusal", 5, 0.5, 2), FailureCount("empty_response", 5, 0.5, 5)))
    found = run_findings(make_run(p))
    assert rules_of(found) == ["run.refusals", "run.empty_responses"]
    assert {f.category for f in found} == {"behavioural_issue"}


def test_many_sometimes_pass_tasks_are_unreliable_knowledge() -> None:
    p = make_profile(retry_value=0.2, pass_at_1=0.7, pass_at_k=0.9, consistency=0.6,
                     buckets={"always": tuple(range(12)), "sometimes": tuple(range(12, 18)), "never": (18, 19),
                              "missing": ()})
    found = run_findings(make_run(p))
    assert rules_of(found) == ["run.unreliable"]
    assert found[0].category == "unreliable_knowledge" and found[0].task_idx == tuple(range(12, 18))
    assert "6 tasks: #12" in found[0].detail


def test_a_small_retry_value_is_not_unreliability() -> None:
    p = make_profile(retry_value=0.05, buckets={"always": tuple(range(16)), "sometimes": (16, 17, 18, 19),
                                                "never": (), "missing": ()})
    assert run_findings(make_run(p)) == ()


# ---- one run: knowledge, task, data ---------------------------------------------------------------
def never_profile(geometry_never: int) -> RunProfile:
    """20 tasks, 10 per category; ``geometry_never`` geometry tasks and one algebra task never pass."""
    never = (0, *range(10, 10 + geometry_never))
    return make_profile(
        buckets={"always": tuple(i for i in range(20) if i not in never), "sometimes": (), "never": never,
                 "missing": ()},
        slices=(SliceRow("category", "algebra", 10, 0.9, 0.1, 40),
                SliceRow("category", "geometry", 10, 1 - geometry_never / 10, geometry_never / 10, 40)))


def test_never_pass_tasks_concentrated_in_one_slice_are_a_knowledge_gap() -> None:
    [f] = run_findings(make_run(never_profile(5)))
    assert (f.rule, f.category) == ("run.never_slice", "knowledge_gap")
    assert "category = geometry (5 of 6)" in f.title and "5 of the 10 tasks" in f.detail
    assert f.task_idx == (0, 10, 11, 12, 13, 14)


def test_never_pass_tasks_spread_over_slices_are_not_a_knowledge_gap() -> None:
    assert run_findings(make_run(never_profile(2))) == ()  # 2 geometry tasks: below the minimum of 3


def test_never_pass_tasks_that_agree_on_one_answer_question_the_reference() -> None:
    agreed = make_dive(4, [("17", False)] * 4)
    scattered = make_dive(6, [("1", False), ("2", False), ("3", False), ("4", False)])
    p = make_profile(buckets={"always": tuple(i for i in range(20) if i not in (4, 6)), "sometimes": (),
                              "never": (4, 6), "missing": ()})
    [f] = run_findings(make_run(p, never=(agreed, scattered)))
    assert (f.rule, f.category, f.task_idx) == ("run.agreed_wrong_answer", "task_or_verifier_issue", (4,))
    assert "all 4 attempts answered '17'" in f.detail


def test_two_agreeing_attempts_are_too_few() -> None:
    assert run_findings(make_run(never=(make_dive(4, [("17", False)] * 2),))) == ()


def test_agreement_on_no_answer_is_not_a_reference_problem() -> None:
    assert run_findings(make_run(never=(make_dive(4, [(None, False)] * 4),))) == ()


def test_tasks_without_a_reference_among_tasks_with_one_are_a_data_artifact() -> None:
    dives = (make_dive(2, [("42", True), ("41", False)], expected=""),
             make_dive(8, [("42", True), ("41", False)]))
    [f] = run_findings(make_run(sometimes=dives))
    assert (f.rule, f.category, f.task_idx) == ("run.missing_expected", "data_artifact", (2,))


def test_a_benchmark_without_references_is_not_a_data_artifact() -> None:
    dives = (make_dive(2, [("x", True), ("y", False)], expected=None),
             make_dive(8, [("x", True), ("y", False)], expected=None))
    assert run_findings(make_run(sometimes=dives)) == ()


# ---- a shift --------------------------------------------------------------------------------------
def test_regressions_whose_candidate_attempts_errored_are_infrastructure() -> None:
    tasks = steady(17) + [task_shift(i, 4, 1, errors_b=3) for i in (17, 18)] + [task_shift(19, 4, 3)]
    [f] = shift_findings(make_shift(tasks))
    assert (f.rule, f.category, f.task_idx) == ("shift.regressions_errors", "infrastructure", (17, 18))
    assert "6 errored attempts in run-b" in f.detail and "2 of 3 regressed tasks" in f.title


def test_regressions_that_are_wrong_answers_are_not_infrastructure() -> None:
    tasks = steady(17) + [task_shift(i, 4, 1, errors_b=1) for i in (17, 18)] + [task_shift(19, 4, 0)]
    assert "shift.regressions_errors" not in rules_of(shift_findings(make_shift(tasks)))


def evidence_for(t: TaskShift, category: str | None) -> TaskEvidence:
    a = make_dive(t.task_idx_a, [("42", True)] * 4)
    b = make_dive(t.task_idx_b, [(None, False)] * 4, run_id="run-b", category=category)
    return TaskEvidence(task=t, dive_a=a, dive_b=b, representative_pass=a.evidence[0],
                        representative_fail=b.evidence[0], diff_markdown="")


def test_a_format_error_spike_in_the_candidate_is_behavioural() -> None:
    down = [task_shift(i, 4, 0) for i in (18, 19)]
    pb = make_profile(run_id="run-b", failures=(FailureCount("format_error", 8, 1.0, 2),))
    s = make_shift(steady(18) + down, profile_b=pb, drivers_down=tuple(evidence_for(t, "format_error") for t in down))
    [f] = shift_findings(s)
    assert (f.rule, f.category, f.task_idx) == ("shift.format_error_spike", "behavioural_issue", (18, 19))
    assert "from 0 to 8 attempts" in f.title


def test_a_handful_of_new_format_errors_among_many_attempts_is_no_spike() -> None:
    pb = make_profile(run_id="run-b", n_attempts=400, failures=(FailureCount("format_error", 8, 1.0, 2),))
    assert shift_findings(make_shift(steady(), profile_b=pb)) == ()  # 2 % of the candidate's attempts


def test_format_errors_at_the_baseline_rate_are_no_spike() -> None:
    pa = make_profile(failures=(FailureCount("format_error", 6, 1.0, 2),))
    pb = make_profile(run_id="run-b", failures=(FailureCount("format_error", 8, 1.0, 2),))
    assert shift_findings(make_shift(steady(), profile_a=pa, profile_b=pb)) == ()


def test_tasks_lost_in_one_slice_are_a_knowledge_gap() -> None:
    tasks = steady(12) + steady(4, start=12, category="geometry") + [
        task_shift(i, 2, 0, category="geometry") for i in (16, 17, 18)] + [task_shift(19, 4, 0)]
    found = shift_findings(make_shift(tasks))
    assert rules_of(found) == ["shift.lost_in_slice"]
    f = found[0]
    assert f.category == "knowledge_gap" and f.task_idx == (16, 17, 18)
    assert "3 of the 4 tasks" in f.detail and "holds 7 of the 20 paired tasks" in f.detail


def test_tasks_lost_across_slices_are_not_a_knowledge_gap() -> None:
    tasks = steady(10) + steady(6, start=10, category="geometry") + [
        task_shift(16, 2, 0), task_shift(17, 2, 0), task_shift(18, 2, 0, category="geometry"),
        task_shift(19, 4, 0, category="geometry")]
    assert shift_findings(make_shift(tasks)) == ()


def test_always_pass_tasks_turning_sometimes_are_unreliable_knowledge() -> None:
    tasks = steady(17) + [task_shift(i, 4, 2) for i in (17, 18, 19)]
    [f] = shift_findings(make_shift(tasks))
    assert (f.rule, f.category, f.task_idx) == ("shift.consistency_loss", "unreliable_knowledge", (17, 18, 19))


def test_two_tasks_turning_sometimes_are_too_few() -> None:
    assert shift_findings(make_shift(steady(18) + [task_shift(i, 4, 2) for i in (18, 19)])) == ()


def test_tasks_in_one_run_only_are_a_data_artifact() -> None:
    [f] = shift_findings(make_shift(steady(), only_a=(20, 21), only_b=(22,)))
    assert (f.rule, f.category, f.task_idx) == ("shift.one_sided_tasks", "data_artifact", (22,))
    assert "2 only in run-a, 1 only in run-b" in f.title and "#20, #21" in f.detail


# ---- every finding --------------------------------------------------------------------------------
def test_citations_list_at_most_ten_ids_and_always_the_count_but_findings_keep_all() -> None:
    assert cite(range(3, 30)) == "27 tasks: #3, #4, #5, #6, #7, #8, #9, #10, #11, #12 and 17 more"
    assert cite([5]) == "1 task: #5"
    assert cite([]) == "none"
    p = make_profile(n_tasks=40, buckets={"always": (), "sometimes": (), "never": (), "missing": tuple(range(40))})
    [f] = run_findings(make_run(p))
    assert f.task_idx == tuple(range(40)) and "40 tasks: #0, #1" in f.detail and "#9 and 30 more" in f.detail
    assert rules.CITED_MAX == 10


def test_every_rule_names_a_taxonomy_category_and_a_suggestion() -> None:
    spots = (hot(5, 4), hot(9, 4))
    p = make_profile(error_rate=8 / 80, error_hotspots=spots, retry_value=0.3,
                     failures=(FailureCount("format_error", 6, 0.6, 4),),
                     buckets={"always": (), "sometimes": tuple(range(10)), "never": (), "missing": (19,)})
    found = run_findings(make_run(p)) + shift_findings(make_shift(steady(), only_b=(3,)))
    assert len(found) == 6
    for f in found:
        assert f.category in TAXONOMY and f.suggestion and f.rule.startswith(("run.", "shift."))
        assert dataclasses.asdict(f)["task_idx"] == f.task_idx
