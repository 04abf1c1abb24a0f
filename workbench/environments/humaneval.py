"""HumanEval: complete a Python function from its signature and docstring; scored by running its tests.

Scoring runs the model's code with the problem's tests in a sandbox (``verify_in_sandbox``, driven
by ``environments.sandboxed``); plain ``verify`` refuses, and ``requires_sandbox`` tells the engine
not to start a run without one. The tests run in a process of their own beside the problem's prompt
(whose helpers, e.g. ``poly``, they call), never in the program's (``workbench.sandbox.harness``). The data is
``benchmarks/humaneval/data.jsonl`` (see its README and SOURCE.md).
"""

from __future__ import annotations

import ast
import hashlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbench.environments.base import AnswerKeyEntry, EvalEnvironment, SeedResult, VerifyResult
from workbench.environments.dataset import load_jsonl, task_id_of
from workbench.errors import UsageError
from workbench.resources import benchmarks_dir
from workbench.sandbox.base import Sandbox
from workbench.scoring.code import extract_code
from workbench.scoring.code_exec import score_humaneval_response

NAME = "humaneval"
INSTRUCTION = "Complete the following Python function. Return the complete function in a ```python code block."
PROMPT_TEMPLATE = "{instruction}\n\n{problem}"
FIELDS = ("task_id", "prompt", "entry_point", "canonical_solution", "test")
SCORER = "code_execution"
NO_SANDBOX = (
    f"{NAME} is scored by running the model's code against the problem's tests in a sandbox: "
    "give the run one (--sandbox docker|local, or sandbox: in a config)"
)


def default_data_path() -> Path:
    return benchmarks_dir() / NAME / "data.jsonl"


def problem_text(row: dict[str, Any]) -> str:
    """The problem as the prompt shows it: the upstream prompt without its leading and trailing blank lines."""
    return str(row["prompt"]).strip("\n")


def complete_function(row: dict[str, Any]) -> str:
    """The reference answer: the upstream prompt followed by the canonical body, a complete program."""
    return str(row["prompt"]) + str(row["canonical_solution"])


class HumanEvalEnvironment(EvalEnvironment):
    """The 164 HumanEval problems; the expected answer is the complete canonical function."""

    name = NAME
    requires_sandbox = True
    ARTIFACT = "solution.py"
    """What an agent leaves for scoring in response mode ``sandbox_artifact``."""

    def __init__(self, data_path: Path | None = None) -> None:
        path = data_path if data_path is not None else default_data_path()
        rows, self._data_sha256 = load_jsonl(path)
        for lineno, row in rows:
            for key in FIELDS:
                if not isinstance(row.get(key), str):
                    raise UsageError(f"{path}:{lineno}: row has no text field {key!r}")
        self._rows = [row for _, row in rows]
        self._task_ids = [task_id_of(row) for row in self._rows]

    def __len__(self) -> int:
        return len(self._rows)

    def _row(self, idx: int) -> dict[str, Any]:
        if not 0 <= idx < len(self._rows):
            raise IndexError(f"{self.name}: problem index {idx} out of range 0..{len(self._rows) - 1}")
        return self._rows[idx]

    def seed(self, idx: int) -> SeedResult:
        row = self._row(idx)
        prompt = PROMPT_TEMPLATE.format(instruction=INSTRUCTION, problem=problem_text(row))
        return SeedResult(
            prompt=prompt,
            messages=({"role": "user", "content": prompt},),
            expected_answer=complete_function(row),
            task_id=self._task_ids[idx],
            metadata={"idx": idx, "entry_point": row["entry_point"], "humaneval_id": row["task_id"]},
        )

    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        """Refuse: a score needs the code run in a sandbox, and pretending otherwise would mislead."""
        raise UsageError(NO_SANDBOX)

    def row(self, idx: int) -> dict[str, Any]:
        """Problem ``idx`` as upstream has it (prompt, canonical_solution, test, entry_point)."""
        return self._row(idx)

    async def verify_in_sandbox(self, box: Sandbox, response: str, seed: SeedResult, timeout: float) -> VerifyResult:
        """Extract the code, run it with the problem's tests in ``box``: reward 1 iff they all pass."""
        result = await score_humaneval_response(box, response, self._row(int(seed.metadata["idx"])), timeout)
        details = {"method": SCORER, **result.details}
        return VerifyResult(result.reward, result.code, details,
                            {} if result.code is not None else {"failure_category": "format_error"})

    @property
    def data_hash(self) -> str:
        h = hashlib.sha256(self._data_sha256.encode())
        for part in (INSTRUCTION, PROMPT_TEMPLATE, SCORER):
            h.update(b"\0" + part.encode())
        return h.hexdigest()[:16]

    def check_answer_key(self, idx: int) -> tuple[bool, str]:
        """Static checks only (nothing is executed): the solution and tests compile and name what they must."""
        row = self._row(idx)
        entry = str(row["entry_point"])
        solution, test = complete_function(row), str(row["test"])
        problem = _compile_error("the solution", solution) or _compile_error("the test code", test)
        if problem:
            return False, problem
        if entry not in _top_level_functions(solution):
            return False, f"the solution does not define the entry point {entry!r}"
        if "check" not in _top_level_functions(test):
            return False, "the tests do not define check"
        fenced = f"Here it is.\n```python\n{solution.rstrip()}\n```"
        if (extract_code(fenced)[0] or "").strip() != solution.strip():
            return False, "the solution does not survive extraction from a ```python block"
        return True, f"compiles; entry point {entry} defined; tests define check (execution needs a sandbox)"

    def answer_key(self) -> Iterator[AnswerKeyEntry]:
        for row in self._rows:
            yield AnswerKeyEntry(question=problem_text(row), answer=complete_function(row), solution=None)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": "Python functions from a signature and docstring (OpenAI HumanEval), run against tests",
            "domain": "code",
            "size": len(self),
            "default_repeats": 10,
            "scorer": SCORER,
            "source": "openai/human-eval, data/HumanEval.jsonl.gz (see benchmarks/humaneval/SOURCE.md)",
            "license": "MIT",
            "requires_sandbox": True,
        }


def _compile_error(what: str, code: str) -> str | None:
    """Why ``code`` (``what``) does not compile, in one line, or ``None``; compiling runs nothing."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(code, "<humaneval>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        reason = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        return f"{what} does not compile{where}: {reason}"
    return None


def _top_level_functions(code: str) -> set[str]:
    tree = ast.parse(code)
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
