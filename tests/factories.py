"""Factories shared by the test suite (importable from every test folder: ``pythonpath`` in pyproject.toml).

Two families:

- **store rows**, written through the engine's own ``ShardWriter`` as a run writes them: ``run_header``,
  ``task_rows``, ``step_row`` and ``open_shard`` (a writer that has begun its shard);
- **``RunData`` built by hand** for the analysis (statistics, compare, diagnosis): a test builds its attempt
  rows its own way, and ``run_data`` adds what every run has, the per-task counts (``task_table``).

Each takes only what a test varies; every default is a plausible value of a small run (benchmark ``b``, model
``m``, tasks ``t0, t1, ...``) so that what a test spells out is what it is about.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl

from workbench.analysis.sources import RunData
from workbench.store import ShardWriter
from workbench.store.columns import STEP_COLUMNS

# ---- store rows ------------------------------------------------------------------------------------


def run_header(run_id: str = "r", *, n_tasks: int = 3, n_repeats: int = 2, total_shards: int = 1,
               **fields: Any) -> dict[str, Any]:
    """A run's header as the engine writes it at the start of a shard; ``fields`` replace any key."""
    header: dict[str, Any] = {
        "run_id": run_id, "benchmark": "b", "model_id": "m", "model_url": "http://h/v1", "protocol": "chat_completions",
        "identity_hash": "ab" * 32, "identity": {"benchmark": "b"}, "config": {}, "n_tasks": n_tasks,
        "n_repeats": n_repeats, "problem_start": 0, "problem_end": n_tasks, "total_shards": total_shards,
        "created_at": time.time(), "nel_version": "test",
    }
    header.update(fields)
    return header


def task_rows(run_id: str, indices: int | Iterable[int], **columns: Any) -> list[dict[str, Any]]:
    """The ``tasks`` rows of problems ``indices`` (``range(n)`` for an int): task ``t<i>``, prompt ``p<i>``,
    expected answer ``"1"``, no metadata, unless ``columns`` says otherwise (a value, or a function of the
    index)."""
    rows = []
    for i in range(indices) if isinstance(indices, int) else indices:
        row: dict[str, Any] = {"run_id": run_id, "task_idx": i, "task_id": f"t{i}", "benchmark": "b",
                               "prompt": f"p{i}", "expected_answer": "1", "metadata": None}
        row.update({k: v(i) if callable(v) else v for k, v in columns.items()})
        rows.append(row)
    return rows


def step_row(run_id: str, task_idx: int, repeat: int, **columns: Any) -> dict[str, Any]:
    """One ``steps`` row: every column of the schema contract, null unless given; task ``t<idx>`` of shard 0,
    started now, unless ``columns`` says otherwise."""
    row: dict[str, Any] = dict.fromkeys(STEP_COLUMNS)
    row.update(run_id=run_id, task_idx=task_idx, repeat=repeat, task_id=f"t{task_idx}", shard_idx=0,
               started_at=time.time())
    row.update(columns)
    return row


def open_shard(store: Path, header: dict[str, Any], *, shard: int = 0, tasks: list[dict[str, Any]] | None = None,
               roll_every: int | None = None, **shard_fields: Any) -> ShardWriter:
    """A ``ShardWriter`` for shard ``shard`` of ``header``'s run that has begun: the shard covers the header's
    problems (``shard_fields`` replace ``problem_start``, ``problem_end``, ... or add ``retries``), and its
    tasks are ``tasks`` (by default ``task_rows`` of the header's problems)."""
    run_id = header["run_id"]
    writer = ShardWriter(store, run_id, shard) if roll_every is None else \
        ShardWriter(store, run_id, shard, roll_every=roll_every)
    info: dict[str, Any] = {"shard_idx": shard, "total_shards": header["total_shards"],
                            "problem_start": header["problem_start"], "problem_end": header["problem_end"]}
    info.update(shard_fields)
    if tasks is None:
        tasks = task_rows(run_id, range(info["problem_start"], info["problem_end"]))
    writer.begin(header, info, tasks)
    return writer


# ---- RunData by hand -------------------------------------------------------------------------------

ATTEMPT_SCHEMA: dict[str, Any] = {
    "task_id": pl.Utf8, "task_idx": pl.Int64, "repeat": pl.Int64, "reward": pl.Float64, "passed": pl.Boolean,
    "error": pl.Boolean, "failure_category": pl.Utf8, "latency_ms": pl.Float64, "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64, "total_tokens": pl.Int64, "response_chars": pl.Int64,
}
"""The columns of ``RunData.attempts`` (``load_run`` adds the metadata columns after them)."""


def task_table(tasks: pl.DataFrame, attempts: pl.DataFrame, extra: Iterable[str] = ()) -> pl.DataFrame:
    """``RunData.tasks``: every listed task (``task_id``, ``task_idx`` and the ``extra`` columns of ``tasks``)
    with its counts over ``attempts`` (``n``, ``n_pass``, ``reward_sum``, ``n_error``; 0 for a task with no
    attempt), sorted by ``task_idx``."""
    counts = attempts.group_by("task_idx").agg(
        pl.len().cast(pl.Int64).alias("n"), pl.col("passed").sum().cast(pl.Int64).alias("n_pass"),
        pl.col("reward").sum().alias("reward_sum"), pl.col("error").sum().cast(pl.Int64).alias("n_error"))
    return tasks.join(counts, on="task_idx", how="left").select(
        "task_id", "task_idx", pl.col("n").fill_null(0), pl.col("n_pass").fill_null(0),
        pl.col("reward_sum").fill_null(0.0), pl.col("n_error").fill_null(0), *extra).sort("task_idx")


def run_data(attempts: pl.DataFrame, tasks: pl.DataFrame, *, n_repeats: int, run_id: str = "r",
             extra: Iterable[str] = (), source: str = "test", benchmark: str = "b") -> RunData:
    """A run of one metric (``reward``) from its attempts and the list of its tasks (see ``task_table``)."""
    return RunData(run_id=run_id, benchmark=benchmark, model_id="m", metric="reward", metrics=("reward",),
                   n_repeats=n_repeats, attempts=attempts, tasks=task_table(tasks, attempts, extra), source=source)
