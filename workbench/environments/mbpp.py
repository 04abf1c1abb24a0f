"""MBPP: write a Python function from a one-sentence description and three example asserts; scored in a sandbox.

The frozen rows come from ``workbench.catalogue.mbpp``. Scoring runs the model's program against the row's
asserts through the same harness as HumanEval (``workbench.scoring.code_exec``): the asserts run in a process of
their own and call the program's entry point through a pipe, so a program cannot fake a pass. Plain ``verify``
refuses, as HumanEval's does: a score needs the code run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from workbench.catalogue.mbpp import check_program
from workbench.environments.base import AnswerKeyEntry, Capabilities, SeedResult, VerifyResult
from workbench.environments.dataset import BenchmarkDefinition, DatasetEnvironment
from workbench.environments.humaneval import _compile_error
from workbench.errors import UsageError
from workbench.sandbox.base import Sandbox
from workbench.scoring.code import extract_code
from workbench.scoring.code_exec import run_python_tests

SCORER = "code_execution"


class MBPPEnvironment(DatasetEnvironment):
    """MBPP's problems; the expected answer is the reference program."""

    own_scoring: ClassVar[bool] = True
    requires_sandbox = True
    ARTIFACT = "solution.py"
    """What an agent leaves for scoring in response mode ``sandbox_artifact``."""

    def __init__(self, definition: BenchmarkDefinition) -> None:
        super().__init__(definition)
        self.capabilities = Capabilities(scoring="inline")

    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        """Refuse: a score needs the code run in a sandbox, and pretending otherwise would mislead."""
        raise UsageError(f"{self.name} is scored by running the model's code against the problem's asserts in a "
                         "sandbox: give the run one (--sandbox docker|local, or sandbox: in a config)")

    async def verify_in_sandbox(self, box: Sandbox, response: str, seed: SeedResult, timeout: float) -> VerifyResult:
        """Extract the code and run the row's asserts against it in ``box``: reward 1 iff they all pass."""
        row = self.rows[int(seed.metadata["idx"])]
        code, method = extract_code(response)
        if code is None:
            return VerifyResult(0.0, None, {"method": SCORER, "outcome": "no_code", "extraction": method,
                                            "explanation": "no code found in the response"},
                                {"failure_category": "format_error"})
        result = await run_python_tests(box, code, check_program(row["test_list"]), str(row["entry_point"]),
                                        timeout, problem=str(row.get("test_setup_code") or ""))
        return VerifyResult(result.reward, code, {"method": SCORER, "extraction": method, **result.details})

    def check_answer_key(self, idx: int) -> tuple[bool, str]:
        """Static checks only (nothing is executed): the reference and the asserts compile, the entry point exists."""
        row = self.rows[idx]
        problem = (_compile_error("the reference code", str(row["code"]))
                   or _compile_error("the asserts", check_program(row["test_list"])))
        if problem:
            return False, problem
        fenced = f"```python\n{str(row['code']).rstrip()}\n```"
        if (extract_code(fenced)[0] or "").strip() != str(row["code"]).strip():
            return False, "the reference code does not survive extraction from a ```python block"
        return True, f"compiles; entry point {row['entry_point']} defined (execution needs a sandbox)"

    def answer_key(self) -> Iterator[AnswerKeyEntry]:
        for row in self.rows:
            yield AnswerKeyEntry(question=str(row["text"]), answer=str(row["code"]).strip(), solution=None)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "requires_sandbox": True}
