"""``run_evaluation``: NeMo Evaluator's evaluation call, run by nel's engine into a store.

``bundle = await run_evaluation(env, ChatSolver(client), n_repeats=4)`` evaluates through
``workbench.engine.run_evaluation`` (the loop ``nel eval run`` uses: every step journalled, resumable, shardable),
then returns the run's bundle: the same dict ``nel eval run`` exports as ``eval-{run_id}.json`` (pass@k with
intervals, scores per metric, categories, runtime and failure analysis), plus where the store is, so
``write_all(bundle, dir)`` can write the other artifacts from it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from workbench.engine import Shard
from workbench.engine import run_evaluation as engine_run
from workbench.environments import EvalEnvironment, get_environment
from workbench.export.artifacts import build_eval_bundle
from workbench.runs import writable_dir
from workbench.solvers.base import Solver
from workbench.spec.models import Output
from workbench.store import open_store
from workbench.store.layout import resolve_store_path

STORE_VARIABLE = "NEL_STORE"


def default_store() -> Path:
    """Where a run goes when no ``store=`` is given: as for ``nel eval run``, ``$NEL_STORE`` or
    ``nel-results/nel.duckdb``."""
    named = os.environ.get(STORE_VARIABLE)
    return resolve_store_path(named) if named else Path(Output().dir) / "nel.duckdb"


async def run_evaluation(
    env: EvalEnvironment | str,
    solver: Solver,
    n_repeats: int = 1,
    max_problems: int | None = None,
    config: dict[str, Any] | None = None,
    problem_range: tuple[int, int] | None = None,
    max_concurrent: int = 32,
    shard_info: tuple[int, int] | None = None,
    *,
    store: str | Path | None = None,
    run_id: str | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Evaluate ``env`` (an environment, or a benchmark's name) with ``solver`` and return the run's bundle.

    ``config`` is the caller's own metadata, kept with the run (``bundle["config"]["run"]["user"]``).
    ``shard_info=(idx, total)`` evaluates that shard's slice of the problems (of ``problem_range`` when given);
    the shards of one run share its id and store (merge them with ``nel eval merge``). A solver that bounds its
    requests (``ChatSolver``: its client's ``max_concurrent``) bounds the run's concurrency too.
    ``resume=True`` continues the newest run of the same configuration (or ``run_id``) in ``store``.

    Raises ``UsageError`` for bad arguments, ``RunFailed`` when the model cannot be reached.
    """
    environment = get_environment(env) if isinstance(env, str) else env
    store_path = resolve_store_path(store) if store is not None else default_store()
    writable_dir(store_path.parent, "store directory")
    bound = getattr(solver, "max_concurrent", None)
    concurrency = min(max_concurrent, bound) if isinstance(bound, int) else max_concurrent
    shard = Shard(*shard_info) if shard_info is not None else None
    result = await engine_run(
        environment, solver, store=store_path, n_repeats=n_repeats, max_problems=max_problems,
        problem_range=problem_range, max_concurrent=concurrency, shard=shard, run_id=run_id, resume=resume,
        config={"user": config} if config else None)
    with open_store(store_path, runs=[result.run_id]).pinned() as s:
        bundle = build_eval_bundle(s, result.run_id)
    bundle["store"] = str(store_path)
    bundle["error"] = result.error
    bundle["elapsed_s"] = result.elapsed_s
    return bundle
