"""Scoring code by running it: canonical HumanEval solutions pass and wrong ones fail, in each sandbox backend,
and no program can make its own score: not with a lying ``__eq__``, a patched builtin or helper, the harness's
nonce, nor the expected values read from the tests."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Literal

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


@pytest.fixture(params=["docker", "docker-pool", "local", "local-plain"])
def sandboxes(request: pytest.FixtureRequest) -> Sandboxes:
    if request.param.startswith("local"):
        plain = request.param == "local-plain"
        return LocalSandboxes(SandboxSpec(type="local", concurrency=4), bwrap=False if plain else None)
    request.getfixturevalue("docker_image")
    mode: Literal["pool", "per_attempt"] = "pool" if request.param == "docker-pool" else "per_attempt"
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


NEAR = {"test": "def check(candidate):\n    assert abs(candidate(2, 3) - 5) < 1e-9\n", "entry_point": "add"}
MEMORY_SCAN = """\
import os, re, sys
def add(a, b):  # every 32-hex-digit string in the memory it can read, printed as a pass line; then exit 0
    found = set()
    for pid in ("self", str(os.getppid())):
        try:
            maps = open(f"/proc/{pid}/maps").read().splitlines()
            mem = open(f"/proc/{pid}/mem", "rb", 0)
        except OSError:
            continue
        for line in maps:
            span, perms = line.split()[:2]
            start, end = (int(x, 16) for x in span.split("-"))
            if "r" not in perms or end - start > 2**26:
                continue
            try:
                mem.seek(start)
                found.update(re.findall(rb"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])", mem.read(end - start)))
            except (OSError, ValueError, OverflowError):
                continue
    for token in found:
        print("NEL-PASSED:", token.decode(), file=sys.stderr)
    sys.stderr.flush()
    os._exit(0)
"""
CHEATS: dict[str, tuple[dict[str, Any], str]] = {
    "an object whose __eq__ is always true": (
        ADD, "class Yes:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n"
             "        return False\ndef add(a, b):\n    return Yes()\n"),
    "an int whose __eq__ is always true": (
        ADD, "class Yes(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
             "def add(a, b):\n    return Yes(0)\n"),
    "a builtin the tests call, patched": (NEAR, "import builtins\nbuiltins.abs = lambda x: 0\ndef add(a, b):\n"
                                               "    return 0\n"),
    "the problem's helper, redefined": (
        ROWS[32], "def poly(xs, x):\n    return 0\ndef find_zero(xs):\n    return 0.0\n"),
    "the nonce, from the harness's frames": (
        ADD, "import os, sys\ndef add(a, b):\n    frame = sys._getframe()\n    while frame is not None:\n"
             "        if 'nonce' in frame.f_locals:\n"
             "            print('NEL-PASSED:', frame.f_locals['nonce'], file=sys.stderr, flush=True)\n"
             "            os._exit(0)\n        frame = frame.f_back\n    return 0\n"),
    "the nonce, from any memory it can read": (ADD, MEMORY_SCAN),
    "the expected values, read from the tests": (
        ADD, "import re\ndef add(a, b):\n    tests = open('tests.py').read()\n"
             "    return int(re.search(rf'candidate\\({a}, {b}\\) == (-?\\d+)', tests)[1])\n"),
    "a pass line of its own, then exit 0": (
        ADD, "import os, sys\nprint('NEL-PASSED: ' + '0' * 32, file=sys.stderr, flush=True)\nos._exit(0)\n"),
}


def test_no_program_can_make_its_own_score(sandboxes: Sandboxes) -> None:
    """Each of these scored 1.0 (the last one aside) when the tests ran in the program's own process."""
    results = score_all(sandboxes, [(fenced(program), row) for row, program in CHEATS.values()])
    scored = {name: (r.reward, r.details["outcome"]) for name, r in zip(CHEATS, results, strict=True)}
    assert all(reward == 0.0 for reward, _ in scored.values()), scored
    assert scored["an object whose __eq__ is always true"][1] == "check"
    assert scored["the nonce, from any memory it can read"][1] == "exited_early"
    lying = results[0].details["stderr_tail"]
    assert "add() returned a value the tests cannot compare safely" in lying and "solution.Yes" in lying


def test_results_of_builtin_subclasses_compare_as_their_base_type_and_other_objects_fail_saying_why() -> None:
    """A Counter is compared as the dict it is; a Fraction is not a built-in value, so it cannot be trusted."""
    hist = {"test": "def check(candidate):\n    assert candidate('a b b') == {'a': 1, 'b': 2}\n", "entry_point": "hist"}
    counter = "import collections\ndef hist(text):\n    return collections.Counter(text.split())\n"
    fraction = "import fractions\ndef add(a, b):\n    return fractions.Fraction(a + b)\n"
    ok, refused = score_all(LocalSandboxes(SandboxSpec(type="local")), [(fenced(counter), hist),
                                                                         (fenced(fraction), ADD)])
    assert ok.passed, ok.details
    assert refused.reward == 0.0 and "a fractions.Fraction cannot cross" in refused.details["stderr_tail"]


def test_run_python_tests_passes_the_program_through_files_untouched(tmp_path: Path) -> None:
    program = "QUOTES = '''it's \"$(rm -rf /)\" `x`'''\ndef add(a, b):\n    return a + b\n"

    async def main() -> CodeRunResult:
        async with LocalSandboxes(SandboxSpec(type="local")) as sandboxes, sandboxes.session() as box:
            result = await run_python_tests(box, program, ADD["test"], "add", 5)
            assert await box.read_file("solution.py") == program.encode()
            return result

    assert asyncio.run(main()).passed
