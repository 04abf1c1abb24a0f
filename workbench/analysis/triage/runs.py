"""Sorting and filtering the runs list (its rows are read by ``workbench.store.queries.triage_runs``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from workbench.store.queries.triage_runs import RunRow

RUN_SORTS = ("started", "run", "source", "benchmark", "model", "status", "pass@1", "duration", "steps")


def _run_sort_key(name: str) -> Callable[[RunRow], Any]:
    keys: dict[str, Callable[[RunRow], Any]] = {
        "started": lambda r: r.created_at,
        "run": lambda r: r.run_id,
        "source": lambda r: r.source,
        "benchmark": lambda r: r.benchmark,
        "model": lambda r: r.model_id,
        "status": lambda r: r.status,
        "pass@1": lambda r: r.pass_at_1,
        "duration": lambda r: r.duration_s,
        "steps": lambda r: r.n_steps,
    }
    return keys[name]


def sort_filter_runs(runs: Sequence[RunRow], *, sort: str = "started", descending: bool = True,
                     text: str = "") -> list[RunRow]:
    """Runs whose id, source, benchmark, model or status contain ``text`` (any case), sorted; missing values last."""
    needle = text.strip().lower()
    kept = [r for r in runs if not needle
            or any(needle in (v or "").lower() for v in (r.run_id, r.source, r.benchmark, r.model_id, r.status))]
    key = _run_sort_key(sort)
    present = sorted((r for r in kept if key(r) is not None), key=key, reverse=descending)
    return present + [r for r in kept if key(r) is None]
