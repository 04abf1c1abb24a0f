"""A run while it is written: progress per shard and its failures, read in one pass over the store (the rows
behind the live screen of ``nel tui``; ``workbench.analysis.triage`` re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from workbench.store.queries.rows import fetch_dicts, fetch_many
from workbench.store.queries.triage_runs import RunRow, run_query
from workbench.store.queries.triage_tasks import QUESTION_SQL
from workbench.store.reader import Store


@dataclass(frozen=True, slots=True)
class ShardProgress:
    shard_idx: int
    status: str
    done: int
    expected: int


@dataclass(frozen=True, slots=True)
class FailureEvent:
    task_idx: int
    repeat: int
    started_at: datetime | None
    outcome: str
    extracted_answer: str | None
    expected_answer: str | None
    error: str | None
    question: str | None = None
    """The first line of the task's prompt (``triage_tasks.QUESTION_CHARS`` characters at most)."""


@dataclass(frozen=True, slots=True)
class LiveSnapshot:
    """What the live screen shows, read in one pass over the store."""

    run: RunRow
    shards: list[ShardProgress]
    failures: dict[str, int]
    """Failed steps by category, answered-but-wrong ones as ``wrong``, most frequent first."""
    latest: list[FailureEvent]
    """The most recent failed steps, newest first."""


_LIVE_SHARDS = """
    SELECT r.total_shards, s.shard_idx, coalesce(s.status, 'not started') AS status,
           coalesce(c.done, 0) AS done, (s.problem_end - s.problem_start) * r.n_repeats AS expected
    FROM runs r LEFT JOIN run_shards s USING (run_id)
    LEFT JOIN (SELECT shard_idx, count(*) AS done FROM steps WHERE run_id = ? GROUP BY shard_idx) c USING (shard_idx)
    WHERE r.run_id = ? ORDER BY s.shard_idx"""
_LIVE_COUNTS = """
    SELECT coalesce(failure_category, 'wrong') AS outcome, count(*) AS n FROM steps
    WHERE run_id = ? AND NOT passed GROUP BY ALL ORDER BY n DESC, outcome"""
_LIVE_RECENT = f"""
    SELECT s.task_idx, s.repeat, s.started_at, coalesce(s.failure_category, 'wrong') AS outcome, s.extracted_answer,
           s.expected_answer, s.error, {QUESTION_SQL} AS question
    FROM (SELECT * FROM steps WHERE run_id = ? AND NOT passed
          ORDER BY started_at DESC, task_idx DESC, repeat DESC LIMIT ?) s LEFT JOIN tasks tk USING (task_id)
    ORDER BY s.started_at DESC, s.task_idx DESC, s.repeat DESC"""


def live_snapshot(store: Store, run_id: str, *, latest: int = 20) -> LiveSnapshot | None:
    """Progress of ``run_id`` right now (a run another process is writing included); None if it is gone."""
    runs, shard_rows, counts, recent = fetch_many(store, [
        run_query(run_id),
        (_LIVE_SHARDS, [run_id, run_id]),
        (_LIVE_COUNTS, [run_id]),
        (_LIVE_RECENT, [run_id, latest]),
    ])
    if not runs:
        return None
    shards = [ShardProgress(int(r["shard_idx"]), r["status"], int(r["done"]), int(r["expected"] or 0))
              for r in shard_rows if r["shard_idx"] is not None]
    total_shards = int(shard_rows[0]["total_shards"]) if shard_rows else 1
    known = {s.shard_idx for s in shards}
    shards += [ShardProgress(i, "not started", 0, 0) for i in range(total_shards) if i not in known]
    return LiveSnapshot(RunRow(**runs[0]), sorted(shards, key=lambda s: s.shard_idx),
                        {r["outcome"]: int(r["n"]) for r in counts}, [FailureEvent(**r) for r in recent])


@dataclass(frozen=True, slots=True)
class RunningShard:
    """A shard the store says is still running, and where its process is: what stopping a run needs."""

    shard_idx: int
    host: str | None
    pid: int | None


def running_shards(store: Store, run_id: str) -> list[RunningShard]:
    """The shards of ``run_id`` whose status is ``running`` (live journals included), with their host and pid."""
    rows = fetch_dicts(store, "SELECT shard_idx, host, pid FROM run_shards WHERE run_id = ? AND status = 'running' "
                              "ORDER BY shard_idx", [run_id])
    return [RunningShard(int(r["shard_idx"]), r["host"], None if r["pid"] is None else int(r["pid"])) for r in rows]
