"""NeMo Evaluator's BYOB scoring primitives, for ``@scorer`` functions: each takes a ``ScorerInput`` and returns a
dict with ``correct`` (and ``extracted``, the answer it read, so an extraction failure is visible).

```python
@scorer
def check(sample: ScorerInput) -> dict:
    return answer_line(sample)
```

They reuse nel's scorers (``workbench.scoring``): the same normalisation and number reading as the built-ins.
Every extractor takes the **last** match, where a model states its final answer.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from workbench.scoring.normalized import normalize_answer
from workbench.scoring.numeric import normalize_number, score_numeric

if TYPE_CHECKING:
    from workbench.environments.byob import ScorerInput

ANSWER_LINE = re.compile(r"(?im)^[ \t*_#>]*(?:final[ \t]+)?answer[ \t*_]*:[ \t*_]*(?P<answer>.*?)[ \t*_]*$")
MULTICHOICE = r"(?i)Answer\s*:\s*\(?([A-D])\b"
_LATEX_WRAP = re.compile(r"^\$+|\$+$|^\\\(|\\\)$")
_BOXED = re.compile(r"^\\boxed\s*\{(?P<inner>.*)\}$", re.DOTALL)


def exact_match(sample: ScorerInput) -> dict[str, Any]:
    """Equal after normalisation: lower case, no punctuation, articles or extra whitespace (``" Paris. "`` is
    ``paris``)."""
    got = normalize_answer(sample.response)
    return {"correct": got == normalize_answer(str(sample.target)), "extracted": got}


def multichoice_regex(sample: ScorerInput, pattern: str = MULTICHOICE) -> dict[str, Any]:
    """The letter of the last ``Answer: X`` (A-D; give ``pattern``, one group, for more choices) equals the
    target letter."""
    found = re.findall(pattern, sample.response)
    if not found:
        return {"correct": False, "extracted": None}
    last = found[-1] if isinstance(found[-1], str) else found[-1][0]
    letter = last.strip().upper()
    return {"correct": letter == str(sample.target).strip().upper(), "extracted": letter}


def _math_form(text: str) -> str:
    """``$\\boxed{1/2}$.`` → ``1/2``: the markup around a stated answer, removed."""
    text = text.strip().rstrip(".").strip()
    text = _LATEX_WRAP.sub("", text).strip()
    boxed = _BOXED.match(text)
    return (boxed.group("inner") if boxed else text).strip()


def _math_equal(answer: str, target: str) -> bool:
    a, t = _math_form(answer), _math_form(target)
    if normalize_answer(a) == normalize_answer(t) or a.replace(" ", "") == t.replace(" ", ""):
        return True
    na, nt = normalize_number(a), normalize_number(t)
    if na is not None and nt is not None:
        return na == nt
    try:
        from workbench.scoring.math import score_math
    except ImportError:
        return False
    try:
        return score_math(f"${a}$", t).reward >= 1.0
    except ImportError:  # math-verify (the [math] extra) is not installed: the forms above decide
        return False


def answer_line(sample: ScorerInput) -> dict[str, Any]:
    """The text of the last ``Answer:`` line equals the target, with math normalisation (``\\boxed{}``, ``$…$``,
    numbers as values: ``0.5`` is ``1/2``; LaTeX through math-verify when the ``[math]`` extra is installed).

    A response with no ``Answer:`` line continues a prompt that ends with ``Answer:`` (the BYOB example's): its
    last non-blank line is the answer."""
    lines = ANSWER_LINE.findall(sample.response) or [ln for ln in sample.response.splitlines() if ln.strip()][-1:]
    if not lines:
        return {"correct": False, "extracted": None}
    answer = lines[-1].strip()
    return {"correct": bool(answer) and _math_equal(answer, str(sample.target)), "extracted": answer}


def numeric_match(sample: ScorerInput, tolerance: float = 0.0) -> dict[str, Any]:
    """The response's final number (``\\boxed{}``, ``Answer:``, "the answer is", else the last number) equals the
    target's, within ``tolerance`` (absolute)."""
    verdict = score_numeric(sample.response, str(sample.target), abs_tol=tolerance)
    return {"correct": verdict.reward >= 1.0, "extracted": verdict.extracted_answer}
