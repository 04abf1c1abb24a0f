"""Failure triage over a store: the queries and diffs behind ``nel tui``, without any widget.

Every function takes a ``Store`` (or plain values) and returns typed rows, so the TUI stays a thin
view and each query is testable on its own. The queries and the rows they return live in
``workbench.store.queries`` (``triage_runs``, ``triage_tasks``, ``triage_attempts``, ``triage_live``) and are
re-exported here, the one API the front ends read; this package adds what is computed over them
(transcripts, diffs, pairs, rates, sorting) and holds no SQL. Filtering, sorting and paging of the task
list happen in SQL: a run of 250,000 tasks opens as fast as one of 20. Statistics come from the store's
views (``run_metrics``, ``task_stats``), never recomputed here. Comparing two runs (``triage.compare``) needs
polars and the statistics: it is imported where it is used, so opening the TUI does not wait on them.
"""

from workbench.analysis.triage.attempts import (
    Block,
    attempts_markdown,
    blocks_text,
    call_line,
    conversation,
    counterpart,
    default_pair,
    scoring_difference,
    transcript,
    turns,
)
from workbench.analysis.triage.diff import DiffRow, Span, WordDiff, turn_diff, word_diff
from workbench.analysis.triage.live import RateMeter, average_rates
from workbench.analysis.triage.runs import RUN_SORTS, sort_filter_runs
from workbench.store.queries.sql import SqlResult, named_queries, one_line, run_sql  # re-exported: part of triage's API
from workbench.store.queries.triage_attempts import Attempt, TaskDetail, attempts, task_detail
from workbench.store.queries.triage_live import FailureEvent, LiveSnapshot, ShardProgress, live_snapshot
from workbench.store.queries.triage_runs import RunHeader, RunRow, run_row, runs_table
from workbench.store.queries.triage_tasks import (
    BUCKETS,
    TASK_SORTS,
    RunOverview,
    TaskFacets,
    TaskFilter,
    TaskList,
    TaskPage,
    TaskRow,
    questions_by_task_id,
    run_overview,
    task_facets,
    task_list,
    task_page,
    task_questions,
)

__all__ = [
    "BUCKETS",
    "RUN_SORTS",
    "TASK_SORTS",
    "Attempt",
    "Block",
    "DiffRow",
    "FailureEvent",
    "LiveSnapshot",
    "RateMeter",
    "RunHeader",
    "RunOverview",
    "RunRow",
    "ShardProgress",
    "Span",
    "SqlResult",
    "TaskDetail",
    "TaskFacets",
    "TaskFilter",
    "TaskList",
    "TaskPage",
    "TaskRow",
    "WordDiff",
    "attempts",
    "attempts_markdown",
    "average_rates",
    "blocks_text",
    "call_line",
    "conversation",
    "counterpart",
    "default_pair",
    "live_snapshot",
    "named_queries",
    "one_line",
    "questions_by_task_id",
    "run_overview",
    "run_row",
    "run_sql",
    "runs_table",
    "scoring_difference",
    "sort_filter_runs",
    "task_detail",
    "task_facets",
    "task_list",
    "task_page",
    "task_questions",
    "transcript",
    "turn_diff",
    "turns",
    "word_diff",
]
