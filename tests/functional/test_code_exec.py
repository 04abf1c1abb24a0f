"""Scoring code by running it: canonical HumanEval solutions pass and wrong ones fail, in each sandbox backend."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from workbench.environments.humaneval import complete_function
from workbench.resources import benchmarks_dir
from workbench.sandbox.base import Sandboxes
from workbench.sandbox.docker import DockerSandboxes
from workbench.sandbox.local import LocalSandboxes
from workbench.sandbox.spec import SandboxSpec
from workbench.scoring.code_exec import CodeRunResult, run_python_tests, score_humaneval_response

pytestmark = pytest.mark.timeout(300)  # the first docker test may build the image
ROWS = [json.loads(line) for line in (benchmarks_dir() / "humaneval" / "data.jsonl").read_text().splitlines()]
SAMPLE = [ROWS[i] for i in (0, 2, 32, 53, 162)]  # 162 uses hashlib, 32 floats; a spread of shapes
ADD = {"test": "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n",
       "entry_point": "add"}


@pytest.fixture(params=["docker", "docker-pool", "local"])
def sandboxes(request: pytest.FixtureRequest) -> Sandboxes:
    if request.param == "local":
        return LocalSandboxes(SandboxSpec(type="local", concurrency=4))
    request.getfixturevalue("docker_image")
    mode = "pool" if request.param == "docker-pool" else "per_attempt"
    return DockerSandboxes(SandboxSpec(mode=mode, concurrency=4))


def score_all(
    sandboxes: Sandboxes, responses: list[tuple[str, dict[str, Any]]], timeout: float = 10
) -> list[CodeRunResult]:
    async def one(response: str, row: dict[str, Any]) -> CodeRunResult:
        async with sandboxes.session() as box:
            return await score_humaneval_response(box, response, row, timeout)

    async def main() -> list[CodeRunResult]:
        async with sandboxes:
            return list(await asyncio.gather(*(one(r, row) for r, row in responses)))

    return asyncio.run(main())


def fenced(code: str) -> str:
    return f"Here is the function.\n```python\n{code}\n```\n"


def test_canonical_solutions_pass(sandboxes: Sandboxes) -> None:
    results = score_all(sandboxes, [(fenced(complete_function(row)), row) for row in SAMPLE])
    assert [r.reward for r in results] == [1.0] * len(SAMPLE), [r.details for r in results if not r.passed]
    details = results[0].details
    assert details["outcome"] == "passed" and details["extraction"] == "fenced_python"
    assert details["sandbox"] == sandboxes.backend


def test_a_wrong_solution_fails_and_the_failing_assertion_is_named(sandboxes: Sandboxes) -> None:
    (result,) = score_all(sandboxes, [(fenced("def add(a, b):\n    return a - b"), ADD)])
    assert result.reward == 0.0 and result.details["outcome"] == "check"
    assert result.details["failed_at"] == "tests.py:2: assert candidate(2, 3) == 5"
    assert "AssertionError" in result.details["stderr_tail"]


def test_a_reply_without_code_scores_zero_without_running_anything() -> None:
    # nothing runs: no sandbox is needed at all
    no_box: Any = None
    result = asyncio.run(score_humaneval_response(no_box, "I do not know.", ADD, 5))
    assert result.reward == 0.0 and result.code is None
    assert result.details == {
        "outcome": "no_code", "extraction": "none", "explanation": "no code found in the response"
    }


def test_bare_code_is_run_and_the_method_recorded(sandboxes: Sandboxes) -> None:
    (result,) = score_all(sandboxes, [("def add(a, b):\n    return a + b\n", ADD)])
    assert result.passed and result.details["extraction"] == "bare"


def test_answers_may_use_the_whole_standard_library(sandboxes: Sandboxes) -> None:
    """A correct answer importing statistics or fractions once failed in a python3-minimal image."""
    program = "import statistics, fractions, json\ndef add(a, b):\n    return int(statistics.fsum([a, b]))\n"
    program = program.replace("statistics.fsum", "fractions.Fraction(json.loads('0')) + sum")
    (result,) = score_all(sandboxes, [(fenced(program), ADD)])
    assert result.passed, result.details


@pytest.mark.parametrize(
    ("program", "outcome"),
    [
        ("import os\nos._exit(0)", "exited_early"),  # an exit status of 0 is not enough
        ("import sys\nsys.exit(0)", "solution"),
        ("def add(a, b)\n    return a + b", "solution"),  # a syntax error
        ("def plus(a, b):\n    return a + b", "entry_point"),
        ("def add(a, b):\n    while True: pass", "timeout"),
    ],
)
def test_programs_that_cheat_or_break_fail_with_the_stage_named(
    sandboxes: Sandboxes, program: str, outcome: str
) -> None:
    (result,) = score_all(sandboxes, [(fenced(program), ADD)], timeout=2)
    assert result.reward == 0.0
    assert result.details["outcome"] == outcome, result.details


def test_run_python_tests_passes_the_program_through_files_untouched(tmp_path: Path) -> None:
    program = "QUOTES = '''it's \"$(rm -rf /)\" `x`'''\ndef add(a, b):\n    return a + b\n"

    async def main() -> CodeRunResult:
        async with LocalSandboxes(SandboxSpec(type="local")) as sandboxes, sandboxes.session() as box:
            result = await run_python_tests(box, program, ADD["test"], "add", 5)
            assert await box.read_file("solution.py") == program.encode()
            return result

    assert asyncio.run(main()).passed
