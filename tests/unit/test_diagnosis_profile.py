"""``run_profile``: one run's coverage, headline numbers, buckets, slices, failures, cost contrast and error
hotspots, worked out by hand on a five-task run."""

from __future__ import annotations

import math
from typing import Any

import polars as pl
import pytest
from factories import FORMAT_ERROR, PASS, TIMEOUT, WRONG, run_from_outcomes

from workbench.analysis.diagnosis.profile import default_slices, run_profile
from workbench.analysis.diagnosis.types import CostContrast, CrossTabCell, ErrorHotspot, FailureCount, SliceRow
from workbench.analysis.run_stats import run_statistics
from workbench.analysis.sources import RunData
from workbench.errors import UsageError

P, W, F, T = PASS, WRONG, FORMAT_ERROR, TIMEOUT  # attempt outcomes
make_run = run_from_outcomes  # also used by test_diagnosis_shift.py


META = ("category", "difficulty")
# t0 always; t1 sometimes (2 of 4); t2 never, one timeout; t3 sometimes with only 2 attempts; t4 never attempted.
TASKS: list[dict[str, Any]] = [
    {"outcomes": [P, P, P, P], "category": "a", "difficulty": "easy"},
    {"outcomes": [P, W, F, P], "category": "a", "difficulty": "hard", "tokens": [100, 200, 400, 100]},
    {"outcomes": [W, W, T, W], "category": "b", "difficulty": "easy", "tokens": [300, 300, 0, 300]},
    {"outcomes": [P, W], "category": "b", "difficulty": "hard", "tokens": [100, 600]},
    {"outcomes": [], "category": "b"},
]


@pytest.fixture(scope="module")
def run() -> RunData:
    return make_run(TASKS, 4, meta=META)


class TestHeadline:
    """Counts, coverage, pass@1 / pass@k / consistency / retry value."""

    def test_counts_and_coverage(self, run):
        p = run_profile(run)
        assert (p.n_tasks, p.n_attempted, p.n_missing) == (5, 4, 1)
        assert (p.n_attempts, p.n_completed, p.n_expected_attempts, p.n_repeats) == (14, 13, 20, 4)
        assert p.coverage == pytest.approx(14 / 20)

    def test_pass_rates_reduce_repeats_within_each_task_first(self, run):
        # p(t) = 1, 1/2, 0, 1/2 over the attempted tasks (the missing one defines none)
        p = run_profile(run)
        assert p.pass_at_1 == pytest.approx(0.5)
        assert p.consistency == pytest.approx(1 / 4)

    def test_pass_at_k_counts_only_the_tasks_with_k_attempts(self, run):
        # k = 4: t3 has 2 attempts, so its any-pass is pass@2, not pass@4; the oracle is over t0, t1, t2:
        # pass@4 = (1 + 1 + 0) / 3 (not 3/4 over all four), and the retry value compares pass@1 on the
        # same three tasks: 2/3 − (1 + 1/2 + 0) / 3 = 1/6.
        p = run_profile(run)
        assert (p.pass_at_k, p.k, p.pass_at_k_tasks) == (pytest.approx(2 / 3), 4, 3)
        assert p.pass_at_k == pytest.approx(p.pass_at_k_curve[-1][1])  # the curve's last point, by hand
        assert p.retry_value == pytest.approx(1 / 6)
        assert p.curve_tasks == (4, 4, 3, 3)  # how many tasks each point of the curve is over

    def test_interval_and_curve_are_those_of_nel_eval_stats(self, run):
        p = run_profile(run)
        stats = run_statistics(run, bootstrap=0).overall.pass_at_k
        assert (p.pass_at_1_low, p.pass_at_1_high) == (stats[1].low, stats[1].high)
        assert [k for k, *_ in p.pass_at_k_curve] == [1, 2, 3, 4]
        assert p.pass_at_k_curve == tuple((k, e.value, e.low, e.high) for k, e in stats.items())
        # pass@2 by hand: t0 1, t1 1 − C(2,2)/C(4,2) = 5/6, t2 0, t3 (2 attempts, 1 pass) 1 → 17/24
        assert p.pass_at_k_curve[1][1] == pytest.approx(17 / 24)

    def test_buckets_and_histogram(self, run):
        p = run_profile(run)
        assert p.buckets == {"always": (0,), "sometimes": (1, 3), "never": (2,), "errored": (), "missing": (4,)}
        assert list(p.buckets) == ["always", "sometimes", "never", "errored", "missing"]
        assert p.bucket_count("sometimes") == 2
        assert p.pass_histogram == ((0, 1), (1, 1), (2, 1), (3, 0), (4, 1))

    def test_a_task_whose_every_attempt_errored_is_errored_as_in_task_stats_and_eval_stats(self):
        # One definition everywhere (was ``never`` here, ``errored`` in nel eval stats).
        p = run_profile(make_run([{"outcomes": [T, T]}, {"outcomes": [P, P]}], 2))
        assert p.buckets["errored"] == (0,) and p.buckets["never"] == () and p.error_rate == pytest.approx(0.5)

    def test_a_run_without_attempts_has_undefined_rates(self):
        p = run_profile(make_run([{"outcomes": []}], 2))
        assert (p.n_attempted, p.n_missing, p.k, p.pass_at_k_curve, p.pass_histogram) == (0, 1, 0, (), ((0, 0),))
        assert math.isnan(p.pass_at_1) and math.isnan(p.pass_at_1_low) and math.isnan(p.error_rate)


class TestSlices:
    """Which columns are profiled, and the per-slice table."""

    def test_default_columns_are_category_then_few_valued_columns(self, run):
        assert run_profile(run).slice_columns == ("category", "difficulty")

    def test_an_identifier_or_a_many_valued_column_is_not_a_slice(self):
        tasks = [{"outcomes": [P], "id_col": str(i), "wide": str(i % 60), "category": "only"} for i in range(120)]
        run = make_run(tasks, 1, meta=("id_col", "wide", "category"))
        assert default_slices(run) == ("category",), "category always; 120 ids and 60 values are not slices"

    def test_given_columns_are_checked(self, run):
        assert run_profile(run, slices=["difficulty"]).slice_columns == ("difficulty",)
        with pytest.raises(UsageError, match=r"no column 'topic'.*columns: category, difficulty"):
            run_profile(run, slices=["topic"])

    def test_slice_rows_count_attempted_tasks_most_first(self, run):
        p = run_profile(run)
        assert p.slices == (
            SliceRow("category", "a", n_tasks=2, pass_at_1=0.75, always_fail_rate=0.0, n_attempts=8),
            SliceRow("category", "b", n_tasks=2, pass_at_1=0.25, always_fail_rate=0.5, n_attempts=6),
            SliceRow("difficulty", "easy", n_tasks=2, pass_at_1=0.5, always_fail_rate=0.5, n_attempts=8),
            SliceRow("difficulty", "hard", n_tasks=2, pass_at_1=0.5, always_fail_rate=0.0, n_attempts=6),
        ), "the never-attempted task (difficulty unset) makes no row"

    def test_a_task_without_the_column_is_its_own_value(self):
        tasks: list[dict[str, Any]] = [{"outcomes": [P], "category": "a"}, {"outcomes": [W], "category": "a"},
                                       {"outcomes": [W]}]
        p = run_profile(make_run(tasks, 1, meta=("category",)))
        assert [(r.value, r.n_tasks) for r in p.slices] == [("a", 2), ("(none)", 1)]


class TestFailures:
    def test_failure_distribution(self, run):
        # 7 failed attempts: wrong on t1, t2 (×3), t3; a format error on t1; a timeout on t2
        assert run_profile(run).failures == (
            FailureCount("wrong", n_attempts=5, share=5 / 7, n_tasks=3),
            FailureCount("format_error", n_attempts=1, share=1 / 7, n_tasks=1),
            FailureCount("timeout", n_attempts=1, share=1 / 7, n_tasks=1),
        )

    def test_category_by_slice_cross_tab(self, run):
        cells = [c for c in run_profile(run).failure_by_slice if c.column == "category"]
        assert cells == [CrossTabCell("category", "a", "format_error", 1), CrossTabCell("category", "a", "wrong", 1),
                         CrossTabCell("category", "b", "wrong", 4), CrossTabCell("category", "b", "timeout", 1)]

    def test_error_hotspots_and_rate(self, run):
        p = run_profile(run)
        assert p.error_hotspots == (ErrorHotspot("t2", 2, n_errors=1, n_attempts=4, categories=("timeout",)),)
        assert p.error_rate == pytest.approx(1 / 14)

    def test_hotspots_most_errors_first_categories_most_frequent_first(self):
        tasks = [{"outcomes": [T, P]}, {"outcomes": [T, F, T]}, {"outcomes": [P]}]
        run = make_run(tasks, 3)
        run = RunData(**{**{f: getattr(run, f) for f in run.__dataclass_fields__},
                         "attempts": run.attempts.with_columns(
                             pl.when((pl.col("task_idx") == 1) & (pl.col("repeat") == 2)).then(pl.lit("rate_limit"))
                             .otherwise(pl.col("failure_category")).alias("failure_category"))})
        spots = run_profile(run).error_hotspots
        assert [(h.task_idx, h.n_errors, h.categories) for h in spots] == [(1, 2, ("rate_limit", "timeout")),
                                                                           (0, 1, ("timeout",))]


class TestCost:
    """Passing against failing attempts, transport errors left out."""

    def test_overall_contrast(self, run):
        cost = {c.measure: c for c in run_profile(run).cost if c.column is None}
        assert list(cost) == ["total_tokens", "latency_ms", "response_chars"]
        # passing: 7 attempts at 100 tokens; failing (timeout excluded): 200, 400, 300, 300, 300, 600
        assert cost["total_tokens"] == CostContrast("total_tokens", None, None, n_pass=7, n_fail=6, pass_mean=100.0,
                                                    fail_mean=350.0, pass_median=100.0, fail_median=300.0)
        assert (cost["latency_ms"].fail_mean, cost["latency_ms"].n_fail) == (10.0, 6), "the timeout is not a cost"
        assert (cost["response_chars"].pass_mean, cost["response_chars"].fail_mean) == (10.0, 40.0)

    def test_within_each_slice_value(self, run):
        a = next(c for c in run_profile(run).cost
                 if (c.column, c.slice_value, c.measure) == ("category", "a", "total_tokens"))
        assert (a.n_pass, a.n_fail, a.pass_mean, a.fail_mean, a.fail_median) == (6, 2, 100.0, 300.0, 300.0)
        overall_first = [c.column for c in run_profile(run).cost]
        assert overall_first[:3] == [None] * 3 and None not in overall_first[3:]

    def test_a_measure_the_run_lacks_is_nan(self, run):
        lacking = RunData(**{**{f: getattr(run, f) for f in run.__dataclass_fields__},
                             "attempts": run.attempts.drop("response_chars")})
        c = next(c for c in run_profile(lacking).cost if c.measure == "response_chars" and c.column is None)
        assert (c.n_pass, c.n_fail) == (0, 0) and math.isnan(c.pass_mean) and math.isnan(c.fail_median)
