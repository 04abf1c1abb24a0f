"""``nel eval run`` and ``nel eval merge``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import Coroutine, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import orjson

from workbench.analysis.artifacts import atomic_open, export_run, run_summary
from workbench.analysis.run_summary import RunSummary, summarize
from workbench.cli import DEFAULT_OUTPUT_DIR
from workbench.cli.paths import store_path
from workbench.cli.progress import progress_bar
from workbench.cli.render import render_summary
from workbench.engine import RunProgress, RunResult, Shard, run_evaluation, shard_from_env
from workbench.engine.metrics import MetricSpec, MetricSuite
from workbench.engine.plan import RunPlan
from workbench.engine.run import DEFAULT_MAX_ERROR_RATE
from workbench.environments import EvalEnvironment, get_environment
from workbench.errors import UsageError, path_error
from workbench.limits import MAX_CONCURRENT, MAX_REPEATS
from workbench.model.config import ModelConfig, infer_protocol
from workbench.sandbox.spec import SandboxSpec
from workbench.solvers import SimpleSolver
from workbench.solvers.tool_calling import ToolCallingSettings, ToolCallingSolver
from workbench.store import open_store

T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run on uvloop where available: the engine's hot loop is mostly event-loop overhead."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def model_config(args: argparse.Namespace) -> ModelConfig:
    api_key = args.api_key or os.environ.get("NEMO_API_KEY") or os.environ.get("OPENAI_API_KEY")
    protocol = args.protocol or infer_protocol(args.model_url) or "chat_completions"
    return ModelConfig(
        url=args.model_url,
        model_id=args.model_id,
        protocol=protocol,
        api_key=api_key,
        system_prompt=args.system_prompt,
        temperature=args.temperature,
        top_p=args.top_p,
        max_tokens=args.max_tokens,
        seed=args.seed,
        stop=tuple(args.stop) if args.stop else None,
        request_timeout=120.0 if args.request_timeout is None else args.request_timeout,
        max_retries=5 if args.max_retries is None else args.max_retries,
    )


def read_summary(store: Path, run_id: str, shard: Shard | None = None) -> RunSummary:
    """Recompute a run's (or one shard's) summary from its steps in the store."""
    s = open_store(store)
    runs = s.rows("SELECT n_tasks, n_repeats FROM runs WHERE run_id = ?", [run_id])
    if not runs:
        raise UsageError(f"{store}: no run {run_id!r}")
    n_tasks, n_repeats = int(runs[0][0]), int(runs[0][1])
    if shard is None or not shard.sharded:
        return run_summary(s, {"run_id": run_id, "n_tasks": n_tasks, "n_repeats": n_repeats})
    bounds = s.rows(
        "SELECT problem_start, problem_end FROM run_shards WHERE run_id = ? AND shard_idx = ?", [run_id, shard.idx]
    )
    n_tasks = int(bounds[0][1] - bounds[0][0]) if bounds else 0
    o = s.run_outcomes(run_id, shard.idx)
    return summarize(
        run_id, n_tasks=n_tasks, n_repeats=n_repeats, attempts=o.attempts, passes=o.passes,
        latency_ms=o.latency_ms, failures=o.failures, tokens=o.tokens, errors=o.errors,
    )


def metric_lines(store: Path, run_id: str, names: Sequence[str]) -> list[str]:
    """One line per metric of a run scored with several: mean reward with its 95 % interval."""
    rows = {r["metric"]: r for r in open_store(store).dicts(
        "SELECT metric, mean_reward, mean_reward_low, mean_reward_high, n_tasks FROM run_scores WHERE run_id = ?",
        [run_id],
    )}
    lines = []
    for i, name in enumerate(names):
        r = rows.get(name)
        if r is None or r["mean_reward"] is None:
            continue
        label = f"{name} (primary)" if i == 0 else name
        lines.append(f"  metric   {label:<24} {r['mean_reward']:.4f}  95% CI [{r['mean_reward_low']:.4f}, "
                     f"{r['mean_reward_high']:.4f}]  ({r['n_tasks']} tasks)")
    return lines


def write_summary_json(output_dir: Path, summary: RunSummary, result: RunResult | None, name: str) -> Path:
    folder = output_dir / "runs" / summary.run_id
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise path_error(folder, exc, "make the run's directory") from None
    data = asdict(summary)
    data["pass_at_k"] = {str(k): asdict(v) for k, v in summary.pass_at_k.items()}
    data["latency_ms"] = {f"p{k}": v for k, v in summary.latency_ms.items()}
    if result is not None:
        data["status"] = result.status
        data["elapsed_s"] = result.elapsed_s
        data["steps_per_s"] = result.steps_written / result.elapsed_s if result.elapsed_s else None
        data["store"] = str(result.store)
    path = folder / name
    with atomic_open(path) as fh:  # whole or absent: a full disk must not leave a zero-byte summary.json behind
        fh.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    return path


def launch_config() -> dict[str, str]:
    """The background launch this process works for (``NEL_LAUNCH_ID``, set by its supervisor), if any:
    recorded with the run so the launch can find the runs of a config file it started."""
    launch_id = os.environ.get("NEL_LAUNCH_ID")
    return {"launch_id": launch_id} if launch_id else {}


async def _run_with_signals(coro: Coroutine[Any, Any, T]) -> T:
    """Treat SIGTERM like Ctrl-C: cancel the run so it records itself as interrupted."""
    task = asyncio.ensure_future(coro)
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return await task
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGTERM)


def execute_run(
    *, bench: str, model: ModelConfig, store: Path, output_dir: Path, repeats: int | None,
    max_problems: int | None, problem_range: tuple[int, int] | None, max_concurrent: int, resume: bool,
    run_id: str | None, show_progress: bool, resume_key: str | None = None,
    metrics: Sequence[MetricSpec] | None = None, sandbox: SandboxSpec | None = None,
    tools: ToolCallingSettings | None = None, sandbox_tools: bool = True, server_tools: bool = False,
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE, retry_errors: bool = False,
) -> int:
    """One benchmark, start to end. ``tools``: the tool-calling solver, with the sandbox's tools
    (``sandbox_tools``) and/or the benchmark's own Gym resources server's tools (``server_tools``).

    Every file (summary, export) is written before anything is printed: a closed standard output (``| head``)
    must not cost the run its artifacts."""
    writable_dir(output_dir, "output directory")
    writable_dir(store.parent, "store directory")
    env = get_environment(bench)
    suite = None if metrics is None else MetricSuite(env, metrics)
    n_repeats = repeats or int(env.describe().get("default_repeats", 1) or 1)
    shard = shard_from_env()
    if tools is None and env.describe().get("solver") == "tool_calling":
        tools = ToolCallingSettings(response_mode="sandbox_artifact")  # an agentic benchmark: its own loop
    solver = SimpleSolver(model) if tools is None else ToolCallingSolver(model, tools)
    if tools is not None and server_tools:
        offer = getattr(env, "offer_tools", None)
        if not callable(offer):
            raise UsageError(f"{bench}: only a gym:// benchmark (protocol=native) offers its server's tools")
        offer()
    elif tools is not None and sandbox_tools and sandbox is None:
        raise UsageError(f"{bench}: an agent's tools act on a sandbox: give the run one (--sandbox docker|local, "
                         "or sandbox: in a config)")

    async def go() -> RunResult:
        if sandbox is None:
            return await evaluate(env)
        from workbench.environments.sandboxed import Sandboxed
        from workbench.sandbox import open_sandboxes

        async with open_sandboxes(sandbox) as sandboxes:
            await sandboxes.preflight()
            return await evaluate(Sandboxed(env, sandboxes, tools=tools is not None and sandbox_tools,
                                            response_mode=tools.response_mode if tools else "final_message"))

    async def evaluate(env: EvalEnvironment) -> RunResult:
        async with progress_bar(show_progress, bench) as holder:
            def on_start(progress: RunProgress, plan: RunPlan) -> None:
                holder.append(progress)
                where = f" shard {shard.idx + 1}/{shard.total}," if shard.sharded else ""
                verb = "resuming" if plan.done or plan.retry else "starting"
                notes = ([f"{len(plan.done)} already done"] if plan.done else []) + (
                    [f"{len(plan.retry)} errored, attempted again"] if plan.retry else [])
                print(
                    f"nel: {verb} run {plan.run_id}:{where} {bench} problems {plan.shard_start}..{plan.shard_end - 1}"
                    f" x {plan.n_repeats} repeats = {plan.shard_steps} steps"
                    + (f" ({'; '.join(notes)})" if notes else ""),
                    file=sys.stderr,
                )

            return await _run_with_signals(run_evaluation(
                env, solver, store=store, n_repeats=n_repeats, max_problems=max_problems,
                problem_range=problem_range, max_concurrent=max_concurrent, shard=shard, run_id=run_id,
                resume=resume, resume_key=resume_key,
                config={"request_timeout": model.request_timeout, "max_retries": model.max_retries,
                        "max_error_rate": max_error_rate, **launch_config()},
                on_start=on_start, metrics=suite, max_error_rate=max_error_rate, retry_errors=retry_errors,
            ))

    try:
        result = run_async(go())
    except asyncio.CancelledError:
        print("nel: run interrupted; completed steps are kept; rerun with --resume to continue", file=sys.stderr)
        return 130
    summary = read_summary(store, result.run_id, shard)
    name = f"summary-shard-{shard.idx}.json" if shard.sharded else "summary.json"
    path = write_summary_json(output_dir, summary, result, name)
    export = None
    if result.ingested and not shard.sharded:
        export = export_run(store, result.run_id, output_dir / "runs" / result.run_id)
    lines = [render_summary(summary, store=store, title=_run_title(result, shard))]
    if suite is not None and not shard.sharded:
        lines += metric_lines(store, result.run_id, suite.names)
    lines.append(f"  summary  {path}")
    if export is not None:
        lines.append(f"  export   {export.bundle} (+ results, trajectories, runtime stats, failure analysis)")
    if shard.sharded:
        lines.append(f"  next     when all {shard.total} shards are done: nel eval merge {store}")
    print("\n".join(lines))
    if result.error is not None:
        print(f"nel: run {result.run_id} failed: {result.error}", file=sys.stderr)
    return 0 if result.status == "complete" else 1


def _run_title(result: RunResult, shard: Shard) -> str:
    """The summary's first line: what ended how, led by the errored attempts when there are any."""
    rate = result.steps_written / result.elapsed_s if result.elapsed_s > 0 else 0.0
    what = f"shard {shard.idx + 1}/{shard.total} of run" if shard.sharded else "run"
    errors = (f"{result.n_errors} of {result.n_steps} attempts errored (no verdict); " if result.n_errors else "")
    return (
        f"{what} {result.run_id} {result.status}: {errors}{result.steps_written} new steps in "
        f"{result.elapsed_s:.1f} s ({rate:,.0f} steps/s)"
        + (f", {result.steps_skipped} kept from before" if result.steps_skipped else "")
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


_FLAG_ONLY = {
    "bench": "-b/--bench", "repeats": "--repeats", "max_problems": "--max-problems", "problem_range": "--problem-range",
    "model_url": "--model-url", "model_id": "--model-id", "api_key": "--api-key", "protocol": "--protocol",
    "system_prompt": "--system-prompt", "temperature": "--temperature", "top_p": "--top-p",
    "max_tokens": "--max-tokens", "seed": "--seed", "stop": "--stop", "store": "--store", "run_id": "--run-id",
    "request_timeout": "--request-timeout", "max_retries": "--max-retries", "max_concurrent": "--max-concurrent",
    "output_dir": "--output-dir", "benchmark_file": "--benchmark-file", "sandbox": "--sandbox",
    "max_error_rate": "--max-error-rate",
}


def check_run_args(args: argparse.Namespace) -> None:
    """A config file or the flags, never both, and what each needs: the same rules wherever the run goes."""
    if args.config:
        given = [flag for dest, flag in _FLAG_ONLY.items() if getattr(args, dest) is not None
                 and not (dest == "store" and args.store == os.environ.get("NEL_STORE"))]
        if given:
            raise UsageError(f"{', '.join(given)}: not with a config file; set it in the config or with -O")
        return
    if args.override:
        raise UsageError("-O: overrides apply to a config file; give one, or use the flags")
    if args.repeats is not None:
        MAX_REPEATS.check("--repeats", args.repeats)
    if args.max_concurrent is not None:
        MAX_CONCURRENT.check("--max-concurrent", args.max_concurrent)
    missing = [flag for dest, flag in (("bench", "-b/--bench"), ("model_url", "--model-url"),
                                      ("model_id", "--model-id")) if not getattr(args, dest)]
    if missing:
        raise UsageError(f"the following arguments are required: {', '.join(missing)} (or give a config file)")


def _refuse_cluster_config(args: argparse.Namespace) -> None:
    """A config that runs on a SLURM cluster brings its own shards: refuse local or Ray ones up front."""
    from workbench.config import load_config

    config, _ = load_config(Path(args.config), args.override or ())
    if config.cluster is not None and config.cluster.type == "slurm":
        raise UsageError(f"{args.config}: cluster.type is slurm, so the config runs as a SLURM job array of "
                         "cluster.shards shards; --shards, --background and --engine ray do not apply "
                         "(add -O cluster.type=local to run it here instead)")


def cmd_eval_run(args: argparse.Namespace) -> int:
    engine = getattr(args, "engine", None) or "local"
    background, shards = getattr(args, "background", False), getattr(args, "shards", None)
    if getattr(args, "ray_address", None) and engine != "ray":
        raise UsageError("--ray-address: only with --engine ray")
    if engine == "ray" and background:
        raise UsageError("--background: not with --engine ray (the Ray cluster runs the shards; "
                         "use --engine local for background shard processes)")
    if args.retry_errors and not args.resume:
        raise UsageError("--retry-errors: only with --resume (it attempts again the errored steps of a stored run)")
    if (background or shards is not None) and engine == "local" and args.resume:
        raise UsageError("--resume: not with --background or --shards; continue a background run "
                         "with `nel eval resume RUN`")
    check_run_args(args)
    if args.config and (background or shards is not None or engine == "ray"):
        _refuse_cluster_config(args)
    if engine == "ray":
        from workbench.cli.eval_ray import cmd_eval_ray  # type: ignore[import-not-found,unused-ignore]

        return int(cmd_eval_ray(args))
    if background or shards is not None:
        from workbench.cli.eval_workers import run_with_workers

        return run_with_workers(args)
    if args.config:
        from workbench.cli.eval_config import cmd_eval_config

        return cmd_eval_config(args)
    from workbench.cli.misc import resolve_bench

    return execute_run(
        bench=resolve_bench(args.bench, args.benchmark_file),
        model=model_config(args),
        store=store_path(args),
        output_dir=Path(args.output_dir or DEFAULT_OUTPUT_DIR),
        repeats=args.repeats,
        max_problems=args.max_problems,
        problem_range=args.problem_range,
        max_concurrent=args.max_concurrent or 64,
        resume=args.resume,
        run_id=args.run_id,
        show_progress=not args.no_progress,
        sandbox=None if args.sandbox is None else SandboxSpec(type=args.sandbox),
        max_error_rate=DEFAULT_MAX_ERROR_RATE if args.max_error_rate is None else args.max_error_rate,
        retry_errors=args.retry_errors,
    )


def scoring_overrides(overrides: Sequence[str]) -> dict[str, Any]:
    """``-O scoring.PARAM=VALUE`` items as scorer parameters (values read as YAML scalars: 0.01, true)."""
    import yaml

    params: dict[str, Any] = {}
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.startswith("scoring.") or key.count(".") != 1 or key == "scoring.":
            raise UsageError(f"-O {item}: expected scoring.PARAM=VALUE, e.g. -O scoring.abs_tol=0.01")
        try:
            params[key.split(".", 1)[1]] = yaml.safe_load(text) if text.strip() else text
        except yaml.YAMLError:
            raise UsageError(f"-O {item}: cannot read the value {text!r}") from None
    return params


def cmd_eval_reverify(args: argparse.Namespace) -> int:
    from workbench.engine.reverify import reverify_run

    store = store_path(args)
    result = reverify_run(store, args.run_id, args.scorer, scoring_overrides(args.override or ()))
    before = read_summary(store, result.source_run)
    after = read_summary(store, result.run_id)
    print(render_summary(after, store=store, title=(
        f"run {result.run_id}: {result.n_rescored} of {result.n_steps} responses scored again "
        f"({'scorer ' + args.scorer if args.scorer else 'the benchmark scorer'}"
        f"{', ' + ', '.join(args.override) if args.override else ''}), {result.n_changed} rewards changed; "
        f"from run {result.source_run}"
    )))
    b, a = before.pass_at_k.get(1), after.pass_at_k.get(1)
    if a is not None and b is not None:
        print(f"  pass@1   {b.value:.4f} -> {a.value:.4f}")
    return 0
