"""Score code by running it: the program and the problem's tests in a sandbox; reward 1 iff every test passes.

The program travels as a file (``solution.py``) and a fixed harness (``workbench.sandbox.harness``) runs it, so
nothing the model wrote is pasted into a command line. The harness keeps the program out of the process that
runs the tests: results cross a pipe as plain built-in values, and a pass is a nonce the program never sees,
so returning an object whose ``__eq__`` is always true, patching what the tests call, or exiting early with
status 0 all score 0. The details say what happened in words a reader can act on: which stage failed (the
program itself, the test code, or ``check``), the failing assertion, a timeout or a memory kill, and which
backend ran it (the local one is marked as weaker isolation).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from workbench.sandbox import harness
from workbench.sandbox.base import Sandbox
from workbench.scoring.code import extract_code

SOLUTION_FILE = harness.SOLUTION_FILE
HARNESS_FILE = "harness.py"
TAIL_CHARS = 2000
"""How much of stdout/stderr the details keep (their end: where tracebacks are)."""

# Exit codes of the harness, so a failure says at which stage it happened.
EXIT_CODES = {0: "passed", harness.EXIT_CHECK: "check", harness.EXIT_SOLUTION: "solution", harness.EXIT_TESTS: "tests",
              harness.EXIT_ENTRY_POINT: "entry_point", harness.EXIT_WORKER_GONE: "exited_early",
              harness.EXIT_HARNESS: "harness"}
FAILED_AT = harness.FAILED_AT
PASSED = harness.PASSED


@cache
def harness_source() -> str:
    """The harness's source (``workbench/sandbox/harness.py``), copied into each sandbox as ``harness.py``."""
    return Path(harness.__file__).read_text(encoding="utf-8")


@dataclass(frozen=True)
class CodeRunResult:
    """The verdict: ``reward`` 1.0 iff the tests passed; ``code`` is what ran (``None``: nothing was found)."""

    reward: float
    code: str | None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.reward == 1.0


async def run_python_tests(
    box: Sandbox, program: str, test: str, entry_point: str, timeout: float, *, problem: str = ""
) -> CodeRunResult:
    """Run ``test``'s ``check(entry_point)`` against ``program`` in ``box``; reward 1.0 iff every test passed.

    ``problem`` is the problem's own code (HumanEval: its prompt), run beside the tests so that helpers they call
    (``poly``) are the problem's, never the program's. The tests, ``problem`` and the nonce reach the harness in a
    file it deletes before the program starts.
    """
    nonce = secrets.token_hex(16)
    await box.stop_processes()  # nothing left running (by an agent, say) may watch the harness start
    secret = harness.dumps({"nonce": nonce, "tests": test, "problem": problem})
    await box.write_files({SOLUTION_FILE: program, HARNESS_FILE: harness_source(), harness.SECRETS_FILE: secret})
    result = await box.run(["python3", "-I", HARNESS_FILE, entry_point], timeout=timeout)
    finished = f"{PASSED} {nonce}" in result.stderr
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
    result = await run_python_tests(box, code, str(row["test"]), str(row["entry_point"]), timeout,
                                    problem=str(row.get("prompt", "")))
    return CodeRunResult(reward=result.reward, code=code, details={"extraction": method, **result.details})


def _failed_at(stderr: str) -> str | None:
    """The harness's ``file:line: source`` of the failing statement (e.g. the assertion), if it printed one."""
    found = re.findall(rf"^{re.escape(FAILED_AT)} (.*)$", stderr, flags=re.MULTILINE)
    return found[-1] if found else None
