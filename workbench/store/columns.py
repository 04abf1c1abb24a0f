"""The columns of ``steps`` as the writer sees them (must match ``store/schema.sql``).

Journals hold one JSON object per step; JSON-typed columns are pre-serialised
strings and ``started_at`` is epoch seconds, so a journal reads back with one
``read_json`` call and an explicit column map (no type sniffing).
"""

from __future__ import annotations

STEP_COLUMNS: dict[str, str] = {
    "run_id": "VARCHAR",
    "task_idx": "INTEGER",
    "repeat": "INTEGER",
    "task_id": "VARCHAR",
    "shard_idx": "INTEGER",
    "started_at": "TIMESTAMP",
    "prompt": "VARCHAR",
    "messages": "JSON",
    "response": "VARCHAR",
    "reasoning": "VARCHAR",
    "finish_reason": "VARCHAR",
    "tool_calls": "JSON",
    "reward": "DOUBLE",
    "passed": "BOOLEAN",
    "expected_answer": "VARCHAR",
    "extracted_answer": "VARCHAR",
    "scoring_method": "VARCHAR",
    "scoring_details": "JSON",
    "failure_category": "VARCHAR",
    "error": "VARCHAR",
    "http_status": "INTEGER",
    "n_retries": "INTEGER",
    "prompt_tokens": "INTEGER",
    "completion_tokens": "INTEGER",
    "total_tokens": "INTEGER",
    "reasoning_tokens": "INTEGER",
    "latency_ms": "DOUBLE",
    "seed_ms": "DOUBLE",
    "model_ms": "DOUBLE",
    "verify_ms": "DOUBLE",
    "request_hash": "VARCHAR",
    "request_seed": "BIGINT",
    "response_id": "VARCHAR",
    "metadata": "JSON",
    "scores": "JSON",
    "turns": "JSON",
    "attempt": "INTEGER",
}

STEP_KEY = ("run_id", "task_idx", "repeat")

RUN_COLUMNS = (
    "run_id", "benchmark", "model_id", "model_url", "protocol", "identity_hash", "identity", "config", "n_tasks",
    "n_repeats", "problem_start", "problem_end", "total_shards", "status", "created_at", "finished_at", "nel_version",
)
SHARD_COLUMNS = (
    "run_id", "shard_idx", "total_shards", "problem_start", "problem_end", "status", "started_at", "finished_at",
    "n_steps", "host", "pid", "error",
)


JOURNAL_SENTINEL = b',"_complete":true}\n'
"""Ends every journal line; read_json fills a truncated line's missing keys with NULL,
so only lines that reached the sentinel count."""


def sql_string(value: object) -> str:
    """A SQL string literal (paths may contain quotes)."""
    return "'" + str(value).replace("'", "''") + "'"


def journal_read_sql(files_sql: str) -> str:
    """SELECT over journal files giving rows typed exactly like ``steps``.

    A line cut short by a crash is skipped, never half-read: unparseable lines are
    ignored and parseable prefixes lack the ``_complete`` sentinel.
    """
    json_types = {name: ("DOUBLE" if t == "TIMESTAMP" else "VARCHAR" if t == "JSON" else t)
                  for name, t in STEP_COLUMNS.items()}
    columns = ", ".join(f"'{name}': '{t}'" for name, t in json_types.items()) + ", '_complete': 'BOOLEAN'"
    select = ", ".join(
        f"make_timestamp(CAST({n} * 1000000 AS BIGINT)) AS {n}" if t == "TIMESTAMP"
        else f"CAST({n} AS JSON) AS {n}" if t == "JSON" else n
        for n, t in STEP_COLUMNS.items()
    )
    return (
        f"SELECT {select} FROM read_json({files_sql}, format = 'newline_delimited', "
        f"columns = {{{columns}}}, ignore_errors = true) WHERE _complete"
    )
