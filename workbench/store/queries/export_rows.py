"""The rows an export of one run is written from: its steps, streamed one bounded range of problems at a time,
and the aggregates of its bundle (per-metric and per-category scores, runtime statistics, failure exemplars).

``workbench.export.artifacts`` formats what these return and writes the files; it holds no SQL of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from workbench.store.columns import sql_string
from workbench.store.reader import Store

T = TypeVar("T")

FETCH = 1024
"""Steps fetched (and handed to ``render``) at a time."""

STEP_COLUMNS = (
    "task_idx", "repeat", "task_id", "shard_idx", "prompt", "messages", "response", "reasoning", "finish_reason",
    "tool_calls", "reward", "passed", "expected_answer", "extracted_answer", "scoring_method", "scoring_details",
    "failure_category", "error", "http_status", "n_retries", "prompt_tokens", "completion_tokens", "total_tokens",
    "reasoning_tokens", "latency_ms", "seed_ms", "model_ms", "verify_ms", "request_hash", "request_seed",
    "response_id", "scores",
)
STEP_NAMES = (*STEP_COLUMNS, "started_at", "metadata")
"""The keys of a step as ``step_range`` hands it over: the columns, the start time as ISO 8601 UTC text and the
metadata (the task's, merged under the step's own), JSON columns as their JSON text."""

_STEP_QUERY = f"""
SELECT {", ".join("s." + c for c in STEP_COLUMNS)},
    strftime(s.started_at, '%Y-%m-%dT%H:%M:%S.%fZ') AS started_at,
    CASE WHEN t.metadata IS NULL THEN s.metadata WHEN s.metadata IS NULL THEN t.metadata
         ELSE json_merge_patch(t.metadata, s.metadata) END AS metadata
FROM steps s LEFT JOIN tasks t ON t.task_id = s.task_id
WHERE s.run_id = ? AND s.task_idx BETWEEN ? AND ?
ORDER BY s.task_idx, s.repeat
"""
_SIZE_QUERY = """
SELECT task_idx, count(*),
       sum(coalesce(strlen(prompt), 0) + coalesce(strlen(messages::VARCHAR), 0) + coalesce(strlen(response), 0)
           + coalesce(strlen(reasoning), 0) + coalesce(strlen(tool_calls::VARCHAR), 0)
           + coalesce(strlen(scoring_details::VARCHAR), 0) + coalesce(strlen(scores::VARCHAR), 0))
FROM steps WHERE run_id = ? GROUP BY task_idx ORDER BY task_idx
"""


def problem_sizes(store: Store, run_id: str) -> list[tuple[Any, ...]]:
    """Per problem of the run, in order: ``(task_idx, steps, bytes of text)`` (what the step ranges are cut by)."""
    return store.rows(_SIZE_QUERY, [run_id])


def step_range(store: Store, run_id: str, first: int, last: int,
               render: Callable[[list[dict[str, Any]]], T]) -> list[T]:
    """The steps of problems ``first``..``last``, ordered by problem and repeat, handed to ``render`` a batch of
    at most ``FETCH`` at a time (each a dict keyed by ``STEP_NAMES``); returns what ``render`` made of each batch.

    ``render`` must not write anything: the range is read again, whole, on a fresh snapshot if a live journal is
    rolled into a segment meanwhile, and what a first try made is dropped.
    """
    names = STEP_NAMES

    def fetch(cur: Any) -> list[T]:
        out = []
        while batch := cur.fetchmany(FETCH):
            out.append(render([dict(zip(names, r, strict=True)) for r in batch]))
        return out

    return store.query(_STEP_QUERY, [run_id, first, last], fetch)


_SCORES_QUERY = """
SELECT metric, task_idx, count(*), fsum(reward) / count(*), avg(CAST(passed AS DOUBLE))
FROM step_scores WHERE run_id = ? GROUP BY metric, task_idx ORDER BY metric, task_idx
"""


def metric_task_scores(store: Store, run_id: str) -> list[tuple[Any, ...]]:
    """Per metric and task, ordered by both: ``(metric, task_idx, steps, mean reward, pass rate)``."""
    return store.rows(_SCORES_QUERY, [run_id])


_CATEGORY_QUERY = """
WITH s AS (
    SELECT s.task_idx, s.passed, s.reward,
           coalesce(s.metadata ->> 'category', t.metadata ->> 'category', s.scoring_details ->> 'category') AS category
    FROM steps s LEFT JOIN tasks t ON t.task_id = s.task_id
    WHERE s.run_id = ?
)
SELECT category, task_idx, count(*) AS n, count(*) FILTER (WHERE passed) AS c, fsum(reward) AS reward
FROM s GROUP BY category, task_idx ORDER BY category, task_idx
"""


def category_task_counts(store: Store, run_id: str) -> list[tuple[Any, ...]]:
    """Per benchmark category (``metadata.category`` of the step, else of the task, else
    ``scoring_details.category``; None without one) and task, ordered by both:
    ``(category, task_idx, steps, passes, reward sum)``."""
    return store.rows(_CATEGORY_QUERY, [run_id])


RUNTIME_FIELDS = (
    "n", "wall_s", "latency_mean", "latency_max", "seed_mean", "seed_p50", "model_mean", "model_p50", "verify_mean",
    "verify_p50", "reasoning_tokens", "mean_prompt_tokens", "mean_completion_tokens", "per_request_tps",
    "n_errors", "n_failed", "retries", "n_retried", "finish_reasons",
)
_RUNTIME_QUERY = """
SELECT
    count(*),
    (max(epoch_us(started_at) + coalesce(latency_ms, 0) * 1000) - min(epoch_us(started_at))) / 1e6,
    favg(latency_ms), max(latency_ms),
    favg(seed_ms), quantile_cont(seed_ms, 0.5), favg(model_ms), quantile_cont(model_ms, 0.5),
    favg(verify_ms), quantile_cont(verify_ms, 0.5),
    sum(reasoning_tokens), avg(prompt_tokens), avg(completion_tokens),
    favg(completion_tokens / (model_ms / 1000.0)) FILTER (WHERE model_ms > 0 AND completion_tokens > 0),
    count(*) FILTER (WHERE is_error_category(failure_category)),
    count(*) FILTER (WHERE failure_category IS NOT NULL),
    coalesce(sum(n_retries), 0), count(*) FILTER (WHERE n_retries > 0),
    histogram(coalesce(finish_reason, 'none'))
FROM steps WHERE run_id = ?
"""


def runtime_row(store: Store, run_id: str) -> dict[str, Any]:
    """The run's runtime aggregates, keyed by ``RUNTIME_FIELDS``: steps; wall time in seconds from the first
    step's start to the last step's end; latency mean and max; mean and median of each phase (seed, model,
    verify); reasoning tokens; mean prompt and completion tokens; mean per-request completion tokens/s; steps
    with an error category; steps with any failure category; retries and steps retried; the finish reasons'
    histogram (``none`` for a step without one)."""
    return dict(zip(RUNTIME_FIELDS, store.rows(_RUNTIME_QUERY, [run_id])[0], strict=True))


_FAILURE_QUERY = """
WITH f AS (
    SELECT coalesce(failure_category, {wrong}) AS category, is_error_category(failure_category) AS is_error,
           task_id, task_idx, repeat, response, extracted_answer, expected_answer, error, http_status, finish_reason
    FROM steps WHERE run_id = ? AND (failure_category IS NOT NULL OR NOT passed)
)
SELECT category, is_error, count(*) OVER (PARTITION BY category),
       task_id, task_idx, repeat, left(response, {chars}), length(response) > {chars},
       extracted_answer, expected_answer, error, http_status, finish_reason
FROM f
QUALIFY row_number() OVER (PARTITION BY category ORDER BY task_idx, repeat) <= {exemplars}
"""


def failure_rows(store: Store, run_id: str, *, wrong: str, exemplars: int, chars: int) -> list[tuple[Any, ...]]:
    """The run's failed steps (a failure category, or not passed: category ``wrong``), the first ``exemplars``
    of each category by problem and repeat: ``(category, is_error, steps in the category, task_id, task_idx,
    repeat, the response's first ``chars`` characters, whether it was cut, extracted_answer, expected_answer,
    error, http_status, finish_reason)``."""
    query = _FAILURE_QUERY.format(wrong=sql_string(wrong), chars=int(chars), exemplars=int(exemplars))
    return store.rows(query, [run_id])
