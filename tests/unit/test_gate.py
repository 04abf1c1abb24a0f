"""Specification of ``workbench.analysis.gate``: the policy file (validated strictly, mistakes named by
file:line: dot.path), each benchmark's status, the overall decision, and the gate over exported runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from workbench.analysis.compare import MetricDelta
from workbench.analysis.gate import (
    BenchmarkResult,
    BenchmarkRule,
    Policy,
    benchmark_status,
    decide,
    find_runs,
    load_policy,
    run_gate,
)
from workbench.errors import UsageError
from workbench.types import GateStatus


def write_policy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return path


class TestPolicyFile:
    """A policy is validated like a config: every mistake is one line naming file:line: dot.path."""

    def test_a_full_policy(self, tmp_path):
        policy = load_policy(write_policy(tmp_path, """\
name: release
supporting_breaches_for_no_go: 3
defaults:
  max_drop: 0.02
benchmarks:
  gsm8k:
    tier: critical
  mmlu:
    tier: supporting
    max_relative_drop: 0.05
    metric: exact
    direction: lower_is_better
"""))
        gsm8k, mmlu = policy.rules
        assert (policy.name, policy.supporting_breaches_for_no_go) == ("release", 3)
        assert gsm8k == BenchmarkRule("gsm8k", "critical", max_drop=0.02)
        assert mmlu == BenchmarkRule("mmlu", "supporting", 0.02, 0.05, "exact", "lower_is_better")

    @pytest.mark.parametrize(("text", "where", "message"), [
        ("benchmarks:\n  gsm8k:\n    tier: critical\n    max_dorp: 0.1\n", ":4: benchmarks.gsm8k.max_dorp",
         "unknown key; expected one of: tier, max_drop"),
        ("benchmarks:\n  gsm8k:\n    tier: essential\n    max_drop: 0.1\n", ":3: benchmarks.gsm8k.tier",
         "expected one of critical, supporting, advisory"),
        ("benchmarks:\n  gsm8k:\n    tier: critical\n    max_drop: 1.5\n", ":4: benchmarks.gsm8k.max_drop",
         "1.5 is outside [0, 1]"),
        ("benchmarks:\n  gsm8k:\n    tier: critical\n    max_drop: -0.1\n", ":4: benchmarks.gsm8k.max_drop",
         "outside [0, 1]"),
        ("benchmarks:\n  gsm8k:\n    tier: critical\n    max_drop: lots\n", ":4: benchmarks.gsm8k.max_drop",
         "expected a number, got a string"),
        ("benchmarks:\n  gsm8k:\n    tier: critical\n    max_drop: true\n", ":4: benchmarks.gsm8k.max_drop",
         "expected a number, got a boolean"),
        ("benchmarks:\n  gsm8k:\n    tier: critical\n    max_drop: 0.1\n    direction: up\n",
         ":5: benchmarks.gsm8k.direction", "expected one of higher_is_better, lower_is_better"),
        ("benchmarks:\n  gsm8k:\n    max_drop: 0.1\n", ":2: benchmarks.gsm8k", "missing 'tier'"),
        ("benchmarks:\n  gsm8k:\n    tier: critical\n", ":2: benchmarks.gsm8k", "set max_drop or max_relative_drop"),
        ("benchmarks:\n  gsm8k: critical\n", ":2: benchmarks.gsm8k", "expected a mapping, got a string"),
        ("benchmarks: {}\n", ":1: benchmarks", "no benchmark listed"),
        ("benchmark:\n  gsm8k: {tier: critical, max_drop: 0.1}\n", ":1: benchmark", "unknown key"),
        ("name: x\n", ": benchmarks", "missing"),
        ("supporting_breaches_for_no_go: 0\nbenchmarks: {a: {tier: critical, max_drop: 0.1}}\n",
         ":1: supporting_breaches_for_no_go", "at least 1"),
    ])
    def test_mistakes_name_file_line_and_path(self, tmp_path, text, where, message):
        path = write_policy(tmp_path, text)
        with pytest.raises(UsageError) as info:
            load_policy(path)
        text = str(info.value)
        assert text.startswith(f"{path}{where}: "), text
        assert message in text
        assert "\n" not in text

    def test_invalid_yaml_names_the_line(self, tmp_path):
        path = write_policy(tmp_path, "benchmarks:\n  gsm8k: [\n")
        with pytest.raises(UsageError, match=r"policy.yaml:\d+: invalid YAML"):
            load_policy(path)


def score(delta: float, low: float, high: float, *, baseline: float = 0.8, n: int = 400,
          mde: float = 0.03) -> MetricDelta:
    return MetricDelta(
        metric="reward", n_tasks=n, baseline=baseline, candidate=baseline + delta, delta=delta, low=low, high=high,
        boot_low=low, boot_high=high, decision_low=low, decision_high=high, se=0.01, sd=0.2, effect_size=0.1, mde=mde,
        tasks_needed=700, tests=(), baseline_all=baseline, candidate_all=baseline + delta, ci_overlap=True)


class TestBenchmarkStatus:
    """One benchmark: PASS / BREACH / INSUFFICIENT_EVIDENCE / MISSING from its paired interval."""

    @pytest.mark.parametrize(("delta", "low", "high", "expected"), [
        (-0.10, -0.14, -0.06, "BREACH"),
        (-0.015, -0.03, -0.001, "INSUFFICIENT_EVIDENCE"),  # significant, within tolerance, more not ruled out
        (-0.05, -0.12, 0.02, "INSUFFICIENT_EVIDENCE"),
        (-0.01, -0.019, -0.001, "PASS"),  # a significant drop within tolerance
        (0.03, -0.01, 0.07, "PASS"),
    ])
    def test_higher_is_better(self, delta, low, high, expected):
        status, tolerance, reason = benchmark_status(BenchmarkRule("b", "critical", max_drop=0.02),
                                                     score(delta, low, high))
        assert status == expected and tolerance == 0.02
        assert "tolerated drop 0.0200" in reason

    def test_lower_is_better_turns_a_rise_into_a_drop(self):
        rule = BenchmarkRule("b", "critical", max_drop=0.02, direction="lower_is_better")
        assert benchmark_status(rule, score(0.10, 0.06, 0.14))[0] == "BREACH"
        assert benchmark_status(rule, score(-0.10, -0.14, -0.06))[0] == "PASS"

    def test_the_stricter_tolerance_applies(self):
        rule = BenchmarkRule("b", "critical", max_drop=0.05, max_relative_drop=0.02)
        assert rule.tolerance(0.5) == pytest.approx(0.01)  # 2 % of 0.5
        assert rule.tolerance(5.0) == 0.05
        assert BenchmarkRule("b", "critical", max_relative_drop=0.1).tolerance(0.6) == pytest.approx(0.06)

    def test_no_paired_task_is_missing(self):
        status, tolerance, _ = benchmark_status(BenchmarkRule("b", "critical", max_drop=0.02),
                                                score(math.nan, math.nan, math.nan, n=0))
        assert status == "MISSING" and math.isnan(tolerance)


def result(tier: str, status: str) -> BenchmarkResult:
    return BenchmarkResult(rule=BenchmarkRule(f"{tier}-{status}", tier, max_drop=0.02), status=GateStatus(status),
                           reason="r")


class TestDecision:
    """Tiers turn statuses into GO / NO-GO / INCONCLUSIVE."""

    POLICY = Policy(rules=())

    @pytest.mark.parametrize(("statuses", "expected"), [
        ([("critical", "PASS"), ("supporting", "PASS"), ("advisory", "PASS")], "GO"),
        ([("critical", "BREACH"), ("critical", "PASS")], "NO-GO"),
        ([("critical", "MISSING")], "NO-GO"),
        ([("critical", "INSUFFICIENT_EVIDENCE"), ("supporting", "PASS")], "INCONCLUSIVE"),
        ([("critical", "INSUFFICIENT_EVIDENCE"), ("critical", "BREACH")], "NO-GO"),
        ([("critical", "PASS"), ("supporting", "BREACH")], "GO"),
        ([("critical", "PASS"), ("supporting", "BREACH"), ("supporting", "BREACH")], "NO-GO"),
        ([("critical", "PASS"), ("supporting", "MISSING"), ("supporting", "INSUFFICIENT_EVIDENCE")], "GO"),
        ([("critical", "PASS"), ("advisory", "BREACH"), ("advisory", "BREACH"), ("advisory", "MISSING")], "GO"),
    ])
    def test_decision(self, statuses, expected):
        decision, reasons = decide(tuple(result(t, s) for t, s in statuses), self.POLICY)
        assert decision == expected
        assert reasons

    def test_every_non_pass_benchmark_is_a_reason(self):
        _, reasons = decide((result("critical", "PASS"), result("supporting", "BREACH"),
                             result("advisory", "MISSING")), self.POLICY)
        assert reasons[0].startswith("supporting supporting-BREACH: BREACH")
        assert reasons[1].startswith("advisory advisory-MISSING: MISSING")
        assert "not a NO-GO (that takes 2)" in reasons[2]

    def test_the_supporting_limit_is_the_policys(self):
        policy = Policy(rules=(), supporting_breaches_for_no_go=1)
        assert decide((result("supporting", "BREACH"),), policy)[0] == "NO-GO"


# ---- the gate over exported runs ------------------------------------------------------------------
def export(root: Path, run_id: str, benchmark: str, created: str, rewards: dict[int, list[float]]) -> Path:
    """A minimal exported run: a bundle and its results.jsonl."""
    folder = root / "runs" / run_id
    folder.mkdir(parents=True)
    bundle = {"format": "nel-eval-bundle", "format_version": 1, "run_id": run_id, "benchmark": benchmark,
              "model_id": "m", "created_at": created, "n_repeats": max(len(v) for v in rewards.values()),
              "primary_metric": "reward", "metrics": ["reward"], "config": {}}
    (folder / f"eval-{run_id}.json").write_text(json.dumps(bundle))
    lines = [json.dumps({"problem_idx": i, "repeat": r, "task_id": f"{benchmark}-{i}", "reward": v,
                         "passed": v >= 1, "failure_category": None, "metadata": {"idx": i}})
             for i, values in rewards.items() for r, v in enumerate(values)]
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    return folder


GOOD = {i: [1.0, 1.0] if i % 3 else [0.0, 0.0] for i in range(300)}
BAD = {i: [0.0, 0.0] if i % 2 else v for i, v in GOOD.items()}


class TestRunGate:
    """The gate over two directories of exported runs."""

    def test_breached_critical_benchmark_is_no_go(self, tmp_path):
        export(tmp_path / "base", "b1", "gsm8k", "2026-01-01T00:00:00Z", GOOD)
        export(tmp_path / "cand", "c1", "gsm8k", "2026-01-02T00:00:00Z", BAD)
        policy = Policy(rules=(BenchmarkRule("gsm8k", "critical", max_drop=0.02),))
        gate = run_gate(tmp_path / "base", tmp_path / "cand", policy, n_resamples=500)
        assert gate.decision == "NO-GO"
        (only,) = gate.benchmarks
        assert only.status == "BREACH" and only.delta < -0.3
        json.dumps(gate.to_dict(), allow_nan=False)

    def test_the_newest_run_is_used_and_that_is_said(self, tmp_path):
        export(tmp_path / "base", "b1", "gsm8k", "2026-01-01T00:00:00Z", GOOD)
        export(tmp_path / "cand", "old", "gsm8k", "2026-01-02T00:00:00Z", BAD)
        export(tmp_path / "cand", "new", "gsm8k", "2026-01-03T00:00:00Z", GOOD)
        assert [r.run_id for r in find_runs(tmp_path / "cand")["gsm8k"]] == ["new", "old"]
        policy = Policy(rules=(BenchmarkRule("gsm8k", "critical", max_drop=0.02),))
        gate = run_gate(tmp_path / "base", tmp_path / "cand", policy, n_resamples=500)
        (only,) = gate.benchmarks
        assert only.candidate_run == "new" and only.status == "PASS" and gate.decision == "GO"
        assert only.notes == ("candidate: 2 runs of gsm8k; used the newest, new (created 2026-01-03T00:00:00Z)",)

    def test_missing_benchmarks_and_unlisted_ones(self, tmp_path):
        export(tmp_path / "base", "b1", "gsm8k", "2026-01-01T00:00:00Z", GOOD)
        export(tmp_path / "base", "b2", "extra", "2026-01-01T00:00:00Z", GOOD)
        export(tmp_path / "cand", "c1", "gsm8k", "2026-01-02T00:00:00Z", GOOD)
        policy = Policy(rules=(BenchmarkRule("gsm8k", "critical", max_drop=0.02),
                               BenchmarkRule("mmlu", "advisory", max_drop=0.02),
                               BenchmarkRule("gsm8k-judge", "critical", max_drop=0.02)))
        gate = run_gate(tmp_path / "base", tmp_path / "cand", policy, n_resamples=500)
        assert [b.status for b in gate.benchmarks] == ["PASS", "MISSING", "MISSING"]
        assert "baseline or candidate" in gate.benchmarks[1].reason
        assert gate.decision == "NO-GO"  # a critical benchmark is missing
        assert gate.unlisted == ("extra",)

    def test_a_metric_the_runs_lack_is_missing(self, tmp_path):
        export(tmp_path / "base", "b1", "gsm8k", "2026-01-01T00:00:00Z", GOOD)
        export(tmp_path / "cand", "c1", "gsm8k", "2026-01-02T00:00:00Z", GOOD)
        policy = Policy(rules=(BenchmarkRule("gsm8k", "advisory", max_drop=0.02, metric="f1"),))
        (only,) = run_gate(tmp_path / "base", tmp_path / "cand", policy, n_resamples=500).benchmarks
        assert only.status == "MISSING" and "no metric 'f1'" in only.reason

    def test_a_directory_that_is_not_there(self, tmp_path):
        with pytest.raises(UsageError, match="not a directory"):
            run_gate(tmp_path / "nope", tmp_path, Policy(rules=()))
