"""Factories shared by the test suite (importable from every test folder: ``pythonpath`` in pyproject.toml).

Two families:

- **store rows**, written through the engine's own ``ShardWriter`` as a run writes them: ``run_header``,
  ``task_rows``, ``step_row`` and ``open_shard`` (a writer that has begun its shard);
- **``RunData`` built by hand** for the analysis (statistics, compare, diagnosis): ``run_from_rewards`` (the
  rewards of each task's attempts) and ``run_from_outcomes`` (each attempt passed, wrong, failed in a category
  or timed out, with the costs of each); under both, ``run_data`` adds what every run has, the per-task counts
  (``task_table``), to attempt rows a test builds its own way.

Each takes only what a test varies; every default is a plausible value of a small run (benchmark ``b``, model
``m``, tasks ``t0, t1, ...``) so that what a test spells out is what it is about.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
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


def _run(rows: list[dict[str, Any]], listed: list[dict[str, Any]], meta: Sequence[str], *, n_repeats: int,
         run_id: str, benchmark: str, source: str | None) -> RunData:
    """``run_data`` of attempt ``rows`` and ``listed`` tasks that carry the Utf8 metadata columns ``meta``."""
    strings = dict.fromkeys(meta, pl.Utf8)
    attempts = pl.DataFrame(rows, schema={**ATTEMPT_SCHEMA, **strings}).sort("task_idx", "repeat")
    tasks = pl.DataFrame(listed, schema={"task_id": pl.Utf8, "task_idx": pl.Int64, **strings})
    return run_data(attempts, tasks, n_repeats=n_repeats, run_id=run_id, extra=meta, benchmark=benchmark,
                    source=f"test:{run_id}" if source is None else source)


def run_from_rewards(rewards: Mapping[str, Sequence[float]], *, run_id: str = "r",
                     idx: Mapping[str, int] | None = None, errors: Mapping[str, Sequence[bool]] | None = None,
                     category: Mapping[str, str | None] | None = None,
                     metadata: Mapping[str, Mapping[str, str | None]] | None = None, latency: float = 1.0,
                     prompt_tokens: int = 1, completion_tokens: int = 1, response_chars: int = 3,
                     unattempted: int = 0, n_repeats: int | None = None, benchmark: str = "b",
                     source: str | None = None) -> RunData:
    """A run from the rewards of each task's attempts, ``{task_id: [reward of repeat 0, 1, ...]}`` (an empty
    list: a listed task with no attempt). An attempt passes when its reward is >= 1.

    - ``idx``: each task's ``task_idx`` (default: its position in ``rewards``);
    - ``errors``: per task, which attempts were transport errors (a ``timeout``, reward 0, not passed);
    - ``category`` and ``metadata`` (column -> task -> value): metadata columns of both frames, ``category``
      first; a task missing from a mapping has a null value;
    - every attempt has the same cost: ``latency`` ms, ``prompt_tokens`` + ``completion_tokens`` tokens,
      ``response_chars`` characters;
    - ``unattempted``: that many more listed tasks, ``never-<i>`` at index ``1000 + i``, with no attempt;
    - ``n_repeats``: default the most attempts of any task; ``source``: default ``test:<run_id>``.
    """
    columns = {**({"category": category} if category is not None else {}), **(metadata or {})}
    positions = idx or {t: i for i, t in enumerate(rewards)}
    rows, listed = [], []
    for task, values in rewards.items():
        meta = {c: by_task.get(task) for c, by_task in columns.items()}
        listed.append({"task_id": task, "task_idx": positions[task], **meta})
        failed = (errors or {}).get(task, [False] * len(values))
        for rep, value in enumerate(values):
            err = bool(failed[rep])
            rows.append({"task_id": task, "task_idx": positions[task], "repeat": rep,
                         "reward": 0.0 if err else float(value), "passed": not err and value >= 1.0, "error": err,
                         "failure_category": "timeout" if err else None, "latency_ms": latency,
                         "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                         "total_tokens": prompt_tokens + completion_tokens, "response_chars": response_chars, **meta})
    listed += [{"task_id": f"never-{i}", "task_idx": 1000 + i} for i in range(unattempted)]
    repeats = n_repeats if n_repeats is not None else max((len(v) for v in rewards.values()), default=0)
    return _run(rows, listed, tuple(columns), n_repeats=repeats, run_id=run_id, benchmark=benchmark, source=source)


PASS, WRONG, FORMAT_ERROR, TIMEOUT = "pass", "wrong", "format_error", "timeout"
"""Attempt outcomes for ``run_from_outcomes`` (any other string is a failure category too)."""


def run_from_outcomes(tasks: Sequence[Mapping[str, Any]], n_repeats: int, *, run_id: str = "r",
                      meta: Sequence[str] = (), benchmark: str = "b", source: str | None = None) -> RunData:
    """A binary run from each task's attempt outcomes: one dict per task with ``outcomes`` (``PASS``,
    ``WRONG``, ``TIMEOUT`` (a transport error) or another failure category such as ``FORMAT_ERROR``, one per
    attempt in repeat order; an empty list: a task with no attempt), optional ``id`` (default ``t<position>``),
    ``idx`` (default the position), ``tokens`` (one per attempt) and the values of the metadata columns ``meta``
    (null when absent).

    Failing costs more than passing, as the cost contrast expects: ``total_tokens`` 100 for a pass and 300
    for a failure unless ``tokens`` says otherwise, ``response_chars`` 10 against 40, 10 ms each; a timeout
    takes 5 s and has no tokens or response. Prompt and completion tokens are not reported (null).
    """
    rows, listed = [], []
    for pos, t in enumerate(tasks):
        tid, idx = t.get("id", f"t{pos}"), t.get("idx", pos)
        values = {k: t.get(k) for k in meta}
        listed.append({"task_id": tid, "task_idx": idx, **values})
        for rep, outcome in enumerate(t["outcomes"]):
            passed, error = outcome == PASS, outcome == TIMEOUT
            tokens = t["tokens"][rep] if "tokens" in t else 100 if passed else 300
            rows.append({"task_id": tid, "task_idx": idx, "repeat": rep, "reward": float(passed), "passed": passed,
                         "error": error, "failure_category": None if outcome in (PASS, WRONG) else outcome,
                         "latency_ms": 5000.0 if error else 10.0, "prompt_tokens": None, "completion_tokens": None,
                         "total_tokens": None if error else tokens,
                         "response_chars": None if error else (10 if passed else 40), **values})
    return _run(rows, listed, tuple(meta), n_repeats=n_repeats, run_id=run_id, benchmark=benchmark, source=source)
