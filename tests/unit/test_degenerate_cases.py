"""Statistics in degenerate cases say what they are (issue 14, "Nothing lost, nothing misreported").

Each test sets a degenerate case (no spread, one task, a bounded metric on few tasks, unequal repeats, an
empty rest of the run, errored tasks, a collapsed category, a shard that never ran) against an independent
reference: scipy, or a computation by hand written out beside it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import duckdb
import numpy as np
import pytest
from factories import open_shard, run_from_rewards, run_header, step_row
from scipy import stats as sps

from workbench.analysis.compare import compare_runs
from workbench.analysis.diagnosis.findings import run_findings
from workbench.analysis.diagnosis.profile import run_profile
from workbench.analysis.diagnosis.types import RunDiagnosis
from workbench.analysis.gate import BenchmarkRule, benchmark_status, evaluate_benchmark
from workbench.analysis.run_stats import run_statistics
from workbench.analysis.sources import RunData, load_run
from workbench.resources import sql_path
from workbench.stats import pass_at_k_estimates
from workbench.stats.paired import minimum_detectable_effect
from workbench.store import ingest, open_store

Z2 = sps.norm.ppf(0.975) ** 2


def wilson(k: int, n: int) -> tuple[float, float]:
    ci = sps.binomtest(k, n).proportion_ci(0.95, method="wilson")
    return float(ci.low), float(ci.high)


make_run = run_from_rewards


# ---- the minimum detectable effect -----------------------------------------------------------------
class TestUndefinedMde:
    """Without spread in the paired differences the MDE is undefined, not 0.0000."""

    def test_the_formula_has_no_value_without_spread(self):
        assert math.isnan(minimum_detectable_effect(0.0, 10))
        # with spread it is still the formula: (t[.975, 9] + t[.80, 9]) · sd / √10, by scipy
        ref = (sps.t.ppf(0.975, 9) + sps.t.ppf(0.80, 9)) * 0.3 / math.sqrt(10)
        assert minimum_detectable_effect(0.3, 10) == pytest.approx(ref, rel=1e-12)

    def test_an_inconclusive_verdict_says_it_is_undefined(self):
        runs = [make_run({f"t{i}": [1.0] for i in range(20)}, run_id=r) for r in ("a", "b")]
        c = compare_runs(*runs)
        assert c.verdict == "INCONCLUSIVE" and math.isnan(c.score.mde)
        assert "none of the 20 tasks changed): the minimum detectable effect is undefined" in c.reasons[1]
        assert "detectable at 80 % power is 0.0000" not in c.reasons[1]

    def test_the_gate_says_so_too(self):
        base = make_run({f"t{i}": [1.0] for i in range(20)}, run_id="a")
        cand = make_run({f"t{i}": [1.0] for i in range(20)}, run_id="b")
        result = evaluate_benchmark(BenchmarkRule("b", "critical", max_drop=0.05), base, cand, n_resamples=200)
        assert result.status == "INSUFFICIENT_EVIDENCE"
        assert "undefined" in result.reason and "0.0000 or more" not in result.reason


# ---- zero-width intervals --------------------------------------------------------------------------
class TestNoSpread:
    """All pass, all fail, one task: an interval (Wilson, or the zero-spread floor) with a caveat, never a
    point with se 0."""

    @pytest.mark.parametrize("value", [0.0, 1.0])
    def test_stats_on_an_all_pass_or_all_fail_run(self, value):
        s = run_statistics(make_run({f"t{i}": [value] for i in range(8)}), bootstrap=300).overall.pass_at_k[1]
        assert (s.low, s.high) == pytest.approx(wilson(int(8 * value), 8), abs=5e-16)
        assert s.low < s.high and s.method == "wilson" and "no spread" in s.note

    def test_the_end_of_run_summary_agrees(self):
        est = pass_at_k_estimates(np.full(8, 2), np.full(8, 2), ks=[1, 2])
        for e in est.values():
            assert (e.low, e.high) == pytest.approx(wilson(8, 8), abs=5e-16)
            assert "no spread" in e.note

    def test_stats_on_a_single_task_is_the_floor_not_a_point(self):
        s = run_statistics(make_run({"t": [1.0, 0.0, 0.0]}), bootstrap=300).overall.pass_at_k[1]
        w = Z2 / (1 + Z2)  # the Wilson bound of 0/1 tasks that could have moved, by hand
        assert (s.low, s.high) == pytest.approx((1 / 3 - w / 3, 1 / 3 + w * 2 / 3), rel=1e-12)
        assert "one task" in s.note and math.isnan(s.se)


# ---- bounded metrics -------------------------------------------------------------------------------
class TestBoundedIntervals:
    """A metric in [0, 1] gets an interval in [0, 1], with its method named."""

    def test_a_five_task_judge_metric_in_the_store_views(self, con):
        _load(con, {i: [1.0 if i == 4 else 0.0] for i in range(5)})  # [0, 0, 0, 0, 1]
        low, high = con.execute("SELECT mean_reward_low, mean_reward_high FROM run_scores").fetchone()
        assert (low, high) == pytest.approx(wilson(1, 5), abs=1e-12)  # was [-0.3553, 0.7553]
        assert con.execute("SELECT mean_reward_method FROM run_scores").fetchone() == ("wilson",)

    def test_a_continuous_judge_metric_is_cut_to_its_range(self, con):
        scores = [0.0, 0.1, 0.0, 0.2, 0.9]
        _load(con, {i: [x] for i, x in enumerate(scores)})
        low, high = con.execute("SELECT mean_reward_low, mean_reward_high FROM run_scores").fetchone()
        # by hand: the t interval (scipy) cut to [0, 1], then at least the floor mean ∓ w·(distance to 0 / 1)
        y = np.array(scores)
        t_low, t_high = sps.t.interval(0.95, 4, loc=y.mean(), scale=sps.sem(y))
        w = Z2 / (5 + Z2)
        expected = (min(max(t_low, 0.0), y.mean() * (1 - w)), max(min(t_high, 1.0), y.mean() + w * (1 - y.mean())))
        assert t_low < 0 and (low, high) == pytest.approx(expected, rel=2e-5)  # the view's t quantile: 2e-5
        assert low >= 0.0 and high <= 1.0
        assert con.execute("SELECT mean_reward_method FROM run_scores").fetchone() == ("t",)

    def test_a_two_task_category_stays_within_the_range_of_a_difference(self):
        base = make_run({"a": [1.0, 1.0], "b": [1.0, 1.0], "c": [1.0]}, category={"a": "x", "b": "x", "c": "y"})
        cand = make_run({"a": [0.0, 0.0], "b": [1.0, 0.0], "c": [1.0]}, category={"a": "x", "b": "x", "c": "y"})
        x = next(d for d in compare_runs(base, cand).categories if d.category == "x")
        # differences −1, −0.5: the t interval (scipy) is [−3.93, +2.43]; a difference lives in [−1, 1]
        t_low, t_high = sps.t.interval(0.95, 1, loc=-0.75, scale=sps.sem([-1.0, -0.5]))
        assert t_low < -3.9 and t_high > 2.4
        assert (x.low, x.high) == (-1.0, 1.0)


# ---- pass@k with unequal repeats -------------------------------------------------------------------
class TestPassAtKOverTasksWithKAttempts:
    def test_the_diagnosis_oracle_counts_only_tasks_with_k_attempts_and_says_how_many(self):
        # 3 tasks with 4 attempts (1, 1, 0 passes... pass@4 = any pass), 2 with 2 attempts (both passed once)
        run = make_run({"a": [1, 0, 0, 0], "b": [0, 0, 1, 0], "c": [0, 0, 0, 0], "d": [1, 0], "e": [0, 1]})
        p = run_profile(run)
        assert (p.k, p.pass_at_k) == (4, pytest.approx(2 / 3))  # was 4/5 over all five
        assert p.pass_at_k_tasks == 3
        curve = dict((k, e) for k, e, *_ in p.pass_at_k_curve)
        # pass@2 by hand over all five: 1 − C(3,2)/C(4,2) = 1/2 for a and b, 0 for c, 1 for d and e
        assert curve[2] == pytest.approx((0.5 + 0.5 + 0 + 1 + 1) / 5)
        assert p.curve_tasks == (5, 5, 3, 3)

    def test_stats_name_the_subset(self):
        run = make_run({"a": [1, 0, 0, 0], "b": [0, 0, 1, 0], "c": [0, 0, 0, 0], "d": [1, 0], "e": [0, 1]})
        p4 = run_statistics(run, bootstrap=0).overall.pass_at_k[4]
        assert p4.n_tasks == 3 and "over the 3 of 5 attempted tasks with at least 4 attempts" in p4.note


# ---- findings --------------------------------------------------------------------------------------
def test_a_slice_holding_the_whole_run_is_no_concentration():
    # every attempted task has category "a": "50 %, against 0 % over the rest of the run" had no rest
    tasks = {f"t{i}": [0.0, 0.0] if i < 5 else [1.0, 1.0] for i in range(10)}
    run = make_run(tasks, category=dict.fromkeys(tasks, "a"))
    profile = run_profile(run)
    found = run_findings(RunDiagnosis(profile=profile, sometimes=(), never=()))
    assert "run.never_slice" not in {f.rule for f in found}


# ---- errored: one definition -----------------------------------------------------------------------
def test_errored_is_one_bucket_in_stats_diagnosis_and_the_views(con):
    tasks = {"ok": [1.0, 1.0], "wrong": [0.0, 0.0], "down": [0.0, 0.0]}
    run = make_run(tasks, errors={"down": [True, True]})
    _load(con, {0: [1.0, 1.0], 1: [0.0, 0.0], 2: [0.0, 0.0]}, failures={2: "timeout"})
    view = dict(con.execute("SELECT bucket, count(*) FROM task_stats GROUP BY bucket").fetchall())
    assert (view.get("never"), view.get("errored")) == (1, 1)  # was never 2
    profile = run_profile(run).buckets
    assert (len(profile["never"]), len(profile.get("errored", ()))) == (1, 1)  # was never 2
    stats = run_statistics(run, bootstrap=0).overall.buckets
    assert (stats["never"], stats["errored"]) == (1, 1)  # nel eval stats had it right
    assert con.execute("SELECT n_never, n_errored FROM run_metrics").fetchone() == (1, 1)


# ---- collapsed categories --------------------------------------------------------------------------
def _collapse() -> tuple[RunData, RunData]:
    """1,000 unchanged tasks and a category of 20 that fell from always to never passing."""
    ids = [f"u{i}" for i in range(1000)] + [f"c{i}" for i in range(20)]
    cats = {t: "collapsed" if t.startswith("c") else "steady" for t in ids}
    base = make_run({t: [1.0] for t in ids}, run_id="a", category=cats)
    cand = make_run({t: [0.0 if t.startswith("c") else 1.0] for t in ids}, run_id="b", category=cats)
    return base, cand


def test_a_collapsed_category_is_named_in_compare_and_gate_reasons():
    base, cand = _collapse()
    c = compare_runs(base, cand, n_resamples=200)
    collapsed = next(d for d in c.categories if d.category == "collapsed")
    assert collapsed.p_value == 0.0  # scipy agrees: every task fell by 1 (ttest_rel gives −inf, p 0)
    assert any("category collapsed dropped -1.0000" in r for r in c.reasons)
    gate = evaluate_benchmark(BenchmarkRule("b", "critical", max_drop=0.05), base, cand, n_resamples=200)
    assert gate.status == "PASS"  # the headline drop −0.0196 is ruled within tolerance ...
    from workbench.analysis.gate import Policy, decide

    _, reasons = decide((gate,), Policy(rules=(gate.rule,)))
    assert any("category collapsed dropped -1.0000" in r for r in reasons)  # ... and the collapse is named


# ---- the tasks that would settle a gate ------------------------------------------------------------
def test_the_tasks_a_gate_asks_for_come_from_a_direct_power_calculation():
    from workbench.analysis.compare import MetricDelta

    sd, m, delta = 0.1417, 0.05, -0.0375  # tasks_needed(0.05, sd) is 63: the figure the issue found
    score = MetricDelta(metric="reward", n_tasks=200, baseline=0.8, candidate=0.8 + delta, delta=delta,
                        low=-0.057, high=-0.018, boot_low=-0.057, boot_high=-0.018, decision_low=-0.057,
                        decision_high=-0.018, se=sd / math.sqrt(200), sd=sd, effect_size=delta / sd,
                        mde=minimum_detectable_effect(sd, 200), tasks_needed=63, tests=(), baseline_all=0.8,
                        candidate_all=0.8 + delta, ci_overlap=True)
    status, _, reason = benchmark_status(BenchmarkRule("b", "critical", max_drop=m), score)
    assert status == "INSUFFICIENT_EVIDENCE"
    found = int(re.search(r"about ([\d,]+) tasks would resolve", reason).group(1).replace(",", ""))
    # scipy: the smallest n at which the lower 95 % bound clears −m with 80 % power if the true change is
    # delta: P(T > t[.975, n−1]) ≥ 0.8 for T noncentral t with n−1 df and noncentrality (delta + m)·√n / sd
    def power(n: int) -> float:
        return float(sps.nct.sf(sps.t.ppf(0.975, n - 1), n - 1, (delta + m) * math.sqrt(n) / sd))

    ref = next(n for n in range(900, 1200) if power(n) >= 0.8)
    assert abs(found - ref) <= 0.01 * ref, (found, ref)


# ---- a shard that never ran ------------------------------------------------------------------------
RUN = "sharded"


def _shard_store(path: Path) -> Path:
    """A 6-task run of 2 shards x 2 repeats where only shard 0 (tasks 0-2) ran: shard 1's tasks have no
    run_tasks row."""
    header = run_header(RUN, n_tasks=6, total_shards=2, identity_hash="cd" * 32,
                        config={"primary_metric": "exact", "metrics": ["exact"]})
    w = open_shard(path, header, problem_end=3)
    for idx in range(3):
        for rep in range(2):
            w.append(step_row(RUN, idx, rep, reward=float(idx == 0), passed=idx == 0, latency_ms=1.0, response="r",
                              prompt="p"))
    w.finish("complete")
    ingest(path)
    return path


def test_the_tasks_of_a_shard_that_never_ran_are_missing(tmp_path):
    store = _shard_store(tmp_path / "nel.duckdb")
    data = load_run(RUN, store=store)
    assert data.tasks["task_idx"].to_list() == list(range(6))  # was 0..2
    assert data.tasks["task_id"].to_list()[3:] == [None, None, None]
    overall = run_statistics(data, bootstrap=0).overall
    assert (overall.n_tasks, overall.n_tasks_attempted, overall.buckets["missing"]) == (6, 3, 3)  # was 3, 0
    profile = run_profile(data)
    assert (profile.n_tasks, profile.n_missing, profile.n_expected_attempts) == (6, 3, 12)
    metrics = open_store(store).sql("SELECT n_tasks, n_tasks_attempted, n_missing, n_steps_expected FROM run_metrics")
    assert metrics.row(0) == (6, 3, 3, 12)  # was 3 tasks, 0 missing


# ---- the views on an in-memory database --------------------------------------------------------------
@pytest.fixture
def con():
    c = duckdb.connect()
    c.execute(sql_path("schema.sql").read_text())
    c.execute(sql_path("views.sql").read_text())
    yield c
    c.close()


def _load(con: duckdb.DuckDBPyConnection, rewards: dict[int, list[float]],
          failures: dict[int, str] | None = None) -> None:
    """One run with task i attempted once per reward; ``failures`` gives a task's every attempt a category."""
    con.execute("DELETE FROM runs; DELETE FROM run_tasks; DELETE FROM steps")
    con.execute("INSERT INTO runs (run_id, benchmark, identity_hash, identity, n_tasks, n_repeats, problem_start, "
                "problem_end, total_shards, status, created_at) VALUES ('r', 'b', 'h', '{}', ?, 2, 0, ?, 1, "
                "'complete', now())", [len(rewards), len(rewards)])
    for i, values in rewards.items():
        con.execute("INSERT INTO run_tasks VALUES ('r', ?, ?)", [i, f"t{i}"])
        for rep, reward in enumerate(values):
            con.execute("INSERT INTO steps (run_id, task_idx, repeat, task_id, shard_idx, started_at, reward, passed, "
                        "failure_category) VALUES ('r', ?, ?, ?, 0, now(), ?, ?, ?)",
                        [i, rep, f"t{i}", reward, reward >= 1.0, (failures or {}).get(i)])
