"""nel workbench: evaluate LLMs and agents, keep every step in DuckDB.

The package root stays import-light (``nel --help`` must be fast); heavy
modules load on first use. The BYOB names (``benchmark``, ``scorer``,
``ScorerInput`` and the scoring primitives such as ``answer_line``) are
exported lazily, so ``from workbench import benchmark, scorer`` works as in
NeMo Evaluator without costing every other import; so are the rest of its
documented surface (``EvalEnvironment``, ``SeedResult``, ``register``,
``ModelClient``, ``run_evaluation``, ``write_all``, ``compare_runs``, ...:
``workbench.api``, ``docs/python-api.md``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# workbench.api's names are not imported for type checkers here: the package is above the core (it serves an
# app with workbench.serve), and the root must not import it even then (import-linter counts those imports).
if TYPE_CHECKING:
    from workbench.environments import EvalEnvironment, SeedResult, VerifyResult, get_environment, register
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
    **dict.fromkeys(("EvalEnvironment", "SeedResult", "VerifyResult", "register", "get_environment"),
                    "workbench.environments"),
    **dict.fromkeys(("ModelClient", "ChatResponse", "run_evaluation", "write_all", "compare_runs",
                     "write_regression", "generate_app"), "workbench.api"),
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


__all__ = ["ChatResponse", "EvalEnvironment", "ModelClient", "ScorerInput", "SeedResult", "VerifyResult",
           "__version__", "answer_line", "benchmark", "compare_runs", "exact_match", "generate_app",
           "get_environment", "multichoice_regex", "numeric_match", "open_store", "register", "run_evaluation",
           "scorer", "write_all", "write_regression"]
