"""`nel eval reverify`: score stored responses again, without the model, into a linked run."""

import asyncio

import orjson
import pytest
from nel_helpers import assert_ok, assert_one_line_error, nel

from workbench import open_store
from workbench.engine import run_evaluation
from workbench.environments import get_environment
from workbench.mock import mock_model
from workbench.model.config import ModelConfig
from workbench.solvers import SimpleSolver


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory):
    """A finished gsm8k run; the mock model is stopped before any reverify."""
    root = tmp_path_factory.mktemp("rv")
    with mock_model(fail_rate=0.2, faults=("500",), fault_seed=3) as mock:
        solver = SimpleSolver(ModelConfig(url=mock.base_url, model_id="nel-mock", max_retries=0))
        result = asyncio.run(run_evaluation(get_environment("gsm8k"), solver, store=root / "nel.duckdb",
                                            n_repeats=2, max_problems=20, max_concurrent=8))
    return root, result.run_id


def outcomes(root, run_id):
    return open_store(root).sql(
        "SELECT task_idx, repeat, reward, response, request_hash, failure_category FROM steps WHERE run_id = ? "
        "ORDER BY task_idx, repeat", [run_id]).rows()


@pytest.mark.timeout(60)
def test_reverify_with_the_benchmark_scorer_reproduces_every_reward_without_the_model(stored_run):
    root, run_id = stored_run
    before = outcomes(root, run_id)
    proc = nel("eval", "reverify", run_id, "--store", str(root), cwd=root)
    assert_ok(proc)
    assert "0 rewards changed" in proc.stdout
    runs = open_store(root).sql("SELECT run_id, identity FROM runs WHERE run_id <> ? ORDER BY created_at DESC",
                                [run_id])
    new_id = runs["run_id"][0]
    assert orjson.loads(runs["identity"][0])["reverified_from"] == run_id
    assert outcomes(root, new_id) == before  # same rewards, same responses, same request hashes
    assert outcomes(root, run_id) == before  # the original run is untouched
    errors = [row for row in before if row[5] == "server_error"]
    assert errors, "the fixture should include transport failures, kept as they were"


@pytest.mark.timeout(60)
def test_reverify_with_another_scorer_changes_rewards_in_a_new_run(stored_run):
    root, run_id = stored_run
    proc = nel("eval", "reverify", run_id, "--scorer", "exact", "--store", str(root), cwd=root)
    assert_ok(proc)
    assert "scorer exact" in proc.stdout and "-> 0.0000" in proc.stdout
    newest = open_store(root).sql("SELECT run_id FROM runs ORDER BY created_at DESC LIMIT 1")["run_id"][0]
    methods = open_store(root).sql("SELECT DISTINCT scoring_method FROM steps WHERE run_id = ? AND "
                                   "failure_category IS DISTINCT FROM 'server_error'", [newest])
    assert methods["scoring_method"].to_list() == ["exact_match"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("args", "message"), [
    (["--scorer", "nope"], "unknown scorer 'nope'; known scorers:"),
    (["--store", "elsewhere.duckdb"], "no store here"),
])
def test_bad_reverify_requests_are_one_line_usage_errors(stored_run, args, message):
    root, run_id = stored_run
    if "--store" not in args:
        args = [*args, "--store", str(root)]
    assert message in assert_one_line_error(nel("eval", "reverify", run_id, *args, cwd=root), 2)


@pytest.mark.timeout(60)
def test_reverify_of_a_run_that_is_not_there_says_so(stored_run):
    root, _ = stored_run
    line = assert_one_line_error(nel("eval", "reverify", "no-such-run", "--store", str(root), cwd=root), 2)
    assert "no run 'no-such-run'" in line
