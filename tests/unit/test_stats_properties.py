"""Properties every estimator must have, whatever the data (hypothesis).

pass@k is within [0, 1], monotone in k, and equals the empirical any-success rate at k = n; every interval
contains its point estimate; the variance split is non-negative and more repeats never beat more tasks.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import examples

from workbench.analysis.run_stats import run_statistics
from workbench.analysis.sources import RunData
from workbench.stats import (
    bootstrap_means,
    clustered_mean,
    mean_with_ci,
    pass_at_k,
    pass_at_k_per_task,
    variance_split,
    variance_split_binary,
    wilson_interval,
)

FAST = settings(max_examples=examples(100), deadline=None)
TOL = 1e-12  # bootstrap means are sums of weighted values: equal values may differ in the last bit


@st.composite
def counts(draw: st.DrawFn, max_tasks: int = 12, max_n: int = 10) -> tuple[list[int], list[int]]:
    """Per task (attempts n, passes c), unequal repeats allowed."""
    n = draw(st.lists(st.integers(1, max_n), min_size=1, max_size=max_tasks))
    c = [draw(st.integers(0, k)) for k in n]
    return n, c


unit_values = st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=30)


@FAST
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_pass_at_k_is_a_probability_monotone_in_k(nc):
    n, c = nc
    values = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert all(a <= b + TOL for a, b in itertools.pairwise(values))
    assert values[-1] == (1.0 if c > 0 else 0.0)  # k = n: did any attempt pass


@FAST
@given(counts())
def test_mean_pass_at_k_is_monotone_and_ends_at_the_any_success_rate(nc):
    n, c = nc
    if len(set(n)) == 1:  # equal repeats: every task defines every k
        means = [float(np.mean(pass_at_k_per_task(n, c, k))) for k in range(1, n[0] + 1)]
        assert all(a <= b + TOL for a, b in itertools.pairwise(means))
        assert means[-1] == np.mean([ci > 0 for ci in c])
    for k in range(1, max(n) + 1):
        per_task = pass_at_k_per_task(n, c, k)
        defined = ~np.isnan(per_task)
        assert np.all((per_task[defined] >= 0) & (per_task[defined] <= 1))
        assert np.array_equal(defined, np.array(n) >= k)


@FAST
@given(unit_values, st.data())
def test_analytic_intervals_contain_their_point(values, data):
    labels = data.draw(st.lists(st.sampled_from("abcd"), min_size=len(values), max_size=len(values)))
    for est in (clustered_mean(values), clustered_mean(values, labels), clustered_mean(values, labels, bounded=True),
                mean_with_ci(values)):
        assert est.low <= est.value <= est.high
        assert est.se >= 0


@FAST
@given(st.integers(0, 50).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_intervals_contain_the_observed_rate(kn):
    k, n = kn
    low, high = wilson_interval(k, n)
    assert 0.0 <= low <= high <= 1.0
    if n:
        assert low - TOL <= k / n <= high + TOL


@FAST
@given(unit_values, st.integers(0, 2**32 - 1))
def test_bootstrap_intervals_contain_their_point_and_stay_within_the_data(values, seed):
    iv = bootstrap_means(values, n_resamples=400, seed=seed).intervals[0]
    assert iv.low - TOL <= iv.value <= iv.high + TOL
    assert min(values) - TOL <= iv.low and iv.high <= max(values) + TOL


@FAST
@given(counts())
def test_variance_split_is_non_negative_and_repeats_never_beat_tasks(nc):
    n, c = nc
    v = variance_split_binary(n, c)
    for part in (v.within, v.across, v.se):
        assert math.isnan(part) or part >= 0
    if not math.isnan(v.se_double_repeats):
        assert v.se_infinite_repeats <= v.se_double_repeats <= v.se + TOL
    if not math.isnan(v.repeat_share):
        assert 0.0 <= v.repeat_share <= 1.0
    assert variance_split(n, c, c) == v


@settings(max_examples=examples(40), deadline=None)
@given(counts(max_tasks=8, max_n=5), st.data())
def test_every_number_of_a_run_sits_inside_its_intervals(nc, data):
    n, c = nc
    errors = [data.draw(st.integers(0, k - ci)) for k, ci in zip(n, c, strict=True)]
    categories = data.draw(st.lists(st.sampled_from(["x", "y", None]), min_size=len(n), max_size=len(n)))
    run = _run(n, c, errors, categories)
    stats = run_statistics(run, by=["category"], cluster="category", bootstrap=200, seed=1)
    for s in (stats.overall, *stats.slices):
        assert s.n_errors == sum(e for e, cat in zip(errors, categories, strict=True)
                                 if s.column is None or (cat or "(none)") == s.value)
        for e in (*s.pass_at_k.values(), s.mean_reward):
            if math.isnan(e.value):
                continue
            if math.isnan(e.low):  # an interval that cannot be computed (one cluster) says why, not a point
                assert e.n_clusters < 2 and "no spread to estimate" in e.note
                continue
            assert e.low <= e.value <= e.high
            if math.isnan(e.boot_low):  # only when every resample is the same, and then it says so
                assert "no spread to resample" in e.note
                continue
            assert e.boot_low - TOL <= e.value <= e.boot_high + TOL


def _run(n: list[int], c: list[int], errors: list[int], categories: list[str | None]) -> RunData:
    """Passes first, then errored failures, then plain failures; plus one task never attempted."""
    rows = []
    for idx, (k, ci, ei, cat) in enumerate(zip(n, c, errors, categories, strict=True)):
        for rep in range(k):
            error = ci <= rep < ci + ei
            rows.append((f"t{idx}", idx, rep, float(rep < ci), rep < ci, error, "timeout" if error else None, cat))
    attempts = pl.DataFrame(rows, schema={"task_id": pl.Utf8, "task_idx": pl.Int64, "repeat": pl.Int64,
                                          "reward": pl.Float64, "passed": pl.Boolean, "error": pl.Boolean,
                                          "failure_category": pl.Utf8, "category": pl.Utf8}, orient="row")
    tasks = pl.DataFrame({
        "task_id": [f"t{i}" for i in range(len(n) + 1)], "task_idx": list(range(len(n) + 1)),
        "n": [*n, 0], "n_pass": [*c, 0], "reward_sum": [float(x) for x in [*c, 0]], "n_error": [*errors, 0],
        "category": [*categories, "x"],
    }, schema_overrides={"n": pl.Int64, "n_pass": pl.Int64, "n_error": pl.Int64})
    return RunData(run_id="r", benchmark="b", model_id=None, metric="reward", metrics=("reward",),
                   n_repeats=max(n), attempts=attempts, tasks=tasks, source="test")
