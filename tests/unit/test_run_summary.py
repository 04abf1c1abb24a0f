"""The end-of-run summary: counts, buckets and pass@k from per-task outcomes."""

import numpy as np
import polars as pl
import pytest

from workbench.analysis import summarize, summarize_steps


def steps_frame():
    # task 0: 2/2 pass, task 1: 1/2, task 2: 0/2 (one refusal, one wrong answer)
    return pl.DataFrame({
        "task_idx": [0, 0, 1, 1, 2, 2],
        "passed": [True, True, True, False, False, False],
        "failure_category": [None, None, None, "timeout", "refusal", None],
        "error": [None, None, None, "timed out", None, None],
        "latency_ms": [10.0, 20.0, 30.0, 40.0, 50.0, 60.0],
        "prompt_tokens": [5] * 6,
        "completion_tokens": [2] * 6,
        "total_tokens": [7] * 6,
    })


def test_a_summary_counts_buckets_failures_and_wrong_answers():
    s = summarize_steps("r", steps_frame(), n_tasks=4, n_repeats=2)
    assert (s.n_steps, s.n_steps_expected, s.n_tasks_attempted) == (6, 8, 3)
    assert s.buckets == {"always": 1, "sometimes": 1, "never": 1, "errored": 0, "missing": 1}
    assert s.failures == {"timeout": 1, "refusal": 1}
    assert (s.n_pass, s.n_wrong, s.n_errors) == (3, 1, 1)
    assert s.tokens == {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}
    assert s.latency_ms[50] == pytest.approx(35.0)


def test_a_task_whose_every_attempt_errored_is_errored_not_never():
    # the buckets of task_stats and nel eval stats: errored = every attempt an error (ERROR_CATEGORIES)
    steps = steps_frame().with_columns(
        pl.Series("failure_category", [None, None, None, "timeout", "timeout", "server_error"]))
    s = summarize_steps("r", steps, n_tasks=3, n_repeats=2)
    assert s.buckets == {"always": 1, "sometimes": 1, "never": 0, "errored": 1, "missing": 0}


def test_pass_at_k_is_reported_for_every_k_up_to_the_repeats():
    s = summarize_steps("r", steps_frame(), n_tasks=3, n_repeats=2)
    assert s.pass_at_k[1].value == pytest.approx((1.0 + 0.5 + 0.0) / 3)
    assert s.pass_at_k[2].value == pytest.approx((1.0 + 1.0 + 0.0) / 3)
    for est in s.pass_at_k.values():
        assert est.low <= est.value <= est.high


def test_the_array_and_frame_inputs_give_the_same_summary():
    frame = summarize_steps("r", steps_frame(), n_tasks=3, n_repeats=2)
    arrays = summarize(
        "r", n_tasks=3, n_repeats=2, attempts=np.array([2, 2, 2]), passes=np.array([2, 1, 0]),
        latency_ms=np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0]), failures={"timeout": 1, "refusal": 1},
        tokens={"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42},
        errors=np.array([0, 1, 0]),  # the frame's one timeout, per task: what tells errored from never
    )
    assert arrays == frame


def test_an_empty_run_summarises_without_error():
    s = summarize("r", n_tasks=5, n_repeats=4, attempts=np.array([]), passes=np.array([]),
                  latency_ms=np.array([]), failures={}, tokens={})
    assert s.n_steps == 0 and s.buckets["missing"] == 5
