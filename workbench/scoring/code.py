"""Find the program in a model's reply: a fenced code block, else the reply itself if it is Python.

Code benchmarks (HumanEval) run what this returns against the problem's tests, so the
method is recorded next to the code: a reply scored wrong because no code was found
reads differently from one whose code failed.
"""

from __future__ import annotations

import ast
import re
import warnings

PYTHON_TAGS = frozenset({"python", "py", "python3"})
"""Fence info strings (case-insensitive) that mark a block as Python."""

_OPEN = re.compile(r"^[ \t]*(`{3,})[ \t]*([^`\s]*)[^`]*$")


def extract_code(response: str) -> tuple[str | None, str]:
    """``(code, method)``: the code to run and how it was found.

    The last ```` ```python ```` block wins (``method="fenced_python"``; ``py`` and
    ``python3`` count too), else the last fenced block of any language (``"fenced"``),
    else the whole reply when it parses as Python (``"bare"``), else ``(None, "none")``.
    A block left open at the end of the reply (a reply cut off mid-code) runs to the end.
    """
    blocks = _fenced_blocks(response)
    python = [code for tag, code in blocks if tag.lower() in PYTHON_TAGS]
    if python:
        return python[-1], "fenced_python"
    if blocks:
        return blocks[-1][1], "fenced"
    text = response.strip("\r\n")
    if text.strip() and _parses(text):
        return text, "bare"
    return None, "none"


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(info tag, contents)`` of each fenced block, in order; contents end with a newline unless empty."""
    blocks: list[tuple[str, str]] = []
    fence: str | None = None
    tag = ""
    body: list[str] = []
    for line in text.splitlines():
        if fence is None:
            match = _OPEN.match(line)
            if match:
                fence, tag, body = match[1], match[2], []
        elif line.strip().startswith(fence) and not line.strip().strip("`"):
            blocks.append((tag, "".join(f"{b}\n" for b in body)))
            fence = None
        else:
            body.append(line)
    if fence is not None:
        blocks.append((tag, "".join(f"{b}\n" for b in body)))
    return blocks


def _parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. SyntaxWarning for "\d" in prose
            ast.parse(text)
    except (SyntaxError, ValueError):  # ValueError: a NUL byte in the text
        return False
    return True
