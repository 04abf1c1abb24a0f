"""Faults the mock injects (429, 500, timeouts, malformed and truncated bodies, context overflow): the run
completes, every step is recorded, and each failed step names the right failure category."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from nel_helpers import assert_ok, eval_args, nel, nel_popen, step_count, wait_for_steps

from workbench.engine import RunResult, run_evaluation
from workbench.environments import get_environment
from workbench.mock import mock_model
from workbench.model.config import ModelConfig
from workbench.solvers import SimpleSolver
from workbench.store import open_store

pytestmark = pytest.mark.timeout(60)

PROBLEMS, REPEATS = 30, 4
TOTAL = PROBLEMS * REPEATS
TRANSPORT_ERRORS = ("rate_limit", "timeout", "server_error", "context_window", "model_error")


def _run(url: str, store: Path, max_error_rate: float = 0.5, **model: Any) -> RunResult:
    config = ModelConfig(url=url, model_id="nel-mock", **{"backoff_base": 0.001, **model})
    return asyncio.run(
        run_evaluation(
            get_environment("gsm8k"),
            SimpleSolver(config),
            store=store,
            n_repeats=REPEATS,
            max_problems=PROBLEMS,
            max_concurrent=16,
            max_error_rate=max_error_rate,
        )
    )


def _steps(store: Path) -> pl.DataFrame:
    return open_store(store).steps()


# fault -> (expected category, HTTP status recorded, start of the recorded error, extra model settings)
FAULTS: dict[str, tuple[str, int | None, str, dict[str, Any]]] = {
    "429": ("rate_limit", 429, "HTTP 429", {}),
    "500": ("server_error", 500, "HTTP 500", {}),
    "malformed": ("model_error", 200, "malformed response body", {}),
    "timeout": ("timeout", None, "request timed out", {"request_timeout": 0.3}),
    "truncated": ("server_error", None, "connection failed", {}),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_fault_without_retries_is_recorded_with_its_category(fault, tmp_path):
    category, status, error, settings = FAULTS[fault]
    store = tmp_path / "nel.duckdb"
    with mock_model(fail_rate=0.3, faults=(fault,), retry_after_s=0, hang_s=2.0) as m:
        result = _run(m.base_url, store, max_retries=0, **settings)
    assert result.status == "complete" and result.steps_written == TOTAL
    steps = _steps(store)
    assert steps.height == TOTAL and steps.select("task_idx", "repeat").unique().height == TOTAL

    failed = steps.filter(pl.col("failure_category").is_in(TRANSPORT_ERRORS))
    assert set(failed["failure_category"]) == {category}
    assert 0.1 * TOTAL <= failed.height <= 0.5 * TOTAL, f"{failed.height} of {TOTAL} at fail_rate 0.3"
    assert failed["http_status"].to_list() == [status] * failed.height
    assert all(e.startswith(error) for e in failed["error"]), failed["error"].to_list()[:3]
    assert not failed["passed"].any() and set(failed["reward"]) == {0.0}
    assert set(failed["scoring_method"]) == {"none"}
    assert failed["extracted_answer"].null_count() == failed.height
    assert set(failed["n_retries"]) == {0}
    # the rest were answered normally
    answered = steps.filter(
        pl.col("failure_category").is_null() | ~pl.col("failure_category").is_in(TRANSPORT_ERRORS)
    )
    assert answered["http_status"].to_list() == [200] * answered.height
    assert answered["error"].null_count() == answered.height
    metrics = open_store(store).runs().row(0, named=True)
    assert metrics["n_errors"] == failed.height and metrics["n_steps"] == TOTAL


def test_with_retries_most_steps_recover_from_every_kind_of_fault(tmp_path):
    store = tmp_path / "nel.duckdb"
    with mock_model(fail_rate=0.3, retry_after_s=0, hang_s=2.0) as m:
        result = _run(m.base_url, store, max_retries=5, request_timeout=0.3)
    assert result.status == "complete"
    steps = _steps(store)
    assert steps.height == TOTAL
    assert steps["n_retries"].max() > 0  # type: ignore[operator]
    assert steps["n_retries"].sum() >= 0.2 * TOTAL, "about 0.43 retries per step at fail_rate 0.3"
    failed = steps.filter(pl.col("failure_category").is_in(TRANSPORT_ERRORS))
    assert failed.height <= 0.05 * TOTAL, failed.select("failure_category", "error", "n_retries")
    assert set(failed["n_retries"]) <= {5}, "a step only fails once its retries are spent"
    recovered = steps.filter((pl.col("n_retries") > 0) & pl.col("failure_category").is_null())
    assert recovered.height > 0 and recovered["error"].null_count() == recovered.height
    assert recovered["http_status"].to_list() == [200] * recovered.height


def test_a_prompt_over_the_context_window_is_recorded_as_context_window(tmp_path):
    store = tmp_path / "nel.duckdb"
    with mock_model(context_window=40) as m:
        result = _run(m.base_url, store, max_retries=3, max_error_rate=1.0)
    assert result.status == "complete", "with --max-error-rate 1 errors never fail the run"
    steps = _steps(store)
    assert steps.height == TOTAL
    assert set(steps["failure_category"]) == {"context_window"}
    assert set(steps["http_status"]) == {400} and set(steps["n_retries"]) == {0}, "a 400 is not retried"
    assert all("context length" in e for e in steps["error"])


def test_cli_run_against_a_faulty_model_exits_0_and_summarises_failures(tmp_path):
    with mock_model(fail_rate=0.3, faults=("429", "500", "malformed"), retry_after_s=0) as m:
        proc = nel(
            *eval_args(
                m.base_url,
                problems=PROBLEMS,
                repeats=REPEATS,
                output_dir=tmp_path / "o",
                extra=["--max-retries", "0"],
            ),
            cwd=tmp_path,
        )
    assert_ok(proc)
    failures = next(line for line in proc.stdout.splitlines() if line.strip().startswith("failures"))
    for category in ("rate_limit", "server_error", "model_error"):
        assert category in failures
    assert step_count(tmp_path / "o" / "nel.duckdb") == TOTAL


def test_a_model_that_dies_mid_run_fails_the_run_and_resume_finishes_after_restart(tmp_path):
    out = tmp_path / "o"
    with mock_model(latency_ms=20) as first:
        port = first.port
        args = eval_args(
            first.base_url,
            problems=100,
            repeats=REPEATS,
            output_dir=out,
            concurrency=4,
            extra=["--max-retries", "0"],
        )
        proc = nel_popen(*args, cwd=tmp_path)
        try:
            wait_for_steps(out / "nel.duckdb", 20, proc)
            first.process.kill()
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr
    assert "stopped answering" in stderr and "--resume" in stderr
    kept = _steps(out / "nel.duckdb")
    assert kept.height >= 20
    assert set(kept["failure_category"].drop_nulls()) <= {"format_error", "refusal", "empty_response"}, (
        "attempts that got no answer are not recorded, so --resume retries them"
    )
    with mock_model(port=port) as second:
        resumed = nel(*args, "--resume", cwd=tmp_path)
        assert second.port == port
    assert_ok(resumed)
    steps = _steps(out / "nel.duckdb")
    assert (
        steps.height == 100 * REPEATS and steps.select("task_idx", "repeat").unique().height == 100 * REPEATS
    )
