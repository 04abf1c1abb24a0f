"""Score code by running it: the program and the problem's tests in a sandbox; reward 1 iff every test passes.

The program and the tests travel as files (``solution.py``, ``tests.py``) and a fixed
harness runs them, so nothing the model wrote is pasted into a command line. The details
say what happened in words a reader can act on: which stage failed (the program itself,
the test code, or ``check``), the failing assertion, a timeout or a memory kill, and which
backend ran it (the local one is marked as weaker isolation).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from workbench.sandbox.base import Sandbox
from workbench.scoring.code import extract_code

SOLUTION_FILE = "solution.py"
TESTS_FILE = "tests.py"
HARNESS_FILE = "harness.py"
NONCE_FILE = ".nel-nonce"
TAIL_CHARS = 2000
"""How much of stdout/stderr the details keep (their end: where tracebacks are)."""

# Exit codes of the harness, so a failure says at which stage it happened.
EXIT_CODES = {0: "passed", 1: "check", 2: "solution", 3: "tests", 4: "entry_point"}
FAILED_AT = "NEL-FAILED-AT:"
PASSED = "NEL-PASSED:"

HARNESS = f'''\
"""Run {SOLUTION_FILE}, then {TESTS_FILE}, then check(<entry point>), in one namespace (as HumanEval does)."""
import os, sys, traceback


def run(path, namespace, stage):
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        exec(compile(source, path, "exec"), namespace)
    except BaseException as exc:
        fail(exc, stage)


def fail(exc, stage):
    traceback.print_exc()
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename in ("{SOLUTION_FILE}", "{TESTS_FILE}"):
            print(f"{FAILED_AT} {{frame.filename}}:{{frame.lineno}}: {{frame.line}}", file=sys.stderr)
            break
    sys.stderr.flush()
    sys.exit(stage)


def main():
    # The pass line carries a nonce, read and deleted before the program runs, so a program that
    # ends the process early with os._exit(0) is not taken for one whose tests passed.
    with open("{NONCE_FILE}", encoding="utf-8") as f:
        nonce = f.read().strip()
    os.unlink("{NONCE_FILE}")
    entry_point = sys.argv[1]
    namespace = {{"__name__": "solution"}}
    run("{SOLUTION_FILE}", namespace, 2)
    run("{TESTS_FILE}", namespace, 3)
    if not callable(namespace.get(entry_point)):
        print(f"the program does not define {{entry_point}}()", file=sys.stderr)
        sys.exit(4)
    if not callable(namespace.get("check")):
        print("the tests do not define check()", file=sys.stderr)
        sys.exit(3)
    try:
        namespace["check"](namespace[entry_point])
    except BaseException as exc:
        fail(exc, 1)
    sys.stdout.flush()
    print(f"{PASSED} {{nonce}}", file=sys.stderr)


main()
'''


@dataclass(frozen=True)
class CodeRunResult:
    """The verdict: ``reward`` 1.0 iff the tests passed; ``code`` is what ran (``None``: nothing was found)."""

    reward: float
    code: str | None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.reward == 1.0


async def run_python_tests(box: Sandbox, program: str, test: str, entry_point: str, timeout: float) -> CodeRunResult:
    """Run ``program`` then ``test`` then ``check(entry_point)`` in ``box``; reward 1.0 iff that exits 0."""
    nonce = secrets.token_hex(16)
    await box.write_files({SOLUTION_FILE: program, TESTS_FILE: test, HARNESS_FILE: HARNESS, NONCE_FILE: nonce})
    result = await box.run(["python3", HARNESS_FILE, entry_point], timeout=timeout)
    finished = f"{PASSED} {nonce}" in result.stderr[-TAIL_CHARS:]
    passed = result.exit_code == 0 and finished and not result.timed_out and not result.oom_killed
    if result.timed_out:
        outcome = "timeout"
    elif result.oom_killed:
        outcome = "memory"
    else:
        outcome = EXIT_CODES.get(result.exit_code if result.exit_code is not None else -1, "killed")
        if result.exit_code == 0 and not finished:
            outcome = "exited_early"  # exit status 0 but the harness never reached its end
    details: dict[str, Any] = {
        "outcome": outcome,
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "oom_killed": result.oom_killed,
        "duration_ms": round(result.duration_ms, 1),
        "sandbox": result.backend,
        "stdout_tail": result.stdout[-TAIL_CHARS:],
        "stderr_tail": result.stderr[-TAIL_CHARS:].replace(nonce, "…"),
    }
    failed_at = _failed_at(result.stderr)
    if failed_at and not passed:
        details["failed_at"] = failed_at
    return CodeRunResult(reward=1.0 if passed else 0.0, code=program, details=details)


async def score_humaneval_response(box: Sandbox, response: str, row: dict[str, Any], timeout: float) -> CodeRunResult:
    """Extract the program from ``response`` and run it against the HumanEval ``row``'s tests.

    No code in the reply scores 0 without running anything, and the details say so; the
    extraction method (``fenced_python``, ``fenced``, ``bare``) is recorded either way.
    """
    code, method = extract_code(response)
    if code is None:
        return CodeRunResult(
            reward=0.0,
            code=None,
            details={"outcome": "no_code", "extraction": method, "explanation": "no code found in the response"},
        )
    result = await run_python_tests(box, code, str(row["test"]), str(row["entry_point"]), timeout)
    return CodeRunResult(reward=result.reward, code=code, details={"extraction": method, **result.details})


def _failed_at(stderr: str) -> str | None:
    """The harness's ``file:line: source`` of the failing statement (e.g. the assertion), if it printed one."""
    found = re.findall(rf"^{re.escape(FAILED_AT)} (.*)$", stderr, flags=re.MULTILINE)
    return found[-1] if found else None
