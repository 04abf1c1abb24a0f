"""``nel eval run CONFIG.yaml``: a suite of benchmarks, each isolated from the others' failures."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.cli.eval_run import execute_run
from workbench.config import Benchmark, load_config, metric_specs, model_config
from workbench.errors import NelError
from workbench.solvers.tool_calling import ToolCallingSettings


def tool_settings(bench: Benchmark) -> ToolCallingSettings | None:
    s = bench.tool_solver
    if s is None:
        return None
    return ToolCallingSettings(max_turns=s.max_turns, tool_timeout=s.tool_timeout,
                               max_output_chars=s.max_output_chars, response_mode=s.response_mode)  # type: ignore[arg-type]


def cmd_eval_config(args: argparse.Namespace) -> int:
    config, _ = load_config(Path(args.config), args.override or ())
    if config.cluster is not None:  # SLURM: write (and submit) the scripts; the shards run elsewhere
        from workbench.cli.eval_slurm import cmd_eval_slurm

        return cmd_eval_slurm(args, config)
    store = config.store or config.output_dir / "nel.duckdb"
    outcomes: list[tuple[str, str]] = []
    for bench in config.benchmarks:
        label = f"{bench.path} ({bench.name})"
        print(f"nel: === {label} on service {bench.service!r} ===", file=sys.stderr)
        try:
            code = execute_run(
                bench=bench.name, model=model_config(config, bench), store=store, output_dir=config.output_dir,
                repeats=bench.repeats, max_problems=bench.max_problems, problem_range=None,
                max_concurrent=bench.max_concurrent, resume=args.resume, run_id=None,
                show_progress=not args.no_progress, resume_key=f"{config.file.resolve()}#{bench.path}",
                metrics=metric_specs(config, bench), sandbox=bench.sandbox, tools=tool_settings(bench),
                sandbox_tools=bench.tool_solver.sandbox_tools if bench.tool_solver else True,
                server_tools=bool(bench.tool_solver and bench.tool_solver.resource_service),
                max_error_rate=bench.max_error_rate, retry_errors=args.retry_errors,
            )
            if code == 130:  # interrupted: the user wants the suite to stop, not move on
                return 130
            outcomes.append((label, "complete" if code == 0 else f"incomplete (exit {code})"))
        except NelError as exc:  # one failing benchmark does not stop the others
            print(f"nel: error: {label}: {exc}", file=sys.stderr)
            outcomes.append((label, f"failed: {exc}"))
    if len(outcomes) > 1:
        print("\nsuite:")
        for label, outcome in outcomes:
            print(f"  {label}: {outcome}")
    failed = sum(not outcome.startswith("complete") for _, outcome in outcomes)
    if failed:
        print(f"nel: {failed} of {len(outcomes)} benchmarks did not complete", file=sys.stderr)
        return 1
    return 0
