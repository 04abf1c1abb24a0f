"""One run's attempts and tasks as polars frames, read by DuckDB from a store or from an exported directory.

One scan of the run's steps; metadata JSON is unpacked into struct columns there and handed over as Arrow: no
Python object is built per step. ``workbench.analysis.sources`` names the metadata columns, merges the frames
and builds ``RunData`` from what these return.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from workbench.errors import UsageError
from workbench.store.columns import sql_string
from workbench.store.duckdb_api import polars_frame
from workbench.store.queries.exported import MAX_LINE
from workbench.store.reader import Store

COST_COLUMNS = ("latency_ms", "prompt_tokens", "completion_tokens", "total_tokens")


@dataclass(frozen=True, slots=True)
class StepFrames:
    """What DuckDB hands over for one run.

    ``attempts``: one row per step, sorted by ``task_idx, repeat`` (the attempt columns, ``sd_category`` — the
    scorer's ``scoring_details.category`` — and ``nel_mh``, a hash of the step's metadata). ``metas``: one row
    per distinct (``task_idx``, ``nel_mh``), ``nel_hit`` true, and a ``meta`` struct of the metadata keys.
    ``listed``: every task of the run (``task_id``, ``task_idx``, ``meta``). ``keys``: the metadata keys, in the
    order of the ``meta`` struct's fields (no ``meta`` column when there are none).
    """

    attempts: pl.DataFrame
    metas: pl.DataFrame
    listed: pl.DataFrame
    keys: list[str]


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A run's header (``runs``) and the frames of its chosen metric."""

    benchmark: str
    model_id: str | None
    n_repeats: int
    primary: str
    metrics: list[str]
    metric: str
    frames: StepFrames
    status: str | None = None
    """The run's status (``running`` while a shard still writes it)."""


# ---- from the store --------------------------------------------------------------------------------
_STORE_SRC = """
SELECT s.task_id, s.task_idx, s.repeat, {reward} AS reward, {passed} AS passed, s.failure_category, s.latency_ms,
       s.prompt_tokens, s.completion_tokens, s.total_tokens, length(s.response) AS response_chars, s.metadata,
       s.scoring_details ->> 'category' AS sd_category
FROM steps s {join}
WHERE s.run_id = $run
"""
_STORE_METRIC_JOIN = """
JOIN (SELECT task_idx, repeat, reward, passed FROM step_scores WHERE run_id = $run AND metric = $metric) m
  ON m.task_idx = s.task_idx AND m.repeat = s.repeat
"""
# run_task_list (views.sql), not run_tasks: each shard lists only its own tasks, so the tasks of a shard that
# never ran are in the run's problem range but not in run_tasks. They are tasks all the same (no id, never
# attempted), as the task_stats view counts them.
_STORE_TASKS = """
SELECT rt.task_id, rt.task_idx, t.metadata FROM run_task_list rt LEFT JOIN tasks t ON t.task_id = rt.task_id
WHERE rt.run_id = $run
"""


def read_store_run(store: Store, run_id: str, choose: Callable[[str, list[str]], str],
                   error_categories: Iterable[str]) -> StoredRun:
    """Run ``run_id`` of ``store``; ``choose(primary, metrics)`` picks the metric whose values fill
    ``reward``/``passed`` (it may raise). The queries run on one snapshot of the store, and the whole read is
    retried on a fresh one if a live journal is rolled into a segment meanwhile.

    Raises:
        UsageError: no such run.
    """

    def fetch(con: duckdb.DuckDBPyConnection) -> StoredRun:
        row = con.execute("SELECT benchmark, model_id, n_repeats, config, status FROM runs WHERE run_id = ?",
                          [run_id]).fetchone()
        if row is None:
            raise UsageError(f"{store.path}: no run {run_id!r} in this store")
        benchmark, model_id, n_repeats, config, status = row
        conf = _json_obj(config)
        primary = str(conf.get("primary_metric") or "reward")
        metrics = [str(m) for m in conf.get("metrics") or []] or [r[0] for r in con.execute(
            "SELECT DISTINCT metric FROM step_scores WHERE run_id = ? ORDER BY metric", [run_id]).fetchall()]
        chosen = choose(primary, metrics)
        params: dict[str, Any] = {"run": run_id}
        if chosen == primary:
            src = _STORE_SRC.format(reward="s.reward", passed="s.passed", join="")
        else:
            src = _STORE_SRC.format(reward="m.reward", passed="coalesce(m.passed, m.reward >= 1)",
                                    join=_STORE_METRIC_JOIN)
            params["metric"] = chosen
        frames = _frames(con, src, params, _STORE_TASKS, {"run": run_id}, error_categories, merge_tasks=True,
                         materialize=False)
        return StoredRun(benchmark=str(benchmark), model_id=model_id, n_repeats=int(n_repeats), primary=primary,
                         metrics=metrics, metric=chosen, frames=frames, status=status)

    return store.on_connection(fetch)


# ---- from an exported directory --------------------------------------------------------------------
_RESULTS_COLUMNS = ("{problem_idx: 'BIGINT', repeat: 'BIGINT', task_id: 'VARCHAR', reward: 'DOUBLE', "
                    "passed: 'BOOLEAN', failure_category: 'VARCHAR', model_response: 'VARCHAR', metadata: 'JSON', "
                    "scoring_details: 'JSON', scores: 'JSON'}")
_TRAJ_COLUMNS = ("{problem_idx: 'BIGINT', repeat: 'BIGINT', latency: 'STRUCT(latency_ms DOUBLE)', "
                 "tokens: 'STRUCT(prompt_tokens BIGINT, completion_tokens BIGINT, total_tokens BIGINT)'}")


def read_exported_run(results: Path, trajectories: Path | None, *, metric: str | None,
                      problem_range: tuple[int, int] | None, error_categories: Iterable[str]) -> StepFrames:
    """The frames of an exported run: ``results.jsonl``, with latency and tokens from ``trajectories`` (null
    without it). ``metric`` reads that entry of each line's ``scores`` (``None``: the primary, the line's own
    ``reward``/``passed``); ``problem_range`` (start, end) lists the run's tasks.

    Raises:
        UsageError: the files cannot be read.
    """
    params: dict[str, Any] = {}
    if metric is None:
        reward, passed, where = "r.reward", "r.passed", ""
    else:
        score = "struct_extract(json_transform(r.scores, $shape), $metric)"
        reward, passed = f"struct_extract({score}, 'reward')", f"struct_extract({score}, 'passed')"
        passed = f"coalesce({passed}, {reward} >= 1)"
        where = f"WHERE {reward} IS NOT NULL"
        params.update(shape=json.dumps({metric: {"reward": "DOUBLE", "passed": "BOOLEAN"}}), metric=metric)
    if trajectories is not None:  # latency and tokens live in the trajectories
        cost = ["x.latency.latency_ms", "x.tokens.prompt_tokens", "x.tokens.completion_tokens",
                "x.tokens.total_tokens"]
        join = (f"LEFT JOIN read_json({sql_string(trajectories)}, format = 'newline_delimited', "
                f"columns = {_TRAJ_COLUMNS}, maximum_object_size = {MAX_LINE}) x "
                "ON x.problem_idx = r.problem_idx AND x.repeat = r.repeat")
    else:
        cost = ["NULL::DOUBLE", "NULL::BIGINT", "NULL::BIGINT", "NULL::BIGINT"]
        join = ""
    cost_sql = ", ".join(f"{expr} AS {name}" for expr, name in zip(cost, COST_COLUMNS, strict=True))
    src = f"""
        SELECT coalesce(r.task_id, r.problem_idx::VARCHAR) AS task_id, r.problem_idx AS task_idx, r.repeat,
               {reward} AS reward, {passed} AS passed, r.failure_category,
               {cost_sql}, length(r.model_response) AS response_chars,
               r.metadata, r.scoring_details ->> 'category' AS sd_category
        FROM read_json({sql_string(results)}, format = 'newline_delimited', columns = {_RESULTS_COLUMNS},
                       maximum_object_size = {MAX_LINE}) r {join}
        {where}
    """
    if problem_range is not None:
        start, end = problem_range
        tasks_sql = (f"SELECT NULL::VARCHAR AS task_id, range AS task_idx, NULL::JSON AS metadata "
                     f"FROM range({int(start)}, {int(end)})")
    else:
        tasks_sql = "SELECT NULL::VARCHAR AS task_id, NULL::BIGINT AS task_idx, NULL::JSON AS metadata LIMIT 0"
    con = duckdb.connect()
    try:
        return _frames(con, src, params, tasks_sql, {}, error_categories, merge_tasks=False, materialize=True)
    except duckdb.Error as exc:
        raise UsageError(f"{results}: cannot read it ({str(exc).splitlines()[0]})") from None
    finally:
        con.close()


# ---- shared ----------------------------------------------------------------------------------------
def _frames(
    con: duckdb.DuckDBPyConnection,
    src: str,
    src_params: dict[str, Any],
    tasks_sql: str,
    tasks_params: dict[str, Any],
    error_categories: Iterable[str],
    *,
    merge_tasks: bool,
    materialize: bool,
) -> StepFrames:
    """The frames from ``src`` (the run's steps: reward, passed, metadata JSON, ...) and ``tasks_sql`` (every
    task of the run: task_id, task_idx, metadata JSON).

    Metadata JSON is unpacked once per task, not per step: the steps carry a hash of theirs; each distinct
    (task, metadata) pair is merged over the task's own metadata (``merge_tasks``) and unpacked into a struct by
    DuckDB. ``materialize`` reads ``src`` once into a temporary table (a results file is parsed once); without
    it ``src`` is scanned twice, and a step a live run appended in between takes its task's metadata.
    """
    errors_sql = ", ".join(sql_string(c) for c in sorted(error_categories))
    if materialize:
        con.execute(f"CREATE OR REPLACE TEMP TABLE nel_src AS {src}", src_params)
        src, src_params = "SELECT * FROM nel_src", {}
    attempts = polars_frame(con, f"""
        SELECT task_id::VARCHAR AS task_id, task_idx::BIGINT AS task_idx, repeat::BIGINT AS repeat,
               reward::DOUBLE AS reward, passed::BOOLEAN AS passed,
               coalesce(failure_category IN ({errors_sql}), false) AS error,
               failure_category::VARCHAR AS failure_category,
               latency_ms::DOUBLE AS latency_ms, prompt_tokens::BIGINT AS prompt_tokens,
               completion_tokens::BIGINT AS completion_tokens, total_tokens::BIGINT AS total_tokens,
               response_chars::BIGINT AS response_chars, sd_category::VARCHAR AS sd_category, hash(metadata) AS nel_mh
        FROM ({src}) ORDER BY task_idx, repeat
    """, src_params)
    merged = ("CASE WHEN t.metadata IS NULL OR m.metadata = t.metadata THEN m.metadata WHEN m.metadata IS NULL "
              "THEN t.metadata ELSE json_merge_patch(t.metadata, m.metadata) END" if merge_tasks else "m.metadata")
    base = "LEFT JOIN tasks t ON t.task_id = m.task_id" if merge_tasks else ""
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE nel_meta AS
        SELECT m.task_idx::BIGINT AS task_idx, m.nel_mh, {merged} AS metadata
        FROM (SELECT task_idx, any_value(task_id) AS task_id, hash(metadata) AS nel_mh, any_value(metadata) AS metadata
              FROM ({src}) GROUP BY task_idx, nel_mh) m {base}
    """, src_params)
    keys = [r[0] for r in con.execute(
        "SELECT DISTINCT k FROM (SELECT unnest(json_keys(metadata)) AS k FROM nel_meta "
        f"WHERE json_type(metadata) = 'OBJECT' UNION ALL SELECT unnest(json_keys(metadata)) FROM ({tasks_sql}) "
        "WHERE json_type(metadata) = 'OBJECT') ORDER BY k", tasks_params).fetchall()]
    meta = ", json_transform(coalesce(metadata, '{}'), $shape) AS meta" if keys else ""
    shape = {"shape": json.dumps(dict.fromkeys(keys, "VARCHAR"))} if keys else {}
    metas = polars_frame(con, f"SELECT task_idx, nel_mh, true AS nel_hit{meta} FROM nel_meta", shape)
    listed = polars_frame(con, f"SELECT task_id::VARCHAR AS task_id, task_idx::BIGINT AS task_idx{meta} "
                          f"FROM ({tasks_sql}) ORDER BY task_idx", {**tasks_params, **shape})
    con.execute("DROP TABLE nel_meta" + ("; DROP TABLE nel_src" if materialize else ""))
    return StepFrames(attempts=attempts, metas=metas, listed=listed, keys=keys)


def _json_obj(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str | bytes):
        value = json.loads(value)
    return dict(value) if isinstance(value, dict) else {}
