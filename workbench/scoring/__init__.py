"""Scorers: turn a response and an expected answer into a ``VerifyResult``.

Each scorer module is imported on first use, so listing scorers (and starting ``nel``)
costs nothing; the math scorer further defers importing sympy to its first call.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from workbench.environments.base import VerifyResult
from workbench.errors import UsageError

Scorer = Callable[[str, str], VerifyResult]

# scorer name -> (module under workbench.scoring, function name)
_SCORERS: dict[str, tuple[str, str]] = {
    "numeric": ("numeric", "score_numeric"),
    "multiple_choice": ("multiple_choice", "score_multiple_choice"),
    "exact": ("exact", "score_exact"),
    "normalized": ("normalized", "score_normalized"),
    "f1": ("f1", "score_f1"),
    "regex": ("regex", "score_regex"),
    "math": ("math", "score_math"),
}


def scorer_names() -> list[str]:
    return sorted(_SCORERS)


def get_scorer(name: str) -> Scorer:
    """Return the scorer registered as ``name``; the error lists the known ones."""
    try:
        module, function = _SCORERS[name]
    except KeyError:
        raise UsageError(f"unknown scorer {name!r}; known scorers: {', '.join(scorer_names())}") from None
    scorer: Scorer = getattr(importlib.import_module(f"workbench.scoring.{module}"), function)
    return scorer
