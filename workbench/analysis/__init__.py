"""Analysis over steps: pure functions on polars frames or arrays returning typed results.

The run summary is imported eagerly (every run prints one); the rest (loading a run from the store or an
exported directory, run statistics, paired comparison, the release gate) on first use, so a process
that needs only the summary does not pay for scipy.stats and polars.
"""

from __future__ import annotations

import importlib
from typing import Any

from workbench.analysis.run_summary import SUMMARY_COLUMNS, RunSummary, summarize, summarize_steps

_LAZY = {
    "RunData": "sources",
    "load_run": "sources",
    "RunStatistics": "run_stats",
    "run_statistics": "run_stats",
    "Comparison": "compare",
    "compare_runs": "compare",
    "regression_report": "compare",
    "GateResult": "gate",
    "run_gate": "gate",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'workbench.analysis' has no attribute {name!r}")
    return getattr(importlib.import_module(f"workbench.analysis.{module}"), name)


__all__ = ["SUMMARY_COLUMNS", "RunSummary", "summarize", "summarize_steps", *_LAZY]
