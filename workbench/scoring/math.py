"""Mathematical equivalence through Hugging Face's ``math-verify`` (which parses LaTeX into sympy).

``\\frac{1}{2}`` equals ``0.5``, ``\\boxed{2\\sqrt{2}}`` equals ``\\sqrt{8}`` and intervals
compare as sets, because the comparison is symbolic. ``math_verify`` and sympy take
about half a second to import, so they are imported on the first call, never when
``workbench.scoring`` is imported.

math-verify bounds parsing and comparison time with ``signal.alarm``, which only works
in the main thread; elsewhere (a thread pool) it runs without that bound.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Any

from workbench.types import VerifyResult

TIMEOUT_SECONDS = 5


def _timeout() -> int | None:
    return TIMEOUT_SECONDS if threading.current_thread() is threading.main_thread() else None


def _parse(text: str) -> list[Any]:
    from math_verify import parse

    return list(parse(text, parsing_timeout=_timeout()))  # type: ignore[arg-type]  # None disables the alarm


_PROSE_WORD = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{2,}")
"""A word that is not a LaTeX command (``pi`` in ``\\pi`` is not one): its presence makes a text prose."""


def _parse_response(text: str) -> list[Any]:
    """A response's answer. A bare one-line answer with no prose (``9\\pi``, ``(1, 2)``, ``\\sqrt{2}``: what
    ``nel validate`` sends, and what terse models reply) is read as LaTeX maths first, as an expected answer
    is; math-verify alone would read ``9\\pi`` as 9 and find nothing in ``\\sqrt{2}``."""
    bare = text.strip()
    if bare and "\n" not in bare and "$" not in bare and "\\boxed" not in bare and not _PROSE_WORD.search(bare):
        parsed = _parse(f"${bare}$")
        if parsed:
            return parsed
    return _parse(text)


@lru_cache(maxsize=4096)
def _parse_expected(expected: str) -> tuple[Any, ...]:
    """The expected answer, read as LaTeX maths first (it is usually bare: ``\\frac{1}{2}``, ``(1,2]``)."""
    text = expected.strip()
    parsed: list[Any] = []
    if "$" not in text and "\\boxed" not in text:
        parsed = _parse(f"${text}$")
    return tuple(parsed or _parse(text))


def score_math(response: str, expected: str) -> VerifyResult:
    """Score 1.0 when the final answer of ``response`` is mathematically equal to ``expected``."""
    from math_verify import verify

    gold = _parse_expected(expected)
    details: dict[str, Any] = {"method": "math_verify", "parsed_expected": _shown(gold)}
    if not response or response.isspace():
        details.update(reason="empty response", parsed_extracted=None)
        return VerifyResult(reward=0.0, extracted_answer=None, scoring_details=details)
    answer = _parse_response(response)
    details["parsed_extracted"] = _shown(answer)
    if not answer:
        details["reason"] = "no mathematical answer found in the response"
        return VerifyResult(reward=0.0, extracted_answer=None, scoring_details=details)
    if not gold:
        details["reason"] = "expected answer could not be parsed"
        return VerifyResult(reward=0.0, extracted_answer=_shown(answer), scoring_details=details)
    equal = verify(list(gold), answer, timeout_seconds=_timeout())
    return VerifyResult(reward=1.0 if equal else 0.0, extracted_answer=_shown(answer), scoring_details=details)


def _shown(parsed: Any) -> str | None:
    """math-verify returns [sympy value, matched text]: keep the text the answer was read from."""
    if not parsed:
        return None
    return str(parsed[-1]) if len(parsed) > 1 else str(parsed[0])
