"""nel workbench: evaluate LLMs and agents, keep every step in DuckDB.

The package root stays import-light (``nel --help`` must be fast); heavy
modules load on first use. The BYOB names (``benchmark``, ``scorer``,
``ScorerInput`` and the scoring primitives such as ``answer_line``) are
exported lazily, so ``from workbench import benchmark, scorer`` works as in
NeMo Evaluator without costing every other import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from workbench.environments.byob import ScorerInput, benchmark, scorer
    from workbench.environments.byob_scoring import answer_line, exact_match, multichoice_regex, numeric_match
    from workbench.store.reader import Store

_LAZY = {
    "benchmark": "workbench.environments.byob",
    "scorer": "workbench.environments.byob",
    "ScorerInput": "workbench.environments.byob",
    "answer_line": "workbench.environments.byob_scoring",
    "exact_match": "workbench.environments.byob_scoring",
    "multichoice_regex": "workbench.environments.byob_scoring",
    "numeric_match": "workbench.environments.byob_scoring",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'workbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def open_store(path: Any) -> Store:
    """Open a store (a ``nel.duckdb`` file or the directory holding one) for reading."""
    from workbench.store.reader import open_store as _open

    return _open(path)


__all__ = ["ScorerInput", "__version__", "answer_line", "benchmark", "exact_match", "multichoice_regex",
           "numeric_match", "open_store", "scorer"]
