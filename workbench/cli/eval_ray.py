"""``nel eval run … --engine ray --shards N [--ray-address ADDRESS]``: shards as Ray tasks, merged here."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from workbench.cli.eval_run import check_run_args, read_summary, run_spec
from workbench.errors import UsageError
from workbench.secrets import url_has_credentials
from workbench.spec import RunSpec
from workbench.spec.io import secret_env, spec_json
from workbench.spec.models import Output
from workbench.workers.ray_engine import RayJob, ShardOutcome, run_shards_on_ray


def _absolute(path: str | Path) -> str:
    """A path as every node sees it when the filesystem is shared: absolute, not relative to this shell."""
    return str(Path(path).expanduser().resolve())


def shard_spec(spec: RunSpec) -> RunSpec:
    """The spec every Ray shard runs: the driver's, with the paths every node must read made absolute."""
    output = Output(dir=_absolute(spec.output_dir), store=_absolute(spec.store_path))
    benchmarks = [b.model_copy(update={"name": _absolute(b.name)}) if b.name.endswith(".py") else b
                  for b in spec.benchmarks]
    return spec.model_copy(update={"output": output, "benchmarks": benchmarks,
                                   "benchmark_files": tuple(_absolute(f) for f in spec.benchmark_files)})


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
                         "every Ray task's specification would show; pass the key in $NEMO_API_KEY, or run a "
                         "config file whose url reads it from the environment (url: ...?key=${VAR})")
    shards = getattr(args, "shards", None) or 1
    spec = shard_spec(run_spec(args))
    store, output_dir = spec.store_path, spec.output_dir
    store.parent.mkdir(parents=True, exist_ok=True)
    flags = tuple(flag for flag, on in (("--resume", args.resume), ("--retry-errors", args.retry_errors)) if on)
    job = RayJob(spec=spec_json(spec), flags=flags, store=store, output_dir=output_dir, shards=shards,
                 address=getattr(args, "ray_address", None), cwd=Path.cwd())
    where = job.address or os.environ.get("RAY_ADDRESS") or "a local Ray cluster"
    print(f"nel: {shards} shard task{'s' if shards > 1 else ''} on {where}; store {store}", file=sys.stderr)
    result = run_shards_on_ray(job, secrets=secret_env(spec), on_outcome=_say)
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
        for line in result.exported.get(run_id, ()):
            print(f"    {line}")
        if summary.n_steps != summary.n_steps_expected:
            code = 1
    print(f"  store    {store}")
    return code
