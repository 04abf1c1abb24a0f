"""MBPP from its upstream parquet: the converter, the prompt, sandboxed scoring and the mock's code replies."""

from __future__ import annotations

import asyncio

import pytest
from catalogue_fixtures import frozen_environment, frozen_rows, upstream_rows

from workbench.catalogue.mbpp import convert, entry_point
from workbench.environments.base import SeedResult, VerifyResult
from workbench.environments.mbpp import MBPPEnvironment
from workbench.errors import UsageError
from workbench.mock.answers import Task
from workbench.mock.responder import Responder
from workbench.mock.skill import SkillProfile
from workbench.sandbox.local import LocalSandboxes
from workbench.sandbox.spec import SandboxSpec

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> MBPPEnvironment:
    built = frozen_environment("mbpp", tmp_path_factory.mktemp("mbpp"))
    assert isinstance(built, MBPPEnvironment)
    return built


def verify_all(env: MBPPEnvironment, replies: list[tuple[str, SeedResult]]) -> list[VerifyResult]:
    boxes = LocalSandboxes(SandboxSpec(type="local", concurrency=4))

    async def one(reply: str, seed: SeedResult) -> VerifyResult:
        async with boxes.session() as box:
            return await env.verify_in_sandbox(box, reply, seed, 20.0)

    async def main() -> list[VerifyResult]:
        async with boxes:
            return list(await asyncio.gather(*(one(r, s) for r, s in replies)))

    return asyncio.run(main())


def test_the_sanitized_columns_convert_to_text_tests_and_the_entry_point_the_asserts_call() -> None:
    rows = upstream_rows("mbpp")
    out = convert(rows[0])
    assert out is not None
    assert out["task_id"] == 2
    assert out["text"] == "Write a function to find the shared elements from the given two lists."
    assert out["entry_point"] == "similar_elements"  # called inside set(...), found anyway
    assert out["tests"].splitlines() == rows[0]["test_list"] and out["test_setup_code"] == ""
    assert [r["test_setup_code"] for r in frozen_rows("mbpp")][3] == "import math"


def test_the_full_configs_columns_convert_the_same_way() -> None:
    row = {"task_id": 11, "text": "Write a python function to double a number.",
           "code": "def double(x):\r\n  return 2*x", "test_list": ["assert double(2) == 4"],
           "test_setup_code": "", "challenge_test_list": []}
    out = convert(row)
    assert out is not None and out["text"] == row["text"] and out["code"] == "def double(x):\n  return 2*x"


def test_a_row_whose_asserts_call_nothing_the_reference_defines_is_dropped() -> None:
    assert entry_point("def f(x):\n  return x", ["assert g(1) == 1"]) is None
    assert convert({"task_id": 1, "prompt": "p", "code": "def f(x):\n  return x", "test_imports": [],
                    "test_list": ["assert g(1) == 1"]}) is None


def test_the_prompt_is_the_mbpp_papers_with_the_asserts_and_asks_for_a_python_block(env: MBPPEnvironment) -> None:
    seed = env.seed(2)
    assert seed.prompt.startswith("You are an expert Python programmer, and here is your task: Write a function "
                                  "that returns the perimeter of a square")
    assert "Your code should pass these tests:\n\nassert square_perimeter(10)==40\n" in seed.prompt
    assert seed.prompt.endswith("```python code block.")
    assert seed.metadata["entry_point"] == "square_perimeter" and seed.metadata["mbpp_id"] == 17


def test_plain_verify_refuses_because_a_score_needs_the_code_run(env: MBPPEnvironment) -> None:
    with pytest.raises(UsageError, match="sandbox"):
        env.verify("def f(): pass", "x")
    assert env.requires_sandbox and env.describe()["requires_sandbox"] is True


def test_the_answer_key_passes_static_checks(env: MBPPEnvironment) -> None:
    assert all(env.check_answer_key(i)[0] for i in range(len(env)))


def test_reference_code_passes_and_wrong_code_fails_in_the_sandbox(env: MBPPEnvironment) -> None:
    seeds = [env.seed(i) for i in range(len(env))]
    right = [(f"```python\n{s.expected_answer}\n```", s) for s in seeds]
    wrong = [("```python\ndef square_perimeter(a):\n  return a * a\n```", seeds[2]), ("no code here", seeds[0])]
    verdicts = verify_all(env, right + wrong)
    assert [v.reward for v in verdicts[:len(seeds)]] == [1.0] * len(seeds), [v.scoring_details for v in verdicts]
    assert verdicts[-2].reward == 0.0 and "assert square_perimeter(10)==40" in verdicts[-2].scoring_details["failed_at"]
    assert verdicts[-1].reward == 0.0 and verdicts[-1].scoring_details["outcome"] == "no_code"


def test_the_mocks_right_replies_pass_and_its_wrong_ones_fail(env: MBPPEnvironment) -> None:
    responder = Responder(SkillProfile(0))
    replies: list[tuple[str, SeedResult]] = []
    expected: list[bool] = []
    for idx, entry in enumerate(env.answer_key()):
        seed = env.seed(idx)
        task = Task("mbpp", f"mbpp:{seed.task_id}", idx, seed.prompt, entry.question, entry.answer, None,
                    scorer="code_execution")
        for attempt in range(6):
            correct = responder.skill.attempt(task.key, None, attempt).correct
            replies.append((responder.respond(task, None, attempt).text, seed))
            expected.append(correct)
    assert True in expected and False in expected
    assert [v.reward == 1.0 for v in verify_all(env, replies)] == expected
