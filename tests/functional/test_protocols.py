"""Every protocol, end to end through the engine against the mock model on loopback."""

import asyncio

import pytest

import workbench
from workbench.engine import run_evaluation
from workbench.environments import get_environment
from workbench.model.config import ModelConfig
from workbench.solvers import SimpleSolver

PROBLEMS, REPEATS = 15, 2


def evaluate(mock, tmp_path, **model):
    store = tmp_path / "nel.duckdb"
    solver = SimpleSolver(ModelConfig(url=mock.base_url, model_id="nel-mock", max_retries=0, **model))
    result = asyncio.run(run_evaluation(get_environment("gsm8k"), solver, store=store, n_repeats=REPEATS,
                                        max_problems=PROBLEMS, max_concurrent=8))
    steps = workbench.open_store(store).steps(result.run_id)
    return result, steps


@pytest.fixture(scope="module")
def chat_outcomes(mock, tmp_path_factory):
    _, steps = evaluate(mock, tmp_path_factory.mktemp("chat"))
    return steps.select("task_idx", "repeat", "passed", "extracted_answer").sort("task_idx", "repeat").rows()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("protocol", ["completions", "responses"])
def test_each_protocol_records_answers_tokens_and_the_same_outcomes_as_chat(mock, tmp_path, protocol,
                                                                             chat_outcomes):
    result, steps = evaluate(mock, tmp_path, protocol=protocol)
    assert result.status == "complete" and steps.height == PROBLEMS * REPEATS
    assert steps["failure_category"].is_in(["rate_limit", "timeout", "server_error", "model_error"]).sum() == 0
    assert (steps["completion_tokens"] > 0).all() and (steps["prompt_tokens"] > 0).all()
    assert steps["finish_reason"].null_count() == 0
    outcomes = steps.select("task_idx", "repeat", "passed", "extracted_answer").sort("task_idx", "repeat").rows()
    assert outcomes == chat_outcomes  # the mock answers per task and attempt, whatever the protocol


@pytest.mark.timeout(60)
@pytest.mark.parametrize("protocol", ["chat_completions", "completions", "responses"])
def test_a_system_prompt_is_sent_and_recorded_with_each_protocol(mock, tmp_path, protocol, chat_outcomes):
    _, steps = evaluate(mock, tmp_path, protocol=protocol, system_prompt="You are a careful grader.")
    first = steps.row(0, named=True)
    assert "You are a careful grader." in first["messages"]
    outcomes = steps.select("task_idx", "repeat", "passed", "extracted_answer").sort("task_idx", "repeat").rows()
    assert outcomes == chat_outcomes
