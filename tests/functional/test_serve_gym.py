"""`nel serve` for NeMo Gym: /aggregate_metrics against Gym's own computation, and rows Gym's servers accept."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from gym_helpers import GYM_PYTHON, NOT_INSTALLED, gyms_aggregate

from workbench.environments import get_environment
from workbench.serve.app import create_app
from workbench.serve.export import gym_row

needs_gym = pytest.mark.skipif(not GYM_PYTHON.exists(), reason=NOT_INSTALLED)
GYM_ACCEPTS = """
import json, sys
from resources_servers.math_with_judge.app import LibraryJudgeMathVerifyRequest
from resources_servers.mcqa.app import MCQAVerifyRequest
from nemo_gym.openai_utils import NeMoGymResponse
response = {"id": "resp_1", "object": "response", "created_at": 0, "model": "m", "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [], "output": []}
maths, mcq = (json.loads(line) for line in open(sys.argv[1]))
math_request = LibraryJudgeMathVerifyRequest.model_validate({**maths, "response": response})
mcq_request = MCQAVerifyRequest.model_validate({**mcq, "response": response})
print(json.dumps({"question": math_request.question, "options": mcq_request.options,
                  "expected": [math_request.expected_answer, mcq_request.expected_answer]}))
"""


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(get_environment("gsm8k"), gym_compat=True))


def _verify_responses(seed: int = 7, tasks: int = 30) -> list[dict[str, Any]]:
    """Rollouts with binary and graded rewards, missing answers, uneven repeats, and rows out of order."""
    rng = random.Random(seed)
    rows = []
    for t in range(tasks):
        for r in range(4 if t % 7 else 3):
            reward = float(rng.random() < 0.5) if t % 5 else rng.choice([0.0, 0.25, 0.5, 1.0])
            rows.append({"_ng_task_index": t, "_ng_rollout_index": r, "reward": reward, "eval_type": "gsm8k",
                         "extracted_answer": None if rng.random() < 0.15 else str(rng.randint(0, 3)),
                         "response": {"usage": {"input_tokens": rng.randint(10, 90), "output_tokens": 20,
                                                "total_tokens": 110, "input_tokens_details": {"cached_tokens": 0}}}})
    rng.shuffle(rows)
    return rows


@needs_gym
def test_aggregate_metrics_equal_gyms_own_compute_aggregate_metrics(client: TestClient, tmp_path: Path) -> None:
    """Gym's compute_aggregate_metrics (with math_with_judge's pass/majority metrics) is the oracle."""
    rows = _verify_responses()
    ours = client.post("/aggregate_metrics", json={"verify_responses": rows}).json()
    gym = gyms_aggregate(rows, tmp_path)

    def same(a: dict[str, Any], b: dict[str, Any]) -> set[str]:
        shared = {k for k, v in b.items() if isinstance(v, int | float) and k in a}
        for k in shared:
            assert math.isclose(a[k], b[k], rel_tol=1e-9, abs_tol=1e-9), (k, a[k], b[k])
        return shared

    shared = same(ours["agent_metrics"], gym["agent_metrics"])
    assert {"mean/reward", "std/reward", "median/input_tokens", "pass@4/accuracy", "pass@1[avg-of-4]/no_answer",
            "majority@3/accuracy", "pass@1[avg-of-4]/accuracy/std_err_across_runs",
            "ci_low_95_across_repeats/mean/reward", "num_repeats"} <= shared
    assert set(gym["agent_metrics"]) - set(ours["agent_metrics"]) == set()  # every Gym key is there
    assert set(gym["key_metrics"]) <= set(ours["key_metrics"])
    for mine, theirs in zip(ours["group_level_metrics"], gym["group_level_metrics"], strict=True):
        assert len(same(mine, theirs)) >= 20
    for mine, theirs in zip(ours["repeat_level_metrics"], gym["repeat_level_metrics"], strict=True):
        assert len(same(mine, theirs)) >= 40


def test_pass_at_k_is_the_unbiased_estimator_over_all_attempts(client: TestClient) -> None:
    """Task 0: 1 pass in 4 → pass@2 = 1 - C(3,2)/C(4,2) = 0.5; task 1: 4 of 4 → 1: mean 75 %."""
    rows = [{"_ng_task_index": 0, "_ng_rollout_index": r, "reward": float(r == 3)} for r in range(4)]
    rows += [{"_ng_task_index": 1, "_ng_rollout_index": r, "reward": 1.0} for r in range(4)]
    metrics = client.post("/aggregate_metrics", json={"verify_responses": rows}).json()["agent_metrics"]
    assert metrics["pass@2/accuracy"] == pytest.approx(75.0)
    assert metrics["pass@1[avg-of-1]/accuracy"] == pytest.approx(50.0)  # the first attempt: rollout index 0
    assert metrics["nel/pass@1"] == pytest.approx(0.625) and metrics["nel/n_tasks"] == 2


def test_a_masked_rollout_is_counted_not_averaged(client: TestClient) -> None:
    rows = [{"_ng_task_index": 0, "reward": 1.0}, {"_ng_task_index": 1, "reward": 0.0, "mask_sample": True}]
    body = client.post("/aggregate_metrics", json={"verify_responses": rows}).json()
    assert body["agent_metrics"]["mean/reward"] == 1.0 and body["agent_metrics"]["coverage/masked_rollouts"] == 1


class TestAggregateBadInput:
    """A rollout that cannot be aggregated is a 422 naming its field; nothing is averaged."""

    @pytest.mark.parametrize(("row", "field", "words"), [
        ({"eval_type": "math500"}, "verify_responses[1].eval_type", "from benchmark 'math500'"),
        ({"benchmark": "mmlu"}, "verify_responses[1].benchmark", "serves 'gsm8k'"),
        ({"task_id": "not-a-gsm8k-task"}, "verify_responses[1].task_id", "not a problem of 'gsm8k'"),
        ({"reward": "1"}, "verify_responses[1].reward", "finite number"),
        ({"reward": None}, "verify_responses[1].reward", "finite number"),
        ({"_ng_task_index": "3"}, "verify_responses[1]._ng_task_index", "integer index"),
    ])
    def test_a_bad_row_names_its_field(self, client: TestClient, row: dict[str, Any], field: str,
                                       words: str) -> None:
        good = {"_ng_task_index": 0, "reward": 1.0, "eval_type": "gsm8k",
                "task_id": get_environment("gsm8k").seed(0).task_id}
        answer = client.post("/aggregate_metrics", json={"verify_responses": [good, {**good, **row}]})
        assert answer.status_code == 422
        error = answer.json()["error"]
        assert error["field"] == field and words in error["message"]

    def test_a_body_without_verify_responses(self, client: TestClient) -> None:
        answer = client.post("/aggregate_metrics", json={"rollouts": []})
        assert answer.status_code == 422 and answer.json()["error"]["field"] == "verify_responses"
        malformed = client.post("/aggregate_metrics", content=b"{", headers={"Content-Type": "application/json"})
        assert malformed.status_code == 400

    def test_no_rollouts_give_empty_metrics(self, client: TestClient) -> None:
        body = client.post("/aggregate_metrics", json={"verify_responses": []}).json()
        assert body == {"group_level_metrics": [], "agent_metrics": {}, "key_metrics": {},
                        "repeat_level_metrics": []}


class TestExportedRows:
    """--export-data rows carry what Gym's standard servers read, and the command exits after writing them."""

    def test_a_maths_row_has_question_eval_type_and_task_id(self) -> None:
        env = get_environment("gsm8k")
        row, seed = gym_row(env, 5), env.seed(5)
        assert row["question"] == seed.prompt and row["expected_answer"] == seed.expected_answer
        assert row["eval_type"] == row["benchmark"] == "gsm8k" and row["task_id"] == seed.task_id
        assert "options" not in row

    def test_a_multiple_choice_row_has_lettered_options_and_its_category(self) -> None:
        env = get_environment("unit_conversion_mc")
        row, seed = gym_row(env, 0), env.seed(0)
        assert row["options"] == [{"A": "46.6028 kilometres"}, {"B": "12.0701 kilometres"},
                                  {"C": "120.701 kilometres"}, {"D": "1207.01 kilometres"}]
        assert row["expected_answer"] == "C" and row["metadata"] == seed.metadata
        assert row["metadata"]["category"] == "length"

    @needs_gym
    def test_gyms_math_and_mcq_servers_accept_the_rows(self, tmp_path: Path) -> None:
        path = tmp_path / "rows.jsonl"
        rows = [gym_row(get_environment("gsm8k"), 0), gym_row(get_environment("unit_conversion_mc"), 0)]
        path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
        done = subprocess.run([str(GYM_PYTHON), "-c", GYM_ACCEPTS, str(path)], capture_output=True, text=True,
                              timeout=120, cwd=GYM_PYTHON.parents[1] / "lib" / "python3.13" / "site-packages")
        assert done.returncode == 0, done.stderr[-3000:]
        accepted = json.loads(done.stdout)
        assert accepted["question"] == rows[0]["question"] and len(accepted["options"]) == 4
        assert accepted["expected"] == [rows[0]["expected_answer"], "C"]

    def test_export_data_writes_and_exits(self, tmp_path: Path) -> None:
        done = subprocess.run([sys.executable, "-m", "workbench.cli", "serve", "-b", "unit_conversion_mc",
                               "--export-data", str(tmp_path)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("nel serve: wrote 220 rows") and " at http" not in done.stdout
        assert len((tmp_path / "unit_conversion_mc.jsonl").read_text().splitlines()) == 220

    def test_and_serve_without_export_data_is_one_line(self) -> None:
        done = subprocess.run([sys.executable, "-m", "workbench.cli", "serve", "-b", "gsm8k", "--and-serve"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and "--export-data" in done.stderr
