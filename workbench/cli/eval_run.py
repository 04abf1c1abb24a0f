"""``nel eval run`` (flags or a config file) and ``nel eval reverify``: parse, build the ``RunSpec``, call the
composition root (``workbench.runs``) for each benchmark, print."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from workbench.cli.paths import store_path
from workbench.cli.progress import progress_bar
from workbench.cli.render import render_summary
from workbench.cli.user_defaults import fill_run_args
from workbench.engine import RunProgress, RunResult, Shard
from workbench.engine.plan import RunPlan
from workbench.errors import NelError, UsageError
from workbench.extras import require
from workbench.model.interceptors.cache import NO_CACHE_ENV, CacheCounts
from workbench.runs import BenchmarkOutcome, Observer, OnStart, read_summary, run
from workbench.spec import Benchmark, RunSpec
from workbench.spec.flags import spec_flags, spec_from_flags
from workbench.store import open_store

__all__ = ["apply_adapter", "check_run_args", "cmd_eval_reverify", "cmd_eval_run", "read_summary", "run_spec"]


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


def run_spec(args: argparse.Namespace) -> RunSpec:
    """The ``RunSpec`` the command line describes: a config file with its ``-O`` overrides, or the flags (the API
    key, when not given, from $NEMO_API_KEY or $OPENAI_API_KEY)."""
    if getattr(args, "spec", None):
        from workbench.spec.io import read_spec

        return read_spec(args.spec)
    if args.config:
        from workbench.spec import load_config

        spec, _ = load_config(Path(args.config), args.override or ())
        return spec
    if not getattr(args, "api_key", None):
        args.api_key = os.environ.get("NEMO_API_KEY") or os.environ.get("OPENAI_API_KEY")
    return spec_from_flags(args)


def check_run_args(args: argparse.Namespace) -> None:
    """A config file or the flags, never both, and what each needs: the same rules wherever the run goes."""
    if getattr(args, "spec", None):
        given = [flag for flag in ("a config file" if args.config else "", "-O" if args.override else "") if flag]
        given += [field.flag.flag for field in spec_flags() if getattr(args, field.dest, None) is not None
                  and not (field.dest == "store" and args.store == os.environ.get("NEL_STORE"))]
        if given:
            raise UsageError(f"--spec: not with {', '.join(given)}; the specification holds the whole run")
        return
    if args.config:
        given = [field.flag.flag for field in spec_flags() if getattr(args, field.dest, None) is not None
                 and not (field.dest == "store" and args.store == os.environ.get("NEL_STORE"))]
        if given:
            raise UsageError(f"{', '.join(given)}: not with a config file; set it in the config or with -O")
        return
    if args.override:
        raise UsageError("-O: overrides apply to a config file; give one, or use the flags")
    missing = [flag for dest, flag in (("bench", "-b/--bench"), ("model_url", "--model-url"),
                                      ("model_id", "--model-id")) if not getattr(args, dest)]
    if missing:
        raise UsageError(f"the following arguments are required: {', '.join(missing)} (or give a config file; a "
                         "model used every time can be set once: nel config set model_url URL / model_id NAME)")


def apply_adapter(args: argparse.Namespace) -> None:
    """``--adapter URI`` (NeMo Evaluator's flag) names the benchmark as ``-b URI`` does: a remote environment
    (``gym://HOST:PORT``, ``lm-eval://TASK``). A plain name, or a second, different benchmark, is refused."""
    adapter = getattr(args, "adapter", None)
    if adapter is None:
        return
    if "://" not in adapter:
        raise UsageError(f"--adapter {adapter}: expected a URI such as gym://HOST:PORT or lm-eval://TASK; a "
                         "benchmark name goes in -b/--bench")
    if args.config or getattr(args, "spec", None):
        raise UsageError("--adapter: not with a config file or --spec; name the benchmark there (benchmarks.N.name)")
    if args.bench is not None and args.bench != adapter:
        raise UsageError(f"--adapter {adapter}: -b/--bench {args.bench} names another benchmark; give one of them")
    args.bench = adapter


def _refuse_cluster_config(args: argparse.Namespace) -> None:
    """A config that runs on a SLURM cluster brings its own shards: refuse local or Ray ones up front."""
    spec = run_spec(args)
    if not spec.runs_here:
        raise UsageError(f"{args.config}: cluster.type is slurm, so the config runs as a SLURM job array of "
                         "cluster.shards shards; --shards, --background and --engine ray do not apply "
                         "(add -O cluster.type=local to run it here instead)")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def cmd_eval_run(args: argparse.Namespace) -> int:
    # SIGTERM (`nel eval stop`, a scheduler's preemption) is Ctrl-C from the first moment: a worker stopped while
    # it still starts up exits 130 (stopped), not killed; once the run loop runs, it records itself as interrupted.
    signal.signal(signal.SIGTERM, _interrupt)
    if getattr(args, "no_cache", False):  # through the environment, so the shard workers it starts see it too
        os.environ[NO_CACHE_ENV] = "1"
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
    if engine == "ray":
        require("ray", "--engine ray")
    apply_adapter(args)
    fill_run_args(args)
    check_run_args(args)
    if args.config and (background or shards is not None or engine == "ray"):
        _refuse_cluster_config(args)
    if engine == "ray":
        from workbench.cli.eval_ray import cmd_eval_ray  # type: ignore[import-not-found,unused-ignore]

        return int(cmd_eval_ray(args))
    if background or shards is not None:
        from workbench.cli.eval_workers import run_with_workers

        return run_with_workers(args)
    spec = run_spec(args)
    if not spec.runs_here:  # SLURM: write (and submit) the scripts; the shards run elsewhere
        from workbench.cli.eval_slurm import cmd_eval_slurm

        return cmd_eval_slurm(args, spec)
    return run_here(spec, resume=args.resume, retry_errors=args.retry_errors, show_progress=not args.no_progress)


def run_here(spec: RunSpec, *, resume: bool = False, retry_errors: bool = False, show_progress: bool = True) -> int:
    """Every benchmark of ``spec`` in turn, on this machine (``workbench.runs.run``), printed as it goes. In a suite
    (a config file) one that fails does not stop the others, and the exit code is 1 if any did not complete;
    Ctrl-C stops the suite (130)."""
    suite = spec.source is not None

    def label(bench: Benchmark) -> str:
        return f"{bench.path} ({bench.name})"

    def starting(bench: Benchmark) -> None:
        if suite:
            print(f"nel: === {label(bench)} on service {bench.service!r} ===", file=sys.stderr)

    def ended(bench: Benchmark, outcome: BenchmarkOutcome | NelError) -> None:
        if isinstance(outcome, BenchmarkOutcome):
            print_outcome(outcome, spec.store_path)
        else:  # one failing benchmark does not stop the others
            print(f"nel: error: {label(bench)}: {outcome}", file=sys.stderr)

    try:
        done = run(spec, resume=resume, retry_errors=retry_errors, observer=_observer(show_progress),
                   on_benchmark=starting, on_outcome=ended)
    except asyncio.CancelledError:
        print("nel: run interrupted; completed steps are kept; rerun with --resume to continue", file=sys.stderr)
        return 130
    if len(done.results) > 1:
        print("\nsuite:")
        for bench, outcome in done.results:
            text = (f"failed: {outcome}" if isinstance(outcome, NelError) else
                    "complete" if outcome.ok else "incomplete (exit 1)")
            print(f"  {label(bench)}: {text}")
    if done.failed and suite:
        print(f"nel: {done.failed} of {len(done.results)} benchmarks did not complete", file=sys.stderr)
    return 1 if done.failed else 0


def _observer(show_progress: bool) -> Observer:
    """The CLI watching a run: a progress bar on a terminal, and a line saying what starts."""

    @asynccontextmanager
    async def observe(label: str) -> AsyncIterator[OnStart | None]:
        async with progress_bar(show_progress, label) as holder:
            def on_start(progress: RunProgress, plan: RunPlan) -> None:
                holder.append(progress)
                shard = plan.shard
                where = f" shard {shard.idx + 1}/{shard.total}," if shard.sharded else ""
                verb = "resuming" if plan.done or plan.retry else "starting"
                notes = ([f"{len(plan.done)} already done"] if plan.done else []) + (
                    [f"{len(plan.retry)} errored, attempted again"] if plan.retry else [])
                print(f"nel: {verb} run {plan.run_id}:{where} {label} problems {plan.shard_start}.."
                      f"{plan.shard_end - 1} x {plan.n_repeats} repeats = {plan.shard_steps} steps"
                      + (f" ({'; '.join(notes)})" if notes else ""), file=sys.stderr)

            yield on_start

    return observe


def print_outcome(outcome: BenchmarkOutcome, store: Path) -> None:
    """The run's summary, its files, and why it failed if it did (written already: printing costs nothing)."""
    result, shard = outcome.result, outcome.result.shard
    lines = [render_summary(outcome.summary, store=store, title=_run_title(result, shard))]
    if outcome.metric_names is not None and not shard.sharded:
        lines += metric_lines(store, result.run_id, outcome.metric_names)
    if outcome.cache is not None:
        lines.append(f"  {cache_line(outcome.cache)}")
    lines.append(f"  summary  {outcome.summary_path}")
    if outcome.export is not None:
        lines.append(f"  export   {outcome.export.bundle} (+ results, trajectories, runtime stats, failure analysis)")
    lines += [f"  {line}" for line in outcome.exported]
    if shard.sharded:
        lines.append(f"  next     when all {shard.total} shards are done: nel eval merge {store}")
    print("\n".join(lines))
    if result.error is not None:
        print(f"nel: run {result.run_id} failed: {result.error}", file=sys.stderr)


def cache_line(cache: CacheCounts) -> str:
    """``cache    5276 hits, 0 misses (…/nel-cache.duckdb)``, or that ``--no-cache`` turned it off."""
    if not cache.enabled:
        return "cache    off this run (--no-cache / NEL_NO_CACHE)"
    return f"cache    {cache.hits} hits, {cache.misses} misses ({cache.path})"


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
