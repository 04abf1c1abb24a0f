"""Analysis over steps: pure functions on polars frames or arrays returning typed results."""

from workbench.analysis.run_summary import SUMMARY_COLUMNS, RunSummary, summarize, summarize_steps

__all__ = ["SUMMARY_COLUMNS", "RunSummary", "summarize", "summarize_steps"]
