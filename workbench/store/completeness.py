"""Where each run stands after a merge: which shards never reported, which did not complete.

``nel eval merge`` answers for every sharded run of the store, not only for the shards it ingested this
time: a merge that is retried (a Kubernetes Job's backoff, a user running it again) must name a missing
shard again and finish the export a killed merge left undone.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.store.reader import Store


@dataclass(frozen=True, slots=True)
class RunCompleteness:
    """Where a run stands once merged: its status, the shards that never reported and those that did not
    complete, and how many steps the store holds for it."""

    run_id: str
    status: str
    total_shards: int
    missing_shards: tuple[int, ...]
    unfinished_shards: dict[int, str]
    n_steps: int
    finished_at: Any


def runs_to_settle(store: Path, touched: Collection[str]) -> list[RunCompleteness]:
    """The runs a merge answers for: those it has just ingested, and every sharded run of ``store`` (a merge
    retried after a crash, or by a Kubernetes Job's backoff, must report an incomplete run again, and
    finish an export a killed merge left undone)."""
    rows = Store(store).rows(
        "SELECT r.run_id, r.status, r.total_shards, r.finished_at, "
        "list(s.shard_idx ORDER BY s.shard_idx) FILTER (WHERE s.shard_idx IS NOT NULL), "
        "list(s.status ORDER BY s.shard_idx) FILTER (WHERE s.shard_idx IS NOT NULL), "
        "(SELECT count(*) FROM steps t WHERE t.run_id = r.run_id) "
        "FROM runs r LEFT JOIN run_shards s USING (run_id) "
        "WHERE r.total_shards > 1 OR list_contains(?, r.run_id) GROUP BY ALL ORDER BY r.run_id",
        [sorted(touched)],
    )
    out = []
    for run_id, status, total, finished_at, shards, statuses, n_steps in rows:
        shards, statuses = shards or [], statuses or []
        out.append(RunCompleteness(
            run_id=run_id, status=status, total_shards=int(total),
            missing_shards=tuple(sorted(set(range(int(total))) - set(shards))),
            unfinished_shards={int(i): st for i, st in zip(shards, statuses, strict=True) if st != "complete"},
            n_steps=int(n_steps), finished_at=finished_at,
        ))
    return out
