"""The task list of a run: filtered, sorted and paged in SQL, so a run of any size opens at once (the rows behind
the task list of ``nel tui``; ``workbench.analysis.triage`` re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.store.queries.rows import fetch_dicts, fetch_many
from workbench.store.queries.triage_runs import RunHeader, RunRow, run_query
from workbench.store.reader import Store

BUCKETS = ("sometimes", "never", "errored", "always", "pending", "missing")
"""Outcome buckets, highest-signal first: ``task_stats``' own (``errored``: every attempt an error, no verdict;
it says nothing about the model; ``missing``: never attempted, a shard that never ran included), and ``pending``:
a task of a running run with attempts still to come, whose bucket can still change (one failed attempt of four
is not yet ``never``)."""

BUCKET_SQL = """CASE WHEN ts.bucket <> 'sometimes' AND ts.n < (SELECT r.n_repeats FROM runs r
                     WHERE r.run_id = ts.run_id AND r.status = 'running') THEN 'pending' ELSE ts.bucket END"""
"""A task's bucket (``BUCKETS``), over ``task_stats ts``: ``sometimes`` is final once seen; the others wait for
the run's every attempt while it runs."""
_BUCKET_RANK = f"list_position({list(BUCKETS)}, bucket)"

TASK_SORTS: dict[str, str] = {
    "bucket": _BUCKET_RANK,
    "task": "task_idx",
    "passes": "n_pass",
    "pass rate": "pass_rate",
    "wilson": "wilson_low",
    "category": "category",
    "failure": "failure_category",
    "tokens": "mean_tokens",
    "latency": "mean_latency_ms",
    "question": "question",
}
"""Sort keys of the task list and the SQL each one orders by (a whitelist: no user text reaches SQL)."""


@dataclass(frozen=True, slots=True)
class TaskFilter:
    """What the task list shows: a bucket, a task category, a failure category, free text over the
    prompt and the responses, and the sort order."""

    bucket: str | None = None
    category: str | None = None
    failure: str | None = None
    text: str = ""
    sort: str = "bucket"
    descending: bool = False


@dataclass(frozen=True, slots=True)
class TaskRow:
    task_idx: int
    task_id: str | None  # None for a task of a shard that never ran (no run_tasks row names it)
    n: int
    n_pass: int
    n_error: int
    pass_rate: float | None
    wilson_low: float | None
    wilson_high: float | None
    bucket: str
    category: str | None
    failure_category: str | None
    mean_tokens: float | None
    mean_latency_ms: float | None
    question: str | None
    """The first line of the task's prompt (at most ``QUESTION_CHARS`` characters)."""
    turns: float | None
    """Model calls per attempt (an agent's turns), averaged over the attempts; None for single-call attempts."""
    tool_calls: float | None
    """Tool calls per attempt, averaged; None when the attempts record none (no agent, no tools offered)."""


@dataclass(frozen=True, slots=True)
class TaskPage:
    """A window of the filtered, sorted task list and the size of the whole list."""

    rows: list[TaskRow]
    total: int
    offset: int


@dataclass(frozen=True, slots=True)
class TaskFacets:
    """The values a run's task filters can take, with how many tasks fall in each bucket."""

    buckets: dict[str, int]
    categories: list[str]
    failures: list[str]


QUESTION_CHARS = 200
QUESTION_SQL = (f"left(split_part(ltrim(tk.prompt, ' ' || chr(9) || chr(10) || chr(13)), chr(10), 1), "
                 f"{QUESTION_CHARS})")
"""A task's question, over ``tasks tk``: the first non-blank line of its prompt, cut to ``QUESTION_CHARS``."""
_AGENT_SQL = """,
           avg(json_array_length(turns)) AS turns,
           avg(coalesce(list_sum(json_array_length(turns, '$[*].tool_calls')), json_array_length(tool_calls)))
               AS tool_calls"""
"""Turns and tool calls per attempt: read for the rows shown, never for the facets (every step's JSON)."""
_FAILURES_SQL = """
    SELECT task_idx,
           mode(failure_category) FILTER (WHERE failure_category IS NOT NULL) AS failure_category,
           list(DISTINCT failure_category) FILTER (WHERE failure_category IS NOT NULL) AS failures{agent}
    FROM steps WHERE run_id = ? {and_where} GROUP BY task_idx"""
_STATS_SQL = f"""
    SELECT ts.task_idx, ts.task_id, ts.n, ts.n_pass, ts.n_error, ts.pass_rate, ts.wilson_low, ts.wilson_high,
           {BUCKET_SQL} AS bucket, ts.mean_tokens, ts.mean_latency_ms
    FROM task_stats ts WHERE ts.run_id = ?"""
_TASKS_CTE = f"""
    WITH st AS ({_FAILURES_SQL.format(and_where="", agent=_AGENT_SQL)}), t AS (
        SELECT ts.*, tk.metadata ->> 'category' AS category, st.failure_category,
               coalesce(st.failures, []) AS failures, {QUESTION_SQL} AS question, st.turns, st.tool_calls
        FROM ({_STATS_SQL}) ts LEFT JOIN tasks tk USING (task_id) LEFT JOIN st USING (task_idx)
    )
"""
"""Every task of a run with its statistics, bucket, category, failure categories, question, turns and tool calls
(params: run, run)."""
_FACETS_CTE = f"""
    WITH st AS ({_FAILURES_SQL.format(and_where="", agent="")}), t AS (
        SELECT ts.bucket, tk.metadata ->> 'category' AS category, coalesce(st.failures, []) AS failures
        FROM ({_STATS_SQL}) ts LEFT JOIN tasks tk USING (task_id) LEFT JOIN st USING (task_idx)
    )
"""
"""What the facets count: each task's bucket, category and failure categories (params: run, run)."""
_TASK_COLUMNS = ", ".join(TaskRow.__dataclass_fields__)
_TEXT_SQL = ("(task_id = ? OR task_idx::VARCHAR = ? OR task_id IN (SELECT task_id FROM tasks WHERE "
             "contains(lower(prompt), ?)) OR task_idx IN (SELECT task_idx FROM steps WHERE run_id = ? AND "
             "contains(lower(response), ?)))")


def _page_query(run_id: str, flt: TaskFilter, offset: int, limit: int) -> tuple[str, list[Any]]:
    """The page's SELECT. When neither the filter nor the sort needs a task's category or failure
    categories, they are looked up for the page's rows only, after the window is cut (the common case,
    and a third of the cost on a large run)."""
    where: list[str] = ["TRUE"]
    params: list[Any] = []
    for column, value in (("bucket", flt.bucket), ("category", flt.category)):
        if value:
            where.append(f"{column} = ?")
            params.append(value)
    if flt.failure:
        where.append("list_contains(failures, ?)")
        params.append(flt.failure)
    text = flt.text.strip().lower()
    if text.startswith("#") and text[1:].isdigit():  # "#12": task 12, not every text holding "12"
        where.append("task_idx = ?")
        params.append(int(text[1:]))
    elif text:
        where.append(_TEXT_SQL)
        params += [text, text, text, run_id, text]
    order = TASK_SORTS.get(flt.sort, TASK_SORTS["bucket"])
    order_by = f"ORDER BY {order} {'DESC' if flt.descending else 'ASC'} NULLS LAST, task_idx"
    if flt.category or flt.failure or flt.sort in ("category", "failure", "question"):
        query = (f"{_TASKS_CTE} SELECT {_TASK_COLUMNS}, count(*) OVER () AS total FROM t "
                 f"WHERE {' AND '.join(where)} {order_by} LIMIT ? OFFSET ?")
        return query, [run_id, run_id, *params, limit, offset]
    query = f"""
        WITH page AS (SELECT *, count(*) OVER () AS total FROM ({_STATS_SQL}) AS t
                      WHERE {' AND '.join(where)} {order_by} LIMIT ? OFFSET ?),
             st AS ({_FAILURES_SQL.format(and_where="AND task_idx IN (SELECT task_idx FROM page)", agent=_AGENT_SQL)})
        SELECT {_TASK_COLUMNS}, total FROM (
            SELECT page.*, tk.metadata ->> 'category' AS category, st.failure_category,
                   {QUESTION_SQL} AS question, st.turns, st.tool_calls
            FROM page LEFT JOIN tasks tk USING (task_id) LEFT JOIN st USING (task_idx)
        ) {order_by}"""
    return query, [run_id, *params, limit, offset, run_id]


def _page(rows: list[dict[str, Any]], offset: int) -> TaskPage:
    total = int(rows[0]["total"]) if rows else 0
    for row in rows:
        del row["total"]
    return TaskPage([TaskRow(**row) for row in rows], total, offset)


_FACETS_SQL = f"""{_FACETS_CTE}
    SELECT 'bucket' AS kind, bucket AS value, count(*) AS n FROM t GROUP BY bucket
    UNION ALL SELECT 'category', category, count(*) FROM t WHERE category IS NOT NULL GROUP BY category
    UNION ALL SELECT 'failure', f, count(*) FROM (SELECT unnest(failures) AS f FROM t) GROUP BY f"""


def _facets(rows: list[dict[str, Any]]) -> TaskFacets:
    buckets = dict.fromkeys(BUCKETS, 0)
    buckets.update({r["value"]: int(r["n"]) for r in rows if r["kind"] == "bucket"})
    return TaskFacets(
        buckets=buckets,
        categories=sorted(r["value"] for r in rows if r["kind"] == "category"),
        failures=sorted(r["value"] for r in rows if r["kind"] == "failure"),
    )


def task_page(store: Store, run_id: str, flt: TaskFilter | None = None, *, offset: int = 0,
              limit: int = 500) -> TaskPage:
    """One page of a run's tasks, filtered and sorted in SQL (ties broken by task index)."""
    return _page(fetch_dicts(store, *_page_query(run_id, flt or TaskFilter(), offset, limit)), offset)


def task_facets(store: Store, run_id: str) -> TaskFacets:
    """Bucket counts, task categories and failure categories of one run (for the filter keys)."""
    return _facets(fetch_dicts(store, _FACETS_SQL, [run_id, run_id]))


@dataclass(frozen=True, slots=True)
class TaskList:
    """What the task list opens with: the run (None when it is gone) and the first page."""

    run: RunHeader | None
    page: TaskPage


def task_list(store: Store, run_id: str, flt: TaskFilter | None = None, *, limit: int = 500) -> TaskList:
    """The run's header and the first page, on one connection. The run's metrics and the facets take
    as long again (``run_overview``): the page should not wait for them."""
    header = f"SELECT {', '.join(RunHeader.__dataclass_fields__)} FROM runs WHERE run_id = ?"
    run, page = fetch_many(store, [(header, [run_id]), _page_query(run_id, flt or TaskFilter(), 0, limit)])
    return TaskList(RunHeader(**run[0]) if run else None, _page(page, 0))


@dataclass(frozen=True, slots=True)
class RunOverview:
    run: RunRow | None
    facets: TaskFacets


def run_overview(store: Store, run_id: str) -> RunOverview:
    """A run's metrics (pass@1 with its interval) and its task facets, on one connection."""
    run, facets = fetch_many(store, [run_query(run_id), (_FACETS_SQL, [run_id, run_id])])
    return RunOverview(RunRow(**run[0]) if run else None, _facets(facets))


def task_questions(store: Store, run_id: str, task_idxs: list[int]) -> dict[int, str | None]:
    """The question (first line of the prompt) of each of task_idxs in a run; a task the run does not have
    is left out (what a finding's or a flip list's cited tasks show beside their indices)."""
    query = f"""SELECT rt.task_idx, {QUESTION_SQL} AS question FROM run_tasks rt LEFT JOIN tasks tk USING (task_id)
                WHERE rt.run_id = ? AND list_contains(?, rt.task_idx)"""
    return {int(r["task_idx"]): r["question"] for r in fetch_dicts(store, query, [run_id, task_idxs])}


def questions_by_task_id(store: Store, task_ids: list[str]) -> dict[str, str | None]:
    """The question of each task (by content hash, the same in every run that has it): what a flip list shows."""
    query = f"SELECT tk.task_id, {QUESTION_SQL} AS question FROM tasks tk WHERE list_contains(?, tk.task_id)"
    return {r["task_id"]: r["question"] for r in fetch_dicts(store, query, [task_ids])}
