"""``nel serve``: a benchmark over HTTP (NeMo Gym's resources-server protocol), see docs/serve.md."""

from __future__ import annotations

import argparse
import os

from workbench.errors import UsageError

TOKEN_ENV = "NEL_SERVE_TOKEN"


def cmd_serve(args: argparse.Namespace) -> int:
    from workbench.cli.misc import resolve_bench
    from workbench.environments import get_environment
    from workbench.serve.runner import READY_PREFIX, bind, is_loopback

    token = args.auth_token or os.environ.get(TOKEN_ENV) or None
    if not is_loopback(args.host):
        if not args.allow_remote:
            raise UsageError(f"--host {args.host} is reachable from other machines; pass --allow-remote "
                             f"(with --auth-token or ${TOKEN_ENV}) to serve beyond loopback")
        if not token:
            raise UsageError(f"--allow-remote needs a token: --auth-token TOKEN or ${TOKEN_ENV}")
    env = get_environment(resolve_bench(args.bench, args.benchmark_file))
    if args.export_data:
        from workbench.serve.export import export_data

        path = export_data(env, args.export_data)
        print(f"{READY_PREFIX}wrote {len(env)} rows for ng_collect_rollouts to {path}", flush=True)
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
        if args.export_data:
            print(f"{READY_PREFIX}{reason}; serve it with --sandbox docker|local", flush=True)
            return 0
        raise UsageError(f"{reason}: serve it with --sandbox docker|local (--export-data DIR alone writes its rows)")

    from workbench.serve.app import create_app
    from workbench.serve.runner import serve

    app = create_app(env, gym_compat=args.gym_compat, auth_token=token, max_body_bytes=args.max_body_bytes,
                     sandboxes=sandboxes)
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    mode = (", gym-compat" if args.gym_compat else "") + (f", {sandboxes.backend} sandboxes" if sandboxes else "")
    auth = ", token required" if token else ""

    def ready(url: str) -> None:
        print(f"{READY_PREFIX}{env.name} ({len(env)} problems) at {url}{mode}{auth}", flush=True)

    with sock:
        serve(app, sock, ready)
    return 0
