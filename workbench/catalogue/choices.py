"""Multiple-choice rows in one frozen shape, whatever the upstream layout.

Every multiple-choice benchmark of the catalogue freezes its rows as ``question``, ``options``
(the option texts in the order shown), ``options_text`` (``A) …`` one per line, as OpenAI
simple-evals lays them out), ``letters`` (the letters offered, ``ABCD``) and ``answer`` (the
correct letter), so one prompt template and the ``multiple_choice`` scorer serve them all.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Any

from workbench.errors import UsageError

LETTERS = "ABCDEFGHIJ"
"""The letters the ``multiple_choice`` scorer reads: at most ten options."""


def mcq_row(question: str, options: Sequence[str], correct: int, **extra: Any) -> dict[str, Any]:
    """The frozen row of a question whose option ``correct`` (0-based, in ``options`` order) is right."""
    if not 2 <= len(options) <= len(LETTERS):
        raise UsageError(f"a multiple-choice question needs 2 to {len(LETTERS)} options, got {len(options)}: "
                         f"{question[:60]!r}")
    if not 0 <= correct < len(options):
        raise UsageError(f"correct option {correct} is not one of the {len(options)} options: {question[:60]!r}")
    texts = [str(option).strip() for option in options]
    return {
        "question": question.strip(),
        "options": texts,
        "options_text": "\n".join(f"{LETTERS[i]}) {text}" for i, text in enumerate(texts)),
        "letters": LETTERS[: len(texts)],
        "answer": LETTERS[correct],
        **extra,
    }


def content_seed(*parts: str) -> int:
    """A seed derived from a row's own text: the same question always gets the same seed, on any machine
    and in any row order (Python's ``hash`` is salted per process, so it is not used)."""
    digest = hashlib.sha256("\0".join(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def shuffled(options: Sequence[str], correct: int, seed: int) -> tuple[list[str], int]:
    """``options`` in an order fixed by ``seed``, and where the correct one went."""
    order = list(range(len(options)))
    random.Random(seed).shuffle(order)
    return [options[i] for i in order], order.index(correct)
