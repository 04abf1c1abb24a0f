"""Analysis over steps: pure functions on polars frames returning typed results."""

from workbench.analysis.run_summary import SUMMARY_COLUMNS, RunSummary, summarize

__all__ = ["SUMMARY_COLUMNS", "RunSummary", "summarize"]
