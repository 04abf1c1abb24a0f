"""Specification of ``workbench.analysis.compare``: pairing by task identity, per-task reduction, the verdict
rules, flips, categories, runtime and the regression.json shape, on small runs built by hand."""

from __future__ import annotations

import dataclasses
import json
import math
from functools import partial

import numpy as np
import polars as pl
import pytest
from factories import run_from_rewards
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import examples

from workbench.analysis.compare import (
    Coverage,
    MetricDelta,
    compare_runs,
    regression_report,
    task_scores,
    verdict,
)
from workbench.analysis.sources import RunData

# the runs of this module: benchmark "bench", 100 ms and 10 + 50 tokens an attempt
make_run = partial(run_from_rewards, run_id="run", benchmark="bench", latency=100.0, prompt_tokens=10,
                   completion_tokens=50)


def binary_runs(worse: int, better: int, both_right: int, both_wrong: int) -> tuple[RunData, RunData]:
    """Single-attempt binary runs with the given 2x2 table."""
    base: dict[str, list[float]] = {}
    cand: dict[str, list[float]] = {}
    kinds = [("w", 1.0, 0.0, worse), ("b", 0.0, 1.0, better), ("r", 1.0, 1.0, both_right), ("x", 0.0, 0.0, both_wrong)]
    for prefix, bv, cv, count in kinds:
        for i in range(count):
            base[f"{prefix}{i}"], cand[f"{prefix}{i}"] = [bv], [cv]
    return make_run(base, run_id="base"), make_run(cand, run_id="cand")


class TestPairing:
    """Runs are paired by task identity and each task is reduced to one score per side."""

    def test_pairs_by_task_id_not_by_position(self):
        base = make_run({"a": [1.0], "b": [0.0], "c": [1.0]}, idx={"a": 0, "b": 1, "c": 2})
        cand = make_run({"c": [1.0], "a": [0.0], "b": [0.0]}, idx={"c": 0, "a": 1, "b": 2})  # shuffled rows
        result = compare_runs(base, cand)
        assert result.coverage.n_paired == 3
        assert [f.task_id for f in result.flips.regressions] == ["a"]
        assert not result.flips.improvements

    def test_tasks_on_one_side_are_listed_not_dropped_silently(self):
        base = make_run({"a": [1.0], "b": [1.0], "only-b": [1.0]})
        cand = make_run({"a": [1.0], "b": [0.0], "only-c1": [0.0], "only-c2": [1.0]})
        result = compare_runs(base, cand)
        assert result.coverage.only_baseline == ("only-b",)
        assert result.coverage.only_candidate == ("only-c1", "only-c2")
        assert result.score.n_tasks == 2
        assert any("1 tasks only in the baseline and 2 only in the candidate" in r for r in result.reasons)

    def test_unequal_repeats_give_one_mean_per_task_and_rule_out_mcnemar(self):
        base = make_run({"a": [1, 1, 0], "b": [0, 0, 0]})
        cand = make_run({"a": [1, 0, 0, 0, 0], "b": [1]})
        result = compare_runs(base, cand)
        assert result.score.baseline == pytest.approx((2 / 3 + 0) / 2)
        assert result.score.candidate == pytest.approx((1 / 5 + 1) / 2)
        mcnemar = result.score.test("mcnemar_exact")
        assert not mcnemar.applicable and "several attempts" in mcnemar.note

    def test_errored_attempts_count_as_failures_and_are_reported_apart(self):
        base = make_run({"a": [1, 1], "b": [1, 0]})
        cand = make_run({"a": [1, 1], "b": [1, 0]}, errors={"a": [True, False]})
        scores = task_scores(cand)
        assert scores.filter(pl.col("task_id") == "a")["score"][0] == 0.5
        result = compare_runs(base, cand)
        assert result.candidate.n_errors == 1 and result.baseline.n_errors == 0
        assert result.runtime_delta("error_rate").candidate == 0.25
        regression = result.flips.regressions[0]
        assert (regression.task_id, regression.candidate_errors, regression.candidate_passes) == ("a", 1, 1)

    def test_unattempted_tasks_are_counted(self):
        result = compare_runs(make_run({"a": [1]}, unattempted=2), make_run({"a": [1]}))
        assert (result.coverage.unattempted_baseline, result.coverage.unattempted_candidate) == (2, 0)

    def test_different_metrics_are_refused(self):
        base = make_run({"a": [1]})
        cand = dataclasses.replace(make_run({"a": [1]}), metric="f1")
        with pytest.raises(ValueError, match="different metrics"):
            compare_runs(base, cand)


class TestMcNemarInComparison:
    """Single binary outcomes get McNemar's exact test and NeMo Evaluator's contingency table."""

    def test_worked_example(self):
        base, cand = binary_runs(worse=8, better=2, both_right=60, both_wrong=30)
        result = compare_runs(base, cand)
        assert result.score.test("mcnemar_exact").p_value == pytest.approx(112 / 1024)
        report = regression_report(result)
        assert report["test_used"] == "mcnemar"
        assert report["flip_report"]["contingency"] == {
            "both_correct": 60, "both_wrong": 30, "baseline_only_correct": 8, "candidate_only_correct": 2}
        assert report["mcnemar"]["n_discordant"] == 10


class TestVerdictRules:
    """The rules of ``verdict``, one by one, on a hand-set delta and interval (m = 0.05)."""

    @staticmethod
    def score(delta: float, low: float, high: float, n: int = 500, mde: float = 0.03) -> MetricDelta:
        return MetricDelta(
            metric="reward", n_tasks=n, baseline=0.7, candidate=0.7 + delta, delta=delta, low=low, high=high,
            boot_low=low, boot_high=high, decision_low=low, decision_high=high, se=0.01, sd=0.2, effect_size=0.1,
            mde=mde, tasks_needed=900, tests=(), baseline_all=0.7, candidate_all=0.7 + delta, ci_overlap=True)

    @pytest.mark.parametrize(("delta", "low", "high", "expected", "phrase"), [
        (-0.08, -0.10, -0.06, "BLOCK", "significant drop larger than"),
        (-0.06, -0.12, -0.001, "BLOCK", "significant drop larger than"),
        (-0.03, -0.045, -0.015, "WARN", "significant, but within"),
        (-0.03, -0.07, -0.001, "WARN", "significant, but within"),
        (-0.07, -0.15, 0.01, "WARN", "not significantly"),
        (-0.01, -0.07, 0.05, "INCONCLUSIVE", "cannot be ruled out"),
        (0.00, -0.09, 0.09, "INCONCLUSIVE", "cannot be ruled out"),
        (0.01, -0.04, 0.06, "PASS", "rules out"),
        (0.10, 0.02, 0.18, "PASS", "rules out"),
        (-0.05, -0.05, 0.0, "PASS", "rules out"),  # the boundary: lo = −m is inside tolerance
    ])
    def test_rule(self, delta, low, high, expected, phrase):
        result, reasons = verdict(self.score(delta, low, high), 0.05)
        assert result == expected
        assert phrase in reasons[0]

    def test_inconclusive_says_what_would_settle_it(self):
        _, reasons = verdict(self.score(0.0, -0.09, 0.09), 0.05)
        assert "smallest drop detectable at 80 % power is 0.0300" in reasons[1]
        assert "about 900 paired tasks" in reasons[1]

    def test_no_paired_task_is_inconclusive(self):
        result, reasons = verdict(self.score(math.nan, math.nan, math.nan, n=0), 0.05)
        assert result == "INCONCLUSIVE" and "no task" in reasons[0]

    @pytest.mark.parametrize(("base", "expected"), [("PASS", "WARN"), ("INCONCLUSIVE", "WARN"), ("BLOCK", "BLOCK")])
    def test_rising_errors_lift_the_verdict_to_warn(self, base, expected):
        bounds = {"PASS": (0.0, -0.01, 0.01), "INCONCLUSIVE": (0.0, -0.09, 0.09), "BLOCK": (-0.2, -0.3, -0.1)}[base]
        result, reasons = verdict(self.score(*bounds), 0.05, error_rate_delta=0.08)
        assert result == expected
        assert any("error rate rose by 0.0800" in r for r in reasons)

    def test_unpaired_tasks_are_a_reason(self):
        coverage = Coverage(n_paired=500, only_baseline=("x",), only_candidate=(), unattempted_baseline=0,
                            unattempted_candidate=0)
        _, reasons = verdict(self.score(0.0, -0.01, 0.01), 0.05, coverage=coverage)
        assert "1 tasks only in the baseline" in reasons[-1]


class TestEdgeCases:
    """One task, one repeat, all pass, all fail: a verdict never claims more than the tasks show."""

    def test_one_unchanged_task_is_inconclusive(self):
        result = compare_runs(make_run({"a": [1.0]}), make_run({"a": [1.0]}))
        assert result.verdict == "INCONCLUSIVE"
        assert result.score.decision_low < -0.05 < 0.05 < result.score.decision_high
        assert math.isnan(result.score.mde) and "too few paired tasks" in result.reasons[1]

    def test_one_failed_task_warns_but_cannot_block(self):
        result = compare_runs(make_run({"a": [1.0]}), make_run({"a": [0.0]}))
        assert result.verdict == "WARN" and "not significantly" in result.reasons[0]
        assert result.score.decision_high > 0

    @pytest.mark.parametrize("value", [1.0, 0.0])
    def test_all_pass_or_all_fail_on_a_few_tasks_is_inconclusive(self, value):
        runs = [make_run({f"t{i}": [value] * 3 for i in range(20)}) for _ in range(2)]
        result = compare_runs(*runs)
        assert result.score.delta == 0 and result.score.low == result.score.high == 0  # the bare t interval
        assert result.verdict == "INCONCLUSIVE"  # 20 unchanged tasks cannot rule out a 5-point drop

    @pytest.mark.parametrize("value", [1.0, 0.0])
    def test_all_pass_or_all_fail_on_many_tasks_passes(self, value):
        runs = [make_run({f"t{i}": [value] for i in range(400)}) for _ in range(2)]
        result = compare_runs(*runs)
        assert result.verdict == "PASS"
        assert result.score.test("mcnemar_exact").p_value == 1.0

    def test_no_common_task(self):
        result = compare_runs(make_run({"a": [1.0]}), make_run({"b": [1.0]}))
        assert result.verdict == "INCONCLUSIVE" and result.score.n_tasks == 0
        json.dumps(regression_report(result), allow_nan=False)

    def test_a_clear_large_drop_blocks(self):
        base, cand = binary_runs(worse=60, better=5, both_right=100, both_wrong=35)
        result = compare_runs(base, cand)
        assert result.verdict == "BLOCK"


class TestFlipsAndBreakdowns:
    """Flips, categories and runtime."""

    def test_regressions_largest_drop_first_then_improvements(self):
        base = make_run({"a": [1, 1], "b": [1, 0], "c": [1, 1], "d": [0, 0], "e": [0, 1], "f": [1, 1]})
        cand = make_run({"a": [1, 0], "b": [0, 0], "c": [0, 0], "d": [1, 1], "e": [1, 1], "f": [1, 1]})
        flips = compare_runs(base, cand).flips
        assert [f.task_id for f in flips.regressions] == ["c", "a", "b"]  # −1, then −0.5 by problem index
        assert [f.task_id for f in flips.improvements] == ["d", "e"]
        assert flips.n_unchanged == 1 and flips.n_stable_correct == 1
        assert (flips.regressions[0].baseline_passes, flips.regressions[0].candidate_passes) == (2, 0)

    def test_categories_are_paired_within_category(self):
        cat = {"a": "x", "b": "x", "c": "y", "d": "y", "e": "y"}
        base = make_run({"a": [1], "b": [1], "c": [0], "d": [0], "e": [1]}, category=cat)
        cand = make_run({"a": [0], "b": [0], "c": [1], "d": [0], "e": [1]}, category=cat)
        result = compare_runs(base, cand)
        by = {d.category: d for d in result.categories}
        assert by["x"].delta == -1.0 and by["x"].n_regressions == 2
        assert by["y"].delta == pytest.approx(1 / 3) and by["y"].n_improvements == 1
        assert [d.category for d in result.categories] == ["x", "y"]  # largest drop first
        assert regression_report(result)["flip_report"]["summary"]["category_breakdown"] == {
            "x": {"regressions": 2, "improvements": 0}, "y": {"regressions": 0, "improvements": 1}}

    def test_runtime_deltas(self):
        base = make_run({"a": [1, 1]}, latency=100.0, completion_tokens=50)
        cand = make_run({"a": [1, 1]}, latency=200.0, completion_tokens=50)
        result = compare_runs(base, cand)
        tps = result.runtime_delta("completion_tokens_per_s")
        assert (tps.baseline, tps.candidate) == (500.0, 250.0)  # 100 tokens over 0.2 s, then over 0.4 s
        assert result.runtime_delta("latency_p50_ms").delta == 100.0


class TestSymmetry:
    """Swapping the sides negates every delta, keeps every p-value and swaps the flip lists."""

    def test_swap(self):
        rng = np.random.default_rng(3)
        tasks = [f"t{i}" for i in range(120)]
        base = make_run({t: list(rng.integers(0, 2, 4).astype(float)) for t in tasks})
        cand = make_run({t: list(rng.integers(0, 2, 4).astype(float)) for t in tasks})
        forward, backward = compare_runs(base, cand, seed=7), compare_runs(cand, base, seed=7)
        assert forward.score.delta == -backward.score.delta
        for test in forward.score.tests:
            other = backward.score.test(test.name)
            assert (math.isnan(test.p_value) and math.isnan(other.p_value)) or test.p_value == other.p_value
        assert [f.task_id for f in forward.flips.regressions] == [f.task_id for f in backward.flips.improvements]


class TestReport:
    """regression.json: NeMo Evaluator's field names plus ours, JSON-native."""

    def test_fields_and_json_native(self):
        cat = {"a": "x", "b": "y"}
        result = compare_runs(make_run({"a": [1, 0], "b": [1, 1]}, category=cat),
                              make_run({"a": [1, 1], "b": [0, 1]}, category=cat))
        report = regression_report(result)
        json.dumps(report, allow_nan=False)
        for key in ("score_deltas", "category_deltas", "runtime_deltas", "verdict", "verdict_reasons", "flip_report",
                    "mcnemar", "permutation_test", "test_used", "threshold", "report_version", "baseline",
                    "candidate", "coverage", "tests"):
            assert key in report, key
        delta = report["score_deltas"]["reward"]
        for key in ("baseline", "candidate", "delta", "relative_pct", "ci_overlap", "ci_low", "ci_high",
                    "bootstrap_low", "bootstrap_high", "effect_size", "mde", "tasks_needed", "p_values"):
            assert key in delta, key
        assert set(delta["p_values"]) == {"mcnemar_exact", "paired_t", "wilcoxon", "sign_flip_permutation",
                                          "mann_whitney_u"}
        assert report["flip_report"]["regressions"][0]["problem_idx"] == 1


@st.composite
def run_pair(draw: st.DrawFn) -> tuple[RunData, RunData]:
    """Two runs over overlapping tasks, with unequal repeats, binary or graded rewards and errored attempts."""
    n = draw(st.integers(1, 25))
    graded = draw(st.booleans())
    reward = st.sampled_from([0.0, 0.5, 1.0]) if graded else st.sampled_from([0.0, 1.0])
    sides = []
    for _ in range(2):
        kept = [f"t{i}" for i in range(n) if draw(st.integers(0, 9)) > 0]
        rewards = {t: draw(st.lists(reward, min_size=1, max_size=4)) for t in kept}
        errors = {t: [draw(st.integers(0, 9)) == 0 for _ in v] for t, v in rewards.items()}
        sides.append(make_run(rewards, errors=errors) if rewards else make_run({"lonely": [0.0]}))
    return sides[0], sides[1]


@settings(max_examples=examples(40), deadline=None)
@given(run_pair(), st.integers(0, 1000))
def test_swapping_runs_negates_deltas_and_keeps_p_values(pair, seed):
    base, cand = pair
    forward, backward = compare_runs(base, cand, seed=seed, n_resamples=500), compare_runs(cand, base, seed=seed,
                                                                                          n_resamples=500)
    f, b = forward.score, backward.score
    assert (math.isnan(f.delta) and math.isnan(b.delta)) or f.delta == -b.delta
    if f.n_tasks:
        assert f.decision_low == pytest.approx(-b.decision_high) and f.decision_high == pytest.approx(-b.decision_low)
        assert f.decision_low <= f.delta <= f.decision_high and f.boot_low <= f.delta <= f.boot_high
    for test in f.tests:
        other = b.test(test.name)
        assert (math.isnan(test.p_value) and math.isnan(other.p_value)) or test.p_value == other.p_value, test.name
    assert len(forward.flips.regressions) == len(backward.flips.improvements)
    assert forward.coverage.only_baseline == backward.coverage.only_candidate


def test_a_run_still_being_written_is_named_in_the_warnings() -> None:
    """Its numbers will move: the comparison says so (the TUI's headline and `nel compare` show it)."""
    base, cand = binary_runs(worse=2, better=3, both_right=5, both_wrong=5)
    live = dataclasses.replace(cand, status="running")
    (warning,) = [w for w in compare_runs(base, live).warnings if "still running" in w]
    assert warning.startswith(f"the candidate {cand.run_id} is still running ({cand.attempts.height:,} attempts")
    assert not [w for w in compare_runs(base, dataclasses.replace(cand, status="complete")).warnings
                if "still running" in w]
