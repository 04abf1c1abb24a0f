"""The runs of a store, with pass@1 and its interval (from the ``run_metrics`` view): the rows behind the
runs list of ``nel tui`` and the notebook's run picker (``workbench.analysis.triage`` re-exports them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from workbench.store.queries.rows import fetch_dicts
from workbench.store.reader import Store


@dataclass(frozen=True, slots=True)
class RunHeader:
    """What the ``runs`` table says of a run: cheap to read, unlike its metrics."""

    run_id: str
    benchmark: str
    model_id: str | None
    status: str
    n_tasks: int
    n_repeats: int


@dataclass(frozen=True, slots=True)
class RunRow(RunHeader):
    """One run as the runs list shows it: its header and its metrics."""

    n_steps: int
    n_steps_expected: int
    pass_at_1: float | None
    pass_at_1_low: float | None
    pass_at_1_high: float | None
    n_errors: int
    n_failed: int
    total_tokens: int
    created_at: datetime | None
    finished_at: datetime | None
    first_step_at: datetime | None
    """First and latest step: read for a run without a finish time only (a finished run's duration is known)."""
    last_step_at: datetime | None
    source: str = "nel"
    """The harness that produced the run: ``nel``, ``gym``, ``lm-eval``, ``inspect`` (the ``run_source`` of
    store/views.sql)."""

    @property
    def duration_s(self) -> float | None:
        """Start to finish; for a run still going (or cut short), start to its latest step."""
        end = self.finished_at or self.last_step_at
        if self.created_at is None or end is None:
            return None
        return max(0.0, (end - self.created_at).total_seconds())


_RUNS_SQL = """
    SELECT m.run_id, m.source, m.benchmark, m.model_id, m.status, coalesce(m.n_tasks, 0) AS n_tasks, m.n_repeats,
           m.n_steps, coalesce(m.n_steps_expected, 0) AS n_steps_expected, m.pass_at_1, m.pass_at_1_low,
           m.pass_at_1_high, m.n_errors, m.n_failed, coalesce(m.total_tokens, 0) AS total_tokens, m.created_at,
           m.finished_at, l.first_step_at, l.last_step_at
    FROM run_metrics m
    LEFT JOIN (SELECT run_id, min(started_at) AS first_step_at, max(started_at) AS last_step_at FROM steps
               WHERE run_id IN (SELECT run_id FROM runs WHERE finished_at IS NULL {and_run}) GROUP BY run_id) l
        USING (run_id)
    {where_m}
    ORDER BY m.created_at DESC, m.run_id
"""


def runs_table(store: Store) -> list[RunRow]:
    """Every run with pass@1 and its interval, newest first."""
    return [RunRow(**row) for row in fetch_dicts(store, _RUNS_SQL.format(and_run="", where_m=""))]


def run_query(run_id: str) -> tuple[str, list[Any]]:
    """One run's row as a query and its parameters (for ``fetch_many``, with other queries)."""
    return _RUNS_SQL.format(and_run="AND run_id = ?", where_m="WHERE m.run_id = ?"), [run_id, run_id]


def run_row(store: Store, run_id: str) -> RunRow | None:
    """One run's row, or None when the run is not (or no longer) in the store."""
    rows = fetch_dicts(store, *run_query(run_id))
    return RunRow(**rows[0]) if rows else None


def present_runs(store: Store, run_ids: Sequence[str]) -> set[str]:
    """Which of ``run_ids`` are in the store."""
    if not run_ids:
        return set()
    marks = ", ".join("?" * len(run_ids))
    return {r["run_id"] for r in fetch_dicts(store, f"SELECT run_id FROM runs WHERE run_id IN ({marks})",
                                             list(run_ids))}
