"""MBPP (google-research-datasets/mbpp): one upstream row → the frozen row ``benchmarks/mbpp`` reads.

Both upstream configs convert: ``sanitized`` (the catalogue's choice: the authors' hand-verified subset, with
clarified descriptions and fixed tests; columns ``prompt``, ``test_imports``) and ``full`` (columns ``text``,
``test_setup_code``, ``challenge_test_list``). The frozen row keeps what the prompt shows (``text``, ``tests``),
what the sandbox runs (``test_list``, ``test_setup_code``, ``entry_point``) and the reference ``code`` the mock
answers with. The entry point is the first function the tests call that the reference code defines: the sandbox's
harness calls the model's program through it.
"""

from __future__ import annotations

import ast
from typing import Any


def convert(row: dict[str, Any]) -> dict[str, Any] | None:
    """The frozen row, or ``None`` when the row's tests call no function its reference code defines."""
    text = str(row.get("prompt") or row.get("text") or "").strip()
    code = str(row["code"]).replace("\r\n", "\n")
    tests = [str(t).strip() for t in row["test_list"]]
    setup = row.get("test_setup_code")
    if setup is None:
        setup = "\n".join(str(line) for line in (row.get("test_imports") or []))
    entry = entry_point(code, tests)
    if not text or not tests or entry is None:
        return None
    return {
        "task_id": int(row["task_id"]),
        "text": text,
        "tests": "\n".join(tests),
        "test_list": tests,
        "test_setup_code": str(setup).replace("\r\n", "\n"),
        "code": code,
        "entry_point": entry,
    }


def entry_point(code: str, tests: list[str]) -> str | None:
    """The first name the tests call that ``code`` defines at top level (``None``: none, or code that won't parse)."""
    try:
        defined = {node.name for node in ast.parse(code).body
                   if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
        for test in tests:
            for node in ast.walk(ast.parse(test)):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in defined:
                    return node.func.id
    except SyntaxError:
        return None
    return None


def check_program(tests: list[str]) -> str:
    """The tests as the harness runs them: a ``check(candidate)`` asserting each line, in order.

    The harness also binds the entry point's own name to the candidate, so the upstream asserts run unchanged.
    """
    body = "\n".join(f"    {line}" for test in tests for line in test.splitlines())
    return f"def check(candidate):\n{body}\n"
