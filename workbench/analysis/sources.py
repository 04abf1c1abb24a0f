"""One run's attempts as polars frames, from the store or from an exported results directory.

Every statistic (``nel eval stats``, ``nel compare``, ``nel gate``, notebooks) starts from ``RunData``, so a
run read from the store and the same run read from its export give identical numbers. The reading is done
in DuckDB by ``workbench.store.queries.run_frames`` (one scan of the run's steps, handed over as Arrow: no
Python object is built per step); this module names and joins the columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from workbench.analysis.figures import run_figures
from workbench.errors import UsageError
from workbench.model.failures import ERROR_CATEGORIES
from workbench.store import Store, open_store, resolve_store_path, segments_root
from workbench.store.queries.exported import RESULTS, TRAJECTORIES, bundle_path, read_bundle
from workbench.store.queries.run_frames import StepFrames, read_exported_run, read_store_run
from workbench.types import BenchmarkFigures

ATTEMPT_COLUMNS = (
    "task_id", "task_idx", "repeat", "reward", "passed", "error", "failure_category", "latency_ms",
    "prompt_tokens", "completion_tokens", "total_tokens", "response_chars",
)
TASK_COLUMNS = ("task_id", "task_idx", "n", "n_pass", "reward_sum", "n_error")
_RESERVED = frozenset(ATTEMPT_COLUMNS) | frozenset(TASK_COLUMNS)


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
    benchmark_figures: BenchmarkFigures | None = None
    """The figures the benchmark's authors report (``EvalEnvironment.benchmark_figures``): from an export, its
    bundle's; from the store, when asked for (``load_run(figures=True)``)."""
    status: str | None = None
    """The run's status in the store (``running``: still being written, its numbers will move); None for an
    export, which is written once a run ended."""

    @property
    def metadata_columns(self) -> tuple[str, ...]:
        """The metadata columns (slice and cluster candidates), in frame order."""
        return tuple(c for c in self.tasks.columns if c not in _RESERVED)


def load_run(source: str, *, store: Path | None = None, metric: str | None = None, figures: bool = False) -> RunData:
    """Load ``source``: a directory holding one exported ``eval-*.json`` (or that file), else a run id in ``store``.

    ``metric`` picks the metric whose values fill ``reward``/``passed`` (default: the run's primary metric).
    ``figures``: from the store, compute the benchmark's own figures too (``run_figures``: one more pass over the
    steps, for a benchmark that declares figures); an export's come with its bundle.

    Raises:
        UsageError: an unknown run or metric, a directory without (or with several) bundles, no store.
    """
    path = Path(source)
    exported = path.is_file() or (path.is_dir() and any(path.glob("eval-*.json")))
    if exported or (path.is_dir() and store is None):
        return _load_export(bundle_path(path), metric)
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
    return _load_store(open_store(store_file), source, metric, figures)


# ---- from the store --------------------------------------------------------------------------------
def _load_store(store: Store, run_id: str, metric: str | None, figures: bool = False) -> RunData:
    def choose(primary: str, metrics: list[str]) -> str:
        return _choose_metric(metric, primary, metrics, f"run {run_id}")

    read = read_store_run(store, run_id, choose, ERROR_CATEGORIES)
    attempts, tasks = _merge(read.frames)
    return RunData(run_id=run_id, benchmark=read.benchmark, model_id=read.model_id, metric=read.metric,
                   metrics=_metric_list(read.primary, read.metrics), n_repeats=read.n_repeats, attempts=attempts,
                   tasks=tasks, source=f"store:{store.path}#{run_id}",
                   benchmark_figures=run_figures(store, run_id, read.benchmark) if figures else None,
                   status=read.status)


# ---- from an exported directory --------------------------------------------------------------------
def _load_export(bundle_file: Path, metric: str | None) -> RunData:
    bundle = read_bundle(bundle_file)
    folder = bundle_file.parent
    results = folder / RESULTS
    if not results.is_file():
        raise UsageError(f"{folder}: no {RESULTS} beside {bundle_file.name}")
    run_id = str(bundle["run_id"])
    primary = str(bundle.get("primary_metric") or "reward")
    metrics = [str(m) for m in bundle.get("metrics") or []]
    chosen = _choose_metric(metric, primary, metrics, f"run {run_id}")
    traj = folder / TRAJECTORIES
    config = bundle.get("config") or {}
    start, end = config.get("problem_start"), config.get("problem_end")
    problem_range = (start, end) if isinstance(start, int) and isinstance(end, int) and end > start else None
    frames = read_exported_run(results, traj if traj.is_file() else None,
                               metric=None if chosen == primary else chosen, problem_range=problem_range,
                               error_categories=ERROR_CATEGORIES)
    attempts, tasks = _merge(frames)
    return RunData(run_id=run_id, benchmark=str(bundle.get("benchmark") or ""), model_id=bundle.get("model_id"),
                   metric=chosen, metrics=_metric_list(primary, metrics), n_repeats=int(bundle.get("n_repeats") or 0),
                   attempts=attempts, tasks=tasks, source=str(folder),
                   benchmark_figures=_figures(bundle.get("benchmark_figures")))


def _figures(value: object) -> BenchmarkFigures | None:
    """A bundle's ``benchmark_figures`` read back (absent from a bundle written before there were any)."""
    if not isinstance(value, dict):
        return None
    return BenchmarkFigures(source=str(value["source"]), values={str(k): float(v) for k, v in value["values"].items()},
                            n_steps=int(value["n_steps"]), over=str(value["over"]))


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


def _merge(frames: StepFrames) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The attempts and tasks frames from what DuckDB read (``workbench.store.queries.run_frames``): each
    distinct (task, metadata) pair's columns joined back onto the attempts, an attempt the second scan missed
    filled from its task, the category fallback applied, and one row per task of the run."""
    names = _column_names(frames.keys)
    metas = _unpack(frames.metas, names)
    listed = _unpack(frames.listed, names)
    attempts = frames.attempts.join(metas, on=["task_idx", "nel_mh"], how="left", maintain_order="left")
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

