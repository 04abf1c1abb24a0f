"""The composition root: a ``RunSpec``'s benchmark, evaluated, with its files written.

``run_benchmark`` resolves what a benchmark of the spec names — the environment (a registered name, a BYOB
file, a ``gym://`` URL), the solver (one model call, or the tool-calling agent loop), the sandboxes, the
metrics — and calls ``run_evaluation``; then it writes the run's ``summary.json`` and, once the run is in the
database, its artifacts. The CLI parses and prints around it; the TUI's background runs, every shard worker and
the demo call the same function, so a run is assembled in one place.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from workbench.analysis.run_summary import RunSummary, summarize
from workbench.engine import RunProgress, RunResult, Shard, run_evaluation, shard_from_env
from workbench.engine.metrics import MetricSuite
from workbench.engine.plan import RunPlan
from workbench.engine.verify_pool import EnvSource, ProcessScoring, Scoring, default_workers
from workbench.environments import EvalEnvironment, get_environment
from workbench.errors import NelError, UsageError, path_error
from workbench.export.artifacts import ExportResult, export_run, run_summary, write_summary_json
from workbench.export.targets import export_after_run
from workbench.extras import require
from workbench.model.config import ModelConfig
from workbench.model.interceptors.cache import CacheCounts
from workbench.services import ServiceFleet
from workbench.solvers import SimpleSolver
from workbench.solvers.base import Solver
from workbench.solvers.simple import prefetch_cache
from workbench.solvers.tool_calling import ToolCallingSettings, ToolCallingSolver
from workbench.spec import Benchmark, RunSpec, metric_specs, model_config
from workbench.spec.io import write_result
from workbench.store import open_store
from workbench.store.reader import Store
from workbench.types import RunStatus
from workbench.workers.local import LAUNCH_ENV

if TYPE_CHECKING:
    from workbench.gym.agents import GymAgent

T = TypeVar("T")
OnStart = Callable[[RunProgress, RunPlan], None]
Observer = Callable[[str], AbstractAsyncContextManager[OnStart | None]]
"""Given a benchmark's label, a context around its run yielding what to call once the run has started (the CLI's
progress bar, the TUI's live view); None: nobody watches."""


@dataclass(frozen=True, slots=True)
class BenchmarkOutcome:
    """One benchmark of a spec, run: the engine's result, its summary and the files written for it."""

    bench: Benchmark
    result: RunResult
    summary: RunSummary
    summary_path: Path
    export: ExportResult | None
    metric_names: tuple[str, ...] | None
    """Every metric's name (the primary first) when the benchmark is scored with several, else None."""
    exported: tuple[str, ...] = ()
    """One line per ``output.export`` target the run went to (or why it did not)."""
    cache: CacheCounts | None = None
    """What the solver's service's ``cache`` interceptor answered and sent on, when it has one."""

    @property
    def ok(self) -> bool:
        return self.result.status == RunStatus.COMPLETE


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run on uvloop where available: the engine's hot loop is mostly event-loop overhead."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def require_extras(spec: RunSpec) -> None:
    """``MissingExtra`` now, before any benchmark of ``spec`` starts, when one names a sandbox or a metric whose
    library is an extra that is not installed. (A benchmark whose own scorer needs one fails as it is built, still
    before its run starts: ``get_scorer``.)"""
    from workbench.scoring import scorer_extra

    for bench in spec.benchmarks:
        sandbox = bench.sandbox_spec
        if sandbox is not None and sandbox.type == "docker":
            require("docker", "the docker sandbox")
        for metric in bench.scoring.metrics if bench.scoring is not None else ():
            extra = scorer_extra(metric.type)
            if extra is not None:
                require(extra, f"the {metric.type} scorer")
    for target in spec.output.export:  # each target's extra is named after it
        require(target, f"output.export: {target}")


@dataclass(frozen=True, slots=True)
class SuiteOutcome:
    """Every benchmark of a spec, run in turn: each one's outcome, or the error that stopped it (in a suite)."""

    results: tuple[tuple[Benchmark, BenchmarkOutcome | NelError], ...]
    run_ids: tuple[str, ...]

    @property
    def failed(self) -> int:
        """How many benchmarks did not complete."""
        return sum(not (isinstance(r, BenchmarkOutcome) and r.ok) for _, r in self.results)


def run(spec: RunSpec, *, resume: bool = False, retry_errors: bool = False, observer: Observer | None = None,
        on_benchmark: Callable[[Benchmark], None] | None = None,
        on_outcome: Callable[[Benchmark, BenchmarkOutcome | NelError], None] | None = None) -> SuiteOutcome:
    """Every benchmark of ``spec`` in turn, on this machine, through ``run_benchmark``.

    In a suite (a config file) a benchmark that fails does not stop the others: its error is its outcome; from
    flags, it is raised. Whoever launched this process learns each run's id as it starts, and the end, from its
    result file (``$NEL_RESULT_FILE``), never from its output. Interrupted (Ctrl-C, SIGTERM): records that, and
    raises ``asyncio.CancelledError``; completed steps are kept."""
    require_extras(spec)  # every benchmark's, before the first one starts
    for bench in spec.benchmarks:  # every Gym agent found by name, before the first one starts too
        _gym_agent(spec, bench)
    run_ids: list[str] = []
    results: list[tuple[Benchmark, BenchmarkOutcome | NelError]] = []
    with ServiceFleet(spec) as servers:  # the servers nel starts (docs/services.md), stopped however this ends
        for i, bench in enumerate(spec.benchmarks):
            if on_benchmark is not None:
                on_benchmark(bench)
            outcome: BenchmarkOutcome | NelError
            try:
                servers.start_for(i)
                outcome = run_benchmark(spec, bench, resume=resume, retry_errors=retry_errors,
                                        observer=_reporting(observer, run_ids))
            except asyncio.CancelledError:
                write_result(run_ids, "interrupted")
                raise
            except NelError as exc:
                if spec.source is None:
                    raise
                outcome = exc
            servers.done_with(i)
            results.append((bench, outcome))
            if on_outcome is not None:
                on_outcome(bench, outcome)
    suite = SuiteOutcome(tuple(results), tuple(run_ids))
    write_result(run_ids, "failed" if suite.failed else "complete")
    return suite


def _reporting(observer: Observer | None, run_ids: list[str]) -> Observer:
    """``observer``, and each run's id into the result file as the run starts."""

    @asynccontextmanager
    async def observe(label: str) -> AsyncIterator[OnStart | None]:
        async with (observer or _unobserved)(label) as inner:
            def on_start(progress: RunProgress, plan: RunPlan) -> None:
                if plan.run_id not in run_ids:
                    run_ids.append(plan.run_id)
                    write_result(run_ids, "running")
                if inner is not None:
                    inner(progress, plan)

            yield on_start

    return observe


def run_benchmark(spec: RunSpec, bench: Benchmark, *, resume: bool = False, retry_errors: bool = False,
                  observer: Observer | None = None) -> BenchmarkOutcome:
    """Evaluate one benchmark of ``spec`` into its store and write its files (see the module docstring).

    Every file is written before the caller prints anything: a closed standard output (``| head``) must not cost
    a run its artifacts. Raises ``asyncio.CancelledError`` when interrupted (SIGTERM or Ctrl-C: completed steps
    are kept), ``NelError`` for what a user can act on."""
    output_dir, store = spec.output_dir, spec.store_path
    writable_dir(output_dir, "output directory")
    writable_dir(store.parent, "store directory")
    env = environment(spec, bench)
    model = with_benchmark_generation(model_config(spec, bench), env)
    specs = metric_specs(spec, bench)
    suite = None if specs is None else MetricSuite(env, specs)
    shard = shard_from_env()
    env, solver, tools = _delegated(spec, bench, env, model) or (env, *_solver(env, bench, model))
    prefetch_cache(model)  # a cached re-run's answers are read while the store is checked
    resume_key = f"{Path(spec.source).resolve()}#{bench.path}" if spec.source else None

    async def go(verifier: Scoring | None) -> RunResult:
        sandbox = bench.sandbox_spec
        if sandbox is None:
            return await evaluate(env, verifier)
        from workbench.environments.sandboxed import Sandboxed
        from workbench.sandbox import open_sandboxes

        sandbox_tools = tools is not None and (bench.tool_solver.sandbox_tools if bench.tool_solver else True)
        async with open_sandboxes(sandbox) as sandboxes:
            await sandboxes.preflight()
            return await evaluate(Sandboxed(env, sandboxes, tools=sandbox_tools,
                                            response_mode=tools.response_mode if tools else "final_message"), None)

    async def evaluate(env: EvalEnvironment, verifier: Scoring | None) -> RunResult:
        async with (observer or _unobserved)(env.name) as on_start:
            return await _with_sigterm(run_evaluation(
                env, solver, store=store, n_repeats=bench.repeats or int(env.describe().get("default_repeats", 1)
                                                                         or 1),
                max_problems=bench.max_problems, problem_range=bench.problem_range,
                max_concurrent=bench.max_concurrent, shard=shard, run_id=bench.run_id, resume=resume,
                resume_key=resume_key,
                config={"request_timeout": model.request_timeout, "max_retries": model.max_retries,
                        "max_error_rate": bench.max_error_rate, **launch_config()},
                on_start=on_start, metrics=suite, max_error_rate=bench.max_error_rate, retry_errors=retry_errors,
                verifier=verifier, ingest_in_background=True,
            ))

    with _verifier(spec, bench, env) as verifier:
        result = run_async(go(verifier))
    name = f"summary-shard-{shard.idx}.json" if shard.sharded else "summary.json"
    cache = cache_counts(model)
    extra = {"cache": cache.as_json()} if cache is not None else None
    run_dir = output_dir / "runs" / result.run_id

    def write_files(s: Store) -> tuple[RunSummary, Path, ExportResult]:
        plain = _summary_of(s, store, result.run_id, shard)  # the run's whole: also the bundle's
        summary = _with_agreement(plain, s, solver)
        summary_path = write_summary_json(output_dir, summary, result, name, extra)
        return summary, summary_path, export_run(s, result.run_id, run_dir, plain)

    written: tuple[RunSummary, Path, ExportResult] | None = None
    targets: list[str] = []
    if result.ingest_job is not None:  # the ingest runs meanwhile: the summary and export read the run's own files
        try:
            with result.ingest_job.files.pinned() as s:
                result.ingest_job.files_read()
                written = write_files(s)
        except (UsageError, duckdb.Error):
            written = None  # its files went first (a merge elsewhere took them): read the store once the ingest ends
        finally:
            result.ingest_job.join()
    if result.ingested and not shard.sharded and (written is None or spec.output.export):  # one connection for the rest
        with open_store(store, runs=[result.run_id]).pinned() as s:
            if written is None:
                written = write_files(s)
            targets = export_after_run(s, result.run_id, run_dir, spec.output.export, spec.output.export_config)
    export: ExportResult | None = None
    if written is not None:
        summary, summary_path, export = written
    else:
        summary = read_summary(store, result.run_id, shard)
        if solver.name == "gym_delegation":
            summary = open_store(store, runs=[result.run_id]).on_snapshot(lambda s: _with_agreement(summary, s, solver))
        summary_path = write_summary_json(output_dir, summary, result, name, extra)
    return BenchmarkOutcome(bench, result, summary, summary_path, export,
                            None if suite is None else tuple(suite.names), tuple(targets), cache)


def cache_counts(model: ModelConfig) -> CacheCounts | None:
    """The hits and misses of the model's ``cache`` interceptor this run (None: it has none)."""
    if model.interceptors is None:
        return None
    from workbench.model.interceptors.cache import CacheInterceptor

    cache = model.interceptors.find(CacheInterceptor)
    return None if cache is None else cache.counts()


@contextlib.contextmanager
def _verifier(spec: RunSpec, bench: Benchmark, env: EvalEnvironment) -> Iterator[Scoring | None]:
    """A pool of scoring processes for a CPU-heavy scorer (math-verify), for the run; else the engine's own
    choice (the event loop for a cheap scorer, threads for one that may block)."""
    if env.capabilities.scoring != "process" or bench.sandbox_spec is not None:
        yield None
        return
    from workbench.environments.registry import resolve_benchmark

    files = (*spec.benchmark_files, *([bench.name] if bench.name.endswith(".py") else []))  # `-b FILE.py` too
    pool = ProcessScoring(EnvSource(resolve_benchmark(bench.name, files), tuple(map(str, files)),
                                    dataset_source(spec, bench)), default_workers())
    pool.start()
    try:
        yield pool
    finally:
        pool.close()


def environment(spec: RunSpec, bench: Benchmark) -> EvalEnvironment:
    """The environment a benchmark names: a registered benchmark, one a BYOB file defines (``-b FILE.py``, or
    ``benchmark_files``), or a remote ``gym://`` one."""
    from workbench.environments.registry import resolve_benchmark

    return get_environment(resolve_benchmark(bench.name, spec.benchmark_files), dataset_source(spec, bench))


def dataset_source(spec: RunSpec, bench: Benchmark) -> str | None:
    """The benchmark's ``dataset:`` as the environment takes it: a URI as is, a local file made absolute
    (relative to the config file, as written there; else to the working directory)."""
    if bench.dataset is None or "://" in bench.dataset:
        return bench.dataset
    base = Path(spec.source).resolve().parent if spec.source else Path.cwd()
    return str(base / Path(bench.dataset).expanduser())


def with_benchmark_generation(model: ModelConfig, env: EvalEnvironment) -> ModelConfig:
    """The benchmark's own sampling settings (``describe()["generation"]``, e.g. an lm-eval task's
    ``generation_kwargs``) wherever the run sets none: what the user sets wins."""
    own = env.describe().get("generation") or {}
    return dataclasses.replace(model, **{k: v for k, v in own.items() if getattr(model, k) is None})


def _solver(env: EvalEnvironment, bench: Benchmark, model: Any) -> tuple[Solver, ToolCallingSettings | None]:
    """One model call per attempt, or the tool-calling agent loop (asked for, or the benchmark's own way)."""
    s = bench.tool_solver
    tools = None if s is None else ToolCallingSettings(
        max_turns=s.max_turns, tool_timeout=s.tool_timeout, max_output_chars=s.max_output_chars,
        response_mode=s.response_mode)
    if tools is None and env.describe().get("solver") == "tool_calling":
        tools = ToolCallingSettings(response_mode="sandbox_artifact")  # an agentic benchmark: its own loop
    if tools is not None and s is not None and s.resource_service is not None:
        offer = getattr(env, "offer_tools", None)
        if not callable(offer):
            raise UsageError(f"{bench.name}: only a gym:// benchmark (protocol=native) offers its server's tools")
        offer()
    elif tools is not None and (s is None or s.sandbox_tools) and bench.sandbox_spec is None:
        raise UsageError(f"{bench.name}: an agent's tools act on a sandbox: give the run one (--sandbox "
                         "docker|local, or sandbox: in a config)")
    solver: Solver = SimpleSolver(model) if tools is None else ToolCallingSolver(model, tools)
    return solver, tools


def _with_agreement(summary: RunSummary, s: Store, solver: Solver) -> RunSummary:
    """A delegated run's summary with how often nel's and Gym's rewards disagreed (``extra.gym_delegation``)."""
    if solver.name != "gym_delegation":
        return summary
    from workbench.gym.delegation import agreement

    return dataclasses.replace(summary, extra={**summary.extra, "gym_delegation": agreement(s, summary.run_id)})


def _gym_agent(spec: RunSpec, bench: Benchmark) -> GymAgent | None:
    """The Gym agent server a ``gym_delegation`` benchmark names, looked up on its head server (``UsageError``,
    exit 2, for a name it does not have); None for any other solver."""
    from workbench.spec.models import GymDelegationSolver as Delegation

    s = bench.solver
    if not isinstance(s, Delegation):
        return None
    from workbench.gym.agents import find_agent

    return find_agent(spec.services[s.gym_service].url, s.gym_agent, f"{bench.path}.solver.gym_agent")


def _delegated(spec: RunSpec, bench: Benchmark, env: EvalEnvironment,
               model: ModelConfig) -> tuple[EvalEnvironment, Solver, None] | None:
    """A ``gym_delegation`` solver's benchmark and solver (a Gym agent runs each attempt), its agent found by name
    before the run starts; None for any other solver."""
    from workbench.spec.models import GymDelegationSolver as Delegation

    s = bench.solver
    if not isinstance(s, Delegation):
        return None
    from workbench.gym.delegation import DelegatedEnvironment, DelegationSettings, GymDelegationSolver

    agent = _gym_agent(spec, bench)
    assert agent is not None
    settings = DelegationSettings(agent, s.trust_reward, s.timeout, s.max_concurrent, s.max_retries,
                                  bench.effective_system_prompt)
    return DelegatedEnvironment(env, settings), GymDelegationSolver(model, settings), None


@asynccontextmanager
async def _unobserved(label: str) -> AsyncIterator[OnStart | None]:
    yield None


async def _with_sigterm(coro: Coroutine[Any, Any, T]) -> T:
    """Treat SIGTERM like Ctrl-C: cancel the run so it records itself as interrupted."""
    task = asyncio.ensure_future(coro)
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGTERM)
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return await task
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGTERM)
        if callable(previous):  # the caller's own handler again (asyncio would leave the default: a kill)
            signal.signal(signal.SIGTERM, previous)


def read_summary(store: Path, run_id: str, shard: Shard | None = None) -> RunSummary:
    """Recompute a run's (or one shard's) summary from its steps in the store."""
    # one connection (its set-up is most of the cost) for every query, on the run's own live files only
    return open_store(store, runs=[run_id]).on_snapshot(lambda s: _summary_of(s, store, run_id, shard))


def _summary_of(s: Store, store: Path, run_id: str, shard: Shard | None) -> RunSummary:
    runs = s.rows("SELECT n_tasks, n_repeats, benchmark FROM runs WHERE run_id = ?", [run_id])
    if not runs:
        raise UsageError(f"{store}: no run {run_id!r}")
    n_tasks, n_repeats = int(runs[0][0]), int(runs[0][1])
    if shard is None or not shard.sharded:
        return run_summary(s, {"run_id": run_id, "n_tasks": n_tasks, "n_repeats": n_repeats, "benchmark": runs[0][2]})
    bounds = s.rows(
        "SELECT problem_start, problem_end FROM run_shards WHERE run_id = ? AND shard_idx = ?", [run_id, shard.idx]
    )
    n_tasks = int(bounds[0][1] - bounds[0][0]) if bounds else 0
    o = s.run_outcomes(run_id, shard.idx)
    return summarize(
        run_id, n_tasks=n_tasks, n_repeats=n_repeats, attempts=o.attempts, passes=o.passes,
        latency_ms=o.latency_ms, failures=o.failures, tokens=o.tokens, errors=o.errors,
    )


def writable_dir(path: Path, what: str) -> Path:
    """``path`` as a directory this process can write, made if missing; else one line naming it (exit 2)."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"{path}: the {what} is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".nel-write-check-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise path_error(path, exc, f"write to the {what}") from None
    return path


def launch_config() -> dict[str, str]:
    """The background launch this process works for (``NEL_LAUNCH_ID``, set by its supervisor), if any:
    recorded with the run so the launch can find the runs of a config file it started."""
    launch_id = os.environ.get(LAUNCH_ENV)
    return {"launch_id": launch_id} if launch_id else {}
