"""HumanEval from the outside: listed, validated without running code, and answered by the mock model."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import orjson
import pytest
from nel_helpers import assert_ok, nel

from workbench.environments import get_environment
from workbench.mock import MockHandle
from workbench.mock.skill import SkillProfile
from workbench.scoring.code import extract_code

pytestmark = pytest.mark.timeout(60)


def test_list_json_shows_humaneval_with_164_problems_scored_by_execution(tmp_path: Path) -> None:
    proc = nel("list", "--json", cwd=tmp_path)
    assert_ok(proc)
    info = {i["name"]: i for i in orjson.loads(proc.stdout)}["humaneval"]
    assert info["size"] == 164 and info["scorer"] == "code_execution"
    assert info["domain"] == "code" and info["requires_sandbox"] is True


def test_list_search_code_finds_humaneval(tmp_path: Path) -> None:
    proc = nel("list", "--search", "code", cwd=tmp_path)
    assert_ok(proc)
    assert re.search(r"^humaneval\s+code\s+164\s+10\s+code_execution\s", proc.stdout, re.M), proc.stdout


def test_validate_checks_the_answer_key_statically_and_exits_0(tmp_path: Path) -> None:
    proc = nel("validate", "-b", "humaneval", "--samples", "5", cwd=tmp_path)
    assert_ok(proc)
    assert proc.stdout.count("compiles; entry point ") == 5
    assert proc.stdout.count(" OK\n") == 5 and "FAIL" not in proc.stdout
    assert "humaneval: 164 problems; 5/5 sampled expected answers pass static checks" in proc.stdout


def test_the_mock_answers_a_humaneval_prompt_with_the_reference_function_when_right(mock: MockHandle) -> None:
    env = get_environment("humaneval")
    skill = SkillProfile(mock.config.skill_seed)
    seen = {True: 0, False: 0}
    with httpx.Client(base_url=mock.base_url, timeout=10) as client:
        for idx in range(0, 164, 20):
            seed = env.seed(idx)
            for attempt in range(4):
                body = {"model": "m", "messages": list(seed.messages)}
                response = client.post("/chat/completions", json=body, headers={"X-Nel-Attempt": str(attempt)})
                assert response.status_code == 200
                text = response.json()["choices"][0]["message"]["content"]
                correct = skill.attempt(f"humaneval:{seed.task_id}", None, attempt).correct
                code, method = extract_code(text)
                if correct:
                    assert "```python\n" in text and method == "fenced_python"
                    assert code is not None and code.strip() == seed.expected_answer.strip()
                else:
                    assert code is None or code.strip() != seed.expected_answer.strip()
                seen[correct] += 1
    assert seen[True] > 0 and seen[False] > 0
