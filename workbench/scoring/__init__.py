"""Scorers: turn a response and an expected answer into a ``VerifyResult``.

Each scorer module is imported on first use, so listing scorers (and starting ``nel``)
costs nothing; the math scorer further defers importing sympy to its first call.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from workbench.errors import UsageError
from workbench.extras import require
from workbench.types import VerifyResult

Scorer = Callable[[str, str], VerifyResult]


@dataclass(frozen=True, slots=True)
class Param:
    """One tunable of a scorer: its type (``float``, ``bool``), default and meaning."""

    kind: type
    default: Any
    help: str


# scorer name -> (module under workbench.scoring, function name, parameters)
_SCORERS: dict[str, tuple[str, str, dict[str, Param]]] = {
    "numeric": ("numeric", "score_numeric", {
        "abs_tol": Param(float, 0.0, "accept answers within this absolute distance of the expected number"),
        "rel_tol": Param(float, 0.0, "accept answers within this fraction of the expected number"),
    }),
    "multiple_choice": ("multiple_choice", "score_multiple_choice", {}),
    "exact": ("exact", "score_exact", {
        "case_sensitive": Param(bool, True, "false: compare ignoring case"),
    }),
    "normalized": ("normalized", "score_normalized", {}),
    "f1": ("f1", "score_f1", {
        "threshold": Param(float, None, "binary reward: 1.0 when token F1 reaches this value"),
    }),
    "regex": ("regex", "score_regex", {
        "ignore_case": Param(bool, True, "false: the pattern is case-sensitive"),
    }),
    "math": ("math", "score_math", {}),
    "aliases": ("aliases", "score_aliases", {}),
}
_EXTRA = {"math": "math"}
"""Scorers whose library is an extra of the distribution (math-verify: ``[math]``)."""
CPU_HEAVY = frozenset({"math"})
"""Scorers that compute (sympy): a run scores with them in worker processes, off the event loop and the GIL;
the others are cheap regex work (``workbench.engine.verify_pool``)."""


def scorer_names() -> list[str]:
    return sorted(_SCORERS)


def scorer_extra(name: str) -> str | None:
    """The extra of the distribution scorer ``name`` needs (``math``), or None."""
    return _EXTRA.get(name)


def scorer_params(name: str) -> dict[str, Param]:
    """The parameters scorer ``name`` accepts (empty for an unknown name)."""
    return dict(_SCORERS[name][2]) if name in _SCORERS else {}


def check_params(name: str, params: Mapping[str, Any], where: str = "scoring") -> dict[str, Any]:
    """``params`` validated against scorer ``name``'s; an error names ``where.param`` and what is accepted."""
    known = scorer_params(name)
    checked: dict[str, Any] = {}
    for key, value in params.items():
        spec = known.get(key)
        if spec is None:
            accepted = ", ".join(sorted(known)) or "none"
            raise UsageError(f"{where}.{key}: scorer {name!r} has no parameter {key!r}; its parameters: {accepted}")
        if spec.kind is bool:
            ok = isinstance(value, bool)
        else:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok:
            raise UsageError(f"{where}.{key}: expected {'true or false' if spec.kind is bool else 'a number'}, "
                             f"got {value!r}")
        checked[key] = spec.kind(value)
    return checked


def get_scorer(name: str, params: Mapping[str, Any] | None = None) -> Scorer:
    """Return the scorer registered as ``name`` with ``params`` applied; errors list what is known."""
    try:
        module, function, _ = _SCORERS[name]
    except KeyError:
        raise UsageError(f"unknown scorer {name!r}; known scorers: {', '.join(scorer_names())}") from None
    if name in _EXTRA:  # when the benchmark is built, not at its first answer
        require(_EXTRA[name], f"the {name} scorer")
    scorer: Scorer = getattr(importlib.import_module(f"workbench.scoring.{module}"), function)
    if params:
        return functools.partial(scorer, **check_params(name, params))
    return scorer
