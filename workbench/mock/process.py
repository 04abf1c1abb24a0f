"""Run the mock model as a subprocess for the length of a ``with`` block.

``mock_model()`` is what the demo command and the test suite use: it starts
``python -m workbench.mock --port 0 ...``, waits for the ready line and
yields where to reach it; leaving the block stops the server (SIGTERM, then
SIGKILL after ``STOP_GRACE_S``).
"""

from __future__ import annotations

import os
import re
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from workbench.child_process import stderr_tail, stop
from workbench.errors import RunFailed
from workbench.mock.cli import READY_PREFIX, config_to_argv
from workbench.mock.config import MockConfig

READY_TIMEOUT_S = 15.0
_READY = re.compile(re.escape(READY_PREFIX) + r"(http://\S+:(\d+)/v1) \(skill-seed -?\d+\)")
_SOURCE_ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True, slots=True)
class MockHandle:
    """A running mock model: its OpenAI base URL (``http://HOST:PORT/v1``), port and process."""

    base_url: str
    port: int
    process: subprocess.Popen[bytes]
    config: MockConfig


@contextmanager
def mock_model(*, own_session: bool = False, **config_overrides: Any) -> Iterator[MockHandle]:
    """Start the mock model with ``MockConfig(**config_overrides)`` and stop it on exit.

    ``own_session`` keeps it out of the caller's process group, so a signal meant for the group (a
    background run being stopped) does not take the model away under steps still in flight.

    ``port`` defaults to 0 (a free port). Raises ``UsageError`` for invalid
    settings and ``RunFailed`` (with the server's stderr) if it exits or stays
    silent for ``READY_TIMEOUT_S`` before announcing itself.
    """
    if isinstance(config_overrides.get("faults"), str):
        config_overrides["faults"] = tuple(f for f in config_overrides["faults"].split(",") if f)
    config = MockConfig(**config_overrides)
    config.validate()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_SOURCE_ROOT), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "workbench.mock", *config_to_argv(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            start_new_session=own_session,
        )
        try:
            assert process.stdout is not None
            line = _read_ready_line(process, process.stdout, stderr)
            match = _READY.search(line)
            if match is None:
                raise RunFailed(f"mock model printed an unexpected first line: {line!r}")
            yield MockHandle(base_url=match[1], port=int(match[2]), process=process, config=config)
        finally:
            stop(process)


def _read_ready_line(process: subprocess.Popen[bytes], stdout: IO[bytes], stderr: IO[bytes]) -> str:
    deadline = time.monotonic() + READY_TIMEOUT_S
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(stdout, selectors.EVENT_READ)
        while b"\n" not in buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RunFailed(
                    f"mock model did not announce itself within {READY_TIMEOUT_S:g} s{stderr_tail(stderr)}"
                )
            if not selector.select(left):
                continue
            chunk = os.read(stdout.fileno(), 4096)
            if not chunk:
                process.wait()
                code = process.returncode
                raise RunFailed(
                    f"mock model exited with code {code} before it was ready{stderr_tail(stderr)}"
                )
            buffer += chunk
    return buffer.split(b"\n", 1)[0].decode("utf-8", "replace")
