"""Wrong programs for the mock's code replies, whatever form the question takes.

HumanEval's question is a signature and docstring, so a wrong reply completes it with a wrong body
(``responder.wrong_function``). MBPP's question is a sentence, so a wrong reply is the reference program's
functions, same signatures, with wrong bodies: plausible, and failing the asserts.
"""

from __future__ import annotations

import ast
import warnings

WRONG_BODIES: tuple[str, ...] = ("return None", "return 0", "return []", 'return ""')


def is_python(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def stubbed_functions(reference: str, choice: int) -> str:
    """``reference``'s imports and top-level functions, each body replaced by one wrong ``return``."""
    body = WRONG_BODIES[(choice >> 16) % len(WRONG_BODIES)]
    tree = ast.parse(reference)
    lines = reference.splitlines()
    out: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.append(ast.get_source_segment(reference, node) or "")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            header = "\n".join(lines[node.lineno - 1:node.body[0].lineno - 1]).rstrip()
            if not header:  # a one-line function: `def f(x): return x`
                header = lines[node.lineno - 1].split(":", 1)[0] + ":"
            out.append(f"{header}\n    {body}")
    return "\n".join(out) if out else f"def solution(*args):\n    {body}"
