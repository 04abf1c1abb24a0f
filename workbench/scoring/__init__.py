"""Scorers: turn a response and an expected answer into a ``VerifyResult``."""

from __future__ import annotations

from collections.abc import Callable

from workbench.environments.base import VerifyResult
from workbench.errors import UsageError

Scorer = Callable[[str, str], VerifyResult]


def _numeric() -> Scorer:
    from workbench.scoring.numeric import score_numeric

    return score_numeric


_SCORERS: dict[str, Callable[[], Scorer]] = {"numeric": _numeric}


def scorer_names() -> list[str]:
    return sorted(_SCORERS)


def get_scorer(name: str) -> Scorer:
    """Return the scorer registered as ``name``; the error lists the known ones."""
    try:
        return _SCORERS[name]()
    except KeyError:
        raise UsageError(f"unknown scorer {name!r}; known scorers: {', '.join(scorer_names())}") from None
