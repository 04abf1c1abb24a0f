"""Before a run starts: which problems, which run id, and what is already done.

Resolving ``--resume`` lives here: it finds the run to continue, refuses one
whose identity differs (naming each differing field), and lists the steps the
store already holds so none is repeated.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from workbench import __version__
from workbench.engine.identity import identity_diff, identity_hash, new_run_id, shared_run_id
from workbench.engine.sharding import Shard
from workbench.errors import UsageError
from workbench.limits import MAX_REPEATS, MAX_STEPS
from workbench.model.failures import ERROR_CATEGORIES, RETRYABLE_CATEGORIES
from workbench.store.database import probe_store
from workbench.store.layout import segments_root
from workbench.store.reader import Store


@dataclass(frozen=True, slots=True)
class RunPlan:
    run_id: str
    identity: dict[str, Any]
    identity_hash: str
    problem_start: int
    problem_end: int
    shard_start: int
    shard_end: int
    n_repeats: int
    shard: Shard
    created_at: float
    done: frozenset[tuple[int, int]]
    done_errors: int = 0
    """How many of the ``done`` steps errored (the run's error rate counts them with the new ones)."""
    retry: dict[tuple[int, int], int] = field(default_factory=dict)
    """Steps to attempt again (``--retry-errors``), each with the number of its new attempt."""

    @property
    def n_tasks(self) -> int:
        return self.problem_end - self.problem_start

    @property
    def shard_steps(self) -> int:
        return (self.shard_end - self.shard_start) * self.n_repeats


def problem_bounds(size: int, max_problems: int | None, problem_range: tuple[int, int] | None) -> tuple[int, int]:
    """``[start, end)`` of the problems a run covers: the range first, then the first N of it."""
    start, end = 0, size
    if problem_range is not None:
        start, end = problem_range
        if not 0 <= start < end <= size:
            raise UsageError(f"--problem-range {start}:{end} is outside the benchmark's 0:{size}")
    if max_problems is not None:
        if max_problems < 1:
            raise UsageError(f"--max-problems must be at least 1, got {max_problems}")
        end = min(end, start + max_problems)
    return start, end


def _store_exists(store: Path) -> bool:
    return store.exists() or segments_root(store).is_dir()


def _first_row(store: Path, query: str, params: list[Any]) -> dict[str, Any] | None:
    rows = Store(store).dicts(query, params)
    return rows[0] if rows else None


def _run_row(store: Path, run_id: str) -> dict[str, Any] | None:
    return _first_row(store, "SELECT * FROM runs WHERE run_id = ?", [run_id])


def _latest_run(store: Path, benchmark: str, resume_key: str | None) -> dict[str, Any] | None:
    """The run ``--resume`` continues: the newest of this benchmark made from the same place
    (the same suite entry, or the command line when ``resume_key`` is None)."""
    return _first_row(
        store,
        "SELECT * FROM runs WHERE benchmark = ? AND json_extract_string(config, '$.resume_key') IS NOT DISTINCT FROM ? "
        "ORDER BY created_at DESC LIMIT 1",
        [benchmark, resume_key],
    )


@dataclass(frozen=True, slots=True)
class DoneSteps:
    """What the store holds of a shard already: the steps not to attempt again, how many of them errored,
    and, with ``--retry-errors``, the steps to attempt again with the number their new attempt gets."""

    keys: frozenset[tuple[int, int]] = frozenset()
    n_errors: int = 0
    retry: dict[tuple[int, int], int] = field(default_factory=dict)


def _done_steps(store: Path, run_id: str, lo: int, hi: int, retry_errors: bool) -> DoneSteps:
    keys: set[tuple[int, int]] = set()
    retry: dict[tuple[int, int], int] = {}
    n_errors = 0
    for idx, rep, category, attempt in Store(store, runs=[run_id]).rows(
        "SELECT task_idx, repeat, failure_category, coalesce(attempt, 0) FROM steps "
        "WHERE run_id = ? AND task_idx >= ? AND task_idx < ?", [run_id, lo, hi],
    ):
        key = (int(idx), int(rep))
        if retry_errors and category in RETRYABLE_CATEGORIES:
            retry[key] = int(attempt) + 1
            continue
        keys.add(key)
        n_errors += category in ERROR_CATEGORIES
    return DoneSteps(frozenset(keys), n_errors, retry)


def _check_same_identity(existing: dict[str, Any], identity: dict[str, Any], run_id: str) -> None:
    old = existing["identity"]
    old = orjson.loads(old) if isinstance(old, str) else old
    diffs = identity_diff(old, identity)
    if diffs:
        raise UsageError(f"cannot resume run {run_id}: its configuration differs: {'; '.join(diffs)}")


def plan_run(
    *,
    store: Path,
    identity: dict[str, Any],
    benchmark: str,
    size: int,
    n_repeats: int,
    max_problems: int | None,
    problem_range: tuple[int, int] | None,
    shard: Shard,
    run_id: str | None,
    resume: bool,
    resume_key: str | None = None,
    retry_errors: bool = False,
) -> RunPlan:
    if n_repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {n_repeats}")
    MAX_REPEATS.check("repeats", n_repeats)
    start, end = problem_bounds(size, max_problems, problem_range)
    MAX_STEPS.check(f"{end - start:,} problems x {n_repeats:,} repeats =", (end - start) * n_repeats)
    identity = {**identity, "n_repeats": n_repeats, "problem_start": start, "problem_end": end}
    ident_hash = identity_hash(identity)
    lo, hi = shard.slice(start, end)
    existing: dict[str, Any] | None = None
    exists = _store_exists(store)
    if store.exists():
        probe_store(store)  # not a store, or a newer schema: say so before any step
    if run_id is None and shard.sharded:
        run_id = shared_run_id(benchmark, ident_hash)
    if run_id is not None:
        existing = _run_row(store, run_id) if exists else None
        if existing is not None:
            _check_same_identity(existing, identity, run_id)
    elif resume and exists:
        existing = _latest_run(store, benchmark, resume_key)
        if existing is not None:
            run_id = str(existing["run_id"])
            _check_same_identity(existing, identity, run_id)
    if run_id is None:
        run_id = new_run_id(benchmark)
    prior = _done_steps(store, run_id, lo, hi, retry_errors) if existing is not None else DoneSteps()
    done = prior.keys
    if (done or prior.retry) and not resume:
        raise UsageError(
            f"run {run_id} already has {len(done)} steps for problems {lo}..{hi - 1}; "
            "pass --resume to continue it, or --run-id to start another"
        )
    created = existing["created_at"].timestamp() if existing is not None else time.time()
    return RunPlan(
        run_id=run_id,
        identity=identity,
        identity_hash=ident_hash,
        problem_start=start,
        problem_end=end,
        shard_start=lo,
        shard_end=hi,
        n_repeats=n_repeats,
        shard=shard,
        created_at=created,
        done=done,
        done_errors=prior.n_errors,
        retry=prior.retry,
    )


def run_header(plan: RunPlan, benchmark: str, config: dict[str, Any]) -> dict[str, Any]:
    ident = plan.identity
    return {
        "run_id": plan.run_id,
        "benchmark": benchmark,
        "model_id": ident.get("model_id"),
        "model_url": ident.get("model_url"),
        "protocol": ident.get("protocol"),
        "identity_hash": plan.identity_hash,
        "identity": ident,
        "config": config,
        "n_tasks": plan.n_tasks,
        "n_repeats": plan.n_repeats,
        "problem_start": plan.problem_start,
        "problem_end": plan.problem_end,
        "total_shards": plan.shard.total,
        "created_at": plan.created_at,
        "nel_version": __version__,
    }
