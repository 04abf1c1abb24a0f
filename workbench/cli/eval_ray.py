"""``nel eval run … --engine ray --shards N [--ray-address ADDRESS]``: shards as Ray tasks, merged here."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from workbench.cli import DEFAULT_OUTPUT_DIR
from workbench.cli.eval_run import check_run_args, read_summary
from workbench.cli.paths import store_path
from workbench.errors import UsageError
from workbench.secrets import url_has_credentials
from workbench.workers.ray_engine import RayJob, ShardOutcome, run_shards_on_ray

# Flags passed through to every shard as given (``--api-key`` is not: it reaches the tasks as $NEMO_API_KEY).
_VALUE_FLAGS = (
    ("repeats", "--repeats"), ("max_problems", "--max-problems"), ("model_url", "--model-url"),
    ("model_id", "--model-id"), ("protocol", "--protocol"), ("system_prompt", "--system-prompt"),
    ("temperature", "--temperature"), ("top_p", "--top-p"), ("max_tokens", "--max-tokens"), ("seed", "--seed"),
    ("request_timeout", "--request-timeout"), ("max_retries", "--max-retries"),
    ("max_concurrent", "--max-concurrent"), ("run_id", "--run-id"), ("sandbox", "--sandbox"),
    ("max_error_rate", "--max-error-rate"),
)


def _absolute(path: str) -> str:
    """A path as every node sees it when the filesystem is shared: absolute, not relative to this shell."""
    return str(Path(path).expanduser().resolve())


def shard_argv(args: argparse.Namespace, store: Path, output_dir: Path) -> list[str]:
    """The ``nel eval run`` command line every shard runs: the driver's own, with absolute paths."""
    if args.config:
        argv = ["eval", "run", _absolute(args.config)]
        for override in args.override or ():
            argv += ["-O", override]
    else:
        bench = args.bench
        argv = ["eval", "run", "-b", _absolute(bench) if bench.endswith(".py") else bench]
        for path in args.benchmark_file or ():
            argv += ["--benchmark-file", _absolute(path)]
        if args.problem_range is not None:
            argv += ["--problem-range", f"{args.problem_range[0]}:{args.problem_range[1]}"]
        for dest, flag in _VALUE_FLAGS:
            value = getattr(args, dest, None)
            if value is not None:
                argv += [flag, str(value)]
        for stop in args.stop or ():
            argv += ["--stop", stop]
        argv += ["--store", str(store), "--output-dir", str(output_dir)]
    if args.resume:
        argv.append("--resume")
    if args.retry_errors:
        argv.append("--retry-errors")
    return [*argv, "--no-progress"]


def _where(args: argparse.Namespace) -> tuple[Path, Path]:
    """The store and output directory of the run (a config file names its own), made absolute."""
    if args.config:
        from workbench.config import load_config

        config, _ = load_config(Path(args.config), args.override or ())
        output_dir = Path(_absolute(str(config.output_dir)))
        return Path(_absolute(str(config.store or output_dir / "nel.duckdb"))), output_dir
    output_dir = Path(_absolute(args.output_dir or DEFAULT_OUTPUT_DIR))
    return Path(_absolute(str(store_path(args)))), output_dir


def _say(outcome: ShardOutcome) -> None:
    state = "done" if outcome.exit_code == 0 else f"failed (exit {outcome.exit_code}): {outcome.last_line}"
    print(f"nel: ray shard {outcome.idx}: {state} [node {outcome.node}]", file=sys.stderr)


def cmd_eval_ray(args: argparse.Namespace) -> int:
    if getattr(args, "background", False):
        raise UsageError("--background: not with --engine ray (the Ray cluster runs the shards; "
                         "use `ray job submit -- nel eval run …` to leave them running)")
    check_run_args(args)
    if args.model_url and url_has_credentials(args.model_url):
        raise UsageError("--model-url: carries credentials (user:password@ or a key in its query string), which "
                         "every Ray task's arguments would show; pass the key in $NEMO_API_KEY, or run a config "
                         "file whose url reads it from the environment (url: ...?key=${VAR})")
    shards = getattr(args, "shards", None) or 1
    store, output_dir = _where(args)
    store.parent.mkdir(parents=True, exist_ok=True)
    secrets = {"NEMO_API_KEY": args.api_key} if getattr(args, "api_key", None) else None
    job = RayJob(argv=tuple(shard_argv(args, store, output_dir)), store=store, output_dir=output_dir,
                 shards=shards, address=getattr(args, "ray_address", None), cwd=Path.cwd())
    where = job.address or os.environ.get("RAY_ADDRESS") or "a local Ray cluster"
    print(f"nel: {shards} shard task{'s' if shards > 1 else ''} on {where}; store {store}", file=sys.stderr)
    result = run_shards_on_ray(job, secrets=secrets, on_outcome=_say)
    if result.failed:
        for o in result.failed:
            print(f"nel: shard {o.idx} failed on node {o.node}: {o.last_line}"
                  + (f" (log {o.log})" if o.log else ""), file=sys.stderr)
        print(f"nel: {len(result.failed)} of {shards} shards failed; not merged (completed steps are kept: "
              "rerun with --resume to continue)", file=sys.stderr)
        return 1
    if result.merge is not None:
        print(f"merged into {store}: {result.merge.steps_added} new steps from "
              f"{result.merge.shards_ingested} finished shards")
    code = 0
    for run_id in result.run_ids:
        summary = read_summary(store, run_id)
        est = summary.pass_at_k.get(1)
        status = result.merge.runs.get(run_id, "?") if result.merge is not None else "complete"
        print(f"  run {run_id}: {status}, {summary.n_steps}/{summary.n_steps_expected} steps"
              + (f", pass@1 {est.value:.4f}  95% CI [{est.low:.4f}, {est.high:.4f}]" if est is not None else ""))
        if run_id in result.exports:
            print(f"    export {result.exports[run_id]}")
        if summary.n_steps != summary.n_steps_expected:
            code = 1
    print(f"  store    {store}")
    return code
