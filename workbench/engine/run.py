"""The evaluation loop: seed → model → verify, concurrently, every step persisted.

``run_evaluation`` is the one entry point the CLI, the TUI, the server and the
shard workers call. Work is pulled lazily from a generator (a run is never held
in memory); each of ``max_concurrent`` workers owns its model connection and
appends each finished step to the shard's journal before taking the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from workbench.engine.attempts import AttemptWorker, RemoteEnvironmentLike
from workbench.engine.metrics import MetricSuite, MetricWorker
from workbench.engine.plan import RunPlan, plan_run, run_header
from workbench.engine.progress import RunProgress, StepListener
from workbench.engine.sharding import Shard
from workbench.environments.base import EvalEnvironment, SeedResult, VerifyResult
from workbench.errors import RunFailed, UsageError
from workbench.model.client import FatalModelError
from workbench.model.failures import classify_answer
from workbench.solvers.base import AttemptContext, Solver, SolverOutput, SolverWorker
from workbench.solvers.tool_calling import tool_failures
from workbench.store.ingest import ingest
from workbench.store.writer import ShardWriter

# A run aborts when this many attempts in a row got no HTTP answer at all (the
# endpoint went away); those attempts are not recorded, so --resume retries them.
_DEAD_ENDPOINT_STREAK = 32


@dataclass(frozen=True, slots=True)
class RunResult:
    run_id: str
    store: Path
    shard: Shard
    status: str
    steps_written: int
    steps_skipped: int
    shard_steps: int
    elapsed_s: float
    ingested: bool


WorkItem = tuple[int, int, SeedResult, float]


def _work(env: EvalEnvironment, plan: RunPlan) -> Iterator[WorkItem]:
    """Attempts still to do, task by task; each task is seeded once for all its repeats."""
    for idx in range(plan.shard_start, plan.shard_end):
        todo = [r for r in range(plan.n_repeats) if (idx, r) not in plan.done]
        if not todo:
            continue
        t0 = time.perf_counter()
        seed = env.seed(idx)
        seed_ms = (time.perf_counter() - t0) * 1000.0
        for r in todo:
            yield idx, r, seed, seed_ms


def _dumps(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _step_row(
    plan: RunPlan, idx: int, rep: int, seed: SeedResult, seed_ms: float, started_at: float,
    out: SolverOutput, verdict: VerifyResult, model_ms: float, verify_ms: float, scores: dict[str, Any] | None,
) -> dict[str, Any]:
    m = out.model
    category = (m.failure or verdict.metadata.get("failure_category")
                or classify_answer(out.response, verdict.reward, verdict.extracted_answer))
    details = verdict.scoring_details
    failures = tool_failures(out.turns)
    if failures:  # an agent's failure, attributed: "bash exited 1 on turn 3"
        details = {**details, "tool_failures": failures}
    return {
        "run_id": plan.run_id,
        "task_idx": idx,
        "repeat": rep,
        "task_id": seed.task_id,
        "shard_idx": plan.shard.idx,
        "started_at": started_at,
        "prompt": seed.prompt,
        "messages": _dumps(out.messages),
        "response": out.response,
        "reasoning": m.reasoning,
        "finish_reason": m.finish_reason,
        "tool_calls": _dumps(m.tool_calls),
        "reward": float(verdict.reward),
        "passed": verdict.reward >= 1.0,
        "expected_answer": seed.expected_answer,
        "extracted_answer": verdict.extracted_answer,
        "scoring_method": details.get("method"),
        "scoring_details": _dumps(details),
        "failure_category": category,
        "error": m.error,
        "http_status": m.http_status,
        "n_retries": m.n_retries,
        "prompt_tokens": m.prompt_tokens,
        "completion_tokens": m.completion_tokens,
        "total_tokens": m.total_tokens,
        "reasoning_tokens": m.reasoning_tokens,
        "latency_ms": seed_ms + model_ms + verify_ms,
        "seed_ms": seed_ms,
        "model_ms": model_ms,
        "verify_ms": verify_ms,
        "request_hash": out.request_hash,
        "request_seed": out.request_seed,
        "response_id": m.response_id,
        "metadata": _dumps(seed.metadata or None),
        "scores": _dumps(scores),
        "turns": _dumps(out.turns),
    }


def _no_answer(out: SolverOutput) -> VerifyResult:
    return VerifyResult(0.0, None, {"method": "none", "reason": f"no response: {out.model.error}"})


class _Loop:
    """Shared state of one run's workers."""

    def __init__(
        self, env: EvalEnvironment, plan: RunPlan, writer: ShardWriter, progress: RunProgress,
        listeners: Sequence[StepListener],
    ) -> None:
        self.env = env
        self.plan = plan
        self.writer = writer
        self.progress = progress
        self.listeners = listeners
        self.work = _work(env, plan)
        self.unreachable: list[dict[str, Any]] = []  # held back while the endpoint looks dead

    def _emit(self, row: dict[str, Any]) -> None:
        self.writer.append(row)
        self.progress.record(row)
        for listener in self.listeners:
            listener(self.progress, row)

    def commit(self, row: dict[str, Any]) -> None:
        if row["http_status"] is None and row["failure_category"] == "server_error":
            self.unreachable.append(row)
            if len(self.unreachable) >= _DEAD_ENDPOINT_STREAK:
                raise RunFailed(
                    f"the model endpoint stopped answering: {len(self.unreachable)} attempts in a row failed "
                    f"({row['error']}); completed steps are kept, rerun with --resume to continue"
                )
            return
        for held in self.unreachable:
            self._emit(held)
        self.unreachable.clear()
        self._emit(row)

    def flush_held(self) -> None:
        for held in self.unreachable:
            self._emit(held)
        self.unreachable.clear()

    async def worker(self, solver_worker: SolverWorker, metric_worker: MetricWorker | None,
                     attempts: AttemptWorker | None = None) -> None:
        env, plan = self.env, self.plan
        for idx, rep, seed, seed_ms in self.work:
            started_at = time.time()
            remote = None if attempts is None else await attempts.begin(seed, rep)
            try:
                t0 = time.perf_counter()
                out = await solver_worker.solve(seed, rep, remote if isinstance(remote, AttemptContext) else None)
                t1 = time.perf_counter()
                scores = None
                if metric_worker is not None:
                    verdict, scores = await metric_worker.score(seed, out)
                elif out.model.failure is not None:
                    verdict = _no_answer(out)
                elif remote is not None:
                    verdict = await remote.verify(out.response, out.model)
                else:
                    verdict = env.verify(out.response, seed.expected_answer, **seed.metadata)
                t2 = time.perf_counter()
            finally:
                close = getattr(remote, "close", None)
                if close is not None:  # an attempt's sandbox goes, whatever happened (Ctrl-C included)
                    await close()
            row = _step_row(plan, idx, rep, seed, seed_ms + (remote.seed_ms if remote else 0.0), started_at, out,
                            verdict, (t1 - t0) * 1000.0, (t2 - t1) * 1000.0, scores)
            self.commit(row)


async def _run_worker(loop: _Loop, solver: Solver, metrics: MetricSuite | None) -> None:
    async with contextlib.AsyncExitStack() as stack:
        w = await stack.enter_async_context(solver.worker())
        m = None if metrics is None else await stack.enter_async_context(metrics.worker())
        a = (await stack.enter_async_context(loop.env.attempt_worker())
             if isinstance(loop.env, RemoteEnvironmentLike) else None)
        await loop.worker(w, m, a)


async def run_evaluation(
    env: EvalEnvironment,
    solver: Solver,
    *,
    store: Path,
    n_repeats: int = 1,
    max_problems: int | None = None,
    problem_range: tuple[int, int] | None = None,
    max_concurrent: int = 64,
    shard: Shard | None = None,
    run_id: str | None = None,
    resume: bool = False,
    resume_key: str | None = None,
    listeners: Sequence[StepListener] = (),
    config: dict[str, Any] | None = None,
    ingest_at_end: bool | None = None,
    preflight: bool = True,
    on_start: Callable[[RunProgress, RunPlan], None] | None = None,
    metrics: MetricSuite | None = None,
) -> RunResult:
    """Evaluate ``env`` with ``solver`` into ``store``; see the module docstring.

    ``resume_key`` names where the run was configured (a suite entry); ``--resume`` continues
    the newest run with the same key. ``metrics`` scores each response with several metrics
    (the benchmark's own scorer alone when ``None``). Raises ``RunFailed`` when the model cannot be
    reached or refuses every request (completed steps stay in the store), ``UsageError`` for bad
    arguments or a ``--resume`` whose configuration differs from the stored run.
    """
    shard = shard or Shard()
    if max_concurrent < 1:
        raise UsageError(f"--max-concurrent must be at least 1, got {max_concurrent}")
    if getattr(env, "requires_sandbox", False):
        raise UsageError(f"{env.name}: every attempt needs a sandbox (its code is run, or its files inspected): give "
                         "the run one with --sandbox docker|local, or sandbox: in a config")
    identity = {"benchmark": env.name, "data_hash": env.data_hash, **solver.identity()}
    sandbox_identity = getattr(env, "sandbox_identity", None)
    if callable(sandbox_identity):
        identity["sandbox"] = sandbox_identity()
    if metrics is not None:
        identity["metrics"] = metrics.identity()
    primary = metrics.primary if metrics is not None else str(env.describe().get("scorer") or "reward")
    scoring_config = {"primary_metric": primary, "metrics": metrics.names if metrics is not None else [primary]}
    plan = plan_run(
        store=store, identity=identity, benchmark=env.name, size=len(env), n_repeats=n_repeats,
        max_problems=max_problems, problem_range=problem_range, shard=shard, run_id=run_id, resume=resume,
        resume_key=resume_key,
    )
    remaining = plan.shard_steps - len(plan.done)
    if preflight and remaining > 0:
        await solver.preflight()
        if metrics is not None:
            await metrics.preflight()
    writer = ShardWriter(store, plan.run_id, shard.idx)
    tasks = []
    for idx in range(plan.shard_start, plan.shard_end):
        seed = env.seed(idx)
        tasks.append({
            "run_id": plan.run_id, "task_idx": idx, "task_id": seed.task_id, "benchmark": env.name,
            "prompt": seed.prompt, "expected_answer": seed.expected_answer, "metadata": _dumps(seed.metadata),
        })
    writer.begin(
        run_header(plan, env.name, {"max_concurrent": max_concurrent, "resume_key": resume_key, **scoring_config,
                                    **(config or {})}),
        {"shard_idx": shard.idx, "total_shards": shard.total, "problem_start": plan.shard_start,
         "problem_end": plan.shard_end},
        tasks,
    )
    del tasks
    progress = RunProgress(run_id=plan.run_id, total=plan.shard_steps, already_done=len(plan.done))
    if on_start is not None:
        on_start(progress, plan)
    loop = _Loop(env, plan, writer, progress, listeners)
    started = time.monotonic()
    status, error = "complete", None
    try:
        n_workers = max(1, min(max_concurrent, remaining))
        async with asyncio.TaskGroup() as group:
            for _ in range(n_workers if remaining > 0 else 0):
                group.create_task(_run_worker(loop, solver, metrics))
        loop.flush_held()
    except BaseException as exc:
        status, error, cause = _classify_stop(exc)
        writer.finish(status, error)
        progress.finished = True
        _maybe_ingest(store, shard, ingest_at_end)
        if cause is not None:
            raise cause from None
        raise
    writer.finish(status, error)
    progress.finished = True
    ingested = _maybe_ingest(store, shard, ingest_at_end)
    return RunResult(
        run_id=plan.run_id, store=store, shard=shard, status=status, steps_written=progress.done,
        steps_skipped=len(plan.done), shard_steps=plan.shard_steps, elapsed_s=time.monotonic() - started,
        ingested=ingested,
    )


def _classify_stop(exc: BaseException) -> tuple[str, str | None, BaseException | None]:
    """Map why the loop stopped to a shard status and the exception to surface."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = list(_leaves(exc))
        for leaf in leaves:
            if isinstance(leaf, FatalModelError):
                return "failed", str(leaf), RunFailed(str(leaf))
        for leaf in leaves:
            if isinstance(leaf, RunFailed):
                return "failed", str(leaf), leaf
        for leaf in leaves:
            if not isinstance(leaf, asyncio.CancelledError | KeyboardInterrupt):
                return "failed", f"{type(leaf).__name__}: {leaf}", leaf
        return "interrupted", None, None
    if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
        return "interrupted", None, None
    return "failed", f"{type(exc).__name__}: {exc}", None


def _leaves(group: BaseExceptionGroup) -> Iterator[BaseException]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc


def _release_memory() -> None:
    """Hand freed heap back to the OS before ingest, so the run's peak RSS is not the
    loop's high-water mark plus DuckDB's working memory."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _maybe_ingest(store: Path, shard: Shard, ingest_at_end: bool | None) -> bool:
    if ingest_at_end is False or (ingest_at_end is None and shard.sharded):
        return False
    _release_memory()
    ingest(store)
    return True
