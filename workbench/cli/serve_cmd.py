"""``nel serve``: a benchmark over HTTP (NeMo Gym's resources-server protocol), see docs/serve.md."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from workbench.errors import UsageError
from workbench.extras import require
from workbench.secrets import register_secret

TOKEN_ENV = "NEL_SERVE_TOKEN"


def cmd_serve(args: argparse.Namespace) -> int:
    require("serve")
    if args.sandbox == "docker":
        require("docker", "the docker sandbox")
    from workbench.cli.misc import resolve_bench
    from workbench.cli.serve_endpoint import in_slurm_job, remove_endpoint, write_endpoint
    from workbench.environments import get_environment
    from workbench.serve.runner import READY_PREFIX, bind, is_loopback

    token = register_secret(args.auth_token or os.environ.get(TOKEN_ENV) or None)  # never in a log line
    _check_limits(args)
    if not is_loopback(args.host):
        if not args.allow_remote:
            raise UsageError(f"--host {args.host} is reachable from other machines; pass --allow-remote "
                             f"(with --auth-token or ${TOKEN_ENV}) to serve beyond loopback")
        if not token:
            raise UsageError(f"--allow-remote needs a token: --auth-token TOKEN or ${TOKEN_ENV}")
    if args.and_serve and not args.export_data:
        raise UsageError("--and-serve: it keeps serving after --export-data DIR; without --export-data, nel serve "
                         "serves anyway")
    bench = resolve_bench(args.bench, args.benchmark_file)
    env = get_environment(bench)
    if args.export_data:
        from workbench.serve.export import export_data

        path = export_data(env, args.export_data)
        print(f"{READY_PREFIX}wrote {len(env)} rows for NeMo Gym's rollout collection to {path}", flush=True)
        if not args.and_serve:  # as NeMo Evaluator documents it: export, then exit
            return 0
    sandboxes = None
    if args.sandbox is not None:
        from workbench.environments.sandboxed import SandboxScored

        if not isinstance(env, SandboxScored) or getattr(env, "needs_tools", False):
            why = ("its attempts are an agent working in the sandbox, which only nel eval run drives"
                   if getattr(env, "needs_tools", False) else "it runs no code")
            raise UsageError(f"--sandbox: {env.name} is not verified by running a response in a sandbox: {why}")
        from workbench.sandbox import SandboxSpec, open_sandboxes

        sandboxes = open_sandboxes(SandboxSpec(type=args.sandbox, concurrency=args.sandbox_concurrency))
        import asyncio

        asyncio.run(sandboxes.preflight())  # no image, no engine: one line now, not a 503 per request
    elif env.requires_sandbox:  # its /verify would refuse every request: say so now, not per request
        reason = f"{env.name}: each response is verified in a sandbox of its own"
        raise UsageError(f"{reason}: serve it with --sandbox docker|local (--export-data DIR alone writes its rows)")

    from workbench.engine.verify_pool import EnvSource, ProcessScoring, default_workers
    from workbench.serve.app import create_app
    from workbench.serve.runner import serve
    from workbench.serve.slow_clients import ReadTimeouts

    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    workers = default_workers() if args.scoring_workers is None else args.scoring_workers
    pool = None
    if sandboxes is None and workers > 0:  # a sandboxed verify awaits its sandbox: nothing to score here
        files = (*(args.benchmark_file or ()), *((args.bench,) if args.bench.endswith(".py") else ()))
        pool = ProcessScoring(EnvSource(bench, tuple(os.path.abspath(f) for f in files)), workers)
    mode = (", gym-compat" if args.gym_compat else "") + (f", {sandboxes.backend} sandboxes" if sandboxes else "")
    auth = ", token required" if token else ""

    endpoint: list[tuple[Path, str]] = []  # endpoint.txt, and what it holds

    def ready(url: str) -> None:
        # in a SLURM job: the address Gym's training nodes read (docs/slurm.md)
        if in_slurm_job() and (written := write_endpoint(sock, args.host)) is not None:
            endpoint.append(written)
        print(f"{READY_PREFIX}{env.name} ({len(env)} problems) at {url}{mode}{auth}", flush=True)

    with sock:
        try:
            if pool is not None:
                pool.start()
            app = create_app(env, gym_compat=args.gym_compat, auth_token=token, max_body_bytes=args.max_body_bytes,
                             sandboxes=sandboxes, scoring=pool, max_response_chars=args.max_response_chars)
            serve(app, sock, ready, ReadTimeouts(header=args.header_timeout, body=args.body_timeout))
        finally:
            if pool is not None:
                pool.close()
            for path, written in endpoint:
                remove_endpoint(path, written)
    return 0


def _check_limits(args: argparse.Namespace) -> None:
    for flag, seconds in (("--header-timeout", args.header_timeout), ("--body-timeout", args.body_timeout)):
        if not (seconds > 0 and math.isfinite(seconds)):
            raise UsageError(f"{flag}: expected a positive number of seconds, got {seconds:g}")
    if args.scoring_workers is not None and args.scoring_workers < 0:
        raise UsageError(f"--scoring-workers: expected 0 or more, got {args.scoring_workers}")
