"""Score-shift attribution: the paired tasks grouped by outcome transition, groups that add up to Δ exactly
at any scale, and tasks ranked within a group by the size of their change, then its confidence (Fisher's
exact test), then task id — never by position in the benchmark."""

from __future__ import annotations

import math
import random

import numpy as np
import polars as pl
import pytest
from scipy.stats import fisher_exact
from test_diagnosis_profile import P, T, W, make_run

from workbench.analysis.diagnosis.attribution import attribute, points
from workbench.analysis.diagnosis.profile import run_profile
from workbench.analysis.diagnosis.shift import score_shift
from workbench.stats.proportions import fisher_exact_many


def frame(rows: list[tuple[str, int, int, int, int, int]]) -> pl.DataFrame:
    """Paired tasks from (task id, index, passes A, attempts A, passes B, attempts B), no errors."""
    return pl.DataFrame({
        "task_id": [r[0] for r in rows], "idx_a": [r[1] for r in rows], "idx_b": [r[1] for r in rows],
        "n_a": [r[3] for r in rows], "pass_a": [r[2] for r in rows], "err_a": [0] * len(rows),
        "n_b": [r[5] for r in rows], "pass_b": [r[4] for r in rows], "err_b": [0] * len(rows),
        "p_a": [r[2] / r[3] for r in rows], "p_b": [r[4] / r[5] for r in rows],
    })


class TestTheIssuesExample:
    """Two GSM8K-like runs of 100 tasks where 80 moved by about ±0.01 each and Δ = +0.07: a top-12 list
    left most of Δ in "the rest" and alternated red and green by task index."""

    @pytest.fixture(scope="class")
    def shift(self):
        kinds = ([([W, W], [P, P])] * 39 + [([P, P], [W, W])] * 33 + [([P, W], [P, P])] * 5 + [([P, W], [W, W])] * 3
                 + [([P, P], [P, P])] * 10 + [([W, W], [W, W])] * 10)
        random.Random(7).shuffle(kinds)  # ups and downs interleaved along the benchmark
        cats = ("algebra", "geometry")
        ids = [f"q{i * 37 % 100:03d}" for i in range(100)]  # content hashes: their order is not the index order
        a = [{"id": ids[i], "outcomes": oa, "category": cats[i % 2]} for i, (oa, _) in enumerate(kinds)]
        b = [{"id": ids[i], "outcomes": ob, "category": cats[i % 2]} for i, (_, ob) in enumerate(kinds)]
        run_a, run_b = make_run(a, 2, run_id="A", meta=("category",)), make_run(b, 2, run_id="B", meta=("category",))
        return score_shift(run_a, run_b, run_profile(run_a), run_profile(run_b))

    def test_the_groups_account_for_the_whole_delta(self, shift):
        groups = shift.attribution.groups
        assert shift.delta == pytest.approx(0.07)
        assert math.fsum(g.contribution for g in groups) == pytest.approx(shift.delta, abs=1e-12)
        assert sum(g.n_tasks for g in groups) == shift.n_paired == 100
        assert shift.attribution.n_moved == 80

    def test_drops_first_then_gains_then_the_unchanged_each_with_count_and_sum(self, shift):
        got = [(g.transition, g.n_tasks, round(g.contribution, 12)) for g in shift.attribution.groups]
        assert got == [("always→never", 33, -0.33), ("sometimes→never", 3, -0.015), ("never→always", 39, 0.39),
                       ("sometimes→always", 5, 0.025), ("always→always", 10, 0.0), ("never→never", 10, 0.0)]

    def test_alike_tasks_are_ranked_by_task_id_not_by_their_index(self, shift):
        group = shift.attribution.groups[0]
        ids = [t.task_id for t in group.tasks]
        assert ids == sorted(ids) and len(ids) == 33
        assert [t.task_idx_b for t in group.tasks] != sorted(t.task_idx_b for t in group.tasks)
        assert all(t.contribution == -0.01 for t in group.tasks)

    def test_each_group_is_broken_down_by_category(self, shift):
        group = shift.attribution.groups[2]
        assert {c.category for c in group.categories} == {"algebra", "geometry"}
        assert sum(c.n_tasks for c in group.categories) == 39
        assert math.fsum(c.contribution for c in group.categories) == pytest.approx(group.contribution, abs=1e-12)


class TestRankingWithinAGroup:
    def test_largest_change_then_smallest_fisher_p_value_then_task_id(self):
        rows = [("e", 0, 1, 4, 0, 4),  # −0.25
                ("d", 1, 3, 4, 0, 4),  # −0.75, p = 0.143
                ("c", 2, 6, 8, 0, 8),  # −0.75 with more attempts: p = 0.007, more confident
                ("b", 3, 3, 4, 0, 4),  # as d: the task id decides
                ]
        group = attribute(frame(rows)).groups[0]
        assert group.transition == "sometimes→never"
        assert [t.task_id for t in group.tasks] == ["c", "b", "d", "e"]
        assert group.tasks[0].p_value == pytest.approx(fisher_exact([[6, 2], [0, 8]]).pvalue)

    def test_a_group_keeps_its_first_tasks_but_counts_and_sums_them_all(self):
        rows = [(f"t{i}", i, 1, 1, 0, 1) for i in range(10)]
        group = attribute(frame(rows), keep=3).groups[0]
        assert (group.n_tasks, len(group.tasks), group.contribution) == (10, 3, pytest.approx(-1.0))

    def test_tasks_that_stayed_sometimes_split_by_direction(self):
        rows = [("a", 0, 1, 4, 3, 4), ("b", 1, 3, 4, 1, 4), ("c", 2, 2, 4, 2, 4)]
        assert [g.transition for g in attribute(frame(rows)).groups] == [
            "sometimes→sometimes ▼", "sometimes→sometimes ▲", "sometimes→sometimes"]

    def test_every_attempt_an_error_is_its_own_outcome(self):
        errored = frame([("a", 0, 2, 2, 0, 2)]).with_columns(pl.lit(2).alias("err_b"))
        assert attribute(errored).groups[0].transition == "always→errored"


class TestRandomRuns:
    """Whatever the runs — unequal repeats, errors, tasks on one side only — the groups add up to Δ."""

    @pytest.mark.parametrize("seed", range(12))
    def test_groups_add_up_to_delta_and_partition_the_paired_tasks(self, seed):
        rng = random.Random(seed)

        def tasks(only: str) -> list[dict[str, object]]:
            return [{"id": f"t{i}", "category": rng.choice("xyz"),
                     "outcomes": [rng.choice([P, P, W, T]) for _ in range(rng.randint(1, 5))]}
                    for i in range(60) if rng.random() > 0.1 or only == str(i % 2)]

        a, b = make_run(tasks("0"), 5, run_id="A", meta=("category",)), make_run(tasks("1"), 5, run_id="B",
                                                                                 meta=("category",))
        shift = score_shift(a, b, run_profile(a), run_profile(b))
        groups = shift.attribution.groups
        assert math.fsum(g.contribution for g in groups) == pytest.approx(shift.delta, abs=1e-12)
        assert sum(g.n_tasks for g in groups) == shift.n_paired
        for g in groups:
            keys = [(-abs(t.change), t.p_value, t.task_id) for t in g.tasks]
            assert keys == sorted(keys)


class TestAtScale:
    """50,000 tasks: one task is 0.002 percentage points, and still reads as more than zero."""

    def test_fifty_thousand_tasks_read_as_non_zero_percentage_points(self):
        rng = np.random.default_rng(0)
        n = 50_000
        pass_a, pass_b = rng.integers(0, 5, n), rng.integers(0, 5, n)
        paired = pl.DataFrame({"task_id": [f"t{i:05d}" for i in range(n)], "idx_a": np.arange(n), "idx_b": np.arange(n),
                               "n_a": 4, "pass_a": pass_a, "err_a": 0, "n_b": 4, "pass_b": pass_b, "err_b": 0,
                               "p_a": pass_a / 4, "p_b": pass_b / 4})
        result = attribute(paired)
        assert math.fsum(g.contribution for g in result.groups) == pytest.approx((pass_b - pass_a).sum() / 4 / n,
                                                                                abs=1e-12)
        for g in result.groups:
            if g.moved:
                assert "0.00 pp" not in points(g.contribution)
                assert all(float(points(t.contribution).split()[0]) != 0 for t in g.tasks)
        assert points(1 / n) == "+0.00200 pp" and points(-0.0731) == "-7.31 pp" and points(0.0) == "0.00 pp"


class TestFisherExactMany:
    def test_agrees_with_scipy_table_by_table(self):
        rng = np.random.default_rng(1)
        na, nb = rng.integers(0, 9, 300), rng.integers(0, 9, 300)
        ka, kb = rng.integers(0, na + 1), rng.integers(0, nb + 1)
        got = fisher_exact_many(ka, na, kb, nb)
        want = [fisher_exact([[a, m - a], [b, n - b]]).pvalue if m and n else 1.0
                for a, m, b, n in zip(ka, na, kb, nb, strict=True)]
        assert got == pytest.approx(want, abs=1e-12)

    def test_counts_too_large_for_one_key_still_work(self):
        assert fisher_exact_many([30_000], [60_000], [0], [1]) == pytest.approx(
            [fisher_exact([[30_000, 30_000], [0, 1]]).pvalue])

    def test_passes_above_the_attempts_are_refused(self):
        with pytest.raises(ValueError, match="between 0 and the attempts"):
            fisher_exact_many([3], [2], [0], [1])
