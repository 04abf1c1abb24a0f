"""``python -m workbench.services.launch SPEC.json NAME HOST PORT``: become service NAME's server (``exec``).

A SLURM job starts the servers placed on node pools with this (docs/slurm.md): the argv is built from the same
spec the shards run, so the script holds no command line with a secret in it — a server's ``env`` and
``--api-key`` reach it from the job's environment (``NEL_SERVER_SECRETS_<NAME>``, as they reach a worker).
A server given a secret is not ``exec``ed but run as a child whose output is relayed with the secret replaced
(vLLM prints its arguments, ``--api-key`` among them, and the log is a file on the shared filesystem); SIGTERM
is passed on to it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping

from workbench.errors import UsageError
from workbench.secrets import redact_bytes, redact_text, register_secret
from workbench.services.commands import require_program, server_argv
from workbench.spec.io import read_spec
from workbench.spec.models import ServerService, redact_args


def launch(spec_path: str, name: str, host: str, port: int) -> None:
    """Replace this process with ``name``'s server listening on ``host:port`` (its env added to ours)."""
    spec = read_spec(spec_path)
    service = spec.services.get(name)
    if not isinstance(service, ServerService):
        raise UsageError(f"{spec_path}: services.{name}: not a server nel starts (type vllm|sglang|trt_llm|command)")
    require_program(name, service)
    argv = server_argv(service, port, host)
    for secret in service.secrets():
        register_secret(secret)
    print(f"nel: services.{name}: {redact_text(' '.join(redact_args(argv)))}", file=sys.stderr, flush=True)
    env = {**os.environ, **service.env}
    try:
        if not service.secrets():
            os.execvpe(argv[0], argv, env)
        sys.exit(_relay(argv, env))
    except OSError as exc:
        raise UsageError(f"services.{name}: cannot start {argv[0]!r}: {exc.strerror or exc}") from None


def _relay(argv: list[str], env: Mapping[str, str]) -> int:
    """Run the server, copy its output line by line with every secret replaced; its exit code."""
    child = subprocess.Popen(argv, env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda received, _frame: child.send_signal(received))
    assert child.stdout is not None
    out = sys.stdout.buffer
    for line in child.stdout:
        out.write(redact_bytes(line))
        out.flush()
    return child.wait()


def main(argv: list[str]) -> int:
    if len(argv) != 4 or not argv[3].isdigit():
        print("usage: python -m workbench.services.launch SPEC.json NAME HOST PORT", file=sys.stderr)
        return 2
    try:
        launch(argv[0], argv[1], argv[2], int(argv[3]))
    except UsageError as exc:
        print(f"nel: {exc}", file=sys.stderr)
        return 2
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
