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

from workbench.engine.attempts import AttemptWorker
from workbench.engine.metrics import MetricSuite, MetricWorker, check_judged
from workbench.engine.plan import RunPlan, plan_run, run_header
from workbench.engine.progress import RunProgress, StepListener
from workbench.engine.sharding import Shard
from workbench.engine.verdicts import answer_category, scorer_failed
from workbench.engine.verify_pool import ScoringUnavailable, Verifier, default_verifier
from workbench.environments.base import EvalEnvironment, too_long
from workbench.errors import NelError, RunFailed, UsageError
from workbench.limits import MAX_CONCURRENT
from workbench.model.client import FatalModelError
from workbench.model.failures import ERROR_CATEGORIES
from workbench.model.interceptors import enter_attempt, leave_attempt
from workbench.solvers.base import Solver, SolverOutput, SolverWorker
from workbench.solvers.tool_calling import tool_failures
from workbench.store.background import BackgroundIngest
from workbench.store.images import IMAGES_DIR
from workbench.store.ingest import ingest
from workbench.store.writer import ShardWriter
from workbench.types import RunStatus, SeedResult, Step, VerifyResult

# A run aborts when this many attempts in a row got no HTTP answer at all (the
# endpoint went away); those attempts are not recorded, so --resume retries them.
_DEAD_ENDPOINT_STREAK = 32


DEFAULT_MAX_ERROR_RATE = 0.5
"""A run whose attempts mostly reached no verdict measured the endpoint or the scorer, not the model: it is
``failed`` (exit 1) rather than ``complete`` with a meaningless pass@1."""


def check_error_rate(value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise UsageError(f"--max-error-rate: expected a fraction from 0 to 1, got {value}")
    return value


def error_rate_verdict(n_errors: int, n_steps: int, max_error_rate: float) -> str | None:
    """Why a shard with ``n_errors`` errored attempts of ``n_steps`` fails (None when it does not): more than
    ``max_error_rate`` of them errored (with 1.0, never)."""
    if n_steps == 0 or n_errors / n_steps <= max_error_rate:
        return None
    return (f"{n_errors} of {n_steps} attempts errored ({n_errors / n_steps:.0%}), more than --max-error-rate "
            f"{max_error_rate:g}: the results do not measure the model; see the failure categories, then fix the "
            "endpoint or scorer and rerun with --resume --retry-errors")


@dataclass(frozen=True, slots=True)
class RunResult:
    run_id: str
    store: Path
    shard: Shard
    status: RunStatus
    steps_written: int
    steps_skipped: int
    shard_steps: int
    elapsed_s: float
    ingested: bool
    n_errors: int = 0
    """Steps of the shard (kept from before and new) that reached no verdict (``ERROR_CATEGORIES``)."""
    error: str | None = None
    """Why the shard is not ``complete`` (e.g. too many errored attempts), or None."""
    ingest_job: BackgroundIngest | None = None
    """The ingest still running in a thread (``ingest_in_background``); ``ingested`` is True then, and the caller
    reads the run from its files, then joins it."""

    @property
    def n_steps(self) -> int:
        return self.steps_written + self.steps_skipped


WorkItem = tuple[int, int, SeedResult, float]


def _work(env: EvalEnvironment, plan: RunPlan, writer: ShardWriter | None = None) -> Iterator[WorkItem]:
    """Attempts still to do, task by task; each task is seeded once for all its repeats, and recorded in the
    shard as it is (a task whose every attempt is done already is not seeded again)."""
    for idx in range(plan.shard_start, plan.shard_end):
        todo = (r for r in range(plan.n_repeats) if (idx, r) not in plan.done)  # lazily: repeats may be many
        first = next(todo, None)
        if first is None:
            continue
        t0 = time.perf_counter()
        seed = env.seed(idx)
        seed_ms = (time.perf_counter() - t0) * 1000.0
        if writer is not None:
            writer.add_task({"run_id": plan.run_id, "task_idx": idx, "task_id": seed.task_id, "benchmark": env.name,
                             "prompt": seed.prompt, "expected_answer": seed.expected_answer,
                             "metadata": _dumps(seed.metadata)})
        yield idx, first, seed, seed_ms
        for r in todo:
            yield idx, r, seed, seed_ms


def _dumps(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _step_row(
    plan: RunPlan, idx: int, rep: int, seed: SeedResult, seed_ms: float, started_at: float,
    out: SolverOutput, verdict: VerifyResult, model_ms: float, verify_ms: float, scores: dict[str, Any] | None,
) -> Step:
    m = out.model
    category = m.failure if m.failure is not None else answer_category(out.response, verdict)
    details = verdict.scoring_details
    failures = tool_failures(out.turns)
    if failures:  # an agent's failure, attributed: "bash exited 1 on turn 3"
        details = {**details, "tool_failures": failures}
    if m.cache is not None:  # the cache interceptor replayed the answer (hit) or learnt it (miss)
        details = {**details, "cache": m.cache}
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
        "attempt": plan.retry.get((idx, rep), 0),
    }


def _no_answer(out: SolverOutput) -> VerifyResult:
    return VerifyResult(0.0, None, {"method": "none", "reason": f"no response: {out.model.error}"})


class _Loop:
    """Shared state of one run's workers."""

    def __init__(
        self, env: EvalEnvironment, plan: RunPlan, writer: ShardWriter, progress: RunProgress,
        listeners: Sequence[StepListener], verifier: Verifier,
    ) -> None:
        self.env = env
        self.plan = plan
        self.writer = writer
        self.progress = progress
        self.listeners = listeners
        self.verifier = verifier
        self.work = _work(env, plan, writer)
        self.unreachable: list[Step] = []  # held back while the endpoint looks dead
        self.n_errors = 0  # attempts of this session that reached no verdict (ERROR_CATEGORIES)

    def _emit(self, row: Step) -> None:
        try:
            self.writer.append(row)
        except OSError as exc:  # a full disk, a store directory gone: the steps written so far are kept
            raise RunFailed(f"{self.writer.journal_path}: cannot write the step ({exc.strerror or exc}); "
                            "completed steps are kept: make room, then rerun with --resume") from None
        self.n_errors += row["failure_category"] in ERROR_CATEGORIES
        self.progress.record(row)
        for listener in self.listeners:
            listener(self.progress, row)

    def commit(self, row: Step) -> None:
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
            scope = enter_attempt(seed.task_id, rep)  # the interceptors' per-attempt state (turn_counter's turns)
            try:
                t0 = time.perf_counter()
                out = await solver_worker.solve(seed, rep, remote)
                t1 = time.perf_counter()
                scores = None
                limit = env.max_response_chars
                try:
                    if out.model.failure is None and limit is not None and len(out.response) > limit:
                        verdict = too_long(len(out.response), limit)  # scoring it would stall the event loop
                    elif metric_worker is not None:
                        verdict, scores = await metric_worker.score(seed, out)
                    elif out.model.failure is not None:
                        verdict = _no_answer(out)
                    elif remote is not None:
                        verdict = await remote.verify(out.response, out.model)
                    else:  # off the event loop, as the environment's scoring asks (workbench.engine.verify_pool)
                        verdict = await self.verifier.verify(out.response, seed.expected_answer, dict(seed.metadata))
                except NelError:  # a deliberate stop (a remote verifier refusing every row says so in its words)
                    raise
                except ScoringUnavailable as exc:  # the benchmark cannot score here at all
                    raise RunFailed(f"{env.name}: {exc}") from None
                except Exception as exc:  # one response the scorer cannot take does not end the run
                    verdict = scorer_failed(exc)
                t2 = time.perf_counter()
            finally:
                leave_attempt(scope)
                if remote is not None:  # an attempt's sandbox goes, whatever happened (Ctrl-C included)
                    await remote.close()
            row = _step_row(plan, idx, rep, seed, seed_ms + (remote.seed_ms if remote else 0.0), started_at, out,
                            verdict, (t1 - t0) * 1000.0, (t2 - t1) * 1000.0, scores)
            self.commit(row)


async def _run_worker(loop: _Loop, solver: Solver, metrics: MetricSuite | None) -> None:
    async with contextlib.AsyncExitStack() as stack:
        w = await stack.enter_async_context(solver.worker())
        m = None if metrics is None else await stack.enter_async_context(metrics.worker())
        a = (await stack.enter_async_context(loop.env.attempt_worker())
             if loop.env.capabilities.remote_attempts else None)
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
    ingest_in_background: bool = False,
    preflight: bool = True,
    on_start: Callable[[RunProgress, RunPlan], None] | None = None,
    metrics: MetricSuite | None = None,
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
    retry_errors: bool = False,
    verifier: Verifier | None = None,
) -> RunResult:
    """Evaluate ``env`` with ``solver`` into ``store``; see the module docstring.

    ``resume_key`` names where the run was configured (a suite entry); ``--resume`` continues
    the newest run with the same key. ``metrics`` scores each response with several metrics
    (the benchmark's own scorer alone when ``None``). The shard is ``failed`` when more than ``max_error_rate``
    of its attempts reached no verdict (see ``error_rate_verdict``); ``retry_errors`` (with ``resume``) attempts
    again the steps that ended in a transport or server failure. ``verifier`` runs ``env.verify`` (default: as
    the environment's ``capabilities.scoring`` asks, a CPU-heavy scorer in threads unless the caller gives a
    process pool; ``workbench.engine.verify_pool``). Raises ``RunFailed`` when the model cannot be
    reached or refuses every request (completed steps stay in the store), ``UsageError`` for bad
    arguments or a ``--resume`` whose configuration differs from the stored run.
    """
    shard = shard or Shard()
    if max_concurrent < 1:
        raise UsageError(f"--max-concurrent must be at least 1, got {max_concurrent}")
    MAX_CONCURRENT.check("max_concurrent", max_concurrent)
    check_error_rate(max_error_rate)
    if retry_errors and not resume:
        raise UsageError("--retry-errors: only with --resume (it attempts again the errored steps of a stored run)")
    if env.requires_sandbox:
        raise UsageError(f"{env.name}: every attempt needs a sandbox (its code is run, or its files inspected): give "
                         "the run one with --sandbox docker|local, or sandbox: in a config")
    check_judged(env, metrics)
    identity = {"benchmark": env.name, "data_hash": env.data_hash, **solver.identity()}
    if env.dataset_identity is not None:  # a hub dataset: a new upstream commit is a different experiment
        identity["dataset"] = env.dataset_identity["source"]
        identity["dataset_revision"] = env.dataset_identity["revision"]
    if env.capabilities.sandboxed:
        identity["sandbox"] = env.sandbox_identity()
    if metrics is not None:
        identity["metrics"] = metrics.identity()
    primary = metrics.primary if metrics is not None else str(env.describe().get("scorer") or "reward")
    scoring_config = {"primary_metric": primary, "metrics": metrics.names if metrics is not None else [primary]}
    plan = plan_run(
        store=store, identity=identity, benchmark=env.name, size=len(env), n_repeats=n_repeats,
        max_problems=max_problems, problem_range=problem_range, shard=shard, run_id=run_id, resume=resume,
        resume_key=resume_key, retry_errors=retry_errors,
    )
    remaining = plan.shard_steps - len(plan.done)
    if preflight and remaining > 0:
        await solver.preflight()
        if metrics is not None:
            await metrics.preflight()
    writer = ShardWriter(store, plan.run_id, shard.idx)
    writer.begin(
        run_header(plan, env.name, {"max_concurrent": max_concurrent, "resume_key": resume_key, **scoring_config,
                                    **(config or {})}),
        {"shard_idx": shard.idx, "total_shards": shard.total, "problem_start": plan.shard_start,
         "problem_end": plan.shard_end, **({"retries": True} if plan.retry else {})},
    )
    progress = RunProgress(run_id=plan.run_id, total=plan.shard_steps, already_done=len(plan.done))
    if on_start is not None:
        on_start(progress, plan)
    loop = _Loop(env, plan, writer, progress, listeners,
                 verifier or default_verifier(env, threads=max(1, min(max_concurrent, 64))))
    started = time.monotonic()
    status, error = RunStatus.COMPLETE, None
    try:
        n_workers = max(1, min(max_concurrent, remaining))
        async with asyncio.TaskGroup() as group:
            for _ in range(n_workers if remaining > 0 else 0):
                group.create_task(_run_worker(loop, solver, metrics))
        loop.flush_held()
        n_errors = plan.done_errors + loop.n_errors
        error = error_rate_verdict(n_errors, len(plan.done) + progress.done, max_error_rate)
        if error is not None:
            status = RunStatus.FAILED
    except BaseException as exc:
        status, error, cause = _classify_stop(exc)
        with contextlib.suppress(OSError, NelError):  # the disk may be full: the first error is the one to tell
            writer.finish(status, error)
            progress.finished = True
            _maybe_ingest(store, shard, ingest_at_end, progress.done)
        if cause is not None:
            raise cause from None
        raise
    background = ingest_in_background and ingest_at_end is not False and _all_in_files(plan, writer, progress.done)
    try:
        writer.finish(status, error)
    except OSError as exc:
        raise RunFailed(f"{writer.dir.shard_json}: cannot record the shard's end ({exc.strerror or exc}); its steps "
                        "are kept: make room, then rerun with --resume") from None
    progress.finished = True
    job = BackgroundIngest(store, plan.run_id) if background else None
    ingested = job is not None or _maybe_ingest(store, shard, ingest_at_end, progress.done)
    return RunResult(
        run_id=plan.run_id, store=store, shard=shard, status=status, steps_written=progress.done,
        steps_skipped=len(plan.done), shard_steps=plan.shard_steps, elapsed_s=time.monotonic() - started,
        ingested=ingested, n_errors=n_errors, error=error, ingest_job=job,
    )


def _classify_stop(exc: BaseException) -> tuple[RunStatus, str | None, BaseException | None]:
    """Map why the loop stopped to a shard status and the exception to surface."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = list(_leaves(exc))
        for leaf in leaves:
            if isinstance(leaf, FatalModelError):
                return RunStatus.FAILED, str(leaf), RunFailed(str(leaf))
        for leaf in leaves:
            if isinstance(leaf, RunFailed):
                return RunStatus.FAILED, str(leaf), leaf
        for leaf in leaves:
            if not isinstance(leaf, asyncio.CancelledError | KeyboardInterrupt):
                return RunStatus.FAILED, f"{type(leaf).__name__}: {leaf}", leaf
        return RunStatus.INTERRUPTED, None, None
    if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
        return RunStatus.INTERRUPTED, None, None
    return RunStatus.FAILED, f"{type(exc).__name__}: {exc}", None


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


BACKGROUND_INGEST_MAX_STEPS = 10_000
BACKGROUND_INGEST_MAX_BYTES = 32 << 20
"""The largest run whose steps its summary and export read from its files into memory while the ingest runs: in
steps, and in bytes of its shard files (Parquet and JSON lines; a few times that in memory, under the reader's
256 MB budget)."""


def _all_in_files(plan: RunPlan, writer: ShardWriter, steps: int) -> bool:
    """Whether the run is whole in this shard's files (one shard, nothing stored before), small enough to hold in
    memory and without images (a reader finds those in the database only): then its summary and export can read it
    there during the ingest."""
    if plan.shard.sharded or plan.done or plan.retry or not 0 < steps <= BACKGROUND_INGEST_MAX_STEPS:
        return False
    files = list(writer.dir.path.iterdir())
    return (not any(f.name == IMAGES_DIR for f in files)
            and sum(f.stat().st_size for f in files if f.is_file()) <= BACKGROUND_INGEST_MAX_BYTES)


RELEASE_AFTER_STEPS = 10_000
"""Below this many steps the loop's heap is small: a collection before ingest (~20 ms) would only cost time."""


def _maybe_ingest(store: Path, shard: Shard, ingest_at_end: bool | None, steps: int) -> bool:
    if ingest_at_end is False or (ingest_at_end is None and shard.sharded):
        return False
    if steps >= RELEASE_AFTER_STEPS:
        _release_memory()
    ingest(store)
    return True
