"""Re-score a stored run with no model calls (NeMo Gym's "reverify rollouts", inspect's "rescore").

The responses of run ``R`` are verified again — by the benchmark's own scorer (after a
scorer fix) or by another named scorer — into a new run linked to ``R`` through its
identity (``reverified_from``) and config. The original run is left untouched, so the
two can be compared task by task.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from workbench import __version__
from workbench.engine.identity import identity_hash
from workbench.engine.verdicts import answer_category, verify_safely
from workbench.environments import get_environment
from workbench.errors import UsageError
from workbench.model.failures import NO_ANSWER_CATEGORIES
from workbench.scoring import get_scorer, scorer_names
from workbench.store.ingest import ingest
from workbench.store.reader import Store
from workbench.store.writer import ShardWriter
from workbench.types import RunStatus, VerifyResult

_BATCH = 1024


@dataclass(frozen=True, slots=True)
class ReverifyResult:
    source_run: str
    run_id: str
    n_steps: int
    n_rescored: int
    n_changed: int


def _loads(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def reverify_run(store: Path, run_id: str, scorer: str | None = None,
                 params: dict[str, Any] | None = None) -> ReverifyResult:
    """Verify every stored response of ``run_id`` again into a new run; return what changed.

    ``scorer`` replaces the benchmark's own scorer; ``params`` sets that scorer's parameters
    (``-O scoring.abs_tol=0.01``). The new run has that one metric: metrics the original run also
    computed (a judge among them) are not carried over, since recomputing a judge needs model calls.
    """
    reader = Store(store)
    runs = reader.dicts("SELECT * FROM runs WHERE run_id = ?", [run_id])
    if not runs:
        raise UsageError(f"{reader.path}: no run {run_id!r} in this store")
    run = runs[0]
    identity = _loads(run["identity"])
    env = get_environment(run["benchmark"])
    if identity.get("data_hash") != env.data_hash:
        raise UsageError(f"run {run_id}: benchmark {run['benchmark']!r} changed since the run (its data or prompt); "
                         "reverify needs the data the responses answered")
    verify: Callable[..., VerifyResult]
    own = str(env.describe().get("scorer") or "")
    if params and scorer is None and own not in scorer_names():
        raise UsageError(f"-O scoring.{next(iter(params))}: benchmark {env.name!r} scores with its own scorer, which "
                         f"takes no parameters; pick a library scorer with --scorer ({', '.join(scorer_names())})")
    if scorer is None and not params:
        verify = env.verify
    else:
        score = get_scorer(scorer or own, params)  # an unknown name lists the known scorers

        def verify(response: str, expected: str, **_: Any) -> VerifyResult:
            return score(response, expected)

    metric = scorer or own or "reward"
    new_identity = {**identity, "reverified_from": run_id, "scorer": scorer}
    if params:
        new_identity["scorer_params"] = dict(sorted(params.items()))
    new_identity.pop("metrics", None)
    new_id = f"{run_id}-rv-{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(2)}"
    tasks = reader.dicts(
        "SELECT rt.run_id, rt.task_idx, rt.task_id, t.benchmark, t.prompt, t.expected_answer, t.metadata "
        "FROM run_tasks rt JOIN tasks t USING (task_id) WHERE rt.run_id = ? ORDER BY rt.task_idx", [run_id],
    )
    for task in tasks:
        task["run_id"] = new_id
        task["metadata"] = None if task["metadata"] is None else str(task["metadata"])
    writer = ShardWriter(store, new_id, 0)
    writer.begin(
        {
            **{k: run[k] for k in ("benchmark", "model_id", "model_url", "protocol", "n_tasks", "n_repeats",
                                   "problem_start", "problem_end")},
            "run_id": new_id,
            "identity_hash": identity_hash(new_identity),
            "identity": new_identity,
            "config": {**(_loads(run["config"]) or {}), "reverified_from": run_id, "scorer": scorer,
                       "scorer_params": params or {}, "primary_metric": metric, "metrics": [metric]},
            "total_shards": 1,
            "created_at": time.time(),
            "nel_version": __version__,
        },
        {"shard_idx": 0, "total_shards": 1, "problem_start": run["problem_start"], "problem_end": run["problem_end"]},
        tasks,
    )
    counts = {"steps": 0, "rescored": 0, "changed": 0}

    def rescore(cur: Any) -> None:
        names = [d[0] for d in cur.description]
        while batch := cur.fetchmany(_BATCH):
            for values in batch:
                writer.append(_rescored(dict(zip(names, values, strict=True)), new_id, verify, counts))

    try:
        reader.query("SELECT * FROM steps WHERE run_id = ? ORDER BY task_idx, repeat", [run_id], rescore)
    except BaseException:
        writer.finish(RunStatus.FAILED, "reverify stopped")
        raise
    writer.finish(RunStatus.COMPLETE)
    ingest(store)
    return ReverifyResult(run_id, new_id, counts["steps"], counts["rescored"], counts["changed"])


def _rescored(step: dict[str, Any], new_id: str, verify: Callable[..., VerifyResult],
              counts: dict[str, int]) -> dict[str, Any]:
    counts["steps"] += 1
    row = dict(step)
    row["run_id"] = new_id
    started = row["started_at"]
    row["started_at"] = started.replace(tzinfo=UTC).timestamp() if isinstance(started, datetime) else started
    row["scores"] = None  # the new run has one metric, in reward
    for key in ("messages", "tool_calls", "scoring_details", "metadata"):
        if row[key] is not None:
            row[key] = str(row[key])
    if row["failure_category"] in NO_ANSWER_CATEGORIES:
        return row  # no response came back: nothing to score again (a scorer_error's response is scored again)
    response = row["response"] or ""
    t0 = time.perf_counter()
    verdict = verify_safely(verify, response, row["expected_answer"] or "", _loads(row["metadata"]) or {})
    verify_ms = (time.perf_counter() - t0) * 1000.0
    counts["rescored"] += 1
    counts["changed"] += float(verdict.reward) != step["reward"]
    row.update(
        reward=float(verdict.reward),
        passed=verdict.reward >= 1.0,
        extracted_answer=verdict.extracted_answer,
        scoring_method=verdict.scoring_details.get("method"),
        scoring_details=orjson.dumps(verdict.scoring_details).decode(),
        failure_category=answer_category(response, verdict),
        verify_ms=verify_ms,
        latency_ms=(row["seed_ms"] or 0.0) + (row["model_ms"] or 0.0) + verify_ms,
    )
    return row
