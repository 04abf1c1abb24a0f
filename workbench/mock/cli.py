"""``nel mock`` / ``python -m workbench.mock``: run the built-in mock model as a server.

Once it accepts requests it prints exactly one line to stdout,
``nel mock model listening on http://HOST:PORT/v1 (skill-seed S)``, and serves
until SIGINT or SIGTERM (exit 0). Bad flags, or a port it cannot bind, exit 2
with a one-line message on stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import signal
import sys
from typing import NoReturn

from workbench.errors import NelError, UsageError
from workbench.mock.config import FAULT_KINDS, MockConfig

READY_PREFIX = "nel mock model listening on "


def ready_line(host: str, port: int, skill_seed: int) -> str:
    """The line printed once the server accepts requests (``mock_model()`` parses it)."""
    shown = f"[{host}]" if ":" in host else host
    return f"{READY_PREFIX}http://{shown}:{port}/v1 (skill-seed {skill_seed})"


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the mock model's flags (defaults from ``MockConfig``) to ``parser``."""
    d = MockConfig()
    add = parser.add_argument
    add("--host", default=d.host, help=f"address to listen on (default {d.host})")
    add("--port", type=int, default=d.port, help="port to listen on; 0 picks a free one (default 0)")
    add("--latency-ms", type=float, default=d.latency_ms, help="delay before each model reply, in ms")
    add(
        "--jitter", type=float, default=d.jitter_ms, metavar="MS", help="uniform ± jitter on the delay, in ms"
    )
    add("--fail-rate", type=float, default=d.fail_rate, help="probability that a model request gets a fault")
    add(
        "--faults",
        type=_comma_list,
        default=d.faults,
        help=f"comma-separated faults to inject (default: all of {','.join(FAULT_KINDS)})",
    )
    add("--fault-seed", type=int, default=d.fault_seed, help="seed of the fault and jitter draws")
    add("--skill-seed", type=int, default=d.skill_seed, help="seed of the per-task skill profile")
    add("--retry-after", type=int, default=d.retry_after_s, metavar="SECONDS", help="Retry-After of a 429")
    add(
        "--hang-seconds", type=float, default=d.hang_s, help="how long a 'timeout' fault hangs before closing"
    )
    add("--context-window", type=int, default=d.context_window, help="prompt tokens above this get a 400")
    add("--model-name", default=d.model_name, help="model id listed by GET /v1/models")
    add(
        "--benchmarks",
        type=_comma_list,
        default=None,
        help="comma-separated built-in benchmarks to answer (default: all)",
    )
    add(
        "--echo-headers",
        action="store_true",
        help="test feature: reply with the request line and headers (API key included); a 404 quotes the query",
    )


def config_from_args(args: argparse.Namespace) -> MockConfig:
    """The validated ``MockConfig`` the parsed flags describe (``UsageError`` if invalid)."""
    config = MockConfig(
        host=args.host,
        port=args.port,
        latency_ms=args.latency_ms,
        jitter_ms=args.jitter,
        fail_rate=args.fail_rate,
        faults=tuple(args.faults),
        fault_seed=args.fault_seed,
        skill_seed=args.skill_seed,
        retry_after_s=args.retry_after,
        hang_s=args.hang_seconds,
        context_window=args.context_window,
        model_name=args.model_name,
        benchmarks=args.benchmarks,
        echo_headers=args.echo_headers,
    )
    config.validate()
    return config


_FLAGS = {
    "host": "--host",
    "port": "--port",
    "latency_ms": "--latency-ms",
    "jitter_ms": "--jitter",
    "fail_rate": "--fail-rate",
    "faults": "--faults",
    "fault_seed": "--fault-seed",
    "skill_seed": "--skill-seed",
    "retry_after_s": "--retry-after",
    "hang_s": "--hang-seconds",
    "context_window": "--context-window",
    "model_name": "--model-name",
    "benchmarks": "--benchmarks",
    "echo_headers": "--echo-headers",
}


def config_to_argv(config: MockConfig) -> list[str]:
    """The flags that reproduce ``config`` (the inverse of ``config_from_args``)."""
    argv: list[str] = []
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if value is None or value is False:
            continue
        if value is True:  # a switch: present or absent
            argv.append(_FLAGS[field.name])
            continue
        text = ",".join(value) if isinstance(value, tuple) else str(value)
        argv.append(f"{_FLAGS[field.name]}={text}")
    return argv


def run(args: argparse.Namespace) -> int:
    """Run the server the parsed flags describe; the exit code (errors are printed on one line)."""
    try:
        config = config_from_args(args)
        return _serve(config)
    except NelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


def _serve(config: MockConfig) -> int:
    from workbench.mock.answers import AnswerIndex
    from workbench.mock.server import bind_socket, serve_forever

    try:
        sock = bind_socket(config.host, config.port)
    except OSError as exc:
        reason = "address already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        raise UsageError(f"mock model: cannot listen on {config.host}:{config.port}: {reason}") from None
    with sock:
        index = AnswerIndex.load(config.benchmarks)
        port = sock.getsockname()[1]

        def announce() -> None:
            print(ready_line(config.host, port, config.skill_seed), flush=True)

        serve_forever(config, index, sock, announce)
    return 0


class _OneLineParser(argparse.ArgumentParser):
    """Bad flags: one line on stderr, exit 2 (argparse would also print the usage)."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and serve until SIGINT/SIGTERM; returns the exit code."""
    # A SIGTERM while the answer key loads should still end the process quietly with 0.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    parser = _OneLineParser(prog="nel mock", description="Serve the built-in OpenAI-compatible mock model.")
    add_arguments(parser)
    return run(parser.parse_args(argv))
