"""regression.json's pass@k keys (NeMo Evaluator's ``pass@1``, ``pass@2`` ...): each task's unbiased pass@k,
compared paired by task, checked against hand-computed values."""

from __future__ import annotations

import polars as pl
import pytest

from workbench.analysis.compare import pass_at_k_deltas, pass_at_k_ks


def _tasks(n: list[int], c: list[int]) -> pl.DataFrame:
    return pl.DataFrame({"task_id": ["a", "b"], "task_idx": [0, 1], "n": n, "n_pass": c, "n_error": [0, 0],
                         "score": [ci / ni for ci, ni in zip(c, n, strict=True)]})


def _paired(b: pl.DataFrame, c: pl.DataFrame) -> pl.DataFrame:
    cols = ["task_idx", "n", "n_pass", "n_error", "score"]
    return b.rename({k: f"{k}_b" for k in cols}).join(c.rename({k: f"{k}_c" for k in cols}), on="task_id")


def test_pass_at_k_of_each_side_and_its_delta_match_the_hand_computed_estimates():
    # baseline: task a 1 of 3 passed, task b 0 of 3; candidate: a 3 of 3, b 2 of 4
    b, c = _tasks([3, 3], [1, 0]), _tasks([3, 4], [3, 2])
    deltas = {d.metric: d for d in pass_at_k_deltas(_paired(b, c), b, c, n_resamples=200)}
    assert list(deltas) == ["pass@1", "pass@2", "pass@3"]  # every task has 3 attempts a side at least
    expected = {  # 1 - C(n-c, k) / C(n, k) per task, then the mean over the two tasks
        "pass@1": ((1 / 3 + 0) / 2, (1 + 2 / 4) / 2),
        "pass@2": ((2 / 3 + 0) / 2, (1 + 5 / 6) / 2),
        "pass@3": ((1 + 0) / 2, (1 + 1) / 2),
    }
    for name, (base, cand) in expected.items():
        assert deltas[name].baseline == pytest.approx(base)
        assert deltas[name].candidate == pytest.approx(cand)
        assert deltas[name].delta == pytest.approx(cand - base)
        assert deltas[name].n_tasks == 2


def test_no_paired_task_gives_no_pass_at_k():
    b = _tasks([2, 2], [1, 1])
    assert pass_at_k_deltas(_paired(b, b).head(0), b, b) == ()


@pytest.mark.parametrize(("max_k", "ks"), [(0, []), (1, [1]), (4, [1, 2, 3, 4]), (12, [1, 2, 3, 4, 5, 6, 7, 8, 12]),
                                           (64, [1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64])])
def test_the_ks_reported_are_all_up_to_eight_then_powers_of_two_and_the_largest(max_k, ks):
    assert pass_at_k_ks(max_k) == ks
