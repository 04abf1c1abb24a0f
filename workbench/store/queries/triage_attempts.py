"""One task's attempts and its statistics, read from a store: the rows behind the task and diff screens of
``nel tui`` (``workbench.analysis.triage`` re-exports them and builds transcripts and diffs from them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.store.queries.rows import fetch_dicts, fetch_many, parse_json
from workbench.store.queries.triage_tasks import BUCKET_SQL
from workbench.store.reader import Store


@dataclass(frozen=True, slots=True)
class Attempt:
    """One step, with its JSON columns parsed."""

    run_id: str
    task_idx: int
    repeat: int
    task_id: str
    passed: bool
    reward: float
    expected_answer: str | None
    extracted_answer: str | None
    failure_category: str | None
    error: str | None
    scoring_method: str | None
    scoring_details: Any
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    latency_ms: float | None
    finish_reason: str | None
    http_status: int | None
    n_retries: int | None
    messages: list[Any]
    response: str | None
    reasoning: str | None
    tool_calls: Any
    scores: Any
    turns: Any = None
    """An agent's turns (the tool-calling solver): each tool call's name, exit code, error and latency."""

    @property
    def outcome(self) -> str:
        """``pass``, ``wrong`` (answered, not right) or the failure category."""
        return "pass" if self.passed else self.failure_category or "wrong"

    @property
    def label(self) -> str:
        return f"{self.run_id} #{self.task_idx} attempt {self.repeat} ({self.outcome})"


@dataclass(frozen=True, slots=True)
class TaskDetail:
    run_id: str
    task_idx: int
    task_id: str | None  # None for a task of a shard that never ran
    prompt: str | None
    expected_answer: str | None
    category: str | None
    n: int
    n_pass: int
    wilson_low: float | None
    wilson_high: float | None
    bucket: str
    attempts: list[Attempt]


_ATTEMPT_COLUMNS = ", ".join(Attempt.__dataclass_fields__)
_JSON_FIELDS = ("scoring_details", "messages", "tool_calls", "scores", "turns")


def _attempt(row: dict[str, Any]) -> Attempt:
    for name in _JSON_FIELDS:
        row[name] = parse_json(row[name])
    if not isinstance(row["messages"], list):
        row["messages"] = [] if row["messages"] is None else [row["messages"]]
    return Attempt(**row)


def attempts(store: Store, run_id: str, *, task_idx: int | None = None, task_id: str | None = None) -> list[Attempt]:
    """Every attempt of one task of a run (by index, or by content hash across runs), by repeat."""
    key, value = ("task_idx", task_idx) if task_id is None else ("task_id", task_id)
    query = f"SELECT {_ATTEMPT_COLUMNS} FROM steps WHERE run_id = ? AND {key} = ? ORDER BY repeat"
    return [_attempt(row) for row in fetch_dicts(store, query, [run_id, value])]


def task_detail(store: Store, run_id: str, task_idx: int) -> TaskDetail | None:
    """A task's statistics, prompt and attempts; None when the run or the task is not in the store."""
    query = f"""
        SELECT ts.task_id, tk.prompt, tk.expected_answer, tk.metadata ->> 'category' AS category, ts.n, ts.n_pass,
               ts.wilson_low, ts.wilson_high, {BUCKET_SQL} AS bucket
        FROM task_stats ts LEFT JOIN tasks tk USING (task_id) WHERE ts.run_id = ? AND ts.task_idx = ?"""
    steps = f"SELECT {_ATTEMPT_COLUMNS} FROM steps WHERE run_id = ? AND task_idx = ? ORDER BY repeat"
    rows, steps_rows = fetch_many(store, [(query, [run_id, task_idx]), (steps, [run_id, task_idx])])
    if not rows:
        return None
    return TaskDetail(run_id=run_id, task_idx=task_idx, **rows[0], attempts=[_attempt(r) for r in steps_rows])
