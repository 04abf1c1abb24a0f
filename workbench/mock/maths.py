"""Wrong final answers for the ``math`` scorer's answers that are not plain numbers.

``wrong_answer`` makes wrong numbers; a MATH answer is as often ``\\frac{3}{4}``, ``9\\pi``, ``\\sqrt{2}`` or
``(1, 2)``. A wrong one is the answer shifted or scaled, kept only when the benchmark's own scorer really
marks it wrong (math-verify decides equality symbolically, so ``\\frac{6}{8}`` would not do). The check
costs a math-verify call, so each task's wrong answers are made once per variant and kept.
"""

from __future__ import annotations

from collections.abc import Callable

from workbench.types import VerifyResult

VARIANTS = 3


def wrong_expression(answer: str, variant: int, verify: Callable[[str, str], VerifyResult] | None,
                     reasoning: str = "") -> str | None:
    """A LaTeX answer the scorer marks wrong against ``answer`` when boxed after ``reasoning`` (``variant`` picks
    which), or ``None``."""
    if verify is None:
        return None
    shift = 1 + variant
    candidates = (f"{answer} + {shift}", f"{shift + 1}\\left({answer}\\right)", f"-\\left({answer}\\right)")
    for k in range(len(candidates)):
        candidate = candidates[(variant + k) % len(candidates)]
        if verify(f"{reasoning}\n\\boxed{{{candidate}}}", answer).reward == 0.0:
            return candidate
    return None
