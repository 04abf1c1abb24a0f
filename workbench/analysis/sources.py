"""One run's attempts as polars frames, from the store or from an exported results directory.

Every statistic (``nel eval stats``, ``nel compare``, ``nel gate``, notebooks) starts from ``RunData``, so a
run read from the store and the same run read from its export give identical numbers. The work is done in
DuckDB (one scan of the run's steps; metadata JSON is unpacked into columns there) and handed over as Arrow:
no Python object is built per step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from workbench.errors import UsageError
from workbench.model.failures import ERROR_CATEGORIES
from workbench.store import Store, open_store, resolve_store_path, segments_root
from workbench.store.columns import sql_string
from workbench.store.duckdb_api import polars_frame

ATTEMPT_COLUMNS = (
    "task_id", "task_idx", "repeat", "reward", "passed", "error", "failure_category", "latency_ms",
    "prompt_tokens", "completion_tokens", "total_tokens", "response_chars",
)
TASK_COLUMNS = ("task_id", "task_idx", "n", "n_pass", "reward_sum", "n_error")
_RESERVED = frozenset(ATTEMPT_COLUMNS) | frozenset(TASK_COLUMNS)
_ERRORS_SQL = ", ".join(sql_string(c) for c in sorted(ERROR_CATEGORIES))
_COST_COLUMNS = ("latency_ms", "prompt_tokens", "completion_tokens", "total_tokens")
_MAX_LINE = 1 << 28  # a trajectory line holds a whole transcript


@dataclass(frozen=True, slots=True)
class RunData:
    """One run, one metric: every attempt, and every task of the run (those with no attempt included).

    ``attempts`` is sorted by ``task_idx, repeat``; ``tasks`` by ``task_idx``. Metadata keys (the task's
    metadata, overridden by the step's) become Utf8 columns of both frames (``metadata_columns``); a key that
    would clash with a fixed column is renamed ``meta_<key>``; ``category`` falls back on the scorer's
    ``scoring_details.category``, as NeMo Evaluator reads it. ``response_chars`` is the length of the final
    response in characters (null when none came back), for the cost of passing against failing attempts. From
    an export, ``latency_ms`` and the token counts come from ``trajectories.jsonl`` (null without it), and a
    task with no attempt has a null ``task_id`` (its content hash is not exported). From the store, ``tasks``
    holds every problem index of the run's range: a task of a shard that never ran is there, unattempted,
    with a null ``task_id``.
    """

    run_id: str
    benchmark: str
    model_id: str | None
    metric: str
    metrics: tuple[str, ...]
    n_repeats: int
    attempts: pl.DataFrame
    tasks: pl.DataFrame
    source: str

    @property
    def metadata_columns(self) -> tuple[str, ...]:
        """The metadata columns (slice and cluster candidates), in frame order."""
        return tuple(c for c in self.tasks.columns if c not in _RESERVED)


def load_run(source: str, *, store: Path | None = None, metric: str | None = None) -> RunData:
    """Load ``source``: a directory holding one exported ``eval-*.json`` (or that file), else a run id in ``store``.

    ``metric`` picks the metric whose values fill ``reward``/``passed`` (default: the run's primary metric).

    Raises:
        UsageError: an unknown run or metric, a directory without (or with several) bundles, no store.
    """
    path = Path(source)
    exported = path.is_file() or (path.is_dir() and any(path.glob("eval-*.json")))
    if exported or (path.is_dir() and store is None):
        return _load_export(_bundle_path(path), metric)
    # A directory with no export in it that happens to share the run's name (say, the run's own output folder
    # before export) does not hide the run in the store.
    where = "a directory with no eval-*.json" if path.is_dir() else "no such directory"
    if store is None:
        raise UsageError(f"{source}: {where}, and no store given to look up a run in")
    store_file = resolve_store_path(store)
    if not store_file.exists() and not segments_root(store_file).is_dir():
        raise UsageError(f"{source}: {where}, and no store at {store_file} to look up a run in")
    if path.is_dir() and source not in open_store(store_file).runs()["run_id"].to_list():
        raise UsageError(f"{source}: {where} (write one with `nel eval export RUN -o {source}`), and no run by "
                         f"that name in {store_file}")
    return _load_store(open_store(store_file), source, metric)


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


def _load_store(store: Store, run_id: str, metric: str | None) -> RunData:
    def fetch(con: duckdb.DuckDBPyConnection) -> RunData:
        row = con.execute("SELECT benchmark, model_id, n_repeats, config FROM runs WHERE run_id = ?",
                          [run_id]).fetchone()
        if row is None:
            raise UsageError(f"{store.path}: no run {run_id!r} in this store")
        benchmark, model_id, n_repeats, config = row
        conf = _json_obj(config)
        primary = str(conf.get("primary_metric") or "reward")
        metrics = [str(m) for m in conf.get("metrics") or []] or [r[0] for r in con.execute(
            "SELECT DISTINCT metric FROM step_scores WHERE run_id = ? ORDER BY metric", [run_id]).fetchall()]
        chosen = _choose_metric(metric, primary, metrics, f"run {run_id}")
        params: dict[str, Any] = {"run": run_id}
        if chosen == primary:
            src = _STORE_SRC.format(reward="s.reward", passed="s.passed", join="")
        else:
            src = _STORE_SRC.format(reward="m.reward", passed="coalesce(m.passed, m.reward >= 1)",
                                    join=_STORE_METRIC_JOIN)
            params["metric"] = chosen
        attempts, tasks = _frames(con, src, params, _STORE_TASKS, {"run": run_id}, merge_tasks=True,
                                  materialize=False)
        return RunData(run_id=run_id, benchmark=str(benchmark), model_id=model_id, metric=chosen,
                       metrics=_metric_list(primary, metrics), n_repeats=int(n_repeats), attempts=attempts,
                       tasks=tasks, source=f"store:{store.path}#{run_id}")

    # ``fetch`` runs its queries on the store's snapshot, and the whole load is retried on a fresh one if a live
    # journal is rolled into a segment meanwhile.
    return store.on_connection(fetch)


# ---- from an exported directory --------------------------------------------------------------------
_RESULTS_COLUMNS = ("{problem_idx: 'BIGINT', repeat: 'BIGINT', task_id: 'VARCHAR', reward: 'DOUBLE', "
                    "passed: 'BOOLEAN', failure_category: 'VARCHAR', model_response: 'VARCHAR', metadata: 'JSON', "
                    "scoring_details: 'JSON', scores: 'JSON'}")
_TRAJ_COLUMNS = ("{problem_idx: 'BIGINT', repeat: 'BIGINT', latency: 'STRUCT(latency_ms DOUBLE)', "
                 "tokens: 'STRUCT(prompt_tokens BIGINT, completion_tokens BIGINT, total_tokens BIGINT)'}")


def _bundle_path(path: Path) -> Path:
    if path.is_file():
        return path
    found = sorted(path.glob("eval-*.json"))
    if not found:
        raise UsageError(f"{path}: no eval-*.json here (write one with `nel eval export RUN -o {path}`)")
    if len(found) > 1:
        raise UsageError(f"{path}: {len(found)} eval-*.json files here; name one of them")
    return found[0]


def _load_export(bundle_file: Path, metric: str | None) -> RunData:
    from workbench.analysis.artifacts import RESULTS, TRAJECTORIES, read_bundle

    bundle = read_bundle(bundle_file)
    folder = bundle_file.parent
    results = folder / RESULTS
    if not results.is_file():
        raise UsageError(f"{folder}: no {RESULTS} beside {bundle_file.name}")
    run_id = str(bundle["run_id"])
    primary = str(bundle.get("primary_metric") or "reward")
    metrics = [str(m) for m in bundle.get("metrics") or []]
    chosen = _choose_metric(metric, primary, metrics, f"run {run_id}")
    params: dict[str, Any] = {}
    if chosen == primary:
        reward, passed, where = "r.reward", "r.passed", ""
    else:
        score = "struct_extract(json_transform(r.scores, $shape), $metric)"
        reward, passed = f"struct_extract({score}, 'reward')", f"struct_extract({score}, 'passed')"
        passed = f"coalesce({passed}, {reward} >= 1)"
        where = f"WHERE {reward} IS NOT NULL"
        params.update(shape=json.dumps({chosen: {"reward": "DOUBLE", "passed": "BOOLEAN"}}), metric=chosen)
    traj = folder / TRAJECTORIES
    if traj.is_file():  # latency and tokens live in the trajectories
        cost = ["x.latency.latency_ms", "x.tokens.prompt_tokens", "x.tokens.completion_tokens",
                "x.tokens.total_tokens"]
        join = (f"LEFT JOIN read_json({sql_string(traj)}, format = 'newline_delimited', columns = {_TRAJ_COLUMNS}, "
                f"maximum_object_size = {_MAX_LINE}) x ON x.problem_idx = r.problem_idx AND x.repeat = r.repeat")
    else:
        cost = ["NULL::DOUBLE", "NULL::BIGINT", "NULL::BIGINT", "NULL::BIGINT"]
        join = ""
    cost_sql = ", ".join(f"{expr} AS {name}" for expr, name in zip(cost, _COST_COLUMNS, strict=True))
    src = f"""
        SELECT coalesce(r.task_id, r.problem_idx::VARCHAR) AS task_id, r.problem_idx AS task_idx, r.repeat,
               {reward} AS reward, {passed} AS passed, r.failure_category,
               {cost_sql}, length(r.model_response) AS response_chars,
               r.metadata, r.scoring_details ->> 'category' AS sd_category
        FROM read_json({sql_string(results)}, format = 'newline_delimited', columns = {_RESULTS_COLUMNS},
                       maximum_object_size = {_MAX_LINE}) r {join}
        {where}
    """
    config = bundle.get("config") or {}
    start, end = config.get("problem_start"), config.get("problem_end")
    if isinstance(start, int) and isinstance(end, int) and end > start:
        tasks_sql = (f"SELECT NULL::VARCHAR AS task_id, range AS task_idx, NULL::JSON AS metadata "
                     f"FROM range({start}, {end})")
    else:
        tasks_sql = "SELECT NULL::VARCHAR AS task_id, NULL::BIGINT AS task_idx, NULL::JSON AS metadata LIMIT 0"
    con = duckdb.connect()
    try:
        attempts, tasks = _frames(con, src, params, tasks_sql, {}, merge_tasks=False, materialize=True)
    except duckdb.Error as exc:
        raise UsageError(f"{results}: cannot read it ({str(exc).splitlines()[0]})") from None
    finally:
        con.close()
    return RunData(run_id=run_id, benchmark=str(bundle.get("benchmark") or ""), model_id=bundle.get("model_id"),
                   metric=chosen, metrics=_metric_list(primary, metrics), n_repeats=int(bundle.get("n_repeats") or 0),
                   attempts=attempts, tasks=tasks, source=str(folder))


# ---- shared ----------------------------------------------------------------------------------------
def _choose_metric(metric: str | None, primary: str, metrics: list[str], what: str) -> str:
    if metric is None or metric == primary:
        return primary
    if metric not in metrics:
        known = ", ".join(_metric_list(primary, metrics))
        raise UsageError(f"{what} has no metric {metric!r}; its metrics: {known}")
    return metric


def _metric_list(primary: str, metrics: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([primary, *metrics]))


def _frames(
    con: duckdb.DuckDBPyConnection,
    src: str,
    src_params: dict[str, Any],
    tasks_sql: str,
    tasks_params: dict[str, Any],
    *,
    merge_tasks: bool,
    materialize: bool,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The attempts and tasks frames from ``src`` (the run's steps: reward, passed, metadata JSON, ...) and
    ``tasks_sql`` (every task of the run: task_id, task_idx, metadata JSON).

    Metadata JSON is unpacked once per task, not per step: the steps carry a hash of theirs; each distinct
    (task, metadata) pair is merged over the task's own metadata (``merge_tasks``), unpacked into columns by
    DuckDB, and joined back onto the attempts. ``materialize`` reads ``src`` once into a temporary table (a
    results file is parsed once); without it ``src`` is scanned twice, and a step a live run appended in
    between takes its task's metadata.
    """
    if materialize:
        con.execute(f"CREATE OR REPLACE TEMP TABLE nel_src AS {src}", src_params)
        src, src_params = "SELECT * FROM nel_src", {}
    attempts = polars_frame(con, f"""
        SELECT task_id::VARCHAR AS task_id, task_idx::BIGINT AS task_idx, repeat::BIGINT AS repeat,
               reward::DOUBLE AS reward, passed::BOOLEAN AS passed,
               coalesce(failure_category IN ({_ERRORS_SQL}), false) AS error,
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
    names = _column_names(keys)
    meta = ", json_transform(coalesce(metadata, '{}'), $shape) AS meta" if keys else ""
    shape = {"shape": json.dumps(dict.fromkeys(keys, "VARCHAR"))} if keys else {}
    metas = _unpack(polars_frame(con, f"SELECT task_idx, nel_mh, true AS nel_hit{meta} FROM nel_meta", shape), names)
    listed = _unpack(polars_frame(con, f"SELECT task_id::VARCHAR AS task_id, task_idx::BIGINT AS task_idx{meta} "
                                  f"FROM ({tasks_sql}) ORDER BY task_idx", {**tasks_params, **shape}), names)
    con.execute("DROP TABLE nel_meta" + ("; DROP TABLE nel_src" if materialize else ""))
    attempts = attempts.join(metas, on=["task_idx", "nel_mh"], how="left", maintain_order="left")
    attempts = _fill_unmatched(attempts, listed, names).drop("nel_mh", "nel_hit")
    attempts = _category_fallback(attempts)
    meta_cols = [c for c in attempts.columns if c not in _RESERVED]
    return attempts.select(*ATTEMPT_COLUMNS, *meta_cols), _tasks(attempts, listed, meta_cols)


def _fill_unmatched(attempts: pl.DataFrame, listed: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """Attempts whose metadata was not in the second scan (a live run appended them) take their task's."""
    if not names or attempts["nel_hit"].null_count() == 0:
        return attempts
    fill = listed.select("task_idx", *[pl.col(c).alias(f"nel_fill_{c}") for c in names])
    missed = pl.col("nel_hit").is_null()
    return attempts.join(fill, on="task_idx", how="left", maintain_order="left").with_columns(
        pl.when(missed).then(pl.col(f"nel_fill_{c}")).otherwise(pl.col(c)).alias(c) for c in names
    ).drop(f"nel_fill_{c}" for c in names)


def _column_names(keys: list[str]) -> list[str]:
    names: list[str] = []
    for key in keys:
        name = key
        while name in _RESERVED or name in names or name in ("sd_category", "meta") or name.startswith("nel_"):
            name = f"meta_{name}"
        names.append(name)
    return names


def _unpack(frame: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    if "meta" not in frame.columns:
        return frame
    return frame.with_columns(pl.col("meta").struct.rename_fields(names)).unnest("meta")


def _category_fallback(attempts: pl.DataFrame) -> pl.DataFrame:
    """NeMo Evaluator reads a problem's category from ``metadata.category``, else ``scoring_details.category``."""
    fallback = attempts["sd_category"]
    attempts = attempts.drop("sd_category")
    if fallback.null_count() == len(fallback):
        return attempts
    if "category" in attempts.columns:
        return attempts.with_columns(pl.coalesce("category", fallback.alias("sd")).alias("category"))
    return attempts.with_columns(fallback.alias("category"))


def _tasks(attempts: pl.DataFrame, listed: pl.DataFrame, meta_cols: list[str]) -> pl.DataFrame:
    """One row per task: the run's task list joined with per-task counts (a task with no attempt has n = 0);
    a task's metadata is its first attempt's, else the task list's."""
    counts = attempts.group_by("task_idx", maintain_order=True).agg(
        pl.col("task_id").first(),
        pl.len().cast(pl.Int64).alias("n"),
        pl.col("passed").sum().cast(pl.Int64).alias("n_pass"),
        pl.col("reward").sum().cast(pl.Float64).alias("reward_sum"),
        pl.col("error").sum().cast(pl.Int64).alias("n_error"),
        *[pl.col(c).first() for c in meta_cols],
    )
    listed = listed.select("task_idx", pl.col("task_id").alias("listed_id"),
                           *[pl.col(c).alias(f"listed_{c}") if c in listed.columns else pl.lit(None, pl.Utf8)
                             .alias(f"listed_{c}") for c in meta_cols])
    joined = counts.join(listed, on="task_idx", how="full", coalesce=True)
    return joined.select(
        pl.coalesce("task_id", "listed_id").alias("task_id"),
        pl.col("task_idx"),
        pl.col("n").fill_null(0),
        pl.col("n_pass").fill_null(0),
        pl.col("reward_sum").fill_null(0.0),
        pl.col("n_error").fill_null(0),
        *[pl.coalesce(c, f"listed_{c}").alias(c) for c in meta_cols],
    ).sort("task_idx")


def _json_obj(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str | bytes):
        value = json.loads(value)
    return dict(value) if isinstance(value, dict) else {}
